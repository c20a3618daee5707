"""The build's task logic as plain functions; `flows.py` wraps them in Prefect tasks.

Stages:
1. `resolve_plan` reads a build plan (preset and/or YAML file, plus overrides): the sources
   and their roots, the seed, the runner, the question config, and the dataset config
   (`pipeline.config`) that drives assembly.
2. `prepare_synthetic` writes synthetic scenes into a cache folder when the plan asks for them.
3. `enumerate_scenes` lists one `SceneJob` (paths and ids only) per scene of every source.
4. `process_scene` = load -> geometry -> candidate items, written atomically to a per-scene
   result file whose name is a hash of the scene's input files, the per-scene config and the
   code version. The result file is the completion marker: a rerun finds it and skips the scene.
   A scene whose data is bad is recorded as quarantined (also cached: the same bad input gives
   the same verdict); transient I/O errors (`OSError`) are raised so the caller retries them.
5. `assemble` = sampling + shards + card, reading only result files.

Everything here is deterministic for a given plan and seed, whatever the order in which the
scenes finish, so a build killed midway and rerun writes byte-identical shards.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pipeline.items import Item
from pipeline.runners import RunnerConfig
from sources.scene import Scene, SceneError

RESULT_SCHEMA = 1
CACHE_ENV = "NUMERICAL3D_CACHE"
BUILD_PRESETS_DIR = Path(__file__).parent / "build_presets"
# Sources whose scenes come with camera frames; a scene of theirs without any usable frame is bad.
FRAME_SOURCES = frozenset({"scannet", "synthetic", "scannetpp", "arkitscenes"})
# OSErrors that will not go away by trying again: the data is missing, not the disk busy.
PERMANENT_OS_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError)


class PlanError(ValueError):
    """A build plan cannot be read or is invalid; names the file and the problem."""


def cache_root() -> Path:
    """Where generated inputs (synthetic scenes) live: `$NUMERICAL3D_CACHE` or ~/.cache/numerical3d."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "numerical3d"


# --------------------------------------------------------------------------------------------
# The plan


class SourceEntry(BaseModel):
    """One configured source tree."""

    model_config = ConfigDict(extra="forbid")

    name: Literal["scannet", "synthetic", "scannetpp", "arkitscenes", "vsi-meta"]
    root: Path


class SyntheticSpec(BaseModel):
    """Synthetic scenes to generate (ScanNet on-disk format) and build through the ScanNet adapter.

    They are read as source `synthetic` (the ScanNet adapter under its own name), so their items
    never pass for real ScanNet ones and the real sources' caps do not apply to them.
    """

    model_config = ConfigDict(extra="forbid")

    n_scenes: int = Field(ge=1)
    seed: int = 0
    n_frames: int = Field(32, ge=1)
    width: int = Field(640, ge=16)
    height: int = Field(480, ge=16)
    n_objects: int | None = Field(None, ge=1)
    target_vertices: int | None = Field(None, ge=1000)
    root: Path | None = None  # default: <cache>/synthetic/<seed>-<n_scenes>[-<params hash>]

    def generator_kwargs(self) -> dict[str, Any]:
        return {
            "n_frames": self.n_frames,
            "width": self.width,
            "height": self.height,
            "n_objects": self.n_objects,
            "target_vertices": self.target_vertices,
        }

    def resolved_root(self) -> Path:
        if self.root is not None:
            return self.root
        name = f"{self.seed}-{self.n_scenes}"
        kwargs = self.generator_kwargs()
        if kwargs != SyntheticSpec(n_scenes=1).generator_kwargs():
            name += "-" + _digest(kwargs)[:8]
        return cache_root() / "synthetic" / name


class RetryPolicy(BaseModel):
    """Retries with exponential backoff for transient I/O errors in the per-scene stage."""

    model_config = ConfigDict(extra="forbid")

    retries: int = Field(3, ge=0)
    delay_s: float = Field(1.0, ge=0)
    backoff: float = Field(2.0, ge=1)

    def delays(self) -> list[float]:
        return [self.delay_s * self.backoff**i for i in range(self.retries)]


