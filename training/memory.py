"""Memory planner: will a training config fit the GPUs of a launch, before anything loads?

The model is the real architecture, built on the meta device from its `config.json` (the bundled
ones under `training/models/` for the Qwen2.5-VL checkpoints the paper trains, or a local model
folder), so parameter counts are exact and no weight is read. Model states follow DeepSpeed's own
estimators (`estimate_zero2_model_states_mem_needs`, `estimate_zero3_model_states_mem_needs`:
called when deepspeed is installed, else the same formulas transcribed below); plain DDP, the
reference model, activations under gradient checkpointing, generation and vLLM's share are this
module's estimates (docs/training.md "Memory planner" states each formula). A launch that does not
fit is refused with the biggest term and the setting that fixes it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numerical3d.training.config import TrainConfig, read_mapping

MODELS_DIR = Path(__file__).parent / "models"
ACCELERATE_DIR = Path(__file__).parent / "accelerate"
GiB = 1024**3
RUNTIME_RESERVE_GIB = 3.0  # CUDA context, NCCL buffers and allocator fragmentation per GPU
PROMPT_TEXT_TOKENS = 160  # chat template, system turn and the question, besides the visual tokens
LOGIT_BYTES = 8  # per completion logit: bf16 logits, the temperature-scaled copy, their gradient, fp32 row chunks
ASLEEP_VLLM_GIB = 1.0  # what a sleeping colocated vLLM engine keeps (CUDA graphs, context)
# The accelerate recipe each bundled paper model is launched with (fits 8 x 80 GB, docs/training.md).
RECIPES = {"qwen2.5-vl-7b": "zero3", "qwen2.5-vl-3b": "zero2"}
HUB_NAMES = {"Qwen/Qwen2.5-VL-7B-Instruct": "qwen2.5-vl-7b", "Qwen/Qwen2.5-VL-3B-Instruct": "qwen2.5-vl-3b"}


class PlanError(ValueError):
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


def model_config_dir(name_or_path: str) -> Path:
    """The folder whose config.json describes `name_or_path`: a local model folder, or the bundled
    config of a Qwen2.5-VL checkpoint the paper trains (by Hub id or bundled name)."""
    p = Path(name_or_path)
    if (p / "config.json").is_file():
        return p
    name = HUB_NAMES.get(name_or_path, name_or_path)
    if (MODELS_DIR / name / "config.json").is_file():
        return MODELS_DIR / name
    raise PlanError(f"{name_or_path}: no config.json there and no bundled architecture of that name "
                    f"(bundled: {sorted(HUB_NAMES)})")


def model_size(name_or_path: str) -> ModelSize:
    """Build the architecture on the meta device (no weights, no memory) and count its parameters."""
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    folder = model_config_dir(name_or_path)
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
        vision_hidden=vision.hidden_size, vision_intermediate=vision.intermediate_size)


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


def accelerate_config_path(name_or_path: str | os.PathLike) -> Path:
    """A bundled accelerate config by name (`zero2`, `zero3.yaml`, ...) or a file path."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    bundled = ACCELERATE_DIR / (p.name if p.suffix == ".yaml" else f"{p.name}.yaml")
    if bundled.is_file():
        return bundled
    known = sorted(q.stem for q in ACCELERATE_DIR.glob("*.yaml"))
    raise PlanError(f"{name_or_path}: no such accelerate config file, nor a bundled one (bundled: {known})")


def read_launch(name_or_path: str | os.PathLike, gpus: int | None = None) -> Launch:
    """The launch an accelerate config describes (`gpus` overrides its num_processes)."""
    path = accelerate_config_path(name_or_path)
    data = read_mapping(path, "accelerate config", PlanError)
    kind = str(data.get("distributed_type", "NO")).upper()
    n = int(gpus or data.get("num_processes", 1) or 1)
    if kind == "DEEPSPEED":
        ds = data.get("deepspeed_config") or {}
        if "deepspeed_config_file" in ds:
            try:
                ds = {**ds, **_zero_section(json.loads(Path(ds["deepspeed_config_file"]).read_text()))}
            except (OSError, ValueError) as exc:
                raise PlanError(f"{path}: cannot read its deepspeed_config_file: {exc}") from None
        stage = int(ds.get("zero_stage", 2))
        if stage not in (2, 3):
            raise PlanError(f"{path}: ZeRO stage {stage} is not planned (use 2 or 3)")
        return Launch(str(path), f"zero{stage}", n, offload_optimizer=ds.get("offload_optimizer_device", "none") == "cpu",
                      offload_param=ds.get("offload_param_device", "none") == "cpu",
                      zero3_init=bool(ds.get("zero3_init_flag", stage == 3)))
    if kind in ("MULTI_GPU", "NO"):
        return Launch(str(path), "ddp" if n > 1 else "single", n)
    raise PlanError(f"{path}: distributed_type {kind} is not planned (MULTI_GPU or DEEPSPEED)")


