"""Training configuration: one YAML file per run, mapped onto TRL's `GRPOConfig`.

A config may name a `base:` YAML (path relative to itself) that it overrides key by key, so each
ablation file states only what differs from the paper run. `loss_type` and `beta` are always set
explicitly because TRL's defaults ("dapo", 0.0) are not the paper's (sequence-mean GRPO, KL 0.02).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

CONFIG_DIR = Path(__file__).parent / "configs"


class ConfigError(ValueError):
    """A training config that cannot be used; the message names the file and the field."""


@dataclass
class ModelConfig:
    name_or_path: str = "Qwen/Qwen2.5-VL-7B-Instruct"
    dtype: str = "bfloat16"  # torch dtype name, or "auto"
    attn_implementation: str | None = None  # e.g. "flash_attention_2" on GPUs


@dataclass
class DataConfig:
    dataset: str | None = None  # local folder or Hub id; the CLI's --dataset overrides it
    split: str = "train"
    max_frames: int = 8  # frames per prompt, sampled uniformly in time
    max_pixels: int = 448 * 448  # per frame, after resizing (aspect kept)
    max_total_pixels: int = 8 * 448 * 448  # per prompt: lowers the per-frame cap when frames are many
    subtasks: list[str] | None = None  # keep only these subtasks
    max_items: int | None = None  # first N items after shuffling (smoke runs)
    shuffle_seed: int = 0


@dataclass
class RewardConfig:
    operator: Literal["snra", "tanh", "binary"] = "snra"
    schedule: Literal["sigmoid", "linear", "fixed"] = "sigmoid"
    kmin: float = 1.0
    kmax: float = 100.0
    s: float = 10.0
    tau: float = 0.5
    k_fixed: float | None = None  # sharpness of the fixed-k rows (S2, S3); None means kmax
    format_weight: float = 0.1  # lambda: R = (1 - lambda) r + lambda r_fmt
    binary_rel_tol: float = 0.05  # S1: a numeric answer is correct within this relative error
    binary_error_tol: float = 0.0  # S1: other kinds are correct when the verifier error is <= this


@dataclass
class AdvantageConfig:
    mode: Literal["ap", "grpo", "absolute"] = "ap"
    alpha: float = 1.0
    clip: float | None = 1.5
    near_miss: float = 0.5  # accuracy reward at or above which an imperfect sample is a near miss


@dataclass
class TrainConfig:
    """One training run: model, data, rewards, advantage and the GRPO hyperparameters."""

    name: str = "ap-grpo"
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    advantage: AdvantageConfig = field(default_factory=AdvantageConfig)
    # GRPO hyperparameters (paper section 4.1); everything else goes through `grpo`.
    num_generations: int = 8
    learning_rate: float = 1e-6
    weight_decay: float = 0.01
    beta: float = 0.02
    loss_type: str = "grpo"
    num_train_epochs: float = 1.0
    max_steps: int = -1
    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 1
    max_completion_length: int = 512
    temperature: float = 1.0
    seed: int = 0
    grpo: dict[str, Any] = field(default_factory=dict)  # any other GRPOConfig field, passed as is

    def to_grpo_config(self, output_dir: str | os.PathLike, **overrides: Any):
        """The TRL `GRPOConfig` of this run (`overrides` win, e.g. from the CLI)."""
        import torch
        from trl import GRPOConfig

        names = {f.name for f in dataclasses.fields(GRPOConfig)}
        unknown = sorted(set(self.grpo) - names)
        if unknown:
            raise ConfigError(f"config {self.name!r}: unknown GRPOConfig field(s) under grpo: {unknown}")
        bf16 = self.model.dtype == "bfloat16" and torch.cuda.is_available()
        kwargs: dict[str, Any] = dict(
            output_dir=str(output_dir),
            num_generations=self.num_generations,
            learning_rate=self.learning_rate,
            weight_decay=self.weight_decay,
            beta=self.beta,
            loss_type=self.loss_type,
            num_train_epochs=self.num_train_epochs,
            max_steps=self.max_steps,
            per_device_train_batch_size=self.per_device_train_batch_size,
            gradient_accumulation_steps=self.gradient_accumulation_steps,
            max_completion_length=self.max_completion_length,
            temperature=self.temperature,
            seed=self.seed,
            reward_weights=[1.0 - self.reward.format_weight, self.reward.format_weight],
            scale_rewards="group",
            multi_objective_aggregation="sum_then_normalize",
            logging_steps=1,
            report_to="none",
            bf16=bf16,
            remove_unused_columns=False,
        )
        kwargs.update(self.grpo)
        kwargs.update(overrides)
        return GRPOConfig(**kwargs)


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _read(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    path = path.resolve()
    if path in seen:
        raise ConfigError(f"{path}: circular 'base' chain")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config must be a YAML mapping, got {type(data).__name__}")
    base = data.pop("base", None)
    if base is None:
        return data
    return _merge(_read(path.parent / base, seen + (path,)), data)


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {unknown}; known: {sorted(names)}")
    kwargs = {}
    for key, value in data.items():
        sub = {"model": ModelConfig, "data": DataConfig, "reward": RewardConfig, "advantage": AdvantageConfig}
        if cls is TrainConfig and key in sub:
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: field {key!r} must be a mapping")
            value = _build(sub[key], value, f"{where}: {key}")
        kwargs[key] = value
    return cls(**kwargs)


def _check(cfg: TrainConfig, where: str) -> None:
    choices = {
        "reward.operator": (cfg.reward.operator, ("snra", "tanh", "binary")),
        "reward.schedule": (cfg.reward.schedule, ("sigmoid", "linear", "fixed")),
        "advantage.mode": (cfg.advantage.mode, ("ap", "grpo", "absolute")),
    }
    for name, (value, allowed) in choices.items():
        if value not in allowed:
            raise ConfigError(f"{where}: {name} = {value!r}; choose one of {list(allowed)}")
    if not 0.0 <= cfg.reward.format_weight <= 1.0:
        raise ConfigError(f"{where}: reward.format_weight must be in [0, 1], got {cfg.reward.format_weight}")
    if cfg.reward.kmin <= 0 or cfg.reward.kmax < cfg.reward.kmin:
        raise ConfigError(f"{where}: need 0 < reward.kmin <= reward.kmax, got {cfg.reward.kmin}, {cfg.reward.kmax}")
    if cfg.advantage.alpha < 0:
        raise ConfigError(f"{where}: advantage.alpha must be >= 0, got {cfg.advantage.alpha}")
    if cfg.advantage.clip is not None and cfg.advantage.clip <= 0:
        raise ConfigError(f"{where}: advantage.clip must be positive or null, got {cfg.advantage.clip}")
    if cfg.num_generations < 2:
        raise ConfigError(f"{where}: num_generations must be >= 2 (groups), got {cfg.num_generations}")


def config_from_dict(data: dict[str, Any], where: str = "<dict>") -> TrainConfig:
    cfg = _build(TrainConfig, data, where)
    _check(cfg, where)
    return cfg


def load_config(path: str | os.PathLike, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """Read a YAML config (following its `base:` chain), apply nested `overrides`, validate.

    A bare name such as `qwen2.5-vl-7b` or `ablations/s1_grpo_binary` is looked up among the
    bundled configs.
    """
    p = Path(path)
    if not p.exists():
        bundled = CONFIG_DIR / (str(path) if str(path).endswith(".yaml") else f"{path}.yaml")
        if not bundled.exists():
            raise ConfigError(f"{path}: no such config file, nor a bundled config of that name (see bundled_configs())")
        p = bundled
    data = _merge(_read(p), overrides or {})
    return config_from_dict(data, str(p))


def bundled_configs() -> list[str]:
    """Names of the bundled configs (paper runs and ablations)."""
    return sorted(str(p.relative_to(CONFIG_DIR).with_suffix("")) for p in CONFIG_DIR.rglob("*.yaml"))


# Smoke-test preset: a few AP-GRPO steps on CPU with the tiny model (sizes keep a step ~1 s).
PRESETS: dict[str, dict[str, Any]] = {
    "tiny-cpu": {
        "model": {"dtype": "float32"},
        "data": {"max_frames": 2, "max_pixels": 56 * 56, "max_total_pixels": 2 * 56 * 56, "max_items": 8},
        "num_generations": 4,
        "per_device_train_batch_size": 4,
        "max_steps": 4,
        "max_completion_length": 24,
        "learning_rate": 1e-3,
        "grpo": {"use_cpu": True, "save_strategy": "no", "gradient_checkpointing": False},
    },
}