class BuildPlan(BaseModel):
    """What to build and how: sources, seed, runner, per-scene config and the dataset config."""

    model_config = ConfigDict(extra="forbid")

    seed: int = 0
    sources: list[SourceEntry] = Field(default_factory=list)
    synthetic: SyntheticSpec | None = None
    dataset: str = "default"  # preset name or YAML path of pipeline.config.BuildConfig
    dataset_overrides: dict[str, Any] = Field(default_factory=dict)  # top-level keys replaced
    questions: dict[str, Any] = Field(default_factory=dict)  # question-generation config
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    scene_timeout_s: float | None = Field(None, gt=0)
    fingerprint: Literal["stat", "content"] = "stat"  # input files: size+mtime, or sha256 of bytes
    code_version: str = "auto"  # "auto": hash of the project's code and templates
    out: Path | None = None
    work: Path | None = None  # per-scene results and reports; default <out>.work

    @model_validator(mode="after")
    def _has_input(self) -> "BuildPlan":
        if not self.sources and self.synthetic is None:
            raise ValueError("the plan names no sources and no synthetic scenes")
        names = [(s.name, str(s.root)) for s in self.sources]
        if len(set(names)) != len(names):
            raise ValueError(f"a source is listed twice: {names}")
        return self

    def all_sources(self) -> list[SourceEntry]:
        """Configured sources plus the synthetic scenes (read by the real ScanNet adapter)."""
        extra = [SourceEntry(name="synthetic", root=self.synthetic.resolved_root())] if self.synthetic else []
        return list(self.sources) + extra

    def local_workers(self) -> int:
        """Processes for work done on this machine outside the task runner (synthetic scenes)."""
        return 1 if self.runner.kind == "dask" and self.runner.address else self.runner.workers()

    def out_dir(self) -> Path:
        if self.out is None:
            raise PlanError("the plan has no output folder (set `out` or pass --out)")
        return self.out

    def work_dir(self) -> Path:
        if self.work is not None:
            return self.work
        out = self.out_dir()
        return out.parent / f"{out.name}.work"

    def dataset_config(self):
        """The assembly config (`pipeline.config.BuildConfig`)."""
        from pipeline.config import load_config

        return load_config(self.dataset, **self.dataset_overrides)

    def scene_settings(self) -> dict[str, Any]:
        """Everything that changes a scene's result file (and nothing that only changes assembly)."""
        media = self.dataset_config().media
        return {
            "seed": self.seed,
            "questions": self.questions,
            "media": {"mode": media.mode, "longest_side": media.longest_side},
        }


def _deep_merge(base: dict, top: dict) -> dict:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise PlanError(f"{path}: cannot read: {exc}") from exc
    except yaml.YAMLError as exc:
        raise PlanError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PlanError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def _anchor_paths(data: dict, base: Path) -> dict:
    """Relative roots in a plan file are relative to that file, not to the current directory."""
    data = dict(data)
    data["sources"] = [
        {**s, "root": str(base / s["root"])} if isinstance(s, dict) and "root" in s and not Path(s["root"]).expanduser().is_absolute() else s
        for s in data.get("sources", [])
    ]
    for key in ("out", "work"):
        if isinstance(data.get(key), str) and not Path(data[key]).expanduser().is_absolute():
            data[key] = str(base / data[key])
    ds = data.get("dataset")
    if isinstance(ds, str) and (ds.endswith((".yaml", ".yml"))) and not Path(ds).is_absolute():
        data["dataset"] = str(base / ds)
    return data


def build_presets() -> list[str]:
    return sorted(p.stem for p in BUILD_PRESETS_DIR.glob("*.yaml"))