def _zero_section(ds_json: dict[str, Any]) -> dict[str, Any]:
    """The accelerate-style keys of a DeepSpeed JSON config's zero_optimization section."""
    zero = ds_json.get("zero_optimization", {})
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


@dataclass
class Plan:
    model: ModelSize
    launch: Launch
    gpu_memory_gib: float
    terms: list[Term]
    host_gib: float  # per node
    host_memory_gib: float | None  # None: not checked
    prompts_per_step: float
    notes: list[str] = field(default_factory=list)

    @property
    def total_gib(self) -> float:
        return sum(t.gib for t in self.terms)

    @property
    def fits_gpu(self) -> bool:
        return self.total_gib <= self.gpu_memory_gib

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
        if not self.fits_gpu:
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
        lines += [f"  {t.name:<50} {t.gib:8.1f} GiB" for t in self.terms]
        lines.append(f"  {'total':<50} {self.total_gib:8.1f} GiB")
        host = f"{self.host_memory_gib:g} GiB" if self.host_memory_gib is not None else "not checked"
        lines.append(f"host RAM per node (peak while loading): {self.host_gib:.0f} GiB ({host})")
        lines += [f"note: {note}" for note in self.notes]
        lines.append(self.verdict())
        return "\n".join(lines)


def visual_tokens(cfg: TrainConfig) -> int:
    """Visual tokens of one prompt at the configured frame budget (28 x 28 pixels per merged token)."""
    data = cfg.data
    if data.visual == "video":
        per_frame = data.video.max_pixels or 644 * 476  # Qwen's video processor sizes 640 x 480 frames so
        return math.ceil(data.video.max_frames / 2) * per_frame // 784
    frames = data.max_frames
    if frames == 0:
        return 0
    per_frame = min(data.max_pixels, data.max_total_pixels // frames)
    return frames * per_frame // 784


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
    terms: list[Term] = []
    to_zero2 = "shard them across GPUs with DeepSpeed ZeRO-2: --accelerate-config zero2 (training/accelerate/zero2.yaml)"
    to_zero3 = "shard weights too with DeepSpeed ZeRO-3: --accelerate-config zero3 (training/accelerate/zero3.yaml)"
    if launch.strategy in ("ddp", "single"):
        # fp32 master weights (bf16 autocast), fp32 gradients, AdamW's two fp32 moments, DDP's bucket copy
        terms += [Term("policy weights (fp32 master copy)", 4 * P / GiB, to_zero3),
                  Term("gradients (fp32)", 4 * P / GiB, to_zero2),
                  Term("optimizer states (AdamW, fp32)", 8 * P / GiB, to_zero2)]
        if launch.strategy == "ddp":
            terms.append(Term("DDP gradient buckets", 4 * P / GiB, to_zero2))
        host_states = 0.0
    elif launch.strategy == "zero2":
        host_states, gpu = zero2_model_states(P, n, per_node, launch.offload_optimizer)
        if launch.offload_optimizer:
            terms.append(Term("policy weights (bf16), ZeRO-2 + CPU optimizer", gpu / GiB, to_zero3))
        else:
            terms += [Term("policy weights (bf16)", 2 * P / GiB, to_zero3),
                      Term("gradients (bf16)", 2 * P / GiB, to_zero3),
                      Term(f"optimizer states + fp32 master, 1/{n}", (gpu - 4 * P) / GiB,
                           "more GPUs, or offload_optimizer_device: cpu in the accelerate config")]
    else:
        host_states, gpu = zero3_model_states(P, m.largest_layer, n, per_node, launch.offload_optimizer,
                                              launch.offload_param, launch.zero3_init)
        terms.append(Term(f"model states, ZeRO-3 1/{n} + gathered layer", gpu / GiB,
                          "more GPUs, or offload_optimizer_device / offload_param_device: cpu"))
    # Reference model (beta > 0): loaded in model.reference_dtype; DeepSpeed casts it to bf16 (ZeRO-2:
    # a whole stage-0 copy per GPU; ZeRO-3: sharded).
    ref_bytes = 2 if cfg.model.reference_dtype == "bfloat16" else 4
    has_ref = cfg.trainer == "grpo" and cfg.beta > 0
    if has_ref:
        if launch.strategy == "zero3":
            terms.append(Term("reference model (bf16, sharded)", 2 * P / n / GiB, "beta: 0 drops it (not the paper's)"))
        elif deepspeed:
            terms.append(Term("reference model (bf16)", 2 * P / GiB, to_zero3 + " (shards the reference too)"))
        else:
            terms.append(Term(f"reference model ({'bf16' if ref_bytes == 2 else 'fp32'})", ref_bytes * P / GiB,
                              "model.reference_dtype: bfloat16" if ref_bytes == 4 else to_zero2))
    # Activations of one loss pass: the whole per-device batch goes through at once, every layer's
    # input kept (gradient checkpointing) plus one layer recomputed, and the completion logits.
    b = cfg.per_device_train_batch_size
    completion = cfg.max_completion_length
    vis = visual_tokens(cfg)
    seq = vis + PROMPT_TEXT_TOKENS + completion
    residual = 2 if deepspeed else 4  # bf16 weights keep a bf16 residual stream; autocast over fp32 keeps fp32
    checkpointing = bool(grpo.get("gradient_checkpointing", False)) or bool(grpo.get("activation_checkpointing", False))
    text_layer = b * seq * (18 * m.hidden + 8 * m.intermediate)
    patches = 4 * vis  # 2 x 2 patches merge into one token
    vision_layer = b * patches * (18 * m.vision_hidden + 8 * m.vision_intermediate)
    if checkpointing:
        act = (m.layers * b * seq * m.hidden * residual + text_layer
               + m.vision_depth * b * patches * m.vision_hidden * residual + vision_layer)
    else:
        act = m.layers * text_layer + m.vision_depth * vision_layer
    act += b * completion * m.vocab * LOGIT_BYTES
    fix_batch = _batch_fix(cfg)
    act_term = Term(f"activations ({b} x {seq} tokens{', checkpointed' if checkpointing else ''})", act / GiB,
                    fix_batch if checkpointing else "grpo.gradient_checkpointing: true")
    # Generation (transformers): every process generates its share of the generation batch at once;
    # ZeRO-3 gathers the whole bf16 model for it (ds3_gather_for_generation). It does not overlap
    # the loss pass, so the larger of the two counts.
    gen_batch = b * int(grpo.get("steps_per_generation") or cfg.gradient_accumulation_steps)
    kv = gen_batch * seq * m.layers * 2 * m.kv_dim * 2
    gathered = 2 * P if launch.strategy == "zero3" and not use_vllm and grpo.get("ds3_gather_for_generation", True) else 0
    gen_term = Term(f"generation (KV cache{', gathered ZeRO-3 weights' if gathered else ''})", (kv + gathered) / GiB,
                    "generate with vLLM (--use-vllm), or a smaller per_device_train_batch_size")
    if cfg.trainer != "grpo":  # SFT generates nothing
        gen_term = Term("generation", 0.0, "")
    vllm_share = 0.0
    if colocate:
        frac = float(grpo.get("vllm_gpu_memory_utilization", 0.3))
        sleep = bool(grpo.get("vllm_enable_sleep_mode", False))
        vllm_share = ASLEEP_VLLM_GIB if sleep else frac * gpu_memory_gib
        terms.append(Term(f"vLLM colocate ({'asleep during the loss pass' if sleep else f'{frac:g} of the GPU'})",
                          vllm_share, "grpo.vllm_enable_sleep_mode: true (frees vLLM's memory while training), "
                                      "or a lower grpo.vllm_gpu_memory_utilization"))
        if sleep:  # awake during generation: its whole share, the loss pass's activations gone
            gen_term = Term(f"generation (vLLM awake, {frac:g} of the GPU)", frac * gpu_memory_gib - vllm_share,
                            "a lower grpo.vllm_gpu_memory_utilization")
        else:
            gen_term = Term("generation", 0.0, "")
    elif use_vllm:
        gen_term = Term("generation", 0.0, "")  # on the vLLM server's own GPUs
    terms.append(act_term if act_term.gib >= gen_term.gib else gen_term)
    terms.append(Term("runtime reserve", RUNTIME_RESERVE_GIB, ""))
    # Host RAM per node while loading: each process loads the fp32 policy and the reference on the
    # CPU; under ZeRO-2 the policy stays there until DeepSpeed takes it at train(), so both coexist.
    procs = min(n, per_node)
    ref_host = ref_bytes * P if has_ref else 0
    if launch.strategy == "zero3" and launch.zero3_init:
        host = host_states
    elif launch.strategy == "zero2":
        host = max(host_states, procs * (4 * P + ref_host))
    else:
        host = procs * max(4 * P, ref_host)  # DDP moves the policy to its GPU before the reference loads
    notes = []
    prompts = n * b * cfg.gradient_accumulation_steps / cfg.num_generations if cfg.trainer == "grpo" else \
        n * b * cfg.gradient_accumulation_steps
    if use_vllm and not colocate:
        notes.append("vLLM server mode: the accelerate config's processes are the training GPUs only")
    if cfg.trainer == "grpo" and prompts != 16:
        notes.append(f"{prompts:g} prompts per optimizer step, the paper's is 16 (8 GPUs x "
                     f"per_device_train_batch_size 8 x gradient_accumulation_steps 2 / 8 generations)")
    return Plan(m, launch, gpu_memory_gib, terms, host / GiB, host_memory_gib, prompts, notes)


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


def recommended_accelerate_config(cfg: TrainConfig) -> Path:
    """The bundled accelerate recipe for the config's model (ZeRO-3 for the 7B, ZeRO-2 for the 3B)."""
    name = HUB_NAMES.get(cfg.model.name_or_path)
    return accelerate_config_path(RECIPES.get(name or "", "zero3"))


class LaunchRefused(RuntimeError):
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
    except PlanError:
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
    return recommended_accelerate_config(load_config(config))
