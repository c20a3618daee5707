"""The benchmark subset answered during training: drawn once, seeded, spread over the question
types; the benchmark's options checked when training starts; T_conv taken from the benchmark curve.
The run itself (the tiny model answering VSI-Bench at the validation steps) is in test_train.py."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from numerical3d.training.benchmark_subset import benchmark_config, stratified_subset
from numerical3d.training.benchmarks.core import BenchmarkError
from numerical3d.training.config import BenchmarkSection, ConfigError, load_config
from numerical3d.training.validation import results


@dataclass(frozen=True)
class Q:
    id: int
    question_type: str


# 3 + 40 + 12 questions of three types, interleaved as a table would be
ITEMS = [Q(i, t) for i, t in enumerate(["a"] * 3 + ["b"] * 40 + ["c"] * 12)]


def test_subset_is_fixed_by_seed_and_spread_over_types():
    one = stratified_subset(ITEMS, 15, seed=0)
    assert one == stratified_subset(ITEMS, 15, seed=0)  # the same subset at every step
    assert [q.id for q in one] == sorted(q.id for q in one)  # table order
    # 15 over three types: 5 each, but "a" has only 3, so its 2 go to the others
    assert Counter(q.question_type for q in one) == {"a": 3, "b": 6, "c": 6}
    other = stratified_subset(ITEMS, 15, seed=1)
    assert Counter(q.question_type for q in other) == Counter(q.question_type for q in one)
    assert other != one  # the seed draws which questions of each type
    assert stratified_subset(ITEMS, None, 0) == ITEMS and stratified_subset(ITEMS, 100, 0) == ITEMS
    assert len(stratified_subset(ITEMS, 1, 0)) == 1


def test_benchmark_options_are_checked_against_the_benchmark(tmp_path):
    section = BenchmarkSection(data=tmp_path, subset=4, frames=4, visual="images")
    cfg = benchmark_config(section, tmp_path / "out", "policy", max_completion_length=64)
    assert (cfg.frames, cfg.visual, cfg.prompt, cfg.max_new_tokens) == (4, "images", "reasoning", 64)
    official = section.model_copy(update={"prompt": "official"})
    assert benchmark_config(official, tmp_path, "policy", 64).max_new_tokens == 16  # lmms-eval's length
    with pytest.raises(BenchmarkError, match=r"unknown option\(s\) \['frame'\] of vsibench.*'frames'"):
        benchmark_config(BenchmarkSection(data=tmp_path, frame=4), tmp_path, "policy", 64)
    with pytest.raises(BenchmarkError, match=r"\['model'\] are set by training"):
        benchmark_config(BenchmarkSection(data=tmp_path, model="x"), tmp_path, "policy", 64)
    with pytest.raises(BenchmarkError, match="--frames"):
        benchmark_config(BenchmarkSection(data=tmp_path, frames=0), tmp_path, "policy", 64)
    with pytest.raises(BenchmarkError, match="unknown benchmark 'vsi'"):
        benchmark_config(BenchmarkSection(name="vsi", data=tmp_path), tmp_path, "policy", 64)


def test_config_section_needs_a_folder():
    with pytest.raises(ConfigError, match="validation.benchmark.data"):
        load_config("qwen2.5-vl-3b", {"validation": {"benchmark": {"subset": 10}}})
    cfg = load_config("qwen2.5-vl-3b", {"validation": {"benchmark": {"data": "vsi", "subset": 10, "frames": 8}}})
    assert cfg.validation.benchmark.data == Path("vsi") and cfg.validation.benchmark.options() == {"frames": 8}


def test_t_conv_is_taken_from_the_benchmark_curve():
    history = [{"step": 1, "ap/adv_var": 0.2}, {"step": 2, "val/accuracy": 0.5},
               {"step": 2, "bench/vsibench/overall": 20.0, "bench/vsibench/route_planning": 10.0},
               {"step": 4, "val/accuracy": 0.4}, {"step": 4, "bench/vsibench/overall": 40.0},
               {"step": 6, "val/accuracy": 0.3}, {"step": 6, "bench/vsibench/overall": 39.0}]
    split = results(history, "vsibench_tasks")
    assert (split.t_conv, split.t_conv_over, split.benchmark) == (2, "validation", None)
    bench = results(history, "vsibench_tasks", benchmark="vsibench")
    # 0.95 x 40 = 38: first reached at step 4 on the benchmark; the split's own T_conv is step 2
    assert (bench.t_conv, bench.t_conv_over, bench.t_conv_validation) == (4, "vsibench", 2)
    assert bench.benchmark["overall"] == 39.0 and bench.benchmark["t_conv"] == 4
    assert bench.benchmark["points"][0] == {"step": 2, "overall": 20.0, "route_planning": 10.0}


def test_train_stops_at_once_on_a_bad_benchmark_folder(tmp_path):
    """`numerical3d train` with `validation.benchmark` checks the folder before the dataset or the
    model loads (neither exists here) and stops with one line naming the file."""
    import subprocess
    import sys

    from numerical3d.training.config import CONFIG_DIR

    from .test_vsibench import write_benchmark

    bench = write_benchmark(tmp_path / "vsibench")
    (bench / "scannet" / "scene0011_00.mp4").unlink()

    def train(data: Path) -> subprocess.CompletedProcess:
        config = tmp_path / "run.yaml"
        config.write_text(f"base: {CONFIG_DIR / 'qwen2.5-vl-3b.yaml'}\nvalidation:\n  benchmark:\n"
                          f"    data: {data}\n    subset: 10\n    frames: 4\n")
        return subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "train", "--config",
                               str(config), "--dataset", str(tmp_path / "no-dataset"), "--model",
                               str(tmp_path / "no-model"), "--output", str(tmp_path / "run")],
                              capture_output=True, text=True, timeout=300)

    run = train(bench)
    assert run.returncode == 2 and "video(s) missing" in run.stderr and "scene0011_00.mp4" in run.stderr, run.stderr
    run = train(tmp_path / "nowhere")
    assert run.returncode == 2 and "nowhere: not a folder" in " ".join(run.stderr.split()), run.stderr