def resolve_plan(
    preset: str | None = None,
    config: str | Path | None = None,
    *,
    out: str | Path | None = None,
    work: str | Path | None = None,
    seed: int | None = None,
    sources: dict[str, str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> BuildPlan:
    """Preset, then the config file on top of it, then explicit overrides (CLI / flow parameters)."""
    data: dict[str, Any] = {}
    if preset is not None:
        path = BUILD_PRESETS_DIR / f"{preset}.yaml"
        if not path.is_file():
            raise PlanError(f"{preset}: no such build preset (presets: {', '.join(build_presets())})")
        data = _anchor_paths(_read_yaml(path), path.parent)
    if config is not None:
        path = Path(config).expanduser()
        if not path.is_file():
            raise PlanError(f"{path}: no such build config file")
        data = _deep_merge(data, _anchor_paths(_read_yaml(path), path.parent.resolve()))
    if preset is None and config is None:
        raise PlanError("give a preset or a config file")
    if sources:
        data["sources"] = [{"name": n, "root": str(r)} for n, r in sorted(sources.items())]
    data = _deep_merge(data, overrides or {})
    for key, value in (("out", out), ("work", work), ("seed", seed)):
        if value is not None:
            data[key] = str(value) if key != "seed" else value
    try:
        plan = BuildPlan.model_validate(data)
    except ValidationError as exc:
        where = str(config) if config is not None else f"preset {preset}"
        raise PlanError(f"{where}: {exc}") from exc
    try:
        plan.dataset_config()
    except ValueError as exc:  # ConfigError: names the dataset config file
        raise PlanError(f"dataset config: {exc}") from exc
    return plan


def write_plan(plan: BuildPlan, work: Path) -> Path:
    """The plan as JSON in the work folder: tasks receive this path, never the plan object."""
    path = work / "plan.json"
    atomic_write_text(path, plan.model_dump_json(indent=2) + "\n")
    return path


@lru_cache(maxsize=8)
def _load_plan_cached(path: str, mtime_ns: int) -> BuildPlan:
    return BuildPlan.model_validate_json(Path(path).read_text())


def load_plan(path: str | Path) -> BuildPlan:
    p = Path(path)
    return _load_plan_cached(str(p), p.stat().st_mtime_ns)


# --------------------------------------------------------------------------------------------
# Small utilities

_LISTENERS: list[Callable[[str, dict[str, Any]], None]] = []


def add_listener(fn: Callable[[str, dict[str, Any]], None]) -> None:
    """Receive build events in this process (the CLI's progress bars); flows run without any."""
    _LISTENERS.append(fn)


def remove_listener(fn: Callable[[str, dict[str, Any]], None]) -> None:
    if fn in _LISTENERS:
        _LISTENERS.remove(fn)


def notify(event: str, data: dict[str, Any]) -> None:
    """Events: `stage` {name}, `scenes` {total}, `scene` (a SceneOutcome dict)."""
    for fn in list(_LISTENERS):
        fn(event, data)


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temp name in the same folder, fsync, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


CODE_DIRS = ("sources", "pipeline", "verifiers", "templates")
CODE_SUFFIXES = (".py", ".j2", ".yaml", ".yml", ".tsv", ".json")


@lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of the code and templates that decide a scene's items (not the CLI, not flows.py)."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for d in CODE_DIRS:
        for path in sorted((root / d).rglob("*")):
            if path.suffix in CODE_SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
                if d == "pipeline" and path.parts[len(root.parts) + 1] == "cli":
                    continue
                h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Scene jobs, fingerprints and result files


@dataclass(frozen=True)
class SceneJob:
    """One scene to process: ids and paths only (cheap to send to any worker)."""

    source: str
    root: str
    scene_id: str
    path: str  # the scene's folder, or the file holding it (vsi-meta)

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, str]) -> "SceneJob":
        return cls(**d)

    @property
    def name(self) -> str:
        return f"{self.source}/{self.scene_id}"


