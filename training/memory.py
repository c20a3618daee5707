"""Memory planner: will a training config fit the GPUs of a launch, before anything loads?

The model is the real architecture, built on the meta device from its `config.json` (the bundled
ones under `training/models/` for the Qwen2.5-VL checkpoints the paper trains, or a local model
folder), so parameter counts are exact and no weight is read. Model states follow DeepSpeed's own
estimators (`estimate_zero2_model_states_mem_needs`, `estimate_zero3_model_states_mem_needs`:
called when deepspeed is installed, else the same formulas transcribed below) and DeepSpeed's
bucket sizes its own defaults; plain DDP, LoRA, the reference model, and the three phases of a step
(the loss pass's activations and TRL's fused log-prob head; generation's KV cache, prefill and
ZeRO-3 gather; validation's, which gathers under ZeRO-3 even when vLLM generates) are this module's
estimates, as is a colocated vLLM's start-up check (weights + KV cache at its max model length
inside its share). docs/training.md "Memory planner" states each formula. A launch that does not
fit is refused with the biggest term, or vLLM's shortfall, and the setting that fixes it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from numerical3d.configfile import read_yaml_mapping
from numerical3d.errors import Numerical3DError
from numerical3d.training.config import TrainConfig

MODELS_DIR = Path(__file__).parent / "models"
ACCELERATE_DIR = Path(__file__).parent / "accelerate"
GiB = 1024**3
RUNTIME_RESERVE_GIB = 3.0  # CUDA context, NCCL buffers and allocator fragmentation per GPU
# TRL 1.16's fused log-prob head projects 4,096 tokens x 32,768 vocabulary entries at a time
LOGPROB_TOKEN_TILE = 4096
LOGPROB_VOCAB_TILE = 32768
ASLEEP_VLLM_GIB = 1.0  # what a sleeping colocated vLLM engine keeps (CUDA graphs, context)
# vLLM's own start-up needs besides weights and KV cache: the profiling forward pass's activations,
# CUDA graphs and its sampler's buffers (estimate)
VLLM_OVERHEAD_GIB = 3.0
# The accelerate recipe each bundled paper model is launched with (fits 8 x 80 GB, docs/training.md).
RECIPES = {"qwen2.5-vl-7b": "zero3", "qwen2.5-vl-3b": "zero2"}
HUB_NAMES = {"Qwen/Qwen2.5-VL-7B-Instruct": "qwen2.5-vl-7b", "Qwen/Qwen2.5-VL-3B-Instruct": "qwen2.5-vl-3b"}


class MemoryPlanError(ValueError, Numerical3DError):
    """An input the planner cannot use (unknown model or accelerate config); the message names it."""


@dataclass(frozen=True)
class ModelSize:
    """What the planner needs from an architecture, counted on the meta device."""

    name: str
    total: int  # parameters, tied weights once, vision tower included
    vision: int
    largest_layer: int  # the largest module's own parameters (DeepSpeed's ZeRO-3 gather unit)
    layers: int
    hidden: int
    intermediate: int
    kv_dim: int  # key/value heads x head size
    vocab: int
    vision_depth: int
    vision_hidden: int
    vision_intermediate: int
    max_position_embeddings: int  # the context vLLM takes when vllm_max_model_length is unset


def model_config_dir(name_or_path: str) -> Path:
    """The folder whose config.json describes `name_or_path`: a local model folder, or the bundled
    config of a Qwen2.5-VL checkpoint the paper trains (by Hub id or bundled name)."""
    p = Path(name_or_path)
    if (p / "config.json").is_file():
        return p
    name = HUB_NAMES.get(name_or_path, name_or_path)
    if (MODELS_DIR / name / "config.json").is_file():
        return MODELS_DIR / name
    raise MemoryPlanError(f"{name_or_path}: no config.json there and no bundled architecture of that name "
                    f"(bundled: {sorted(HUB_NAMES)})")


def model_size(name_or_path: str) -> ModelSize:
    """Build the architecture on the meta device (no weights, no memory) and count its parameters;
    counted once per process for each config.json content (a 7B model takes seconds to build)."""
    folder = model_config_dir(name_or_path)
    return _counted(str(name_or_path), str(folder), (folder / "config.json").read_text())


@lru_cache(maxsize=16)
def _counted(name_or_path: str, folder: str, config_json: str) -> ModelSize:
    """`model_size` of the config in `folder`, whose config.json reads `config_json` (the cache key)."""
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    config = AutoConfig.from_pretrained(folder)
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config)
    total = sum(p.numel() for p in model.parameters())  # parameters() yields a tied weight once
    visual = model.model.visual
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    text, vision = config.text_config, config.vision_config
    head = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    return ModelSize(
        name=str(name_or_path), total=total, vision=sum(p.numel() for p in visual.parameters()), largest_layer=largest,
        layers=text.num_hidden_layers, hidden=text.hidden_size, intermediate=text.intermediate_size,
        kv_dim=text.num_key_value_heads * head, vocab=text.vocab_size, vision_depth=vision.depth,
        vision_hidden=vision.hidden_size, vision_intermediate=vision.intermediate_size,
        max_position_embeddings=text.max_position_embeddings)


# ----------------------------------------------------------------------------- launch setups
@dataclass(frozen=True)
class Launch:
    """The parts of an accelerate config that decide memory."""

    source: str
    strategy: str  # "single", "ddp", "zero2" or "zero3"
    num_processes: int
    offload_optimizer: bool = False
    offload_param: bool = False
    zero3_init: bool = True
    buckets: tuple[tuple[str, Any], ...] = ()  # DeepSpeed bucket settings a JSON config sets (else its defaults)


def accelerate_config_path(name_or_path: str | os.PathLike) -> Path:
    """A bundled accelerate config by name (`zero2`, `zero3.yaml`, ...) or a file path."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    bundled = ACCELERATE_DIR / (p.name if p.suffix == ".yaml" else f"{p.name}.yaml")
    if bundled.is_file():
        return bundled
    known = sorted(q.stem for q in ACCELERATE_DIR.glob("*.yaml"))
    raise MemoryPlanError(f"{name_or_path}: no such accelerate config file, nor a bundled one (bundled: {known})")


