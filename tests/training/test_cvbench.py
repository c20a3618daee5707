"""`numerical3d benchmark run cvbench` on a folder written in CV-Bench's released layout (test_2d.parquet
and test_3d.parquet with embedded images): fixed predictions graded against a table computed by
hand, and the tiny Qwen2.5-VL answering it end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from numerical3d.training.benchmarks.cvbench import correct, load_items, prompt_text

BENCHMARK = "cvbench"  # what the `invoke` fixture (conftest.py) runs

# (type, task, source, answer, prediction, correct?)
CASES = [
    ("2D", "Count", "ADE20K", "(C)", "(C)", 1.0),
    ("2D", "Count", "ADE20K", "(C)", "C. 1", 1.0),
    ("2D", "Count", "ADE20K", "(C)", "3", 0.0),
    ("2D", "Relation", "COCO", "(A)", "A", 1.0),
    ("2D", "Relation", "COCO", "(A)", "The answer is A", 0.0),
    ("3D", "Depth", "Omni3D", "(B)", "b", 1.0),
    ("3D", "Depth", "Omni3D", "(B)", "", 0.0),
    ("3D", "Distance", "Omni3D", "(A)", "(A) the chair", 1.0),
    ("3D", "Distance", "Omni3D", "(A)", None, 0.0),  # no prediction
]
# ADE20K 2/3, COCO 1/2, Omni3D 2/4; 2D = (2/3 + 1/2) / 2, 3D = 1/2, CV-Bench = (2D + 3D) / 2.
EXPECTED = {"ADE20K": 200 / 3, "COCO": 50.0, "Omni3D": 50.0, "accuracy_2d": 175 / 3, "accuracy_3d": 50.0,
            "overall": (175 / 3 + 50.0) / 2, "Count": 200 / 3, "Relation": 50.0, "Depth": 50.0, "Distance": 50.0}


def write_cvbench(root: Path) -> Path:
    import cv2

    root.mkdir(parents=True, exist_ok=True)
    for kind in ("2D", "3D"):
        rows = [(i, c) for i, c in enumerate(CASES) if c[0] == kind]
        images = [{"bytes": cv2.imencode(".png", np.full((32, 40, 3), 20 * i, np.uint8))[1].tobytes(),
                   "path": f"img/{kind}/{i}.png"} for i, _ in rows]
        table = pa.table({
            "idx": [i for i, _ in rows],
            "type": [c[0] for _, c in rows],
            "task": [c[1] for _, c in rows],
            "image": pa.array(images, type=pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
            "question": [f"Question {i}?" for i, _ in rows],
            "choices": [["a", "b", "c", "d"] for _ in rows],
            "answer": [c[3] for _, c in rows],
            "prompt": [f"Question {i}? Select from the following choices.\n(A) a\n(B) b\n(C) c\n(D) d" for i, _ in rows],
            "filename": [f"img/{kind}/{i}.png" for i, _ in rows],
            "source": [c[2] for _, c in rows],
        })
        pq.write_table(table, root / f"test_{kind.lower()}.parquet")
    return root


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    return write_cvbench(tmp_path_factory.mktemp("cvbench"))


def test_grading_fixed_predictions_equals_the_hand_table(invoke, bench, tmp_path):
    preds = tmp_path / "fixed.jsonl"
    preds.write_text("".join(json.dumps({"id": i, "prediction": c[4]}) + "\n" for i, c in enumerate(CASES) if c[4] is not None))
    res = invoke("--data", bench, "--predictions", preds, "--out", tmp_path / "out")
    assert res.exit_code == 0, res.output
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    for name, value in EXPECTED.items():
        assert results[name] == pytest.approx(value), name
    assert results["missing_predictions"] == 1 and results["missing_sources"] == []
    for *_, answer, prediction, expected in CASES:
        assert correct(prediction or "", answer) == expected
    assert "CV-Bench" in res.output and (tmp_path / "out" / "cvbench.png").stat().st_size > 1000


def test_console_script_grades_a_predictions_file(bench, tmp_path):
    """`numerical3d benchmark run cvbench` in a subprocess, as a user types it."""
    preds = tmp_path / "fixed.jsonl"
    preds.write_text("".join(json.dumps({"id": i, "prediction": c[4]}) + "\n" for i, c in enumerate(CASES) if c[4] is not None))
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "benchmark", "run",
                          "cvbench", "--data", str(bench), "--predictions", str(preds), "--out", str(out), "--json"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    results = json.loads(res.stdout)
    assert {k: results[k] for k in EXPECTED} == pytest.approx(EXPECTED)
    assert results == json.loads((out / "results.json").read_text())
    assert results["benchmark"] == "CV-Bench" and results["tables"] == [str(bench / "test_2d.parquet"),
                                                                         str(bench / "test_3d.parquet")]


def test_prompt_and_rows(bench):
    items = load_items(sorted(bench.glob("test*.parquet")))
    assert [it.id for it in items] == list(range(len(CASES)))
    assert prompt_text(items[0], "official") == (
        "Question 0? Select from the following choices.\n(A) a\n(B) b\n(C) c\n(D) d\n"
        "Answer with the option's letter from the given choices directly.")


def test_bad_release_names_the_file(invoke, tmp_path):
    (tmp_path / "empty").mkdir()
    res = invoke("--data", tmp_path / "empty", "--predictions", tmp_path / "p.jsonl", "--out", tmp_path / "o")
    assert res.exit_code == 2 and "predictions file not found" in res.output
    (tmp_path / "p.jsonl").write_text("")
    res = invoke("--data", tmp_path / "empty", "--predictions", tmp_path / "p.jsonl", "--out", tmp_path / "o")
    assert res.exit_code == 2 and "no test*.parquet question table" in res.output
    root = write_cvbench(tmp_path / "bad")
    table = pq.read_table(root / "test_3d.parquet").to_pydict()
    table["answer"][0] = "maybe"
    pq.write_table(pa.table(table), root / "test_3d.parquet")
    res = invoke("--data", root, "--predictions", tmp_path / "p.jsonl", "--out", tmp_path / "o")
    assert res.exit_code == 2 and "test_3d.parquet: row 0 (idx 5): answer must be a choice letter" in res.output


@pytest.mark.slow
@pytest.mark.xdist_group("tiny-model")
def test_tiny_model_end_to_end(invoke, bench, tmp_path_factory, tmp_path):
    from numerical3d.training.tiny import build_tiny_model

    items = load_items(sorted(bench.glob("test*.parquet")))
    model = build_tiny_model(tmp_path_factory.mktemp("tiny-cv") / "model", [prompt_text(it, "official") for it in items])
    res = invoke("--data", bench, "--model", model, "--out", tmp_path / "run", "--batch-size", "4", "--max-new-tokens", "4",
                 "--json")
    assert res.exit_code == 0, res.output + repr(res.exception)
    results = json.loads(res.stdout)
    assert 0.0 <= results["overall"] <= 100.0 and results["missing_predictions"] == 0
    assert results["protocol"]["max_new_tokens"] == 4
    lines = (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == list(range(len(CASES)))