@dataclass
class SceneOutcome:
    """What happened to one scene (small: goes back through the task runner)."""

    source: str
    scene_id: str
    status: Literal["done", "cached", "quarantined", "failed"]
    result: str | None = None  # the result file
    reason: str | None = None
    n_items: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fingerprint(path: str | Path, mode: Literal["stat", "content"] = "stat") -> str:
    """Digest of every input file of a scene: relative path + size + mtime, or + sha256 of bytes."""
    p = Path(path)
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    h = hashlib.sha256()
    for f in files:
        st = f.stat()
        rel = f.relative_to(p).as_posix() if p.is_dir() else f.name
        h.update(f"{rel}\0{st.st_size}\0".encode())
        if mode == "stat":
            h.update(f"{st.st_mtime_ns}\0".encode())
        else:
            with open(f, "rb") as fh:
                h.update(hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()


def scene_key(job: SceneJob, plan: BuildPlan) -> str:
    version = code_version() if plan.code_version == "auto" else plan.code_version
    return _digest(
        {
            "schema": RESULT_SCHEMA,
            "source": job.source,
            "scene_id": job.scene_id,
            "inputs": fingerprint(job.path, plan.fingerprint),
            "settings": plan.scene_settings(),
            "code": version,
        }
    )[:24]


def scene_dir(work: Path, job: SceneJob) -> Path:
    return work / "scenes" / job.source / job.scene_id


def read_result(path: str | Path) -> dict[str, Any]:
    """A per-scene result file (header + items)."""
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _write_result(folder: Path, key: str, payload: dict[str, Any]) -> Path:
    """Write `<key>.json` atomically, then drop stale results of older keys for this scene."""
    path = folder / f"{key}.json"
    atomic_write_text(path, json.dumps(payload, sort_keys=True, separators=(",", ":")) + "\n")
    for old in folder.iterdir():
        if old.name.startswith(".") or old.name.startswith(key):
            continue
        if old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)
    return path


# --------------------------------------------------------------------------------------------
# Stage 2-3: inputs


def prepare_synthetic(spec: SyntheticSpec, workers: int = 1) -> Path:
    """Generate the synthetic scenes once into the cache (a complete folder appears atomically)."""
    root = spec.resolved_root()
    marker = root / "COMPLETE.json"
    if marker.is_file():
        return root
    from sources.synthetic import write_synthetic_scenes

    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}."))
    try:
        ids = write_synthetic_scenes(tmp, spec.n_scenes, spec.seed, workers=workers, **spec.generator_kwargs())
        atomic_write_text(tmp / "COMPLETE.json", json.dumps({"scenes": sorted(ids), **spec.model_dump(mode="json")}, sort_keys=True))
        try:
            os.replace(tmp, root)
        except OSError:  # another build finished the same folder first
            if not marker.is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def enumerate_scenes(source: str, root: str | Path) -> list[SceneJob]:
    """One job per scene of a source tree, sorted by scene id.

    Folder sources: one job per scene folder. vsi-meta: a meta-info file holds many scenes,
    so it is read (boxes only, cheap) to list them; a file that cannot be read becomes one job
    named after the file, which the per-scene stage then quarantines with the reason.
    """
    from sources import list_scene_dirs, load_scenes

    root = Path(root)
    if not root.exists():
        raise SceneError(root, f"{source} root does not exist")
    paths = list_scene_dirs(source, root)
    if source != "vsi-meta":
        jobs = [SceneJob(source, str(root), p.name, str(p)) for p in paths]
    else:
        jobs = []
        for p in paths:
            found = [s.scene_id for s in load_scenes(source, p) if not isinstance(s, SceneError)]
            jobs += [SceneJob(source, str(p), sid, str(p)) for sid in found] or [SceneJob(source, str(p), p.stem, str(p))]
    return sorted(jobs, key=lambda j: (j.scene_id, j.path))


def input_bytes(path: str | Path) -> int:
    """Size of the files directly in a scene's folder (mesh, .sens stream, ...), or of its file.

    A cheap estimate of the scene's cost, taken in the flow process before anything is
    submitted: frame folders (thousands of files per scan) are not walked.
    """
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    if not p.is_dir():
        return 0
    with os.scandir(p) as entries:
        return sum(e.stat().st_size for e in entries if e.is_file())


def largest_first(jobs: list[SceneJob]) -> list[SceneJob]:
    """Jobs in submission order: biggest inputs first, so the slowest scenes do not start last
    and leave the other workers idle at the end (ties by scene id, so the order is fixed)."""
    return sorted(jobs, key=lambda j: (-input_bytes(j.path), j.source, j.scene_id))


def enumerate_plan(plan: BuildPlan) -> list[SceneJob]:
    jobs: list[SceneJob] = []
    for entry in plan.all_sources():
        jobs.extend(enumerate_scenes(entry.name, entry.root))
    return jobs


