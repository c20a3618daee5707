"""One training run from a config: dataset -> prompts -> APGRPOTrainer -> model + diagnostics."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.config import TrainConfig


@dataclass
class RunResult:
    output_dir: Path
    model_dir: Path
    log_history: list[dict[str, Any]]
    diagnostics_png: Path


def build_trainer(cfg: TrainConfig, dataset: str, output_dir: str | os.PathLike, *, trainer_cls: type | None = None,
                  **grpo_overrides: Any):
    """The configured `APGRPOTrainer` (or `trainer_cls`, a subclass) on `dataset`, ready to train."""
    from training.data import prompt_dataset
    from training.rewards import Sharpness, reward_functions
    from training.tiny import load_processor
    from training.trainer import APGRPOTrainer

    train = prompt_dataset(dataset, cfg.data)
    sharpness = Sharpness.from_config(cfg.reward)  # the run's one schedule: rewards train with it, the trainer logs it
    funcs, weights = reward_functions(cfg.reward, sharpness)
    model_kwargs: dict[str, Any] = {"dtype": cfg.model.dtype}
    if cfg.model.attn_implementation:
        model_kwargs["attn_implementation"] = cfg.model.attn_implementation
    args = cfg.to_grpo_config(output_dir, model_init_kwargs=model_kwargs, **grpo_overrides)
    if list(args.reward_weights) != weights:
        raise ValueError(f"config {cfg.name!r}: grpo.reward_weights must not override (1 - lambda, lambda) = {weights}")
    cls = trainer_cls or APGRPOTrainer
    return cls(
        model=cfg.model.name_or_path,
        reward_funcs=funcs,
        args=args,
        train_dataset=train,
        processing_class=load_processor(cfg.model.name_or_path),
        advantage=cfg.advantage,
        sharpness=sharpness,
    )


def run_training(cfg: TrainConfig, dataset: str, output_dir: str | os.PathLike, **grpo_overrides: Any) -> RunResult:
    """Train, save the final model and processor, write log history and the diagnostics PNG."""
    from training.diagnostics import plot_diagnostics, write_history

    out = Path(output_dir)
    trainer = build_trainer(cfg, dataset, out, **grpo_overrides)
    if trainer.is_world_process_zero():
        out.mkdir(parents=True, exist_ok=True)
        (out / "train_config.json").write_text(cfg.model_dump_json(indent=1))
    trainer.train()
    model_dir = out / "final"
    trainer.save_model(str(model_dir))  # collective under DeepSpeed: every process calls it
    history = trainer.state.log_history
    png = out / "diagnostics.png"
    if trainer.is_world_process_zero():
        trainer.processing_class.save_pretrained(str(model_dir))
        write_history(history, out / "log_history.json")
        plot_diagnostics(history, png, title=cfg.name)
    return RunResult(out, model_dir, history, png)
