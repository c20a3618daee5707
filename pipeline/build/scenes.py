"""Scene jobs: the inputs (synthetic scenes), one job per scene, and processing one scene.

`process_scene` = load -> check -> candidate items -> frame export, written atomically to the
scene's result file (`pipeline.build.cache`). Three kinds of failure, told apart by type:

- bad data (`is_data_error`: a `SceneError` naming the file, or an OSError of a path itself: a
  missing file, a symbolic link loop, no permission) quarantines the scene, and the verdict is
  cached: the same inputs would fail the same way. The readers open only regular files, so a
  named pipe or a device in place of a scene file is a `SceneError` too, never a hang;
- a transient I/O error (`is_transient`) is raised so that the runner retries it under the
  plan's `RetryPolicy`; a scene still failing after that is a `failed` outcome, not cached;
- anything else is a bug in the code (or a config the plan's validation missed): raised at
  once, never cached, and reported as a bug (`failed_outcome` sets `bug`), so one wrong line
  does not turn every scene into a cached quarantine.

A job carries the `SceneRef` its source listed and the source's options, so a worker loads
exactly that scene without listing the root again.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from numerical3d.pipeline.build.cache import (
    RESULT_SCHEMA,
    discard_partial,
    drop_stale,
    read_result,
    scene_dir,
    scene_key,
    write_result,
)
from numerical3d.pipeline.build.jobs import SceneJob
from numerical3d.pipeline.build.plan import BuildPlan, PlanError, SceneSettings, SyntheticSpec
from numerical3d.pipeline.build.stats import DropStats
from numerical3d.pipeline.frames import export_frames
from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import ProcessedScene
from numerical3d.pipeline.questions.gates import DropCounter
from numerical3d.pipeline.questions.generate import generate_scene
from numerical3d.pipeline.scene_geometry import scene_geometry
from numerical3d.sources import SceneRef, Source, make_source
from numerical3d.sources.io import PATH_ERRNOS, atomic_write_text
from numerical3d.sources.scene import Drop, Scene, SceneError

# OSErrors that will not go away by trying again: the path is wrong, not the disk busy.
PERMANENT_OS_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


def is_path_error(exc: BaseException) -> bool:
    """An OSError of a path itself (missing, a symlink loop, no permission, a device without a
    driver): the same on every try."""
    return isinstance(exc, PERMANENT_OS_ERRORS) or (isinstance(exc, OSError) and exc.errno in PATH_ERRNOS)


def is_data_error(exc: BaseException) -> bool:
    """What a scene's own data can be blamed for: everything else escaping a scene is a bug."""
    return isinstance(exc, SceneError) or is_path_error(exc)

log = logging.getLogger(__name__)


@dataclass
class SceneOutcome:
    """What happened to one scene (small: goes back through the task runner)."""

    source: str
    scene_id: str
    status: Literal["done", "cached", "quarantined", "failed"]
    result: str | None = None  # the result file
    reason: str | None = None
    n_items: int = 0
    bug: bool = False  # failed with an exception the scene's data cannot explain (see the module doc)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def prepare_synthetic(spec: SyntheticSpec, workers: int = 1) -> Path:
    """Generate the synthetic scenes once into the cache (a complete folder appears atomically).

    Builds sharing the cache generate a folder one at a time (an `flock` beside it), so the one
    generating may remove the half folders of a generator that was killed.
    """
    root = spec.resolved_root()
    marker = root / "COMPLETE.json"
    if marker.is_file():
        return root
    from numerical3d.sources.synthetic import write_synthetic_scenes

    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{root.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one generator per folder: another build waits, then finds it done
        if marker.is_file():
            return root
        for stale in root.parent.glob(f".{root.name}.*"):  # the half folder of a generator that was killed
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}."))
        try:
            ids = write_synthetic_scenes(tmp, spec.n_scenes, spec.seed, workers=workers, **spec.generator_kwargs())
            atomic_write_text(tmp / "COMPLETE.json", json.dumps({"scenes": sorted(ids), **spec.model_dump(mode="json")},
                                                                sort_keys=True))
            os.replace(tmp, root)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return root


