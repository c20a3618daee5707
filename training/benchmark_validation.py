"""A released benchmark answered by the policy in memory during training (`validation.benchmark`).

The paper's T_conv is the first step whose VSI-Bench accuracy reaches 95 % of the run's best, so
the benchmark itself has to be answered at the validation steps. At every `validation.every_steps`
(and after the last step) the live policy, unwrapped as TRL unwraps it for generation, answers a
fixed subset of the benchmark through the benchmark machinery: the registered benchmark loads its
release, builds its own prompts and grades; `TransformersBackend` generates greedily with the
policy and the trainer's processor (nothing reloaded from disk). The subset is drawn once, seeded
and spread evenly over the question types (`benchmark_subset`, loaded before the model), so every step answers the same
questions. Questions are split across processes and the answers gathered, so every process grades
the same set and logs the same `bench/<name>/<score>` metrics (percent, `overall` among them).

Each step writes `<output>/validated/step-N/<name>/` (predictions.jsonl, run.json, results.json,
the plot) and, unless `keep_models` is "none", the policy's weights and processor in
`<output>/validated/step-N/`, outside the `checkpoint-*` folders that `save_total_limit` prunes. By
default ("best_and_last") only the best step's and the latest step's policies stay on disk: one per
validation step would be ~2 TB for the 7B paper run. The disk this takes is printed when training
starts.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from numerical3d.training.benchmark_subset import VALIDATED, BenchmarkSubset, step_config, step_dir
from numerical3d.training.benchmarks.backends import TransformersBackend
from numerical3d.training.benchmarks.base import grade_report, write_report
from numerical3d.training.benchmarks.common import Answers, BenchmarkConfig, key, write_text
from numerical3d.training.benchmarks.core import Prompt
from numerical3d.training.config import BenchmarkSection
from numerical3d.training.validation import Validation, bench_metric

def answer(backend: TransformersBackend, prompts: Iterable[Prompt], batch_size: int) -> list[tuple[str, str]]:
    """(id as text, raw output) of each prompt, generated `batch_size` at a time."""
    out: list[tuple[str, str]] = []
    batch: list[Prompt] = []
    for prompt in prompts:
        batch.append(prompt)
        if len(batch) == batch_size:
            out += [(key(p.id), text) for p, text in zip(batch, backend.generate(batch), strict=True)]
            batch = []
    if batch:
        out += [(key(p.id), text) for p, text in zip(batch, backend.generate(batch), strict=True)]
    return out


class BenchmarkValidation(TrainerCallback):
    """Answers the benchmark subset with the trainer's policy at the validation steps. The subset is
    loaded and its inputs checked before (`BenchmarkSubset.load`), so a bad benchmark folder stops the
    run before the model loads; `bind` gives it the trainer."""

    def __init__(self, subset: BenchmarkSubset, section: BenchmarkSection, every_steps: int, output_dir: str | Path,
                 max_completion_length: int):
        self.trainer: Any = None
        self.section = section
        self.every_steps = every_steps
        self.output_dir = Path(output_dir)
        self.max_completion_length = max_completion_length
        self.bench, self.release, self.items = subset.bench, subset.release, subset.items
        self.last_step: int | None = None
        self.overall: dict[int, float] = {}  # step -> overall score, of the steps whose policy was saved

    def bind(self, trainer: Any) -> "BenchmarkValidation":
        """Answer with `trainer`'s policy and processor."""
        self.trainer = trainer
        return self

    def step_dir(self, step: int) -> Path:
        return step_dir(self.output_dir, step)

    def _config(self, step: int) -> BenchmarkConfig:
        return step_config(self.section, self.output_dir, step, self.max_completion_length)

    def run(self, step: int) -> dict[str, float]:
        """Keep the policy (if asked), answer, grade, write the step's files, log the scores."""
        from accelerate.utils import gather_object
        from trl.models.utils import unwrap_model_for_generation

        trainer = self.trainer
        acc = trainer.accelerator
        where = self.step_dir(step)
        if self.section.keep_models != "none":
            trainer.save_model(str(where))  # collective under DeepSpeed: every process calls it
            if trainer.is_world_process_zero():
                trainer.processing_class.save_pretrained(str(where))
        cfg = self._config(step)
        feed = self.bench.feed(cfg)
        protocol = cfg.protocol(**feed.setting, subset=len(self.items), subset_seed=self.section.seed)
        mine = self.items[acc.process_index :: acc.num_processes]
        tokenizer = trainer.processing_class.tokenizer
        padding_side = tokenizer.padding_side
        with unwrap_model_for_generation(trainer.model_wrapped, acc) as model, acc.autocast():
            was_training = model.training
            model.eval()
            backend = TransformersBackend(model, trainer.processing_class, feed.visual, protocol["max_new_tokens"])
            pairs = answer(backend, self.bench.prompts(cfg, mine), cfg.batch_size)
            model.train(was_training)
        tokenizer.padding_side = padding_side
        predictions = dict(gather_object(pairs))
        answers = Answers(protocol, predictions, sum(key(it.id) not in predictions for it in self.items))
        report = grade_report(self.bench, cfg, self.release, self.items, answers)
        if trainer.is_world_process_zero():
            write_text(cfg.out / "run.json", json.dumps(protocol, indent=1, sort_keys=True) + "\n")
            write_text(cfg.out / "predictions.jsonl", "".join(
                json.dumps({"id": it.id, "prediction": predictions[key(it.id)]}, ensure_ascii=False) + "\n"
                for it in self.items if key(it.id) in predictions))
            write_report(self.bench, cfg, report)
        metrics = {bench_metric(self.section.name, name): value for name, value in report.scores.percent().items()}
        Validation._log(trainer, metrics)
        self.last_step = step
        if self.section.keep_models != "none":
            self.overall[step] = metrics[bench_metric(self.section.name, "overall")]
        if self.section.keep_models == "best_and_last" and trainer.is_world_process_zero():
            self._prune(step)
        return metrics

    def kept_steps(self, latest: int) -> set[int]:
        """The steps whose policy stays under "best_and_last": the best (earliest of ties) and `latest`."""
        best = max(sorted(self.overall), key=lambda s: self.overall[s])  # max keeps the first of ties
        return {best, latest}

    def _prune(self, latest: int) -> None:
        """Remove the saved policies of the steps no longer kept; their benchmark results stay."""
        keep = self.kept_steps(latest)
        for step in sorted(self.overall):
            if step in keep:
                continue
            for entry in self.step_dir(step).iterdir():
                if entry.name != self.section.name:
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
            del self.overall[step]

    def policy_bytes(self) -> int:
        """Bytes of one saved policy: what `save_model` writes (adapters only for a LoRA run; 16-bit
        weights gathered under ZeRO-3, the model's own dtype otherwise)."""
        from accelerate.utils import is_peft_model

        trainer = self.trainer
        model = trainer.accelerator.unwrap_model(trainer.model)
        params = [p for p in model.parameters() if p.requires_grad] if is_peft_model(model) else \
            list(model.parameters())
        plugin = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
        zero3 = plugin is not None and plugin.zero_stage == 3
        return sum(getattr(p, "ds_numel", p.numel()) * (2 if zero3 else p.element_size()) for p in params)

    def disk_note(self, max_steps: int) -> str:
        """One line: the disk the kept policies will take under this run's `keep_models`."""
        where = self.output_dir / VALIDATED
        size = self.policy_bytes() / 1e9
        keep = self.section.keep_models
        if keep == "none":
            return f"validation.benchmark keeps no policy (keep_models: none); results go to {where}"
        steps = math.ceil(max_steps / self.every_steps) if self.every_steps else 1
        if keep == "all":
            return (f"validation.benchmark keeps every validated policy (keep_models: all): {steps} x "
                    f"{size:.2f} GB = {steps * size:.1f} GB in {where}")
        return (f"validation.benchmark keeps the best and the last policy (keep_models: best_and_last): at most "
                f"{min(steps, 3)} x {size:.2f} GB = {min(steps, 3) * size:.1f} GB in {where} while saving, "
                f"{min(steps, 2) * size:.1f} GB after")

    def on_train_begin(self, args, state, control, **kwargs):
        if self.trainer.is_world_process_zero():
            print(self.disk_note(state.max_steps), flush=True)

    def on_step_end(self, args, state, control, **kwargs):
        if self.every_steps and state.global_step % self.every_steps == 0:
            self.run(state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        if self.last_step != state.global_step:
            self.run(state.global_step)
