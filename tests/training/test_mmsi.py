"""`numerical3d benchmark run mmsi` on a folder written in MMSI-Bench's released layout
(MMSI_Bench.parquet, images embedded as a list of encoded images per row): fixed predictions
graded against a table computed by hand, and the authors' letter rule on the tricky answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from numerical3d.training.benchmarks.mmsi import BENCHMARK as MMSI
from numerical3d.training.benchmarks.mmsi import correct, extract_letter, load_items

BENCHMARK = "mmsi"  # what the `invoke` fixture (conftest.py) runs

POS, ATTR, MOTION, MSR = "Positional Relationship (Cam.–Obj.)", "Attribute (Meas.)", "Motion (Cam.)", "MSR"
# (question_type, answer, prediction or None for no line, correct?)
CASES = [
    (POS, "A", "A", 1.0),
    (POS, "B", "The answer is (B).", 1.0),
    (POS, "C", "``C``", 1.0),
    (ATTR, "D", "A, D", 0.0),  # several letters: the first one counts
    (ATTR, "A", "A chair", 0.0),  # a capital followed by a word is not a choice
    (ATTR, "B", "(B) the lamp", 1.0),
    (MOTION, "C", "", 0.0),
    (MOTION, "D", "d", 0.0),  # lower case is not read
    (MSR, "A", "I cannot tell.", 0.0),
    (MSR, "B", None, 0.0),  # no prediction
]
# 4 of 10 right; per type 3/3, 1/3, 0/2, 0/2.
EXPECTED = {"overall": 40.0, "overall_micro": 40.0, POS: 100.0, ATTR: 100 / 3, MOTION: 0.0, MSR: 0.0}

# The rule on the cases the docs list: (prediction, letter it reads).
TRICKY = [("A", "A"), ("(A)", "A"), ("A.", "A"), ("The answer is (B).", "B"), ("The answer is B", "B"),
          ("A, B", "A"), ("B and C", "C"),  # "B and": a capital followed by a word is skipped
          ("", None), ("a", None), ("A chair", None), ("``C``", "C"),
          ("`D`", "D"), ("{B}", "B"), ("Answer: C", "C"), ("E", None)]


def png(value: int, size: tuple[int, int] = (24, 32)) -> bytes:
    import cv2

    return cv2.imencode(".png", np.full((*size, 3), value, np.uint8))[1].tobytes()


def write_mmsi(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    table = pa.table({
        "id": list(range(len(CASES))),
        "images": pa.array([[png(10 * i), png(10 * i + 5)] + ([png(3)] if i == 9 else []) for i in range(len(CASES))],
                           type=pa.list_(pa.binary())),
        "question_type": [c[0] for c in CASES],
        "question": [f"Where is thing {i}?\nOptions: A: left, B: right, C: front, D: back" for i in range(len(CASES))],
        "answer": [c[1] for c in CASES],
        "thought": ["because" for _ in CASES],
    })
    pq.write_table(table, root / "MMSI_Bench.parquet")
    return root


def write_predictions(path: Path) -> Path:
    path.write_text("".join(json.dumps({"id": i, "prediction": c[2]}) + "\n" for i, c in enumerate(CASES) if c[2] is not None))
    return path


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    return write_mmsi(tmp_path_factory.mktemp("mmsi"))


@pytest.mark.parametrize(("prediction", "letter"), TRICKY)
def test_the_letter_rule_on_tricky_answers(prediction, letter):
    assert extract_letter(prediction) == letter
    assert correct(prediction, "B") == (1.0 if letter == "B" else 0.0)


def test_grading_fixed_predictions_equals_the_hand_table(invoke, bench, tmp_path):
    res = invoke("--data", bench, "--predictions", write_predictions(tmp_path / "p.jsonl"), "--out", tmp_path / "out")
    assert res.exit_code == 0, res.output
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert {k: results[k] for k in EXPECTED} == pytest.approx(EXPECTED)
    assert results["missing_predictions"] == 1 and results["counts"] == {POS: 3, ATTR: 3, MOTION: 2, MSR: 2}
    for _, answer, prediction, expected in CASES:
        assert correct(prediction or "", answer) == expected
    assert "MMSI-Bench" in res.output and (tmp_path / "out" / "mmsi.png").stat().st_size > 1000


def test_lmms_eval_rule_is_an_option_and_recorded(invoke, bench, tmp_path):
    """lmms-eval's rule reads the lower-case "d" (Motion 1/2): 5 of 10."""
    predictions = write_predictions(tmp_path / "p.jsonl")
    res = invoke("--data", bench, "--predictions", predictions, "--out", tmp_path / "lmms", "--rule", "lmms-eval")
    assert res.exit_code == 0, res.output
    results = json.loads((tmp_path / "lmms" / "results.json").read_text())
    assert results["overall"] == pytest.approx(50.0) and results[MOTION] == pytest.approx(50.0)
    assert results["grading"] == {"rule": "lmms-eval"}
    res = invoke("--data", bench, "--predictions", predictions, "--out", tmp_path / "readme")
    assert json.loads((tmp_path / "readme" / "results.json").read_text())["grading"] == {"rule": "readme"}