def read_launch(name_or_path: str | os.PathLike, gpus: int | None = None) -> Launch:
    """The launch an accelerate config describes (`gpus` overrides its num_processes)."""
    path = accelerate_config_path(name_or_path)
    data = read_yaml_mapping(path, MemoryPlanError, "accelerate config")
    kind = str(data.get("distributed_type", "NO")).upper()
    n = int(gpus or data.get("num_processes", 1) or 1)
    if kind == "DEEPSPEED":
        ds = data.get("deepspeed_config") or {}
        buckets: tuple[tuple[str, Any], ...] = ()
        if "deepspeed_config_file" in ds:
            try:
                zero = json.loads(Path(ds["deepspeed_config_file"]).read_text()).get("zero_optimization", {})
            except (OSError, ValueError) as exc:
                raise MemoryPlanError(f"{path}: cannot read its deepspeed_config_file: {exc}") from None
            ds = {**ds, **_zero_section(zero)}
            buckets = tuple((k, zero[k]) for k in BUCKET_KEYS if isinstance(zero.get(k), (int, float, bool)))
        stage = int(ds.get("zero_stage", 2))
        if stage not in (2, 3):
            raise MemoryPlanError(f"{path}: ZeRO stage {stage} is not planned (use 2 or 3)")
        return Launch(str(path), f"zero{stage}", n, offload_optimizer=ds.get("offload_optimizer_device", "none") == "cpu",
                      offload_param=ds.get("offload_param_device", "none") == "cpu",
                      zero3_init=bool(ds.get("zero3_init_flag", stage == 3)), buckets=buckets)
    if kind in ("MULTI_GPU", "NO"):
        return Launch(str(path), "ddp" if n > 1 else "single", n)
    raise MemoryPlanError(f"{path}: distributed_type {kind} is not planned (MULTI_GPU or DEEPSPEED)")


BUCKET_KEYS = ("reduce_bucket_size", "allgather_bucket_size", "stage3_prefetch_bucket_size", "overlap_comm")


def _zero_section(zero: dict[str, Any]) -> dict[str, Any]:
    """The accelerate-style keys of a DeepSpeed JSON config's zero_optimization section."""
    return {"zero_stage": zero.get("stage", 2),
            "offload_optimizer_device": (zero.get("offload_optimizer") or {}).get("device", "none"),
            "offload_param_device": (zero.get("offload_param") or {}).get("device", "none")}