# --------------------------------------------------------------------------------------------
# Stage 4: one scene


def load_scene(job: SceneJob) -> Scene:
    """Load exactly one scene through the source's adapter (raises SceneError on bad data)."""
    from sources import load_scenes

    for scene in load_scenes(job.source, job.root, scene_ids=[job.scene_id]):
        if isinstance(scene, SceneError):
            raise scene
        if scene.scene_id == job.scene_id:
            return scene
    raise SceneError(job.path, f"scene {job.scene_id} not found by the {job.source} adapter")


def question_config(questions: dict[str, Any], seed: int):
    """The `QuestionConfig` from the plan's plain mapping (lists become tuples/sets)."""
    import dataclasses

    from pipeline.questions.common import QuestionConfig

    fields = {f.name: f for f in dataclasses.fields(QuestionConfig)}
    unknown = sorted(set(questions) - set(fields))
    if unknown:
        raise PlanError(f"questions: unknown key(s) {unknown}; known: {', '.join(sorted(fields))}")
    kwargs: dict[str, Any] = {}
    for key, value in questions.items():
        default = QuestionConfig().__getattribute__(key)
        if isinstance(default, frozenset):
            value = frozenset(value)
        elif isinstance(default, tuple):
            value = tuple(value)
        kwargs[key] = value
    return QuestionConfig(**{**kwargs, "seed": seed})


def generate_items(scene: Scene, questions: dict[str, Any], seed: int) -> tuple[list[Item], dict[str, int]]:
    """Candidate items of one scene and the quality gates' drop counters.

    Q's generators seed themselves from (seed, source, scene, subtask), so a scene's items do
    not depend on which other scenes run or in which order.
    """
    from pipeline.questions.gates import DropCounter
    from pipeline.questions.generate import generate_scene

    drops = DropCounter()
    items = generate_scene(scene, question_config(questions, seed), drops)
    return items, {f"{subtask}:{reason}": n for (subtask, reason), n in sorted(drops.drops.items())}


def _export_frames(scene: Scene, indices: list[int], folder: Path, longest_side: int) -> dict[str, str]:
    """Save the frames items refer to as lossless PNG at the dataset's size; assembly reads only these."""
    import cv2

    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, str] = {}
    for index in indices:
        rgb = scene.frame(index).image()
        h, w = rgb.shape[:2]
        scale = longest_side / max(h, w)
        if scale < 1:
            rgb = cv2.resize(rgb, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA)
        ok, buf = cv2.imencode(".png", np.ascontiguousarray(rgb[:, :, ::-1]), [cv2.IMWRITE_PNG_COMPRESSION, 3])
        if not ok:
            raise SceneError(scene.frame(index).image_ref, "cannot encode frame")
        atomic_write_bytes(folder / f"{index}.png", buf.tobytes())
        out[str(index)] = f"{index}.png"
    return out


def _frame_index(fid: str) -> int:
    return int(fid.rsplit("/", 1)[1])


def check_scene(scene: Scene) -> None:
    """Scene-level sanity the adapters leave to the build: a video source needs usable frames."""
    if scene.source in FRAME_SOURCES and not scene.frames:
        dropped = Counter(d.reason for d in scene.drops if d.what == "frame")
        detail = ", ".join(f"{n} {r}" for r, n in sorted(dropped.items())) or "none found"
        raise SceneError(scene.meta.get("scene_dir", scene.scene_id), f"no usable camera frames (dropped: {detail})")
    if not scene.objects:
        raise SceneError(scene.meta.get("scene_dir", scene.scene_id), "no annotated objects")


