"""Why a subtask fell short of its quota, in the words of the stages before sampling.

The sampler sees only the candidates that reached it, so its shortfall line can say "only 0
candidates" but not why: a source of boxes alone has no frames for camera_distance, its scenes may
all be VSI-Bench evaluation scenes, a scene's objects may never show well enough to be named.
The scenes' drop counts and the sampler's exclusions know; `explain_shortfalls` adds them to each
shortfall line of the report, so a real source that cannot fill a quota says so with the reason;
`headline` sums them up in one sentence, which the build prints (and puts in its error when nothing
was selected) instead of leaving it to the report file.
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


def headline(report: dict[str, Any], drops: Iterable[dict[str, Any]]) -> str | None:
    """Why a build delivered less than it was asked, in one sentence: the evaluation scenes excluded per
    source, the subtasks a box-only source cannot ask, and the subtasks short of their quotas; None
    when the total and every quota were met."""
    asked, got = int(report.get("total_requested", 0)), int(report.get("total_selected", 0))
    below = {name: sub for name, sub in report.get("subtasks", {}).items() if sub.get("selected", 0) < sub.get("quota", 0)}
    if got >= asked and not below:
        return None
    parts = [f"selected {got} of {asked} items"]
    excluded = report.get("excluded", {}).get("per_source", {})
    if excluded:
        parts.append("excluded as VSI-Bench evaluation scenes: " + ", ".join(
            f"{src} {v['scenes']} scenes / {v['items']} candidates" for src, v in sorted(excluded.items())))
    frameless = sorted({str(r["owner"]) for r in drops if r.get("reason") == "source_has_no_frames"})
    if frameless:
        parts.append(f"{len(frameless)} subtasks need frames the sources do not have ({', '.join(frameless)})")
    short = {name: sub for name, sub in below.items() if name not in frameless}
    if short:
        parts.append("short of quota: " + ", ".join(f"{n} {s['selected']}/{s['quota']}" for n, s in sorted(short.items())))
    return "; ".join(parts) + " (each subtask's cause: the report's warnings)"
