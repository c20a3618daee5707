"""The build plan: what to build and how, read from presets and YAML files.

`resolve_plan` layers a bundled plan (`pipeline/presets/plans/`), the user's YAML file and
explicit overrides with the one merge (`pipeline.settings.deep_merge`), then validates the
result: the plan itself, each source's options (its own typed config), the question config
and the dataset mix. Every mistake fails here, naming the file and the field, before any work.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter, ValidationError, field_validator, model_validator

from numerical3d.pipeline.config import DatasetMix, OverrideError, load_mix
from numerical3d.pipeline.manifest import content_hash
from numerical3d.pipeline.questions.common import QuestionConfig
from numerical3d.pipeline.questions.registry import names as subtask_names
from numerical3d.pipeline.runners import RunnerConfig
from numerical3d.pipeline.settings import PRESETS_DIR, ConfigError, deep_merge, describe_errors, presets, read_yaml_mapping
from numerical3d.pipeline.templating import TemplateError, check_folder
from numerical3d.sources import make_source
from numerical3d.sources.io import atomic_write_text

CACHE_ENV = "NUMERICAL3D_CACHE"
PLANS_DIR = PRESETS_DIR / "plans"


class PlanError(ConfigError):
    """A build plan cannot be read or is invalid; names the file and the problem."""


def cache_root() -> Path:
    """Where generated inputs (synthetic scenes) live: `$NUMERICAL3D_CACHE` or ~/.cache/numerical3d."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "numerical3d"


def digest(obj: Any) -> str:
    """sha256 of canonical JSON: the same mapping gives the same digest whatever its key order."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


class SourceEntry(BaseModel):
    """One configured source tree, with the source's own options (`sources.<adapter>.Config`)."""

    model_config = ConfigDict(extra="forbid")

    name: str  # a name in sources.registry()
    root: Path
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _known_source_with_its_options(self) -> "SourceEntry":
        make_source(self.name, **self.options)  # SourceConfigError (a ValueError) names the source or field
        return self


class CorpusEntry(BaseModel):
    """One ingested question corpus (`pipeline.ingest.CORPORA`): its file or release folder, the most of
    the dataset's total its items may take, and the folder its media references must exist in."""

    model_config = ConfigDict(extra="forbid")

    name: str  # a key of pipeline.ingest.CORPORA
    path: Path
    share: float | None = Field(None, gt=0, le=1)  # the corpus's source cap (max share of the total); None: uncapped
    media: Path | None = None  # VLM-3R's videos / SR-91k's media folder: each reference must exist there

    @model_validator(mode="after")
    def _known_corpus(self) -> "CorpusEntry":
        from numerical3d.pipeline.ingest import CORPORA

        if self.name not in CORPORA:
            raise ValueError(f"unknown corpus {self.name!r}; known: {', '.join(CORPORA)}")
        if self.media is not None and CORPORA[self.name].media_option is None:
            raise ValueError(f"corpus {self.name} takes no media folder (its media are checked by the ingest itself "
                             "or are not part of its release)")
        return self

    def options(self) -> dict[str, Any]:
        """The ingest's keyword options."""
        from numerical3d.pipeline.ingest import CORPORA

        option = CORPORA[self.name].media_option
        return {option: self.media} if option and self.media is not None else {}


class SyntheticSpec(BaseModel):
    """Synthetic scenes to generate (ScanNet on-disk format) and build as source `synthetic`."""

    model_config = ConfigDict(extra="forbid")

    n_scenes: int = Field(ge=1)
    seed: int = 0
    n_frames: int = Field(32, ge=1)
    width: int = Field(640, ge=16)
    height: int = Field(480, ge=16)
    n_objects: int | None = Field(None, ge=1)
    target_vertices: int | None = Field(None, ge=1000)
    root: Path | None = None  # default: <cache>/synthetic/<seed>-<n_scenes>[-<params hash>]-g<generator version>

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
        from numerical3d.sources.synthetic_shapes import GENERATOR_VERSION  # numpy only: no cv2 at plan time

        name = f"{self.seed}-{self.n_scenes}"
        kwargs = self.generator_kwargs()
        if kwargs != SyntheticSpec(n_scenes=1).generator_kwargs():
            name += "-" + digest(kwargs)[:8]
        name += f"-g{GENERATOR_VERSION}"  # scenes of another generator version are other scenes
        return cache_root() / "synthetic" / name


