"""One training run from a config: dataset -> prompts -> APGRPOTrainer (or, for `trainer: sft`,
TRL's SFTTrainer on the canonical completions) -> model + diagnostics."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numerical3d.errors import Numerical3DError
from numerical3d.training.config import TrainConfig

log = logging.getLogger(__name__)
DATA_REPORT = "data_report.json"  # the rows left out, by id, and why
SHOWN_BAD = 20  # bad rows logged one by one; the data report lists them all


@dataclass
class RunResult:
    output_dir: Path
    model_dir: Path
    log_history: list[dict[str, Any]]
    diagnostics_png: Path | None  # the AP-GRPO panels; None for an SFT run, which has no advantages
    results: Any  # training.validation.RunResults, also written to results.json


class ResumeError(ValueError, Numerical3DError):
    """`--resume` without a checkpoint to resume from; the message names the run folder."""


def build_trainer(cfg: TrainConfig, dataset: str, output_dir: str | os.PathLike, *, trainer_cls: type | None = None,
                  **overrides: Any):
    """The configured trainer on `dataset`, ready to train: `APGRPOTrainer` (or `trainer_cls`, a
    subclass), or TRL's `SFTTrainer` for `trainer: sft`. `overrides` win over the config's trainer args."""
    benchmark = None
    if cfg.validation.enabled and cfg.validation.benchmark is not None:  # checked before anything heavy loads
        from numerical3d.training.benchmark_subset import BenchmarkSubset

        subset = BenchmarkSubset.load(cfg.validation.benchmark, Path(output_dir), cfg.max_completion_length)
        from numerical3d.training.benchmark_validation import BenchmarkValidation

        benchmark = BenchmarkValidation(subset, cfg.validation.benchmark, cfg.validation.every_steps, output_dir,
                                        cfg.max_completion_length)
    from numerical3d.training.data import prompt_dataset
    from numerical3d.training.tiny import load_processor
    from numerical3d.training.peak_memory import PeakMemory
    from numerical3d.training.validation import Validation

    sft = cfg.trainer == "sft"
    train, report = prompt_dataset(dataset, cfg.data, completions=sft)
    # fp32 master weights (cfg.model.dtype is the autocast precision); a LoRA run's base is frozen
    # and needs no master copy
    model_kwargs: dict[str, Any] = {"dtype": cfg.model.dtype if cfg.model.lora else "float32",
                                    "attn_implementation": attention(cfg.model.attn_implementation)}
    processor = load_processor(cfg.model.name_or_path)
    if cfg.data.visual == "video":
        from numerical3d.training.video import check_video_processor

        check_video_processor(processor, cfg.model.name_or_path)
    if sft:
        from trl import SFTTrainer

        args = cfg.to_sft_config(output_dir, model_init_kwargs=model_kwargs, **overrides)
        trainer = (trainer_cls or SFTTrainer)(model=cfg.model.name_or_path, args=args, train_dataset=train,
                                              processing_class=processor)
    else:
        trainer = _grpo_trainer(cfg, train, processor, trainer_cls, output_dir,
                                model_init_kwargs=model_kwargs, **overrides)
    trainer.add_callback(PeakMemory())  # a no-op without CUDA
    if cfg.validation.enabled:
        trainer.add_callback(Validation(trainer, dataset, cfg.data, cfg.validation, cfg.max_completion_length))
    if benchmark is not None:
        trainer.add_callback(benchmark.bind(trainer))
    if trainer.is_world_process_zero():
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        report.write(Path(output_dir) / DATA_REPORT)
        log.info("%s: %s (%s)", dataset, report.summary(), Path(output_dir) / DATA_REPORT)
        for bad in report.bad[:SHOWN_BAD]:
            log.warning("skipped row %s of %s: %s", bad["id"], bad["file"], bad["reason"])
    return trainer


def attention(configured: str | None) -> str:
    """The attention implementation: the configured one, else flash_attention_2 where the flash-attn
    package imports and CUDA is present, else sdpa. The choice is printed once per run."""
    global _attention_said
    if configured:
        choice, why = configured, "model.attn_implementation"
    else:
        import importlib.util

        import torch

        flash = importlib.util.find_spec("flash_attn") is not None
        cuda = torch.cuda.is_available()
        choice = "flash_attention_2" if flash and cuda else "sdpa"
        why = ("flash-attn installed" if choice == "flash_attention_2" else
               "flash-attn not installed" if not flash else "no CUDA device")
    if not _attention_said and os.environ.get("RANK", "0") == "0":
        print(f"attention: {choice} ({why})", flush=True)
        _attention_said = True
    return choice


_attention_said = False


def freeze_vision(model: Any) -> None:
    """Stop gradients to the vision tower (patch embedding, blocks and merger), which Qwen2.5-VL
    keeps at `model.model.visual`: no gradient, no optimizer state."""
    for param in model.model.visual.parameters():
        param.requires_grad_(False)


def _grpo_trainer(cfg: TrainConfig, train: Any, processor: Any, trainer_cls: type | None,
                  output_dir: str | os.PathLike, **overrides: Any):
    from trl.trainer.utils import create_model_from_path

    from numerical3d.training.rewards import Sharpness, reward_functions
    from numerical3d.training.trainer import APGRPOTrainer

    sharpness = Sharpness.from_config(cfg.reward)  # the run's one schedule: rewards train with it, the trainer logs it
    funcs, weights = reward_functions(cfg.reward, sharpness)
    policy_kwargs = dict(overrides.pop("model_init_kwargs", None) or {})
    # TRL builds the reference model from `model_init_kwargs`; the policy is loaded here (fp32 master
    # weights) so that the reference can load in its own dtype.
    reference_kwargs = {**policy_kwargs, "dtype": cfg.model.reference_dtype}
    args = cfg.to_grpo_config(output_dir, model_init_kwargs=reference_kwargs, **overrides)
    if list(args.reward_weights) != weights:
        raise ValueError(f"config {cfg.name!r}: grpo.reward_weights must not override (1 - lambda, lambda) = {weights}")
    if args.distributed_state.distributed_type in ("MULTI_GPU", "DEEPSPEED"):
        policy_kwargs["device_map"] = None  # as TRL loads it: each process's model is placed by the launch
    if args.use_vllm and args.vllm_mode == "server":
        from numerical3d.training.vllm_server import server_url, wait_for_health

        wait_for_health(server_url(cfg.grpo), args.vllm_server_timeout,
                        say=lambda line: print(line, flush=True) if os.environ.get("RANK", "0") == "0" else None)
    policy = create_model_from_path(cfg.model.name_or_path, **policy_kwargs)
    if cfg.model.freeze_vision:
        freeze_vision(policy)
    return (trainer_cls or APGRPOTrainer)(
        model=policy,
        reward_funcs=funcs,
        args=args,
        train_dataset=train,
        processing_class=processor,
        advantage=cfg.advantage,
        sharpness=sharpness,
        peft_config=cfg.model.lora.peft_config() if cfg.model.lora else None,
    )


def run_training(cfg: TrainConfig, dataset: str, output_dir: str | os.PathLike, *, resume: bool = False,
                 **overrides: Any) -> RunResult:
    """Train (from the latest `checkpoint-*` of `output_dir` with `resume`), save the final model
    and processor, write log history, results.json and (AP-GRPO runs) the diagnostics PNG."""
    out = Path(output_dir)
    checkpoint = None
    if resume:
        from transformers.trainer_utils import get_last_checkpoint

        checkpoint = get_last_checkpoint(str(out)) if out.is_dir() else None
        if checkpoint is None:
            raise ResumeError(f"{out}: no checkpoint-* folder to resume from (checkpoints are saved every "
                              f"grpo.save_steps steps; the run may not have reached the first one)")
    trainer = build_trainer(cfg, dataset, out, **overrides)  # checks the benchmark folder before heavy imports
    from numerical3d.training.diagnostics import plot_diagnostics, write_history
    from numerical3d.training.validation import RESULTS, Validation, results

    if trainer.is_world_process_zero():
        out.mkdir(parents=True, exist_ok=True)
        (out / "train_config.json").write_text(cfg.model_dump_json(indent=1))
    trainer.train(resume_from_checkpoint=checkpoint)
    model_dir = out / "final"
    trainer.save_model(str(model_dir))  # collective under DeepSpeed: every process calls it
    history = trainer.state.log_history
    png = out / "diagnostics.png" if cfg.trainer == "grpo" else None
    validation = next((c for c in trainer.callback_handler.callbacks if isinstance(c, Validation)), None)
    bench = cfg.validation.benchmark.name if cfg.validation.enabled and cfg.validation.benchmark else None
    summary = results(history, validation.accuracy_over if validation else "none", benchmark=bench)
    if trainer.is_world_process_zero():
        trainer.processing_class.save_pretrained(str(model_dir))
        write_history(history, out / "log_history.json")
        if png is not None:
            plot_diagnostics(history, png, title=cfg.name)
        summary.write(out / RESULTS)
    return RunResult(out, model_dir, history, png, summary)
