"""Assembly: sampling, shards and card from the scenes' result files, and the build's reports.

Reads only result files, in sorted order, so the output does not depend on which scene
finished first: a build killed midway and rerun writes byte-identical shards.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from numerical3d.pipeline.build.cache import frames_dir, read_result
from numerical3d.pipeline.build.plan import BuildPlan
from numerical3d.pipeline.build.scenes import SceneOutcome
from numerical3d.pipeline.build.stats import DropStats
from numerical3d.pipeline.frames import FrameStore
from numerical3d.pipeline.items import Item, frame_id
from numerical3d.pipeline.layout import CARD, MANIFEST
from numerical3d.pipeline.sampling import sample
from numerical3d.pipeline.scene_geometry import SceneGeometry
from numerical3d.pipeline.writer import write_dataset
from numerical3d.sources.io import atomic_write_text


@dataclass
class BuildSummary:
    """What a build made; written as `build_report.json` in the work folder."""

    out: str
    work: str
    scenes: dict[str, int]  # status -> count
    quarantine: list[dict[str, Any]]
    items_per_source_subtask: dict[str, dict[str, int]]
    drops: list[dict[str, Any]]  # DropStats rows: stage, owner, what, reason, count
    candidates: int
    selected: int
    card: str | None
    manifest: str | None
    sampling_report: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def iter_candidates(result_paths: list[str]) -> Iterator[Item]:
    """Items of every completed scene, in the fixed order of the sorted result paths."""
    for path in result_paths:
        for d in read_result(path)["items"]:
            yield Item.from_dict(d)


def exported_frames(result_paths: list[str]) -> FrameStore:
    """The frames the scenes exported next to their result files, by frame id."""
    frames: dict[str, tuple[Path, dict[str, Any]]] = {}
    for p in result_paths:
        header = read_result(p)
        for index, entry in header.get("frames", {}).items():
            frames[frame_id(header["source"], header["scene_id"], int(index))] = (frames_dir(p) / entry["file"], entry)
    return FrameStore(frames)


def quarantine_records(outcomes: list[SceneOutcome]) -> list[dict[str, Any]]:
    bad = [o for o in outcomes if o.status in ("quarantined", "failed")]
    return [{"source": o.source, "scene_id": o.scene_id, "status": o.status, "reason": o.reason, "bug": o.bug}
            for o in sorted(bad, key=lambda o: (o.source, o.scene_id))]


def quarantine_markdown(records: list[dict[str, Any]]) -> str:
    if not records:
        return "# Quarantine\n\nNo scene was quarantined.\n"
    lines = ["# Quarantine", "", f"{len(records)} scene(s) left out of the build:", "",
             "| source | scene | status | reason |", "|---|---|---|---|"]
    for r in records:
        reason = str(r["reason"]).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r['source']} | {r['scene_id']} | {r['status']} | {reason} |")
    return "\n".join(lines) + "\n"


def assemble(plan: BuildPlan, outcomes: list[SceneOutcome]) -> BuildSummary:
    """Sampling + shards + card over the completed scenes; reports land in the work folder."""
    t0 = time.perf_counter()
    out, work = plan.out_dir(), plan.work_dir()
    config = plan.dataset_config()
    paths = sorted(o.result for o in outcomes if o.status in ("done", "cached") and o.result)
    drops = DropStats()
    candidates = 0
    geometry: dict[tuple[str, str], SceneGeometry] = {}
    for p in paths:
        header = read_result(p)
        drops += DropStats.from_rows(header["drops"])
        candidates += len(header["items"])
        if header.get("geometry"):
            geometry[(header["source"], header["scene_id"])] = SceneGeometry.from_dict(header["geometry"])
    selection, report = sample(iter_candidates(paths), config, plan.seed)
    frames = exported_frames(paths) if config.media.mode == "embed" else None
    records = quarantine_records(outcomes)
    write_dataset(selection, frames, out, config, seed=plan.seed, report=report, code=plan.code(),
                  scenes=geometry, quarantine=records)
    per: dict[str, Counter[str]] = {}
    for it in selection:
        per.setdefault(it.source, Counter())[it.subtask] += 1
    summary = BuildSummary(
        out=str(out),
        work=str(work),
        scenes=dict(sorted(Counter(o.status for o in outcomes).items())),
        quarantine=records,
        items_per_source_subtask={s: dict(sorted(c.items())) for s, c in sorted(per.items())},
        drops=drops.to_rows(),
        candidates=candidates,
        selected=len(selection),
        card=str(out / CARD) if (out / CARD).is_file() else None,
        manifest=str(out / MANIFEST) if (out / MANIFEST).is_file() else None,
        sampling_report=jsonable(report),
        seconds={"assemble": round(time.perf_counter() - t0, 3)},
    )
    write_reports(summary, work)
    return summary


def jsonable(obj: Any) -> Any:
    """A report object as plain JSON values (dataclasses, pydantic models, anything with to_dict)."""
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    return json.loads(json.dumps(obj, default=str))


def write_reports(summary: BuildSummary, work: Path) -> None:
    atomic_write_text(work / "build_report.json", json.dumps(summary.to_dict(), indent=2, sort_keys=True) + "\n")
    atomic_write_text(work / "quarantine.json", json.dumps(summary.quarantine, indent=2) + "\n")
    atomic_write_text(work / "quarantine.md", quarantine_markdown(summary.quarantine))