def process_scene(job: SceneJob, plan: BuildPlan, work: Path) -> SceneOutcome:
    """Load -> geometry -> candidate items for one scene, cached by its key.

    Returns quickly when the result file exists. Bad data (SceneError, a missing file, a value
    the geometry rejects) quarantines the scene and the verdict is cached; transient OSErrors
    propagate so that the caller retries with backoff.
    """
    from pipeline.scene_geometry import scene_geometry

    t0 = time.perf_counter()
    key = scene_key(job, plan)
    folder = scene_dir(work, job)
    path = folder / f"{key}.json"
    if path.is_file():
        header = read_result(path)
        return SceneOutcome(job.source, job.scene_id, "cached" if header["status"] == "ok" else "quarantined",
                            str(path), header.get("reason"), len(header.get("items", [])), time.perf_counter() - t0)
    base = {"schema": RESULT_SCHEMA, "key": key, "source": job.source, "scene_id": job.scene_id, "path": job.path}
    try:
        scene = load_scene(job)
        check_scene(scene)
        items, drops = generate_items(scene, plan.questions, plan.seed)
        for d in scene.drops:
            drops[f"{job.source}:{d.what}:{d.reason}"] = drops.get(f"{job.source}:{d.what}:{d.reason}", 0) + 1
        frames: dict[str, str] = {}
        media = plan.dataset_config().media
        indices = sorted({_frame_index(f) for it in items for f in it.frames})
        if media.mode == "embed":
            frames = _export_frames(scene, indices, folder / f"{key}.frames", media.longest_side)
        geometry = scene_geometry(scene, indices).to_dict()
    except OSError as exc:
        if not isinstance(exc, PERMANENT_OS_ERRORS):
            raise
        return _quarantine(folder, key, base, f"missing input: {exc}", t0)
    except (SceneError, ValueError, KeyError, IndexError) as exc:
        return _quarantine(folder, key, base, _reason(exc), t0)
    payload = {**base, "status": "ok", "reason": None, "drops": dict(sorted(drops.items())),
               "frames": frames, "geometry": geometry, "items": [it.to_dict() for it in items]}
    result = _write_result(folder, key, payload)
    return SceneOutcome(job.source, job.scene_id, "done", str(result), None, len(items), time.perf_counter() - t0)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, SceneError):
        return f"{exc.path}: {exc.problem}"
    return f"{type(exc).__name__}: {exc}"


def _quarantine(folder: Path, key: str, base: dict, reason: str, t0: float) -> SceneOutcome:
    payload = {**base, "status": "quarantined", "reason": reason, "drops": {}, "frames": {}, "items": []}
    result = _write_result(folder, key, payload)
    return SceneOutcome(base["source"], base["scene_id"], "quarantined", str(result), reason, 0, time.perf_counter() - t0)


def failed_outcome(job: SceneJob, exc: BaseException | str, attempts: int) -> SceneOutcome:
    """A scene that kept failing with transient errors: quarantined for this build, not cached."""
    reason = exc if isinstance(exc, str) else _reason(exc)
    return SceneOutcome(job.source, job.scene_id, "failed", None, f"failed after {attempts} attempts: {reason}")


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and not isinstance(exc, PERMANENT_OS_ERRORS)


def process_scene_with_retries(job: SceneJob, plan: BuildPlan, work: Path,
                               sleep: Callable[[float], None] = time.sleep) -> SceneOutcome:
    """`process_scene` with the plan's retry policy, for runs without Prefect (same semantics)."""
    delays = plan.retry.delays()
    for attempt in range(len(delays) + 1):
        try:
            return process_scene(job, plan, work)
        except OSError as exc:
            if attempt == len(delays):
                return failed_outcome(job, exc, attempt + 1)
            sleep(delays[attempt])
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------------------------
# Stage 5: assembly


@dataclass
class BuildSummary:
    """What a build made; written as `build_report.json` in the work folder."""

    out: str
    work: str
    scenes: dict[str, int]  # status -> count
    quarantine: list[dict[str, Any]]
    items_per_source_subtask: dict[str, dict[str, int]]
    drops: dict[str, int]
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


class FrameStore:
    """Frame id -> RGB pixels from the per-scene frame exports (assembly never reloads a scene)."""

    def __init__(self, result_paths: list[str]):
        self._paths: dict[str, Path] = {}
        for p in result_paths:
            header = read_result(p)
            folder = Path(p).with_suffix(".frames")
            for index, name in header.get("frames", {}).items():
                self._paths[f"{header['source']}/{header['scene_id']}/{index}"] = folder / name

    def __contains__(self, fid: str) -> bool:
        return fid in self._paths

    def __len__(self) -> int:
        return len(self._paths)

    def __call__(self, fid: str) -> np.ndarray:
        import cv2

        path = self._paths.get(fid)
        if path is None:
            raise KeyError(f"frame {fid} was not exported by its scene")
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if bgr is None:
            raise OSError(f"{path}: cannot read the exported frame")
        return bgr[:, :, ::-1].copy()


