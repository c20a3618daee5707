"""Validation during training and the run's `results.json` (the paper's Table 3 columns).

Every `validation.every_steps` optimizer steps (and after the last one) the policy answers the
validation items greedily with the prompts training builds; answers are graded with VSI-Bench's
metric (`verifiers.vsibench.item_score`) and the step's accuracy is the mean over the VSI-Bench
question types present (`training.evaluate.vsi_overall`), logged as `val/accuracy`. Items are
split across processes and the completions gathered, so every process grades the same set.

`results.json` holds the final accuracy, `t_conv` (the paper: the first validated step whose
accuracy reaches 95 % of the run's best) and `adv_var_mean` (the mean over training steps of
`ap/adv_var`, the paper's Advantage Variance). With a benchmark answered at the validation steps
(`validation.benchmark`, see `training.benchmark_validation`), `t_conv` is measured on that
benchmark's overall score, as the paper measures it on VSI-Bench; the validation split's own
T_conv stays beside it as `t_conv_validation`.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from numerical3d.training.config import DataConfig, ValidationConfig
from numerical3d.training.data import FrameStore, checked_items
from numerical3d.training.evaluate import generate, grade, vsi_overall

RESULTS = "results.json"


def bench_metric(benchmark: str, score: str = "overall") -> str:
    """The log key of one of a benchmark's percent scores during training."""
    return f"bench/{benchmark}/{score}"


@dataclass
class RunResults:
    accuracy: float | None  # VSI-Bench metric at the last validation
    t_conv: int | None  # first validated step with accuracy >= 0.95 * best
    adv_var_mean: float | None  # mean ap/adv_var over training steps
    accuracy_over: str  # "vsibench_tasks", or "all_tasks" when no VSI-Bench question type is present
    validation: list[dict[str, float]] = field(default_factory=list)  # {step, accuracy}
    steps: int = 0
    t_conv_over: str = "validation"  # what t_conv is measured on: "validation" (the split) or the benchmark's name
    t_conv_validation: int | None = None  # T_conv on the validation split
    # With a benchmark: {"name", "overall" (the last step's, percent), "t_conv", "points": [{"step", scores...}]}
    benchmark: dict[str, Any] | None = None

    def write(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, path)
        return path


def t_conv(points: list[tuple[int, float]], fraction: float = 0.95) -> int | None:
    """min {t | Acc_t >= fraction * max Acc} over (step, accuracy) points, in step order."""
    if not points:
        return None
    best = max(acc for _, acc in points)
    return min(step for step, acc in points if acc >= fraction * best)


def results(log_history: list[dict[str, Any]], accuracy_over: str, benchmark: str | None = None) -> RunResults:
    """The run's results from its log history (a resumed run's history includes the earlier steps);
    with `benchmark` (its registered name), T_conv on that benchmark's overall score."""
    adv = [float(e["ap/adv_var"]) for e in log_history if "ap/adv_var" in e]
    points = [(int(e["step"]), float(e["val/accuracy"])) for e in log_history if "val/accuracy" in e]
    steps = max((int(e["step"]) for e in log_history if "step" in e), default=0)
    split_t_conv = t_conv(points)
    summary = RunResults(
        accuracy=points[-1][1] if points else None,
        t_conv=split_t_conv,
        adv_var_mean=sum(adv) / len(adv) if adv else None,
        accuracy_over=accuracy_over,
        validation=[{"step": s, "accuracy": a} for s, a in points],
        steps=steps,
        t_conv_validation=split_t_conv,
    )
    if benchmark is not None:
        prefix = bench_metric(benchmark, "")
        curve = [{"step": int(e["step"]), **{k.removeprefix(prefix): float(v) for k, v in e.items()
                                               if k.startswith(prefix)}}
                 for e in log_history if f"{prefix}overall" in e]
        bench_t_conv = t_conv([(p["step"], p["overall"]) for p in curve])
        summary.benchmark = {"name": benchmark, "overall": curve[-1]["overall"] if curve else None,
                             "t_conv": bench_t_conv, "points": curve}
        summary.t_conv, summary.t_conv_over = bench_t_conv, benchmark
    return summary


class Validation(TrainerCallback):
    """Validates the trainer's policy every `cfg.every_steps` steps and at the end of training."""

    def __init__(self, trainer: Any, dataset: str, data: DataConfig, cfg: ValidationConfig, max_new_tokens: int):
        self.trainer = trainer
        self.cfg = cfg
        vdata = data.model_copy(update={"split": cfg.split, "max_items": cfg.max_items, "subtasks": data.subtasks})
        self.store = FrameStore(dataset, cfg.split)
        items, self.report = checked_items(dataset, vdata, self.store)
        self.rows = list(items)
        self.data = vdata
        self.max_new_tokens = cfg.max_new_tokens or max_new_tokens
        self.last_step: int | None = None
        self.accuracy_over = "vsibench_tasks"

    def run(self, step: int) -> float:
        from accelerate.utils import gather_object
        from trl.models.utils import unwrap_model_for_generation

        trainer = self.trainer
        acc = trainer.accelerator
        mine = list(range(acc.process_index, len(self.rows), acc.num_processes))
        with unwrap_model_for_generation(trainer.model_wrapped, acc) as model, acc.autocast():
            was_training = model.training
            model.eval()
            texts = generate(model, trainer.processing_class, [self.rows[i] for i in mine], self.store, self.data,
                             self.max_new_tokens, self.cfg.batch_size)
            model.train(was_training)
        pairs = sorted(gather_object(list(zip(mine, texts))))
        tasks, _ = grade(self.rows, [t for _, t in pairs], k=100.0)
        overall, self.accuracy_over = vsi_overall(tasks)
        self.last_step = step
        self._log(trainer, {"val/accuracy": overall.vsi, "val/format_ok": overall.format_ok, "val/parsed": overall.parsed})
        return overall.vsi

    @staticmethod
    def _log(trainer: Any, metrics: dict[str, float]) -> None:
        """Log as an entry of its own: the base `Trainer.log`, not TRL's override (which would take the
        step's pending training metrics into this entry), and keep the step's own log due (logging
        clears `should_log`, which would drop that step's loss)."""
        from transformers import Trainer

        due = trainer.control.should_log
        Trainer.log(trainer, metrics)
        trainer.control.should_log = due

    def on_step_end(self, args, state, control, **kwargs):
        if self.cfg.every_steps and state.global_step % self.cfg.every_steps == 0:
            self.run(state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        if self.last_step != state.global_step:
            self.run(state.global_step)
