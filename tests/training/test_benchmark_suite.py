"""`numerical3d benchmark run all`: every benchmark found under a data root, graded from a folder
of predictions files (through the console script) or answered by the tiny model; one results
file, Table 1 beside the paper's rows, a plot; a missing folder is skipped, a finished
benchmark is not run again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from numerical3d.training.benchmarks.blink import SUBTASKS

from . import test_blink, test_cvbench, test_mindcube, test_mmsi, test_vsibench

SMALL_VIDEOS = {"scannet/scene0011_00": 3, "arkitscenes/41069025": 3, "scannetpp/0d2ee665be": 3}
VSI_OVERALL = sum(test_vsibench.EXPECTED.values()) / 8


def write_root(root: Path, mindcube: bool = True) -> Path:
    """VSI-Bench (with its debiased table), CV-Bench, MMSI-Bench, BLINK (all 14 subtasks, one
    question each) and, if asked, MindCube, each in its released layout under its folder."""
    vsi = test_vsibench.write_benchmark(root / "vsibench", videos=SMALL_VIDEOS)
    pq.write_table(pq.read_table(vsi / "test-00000-of-00001.parquet"), vsi / "test_debiased.parquet")
    test_cvbench.write_cvbench(root / "cvbench")
    test_mmsi.write_mmsi(root / "mmsi")
    test_blink.write_blink(root / "blink", [(t, f"val_{t}_1", "(A)") for t in SUBTASKS])
    if mindcube:
        test_mindcube.write_mindcube(root / "mindcube")
    return root


def write_predictions_root(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    vsi = test_vsibench.write_predictions_file(root / "vsibench.jsonl")
    (root / "vsibench-debiased.jsonl").write_text(vsi.read_text())
    (root / "cvbench.jsonl").write_text("".join(json.dumps({"id": i, "prediction": c[4]}) + "\n"
                                                for i, c in enumerate(test_cvbench.CASES) if c[4] is not None))
    test_mmsi.write_predictions(root / "mmsi.jsonl")
    test_mindcube.write_predictions(root / "mindcube.jsonl")
    # BLINK: right on the first 7 subtasks, wrong on the other 7 -> 50.
    (root / "blink.jsonl").write_text("".join(json.dumps({"id": f"val_{t}_1", "prediction": "A" if k < 7 else "B"}) + "\n"
                                              for k, t in enumerate(SUBTASKS)))
    return root


def run_all(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "benchmark", "run", "all",
                           *map(str, args)], capture_output=True, text=True, timeout=600)


def test_run_all_grades_every_benchmark_and_skips_a_missing_one(tmp_path):
    data = write_root(tmp_path / "data", mindcube=False)
    preds = write_predictions_root(tmp_path / "preds")
    out = tmp_path / "out"
    args = ["--data-root", data, "--predictions-root", preds, "--out", out, "--name", "mine",
            "--option", "vsibench.table=test-00000-of-00001.parquet"]
    res = run_all(*args)
    assert res.returncode == 0, res.stdout + res.stderr
    results = json.loads((out / "results.json").read_text())
    status = {n: b["status"] for n, b in results["benchmarks"].items()}
    assert status == {"blink": "ran", "cvbench": "ran", "mindcube": "missing", "mmsi": "ran", "vsibench": "ran",
                      "vsibench-debiased": "ran"}
    assert "mindcube: not found, skipped" in results["benchmarks"]["mindcube"]["message"]
    mine = results["table_1"]["b_other"]["mine"]
    assert mine.pop("mindcube") is None
    assert mine == pytest.approx({"cvbench": test_cvbench.EXPECTED["overall"], "mmsi": 40.0, "blink": 50.0})
    assert results["table_1"]["a_vsibench"]["mine"]["overall"] == pytest.approx(VSI_OVERALL)
    assert results["table_1"]["b_other"]["SmoothOp-7B"] == {"cvbench": 86.4, "mmsi": 33.7, "mindcube": 39.6, "blink": 62.6}
    assert results["table_1"]["not_in_paper"]["mine"]["vsibench-debiased"] == pytest.approx(VSI_OVERALL)
    table = (out / "table1.md").read_text()
    assert f"| **mine** | {test_cvbench.EXPECTED['overall']:.1f} | 40.0 | - | 50.0 |" in table
    assert "| Qwen2.5-VL-3B | 71.4 | 28.6 | 37.6 | 47.6 |" in table
    assert (out / "table1.png").stat().st_size > 1000 and (out / "mmsi" / "results.json").is_file()
    assert "MindCube: missing" in res.stdout

    # The missing folder appears: a rerun into the same folder now fills the MindCube column.
    test_mindcube.write_mindcube(data / "mindcube")
    res = run_all(*args)
    assert res.returncode == 0, res.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["table_1"]["b_other"]["mine"]["mindcube"] == pytest.approx(300 / 9)


def test_run_all_reports_a_broken_release_and_goes_on(tmp_path):
    data = write_root(tmp_path / "data")
    preds = write_predictions_root(tmp_path / "preds")
    res = run_all("--data-root", data, "--predictions-root", preds, "--out", tmp_path / "out")
    assert res.returncode == 1  # VSI-Bench's folder holds two tables and no --option picks one
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["benchmarks"]["vsibench"]["status"] == "error"
    assert "expected one parquet question table" in results["benchmarks"]["vsibench"]["message"]
    assert results["benchmarks"]["mindcube"]["status"] == "ran"
    res = run_all("--data-root", data, "--out", tmp_path / "o2")
    assert res.returncode == 2 and "exactly one of --model PATH and --predictions-root DIR" in res.stderr
    res = run_all("--data-root", data, "--predictions-root", preds, "--out", tmp_path / "o3", "--option", "mmsi.frames=3")
    assert res.returncode == 2 and "mmsi has no option 'frames'" in res.stderr
    res = run_all("--data-root", data, "--model", "m", "--out", tmp_path / "o4", "--backend", "onnx")
    assert res.returncode == 2 and "--backend: unknown backend 'onnx'" in res.stderr


@pytest.mark.slow
@pytest.mark.xdist_group("tiny-model")
def test_tiny_model_runs_the_image_benchmarks_end_to_end_and_resumes(tmp_path_factory, tmp_path):
    """MMSI-Bench, MindCube, BLINK and CV-Bench answered by the tiny Qwen2.5-VL (images), through
    `benchmark run all`; VSI-Bench is absent. A second run finds every result done."""
    from typer.testing import CliRunner

    from numerical3d.training.benchmarks.registry import benchmarks
    from numerical3d.training.cli import app
    from numerical3d.training.tiny import build_tiny_model

    data = tmp_path / "data"
    test_cvbench.write_cvbench(data / "cvbench")
    test_mmsi.write_mmsi(data / "mmsi")
    test_mindcube.write_mindcube(data / "mindcube")
    test_blink.write_blink(data / "blink")
    known = benchmarks()
    corpus = []
    for name, folder_opts in (("mmsi", {}), ("mindcube", {}), ("blink", {"subtasks": test_blink.SUBTASKS})):
        bench = known[name]
        cfg = bench.config.parse({"data": data / name, "out": tmp_path, "predictions": tmp_path, **folder_opts})
        corpus += [bench.prompt_text(it, "official") for it in bench.load(cfg).items]
    model = build_tiny_model(tmp_path_factory.mktemp("tiny-suite") / "model", corpus)
    args = ["benchmark", "run", "all", "--data-root", str(data), "--model", str(model), "--out", str(tmp_path / "run"),
            "--only", "cvbench,mmsi,mindcube,blink,vsibench", "--option", f"blink.subtasks={test_blink.SUBTASKS}",
            "--batch-size", "4", "--max-new-tokens", "4", "--name", "tiny"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output + repr(res.exception)
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    status = {n: b["status"] for n, b in results["benchmarks"].items()}
    assert status == {"cvbench": "ran", "mmsi": "ran", "mindcube": "ran", "blink": "ran", "vsibench": "missing"}
    for name, n in (("mmsi", 10), ("mindcube", 11), ("blink", 9)):
        bench_results = results["benchmarks"][name]["results"]
        assert bench_results["missing_predictions"] == 0 and 0.0 <= bench_results["overall"] <= 100.0
        lines = (tmp_path / "run" / name / "predictions.jsonl").read_text().splitlines()
        assert len(lines) == n
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    status = {n: b["status"] for n, b in json.loads((tmp_path / "run" / "results.json").read_text())["benchmarks"].items()}
    assert status == {"cvbench": "resumed", "mmsi": "resumed", "mindcube": "resumed", "blink": "resumed",
                      "vsibench": "missing"}


def test_a_finished_model_run_is_kept_only_under_the_same_answer_rule(tmp_path):
    """`benchmark run all --option mindcube.extractor=...` grades a finished run again (from its
    predictions.jsonl) rather than keeping results graded by the other extractor."""
    from numerical3d.training.benchmarks.mindcube import BENCHMARK as MINDCUBE
    from numerical3d.training.benchmarks.suite import _finished

    def config(**extra):
        return MINDCUBE.config(data=tmp_path, out=tmp_path / "out", model="Qwen/Qwen2.5-VL-7B-Instruct", **extra)

    done = config()
    (tmp_path / "out").mkdir()
    results = {"overall": 40.0, "protocol": done.protocol(**MINDCUBE.feed(done).setting), "limit": None,
               "missing_predictions": 0, "grading": {"extractor": "current"}}
    (tmp_path / "out" / "results.json").write_text(json.dumps(results))
    assert _finished(done, MINDCUBE) == results
    assert _finished(config(extractor="v1-2025-06"), MINDCUBE) is None