def quarantine_records(outcomes: list[SceneOutcome]) -> list[dict[str, Any]]:
    bad = [o for o in outcomes if o.status in ("quarantined", "failed")]
    return [{"source": o.source, "scene_id": o.scene_id, "status": o.status, "reason": o.reason}
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
    from pipeline.sampling import sample
    from pipeline.scene_geometry import SceneGeometry
    from pipeline.shards import write_dataset

    t0 = time.perf_counter()
    out, work = plan.out_dir(), plan.work_dir()
    config = plan.dataset_config()
    paths = sorted(o.result for o in outcomes if o.status in ("done", "cached") and o.result)
    drops: Counter[str] = Counter()
    candidates = 0
    geometry: dict[tuple[str, str], SceneGeometry] = {}
    for p in paths:
        header = read_result(p)
        drops.update(header.get("drops", {}))
        candidates += len(header["items"])
        if header.get("geometry"):
            geometry[(header["source"], header["scene_id"])] = SceneGeometry.from_dict(header["geometry"])
    selection, report = sample(iter_candidates(paths), config, plan.seed)
    frames = FrameStore(paths) if config.media.mode == "embed" else None
    write_dataset(selection, frames, out, config, seed=plan.seed, report=report, scenes=geometry)
    per: dict[str, Counter[str]] = {}
    for it in selection:
        per.setdefault(it.source, Counter())[it.subtask] += 1
    records = quarantine_records(outcomes)
    card = out / "README.md"
    summary = BuildSummary(
        out=str(out),
        work=str(work),
        scenes=dict(sorted(Counter(o.status for o in outcomes).items())),
        quarantine=records,
        items_per_source_subtask={s: dict(sorted(c.items())) for s, c in sorted(per.items())},
        drops=dict(sorted(drops.items())),
        candidates=candidates,
        selected=len(selection),
        card=str(card) if card.is_file() else None,
        manifest=str(out / "manifest.json") if (out / "manifest.json").is_file() else None,
        sampling_report=_jsonable(report),
        seconds={"assemble": round(time.perf_counter() - t0, 3)},
    )
    write_reports(summary, work)
    return summary


def _jsonable(obj: Any) -> Any:
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


# --------------------------------------------------------------------------------------------
# The same stages without Prefect (benchmarks, and a fallback with identical output)


def run_build_plain(plan: BuildPlan) -> BuildSummary:
    """Every stage as plain function calls on a thread pool of the plan's width."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    work = plan.work_dir()
    if plan.synthetic is not None:
        prepare_synthetic(plan.synthetic, plan.local_workers())
    jobs = enumerate_plan(plan)
    notify("scenes", {"total": len(jobs)})
    outcomes: list[SceneOutcome] = []
    with ThreadPoolExecutor(max_workers=plan.runner.workers()) as pool:
        futures = [pool.submit(process_scene_with_retries, job, plan, work) for job in largest_first(jobs)]
        for fut in as_completed(futures):
            outcomes.append(fut.result())
            notify("scene", outcomes[-1].to_dict())
    outcomes.sort(key=lambda o: (o.source, o.scene_id))
    notify("stage", {"name": "assemble"})
    return assemble(plan, outcomes)


# --------------------------------------------------------------------------------------------
# `numerical3d sources check`: find what is missing or malformed before a long run


@dataclass
class SourceProblem:
    source: str
    root: str
    scene_id: str | None
    path: str
    problem: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SourceStatus:
    name: str
    root: str
    scenes: int = 0
    ok: int = 0
    problems: int = 0


@dataclass
class CheckReport:
    sources: list[SourceStatus] = field(default_factory=list)
    problems: list[SourceProblem] = field(default_factory=list)


def _required_files(source: str, scene_dir: Path, scene_id: str) -> list[tuple[str, ...]]:
    """Per scene: groups of alternative relative paths, one of each group must exist (DESIGN.md 4)."""
    if source == "scannet":
        return [
            (f"{scene_id}_vh_clean_2.ply",),
            (f"{scene_id}_vh_clean_2.0.010000.segs.json",),
            (f"{scene_id}.aggregation.json", f"{scene_id}_vh_clean.aggregation.json"),
            (f"{scene_id}.txt",),
            (f"{scene_id}.sens", "pose"),
        ] + ([("color",), ("depth",), ("intrinsic/intrinsic_color.txt",)] if (scene_dir / "pose").is_dir() else [])
    if source == "scannetpp":
        return [("scans/mesh_aligned_0.05.ply",), ("scans/segments.json",), ("scans/segments_anno.json",),
                ("iphone/rgb.mkv",), ("iphone/depth.bin",), ("iphone/pose_intrinsic_imu.json",)]
    if source == "arkitscenes":
        return [(f"{scene_id}_3dod_annotation.json",), (f"{scene_id}_3dod_mesh.ply",),
                (f"{scene_id}_frames/lowres_wide",), (f"{scene_id}_frames/lowres_depth",),
                (f"{scene_id}_frames/lowres_wide_intrinsics",), (f"{scene_id}_frames/lowres_wide.traj",)]
    return []


def _shallow_problems(source: str, job: SceneJob) -> list[str]:
    """Missing files, unreadable JSON, frame folders that disagree; cheap enough for every scene."""
    scene = Path(job.path)
    problems: list[str] = []
    for group in _required_files(source, scene, job.scene_id):
        if not any((scene / rel).exists() for rel in group):
            problems.append(f"missing {' or '.join(group)}")
    for f in sorted(scene.glob("*.json")) + sorted(scene.glob("scans/*.json")):
        try:
            with open(f, encoding="utf-8") as fh:
                json.load(fh)
        except (OSError, ValueError) as exc:
            problems.append(f"{f.name}: unreadable JSON ({type(exc).__name__}: {str(exc)[:80]})")
    for f in sorted(scene.glob("*.ply")) + sorted(scene.glob("scans/*.ply")):
        with open(f, "rb") as fh:
            head = fh.read(4096)
        if not head.startswith(b"ply") or b"end_header" not in head:
            problems.append(f"{f.name}: not a PLY file (no header)")
    if source == "scannet" and (scene / "pose").is_dir():
        poses = {p.stem for p in (scene / "pose").glob("*.txt")}
        colors = {p.stem for p in (scene / "color").glob("*.jpg")} if (scene / "color").is_dir() else set()
        if not poses:
            problems.append("pose/ has no frames")
        elif poses - colors:
            problems.append(f"{len(poses - colors)} of {len(poses)} frames have a pose but no color/N.jpg")
    return problems


def check_plan(plan: BuildPlan, deep: bool = False) -> CheckReport:
    """Check every configured source tree: roots, scene files, and (deep) a full load per scene."""
    report = CheckReport()
    for entry in plan.all_sources():
        status = SourceStatus(entry.name, str(entry.root))
        report.sources.append(status)
        try:
            jobs = enumerate_scenes(entry.name, entry.root)
        except (SceneError, OSError) as exc:
            hint = " (generated by the build on first use)" if plan.synthetic and entry.root == plan.synthetic.resolved_root() else ""
            report.problems.append(SourceProblem(entry.name, str(entry.root), None, str(entry.root), _reason(exc) + hint))
            status.problems += 1
            continue
        if not jobs:
            report.problems.append(SourceProblem(entry.name, str(entry.root), None, str(entry.root), "no scenes found"))
            status.problems += 1
        for job in jobs:
            status.scenes += 1
            found = _shallow_problems(entry.name, job)
            if deep and not found:
                try:
                    check_scene(load_scene(job))
                except (SceneError, OSError, ValueError, KeyError, IndexError) as exc:
                    found.append(_reason(exc))
            for problem in found:
                report.problems.append(SourceProblem(entry.name, str(entry.root), job.scene_id, job.path, problem))
            status.problems += len(found)
            status.ok += not found
    return report
