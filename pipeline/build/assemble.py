"""Assembly: sampling, shards and card from the scenes' result files, and the build's reports.

Reads only result files, in sorted order, so the output does not depend on which scene
finished first: a build killed midway and rerun writes byte-identical shards. The dataset is
written into a staging folder and swapped in whole (`pipeline.build.output`); a build that
selected nothing writes nothing. `require_complete` is the runners' last word: scenes that
failed after their retries, or an empty selection, make the build an `IncompleteBuild`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

from numerical3d.errors import EXIT_INCOMPLETE, Numerical3DError
from numerical3d.pipeline.build.cache import frames_dir, read_result
from numerical3d.pipeline.build.output import commit, fresh_staging
from numerical3d.pipeline.build.plan import BuildPlan
from numerical3d.pipeline.build.scenes import SceneOutcome
from numerical3d.pipeline.build.stats import DropStats
from numerical3d.pipeline.frames import FrameStore
from numerical3d.pipeline.ingest import read_corpus
from numerical3d.pipeline.ingest.core import IngestReport
from numerical3d.pipeline.items import Item, frame_id
from numerical3d.pipeline.layout import CARD, MANIFEST
from numerical3d.pipeline.sampling import sample
from numerical3d.pipeline.scene_geometry import SceneGeometry
from numerical3d.pipeline.shortfall import explain_shortfalls, headline
from numerical3d.pipeline.templating import templates
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
    dropped: list[dict[str, Any]]  # each frame, depth map or mesh an adapter left out: source, scene_id, what, reason, detail (its file first)
    candidates: int
    selected: int
    card: str | None
    manifest: str | None
    sampling_report: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    corpora: list[dict[str, Any]] = field(default_factory=list)  # each corpus file's ingest report (rows left out by line)
    site: dict[str, Any] | None = None  # the browsable site's report, when the build wrote one (`build --site`)

    def to_dict(self) -> dict[str, Any]:
        """As JSON values; `site` only when a site was written (the build report is written before it)."""
        d = asdict(self)
        if d["site"] is None:
            del d["site"]
        return d

    def failed(self) -> list[str]:
        """`source/scene_id` of each scene that failed after its retries."""
        return [f"{r['source']}/{r['scene_id']}" for r in self.quarantine if r["status"] == "failed"]

    def bugs(self) -> list[str]:
        """`source/scene_id` of each scene that failed on a bug in the code, not on its data."""
        return [f"{r['source']}/{r['scene_id']}" for r in self.quarantine if r.get("bug")]


# Adapter drops of one file each (named in the build report); objects and labels are counted only.
FILE_DROPS = ("frame", "depth", "mesh", "file")  # "file": a stray link or special file skipped


@dataclass
class SceneResults:
    """What assembly takes from the scenes' result files besides their items, gathered while the items
    stream to sampling, so that each file is parsed once (at 1,000 scenes a parse is seconds)."""

    drops: DropStats = field(default_factory=DropStats)
    dropped: list[dict[str, Any]] = field(default_factory=list)  # the adapters' file drops, named
    candidates: int = 0
    geometry: dict[tuple[str, str], SceneGeometry] = field(default_factory=dict)
    frames: dict[str, tuple[Path, dict[str, Any]]] = field(default_factory=dict)  # frame id -> (JPEG, meta)

    def items(self, result_paths: list[str]) -> Iterator[Item]:
        """Items of every completed scene, in the fixed order of the sorted result paths."""
        for path in result_paths:
            header = read_result(path)
            self.note(path, header)
            for d in header["items"]:
                yield Item.from_dict(d)

    def note(self, path: str, header: dict[str, Any]) -> None:
        """Take one parsed result file's drops, candidate count, geometry and frames."""
        self.drops += DropStats.from_rows(header["drops"])
        self.dropped += [{"source": header["source"], "scene_id": header["scene_id"], "what": d["what"],
                          "reason": d["reason"], "detail": d["detail"]}
                         for d in header.get("dropped", []) if d["what"] in FILE_DROPS]
        self.candidates += len(header["items"])
        if header.get("geometry"):
            self.geometry[(header["source"], header["scene_id"])] = SceneGeometry.from_dict(header["geometry"])
        for index, entry in header.get("frames", {}).items():
            self.frames[frame_id(header["source"], header["scene_id"], int(index))] = (frames_dir(path) / entry["file"],
                                                                                      entry)