def test_console_script_grades_a_predictions_file(bench, tmp_path):
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "benchmark", "run", "mmsi",
                          "--data", str(bench), "--predictions", str(write_predictions(tmp_path / "p.jsonl")),
                          "--out", str(out), "--json"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    results = json.loads(res.stdout)
    assert {k: results[k] for k in EXPECTED} == pytest.approx(EXPECTED)
    assert results["benchmark"] == "MMSI-Bench" and results["table"] == str(bench / "MMSI_Bench.parquet")


def test_prompt_and_images(bench):
    items = load_items(bench / "MMSI_Bench.parquet")
    assert MMSI.prompt_text(items[0], "official") == (
        "Where is thing 0?\nOptions: A: left, B: right, C: front, D: back\n"
        "Answer with the option's letter from the given choices directly. Enclose the option's letter within ``.")
    cfg = MMSI.config(data=bench, out=bench / "o", predictions=bench / "x")
    prompts = list(MMSI.prompts(cfg, items))
    assert [len(p.frames) for p in prompts] == [2] * 9 + [3]
    assert prompts[1].frames[1].shape == (24, 32, 3) and prompts[1].frames[1][0, 0, 0] == 15


def test_bad_release_names_the_file(invoke, tmp_path):
    (tmp_path / "p.jsonl").write_text("")
    (tmp_path / "empty").mkdir()
    res = invoke("--data", tmp_path / "empty", "--predictions", tmp_path / "p.jsonl", "--out", tmp_path / "o")
    assert res.exit_code == 2 and "MMSI_Bench.parquet: question table not found" in res.output
    root = write_mmsi(tmp_path / "bad")
    table = pq.read_table(root / "MMSI_Bench.parquet").to_pydict()
    table["answer"][2] = "E"
    pq.write_table(pa.table(table), root / "MMSI_Bench.parquet")
    res = invoke("--data", root, "--predictions", tmp_path / "p.jsonl", "--out", tmp_path / "o")
    assert res.exit_code == 2 and "MMSI_Bench.parquet: row 2 (id 2): answer must be one of the letters" in res.output


def test_too_many_images_stop_before_the_model_loads(invoke, tmp_path):
    root = write_mmsi(tmp_path / "many")
    table = pq.read_table(root / "MMSI_Bench.parquet").to_pydict()
    table["images"][4] = [png(i) for i in range(17)]
    pq.write_table(pa.table(table), root / "MMSI_Bench.parquet")
    res = invoke("--data", root, "--model", tmp_path / "no-model-here", "--out", tmp_path / "o")
    assert res.exit_code == 2 and "question(s) [4] have more than 16 images" in res.output
