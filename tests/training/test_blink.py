"""`numerical3d benchmark run blink` on a folder written in BLINK's released layout (one folder per
subtask holding val-00000-of-00001.parquet, images embedded in image_1 .. image_4): fixed
predictions graded against tables computed by hand under both rules, lmms-eval's letter rule on
the tricky answers, and a few rows of BLINK's published model outputs (re-typed) graded as
BLINK's eval/evaluate.py grades them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from numerical3d.training.benchmarks.blink import BENCHMARK as BLINK
from numerical3d.training.benchmarks.blink import correct, exact, extract_letter, find_tables, load_items

from .test_mmsi import png

BENCHMARK = "blink"  # what the `invoke` fixture (conftest.py) runs

IMAGES = {"Counting": 1, "Multi-view_Reasoning": 2, "Jigsaw": 3}
CHOICES = {"Counting": 4, "Multi-view_Reasoning": 2, "Jigsaw": 2}
# (subtask, answer, prediction or None for no line, correct by the letter rule, by the exact rule)
CASES = [
    ("Counting", "(A)", "(A)", 1.0, 1.0),
    ("Counting", "(B)", "B", 1.0, 0.0),
    ("Counting", "(C)", "c. 3", 1.0, 0.0),  # case-insensitive
    ("Counting", "(D)", "The answer is (D).", 0.0, 0.0),  # reads the "T" of "The"
    ("Multi-view_Reasoning", "(A)", "A, B", 1.0, 0.0),  # several letters: the first one counts
    ("Multi-view_Reasoning", "(B)", "", 0.0, 0.0),
    ("Multi-view_Reasoning", "(A)", None, 0.0, 0.0),  # no prediction
    ("Jigsaw", "(B)", " (B) the second", 1.0, 0.0),
    ("Jigsaw", "(B)", "Answer: B", 0.0, 0.0),  # reads the "A" of "Answer"
]
SUBTASKS = "Counting,Multi-view_Reasoning,Jigsaw"
# Letter rule: Counting 3/4, Multi-view 1/3, Jigsaw 1/2; overall = mean of the three, micro 5/9.
EXPECTED_LETTER = {"overall": (75.0 + 100 / 3 + 50.0) / 3, "overall_micro": 500 / 9, "Counting": 75.0,
                   "Multi-view_Reasoning": 100 / 3, "Jigsaw": 50.0}
# Exact rule: Counting 1/4, the others 0.
EXPECTED_EXACT = {"overall": 25.0 / 3, "overall_micro": 100 / 9, "Counting": 25.0, "Multi-view_Reasoning": 0.0,
                  "Jigsaw": 0.0}

TRICKY = [("A", "A"), ("(A)", "A"), ("A.", "A"), ("a", "A"), ("The answer is (B).", "T"), ("A, B", "A"),
          ("", ""), ("  (C) Point C", "C"), ("Answer: C", "A"), ("1", "")]

# Rows of BLINK's eval/saved_outputs, re-typed: (model, idx, answer, prediction). "(C) Point C" is a
# choice the authors' GPT-3.5 matcher wrote with its text, which evaluate.py's string match counts wrong.
SAVED = [
    ("GPT4Turbo", "val_Functional_Correspondence_1", "(A)", "(D)"),
    ("GPT4Turbo", "val_Functional_Correspondence_2", "(C)", "(C)"),
    ("GPT4Turbo", "val_Functional_Correspondence_3", "(B)", "(C)"),
    ("GPT4Turbo", "val_Functional_Correspondence_28", "(C)", "(C) Point C"),
    ("MiniGPT-4-v2", "val_Art_Style_3", "(B)", "(Z)"),
    ("GPT4o", "val_Counting_1", "(D)", "(D)"),
    ("GPT4o", "val_Counting_2", "(D)", "(B)"),
]


def image_cell(value: int, name: str) -> dict:
    return {"bytes": png(value), "path": name}


def case_ids() -> list[str]:
    """The published idx form, numbered from 1 within each subtask."""
    counters: dict[str, int] = {}
    ids = []
    for case in CASES:
        counters[case[0]] = counters.get(case[0], 0) + 1
        ids.append(f"val_{case[0]}_{counters[case[0]]}")
    return ids


def write_blink(root: Path, rows: list[tuple[str, str, str]] | None = None) -> Path:
    """One folder per subtask of `rows` = (subtask, idx, answer); default: CASES."""
    rows = rows or [(c[0], idx, c[1]) for c, idx in zip(CASES, case_ids())]
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    for task in dict.fromkeys(r[0] for r in rows):
        mine = [(i, r) for i, r in enumerate(rows) if r[0] == task]
        n_images, n_choices = IMAGES.get(task, 2), CHOICES.get(task, 4)
        columns = {"idx": [r[1] for _, r in mine], "question": [f"Question {i}?" for i, _ in mine],
                   "sub_task": [task] * len(mine)}
        for j in range(4):
            cells = [image_cell(10 * i + j, f"{i}_{j}.png") if j < n_images else None for i, _ in mine]
            columns[f"image_{j + 1}"] = pa.array(cells, type=image_type)
        columns["choices"] = [[f"choice {c}" for c in range(n_choices)] for _ in mine]
        columns["answer"] = [r[2] for _, r in mine]
        columns["prompt"] = [f"Question {i}?\nSelect from the following choices.\n(A) choice 0\n(B) choice 1"
                             for i, _ in mine]
        columns["explanation"] = [""] * len(mine)
        (root / task).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(columns), root / task / "val-00000-of-00001.parquet")
    return root


def write_predictions(path: Path) -> Path:
    path.write_text("".join(json.dumps({"id": i, "prediction": c[2]}) + "\n"
                            for i, c in zip(case_ids(), CASES) if c[2] is not None))
    return path


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    return write_blink(tmp_path_factory.mktemp("blink"))


@pytest.mark.parametrize(("prediction", "letter"), TRICKY)
def test_the_letter_rule_on_tricky_answers(prediction, letter):
    assert extract_letter(prediction) == letter
    assert correct(prediction, "(A)") == (1.0 if letter == "A" else 0.0)


@pytest.mark.parametrize(("match", "expected"), [("letter", EXPECTED_LETTER), ("exact", EXPECTED_EXACT)])
def test_grading_fixed_predictions_equals_the_hand_table(invoke, bench, tmp_path, match, expected):
    res = invoke("--data", bench, "--subtasks", SUBTASKS, "--match", match,
                 "--predictions", write_predictions(tmp_path / "p.jsonl"), "--out", tmp_path / "out")
    assert res.exit_code == 0, res.output
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert {k: results[k] for k in expected} == pytest.approx(expected)
    assert results["missing_predictions"] == 1 and results["average"] == "groups"
    rule = correct if match == "letter" else exact
    for _, answer, prediction, by_letter, by_exact in CASES:
        assert rule(prediction or "", answer) == (by_letter if match == "letter" else by_exact)


def test_published_outputs_graded_as_blinks_evaluate_py(invoke, tmp_path):
    """evaluate.py: per subtask, the share of predictions equal to the answer; overall, the mean of
    the subtasks. By hand: Functional_Correspondence 1/4, Art_Style 0/1, Counting 1/2 -> 25, 0, 50."""
    root = write_blink(tmp_path / "blink", [(idx.split("_", 1)[1].rsplit("_", 1)[0], idx, answer)
                                            for _, idx, answer, _ in SAVED])
    preds = tmp_path / "saved.jsonl"
    preds.write_text("".join(json.dumps({"id": idx, "prediction": p}) + "\n" for _, idx, _, p in SAVED))
    res = invoke("--data", root, "--subtasks", "Functional_Correspondence,Art_Style,Counting", "--match", "exact",
                 "--predictions", preds, "--out", tmp_path / "out", "--json")
    assert res.exit_code == 0, res.output
    results = json.loads(res.stdout)
    assert results["Functional_Correspondence"] == pytest.approx(25.0) and results["Art_Style"] == 0.0
    assert results["Counting"] == pytest.approx(50.0) and results["overall"] == pytest.approx(25.0)
    # lmms-eval's letter rule reads "(C) Point C" as C: one more right in Functional_Correspondence
    res = invoke("--data", root, "--subtasks", "Functional_Correspondence,Art_Style,Counting",
                 "--predictions", preds, "--out", tmp_path / "out2", "--json")
    assert json.loads(res.stdout)["Functional_Correspondence"] == pytest.approx(50.0)


def test_console_script_grades_a_predictions_file(bench, tmp_path):
    res = subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "benchmark", "run", "blink",
                          "--data", str(bench), "--subtasks", SUBTASKS,
                          "--predictions", str(write_predictions(tmp_path / "p.jsonl")),
                          "--out", str(tmp_path / "out"), "--json"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    results = json.loads(res.stdout)
    assert {k: results[k] for k in EXPECTED_LETTER} == pytest.approx(EXPECTED_LETTER)
    assert results["benchmark"] == "BLINK" and len(results["tables"]) == 3


def test_prompt_and_images(bench):
    items = load_items(find_tables(bench, "val", SUBTASKS.split(",")))
    assert [it.id for it in items] == case_ids()
    assert BLINK.prompt_text(items[0], "official") == (
        "Note: You only need to respond with A, B, C, D without providing any additional information.\n"
        "Question 0?\nSelect from the following choices.\n(A) choice 0\n(B) choice 1")
    assert BLINK.prompt_text(items[4], "official").startswith("Note: You only need to respond with A, B without")
    cfg = BLINK.config(data=bench, out=bench / "o", predictions=bench / "x")
    prompts = list(BLINK.prompts(cfg, items))
    assert [len(p.frames) for p in prompts] == [1, 1, 1, 1, 2, 2, 2, 3, 3]


def test_bad_release_names_the_file(invoke, bench, tmp_path):
    (tmp_path / "p.jsonl").write_text("")
    res = invoke("--data", bench, "--predictions", tmp_path / "p.jsonl", "--out", tmp_path / "o")
    assert res.exit_code == 2 and "Visual_Similarity: no val-*.parquet" in res.output  # all 14 by default
    res = invoke("--data", bench, "--subtasks", "Counting,Depth", "--predictions", tmp_path / "p.jsonl",
                 "--out", tmp_path / "o")
    assert res.exit_code == 2 and "--subtasks: unknown subtask(s) ['Depth']" in res.output
