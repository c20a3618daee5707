"""Training configuration: one YAML file per run, mapped onto TRL's `GRPOConfig`.

A config may name a `base:` YAML (path relative to itself) that it overrides key by key, so each
ablation file states only what differs from the paper run. `loss_type` and `beta` are always set
explicitly because TRL's defaults ("dapo", 0.0) are not the paper's (sequence-mean GRPO, KL 0.02).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from numerical3d.configfile import ConfigError, deep_merge, read_yaml_mapping

CONFIG_DIR = Path(__file__).parent / "configs"


class _Section(BaseModel):
    """A config section: unknown keys are errors, so a typo never silently falls back to a default."""

    model_config = ConfigDict(extra="forbid")


class LoraConfig(_Section):
    """LoRA adapters (peft) on the language model's projections; the base weights stay frozen and the
    KL reference is the base itself (TRL disables the adapters), so no second model is loaded."""

    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    # A regular expression over module names (peft's full-match form): the language model's attention
    # and MLP projections. The vision tower's blocks have modules of the same short names, so a plain
    # list of names would adapt it too.
    target_modules: str = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"

    def peft_config(self):
        """The `peft.LoraConfig` TRL wraps the policy with."""
        from peft import LoraConfig as PeftLora

        return PeftLora(r=self.r, lora_alpha=self.alpha, lora_dropout=self.dropout,
                        target_modules=self.target_modules, task_type="CAUSAL_LM")


class ModelConfig(_Section):
    """The policy. `dtype` is the compute precision: weights and AdamW state always stay in fp32
    (the master copy), and "bfloat16" runs forward and backward under bf16 autocast. Loading the
    weights in bf16 instead would round lr-1e-6 updates away: measured, 1.4% of weights changed in 4 steps vs 100% with fp32 masters.
    With `lora`, only the adapters train: the frozen base loads in `dtype` and peft keeps the
    adapters in fp32."""

    name_or_path: str = "Qwen/Qwen2.5-VL-7B-Instruct"
    dtype: Literal["bfloat16", "float32"] = "bfloat16"
    # None: flash_attention_2 where the flash-attn package imports and a GPU is present, else sdpa
    # (training.run logs which, once).
    attn_implementation: str | None = None
    # The KL reference model only runs forward passes, so it needs no fp32 master copy: bf16 halves its
    # GPU memory under DDP and its host RAM while loading (DeepSpeed casts it to bf16 on the GPU anyway).
    reference_dtype: Literal["bfloat16", "float32"] = "bfloat16"
    freeze_vision: bool = False  # the vision tower (and its merger) gets no gradient and no optimizer state
    lora: LoraConfig | None = None  # None: full fine-tuning (the paper's)


class VideoConfig(_Section):
    """How a question's frames go in when `data.visual` is "video": one Qwen2.5-VL video (temporal
    patches, time-aligned rotary positions) instead of separate images. The defaults follow how
    `numerical3d benchmark run vsibench` evaluates (lmms-eval's Qwen2.5-VL setting): up to 32 frames
    sampled uniformly, each frame sized by the processor's own video limit."""

    max_frames: int = Field(32, ge=1)  # frames per prompt, sampled uniformly in time (first and last kept)
    max_pixels: int | None = Field(None, gt=0)  # per frame (aspect kept); None: the processor's own limit
    # The dataset stores frame ids, not timestamps: a question's frames (a scene's uniform sample over
    # its walkthrough) are taken to span this many seconds, which sets Qwen's `second_per_grid_ts`.
    # 60 s is about a mean ScanNet scan (2.5M frames over 1,513 scans at 30 Hz: 55 s).
    duration_s: float = Field(60.0, gt=0)


class DataConfig(_Section):
    dataset: str | None = None  # local folder or Hub id; the CLI's --dataset overrides it
    split: str = "train"
    max_frames: int = Field(8, ge=0)  # frames per prompt, sampled uniformly in time
    max_pixels: int = Field(448 * 448, gt=0)  # per frame, after resizing (aspect kept)
    max_total_pixels: int = Field(8 * 448 * 448, gt=0)  # per prompt: lowers the per-frame cap when frames are many
    subtasks: list[str] | None = None  # keep only these subtasks
    max_items: int | None = Field(None, ge=0)  # first N items after shuffling (smoke runs)
    shuffle_seed: int = 0
    system_prompt: str | None = None  # a system turn before each question
    # Items without frames (box-only sources, VSI-590K rows without media): "skip" leaves them out;
    # "text" keeps them and makes the whole run text-only (no frames for any item), because TRL
    # cannot collate a batch that mixes items with and without images.
    frameless: Literal["skip", "text"] = "skip"
    # "images": each frame is an image part (the paper recipe, see docs/training.md); "video": the
    # frames are one video part under `video` (Qwen2.5-VL's native video input; needs torchvision).
    visual: Literal["images", "video"] = "images"
    video: VideoConfig = Field(default_factory=VideoConfig)

    @property
    def frames_per_prompt(self) -> int:
        """The frame cap of the visual mode: `video.max_frames` for a video, `max_frames` for images."""
        return self.video.max_frames if self.visual == "video" else self.max_frames


class PhiSection(_Section):
    """Phi's calibration (the map from a discrete verifier score V to an SNRA error): a complete
    failure (V = 0) gets reward `eps_r` at the sharpness `kmax`. `kmax` null (the default) means the
    run's own terminal sharpness (`reward.kmax`, or `reward.k_fixed` for a fixed schedule that sets
    it), so a k_max sweep keeps the failure reward at `eps_r` instead of changing two things at once.
    Set a number to calibrate at a fixed k whatever the schedule (e.g. 100, the verifiers' default)."""

    eps_r: float = Field(1e-2, gt=0.0, lt=1.0)
    gamma: float = Field(1.0, gt=0.0)
    eps: float = Field(1e-3, gt=0.0, lt=0.5)
    kmax: float | None = Field(None, gt=0.0)


class RewardConfig(_Section):
    operator: Literal["snra", "tanh", "binary"] = "snra"
    schedule: Literal["sigmoid", "linear", "fixed"] = "sigmoid"
    kmin: float = 1.0
    kmax: float = 100.0
    s: float = Field(10.0, gt=0)
    tau: float = 0.5
    k_fixed: float | None = Field(None, gt=0)  # sharpness of the fixed-k rows (S2, S3); None means kmax
    format_weight: float = Field(0.1, ge=0.0, le=1.0)  # lambda: R = (1 - lambda) r + lambda r_fmt
    # S1's 0-1 reward (operator "binary"). A number is correct within this relative error (VSI-Bench's
    # strictest MRA threshold); coordinates (grounding) within this Euclidean error relative to the
    # answer's norm (the strictest threshold of the project's grounding MRA).
    binary_rel_tol: float = Field(0.05, ge=0.0)
    binary_grounding_tol: float = Field(0.05, ge=0.0)
    binary_angle_tol: float = Field(5.0, ge=0.0, le=180.0)  # S1: an angle is correct within this many degrees (wrapped)
    phi: PhiSection = Field(default_factory=PhiSection)
    # Named verifier parameters applied to every item's spec before scoring (verifiers/profiles.py):
    # "paper" scores the specs as generated (the paper's appendix values); "strict" pays a guess less.
    profile: str = "paper"

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, name: str) -> str:
        from numerical3d.verifiers.profiles import PROFILES

        if name not in PROFILES:
            raise ValueError(f"reward.profile = {name!r}: unknown verifier profile; known: {', '.join(PROFILES)}")
        return name

    @model_validator(mode="after")
    def _k_range(self) -> "RewardConfig":
        if self.kmin <= 0 or self.kmax < self.kmin:
            raise ValueError(f"need 0 < reward.kmin <= reward.kmax, got {self.kmin}, {self.kmax}")
        return self

    def calibration_k(self) -> float:
        """The sharpness Phi is calibrated at: `phi.kmax`, else the schedule's terminal sharpness."""
        if self.phi.kmax is not None:
            return self.phi.kmax
        return self.k_fixed if self.schedule == "fixed" and self.k_fixed is not None else self.kmax

    def phi_config(self):
        """The `verifiers.PhiConfig` of this run (eta calibrated at `calibration_k()`)."""
        from numerical3d.verifiers import PhiConfig

        return PhiConfig(eps_r=self.phi.eps_r, kmax=self.calibration_k(), gamma=self.phi.gamma, eps=self.phi.eps)

    def schedule_config(self) -> dict[str, Any]:
        """The `verifiers.make_schedule` config of this reward's sharpness schedule."""
        if self.schedule == "sigmoid":
            return {"name": "sigmoid", "kmin": self.kmin, "kmax": self.kmax, "s": self.s, "tau": self.tau}
        if self.schedule == "linear":
            return {"name": "linear", "kmin": self.kmin, "kmax": self.kmax}
        return {"name": "fixed", "k": self.kmax if self.k_fixed is None else self.k_fixed}