def enumerate_plan(plan: BuildPlan) -> list[SceneJob]:
    """One job per scene of every configured source, each root listed once, sorted by scene id.

    A source root that does not exist or cannot be listed raises SceneError; one without a
    single scene raises PlanError with the layout its adapter expects, and so does a scene id that
    two roots of one source both hold (their results and items would share one name).
    """
    jobs: list[SceneJob] = []
    for i, entry in enumerate(plan.all_sources()):
        source = make_source(entry.name, **entry.options)
        refs = source.list_scenes(entry.root)
        if not refs:
            raise PlanError(f"sources[{i}] ({entry.name}): no scenes under {entry.root}; expected {source.description}")
        jobs += [SceneJob(ref, entry.options) for ref in refs]
    seen: dict[tuple[str, str], str] = {}
    for job in jobs:  # results, frames and item ids are keyed by (source, scene id)
        first = seen.setdefault((job.ref.source, job.ref.scene_id), job.ref.path)
        if first != job.ref.path:
            raise PlanError(f"scene {job.ref.source}/{job.ref.scene_id} is in two roots of the plan ({first} and "
                            f"{job.ref.path}); give each root its own scenes")
    return sorted(jobs, key=lambda j: (j.ref.scene_id, j.ref.path))


def input_bytes(path: str | Path) -> int:
    """Size of the files directly in a scene's folder (mesh, .sens stream, ...), or of its file.

    A cheap estimate of the scene's cost, taken in the flow process before anything is
    submitted: frame folders (thousands of files per scan) are not walked. An entry that cannot
    be read (a symbolic link loop, no permission) counts 0 here: it is its scene's problem,
    reported when that scene is loaded, and must not stop the build before any scene runs.
    """
    p = Path(path)
    try:
        if p.is_file():
            return p.stat().st_size
        if not p.is_dir():
            return 0
        total = 0
        with os.scandir(p) as entries:
            for e in entries:
                try:
                    if e.is_file():
                        total += e.stat().st_size
                except OSError:
                    continue
        return total
    except OSError:
        return 0


def largest_first(jobs: list[SceneJob]) -> list[SceneJob]:
    """Jobs in submission order: biggest inputs first, so the slowest scenes do not start last
    and leave the other workers idle at the end (ties by scene id, so the order is fixed)."""
    return sorted(jobs, key=lambda j: (-input_bytes(j.ref.path), j.ref.source, j.ref.scene_id))


def load_scene(source: Source, ref: SceneRef) -> Scene:
    """The scene a ref points at, checked for what its source promises (raises SceneError)."""
    scene = source.load(ref)
    where = scene.meta.get("scene_dir", scene.scene_id)
    if any(f.load_depth is not None for f in scene.frames):  # visibility reads every used frame's depth
        lacking = [f for f in scene.frames if f.load_depth is None]
        scene.frames = [f for f in scene.frames if f.load_depth is not None]
        scene.drops += [Drop("frame", "no depth map (the scene's other frames have one)", f.depth_ref or f.image_ref)
                        for f in lacking]
    if source.has_frames and not scene.frames:
        dropped = Counter(d.reason for d in scene.drops if d.what == "frame")
        detail = ", ".join(f"{n} {r}" for r, n in sorted(dropped.items())) or "none found"
        raise SceneError(where, f"no usable camera frames (dropped: {detail})")
    if not scene.objects:
        raise SceneError(where, "no annotated objects")
    return scene


def generate_items(scene: Scene | ProcessedScene, settings: SceneSettings) -> tuple[list[Item], DropStats]:
    """Candidate items of one scene, and its drops (failed quality gates, the adapter's drops).

    A `ProcessedScene` brings the facts the scene stage reuses afterwards (the floor polygon).

    The generators seed themselves from (seed, source, scene, subtask), so a scene's items do
    not depend on which other scenes run or in which order.
    """
    gates = DropCounter()
    items = generate_scene(scene, settings.question_config, gates)
    raw = scene.scene if isinstance(scene, ProcessedScene) else scene
    return items, DropStats.of_scene(gates, raw.source, raw.drops)


def cached_outcome(job: SceneJob, settings: SceneSettings, work: Path) -> SceneOutcome | str:
    """The scene's outcome when it needs no work (its result file exists, or its inputs cannot
    even be fingerprinted: quarantined, uncached), else its cache key.

    Cheap with `fingerprint: stat`, so a runner can ask before it ships a scene anywhere.
    """
    t0 = time.perf_counter()
    ref = job.ref
    try:
        key = scene_key(job, settings)
    except OSError as exc:  # an input that cannot even be fingerprinted: no key, so nothing to cache
        if not is_path_error(exc):
            raise
        return SceneOutcome(ref.source, ref.scene_id, "quarantined", None, reason(exc), seconds=time.perf_counter() - t0)
    folder = scene_dir(work, job)
    path = folder / f"{key}.json"
    if not path.is_file():
        return key
    drop_stale(folder, key)  # finishes a sweep an earlier build was killed in
    header = read_result(path)
    return SceneOutcome(ref.source, ref.scene_id, "cached" if header["status"] == "ok" else "quarantined",
                        str(path), header.get("reason"), len(header.get("items", [])),
                        seconds=time.perf_counter() - t0)


