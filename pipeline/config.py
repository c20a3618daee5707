"""The build configuration: the dataset mix, caps, balancing, splits and media options.

Loaded from YAML (a preset name shipped in `pipeline/presets/` or a file path) into a
pydantic model, so that a typo in a key or a bad value fails with the field's name
before any work starts. The resolved config is written into the manifest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

PRESETS_DIR = Path(__file__).parent / "presets"


class Balance(BaseModel):
    """How answers are balanced inside each subtask (see docs/dataset.md)."""

    model_config = ConfigDict(extra="forbid")

    discrete: bool = True  # near-uniform over answer classes (count values, direction classes, letters)
    numeric_bins: int = Field(8, ge=1)  # numeric answers spread over this many log-magnitude bins
    letters: bool = True  # multiple-choice answer letters balanced


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


class BuildConfig(BaseModel):
    """Everything that decides the dataset's content, apart from the candidates and the seed."""

    model_config = ConfigDict(extra="forbid")

    name: str = "Numerical3D-50k"
    total: int = Field(50_000, ge=1)
    quotas: dict[str, float]  # subtask -> share of the total (normalised; need not sum to 1)
    source_caps: dict[str, float] = Field(default_factory=dict)  # source -> max share of the total
    scene_cap: int | None = Field(None, ge=1)  # max items from one scene
    scene_subtask_cap: int | None = Field(None, ge=1)  # max items of one subtask from one scene
    fill: Literal["proportional", "none"] = "proportional"
    strict: bool = False  # raise when any quota or the total cannot be met (instead of filling / reporting)
    splits: dict[str, float] = Field(default_factory=lambda: {"train": 1.0})  # share of scenes per split
    balance: Balance = Field(default_factory=Balance)
    shards: ShardOptions = Field(default_factory=ShardOptions)
    media: MediaOptions = Field(default_factory=MediaOptions)
    preview: PreviewOptions = Field(default_factory=PreviewOptions)
    exclude_scenes_file: str | None = None  # extra `source<TAB>scene_id` list excluded like VSI-Bench's

    @field_validator("quotas")
    @classmethod
    def _quotas_positive(cls, v: dict[str, float]) -> dict[str, float]:
        if not v:
            raise ValueError("quotas: at least one subtask needs a share")
        bad = {k: s for k, s in v.items() if not s > 0}
        if bad:
            raise ValueError(f"quotas: shares must be > 0, got {bad}")
        return v

    @field_validator("source_caps")
    @classmethod
    def _caps_are_shares(cls, v: dict[str, float]) -> dict[str, float]:
        bad = {k: s for k, s in v.items() if not 0 < s <= 1}
        if bad:
            raise ValueError(f"source_caps: caps are shares of the total in (0, 1], got {bad}")
        return v

    @field_validator("splits")
    @classmethod
    def _splits_valid(cls, v: dict[str, float]) -> dict[str, float]:
        if not v or any(not s > 0 for s in v.values()):
            raise ValueError(f"splits: need at least one split, each with a share > 0, got {v}")
        for name in v:
            if not name.replace("_", "").isalnum():
                raise ValueError(f"splits: split name {name!r} must be alphanumeric (it names files)")
        return v

    @model_validator(mode="after")
    def _sorted(self) -> "BuildConfig":
        # Key order must not change what is built: keep mappings sorted.
        self.quotas = dict(sorted(self.quotas.items()))
        self.source_caps = dict(sorted(self.source_caps.items()))
        self.splits = dict(sorted(self.splits.items()))
        return self


class ConfigError(ValueError):
    """A build config file cannot be read; names the file and the problem."""


def load_config(name_or_path: str | Path, **overrides) -> BuildConfig:
    """Load a preset (`default`, `demo`) or a YAML file; `overrides` replace top-level keys."""
    path = Path(name_or_path)
    if not path.suffix and not path.exists():
        path = PRESETS_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        presets = sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))
        raise ConfigError(f"{name_or_path}: no such config file or preset (presets: {', '.join(presets)})")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return BuildConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
