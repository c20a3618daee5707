"""Why candidates and scene parts were left out, as typed, additive stats.

Two places drop things, and both are counted, never silent: a subtask's quality gates drop a
candidate question (`pipeline.questions.gates.DropCounter`), and a source adapter drops a frame,
an object or a label of a scene (`sources.scene.Drop`). Each drop is a `DropKey` (which stage,
whose, what, why) with a count; `DropStats` add up with `+`, per scene and then over the build,
and travel as rows of plain JSON (result files, the build report, the Prefect table), so no
report ever parses a joined string back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from numerical3d.pipeline.questions.gates import DropCounter
from numerical3d.sources.scene import Drop

Stage = Literal["gate", "source"]  # a subtask's quality gate, or a source adapter


@dataclass(frozen=True, order=True)
class DropKey:
    """One kind of drop: the stage, whose it is (subtask or source), what was dropped, and why."""

    stage: Stage
    owner: str  # the subtask (gate) or the source (adapter)
    what: str  # "candidate" for gates; the adapter's own word ("frame", "object", "label")
    reason: str


@dataclass
class DropStats:
    """Counts per `DropKey`; `a + b` adds them (scenes into a build)."""

    counts: Counter[DropKey] = field(default_factory=Counter)

    @classmethod
    def of_scene(cls, gates: DropCounter, source: str, adapter_drops: Iterable[Drop]) -> "DropStats":
        """A scene's drops: its candidates' failed gates and what its adapter left out."""
        counts: Counter[DropKey] = Counter()
        for (subtask, reason), n in gates.drops.items():
            counts[DropKey("gate", subtask, "candidate", reason)] += n
        for d in adapter_drops:
            counts[DropKey("source", source, d.what, d.reason)] += 1
        return cls(counts)

    def __add__(self, other: "DropStats") -> "DropStats":
        return DropStats(self.counts + other.counts)

    def __getitem__(self, key: DropKey) -> int:
        return self.counts.get(key, 0)

    def total(self, stage: Stage | None = None) -> int:
        return sum(n for k, n in self.counts.items() if stage is None or k.stage == stage)

    def to_rows(self) -> list[dict[str, Any]]:
        """Plain JSON rows, one per key, sorted (stable in result files and reports)."""
        return [{"stage": k.stage, "owner": k.owner, "what": k.what, "reason": k.reason, "count": n}
                for k, n in sorted(self.counts.items()) if n]

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]]) -> "DropStats":
        counts: Counter[DropKey] = Counter()
        for r in rows:
            counts[DropKey(r["stage"], r["owner"], r["what"], r["reason"])] += int(r["count"])
        return cls(counts)
