"""Why a subtask fell short of its quota, in the words of the stages before sampling.

The sampler sees only the candidates that reached it, so its shortfall line can say "only 0
candidates" but not why: a source of boxes alone has no frames for camera_distance, its scenes may
all be VSI-Bench evaluation scenes, a scene's objects may never show well enough to be named.
The scenes' drop counts and the sampler's exclusions know; `explain_shortfalls` adds them to each
shortfall line of the report, so a real source that cannot fill a quota says so with the reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from numerical3d.pipeline.sampling import SamplingReport

TOP_REASONS = 3  # the largest generation drops named per subtask
PER_SCENE = frozenset({"source_has_no_frames"})  # counted once per scene, not per candidate
NOT_A_LOSS = frozenset({"count_below_min"})  # a label seen once is no count question, nothing was lost


def generation_causes(drops: Iterable[dict[str, Any]]) -> dict[str, list[str]]:
    """Per subtask, its largest question-generation drops as phrases ('source_has_no_frames in 50
    scenes', 'object_not_visible: 57 candidates'), largest first."""
    per: dict[str, Counter[str]] = {}
    for row in drops:
        if row.get("stage") != "gate" or row.get("reason") in NOT_A_LOSS:
            continue
        per.setdefault(str(row["owner"]), Counter())[str(row["reason"])] += int(row["count"])
    return {owner: [f"{r} in {n} scenes" if r in PER_SCENE else f"{r}: {n} candidates"
                    for r, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_REASONS]]
            for owner, c in per.items()}


def explain_shortfalls(report: SamplingReport, drops: Iterable[dict[str, Any]]) -> None:
    """Append to the report's shortfall lines what generation dropped for the subtask, and the
    evaluation scenes excluded, when any were (in place)."""
    causes = generation_causes(drops)
    excluded = ", ".join(f"{s}: {v['scenes']} scenes / {v['items']} candidates"
                         for s, v in report.excluded.get("per_source", {}).items())
    for k, line in enumerate(report.warnings):
        for name, sub in report.subtasks.items():
            if sub.shortfall and line.startswith(f"subtask {name}: quota {sub.quota} not met"):
                extra = [f"generation dropped {'; '.join(causes[name])}"] if name in causes else []
                if excluded:
                    extra.append(f"excluded as VSI-Bench evaluation scenes ({excluded})")
                if not causes.get(name) and not excluded and not sub.candidates:
                    extra.append("no scene gave a candidate")
                report.warnings[k] = line + "".join(f"; {e}" for e in extra)
