"""One training run from a config: dataset -> prompts -> APGRPOTrainer -> model + diagnostics."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.config import TrainConfig

log = logging.getLogger(__name__)
DATA_REPORT = "data_report.json"  # the rows left out, by id, and why


@dataclass
class RunResult:
    output_dir: Path
    model_dir: Path
    log_history: list[dict[str, Any]]
    diagnostics_png: Path
    results: Any  # training.validation.RunResults, also written to results.json


class ResumeError(ValueError):
    """`--resume` without a checkpoint to resume from; the message names the run folder."""


def build_trainer(cfg: TrainConfig, dataset: str, output_dir: str | os.PathLike, *, trainer_cls: type | None = None,
                  **grpo_overrides: Any):
    """The configured `APGRPOTrainer` (or `trainer_cls`, a subclass) on `dataset`, ready to train."""
    from training.data import prompt_dataset
    from training.rewards import Sharpness, reward_functions
    from training.tiny import load_processor
    from training.trainer import APGRPOTrainer
    from training.validation import Validation

    train, report = prompt_dataset(dataset, cfg.data)
    sharpness = Sharpness.from_config(cfg.reward)  # the run's one schedule: rewards train with it, the trainer logs it
    funcs, weights = reward_functions(cfg.reward, sharpness)
    model_kwargs: dict[str, Any] = {"dtype": "float32"}  # master weights; cfg.model.dtype is the autocast precision
    if cfg.model.attn_implementation:
        model_kwargs["attn_implementation"] = cfg.model.attn_implementation
    args = cfg.to_grpo_config(output_dir, model_init_kwargs=model_kwargs, **grpo_overrides)
    if list(args.reward_weights) != weights:
        raise ValueError(f"config {cfg.name!r}: grpo.reward_weights must not override (1 - lambda, lambda) = {weights}")
    cls = trainer_cls or APGRPOTrainer
    trainer = cls(
        model=cfg.model.name_or_path,
        reward_funcs=funcs,
        args=args,
        train_dataset=train,
        processing_class=load_processor(cfg.model.name_or_path),
        advantage=cfg.advantage,
        sharpness=sharpness,
    )
    if cfg.validation.enabled:
        trainer.add_callback(Validation(trainer, dataset, cfg.data, cfg.validation, cfg.max_completion_length))
    if trainer.is_world_process_zero():
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        report.write(Path(output_dir) / DATA_REPORT)
        log.info("%s: %s (%s)", dataset, report.summary(), Path(output_dir) / DATA_REPORT)
    return trainer


def run_training(cfg: TrainConfig, dataset: str, output_dir: str | os.PathLike, *, resume: bool = False,
                 **grpo_overrides: Any) -> RunResult:
    """Train (from the latest `checkpoint-*` of `output_dir` with `resume`), save the final model
    and processor, write log history, the diagnostics PNG and results.json."""
    from transformers.trainer_utils import get_last_checkpoint

    from training.diagnostics import plot_diagnostics, write_history
    from training.validation import RESULTS, Validation, results

    out = Path(output_dir)
    checkpoint = None
    if resume:
        checkpoint = get_last_checkpoint(str(out)) if out.is_dir() else None
        if checkpoint is None:
            raise ResumeError(f"{out}: no checkpoint-* folder to resume from (checkpoints are saved every "
                              f"grpo.save_steps steps; the run may not have reached the first one)")
    trainer = build_trainer(cfg, dataset, out, **grpo_overrides)
    if trainer.is_world_process_zero():
        out.mkdir(parents=True, exist_ok=True)
        (out / "train_config.json").write_text(cfg.model_dump_json(indent=1))
    trainer.train(resume_from_checkpoint=checkpoint)
    model_dir = out / "final"
    trainer.save_model(str(model_dir))  # collective under DeepSpeed: every process calls it
    history = trainer.state.log_history
    png = out / "diagnostics.png"
    validation = next((c for c in trainer.callback_handler.callbacks if isinstance(c, Validation)), None)
    summary = results(history, validation.accuracy_over if validation else "none")
    if trainer.is_world_process_zero():
        trainer.processing_class.save_pretrained(str(model_dir))
        write_history(history, out / "log_history.json")
        plot_diagnostics(history, png, title=cfg.name)
        summary.write(out / RESULTS)
    return RunResult(out, model_dir, history, png, summary)
