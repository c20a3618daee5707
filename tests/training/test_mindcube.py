"""`numerical3d benchmark run mindcube` on a folder written in MindCube's released layout
(raw/MindCube_tinybench.jsonl, images under other_all_image/): fixed predictions graded against a
table computed by hand, and the authors' answer extractor on the tricky answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from numerical3d.training.benchmarks.mindcube import BENCHMARK as MINDCUBE
from numerical3d.training.benchmarks.mindcube import correct, extract_letter, image_path, load_items

from .test_mmsi import png

BENCHMARK = "mindcube"  # what the `invoke` fixture (conftest.py) runs

# (id, gt_answer, prediction or None for no line, correct?)
CASES = [
    ("among_group001_q1", "A", "<answer>A. Above</answer>", 1.0),
    ("among_group001_q2", "B", "B", 1.0),
    ("among_group002_q1", "C", "The answer is (C).", 1.0),
    ("among_group002_q2", "D", "A, D", 0.0),  # several letters: the current extractor reads A (v1 read D)
    ("around_group003_q1", "A", "(B)", 0.0),
    ("around_group003_q2", "B", "", 0.0),
    ("around_group004_q1", "C", "c.", 0.0),  # lower case is not read
    ("rotation_group005_q1", "A", "A. Above, or maybe B. Under", 0.0),  # the last "X." wins
    ("rotation_group005_q2", "B", None, 0.0),  # no prediction
    ("translation_group006_q1", "C", "C", 1.0),
    ("translation_group006_q2", "A", "E", 0.0),
]
# Overall leaves translation out: 3 right of the 9 others. Per setting: among 3/4, around 0/3,
# rotation 0/2, translation 1/2.
EXPECTED = {"overall": 300 / 9, "overall_micro": 300 / 9, "among": 75.0, "around": 0.0, "rotation": 0.0,
            "translation": 50.0}
# The authors' first extractor (--extractor v1-2025-06) reads "A, D" as D: among 4/4, overall 4/9.
EXPECTED_V1 = {**EXPECTED, "overall": 400 / 9, "overall_micro": 400 / 9, "among": 100.0}

TRICKY = [("A", "A"), ("(A)", "A"), ("A.", "A"), ("The answer is (B).", "B"), ("The answer is B", "B"),
          ("A, B", "A"), ("B and C", "B"), ("A and D", "A"), ("DA", None), ("", None), ("a", None), ("<answer>C. Left</answer>", "C"),
          ("Answer: D", "D"), ("**E**", "E"), ("I think A. Above is wrong; B. Under.", "B"), ("F", None)]


def write_mindcube(root: Path) -> Path:
    (root / "raw").mkdir(parents=True, exist_ok=True)
    lines = []
    for i, (qid, answer, _, _) in enumerate(CASES):
        folder = qid.split("_")[0]
        images = []
        for k in range(2 + (i % 2)):
            rel = f"other_all_image/{folder}/{qid}_{k}.png"
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(png(10 * i + k))
            images.append(f"/home/someone/MindCube_data/{rel}" if i == 0 else rel)
        lines.append(json.dumps({"id": qid, "category": [folder], "type": "self", "meta_info": [],
                                 "question": f"Question {i}? A. Above B. Under C. Left D. Right E. Behind",
                                 "images": images, "gt_answer": answer}))
    (root / "raw" / "MindCube_tinybench.jsonl").write_text("\n".join(lines) + "\n")
    return root


def write_predictions(path: Path) -> Path:
    path.write_text("".join(json.dumps({"id": c[0], "prediction": c[2]}) + "\n" for c in CASES if c[2] is not None))
    return path


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    return write_mindcube(tmp_path_factory.mktemp("mindcube"))


@pytest.mark.parametrize(("prediction", "letter"), TRICKY)
def test_the_extractor_on_tricky_answers(prediction, letter):
    assert extract_letter(prediction) == letter
    assert correct(prediction, "B") == (1.0 if letter == "B" else 0.0)


def test_grading_fixed_predictions_equals_the_hand_table(invoke, bench, tmp_path):
    res = invoke("--data", bench, "--predictions", write_predictions(tmp_path / "p.jsonl"), "--out", tmp_path / "out")
    assert res.exit_code == 0, res.output
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert {k: results[k] for k in EXPECTED} == pytest.approx(EXPECTED)
    assert results["groups_outside_overall"] == ["translation"] and results["missing_predictions"] == 1
    for _, answer, prediction, expected in CASES:
        assert correct(prediction or "", answer) == expected
    assert "MindCube" in res.output and (tmp_path / "out" / "mindcube.png").stat().st_size > 1000


def test_the_first_extractor_is_an_option_and_recorded(invoke, bench, tmp_path):
    predictions = write_predictions(tmp_path / "p.jsonl")
    res = invoke("--data", bench, "--predictions", predictions, "--out", tmp_path / "v1", "--extractor", "v1-2025-06")
    assert res.exit_code == 0, res.output
    results = json.loads((tmp_path / "v1" / "results.json").read_text())
    assert {k: results[k] for k in EXPECTED_V1} == pytest.approx(EXPECTED_V1)
    assert results["grading"] == {"extractor": "v1-2025-06"}
    res = invoke("--data", bench, "--predictions", predictions, "--out", tmp_path / "cur")
    assert json.loads((tmp_path / "cur" / "results.json").read_text())["grading"] == {"extractor": "current"}
    res = invoke("--data", bench, "--predictions", predictions, "--out", tmp_path / "bad", "--extractor", "v2")
    assert res.exit_code == 2 and "--extractor" in res.output


def test_console_script_grades_a_predictions_file(bench, tmp_path):
    res = subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "benchmark", "run",
                          "mindcube", "--data", str(bench), "--predictions", str(write_predictions(tmp_path / "p.jsonl")),
                          "--out", str(tmp_path / "out"), "--json"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    results = json.loads(res.stdout)
    assert {k: results[k] for k in EXPECTED} == pytest.approx(EXPECTED)
    assert results["table"] == str(bench / "raw" / "MindCube_tinybench.jsonl")


def test_prompt_and_images(bench):
    items = load_items(bench / "raw" / "MindCube_tinybench.jsonl")
    assert MINDCUBE.prompt_text(items[1], "official") == (
        "[Task]\nYour task is to analyze the spatial arrangement of objects in the scene by examining the provided "
        "images, which show the scene from different viewpoints.\n[Answer Instruction]\nYou only need to provide *ONE* "
        "correct answer selecting from the options listed below. For example, if you think the correct answer is "
        "'A. Above' from 'A. Above B. Under C. Front D. Behind', your response should **only** be "
        "'<answer>A. Above</answer>'.\n\n[Question]\nQuestion 1? A. Above B. Under C. Left D. Right E. Behind")
    assert items[0].images[0].path == "other_all_image/among/among_group001_q1_0.png"  # cut at other_all_image/
    assert image_path("D:\\data\\MindCube_image\\other_all_image\\around\\x.jpg", "w") == "other_all_image/around/x.jpg"
    assert image_path("other_all_image/around/x.jpg", "w") == "other_all_image/around/x.jpg"
    cfg = MINDCUBE.config(data=bench, out=bench / "o", predictions=bench / "x")
    prompts = list(MINDCUBE.prompts(cfg, items[:2]))
    assert [len(p.frames) for p in prompts] == [2, 3] and prompts[1].frames[2][0, 0, 0] == 12


def test_bad_release_names_the_file(invoke, tmp_path):
    (tmp_path / "p.jsonl").write_text("")
    root = write_mindcube(tmp_path / "bad")
    path = root / "raw" / "MindCube_tinybench.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[0]]) + "\n")
    res = invoke("--data", root, "--predictions", tmp_path / "p.jsonl", "--out", tmp_path / "o")
    assert res.exit_code == 2 and "MindCube_tinybench.jsonl: line 2 (id 'among_group001_q1'): duplicate id" in res.output
    (root / "raw" / "MindCube_tinybench.jsonl").unlink()
    res = invoke("--data", root, "--predictions", tmp_path / "p.jsonl", "--out", tmp_path / "o")
    assert res.exit_code == 2 and "MindCube_tinybench.jsonl: question file not found" in res.output