class AdvantageConfig(_Section):
    mode: Literal["ap", "grpo", "absolute"] = "ap"
    alpha: float = Field(1.0, ge=0.0)
    clip: float | None = Field(1.5, gt=0.0)  # null: no clipping
    near_miss: float = 0.5  # accuracy reward at or above which an imperfect sample is a near miss


class BenchmarkSection(BaseModel):
    """A released benchmark (a `benchmark run` name) answered by the policy in memory at every
    validation step: a fixed subset of `subset` questions, drawn once with `seed` and spread evenly
    over the question types, so every step answers the same questions and T_conv is measured on
    the benchmark as the paper does. Any other key is an option of that benchmark's config (for
    vsibench: `frames`, `visual`, `max_pixels`, `table`), checked against it when training starts."""

    model_config = ConfigDict(extra="allow")

    name: str = "vsibench"
    data: Path  # the benchmark as released (the user's own copy)
    subset: int | None = Field(None, ge=1)  # questions per validation; None: the whole benchmark
    seed: int = 0  # draws the subset
    # The policy answers in the format it trains on; "official" is the benchmark's own prompt (16 tokens).
    prompt: Literal["official", "reasoning"] = "reasoning"
    max_new_tokens: int | None = Field(None, ge=1)  # None: 16 for "official", else the run's max_completion_length
    batch_size: int = Field(8, ge=1)
    # The policy's weights and processor at a benchmark step go to <output>/validated/step-N/ (beside its
    # results), outside the checkpoint-* folders that save_total_limit prunes, for evaluation afterwards.
    # "best_and_last": the best step's (highest overall score, the earliest of ties) and the latest step's
    # policies stay, the others are removed once a newer step is saved (their results stay); "all" keeps
    # every step's (one policy per validation: ~125 x 16.6 GB for the 7B paper run); "none" keeps none.
    keep_models: Literal["best_and_last", "all", "none"] = "best_and_last"

    def options(self) -> dict[str, Any]:
        """The benchmark's own options (the keys beyond this section's fields)."""
        return dict(self.model_extra or {})