def process_scene(job: SceneJob, settings: SceneSettings, work: Path) -> SceneOutcome:
    """Load -> check -> candidate items -> frames for one scene, cached by its key.

    `settings` (`BuildPlan.scene`) is all of the plan a scene sees, and what its key hashes.

    Returns quickly when the result file exists. Bad data (`is_data_error`) quarantines the
    scene (cached); anything else propagates: transient OSErrors for the runner to retry with
    backoff, any other exception as a bug (`failed_outcome`).
    """
    t0 = time.perf_counter()
    ref = job.ref
    known = cached_outcome(job, settings, work)
    if isinstance(known, SceneOutcome):
        return known
    key, folder = known, scene_dir(work, job)
    discard_partial(folder, key)  # a killed earlier try of this scene
    base = {"schema": RESULT_SCHEMA, "key": key, "source": ref.source, "scene_id": ref.scene_id, "path": ref.path}
    try:
        scene = load_scene(job.source(), ref)
        facts = ProcessedScene(scene, settings.question_config.ignore_labels)
        items, drops = generate_items(facts, settings)
        frames: dict[str, dict[str, Any]] = {}
        indices = sorted({i for it in items for i in it.frame_indices})
        if settings.media_mode == "embed":
            frames = export_frames(scene, indices, folder / f"{key}.frames", settings.longest_side, settings.jpeg_quality)
        geometry = scene_geometry(scene, indices, facts.floor_or_none()).to_dict()
    except (SceneError, OSError) as exc:
        if not is_data_error(exc):
            discard_partial(folder, key)  # a full disk or a bug: no half-exported frames stay behind
            raise
        return _quarantine(folder, key, base, reason(exc), t0)
    except BaseException:
        discard_partial(folder, key)
        raise
    payload = {**base, "status": "ok", "reason": None, "drops": drops.to_rows(),
               "dropped": [{"what": d.what, "reason": d.reason, "detail": d.detail} for d in scene.drops],
               "frames": frames, "geometry": geometry, "items": [it.fields() for it in items]}
    try:
        result = write_result(folder, key, payload)
    except BaseException:
        discard_partial(folder, key)
        raise
    return SceneOutcome(ref.source, ref.scene_id, "done", str(result), None, len(items), seconds=time.perf_counter() - t0)


def reason(exc: BaseException) -> str:
    """One line for a report: the file and problem of a SceneError or of a path's OSError, else
    the exception."""
    if isinstance(exc, SceneError):
        return f"{exc.path}: {exc.problem}"
    if is_path_error(exc) and exc.filename:
        problem = "symbolic link loop" if exc.errno == errno.ELOOP else (exc.strerror or type(exc).__name__)
        return f"{exc.filename}: {problem}"
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{exc.filename or 'a file of the work folder'}: {exc.strerror}{free_space(exc.filename)}"
    return f"{type(exc).__name__}: {exc}"


def free_space(path: str | Path | None) -> str:
    """`" (N MB free on FOLDER)"` for the nearest existing folder of `path`, for a disk-full message."""
    if not path:
        return ""
    folder = Path(path)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return ""
    return f" ({free / 1e6:.1f} MB free on {folder})"


def _quarantine(folder: Path, key: str, base: dict, why: str, t0: float) -> SceneOutcome:
    payload = {**base, "status": "quarantined", "reason": why, "drops": [], "dropped": [], "frames": {}, "items": []}
    result = write_result(folder, key, payload)
    return SceneOutcome(base["source"], base["scene_id"], "quarantined", str(result), why,
                        seconds=time.perf_counter() - t0)


def is_transient(exc: BaseException) -> bool:
    """Worth another try: an I/O error of the disk (busy, stalled NFS), not of a path."""
    return isinstance(exc, OSError) and not is_path_error(exc)


def failed_outcome(job: SceneJob, exc: BaseException | str, attempts: int) -> SceneOutcome:
    """A scene that raised instead of returning an outcome: left out of this build, not cached.

    A transient error still failing after its retries is the environment's; any other exception
    is a bug (the scene's data errors never get here), logged with its traceback and flagged.
    """
    why = exc if isinstance(exc, str) else reason(exc)
    if isinstance(exc, BaseException) and not is_transient(exc):
        log.error("bug while processing scene %s", job.name, exc_info=exc)
        return SceneOutcome(job.ref.source, job.ref.scene_id, "failed", None,
                            f"bug (not a data error, not cached): {why}{_where(exc)}", bug=True)
    return SceneOutcome(job.ref.source, job.ref.scene_id, "failed", None, f"failed after {attempts} attempts: {why}")


def _where(exc: BaseException) -> str:
    """` at file:line` of the innermost frame the exception passed through."""
    tb = exc.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    return f" at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
