"""The released benchmark a training run answers at its validation steps, loaded and checked without
a model (`validation.benchmark`): the registered benchmark's release, the fixed subset drawn from it
and its inputs (videos). `train` loads it before torch or the trainer is imported, so a bad benchmark
folder stops the run in about a second; `training.benchmark_validation` answers it with the policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from numerical3d.training.benchmarks.common import BenchmarkConfig
from numerical3d.training.benchmarks.core import BenchmarkError
from numerical3d.training.benchmarks.registry import get_benchmark
from numerical3d.training.config import BenchmarkSection

VALIDATED = "validated"  # <output>/validated/step-N/: the kept policy and its benchmark results
STRATUM_FIELDS = ("question_type", "group", "task")  # what each benchmark's items report scores by
SET_BY_TRAINING = frozenset({"out", "model", "predictions", "backend", "limit", "name"})


def stratum(item: Any) -> str:
    """The question type an item is scored under (its first of `STRATUM_FIELDS`), else one stratum."""
    return next((str(getattr(item, f)) for f in STRATUM_FIELDS if hasattr(item, f)), "")


def stratified_subset(items: Sequence[Any], n: int | None, seed: int) -> list[Any]:
    """`n` of `items`, in table order: the question types share `n` as evenly as their sizes allow
    (a type with fewer questions gives its share to the others, alphabetically), and each type's
    questions are drawn by a seeded shuffle. The same table, `n` and `seed` give the same subset."""
    if n is None or n >= len(items):
        return list(items)
    strata: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        strata.setdefault(stratum(item), []).append(i)
    rng = np.random.default_rng(seed)
    names = sorted(strata)
    drawn = {name: [strata[name][j] for j in rng.permutation(len(strata[name]))] for name in names}
    quota = dict.fromkeys(names, 0)
    left = n
    while left:
        for name in names:
            if left and quota[name] < len(drawn[name]):
                quota[name] += 1
                left -= 1
    return [items[i] for i in sorted(i for name in names for i in drawn[name][: quota[name]])]


def benchmark_config(section: BenchmarkSection, out: Path, model: str, max_completion_length: int) -> BenchmarkConfig:
    """The benchmark's own config for one validation step, its options checked (a bad one is a
    BenchmarkError naming the config key)."""
    bench = get_benchmark(section.name)
    options = section.options()
    reserved = sorted(SET_BY_TRAINING & set(options))
    if reserved:
        raise BenchmarkError(f"validation.benchmark: {reserved} are set by training, not in the config")
    unknown = sorted(set(options) - set(bench.config.model_fields))
    if unknown:
        known = sorted(set(bench.config.model_fields) - SET_BY_TRAINING - set(BenchmarkSection.model_fields))
        raise BenchmarkError(f"validation.benchmark: unknown option(s) {unknown} of {section.name}; known: {known}")
    tokens = section.max_new_tokens or (16 if section.prompt == "official" else max_completion_length)
    try:
        return bench.config.parse({**options, "data": section.data, "out": out, "model": model,
                                   "prompt": section.prompt, "max_new_tokens": tokens,
                                   "batch_size": section.batch_size})
    except BenchmarkError as exc:
        raise BenchmarkError(f"validation.benchmark ({section.name}): {exc}") from None


def step_dir(output_dir: Path, step: int) -> Path:
    """Where validation step `step` writes its benchmark results (and keeps its policy)."""
    return Path(output_dir) / VALIDATED / f"step-{step}"


def step_config(section: BenchmarkSection, output_dir: Path, step: int, max_completion_length: int) -> BenchmarkConfig:
    """The benchmark's config for validation step `step` (the policy is named by its folder or, when no
    policy is kept, by the step)."""
    where = step_dir(output_dir, step)
    model = str(where) if section.keep_models != "none" else f"{output_dir} policy at step {step}"
    return benchmark_config(section, where / section.name, model, max_completion_length)


@dataclass(frozen=True)
class BenchmarkSubset:
    """The registered benchmark, its loaded release and the subset every validation step answers."""

    bench: Any
    release: Any
    items: list[Any]

    @classmethod
    def load(cls, section: BenchmarkSection, output_dir: Path, max_completion_length: int) -> BenchmarkSubset:
        """Load the release, draw the subset and check its inputs: a BenchmarkError names what is wrong."""
        cfg = step_config(section, output_dir, 0, max_completion_length)
        bench = get_benchmark(section.name)
        release = bench.load(cfg)
        items = stratified_subset(release.items, section.subset, section.seed)
        bench.check_inputs(cfg, items)
        return cls(bench, release, items)