class ValidationConfig(_Section):
    """Greedy answers on the validation split during training, graded with VSI-Bench's metric;
    with `benchmark`, also a released benchmark at the same steps."""

    split: str = "validation"
    every_steps: int = Field(50, ge=0)  # 0: only after the last step
    max_items: int | None = Field(None, ge=1)  # first N validation items after the seeded shuffle
    max_new_tokens: int | None = Field(None, ge=1)  # None: the run's max_completion_length
    batch_size: int = Field(8, ge=1)
    enabled: bool = True
    benchmark: BenchmarkSection | None = None  # None: T_conv is measured on the validation split


# TRL and Trainer settings the paper leaves open, fixed here (and written out in the paper configs)
# so that a TRL upgrade cannot change a run silently; docs/training.md lists them as our choices.
OPEN_OPTIMIZER_FIELDS = ("max_grad_norm", "adam_beta1", "adam_beta2", "adam_epsilon", "warmup_steps")
OPEN_GRPO_FIELDS = ("use_bias_correction_kl", "epsilon", "epsilon_high", "num_iterations", "top_p", "top_k", "min_p",
                    "repetition_penalty", "mask_truncated_completions", "importance_sampling_level",
                    "top_entropy_quantile", "sync_ref_model", "shuffle_dataset")
# TRL 1.16's vLLM settings that change what a vLLM run computes or whether it starts, with our
# value. A config that turns vLLM on (`grpo.use_vllm`) gets each one it does not set, so a TRL
# upgrade cannot change a run silently; the vLLM recipes write them out with the reason.
# `vllm_max_model_length` is not here: without one, it is the run's longest prompt plus completion
# (`TrainConfig.max_sequence_tokens`), because vLLM would otherwise size its KV cache for the
# model's whole context (128,000 tokens for Qwen2.5-VL) and may not start in its share of the GPU.
VLLM_CHOICES: dict[str, Any] = {
    # vLLM's sampler and the training forward pass differ numerically (kernels, bf16), so the
    # completions are slightly off-policy: correct with the ratio of the two log-probs (TRL's
    # default), masking a whole completion whose ratio leaves [0, 3] (TRL's default cap).
    "vllm_importance_sampling_correction": True,
    "vllm_importance_sampling_mode": "sequence_mask",
    "vllm_importance_sampling_clip_max": 3.0,
    "vllm_importance_sampling_clip_min": None,
    "vllm_model_impl": "vllm",
}
VLLM_COLOCATE_CHOICES: dict[str, Any] = {
    "vllm_gpu_memory_utilization": 0.3,
    "vllm_tensor_parallel_size": 1,
    "vllm_enable_sleep_mode": True,  # frees vLLM's weights and KV cache during the loss pass
}
VLLM_SERVER_CHOICES: dict[str, Any] = {
    # TRL's 240 s is less than a first download of the 7B (16.6 GB) plus the server's start-up.
    "vllm_server_timeout": 1800.0,
}
PROMPT_TEXT_TOKENS = 160  # chat template, system turn and the question, besides the visual tokens
MERGED_PATCH_PIXELS = 28 * 28  # Qwen2.5-VL: 14 x 14 patches, 2 x 2 merged into one token
QWEN_VIDEO_FRAME_PIXELS = 644 * 476  # the video processor's own size for the dataset's 640 x 480 frames