def corpus_items(plan: BuildPlan, reports: list[IngestReport]) -> Iterator[Item]:
    """The items of the plan's corpora, in plan order, worded by the plan's templates; each corpus
    file's report lands in `reports`."""
    tpl = templates(plan.questions.get("templates_dir"))
    for entry in plan.corpora:
        yield from read_corpus(entry.name, entry.path, reports, tpl=tpl, **entry.options())


def corpus_report(report: IngestReport) -> dict[str, Any]:
    """A corpus file's report for the build report: counts, and the rows left out with line and reason."""
    d = report.to_dict()
    d.pop("per_type")
    return d


def iter_candidates(result_paths: list[str]) -> Iterator[Item]:
    """Items of every completed scene, in the fixed order of the sorted result paths."""
    return SceneResults().items(result_paths)


def exported_frames(result_paths: list[str]) -> FrameStore:
    """The frames the scenes exported next to their result files, by frame id."""
    results = SceneResults()
    for path in result_paths:
        results.note(path, read_result(path))
    return FrameStore(results.frames)


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
    results = SceneResults()
    ingested: list[IngestReport] = []
    candidates_in = chain(results.items(paths), corpus_items(plan, ingested))
    # reads every result file and corpus; the blind diagnostics fit side by side on this machine's workers
    selection, report = sample(candidates_in, config, plan.seed, workers=plan.local_workers())
    drops, dropped, geometry = results.drops, results.dropped, results.geometry
    explain_shortfalls(report, drops.to_rows())
    candidates = results.candidates + sum(sum(r.kept.values()) for r in ingested)
    frames = FrameStore(results.frames) if config.media.mode == "embed" else None
    records = quarantine_records(outcomes)
    if len(selection):
        staging = fresh_staging(out)
        try:
            write_dataset(selection, frames, staging, config, seed=plan.seed, report=report, code=plan.code(),
                          scenes=geometry, quarantine=records)
        except Exception as exc:  # a full disk gets its space back; the previous dataset was never touched
            shutil.rmtree(staging, ignore_errors=True)
            # pyarrow's write errors name no file, the others a file of the staging folder just removed
            if isinstance(exc, OSError) and (exc.filename is None or Path(exc.filename).is_relative_to(staging)):
                problem = os.strerror(exc.errno) if exc.errno else str(exc)
                raise OSError(exc.errno, f"{problem} while writing the new dataset (nothing of it was kept; "
                                         "the previous one is untouched)", str(out)) from exc
            raise
        commit(staging, out)
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
        dropped=dropped,
        candidates=candidates,
        selected=len(selection),
        card=str(out / CARD) if len(selection) and (out / CARD).is_file() else None,
        manifest=str(out / MANIFEST) if len(selection) and (out / MANIFEST).is_file() else None,
        sampling_report=jsonable(report),
        seconds={"assemble": round(time.perf_counter() - t0, 3)},
        corpora=[corpus_report(r) for r in ingested],
    )
    write_reports(summary, work)
    return summary


class IncompleteBuild(RuntimeError, Numerical3DError):
    """The build ran but is not a success: scenes failed after their retries (the dataset is
    written and its card and manifest list them), or nothing was selected (nothing written).
    `summary` is the build's summary."""

    exit_code = EXIT_INCOMPLETE

    def __init__(self, message: str, summary: BuildSummary):
        super().__init__(message, summary)  # both in args: the exception survives pickling

    @property
    def summary(self) -> BuildSummary:
        return self.args[1]

    def __str__(self) -> str:
        return self.args[0]

    def __repr__(self) -> str:  # what Prefect logs for a failed run: the message, not the whole summary
        return f"IncompleteBuild({self.args[0]!r})"


def require_complete(summary: BuildSummary, allow_partial: bool) -> None:
    """Raise `IncompleteBuild` unless every scene was built or quarantined for its data (failed
    scenes are let through by the plan's `allow_partial`) and at least one item was selected."""
    failed = summary.failed()
    if summary.selected == 0:
        why = f"; {len(failed)} scene(s) failed: {', '.join(failed[:5])}" if failed else ""
        short = headline(summary.sampling_report, summary.drops) if summary.sampling_report else None
        why += f"; {short}" if short else ""
        raise IncompleteBuild(f"the build selected 0 items, so nothing was written to {summary.out}{why} "
                              f"(reports: {summary.work})", summary)
    if failed and not allow_partial:
        listed = ", ".join(failed[:5]) + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
        raise IncompleteBuild(f"{len(failed)} scene(s) failed after their retries: {listed}; {summary.out} was "
                              "written without them (its card and manifest list them). Run the build again to "
                              "retry them, or set allow_partial: true in the plan", summary)


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
