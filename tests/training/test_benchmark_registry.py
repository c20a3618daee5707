"""The benchmark registry and `numerical3d benchmark run NAME`: a benchmark is one module holding
`BENCHMARK`; its config's fields are the command's options.

The throwaway benchmark below lives in a temporary folder installed as a distribution whose entry
point (group `numerical3d.benchmarks`) names it, on the subprocess's path only: no project file is
touched, and it is listed, documented, run and graded through the console script like the released ones.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from distribution import console, write_distribution

TOY = textwrap.dedent('''
    """A throwaway benchmark: questions.jsonl of {"id", "question", "answer"}, graded as numbers
    within --tolerance."""

    from collections.abc import Iterator
    from dataclasses import dataclass
    from pathlib import Path
    from typing import Any

    from pydantic import Field

    from numerical3d.training.benchmarks.base import Benchmark, Release, Report
    from numerical3d.training.benchmarks.common import BenchmarkConfig, ModelInput, key
    from numerical3d.training.benchmarks.core import BenchmarkError, Prompt


    class ToyConfig(BenchmarkConfig):
        data: Path = Field(description="A folder holding questions.jsonl.")
        tolerance: float = Field(0.0, ge=0, description="Largest absolute error counted correct.")


    @dataclass
    class Question:
        id: str
        question: str
        answer: float


    @dataclass
    class Scores:
        correct: int
        total: int

        def percent(self) -> dict[str, float]:
            return {"overall": 100.0 * self.correct / self.total}


    def close(prediction: str, answer: float, tolerance: float) -> bool:
        try:
            return abs(float(prediction) - answer) <= tolerance
        except ValueError:
            return False


    class Toy(Benchmark):
        name = "toy-count"
        title = "Toy-Count"
        summary = "Counting questions graded within a tolerance."
        config = ToyConfig

        def load(self, cfg: ToyConfig) -> Release:
            import json

            path = cfg.data / "questions.jsonl"
            if not path.is_file():
                raise BenchmarkError(f"{path}: question file not found")
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            return Release([Question(**row) for row in rows], {"questions_file": str(path)})

        def feed(self, cfg: ToyConfig) -> ModelInput:
            return ModelInput("images", 0, {"tolerance": cfg.tolerance})

        def prompts(self, cfg: ToyConfig, items: list[Any]) -> Iterator[Prompt]:
            return (Prompt(q.id, q.question, []) for q in items)

        def grade(self, cfg: ToyConfig, items: list[Question], predictions: dict[str, str]) -> Scores:
            hits = sum(close(predictions.get(key(q.id), ""), q.answer, cfg.tolerance) for q in items)
            return Scores(hits, len(items))

        def results(self, scores: Scores) -> dict[str, Any]:
            return {**scores.percent(), "correct": scores.correct}

        def render(self, report: Report) -> Any:
            from rich.table import Table

            table = Table(title=f"{report.benchmark}: {report.name}")
            table.add_column("n")
            table.add_column("accuracy")
            table.add_row(str(report.questions), f"{report.scores.percent()['overall']:.1f}")
            return table


    BENCHMARK = Toy()
''')

# (answer, prediction): with --tolerance 0.5, "4.4" against 4 counts and "5" against 4 does not.
TOY_CASES = [(3, "3"), (4, "4.4"), (4, "5"), (7, "seven"), (2, None)]


def cli(*args: str | Path, extra_path: Path | None = None) -> subprocess.CompletedProcess:
    """`numerical3d ARGS` in a subprocess; `extra_path` (a folder of installed distributions) joins PYTHONPATH."""
    return console(*args, installed=extra_path)


@pytest.fixture
def toy(tmp_path) -> tuple[Path, Path, Path]:
    """(folder with the toy benchmark installed: a `numerical3d.benchmarks` entry point, benchmark folder,
    predictions file)."""
    plugin = write_distribution(tmp_path / "plugin", "toy_count", TOY,
                                {"numerical3d.benchmarks": {"toy-count": "toy_count:BENCHMARK"}})
    data = tmp_path / "toy-data"
    data.mkdir()
    (data / "questions.jsonl").write_text("".join(
        json.dumps({"id": f"q{i}", "question": f"How many chairs in room {i}?", "answer": answer}) + "\n"
        for i, (answer, _) in enumerate(TOY_CASES)))
    preds = tmp_path / "toy-preds.jsonl"
    preds.write_text("".join(json.dumps({"id": f"q{i}", "prediction": p}) + "\n"
                             for i, (_, p) in enumerate(TOY_CASES) if p is not None))
    return plugin, data, preds


def test_a_throwaway_benchmark_module_is_listed_documented_and_run(toy, tmp_path):
    plugin, data, preds = toy
    listed = cli("benchmark", "list", extra_path=plugin)
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert names == sorted(names) and {"cvbench", "toy-count", "vsibench"} <= set(names)
    assert "Toy-Count: Counting questions graded within a tolerance." in listed.stdout

    helped = cli("benchmark", "run", "toy-count", "--help", extra_path=plugin)
    assert helped.returncode == 0, helped.stderr
    assert "--tolerance" in helped.stdout and "Largest absolute error counted correct." in helped.stdout
    assert "--frames" not in helped.stdout  # VSI-Bench's own option is not the toy's

    out = tmp_path / "out"
    res = cli("benchmark", "run", "toy-count", "--data", data, "--predictions", preds, "--out", out,
              "--tolerance", "0.5", extra_path=plugin)
    assert res.returncode == 0, res.stderr
    results = json.loads((out / "results.json").read_text())
    # q0 exact, q1 within 0.5, q2 off by 1, q3 not a number, q4 unanswered: 2 of 5
    assert results["overall"] == pytest.approx(40.0) and results["correct"] == 2
    assert results["benchmark"] == "Toy-Count" and results["model"] == "toy-preds"
    assert results["questions"] == 5 and results["missing_predictions"] == 1
    assert results["questions_file"] == str(data / "questions.jsonl")
    assert results["protocol"] == {"prompt": "official", "predictions": str(preds)}
    assert [json.loads(x)["id"] for x in (out / "predictions.jsonl").read_text().splitlines()] == ["q0", "q1", "q2", "q3"]
    assert "Toy-Count: toy-preds" in res.stdout and "40.0" in res.stdout
    assert "1 question(s) had no prediction" in res.stdout and "plot:" not in res.stdout

    strict = cli("benchmark", "run", "toy-count", "--data", data, "--predictions", preds, "--out", tmp_path / "strict",
                 "--json", extra_path=plugin)
    assert strict.returncode == 0, strict.stderr
    assert json.loads(strict.stdout)["overall"] == pytest.approx(20.0)  # only q0 at tolerance 0

    bad = cli("benchmark", "run", "toy-count", "--data", data, "--predictions", preds, "--out", tmp_path / "b",
              "--tolerance", "-1", extra_path=plugin)
    assert bad.returncode == 2 and "--tolerance: Input should be greater than or equal to 0" in bad.stderr
    missing = cli("benchmark", "run", "toy-count", "--data", tmp_path, "--predictions", preds, "--out", tmp_path / "m",
                  extra_path=plugin)
    assert missing.returncode == 2 and f"{tmp_path / 'questions.jsonl'}: question file not found" in missing.stderr


def test_without_the_module_the_benchmark_is_unknown(toy, tmp_path):
    _, data, preds = toy
    res = cli("benchmark", "run", "toy-count", "--data", data, "--predictions", preds, "--out", tmp_path / "o")
    assert res.returncode == 2 and "No such command 'toy-count'" in res.stderr
    assert "toy-count" not in cli("benchmark", "list").stdout


def test_registry_holds_the_released_benchmarks():
    from numerical3d.training.benchmarks.backends import BACKENDS
    from numerical3d.training.benchmarks.core import BenchmarkError
    from numerical3d.training.benchmarks.cvbench import CvBenchConfig
    from numerical3d.training.benchmarks.registry import benchmarks, get_benchmark
    from numerical3d.training.benchmarks.vsibench import VsiBenchConfig

    found = benchmarks()
    assert {"vsibench", "cvbench"} <= set(found)
    assert found["vsibench"].config is VsiBenchConfig and found["cvbench"].config is CvBenchConfig
    assert all(name == bench.name for name, bench in found.items())
    with pytest.raises(BenchmarkError, match="unknown benchmark 'nope'; choose one of"):
        get_benchmark("nope")
    assert list(BACKENDS) == ["transformers", "vllm"]


def test_config_values_are_checked_with_the_option_named(tmp_path):
    from numerical3d.training.benchmarks.core import BenchmarkError
    from numerical3d.training.benchmarks.vsibench import VsiBenchConfig

    base = {"data": tmp_path, "out": tmp_path / "o", "predictions": tmp_path / "p.jsonl"}
    for change, message in [({"frames": 0}, "--frames: Input should be greater than or equal to 1"),
                            ({"backend": "onnx"}, "--backend: unknown backend 'onnx'; choose one of ['transformers', 'vllm']"),
                            ({"visual": "audio"}, "--visual: Input should be 'video' or 'images'"),
                            ({"batch_size": 0}, "--batch-size: Input should be greater than or equal to 1")]:
        with pytest.raises(BenchmarkError) as exc:
            VsiBenchConfig.parse({**base, **change})
        assert str(exc.value) == message
    assert VsiBenchConfig.parse(base).frames == 32


OUTSIDE = textwrap.dedent('''
    """A multiple-choice image benchmark the paper has no column for: questions.jsonl of
    {"id", "kind", "question", "image", "answer"}, graded on the first letter of the answer."""

    import json
    from typing import Any

    from pydantic import Field
    from pathlib import Path

    from numerical3d.training.benchmarks.base import Release
    from numerical3d.training.benchmarks.common import BenchmarkConfig
    from numerical3d.training.benchmarks.multichoice import ChoiceBenchmark, ChoiceItem, ImageRef


    class ShapesConfig(BenchmarkConfig):
        data: Path = Field(description="A folder holding questions.jsonl and its images.")


    class Shapes(ChoiceBenchmark):
        name = "shapes"
        title = "Shapes"
        summary = "Which shape is shown, graded on the answer's first letter."
        config = ShapesConfig
        average = "groups"
        max_images = 1

        def load(self, cfg: ShapesConfig) -> Release:
            rows = [json.loads(line) for line in (cfg.data / "questions.jsonl").read_text().splitlines()]
            return Release([ChoiceItem(r["id"], r["kind"], r["question"], r["answer"], (ImageRef(None, r["image"]),))
                            for r in rows], {"questions_file": str(cfg.data / "questions.jsonl")})

        def prompt_text(self, item: ChoiceItem, mode: Any) -> str:
            return item.question

        def correct(self, text: str, answer: str) -> float:
            return 1.0 if text.strip()[:1] == answer else 0.0


    BENCHMARK = Shapes()
''')
# (id, kind, answer, prediction): round 1 of 2 right, square 1 of 1: mean of groups 75, of questions 66.7.
OUTSIDE_CASES = [("s0", "round", "A", "A. circle"), ("s1", "round", "B", "C"), ("s2", "square", "C", "C")]


def test_a_benchmark_outside_the_paper_grades_renders_and_plots(tmp_path):
    from .test_mmsi import png

    plugin = write_distribution(tmp_path / "plugin", "shapes", OUTSIDE, {"numerical3d.benchmarks": {"shapes": "shapes"}})
    data = tmp_path / "shapes-data"
    data.mkdir()
    rows = []
    for i, (qid, kind, answer, _) in enumerate(OUTSIDE_CASES):
        (data / f"{qid}.png").write_bytes(png(40 * i))
        rows.append({"id": qid, "kind": kind, "question": "Which shape? A. circle B. oval C. square",
                     "image": f"{qid}.png", "answer": answer})
    (data / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    preds = tmp_path / "shapes-preds.jsonl"
    preds.write_text("".join(json.dumps({"id": c[0], "prediction": c[3]}) + "\n" for c in OUTSIDE_CASES))

    out = tmp_path / "out"
    res = cli("benchmark", "run", "shapes", "--data", data, "--predictions", preds, "--out", out, extra_path=plugin)
    assert res.returncode == 0, res.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["overall"] == pytest.approx(75.0) and results["overall_micro"] == pytest.approx(200 / 3)
    assert results["round"] == pytest.approx(50.0) and results["counts"] == {"round": 2, "square": 1}
    assert "grading" not in results  # one rule only
    assert "Shapes: shapes-preds" in res.stdout and "Shapes (mean of groups)" in res.stdout and "75.0" in res.stdout
    assert "SmoothOp" not in res.stdout and "Qwen2.5-VL" not in res.stdout  # no paper rows to show
    assert f"plot: {out / 'shapes.png'}" in res.stdout and (out / "shapes.png").stat().st_size > 1000


def test_a_misspelt_paper_column_fails_on_import():
    from numerical3d.training.benchmarks.multichoice import ChoiceBenchmark

    with pytest.raises(TypeError, match=r"Bad.paper_column = 'mind_cube' is not a column of the paper's Table 1\(b\)"):
        type("Bad", (ChoiceBenchmark,), {"paper_column": "mind_cube"})
    assert type("Outside", (ChoiceBenchmark,), {}).paper_column is None