# TrainConfig fields that are GRPOConfig fields of the same name and meaning.
GRPO_FIELDS = ("num_generations", "learning_rate", "weight_decay", "beta", "loss_type", "num_train_epochs", "max_steps",
               "per_device_train_batch_size", "gradient_accumulation_steps", "max_completion_length", "temperature",
               "seed") + OPEN_OPTIMIZER_FIELDS + OPEN_GRPO_FIELDS
# Those that are SFTConfig fields too (a `trainer: sft` run).
SFT_FIELDS = ("learning_rate", "weight_decay", "num_train_epochs", "max_steps", "per_device_train_batch_size",
              "gradient_accumulation_steps", "seed") + OPEN_OPTIMIZER_FIELDS


class TrainConfig(_Section):
    """One training run: model, data, rewards, advantage and the GRPO hyperparameters."""

    name: str = "ap-grpo"
    # grpo: AP-GRPO (or an RL ablation); sft: TRL's SFTTrainer on the canonical completions (Table 3's
    # S0), which uses the model, data, validation and optimizer fields and ignores reward/advantage/GRPO's.
    trainer: Literal["grpo", "sft"] = "grpo"
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    advantage: AdvantageConfig = Field(default_factory=AdvantageConfig)
    validation: ValidationConfig = Field(default_factory=ValidationConfig)
    # GRPO hyperparameters (paper section 4.1); everything else goes through `grpo`.
    num_generations: int = Field(8, ge=2)  # groups need at least two samples
    learning_rate: float = 1e-6
    weight_decay: float = 0.01
    beta: float = 0.02
    loss_type: str = "grpo"
    num_train_epochs: float = 1.0
    max_steps: int = -1
    per_device_train_batch_size: int = Field(8, ge=1)
    gradient_accumulation_steps: int = Field(1, ge=1)
    max_completion_length: int = Field(512, ge=1)
    temperature: float = 1.0
    seed: int = 0
    # Open choices (see OPEN_*_FIELDS). Optimizer: AdamW's usual betas and epsilon, gradient norm
    # clipped at 1, no warm-up.
    max_grad_norm: float = Field(1.0, gt=0)
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    warmup_steps: int = Field(0, ge=0)
    # GRPO: the original GRPO objective (DeepSeekMath): its unbiased k3 KL estimator without TRL
    # 1.16's importance-ratio correction (TRL's default there is True), a symmetric PPO clip 0.2,
    # one update per generation batch (on-policy), every token, no masking of truncated completions.
    use_bias_correction_kl: bool = False
    epsilon: float = Field(0.2, gt=0)
    epsilon_high: float | None = Field(None, gt=0)  # None: the clip is symmetric
    num_iterations: int = Field(1, ge=1)
    importance_sampling_level: Literal["token", "sequence"] = "token"
    top_entropy_quantile: float = Field(1.0, gt=0, le=1)
    mask_truncated_completions: bool = False
    sync_ref_model: bool = False  # the reference stays the initial model
    shuffle_dataset: bool = True
    # Sampling: plain sampling from the model at `temperature` (no nucleus, top-k, min-p or penalty).
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = Field(0, ge=0)  # 0: no top-k filter
    min_p: float | None = Field(None, ge=0, le=1)
    repetition_penalty: float = Field(1.0, gt=0)
    grpo: dict[str, Any] = Field(default_factory=dict)  # any other GRPOConfig field, passed as is

    @model_validator(mode="after")
    def _video_paths(self) -> "TrainConfig":
        """Video input is wired into the GRPO trainer's own generation and log-prob passes only."""
        if self.data.visual == "video" and self.trainer == "sft":
            raise ValueError("data.visual: video is for trainer: grpo; the SFT baseline (TRL's SFTTrainer) takes "
                             "frames as images")
        if self.trainer == "sft" and (self.model.lora or self.model.freeze_vision):
            raise ValueError("model.lora / model.freeze_vision are for trainer: grpo; the SFT baseline trains the "
                             "whole model as the paper's S0")
        if self.data.visual == "video" and self.grpo.get("use_vllm"):
            raise ValueError("data.visual: video generates with transformers; TRL's vLLM rollouts take images only "
                             "(drop grpo.use_vllm / --use-vllm, or use data.visual: images)")
        return self

    @model_validator(mode="after")
    def _vllm_choices(self) -> "TrainConfig":
        """Write TRL's open vLLM settings into `grpo` (see VLLM_CHOICES) and check the context length."""
        if not self.grpo.get("use_vllm") or self.trainer != "grpo":
            return self
        server = self.grpo.get("vllm_mode", "colocate") == "server"
        choices = {**VLLM_CHOICES, **(VLLM_SERVER_CHOICES if server else VLLM_COLOCATE_CHOICES)}
        self.grpo = {**choices, "vllm_max_model_length": self.vllm_length(), **self.grpo}
        length = self.grpo["vllm_max_model_length"]
        if length is not None and length < self.max_sequence_tokens():
            raise ValueError(f"grpo.vllm_max_model_length = {length} is shorter than a prompt plus completion "
                             f"({self.prompt_tokens()} + {self.max_completion_length} = {self.max_sequence_tokens()})")
        return self

    def visual_tokens(self) -> int:
        """Visual tokens of one prompt at the configured frame budget (one per 28 x 28 pixels)."""
        data = self.data
        if data.visual == "video":
            per_frame = data.video.max_pixels or QWEN_VIDEO_FRAME_PIXELS
            return math.ceil(data.video.max_frames / 2) * per_frame // MERGED_PATCH_PIXELS  # 2 frames per patch
        if data.max_frames == 0:
            return 0
        per_frame = min(data.max_pixels, data.max_total_pixels // data.max_frames)
        return data.max_frames * per_frame // MERGED_PATCH_PIXELS

    def prompt_tokens(self) -> int:
        """The longest prompt at the configured frame budget: visual tokens plus the text."""
        return self.visual_tokens() + PROMPT_TEXT_TOKENS

    def max_sequence_tokens(self) -> int:
        """The longest prompt plus `max_completion_length`."""
        return self.prompt_tokens() + self.max_completion_length

    def vllm_length(self) -> int:
        """vLLM's context when a config sets none: the longest sequence with at least 512 tokens to
        spare (the text part of a prompt is an estimate), rounded up to a multiple of 1024."""
        return 1024 * math.ceil((self.max_sequence_tokens() + 512) / 1024)

    def to_grpo_config(self, output_dir: str | os.PathLike, **overrides: Any):
        """The TRL `GRPOConfig` of this run (`overrides` win, e.g. from the CLI)."""
        from trl import GRPOConfig

        return self._trainer_args(GRPOConfig, GRPO_FIELDS, output_dir, overrides,
                                  reward_weights=[1.0 - self.reward.format_weight, self.reward.format_weight],
                                  scale_rewards="group", multi_objective_aggregation="sum_then_normalize")

    def to_sft_config(self, output_dir: str | os.PathLike, **overrides: Any):
        """The TRL `SFTConfig` of a `trainer: sft` run (`overrides` win). The loss is on the
        completion only; no truncation, because a prompt's image tokens alone may exceed TRL's
        default `max_length` and cutting them breaks the image/token alignment."""
        from trl import SFTConfig

        return self._trainer_args(SFTConfig, SFT_FIELDS, output_dir, overrides, max_length=None,
                                  completion_only_loss=True)

    def _trainer_args(self, cls: type, fields: tuple[str, ...], output_dir: str | os.PathLike,
                      overrides: dict[str, Any], **specific: Any):
        """`cls` (GRPOConfig or SFTConfig) from `fields` of this config, the run-wide settings,
        `specific`, then the `grpo:` passthrough and `overrides`."""
        import torch

        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(self.grpo) - names)
        if unknown:
            raise ConfigError(f"config {self.name!r}: unknown {cls.__name__} field(s) under grpo: {unknown}")
        kwargs: dict[str, Any] = {name: getattr(self, name) for name in fields}
        kwargs.update(
            output_dir=str(output_dir),
            logging_steps=1,
            report_to="none",
            bf16=self.model.dtype == "bfloat16",  # autocast over fp32 weights, on CPU too (torch.autocast("cpu"))
            use_cpu=not torch.cuda.is_available(),
            remove_unused_columns=False,  # the columns are made by a lazy transform; the table has none of them
            **specific,
        )
        kwargs.update(self.grpo)
        kwargs.update(overrides)
        return cls(**kwargs)