class RetryPolicy(BaseModel):
    """Retries with exponential backoff for transient I/O errors in the per-scene stage.

    The one policy of both runners: the Prefect flow configures its scene task with it, the
    plain runner loops over `delays()`.
    """

    model_config = ConfigDict(extra="forbid")

    retries: int = Field(3, ge=0)
    delay_s: float = Field(1.0, ge=0)
    backoff: float = Field(2.0, ge=1)

    def delays(self) -> list[float]:
        return [self.delay_s * self.backoff**i for i in range(self.retries)]


def _question_keys() -> dict[str, list[str]]:
    """The keys a plan's `questions:` mapping may hold: `QuestionConfig`'s fields and one section
    per subtask (the field is a dict, so the plan's model cannot tell them itself)."""
    fields = [f.name for f in dataclasses.fields(QuestionConfig) if f.name != "sections"]
    return {"questions": fields + list(subtask_names())}


def _question_adapter() -> TypeAdapter:
    return TypeAdapter(QuestionConfig)


class SceneSettings(BaseModel):
    """Everything of the plan that changes a scene's result file, resolved once: the scene
    stage's one argument besides the job, and (with the job's own inputs) its cache-key payload.

    Nothing that only changes assembly is in it, so a new mix quota re-runs assembly alone.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int
    questions: dict[str, Any]  # the plan's `questions` mapping (validated; templates_dir anchored)
    media_mode: Literal["embed", "reference"]
    longest_side: int
    jpeg_quality: int  # the frames' JPEGs are encoded by the scene stage, once
    fingerprint: Literal["stat", "content"]  # how the scenes' input files are fingerprinted
    code: str  # the code version (`pipeline.manifest.content_hash`, or the plan's pinned one)

    @cached_property
    def question_config(self) -> QuestionConfig:
        """The `QuestionConfig` of every scene (the plan's seed wins over one in `questions`)."""
        return _question_adapter().validate_python({**self.questions, "seed": self.seed})


class BuildPlan(BaseModel):
    """What to build and how: sources, seed, runner, per-scene config and the dataset config."""

    model_config = ConfigDict(extra="forbid")

    seed: int = 0
    sources: list[SourceEntry] = Field(default_factory=list)
    corpora: list[CorpusEntry] = Field(default_factory=list)  # question corpora with known answers, ingested
    synthetic: SyntheticSpec | None = None
    dataset: str = "default"  # a mix in pipeline/presets/mixes/, or a YAML path of pipeline.config.DatasetMix
    dataset_overrides: dict[str, Any] = Field(default_factory=dict)  # merged into the mix (`load_mix`)
    questions: dict[str, Any] = Field(default_factory=dict)  # pipeline.questions.common.QuestionConfig fields
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    scene_timeout_s: float | None = Field(None, gt=0)
    fingerprint: Literal["stat", "content"] = "stat"  # input files: size+mtime, or sha256 of bytes
    code_version: str = "auto"  # "auto": the content hash of the code (pipeline.manifest.content_hash)
    out: Path | None = None
    work: Path | None = None  # per-scene results and reports; default <out>.work
    allow_partial: bool = False  # scenes failing after their retries still fail the build unless true
    force: bool = False  # build into a non-empty folder no build wrote (its files are kept)
    _scene: SceneSettings | None = PrivateAttr(None)  # resolved on first use (`scene`)
    _config: DatasetMix | None = PrivateAttr(None)  # the mix, read on first use (`dataset_config`)

    @field_validator("questions")
    @classmethod
    def _questions_are_question_config(cls, v: dict[str, Any]) -> dict[str, Any]:
        _question_adapter().validate_python(v)  # unknown keys and bad values fail naming the field
        return v

    @model_validator(mode="after")
    def _has_input(self) -> "BuildPlan":
        if not self.sources and self.synthetic is None and not self.corpora:
            raise ValueError("the plan names no sources, no corpora and no synthetic scenes")
        names = [(s.name, str(s.root)) for s in self.sources]
        if len(set(names)) != len(names):
            raise ValueError(f"a source is listed twice: {names}")
        corpora = [c.name for c in self.corpora]
        if len(set(corpora)) != len(corpora):  # one share per corpus: list a corpus's files in one entry
            raise ValueError(f"a corpus is listed twice: {corpora}")
        return self

    def all_sources(self) -> list[SourceEntry]:
        """Configured sources plus the synthetic scenes (read by the ScanNet adapter as `synthetic`)."""
        extra = [SourceEntry(name="synthetic", root=self.synthetic.resolved_root())] if self.synthetic else []
        return list(self.sources) + extra

    def missing_roots(self) -> list[str]:
        """The configured sources whose root does not exist, as `sources[i] (name): root`, and the corpora
        whose path or media folder does not exist or whose path holds no file of the corpus's layout.

        A build checks them before any work (`sources check` reports them as problems instead).
        """
        from numerical3d.pipeline.ingest import corpus_files

        missing = [f"sources[{i}] ({s.name}): root {s.root} does not exist"
                   for i, s in enumerate(self.sources) if not s.root.expanduser().exists()]
        for i, c in enumerate(self.corpora):
            gone = [f"corpora[{i}] ({c.name}): {what} {p} does not exist"
                    for what, p in (("path", c.path), ("media", c.media)) if p is not None and not p.expanduser().exists()]
            if not gone:
                try:
                    corpus_files(c.name, c.path.expanduser())
                except FileNotFoundError as exc:  # there, but not in the corpus's layout
                    gone = [f"corpora[{i}] ({c.name}): {exc}"]
            missing += gone
        return missing

    def local_workers(self) -> int:
        """Processes for work done on this machine outside the task runner (synthetic scenes)."""
        return 1 if self.runner.kind == "dask" and self.runner.address else self.runner.workers()

    def out_dir(self) -> Path:
        if self.out is None:
            raise PlanError("the plan has no output folder (set `out` or pass --out)")
        return self.out

    def inputs(self) -> list[Path]:
        """What the build reads and must never write into: source roots (the generated synthetic scenes'
        too), corpus files, media folders."""
        return [*(s.root for s in self.all_sources()), *(c.path for c in self.corpora),
                *(c.media for c in self.corpora if c.media is not None)]

    def work_dir(self) -> Path:
        if self.work is not None:
            return self.work
        out = self.out_dir()
        return out.parent / f"{out.name}.work"

    def dataset_config(self) -> DatasetMix:
        """The assembly config (the dataset mix), read once per plan object: plan validation, the
        scene settings and assembly share it (treat it as read-only)."""
        if self._config is None:
            config = load_mix(self.dataset, **self.dataset_overrides)
            caps = {c.name: c.share for c in self.corpora if c.share is not None and c.name not in config.source_caps}
            if caps:  # a corpus's share is its source cap, unless the mix caps it itself
                config = config.model_copy(update={"source_caps": dict(sorted({**config.source_caps, **caps}.items()))})
            self._config = config
        return self._config

    def code(self) -> str:
        """The code version that keys the scene cache and goes into the manifest."""
        return content_hash() if self.code_version == "auto" else self.code_version

    @property
    def scene(self) -> SceneSettings:
        """The scene stage's settings, resolved once per plan object (the mix is read here, once,
        not per scene: a worker's plan comes from `load_plan`, which keeps one object per file)."""
        if self._scene is None:
            media = self.dataset_config().media
            self._scene = SceneSettings(seed=self.seed, questions=self.questions, media_mode=media.mode,
                                        longest_side=media.longest_side, jpeg_quality=media.jpeg_quality,
                                        fingerprint=self.fingerprint, code=self.code())
        return self._scene

    def __eq__(self, other: object) -> bool:
        """Plans are equal by their fields; the mix and scene settings derived from them are caches."""
        return isinstance(other, BuildPlan) and self.model_dump() == other.model_dump()

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> "BuildPlan":
        """A validated copy with `update` applied (always deep: rebuilt from plain values), so the
        derived scene settings are resolved again instead of being copied stale."""
        return type(self).model_validate({**self.model_dump(), **(update or {})})


def _anchor_paths(data: dict, base: Path) -> dict:
    """Relative paths in a plan file are relative to that file, not to the current directory:
    source roots and label maps, `out`, `work`, a dataset mix file, `questions.templates_dir`."""
    data = dict(data)
    data["sources"] = [_anchor_source(s, base) if isinstance(s, dict) else s for s in data.get("sources", [])]
    if isinstance(data.get("corpora"), list):
        data["corpora"] = [_anchor_keys(c, base, ("path", "media")) if isinstance(c, dict) else c for c in data["corpora"]]
    for key in ("out", "work"):
        if isinstance(data.get(key), str) and not Path(data[key]).expanduser().is_absolute():
            data[key] = str(base / data[key])
    questions = data.get("questions")
    if isinstance(questions, dict) and isinstance(questions.get("templates_dir"), str):
        data["questions"] = {**questions, "templates_dir": str(base / Path(questions["templates_dir"]).expanduser())}
    ds = data.get("dataset")
    if isinstance(ds, str) and (ds.endswith((".yaml", ".yml"))) and not Path(ds).is_absolute():
        data["dataset"] = str(base / ds)
    return data


def _anchor_keys(entry: dict, base: Path, keys: tuple[str, ...]) -> dict:
    entry = dict(entry)
    for key in keys:
        if isinstance(entry.get(key), str) and not Path(entry[key]).expanduser().is_absolute():
            entry[key] = str(base / entry[key])
    return entry


def _anchor_source(entry: dict, base: Path) -> dict:
    entry = dict(entry)
    if isinstance(entry.get("root"), str) and not Path(entry["root"]).expanduser().is_absolute():
        entry["root"] = str(base / entry["root"])
    options = entry.get("options")
    if isinstance(options, dict) and isinstance(options.get("labels"), str) and not Path(options["labels"]).expanduser().is_absolute():
        entry["options"] = {**options, "labels": str(base / options["labels"])}
    return entry


def build_presets() -> list[str]:
    """The bundled build plans (`--preset`)."""
    return presets("plans")


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
        path = PLANS_DIR / f"{preset}.yaml"
        if not path.is_file():
            raise PlanError(f"{preset}: no such build preset (presets: {', '.join(build_presets())})")
        data = _anchor_paths(read_yaml_mapping(path, PlanError), path.parent)
    if config is not None:
        path = Path(config).expanduser()
        if not path.is_file():
            raise PlanError(f"{path}: no such build config file")
        data = deep_merge(data, _anchor_paths(read_yaml_mapping(path, PlanError), path.parent.resolve()))
    if preset is None and config is None:
        raise PlanError("give a preset or a config file")
    if sources:
        data["sources"] = [{"name": n, "root": str(r)} for n, r in sorted(sources.items())]
    data = deep_merge(data, overrides or {})
    for key, value in (("out", out), ("work", work), ("seed", seed)):
        if value is not None:
            data[key] = str(value) if key != "seed" else value
    where = str(config) if config is not None else f"preset {preset}"
    try:
        plan = BuildPlan.model_validate(data)
    except ValidationError as exc:
        raise PlanError(f"{where}: {describe_errors(exc.errors(), BuildPlan, _question_keys())}") from None
    if (templates := plan.questions.get("templates_dir")) is not None:
        try:  # the user's templates are read by every scene: a broken folder fails here, not per scene
            check_folder(templates)
        except TemplateError as exc:
            raise PlanError(f"{where}: questions.templates_dir: {exc}") from None
    try:
        quotas = plan.dataset_config().quotas
    except OverrideError as exc:  # the plan's own value is wrong: name the plan and the field
        raise PlanError(f"{where}: {exc.under('dataset_overrides.')}") from None
    except ConfigError as exc:  # names the dataset config file
        raise PlanError(f"dataset config: {exc}") from exc
    # A generated subtask without a quota would never be sampled: refuse it before any scene runs.
    generated = _question_adapter().validate_python({**plan.questions, "seed": plan.seed}).subtasks
    unquoted = [s for s in generated or subtask_names() if s not in quotas]
    if unquoted:
        raise PlanError(f"{where}: the dataset mix {plan.dataset} gives no quota to subtask(s) {', '.join(unquoted)}; "
                        "give each a share under `quotas`, or generate only the others (`questions.subtasks`)")
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
