"""Benchmark hygiene and splits: both decided per scene, never per item.

The VSI-Bench evaluation scenes (`pipeline/data/vsibench_eval_scenes.tsv`, the project's own copy
of the 288 ids, so a build on any machine can exclude them) never enter any split. A scene is
matched by its id whatever source produced it, because the `vsi-meta` source carries the ids of
ScanNet / ScanNet++ / ARKitScenes scenes; the ids of the three datasets have disjoint forms.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

EVAL_SCENES_FILE = Path(__file__).parent / "data" / "vsibench_eval_scenes.tsv"


def load_scene_list(path: str | Path = EVAL_SCENES_FILE) -> dict[str, str]:
    """Read a `source<TAB>scene_id` list (with header) into {scene_id: source}."""
    path = Path(path)
    try:
        with path.open(newline="") as fh:
            rows = list(csv.reader(fh, delimiter="\t"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read scene list: {exc}") from exc
    if not rows or [c.strip() for c in rows[0][:2]] != ["source", "scene_id"]:
        raise ValueError(f"{path}: expected a header line 'source<TAB>scene_id'")
    out: dict[str, str] = {}
    for n, row in enumerate(rows[1:], start=2):
        if not row or not "".join(row).strip():
            continue
        if len(row) < 2 or not row[1].strip():
            raise ValueError(f"{path}:{n}: expected 'source<TAB>scene_id', got {row!r}")
        out[row[1].strip()] = row[0].strip()
    return out


@dataclass
class Exclusions:
    """The scenes kept out of every split, and a tally of what was kept out."""

    scenes: dict[str, str]  # scene_id -> source of the list it came from
    excluded_items: dict[str, int] = field(default_factory=dict)  # item source -> items dropped
    _seen: dict[str, set[str]] = field(default_factory=dict)  # item source -> scene ids dropped

    @classmethod
    def vsibench(cls, extra_file: str | Path | None = None) -> "Exclusions":
        scenes = load_scene_list(EVAL_SCENES_FILE)
        if extra_file is not None:
            scenes.update(load_scene_list(extra_file))
        return cls(scenes)

    def excludes(self, source: str, scene_id: str) -> bool:
        """True (and counted) when the scene is an evaluation scene."""
        if scene_id not in self.scenes:
            return False
        self.excluded_items[source] = self.excluded_items.get(source, 0) + 1
        self._seen.setdefault(source, set()).add(scene_id)
        return True

    def report(self) -> dict:
        """Per item source: scenes and items excluded, and the listed scene ids that were found."""
        return {
            "listed_scenes": len(self.scenes),
            "per_source": {
                src: {"scenes": len(self._seen[src]), "items": self.excluded_items[src]}
                for src in sorted(self._seen)
            },
            "scene_ids": {src: sorted(ids) for src, ids in sorted(self._seen.items())},
        }


def assign_splits(
    scenes: Iterable[tuple[str, str]], shares: dict[str, float], rng: np.random.Generator
) -> dict[tuple[str, str], str]:
    """Assign each (source, scene_id) to one split, with scene counts proportional to `shares`.

    Scenes are sorted (so input order does not matter), shuffled by `rng`, then cut by
    largest-remainder counts; every split with a share gets at least one scene when
    there are enough scenes.
    """
    ordered = sorted(set(scenes))
    keys = [ordered[i] for i in rng.permutation(len(ordered))]
    names = sorted(shares)
    counts = _largest_remainder(len(keys), [shares[n] for n in names])
    if len(keys) >= len(names):
        for i, c in enumerate(counts):  # take one from the largest split for an empty one
            if c == 0:
                j = max(range(len(counts)), key=lambda j: counts[j])
                counts[j] -= 1
                counts[i] = 1
    out: dict[tuple[str, str], str] = {}
    start = 0
    for name, c in zip(names, counts):
        for key in keys[start : start + c]:
            out[key] = name
        start += c
    return out


def _largest_remainder(total: int, weights: list[float]) -> list[int]:
    """Integer counts summing to `total`, proportional to `weights` (Hamilton's method)."""
    s = sum(weights)
    exact = [total * w / s for w in weights]
    counts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    return counts