def _read(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    path = path.resolve()
    if path in seen:
        raise ConfigError(f"{path}: circular 'base' chain")
    data = read_yaml_mapping(path)
    base = data.pop("base", None)
    if base is None:
        return data
    return deep_merge(_read(_base_path(path, str(base)), seen + (path,)), data)


def _base_path(config: Path, base: str) -> Path:
    """A `base:` file beside the config, else the bundled config of that name (`qwen2.5-vl-3b`)."""
    beside = config.parent / base
    if beside.exists():
        return beside
    bundled = CONFIG_DIR / (base if base.endswith(".yaml") else f"{base}.yaml")
    if bundled.is_file():
        return bundled
    raise ConfigError(f"{config}: base: {base} is neither a file beside it ({beside}) nor a bundled config "
                      f"({', '.join(bundled_configs())})")


def _explain(exc: ValidationError, where: str) -> str:
    """One line per problem, naming the file and the dotted field; unknown keys listed with the known ones."""
    unknown: dict[tuple[str, ...], list[str]] = {}
    problems: list[str] = []
    for err in exc.errors():
        loc = tuple(str(part) for part in err["loc"])
        if err["type"] == "extra_forbidden":
            unknown.setdefault(loc[:-1], []).append(loc[-1])
        elif err["type"] == "value_error":  # our validators name their fields
            problems.append(err["msg"].removeprefix("Value error, "))
        else:
            problems.append(f"{'.'.join(loc)} = {err['input']!r}: {err['msg']}")
    for parent, names in unknown.items():
        section = TrainConfig.model_fields[parent[0]].annotation if parent else TrainConfig
        known = sorted(section.model_fields) if len(parent) <= 1 else []
        prefix = f"{'.'.join(parent)}: " if parent else ""
        for name in sorted(names):
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            problems.append(f"{prefix}unknown field '{name}'; "
                            + (f"did you mean '{close[0]}'?" if close else f"known: {', '.join(known) or 'none'}"))
    return "\n".join(f"{where}: {p}" for p in problems)


def config_from_dict(data: dict[str, Any], where: str = "<dict>") -> TrainConfig:
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, where)) from None


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
    data = deep_merge(_read(p), overrides or {})
    return config_from_dict(data, str(p))


def bundled_configs() -> list[str]:
    """Names of the bundled configs (paper runs and ablations)."""
    return sorted(str(p.relative_to(CONFIG_DIR).with_suffix("")) for p in CONFIG_DIR.rglob("*.yaml"))


# Smoke-test preset: a few AP-GRPO steps on CPU with the tiny model (sizes keep a step ~1 s).
PRESET_CONFIGS = {"tiny-cpu": "qwen2.5-vl-3b"}  # the bundled config a preset overrides when no --config is given
PRESETS: dict[str, dict[str, Any]] = {
    "tiny-cpu": {
        "data": {"max_frames": 2, "max_pixels": 56 * 56, "max_total_pixels": 2 * 56 * 56, "max_items": 8},
        "num_generations": 4,
        "per_device_train_batch_size": 4,
        "max_steps": 4,
        "max_completion_length": 24,
        "learning_rate": 1e-3,
        "validation": {"every_steps": 2, "max_items": 8, "batch_size": 8},
        "grpo": {"use_cpu": True, "save_strategy": "no", "gradient_checkpointing": False},
    },
}