def launch_from_environment() -> Launch | None:
    """The launch this process runs under, from the variables `accelerate launch` sets; None outside it."""
    env = os.environ
    n = int(env.get("WORLD_SIZE", "1"))
    if env.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        stage = int(env.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", "2"))
        return Launch("environment", f"zero{stage}", n,
                      offload_optimizer=env.get("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "none") == "cpu",
                      offload_param=env.get("ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE", "none") == "cpu",
                      zero3_init=env.get("ACCELERATE_DEEPSPEED_ZERO3_INIT", "true").lower() == "true")
    if "WORLD_SIZE" in env or "ACCELERATE_MIXED_PRECISION" in env:
        return Launch("environment", "ddp" if n > 1 else "single", n)
    return None


# ------------------------------------------------------------------------- DeepSpeed formulas
def zero2_model_states(total: int, gpus: int, per_node: int, offload: bool) -> tuple[int, int]:
    """(host bytes per node, GPU bytes) of ZeRO-2 model states: DeepSpeed's estimator (its
    additional_buffer_factor 1.5), or its formula where deepspeed is not installed."""
    try:
        from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs
    except ImportError:
        return zero2_formula(total, gpus, per_node, offload)
    return estimate_zero2_model_states_mem_needs(total, per_node, gpus // per_node, offload)


def zero2_formula(total: int, gpus: int, per_node: int, offload: bool) -> tuple[int, int]:
    """DeepSpeed 0.19's ZeRO-2 estimate, for machines without deepspeed."""
    if offload:
        return int(total * max(4 * gpus, 16) * 1.5), 2 * total
    # bf16 weights whole; bf16 and fp32 gradients, fp32 master weights and Adam's two moments
    # (2 + 4 + 4 + 8 bytes) partitioned over the GPUs
    return int(total * 4 * per_node * 1.5), 2 * total + int(18 * total / gpus)


def zero3_model_states(total: int, largest: int, gpus: int, per_node: int, offload_optimizer: bool,
                       offload_param: bool, zero_init: bool) -> tuple[int, int]:
    """(host bytes per node, GPU bytes) of ZeRO-3 model states, DeepSpeed's estimator or formula."""
    try:
        from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    except ImportError:
        return zero3_formula(total, largest, gpus, per_node, offload_optimizer, offload_param, zero_init)
    host, gpu, _ = estimate_zero3_model_states_mem_needs(total, largest, per_node, gpus // per_node,
                                                         offload_optimizer, offload_param, zero_init)
    return int(host), int(gpu)


def zero3_formula(total: int, largest: int, gpus: int, per_node: int, offload_optimizer: bool,
                  offload_param: bool, zero_init: bool) -> tuple[int, int]:
    """DeepSpeed 0.19's ZeRO-3 estimate, for machines without deepspeed."""
    nodes = gpus // per_node
    layer = 4 * largest
    if offload_optimizer:
        if offload_param:
            host = total * (18 / nodes if zero_init else max(4 * per_node, 18 / nodes)) * 1.5
            return int(host), layer
        host = total * (16 / nodes if zero_init else max(4 * per_node, 16 / nodes)) * 1.5
        return int(host), layer + int(2 * total / gpus)
    host = (largest if zero_init else total) * 4 * per_node * 1.5
    return int(host), layer + int(18 * total / gpus)


# ------------------------------------------------------------------------------------ the plan
@dataclass(frozen=True)
class Term:
    name: str
    gib: float  # per GPU
    fix: str  # the setting that shrinks it


@dataclass(frozen=True)
class Phase:
    """What a step adds on top of the resident terms while it runs one part: the loss pass,
    generation or validation. They never overlap, so the largest one is the peak."""

    name: str
    terms: tuple[Term, ...]

    @property
    def gib(self) -> float:
        return sum(t.gib for t in self.terms)


@dataclass(frozen=True)
class VLLMShare:
    """A colocated vLLM engine's share of one GPU and what it must hold to start."""

    share_gib: float  # vllm_gpu_memory_utilization x GPU memory
    weights_gib: float  # bf16 weights / tensor parallel size
    overhead_gib: float  # profiling activations, CUDA graphs (estimate)
    kv_gib: float  # KV cache of one sequence at vllm_max_model_length
    max_model_length: int
    kv_all_gib: float  # KV cache of all max_num_seqs sequences at the run's real length
    max_num_seqs: int

    @property
    def need_gib(self) -> float:
        return self.weights_gib + self.overhead_gib + self.kv_gib

    @property
    def starts(self) -> bool:
        return self.need_gib <= self.share_gib


@dataclass
class Plan:
    model: ModelSize
    launch: Launch
    gpu_memory_gib: float
    terms: list[Term]  # resident terms, then the largest phase's, then the runtime reserve
    host_gib: float  # per node
    host_memory_gib: float | None  # None: not checked
    prompts_per_step: float
    notes: list[str] = field(default_factory=list)
    phases: list[Phase] = field(default_factory=list)
    vllm: VLLMShare | None = None  # colocate only
    vllm_fix: str = ""

    @property
    def total_gib(self) -> float:
        return sum(t.gib for t in self.terms)

    @property
    def peak_phase(self) -> Phase | None:
        return max(self.phases, key=lambda ph: ph.gib) if self.phases else None

    @property
    def vllm_starts(self) -> bool:
        return self.vllm is None or self.vllm.starts

    @property
    def fits_gpu(self) -> bool:
        return self.total_gib <= self.gpu_memory_gib and self.vllm_starts

    @property
    def fits_host(self) -> bool:
        return self.host_memory_gib is None or self.host_gib <= self.host_memory_gib

    @property
    def fits(self) -> bool:
        return self.fits_gpu and self.fits_host

    def biggest(self) -> Term:
        return max((t for t in self.terms if t.name != "runtime reserve"), key=lambda t: t.gib)

    def verdict(self) -> str:
        """One line: fits, or why not and what to change."""
        if not self.vllm_starts:
            v = self.vllm
            return (f"does not fit: vLLM cannot start in its share: {v.share_gib:.1f} GiB < weights "
                    f"{v.weights_gib:.1f} + KV cache at max model length {v.max_model_length} {v.kv_gib:.1f} + "
                    f"overhead {v.overhead_gib:.1f} = {v.need_gib:.1f} GiB; fix: {self.vllm_fix}")
        if self.total_gib > self.gpu_memory_gib:
            big = self.biggest()
            return (f"does not fit: {self.total_gib:.1f} GiB per GPU > {self.gpu_memory_gib:g} GiB; biggest term: "
                    f"{big.name} {big.gib:.1f} GiB; fix: {big.fix}")
        if not self.fits_host:
            return (f"does not fit: host RAM {self.host_gib:.0f} GiB > {self.host_memory_gib:g} GiB; biggest term: "
                    f"model loading on every process; fix: a ZeRO-3 recipe (zero3.yaml, zero3_init_flag) loads "
                    f"each process's shard only")
        return f"fits: {self.total_gib:.1f} of {self.gpu_memory_gib:g} GiB per GPU"

    def render(self) -> str:
        n = self.launch.num_processes
        lines = [f"model {self.model.name}: {self.model.total / 1e9:.2f}B parameters "
                 f"(vision tower {self.model.vision / 1e9:.2f}B)",
                 f"launch {self.launch.source}: {self.launch.strategy}, {n} GPU(s) x {self.gpu_memory_gib:g} GiB, "
                 f"{self.prompts_per_step:g} prompts per optimizer step",
                 "per GPU:"]
        lines += [f"  {t.name:<58} {t.gib:8.1f} GiB" for t in self.terms]
        lines.append(f"  {'total':<58} {self.total_gib:8.1f} GiB")
        if len(self.phases) > 1:
            lines.append("phases (the largest is in the total): "
                         + ", ".join(f"{ph.name} {ph.gib:.1f} GiB" for ph in self.phases))
        if self.vllm is not None:
            v = self.vllm
            lines.append(f"vLLM share {v.share_gib:.1f} GiB: weights {v.weights_gib:.1f} + overhead "
                         f"{v.overhead_gib:.1f} + KV cache of one {v.max_model_length}-token sequence "
                         f"{v.kv_gib:.2f} = {v.need_gib:.1f} GiB ({'starts' if v.starts else 'cannot start'}); "
                         f"{v.max_num_seqs} sequences of the run's length need {v.kv_all_gib:.2f} GiB of KV cache")
        host = f"{self.host_memory_gib:g} GiB" if self.host_memory_gib is not None else "not checked"
        lines.append(f"host RAM per node (peak while loading): {self.host_gib:.0f} GiB ({host})")
        lines += [f"note: {note}" for note in self.notes]
        lines.append(self.verdict())
        return "\n".join(lines)


def visual_tokens(cfg: TrainConfig) -> int:
    """Visual tokens of one prompt at the configured frame budget (`TrainConfig.visual_tokens`)."""
    return cfg.visual_tokens()


def lora_parameters(m: ModelSize, r: int) -> int:
    """LoRA adapter parameters on the language model's seven projections of every layer: r x (in +
    out) each, i.e. r x layers x (9 hidden + 2 kv + 3 intermediate)."""
    return r * m.layers * (9 * m.hidden + 2 * m.kv_dim + 3 * m.intermediate)


def zero_buckets(launch: Launch) -> tuple[int, str]:
    """(bytes, formula) of DeepSpeed's communication buckets on each GPU, in bf16: ZeRO-2's reduce and
    all-gather buckets; ZeRO-3's reduce bucket (twice with overlap_comm, on by default there) and its
    prefetch bucket. Sizes are DeepSpeed's defaults (its `DeepSpeedZeroConfig`) unless the launch's
    DeepSpeed JSON sets them."""
    stage = 3 if launch.strategy == "zero3" else 2
    defaults = _zero_defaults(stage)
    sizes = {**defaults, **{k: v for k, v in launch.buckets}}
    if stage == 2:
        n = sizes["reduce_bucket_size"] * (2 if sizes["overlap_comm"] else 1) + sizes["allgather_bucket_size"]
        return 2 * n, "bf16 reduce + all-gather"
    n = sizes["reduce_bucket_size"] * (2 if sizes["overlap_comm"] else 1) + sizes["stage3_prefetch_bucket_size"]
    return 2 * n, "bf16 " + ("2 x reduce" if sizes["overlap_comm"] else "reduce") + " + prefetch"


def _zero_defaults(stage: int) -> dict[str, Any]:
    try:
        from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
    except ImportError:  # DeepSpeed 0.19's defaults
        return {"reduce_bucket_size": 500_000_000, "allgather_bucket_size": 500_000_000,
                "stage3_prefetch_bucket_size": 50_000_000, "overlap_comm": stage == 3}
    zero = DeepSpeedZeroConfig(stage=stage)
    return {"reduce_bucket_size": int(zero.reduce_bucket_size), "allgather_bucket_size": int(zero.allgather_bucket_size),
            "stage3_prefetch_bucket_size": int(zero.prefetch_bucket_size), "overlap_comm": bool(zero.overlap_comm)}


def logprob_head(m: ModelSize, tokens: int, head_trains: bool) -> int:
    """Bytes of TRL 1.16's fused log-prob head on `tokens` completion tokens: one fp32 tile of
    4,096 tokens x 32,768 vocabulary entries, the fp32 gradient of the hidden rows, and (when the
    head trains) the fp32 gradient of the head's weight; full logits are never held."""
    tile = min(tokens, LOGPROB_TOKEN_TILE) * LOGPROB_VOCAB_TILE * 4
    return tile + tokens * m.hidden * 4 + (m.vocab * m.hidden * 4 if head_trains else 0)


def prefill(m: ModelSize, sequences: int, prompt: int, visual: int) -> int:
    """Bytes of one prefill layer in bf16 without gradients: the hidden stream, q/k/v/o and the
    MLP's three projections of `sequences` prompts at once (the largest of a layer's transients),
    and the same for the vision tower over 4 patches per visual token."""
    text = sequences * prompt * (4 * m.hidden + 3 * m.intermediate) * 2
    vision = sequences * 4 * visual * (4 * m.vision_hidden + 3 * m.vision_intermediate) * 2
    return max(text, vision)


def kv_cache(m: ModelSize, tokens: int) -> int:
    """Bytes of a bf16 KV cache of `tokens` tokens: keys and values of every layer."""
    return tokens * m.layers * 2 * m.kv_dim * 2


def plan(cfg: TrainConfig, launch: Launch, *, gpu_memory_gib: float = 80.0, host_memory_gib: float | None = None,
         gpus_per_node: int | None = None, model: ModelSize | None = None) -> Plan:
    """Per-GPU and host memory of `cfg` under `launch` (see the module docstring)."""
    m = model or model_size(cfg.model.name_or_path)
    n = launch.num_processes
    per_node = gpus_per_node or min(n, 8)
    P = m.total
    grpo = cfg.grpo
    use_vllm = bool(grpo.get("use_vllm")) and cfg.trainer == "grpo"
    colocate = use_vllm and grpo.get("vllm_mode", "colocate") == "colocate"
    deepspeed = launch.strategy.startswith("zero")
    lora = cfg.model.lora
    trainable = lora_parameters(m, lora.r) if lora else P - (m.vision if cfg.model.freeze_vision else 0)
    terms: list[Term] = []
    to_zero2 = "shard them across GPUs with DeepSpeed ZeRO-2: --accelerate-config zero2 (training/accelerate/zero2.yaml)"
    to_zero3 = "shard weights too with DeepSpeed ZeRO-3: --accelerate-config zero3 (training/accelerate/zero3.yaml)"
    to_lora = "model.lora (adapters only; qwen2.5-vl-7b-lora-1gpu)"
    host_states = 0.0
    if lora:
        # the frozen base in model.dtype, fp32 adapters with their gradients and AdamW's two moments
        base = 2 if cfg.model.dtype == "bfloat16" else 4
        terms += [Term(f"base weights ({'bf16' if base == 2 else 'fp32'}, frozen)", base * P / GiB, to_zero3),
                  Term(f"LoRA adapters r {lora.r} (fp32 weights, gradients, AdamW)", 16 * trainable / GiB,
                       "a smaller model.lora.r")]
        if launch.strategy == "ddp":
            terms.append(Term("DDP gradient buckets (adapters)", 4 * trainable / GiB, ""))
    elif launch.strategy in ("ddp", "single"):
        # fp32 master weights (bf16 autocast), fp32 gradients, AdamW's two fp32 moments, DDP's bucket copy
        frozen = " (vision tower frozen)" if trainable < P else ""
        terms += [Term("policy weights (fp32 master copy)", 4 * P / GiB, to_zero3),
                  Term(f"gradients (fp32){frozen}", 4 * trainable / GiB, to_zero2),
                  Term(f"optimizer states (AdamW, fp32){frozen}", 8 * trainable / GiB, to_zero2)]
        if launch.strategy == "ddp":
            terms.append(Term("DDP gradient buckets", 4 * trainable / GiB, to_zero2))
    elif launch.strategy == "zero2":
        host_states, gpu = zero2_model_states(trainable, n, per_node, launch.offload_optimizer)
        gpu += 2 * (P - trainable)  # frozen weights: bf16, whole on every GPU
        if launch.offload_optimizer:
            terms.append(Term("policy weights (bf16), ZeRO-2 + CPU optimizer", gpu / GiB, to_zero3))
        else:
            terms += [Term("policy weights (bf16)", 2 * P / GiB, to_zero3),
                      Term("gradients (bf16)", 2 * trainable / GiB, to_zero3),
                      Term(f"optimizer states + fp32 master, 1/{n}", (gpu - 2 * P - 2 * trainable) / GiB,
                           "more GPUs, or offload_optimizer_device: cpu in the accelerate config")]
    else:
        host_states, gpu = zero3_model_states(trainable, m.largest_layer, n, per_node, launch.offload_optimizer,
                                              launch.offload_param, launch.zero3_init)
        gpu += 0 if launch.offload_param else int(2 * (P - trainable) / n)  # frozen weights, sharded in bf16
        terms.append(Term(f"model states, ZeRO-3 1/{n} + gathered layer", gpu / GiB,
                          "more GPUs, or offload_optimizer_device: cpu (zero3_offload.yaml)"))
    if deepspeed:
        buckets, formula = zero_buckets(launch)
        terms.append(Term(f"DeepSpeed buckets ({formula})", buckets / GiB,
                          "smaller reduce_bucket_size / allgather_bucket_size in a DeepSpeed JSON"))
    # Reference model (beta > 0): loaded in model.reference_dtype; DeepSpeed casts it to bf16 (ZeRO-2:
    # a whole stage-0 copy per GPU; ZeRO-3: sharded). LoRA needs none: the base with adapters off.
    ref_bytes = 2 if cfg.model.reference_dtype == "bfloat16" else 4
    has_ref = cfg.trainer == "grpo" and cfg.beta > 0 and not lora
    if has_ref:
        if launch.strategy == "zero3":
            terms.append(Term("reference model (bf16, sharded)", 2 * P / n / GiB, "beta: 0 drops it (not the paper's)"))
        elif deepspeed:
            terms.append(Term("reference model (bf16)", 2 * P / GiB, to_zero3 + " (shards the reference too)"))
        else:
            terms.append(Term(f"reference model ({'bf16' if ref_bytes == 2 else 'fp32'})", ref_bytes * P / GiB,
                              "model.reference_dtype: bfloat16" if ref_bytes == 4 else to_zero2))
    # Loss pass: the whole per-device batch goes through at once, every layer's input kept (gradient
    # checkpointing) plus one layer recomputed, and TRL's fused log-prob head over the completions.
    b = cfg.per_device_train_batch_size
    completion = cfg.max_completion_length
    vis = cfg.visual_tokens()
    prompt = cfg.prompt_tokens()
    seq = prompt + completion
    residual = 2 if deepspeed or lora else 4  # bf16 weights keep a bf16 residual stream; autocast over fp32, fp32
    checkpointing = bool(grpo.get("gradient_checkpointing", False)) or bool(grpo.get("activation_checkpointing", False))
    text_layer = b * seq * (18 * m.hidden + 8 * m.intermediate)
    patches = 4 * vis  # 2 x 2 patches merge into one token
    vision_layer = b * patches * (18 * m.vision_hidden + 8 * m.vision_intermediate)
    vision_kept = not (cfg.model.freeze_vision or lora)  # a frozen tower runs without keeping activations
    if checkpointing:
        act = m.layers * b * seq * m.hidden * residual + text_layer
        if vision_kept:
            act += m.vision_depth * b * patches * m.vision_hidden * residual + vision_layer
    else:
        act = m.layers * text_layer + (m.vision_depth * vision_layer if vision_kept else 0)
    act_fix = _batch_fix(cfg) if checkpointing else "grpo.gradient_checkpointing: true"
    loss = Phase("loss pass", (
        Term(f"activations ({b} x {seq} tokens{', checkpointed' if checkpointing else ''})", act / GiB, act_fix),
        Term(f"log-prob head (TRL's fused, {b} x {completion} completion tokens)",
             logprob_head(m, b * completion, head_trains=not lora) / GiB, act_fix)))
    phases = [loss]
    if cfg.trainer == "grpo":
        gen_batch = b * int(grpo.get("steps_per_generation") or cfg.gradient_accumulation_steps)
        zero3_gather = launch.strategy == "zero3" and grpo.get("ds3_gather_for_generation", True)
        gather_fix = "ds3_gather_for_generation: false (slow), or offload_optimizer_device: cpu to make room"
        if not use_vllm:
            gen = [Term(f"generation KV cache ({gen_batch} x {seq} tokens)", kv_cache(m, gen_batch * seq) / GiB,
                        "generate with vLLM (--use-vllm), or a smaller per_device_train_batch_size"),
                   Term(f"generation prefill ({gen_batch} prompts)", prefill(m, gen_batch, prompt, vis) / GiB,
                        "a smaller per_device_train_batch_size")]
            if zero3_gather:
                gen.append(Term("generation: gathered ZeRO-3 weights (bf16)", 2 * P / GiB, gather_fix))
            phases.append(Phase("generation", tuple(gen)))
    # Validation answers with transformers (not vLLM), so ZeRO-3 gathers the whole model for it even
    # in the vLLM recipes.
    if cfg.validation.enabled:
        vb = max(cfg.validation.batch_size, cfg.validation.benchmark.batch_size if cfg.validation.benchmark else 1)
        vseq = prompt + (cfg.validation.max_new_tokens or completion)
        val = [Term(f"validation KV cache ({vb} x {vseq} tokens)", kv_cache(m, vb * vseq) / GiB,
                    "a smaller validation.batch_size"),
               Term(f"validation prefill ({vb} prompts)", prefill(m, vb, prompt, vis) / GiB,
                    "a smaller validation.batch_size")]
        if launch.strategy == "zero3":
            val.append(Term("validation: gathered ZeRO-3 weights (bf16)", 2 * P / GiB,
                            "offload_optimizer_device: cpu to make room"))
        phases.append(Phase("validation", tuple(val)))
    vllm = None
    vllm_fix = ""
    if colocate:
        frac = float(grpo.get("vllm_gpu_memory_utilization", 0.3))
        sleep = bool(grpo.get("vllm_enable_sleep_mode", False))
        tp = int(grpo.get("vllm_tensor_parallel_size", 1))
        length = int(grpo.get("vllm_max_model_length") or m.max_position_embeddings)
        share = frac * gpu_memory_gib
        seqs = b * tp * int(grpo.get("steps_per_generation") or cfg.gradient_accumulation_steps)  # TRL's max_num_seqs
        vllm = VLLMShare(share, 2 * P / tp / GiB, VLLM_OVERHEAD_GIB, kv_cache(m, length) / tp / GiB, length,
                         kv_cache(m, seqs * seq) / tp / GiB, seqs)
        need = vllm.need_gib / gpu_memory_gib
        vllm_fix = (f"grpo.vllm_gpu_memory_utilization: {math.ceil(need * 100) / 100:g} or more"
                    + ("" if grpo.get("vllm_max_model_length") else
                       f", and grpo.vllm_max_model_length: {cfg.vllm_length()} (unset, vLLM takes the model's "
                       f"{m.max_position_embeddings})")
                    + (f", or vllm_tensor_parallel_size: {2 * tp}" if n >= 2 * tp else ""))
        asleep = ASLEEP_VLLM_GIB if sleep else share
        terms.append(Term(f"vLLM colocate ({'asleep outside generation' if sleep else f'{frac:g} of the GPU'})",
                          asleep, "grpo.vllm_enable_sleep_mode: true (frees vLLM's memory while training), "
                                  "or a lower grpo.vllm_gpu_memory_utilization"))
        if sleep:  # awake during generation: its whole share
            phases.append(Phase("generation", (Term(f"generation (vLLM awake, {frac:g} of the GPU)", share - asleep,
                                                    "a lower grpo.vllm_gpu_memory_utilization"),)))
    peak = max(phases, key=lambda ph: ph.gib)
    terms += peak.terms
    terms.append(Term("runtime reserve", RUNTIME_RESERVE_GIB, ""))
    # Host RAM per node while loading: each process loads the fp32 policy and the reference on the
    # CPU; under ZeRO-2 the policy stays there until DeepSpeed takes it at train(), so both coexist.
    procs = min(n, per_node)
    ref_host = ref_bytes * P if has_ref else 0
    policy_host = (2 if lora and cfg.model.dtype == "bfloat16" else 4) * P
    if launch.strategy == "zero3" and launch.zero3_init:
        host = host_states
    elif launch.strategy == "zero2":
        host = max(host_states, procs * (policy_host + ref_host))
    else:
        host = procs * max(policy_host, ref_host)  # DDP moves the policy to its GPU before the reference loads
    notes = []
    prompts = n * b * cfg.gradient_accumulation_steps / cfg.num_generations if cfg.trainer == "grpo" else \
        n * b * cfg.gradient_accumulation_steps
    if use_vllm and not colocate:
        notes.append("vLLM server mode: the accelerate config's processes are the training GPUs only")
    if cfg.trainer == "grpo" and prompts != 16:
        notes.append(f"{prompts:g} prompts per optimizer step, the paper's is 16 (8 GPUs x "
                     f"per_device_train_batch_size 8 x gradient_accumulation_steps 2 / 8 generations)")
    return Plan(m, launch, gpu_memory_gib, terms, host / GiB, host_memory_gib, prompts, notes, phases, vllm, vllm_fix)


def _batch_fix(cfg: TrainConfig) -> str:
    b, ga = cfg.per_device_train_batch_size, cfg.gradient_accumulation_steps
    if b > 1 and b % 2 == 0:
        return (f"per_device_train_batch_size: {b // 2} with gradient_accumulation_steps: {ga * 2} "
                f"(same prompts per step)")
    return "fewer frames (data.max_frames) or a shorter max_completion_length"


def gpu_memory_here() -> float | None:
    """The first visible GPU's memory in GiB, or None without CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_properties(0).total_memory / GiB


def host_memory_here() -> float | None:
    """This machine's RAM in GiB (Linux), or None."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 / GiB
    except OSError:
        return None
    return None


def recommended_accelerate_config(cfg: TrainConfig, config: str | None = None) -> Path:
    """The accelerate recipe of a launch: a bundled config's own (`BUNDLED_LAUNCHES`, its first
    entry: the one-GPU LoRA recipe's is single_gpu), else the recipe for the config's model (ZeRO-3
    for the 7B, ZeRO-2 for the 3B)."""
    if config is not None and not Path(config).is_file():
        own = next((acc for name, acc in BUNDLED_LAUNCHES if name == str(config).removesuffix(".yaml")), None)
        if own is not None:
            return accelerate_config_path(own)
    name = HUB_NAMES.get(cfg.model.name_or_path)
    return accelerate_config_path(RECIPES.get(name or "", "zero3"))


class LaunchRefused(RuntimeError, Numerical3DError):
    """A training launch the planner says cannot fit; the message is the plan's verdict."""


def preflight(cfg: TrainConfig, *, launch: Launch | None = None, gpu_memory_gib: float | None = None,
              host_memory_gib: float | None = None) -> Plan | None:
    """The plan of the launch this process is part of, checked at the start of a training run.

    Runs only on a CUDA machine (or with `gpu_memory_gib` given) for a model whose architecture
    the planner can build; returns None where there is nothing to check. Raises `LaunchRefused`
    when the plan does not fit."""
    gpu = gpu_memory_gib if gpu_memory_gib is not None else gpu_memory_here()
    if gpu is None:
        return None
    try:
        model = model_size(cfg.model.name_or_path)
    except MemoryPlanError:
        return None  # a Hub id without a bundled architecture: nothing to build on the meta device
    setup = launch or launch_from_environment() or Launch("single process", "single", 1)
    host = host_memory_gib if host_memory_gib is not None else host_memory_here()
    result = plan(cfg, setup, gpu_memory_gib=gpu, host_memory_gib=host, model=model)
    if not result.fits:
        raise LaunchRefused(f"memory plan: {result.verdict()}\n{result.render()}")
    return result


def launch_recipe(config: str, accelerate_config: str | None = None) -> Path:
    """The accelerate config file a launch of training config `config` uses: `accelerate_config`
    (a bundled name or a path), else the recipe of the config's model."""
    from numerical3d.training.config import load_config

    if accelerate_config is not None:
        return accelerate_config_path(accelerate_config)
    return recommended_accelerate_config(load_config(config), config)


# ------------------------------------------------------------------------- the bundled recipes
# Each bundled launch: a training config and the accelerate config it is launched with. Their plans
# on 80 GB and 40 GB cards are the table in docs/training.md and the "planned:" comments of the
# accelerate files (tests/training/test_memory.py checks both against this module).
BUNDLED_LAUNCHES: tuple[tuple[str, str], ...] = (
    ("qwen2.5-vl-7b", "zero3"),
    ("qwen2.5-vl-7b", "zero3_offload"),
    ("qwen2.5-vl-7b-video", "zero3"),
    ("qwen2.5-vl-7b-vllm-colocate", "zero3"),
    ("qwen2.5-vl-7b-vllm-server", "zero3_4gpu"),
    ("qwen2.5-vl-7b-lora-1gpu", "single_gpu"),
    ("qwen2.5-vl-7b-2nodes", "zero3_2nodes"),
    ("qwen2.5-vl-3b", "zero2"),
    ("qwen2.5-vl-3b", "zero3"),
    ("qwen2.5-vl-3b", "multi_gpu"),
)
CARD_SIZES_GIB = (80.0, 40.0)


def bundled_plans() -> list[tuple[str, str, float, Plan]]:
    """(config, accelerate config, GPU GiB, plan) of every bundled launch on each card size."""
    from numerical3d.training.config import load_config

    out = []
    for config, accelerate in BUNDLED_LAUNCHES:
        cfg = load_config(config)
        model = model_size(cfg.model.name_or_path)
        for gib in CARD_SIZES_GIB:
            out.append((config, accelerate, gib, plan(cfg, read_launch(accelerate), gpu_memory_gib=gib, model=model)))
    return out


def terms_line(result: Plan) -> str:
    """The plan's total as the sum of its terms, the peak phase named."""
    peak = result.peak_phase
    phase_terms = set(peak.terms) if peak else set()
    resident = " + ".join(f"{t.name} {t.gib:.1f}" for t in result.terms if t not in phase_terms)
    phase = f" + [{peak.name}: " + " + ".join(f"{t.name} {t.gib:.1f}" for t in peak.terms) + "]" if peak else ""
    return f"{resident}{phase}"


def recipes_table() -> str:
    """The markdown table of every bundled launch's plan on 80 GB and 40 GB cards."""
    rows = ["| config | accelerate | GPUs | card | per GPU (GiB) | verdict | terms (GiB) |",
            "|---|---|---:|---:|---:|---|---|"]
    for config, accelerate, gib, result in bundled_plans():
        verdict = "fits" if result.fits_gpu else result.verdict().removeprefix("does not fit: ")
        rows.append(f"| `{config}` | `{accelerate}` | {result.launch.num_processes} | {gib:g} GB | "
                    f"{result.total_gib:.1f} | {verdict} | {terms_line(result)} |")
    return "\n".join(rows)


def planned_comment(accelerate: str) -> list[str]:
    """The "planned:" comment lines of a bundled accelerate file, from the plans of its launches."""
    lines = []
    for config, acc, gib, result in bundled_plans():
        if acc == accelerate:
            verdict = f"fits, {result.total_gib:.1f} GiB per GPU" if result.fits_gpu else \
                f"does not fit ({result.total_gib:.1f} GiB per GPU{'' if result.vllm_starts else ', vLLM cannot start'})"
            lines.append(f"# planned: {config} on {gib:g} GB cards: {verdict}")
    return lines


def write_planned_comments(folder: Path = ACCELERATE_DIR) -> None:
    """Rewrite the "planned:" comment lines of the bundled accelerate files from their plans (run it
    after a planner change; the test fails until the files agree)."""
    for path in sorted(folder.glob("*.yaml")):
        lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("# planned: ")]
        head = next(i for i, ln in enumerate(lines) if not ln.startswith("#"))
        path.write_text("\n".join(lines[:head] + planned_comment(path.stem) + lines[head:]) + "\n")
