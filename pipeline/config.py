"""The dataset mix (`DatasetMix`): quotas, caps, balancing, splits and media options.

Loaded from YAML (a mix shipped in `pipeline/presets/mixes/` or a file path) by `load_mix`
into a pydantic model, so that a typo in a key or a bad value fails with the field's name
before any work starts. The resolved mix is written into the manifest. A build plan names
its mix (`dataset:`) and may change it (`dataset_overrides:`), merged like every config file
(`numerical3d.configfile.deep_merge`); an entry of a table (`quotas`, `source_caps`, `splits`)
set to `null` is left out (`DatasetMix._drop_nulls`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_serializer, model_validator

from numerical3d.pipeline.questions.registry import registry
from numerical3d.pipeline.settings import PRESETS_DIR, ConfigError, deep_merge, describe_errors, presets, read_yaml_mapping

MIXES_DIR = PRESETS_DIR / "mixes"

Share = Annotated[float, Field(gt=0)]  # a relative share (normalised where used)
Cap = Annotated[float, Field(gt=0, le=1)]  # a share of the total
SplitName = Annotated[str, Field(pattern=r"^\w+$")]  # names files: letters, digits, underscores


class Balance(BaseModel):
    """How answers are balanced inside each subtask (see docs/dataset.md)."""

    model_config = ConfigDict(extra="forbid")

    discrete: bool = True  # near-uniform over answer classes (count values, direction classes, letters)
    numeric_bins: int = Field(8, ge=1)  # numeric answers spread over this many log-magnitude bins
    letters: bool = True  # multiple-choice answer letters balanced
    # count answers, per label: each count keeps at most as many items as lets the best blind guess of
    # the label's count earn at most this mean reward at k = 100 (`pipeline.count_guess`); None: no cap
    max_count_guess: float | None = Field(0.3, gt=0, le=1)


class Debias(BaseModel):
    """Iterative Bias Pruning of the candidates before quotas are served (see docs/dataset.md).

    A text-only model (`pipeline.blind`) scores every candidate's non-visual solvability; each
    round prunes the most solvable candidates of every subtask (of `subtasks`, when given: the
    others are never fit, which is what keeps a 50k build's pruning to seconds) whose blind score
    still beats chance / the best constant by more than `stop_gain`, then refits those on what is left.
    """

    model_config = ConfigDict(extra="forbid")

    budget: float = Field(0.2, ge=0, lt=1)  # at most this share of each subtask's candidates is pruned
    rounds: int = Field(5, ge=1)  # the budget is spent in this many refit-and-prune rounds
    floor: int = Field(0, ge=0)  # candidates kept per subtask at least
    keep_quotas: bool = True  # never prune a subtask below its quota (false: the fill rule covers it)
    stop_gain: float = Field(0.02, ge=0)  # a subtask this close to chance / constant is left alone (and not refit)
    folds: int = Field(5, ge=2)  # scene-grouped cross-validation folds
    subtasks: list[str] | None = Field(None, min_length=1)  # only these are diagnosed and pruned (none: all)
    # the items finally selected are diagnosed again: a verifier kind of a subtask with at least
    # `check_items` items whose strongest text-only predictor gains more than this swaps its best-predicted
    # items for others of its candidates (pipeline.sampling, phase 9); None: not checked
    selected_gain: float | None = Field(0.05, ge=0)
    check_items: int = Field(30, ge=1)
    # the selection check averages its diagnosis over this many scene-to-fold assignments (fold seeds
    # 0, 1, ...): swaps ranked by one assignment lower what that assignment reads, not the shortcut
    check_fold_seeds: int = Field(1, ge=1)
    # a numeric kind within `stop_gain` whose strongest predictor's answers still earn more than this at
    # k = 100 (paper profile) is pruned by what they earn; None: gain alone
    max_reward: float | None = Field(None, gt=0, le=1)
    # the selected count items are held to this mean reward of the strongest text-only predictor's counts
    # at k = 100, averaged over the check's assignments (None: `balance.max_count_guess`, the count cap's
    # bound): held to the bound itself, another assignment reads above it (`docs/questions.md`)
    selected_count_guess: float | None = Field(None, gt=0, le=1)
    # a pruned subtask keeps at most this many candidates per item of its quota, spread over its scenes,
    # the rest left out before pruning; None: all
    pool: float | None = Field(None, ge=1)

    @field_validator("subtasks")
    @classmethod
    def _known(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        unknown = sorted(set(v) - set(registry()))
        if unknown:
            raise ValueError(f"unknown subtask(s) {', '.join(unknown)}; known: {', '.join(registry())}")
        return sorted(set(v))


class ShardOptions(BaseModel):
    """Parquet layout; fixed so that the same input gives byte-identical files."""

    model_config = ConfigDict(extra="forbid")

    rows_per_shard: int = Field(10_000, ge=1)
    frames_per_shard: int = Field(1_000, ge=1)
    row_group_size: int = Field(1_000, ge=1)
    compression: Literal["zstd", "snappy", "gzip", "none"] = "zstd"
    compression_level: int | None = 3


class MediaOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["embed", "reference"] = "embed"  # reference: no pixels published, rebuilt by `hydrate`
    longest_side: int = Field(640, ge=16)  # frames are downscaled (never upscaled) to this longest side
    jpeg_quality: int = Field(90, ge=1, le=100)


class PreviewOptions(BaseModel):
    """The optional `preview` column: one small composite per item (key frame with the objects drawn
    in, and the top-down map with the geometry the answer measures) for the Hub's dataset viewer."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False  # off: the question shards are exactly those of a build without previews
    width: int = Field(384, ge=64)
    height: int = Field(192, ge=32)
    jpeg_quality: int = Field(80, ge=1, le=100)


class DatasetMix(BaseModel):
    """Everything that decides the dataset's content, apart from the candidates and the seed."""

    model_config = ConfigDict(extra="forbid")

    name: str = "Numerical3D-50k"
    total: int = Field(50_000, ge=1)
    quotas: dict[str, Share] = Field(min_length=1)  # subtask -> share of the total (normalised; need not sum to 1)
    source_caps: dict[str, Cap] = Field(default_factory=dict)  # source -> max share of the total
    scene_cap: int | None = Field(None, ge=1)  # max items from one scene
    scene_subtask_cap: int | None = Field(None, ge=1)  # max items of one subtask from one scene
    fill: Literal["proportional", "none"] = "proportional"
    strict: bool = False  # raise when any quota or the total cannot be met (instead of filling / reporting)
    splits: dict[SplitName, Share] = Field(default_factory=lambda: {"train": 1.0}, min_length=1)  # share of scenes
    balance: Balance = Field(default_factory=Balance)
    shards: ShardOptions = Field(default_factory=ShardOptions)
    media: MediaOptions = Field(default_factory=MediaOptions)
    preview: PreviewOptions = Field(default_factory=PreviewOptions)
    exclude_scenes_file: str | None = None  # extra `source<TAB>scene_id` list excluded like VSI-Bench's
    # files of `numerical3d benchmark fingerprint` (benchmark, kind, value): items sharing a scene, image or
    # question with them are excluded; empty, the key is absent from the dumped config
    benchmark_fingerprints: list[str] = Field(default_factory=list)
    debias: Debias | None = None  # None / false: no pruning, and the key is absent from the dumped config

    @field_validator("quotas", "source_caps", "splits", mode="before")
    @classmethod
    def _drop_nulls(cls, v):
        """`null` leaves a table's entry out: how a plan's `dataset_overrides`, merged key by key into
        the mix, drops a subtask, a source's cap or a split. Not 0: a share must be positive (sampling
        divides by it and fills by it) and a source cap of 0 would mean "none of this source"."""
        return {k: x for k, x in v.items() if x is not None} if isinstance(v, dict) else v

    @field_validator("debias", mode="before")
    @classmethod
    def _debias_off(cls, v):  # `debias: false` (a plan's override) turns off the pruning a mix asks for
        return None if v is False else v

    @field_validator("quotas")
    @classmethod
    def _known_subtasks(cls, v: dict[str, float]) -> dict[str, float]:
        known = registry()
        unknown = sorted(set(v) - set(known))
        if unknown:
            raise ValueError(f"unknown subtask(s) {', '.join(unknown)}; known: {', '.join(known)}")
        return v

    @field_validator("benchmark_fingerprints")
    @classmethod
    def _readable_fingerprints(cls, v: list[str]) -> list[str]:
        from numerical3d.dataset.fingerprint import read_fingerprints

        for path in v:  # a missing or malformed file fails with the plan, naming the file and line
            read_fingerprints(path)
        return v

    @model_serializer(mode="wrap")
    def _omit_off(self, handler):  # a build without pruning records the same config as before it existed
        data = handler(self)
        if self.debias is None:
            data.pop("debias", None)
        if not self.benchmark_fingerprints:
            data.pop("benchmark_fingerprints", None)
        return data

    @model_validator(mode="after")
    def _sorted(self) -> "DatasetMix":
        # Key order must not change what is built: keep mappings sorted.
        self.quotas = dict(sorted(self.quotas.items()))
        self.source_caps = dict(sorted(self.source_caps.items()))
        self.splits = dict(sorted(self.splits.items()))
        return self


def load_mix(name_or_path: str | Path, **overrides) -> DatasetMix:
    """Load a bundled mix (`default`, `demo`) or a YAML file, with `overrides` merged into it by the
    one merge rule (`deep_merge`: `media={"mode": "embed"}` changes the mode and keeps the rest)."""
    path = Path(name_or_path)
    if not path.suffix and not path.is_file():  # a folder named like a mix (e.g. the output `demo`) is no config
        path = MIXES_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise ConfigError(f"{name_or_path}: no such config file or preset (presets: {', '.join(presets('mixes'))})")
    data = deep_merge(read_yaml_mapping(path), overrides)
    try:
        return DatasetMix.model_validate(data)
    except ValidationError as exc:
        mine = [e for e in exc.errors() if _given(overrides, e["loc"])]
        if mine:  # the caller's value is wrong, not the file it overrides
            raise OverrideError(mine) from None
        raise ConfigError(f"{path}: {describe_errors(exc.errors(), DatasetMix)}") from None


def _given(overrides: dict, loc: tuple) -> bool:
    """Whether the value at `loc` (a pydantic error's location) came from `overrides`, not the file."""
    node: object = overrides
    for part in loc:
        if not isinstance(node, dict):
            return True  # the override replaced this whole branch
        if part not in node:
            return False
        node = node[part]
    return bool(loc)


class OverrideError(ConfigError):
    """An override passed to `load_mix` is invalid; the message names the field, the value and why."""

    def __init__(self, errors: list[dict], prefix: str = ""):
        self.errors = errors
        super().__init__(describe_errors(errors, DatasetMix, prefix=prefix))

    def under(self, prefix: str) -> "OverrideError":
        """The same errors, their fields named under `prefix` (where the caller took the overrides from)."""
        return OverrideError(self.errors, prefix)
