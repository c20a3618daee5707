"""Every benchmark's answer rule against the official grading it follows.

Two checks per rule. A table of tricky answers whose readings were obtained by running the
official code on them (MindCube's `extract_answer` at 6d8fd9a, the current one, and at 8650074, the
first; MMSI-Bench's README rule at 5de2f3d; lmms-eval's `mmsi_bench` and `blink` tasks at 75571cf;
thinking-in-space's VSI-Bench `fuzzy_matching` at 51e089c); CV-Bench has no official reading, its
column is the project's rule (VSI-Bench's token, parentheses removed). And a reference written here
from what that code does (its regular expressions in their order, which match each stage keeps),
checked against the project's implementation on thousands of generated answers made of the pieces
these rules look at.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numerical3d.training.benchmarks import blink, cvbench, mindcube, mmsi
from numerical3d.verifiers.vsibench import exact_match, first_token, mra_from_text, to_float

# prediction -> the letter each rule reads (None: none, scored wrong). VSI-Bench and CV-Bench compare
# a token with the letter, so their column is the letter the token equals (case-insensitively).
TABLE = [
    # prediction, VSI-Bench, CV-Bench, MMSI README, MMSI lmms-eval, MindCube, MindCube v1, BLINK
    ("A", "A", "A", "A", "A", "A", "A", "A"),
    ("(A)", None, "A", "A", "A", "A", "A", "A"),
    ("A.", "A", "A", "A", "A", "A", "A", "A"),
    ("a", "A", "A", None, "A", None, None, "A"),
    ("(b)", None, "B", None, "B", None, None, "B"),
    ("b.", "B", "B", None, "B", None, None, "B"),
    ("The answer is (B).", None, None, "B", "B", "B", "B", "T"),
    ("The answer is B", None, None, "B", "B", "B", "B", "T"),
    ("A, B", None, None, "A", "A", "A", "B", "A"),
    ("A and D", "A", "A", "D", "D", "A", "D", "A"),
    ("B and C", "B", "B", "C", "C", "B", "C", "B"),
    ("DA", None, None, None, None, None, "A", "D"),
    ("A B", "A", "A", "B", "B", "A", "B", "A"),
    ("C or D", "C", "C", "D", "D", "C", "D", "C"),
    ("", None, None, None, None, None, None, None),
    ("A chair", "A", "A", None, None, "A", "A", "A"),
    ("(A) chair", None, "A", "A", "A", "A", "A", "A"),
    ("Answer: C", None, None, "C", "C", "C", "C", "A"),
    ("Answer: C.", None, None, "C", "C", "C", "C", "A"),
    ("<answer>C. Left</answer>", None, None, "C", "C", "C", "C", None),
    ("``D``", None, None, "D", "D", "D", "D", None),
    ("{C}", None, None, "C", "C", "C", "C", None),
    ("I think it is D", "I", "I", "D", "D", "D", "D", "I"),
    ("Both A. and B.", None, None, "A", "A", "B", "B", "B"),
    ("E", "E", "E", None, "E", "E", "E", "E"),
    ("E, B", None, None, "B", "E", "E", "B", "E"),
    ("e", "E", "E", None, "E", None, None, "E"),
    ("F", "F", "F", None, "F", None, None, "F"),
    ("1", None, None, None, None, None, None, None),
    ("BAD", None, None, None, None, None, "D", "B"),
    ("Cat", None, None, None, None, None, None, "C"),
    ("A\nB", None, None, "B", "B", "A", "B", "A"),  # the line-start pattern consumed the newline
    ("B\nA chair", None, None, None, None, "B", "A", "B"),
    ("*C*", None, None, "C", "C", "C", "C", None),
    ("My answer is B", None, None, "B", "B", "B", "B", "M"),
    ("answer is c", None, None, None, "C", None, None, "A"),
    ("<Answer> B and C", None, None, "C", "C", "C", "C", None),
    (" B", None, None, "B", "B", "B", "B", "B"),  # VSI-Bench's split on " " gives an empty token
    ("C) left", None, "C", "C", "C", "C", "C", "C"),
    ("Option B", None, None, "B", "B", "B", "B", "O"),
    ("(C).", None, "C", "C", "C", "C", "C", "C"),
]
LETTERS = "ABCDEF"

# VSI-Bench's numerical answers: what `to_float(fuzzy_matching(...))` reads and the MRA it earns against
# 2.0, by thinking-in-space's code at 51e089c (Python's float() takes "1e3", "1_000", "nan" and other
# scripts' digits; the token ends at the first space only).
NUMERIC_TABLE = [
    ("2.5.", 2.5, 0.6), ("3 meters", 3.0, 0.1), ("2\nmeters", None, 0.0), (" 3", None, 0.0), ("three", None, 0.0),
    ("1,000", None, 0.0), ("1e3", 1000.0, 0.0), ("1_000", 1000.0, 0.0), ("inf", float("inf"), 0.0),
    ("-2", -2.0, 0.0), ("+2.0", 2.0, 1.0), ("3m", None, 0.0), ("\u0663", 3.0, 0.1), ("2..", 2.0, 1.0),
    ("2.5.0", None, 0.0), ("2 .", 2.0, 1.0), ("(2)", None, 0.0), ("2.25", 2.25, 0.8), ("", None, 0.0),
]


def token_letter(token: str) -> str | None:
    return token.upper() if len(token) == 1 and token.isalpha() else None


def gradable(letter: str | None) -> str | None:
    """A reading as answers A-F can score it: a letter outside them is never right."""
    return letter if letter is not None and letter in LETTERS else None


def scored_letter(correct, prediction: str) -> str | None:
    """The letter a correct(prediction, answer) rule accepts, found by trying every answer."""
    hits = [g for g in LETTERS if correct(prediction, g) == 1.0]
    assert len(hits) <= 1, (prediction, hits)
    return hits[0] if hits else None


@pytest.mark.parametrize(("prediction", "vsi", "cv", "mmsi_readme", "mmsi_lmms", "mc", "mc_v1", "blink_"), TABLE)
def test_the_project_reads_the_table_as_the_official_code(prediction, vsi, cv, mmsi_readme, mmsi_lmms, mc, mc_v1,
                                                           blink_):
    assert token_letter(first_token(prediction)) == vsi
    assert scored_letter(exact_match, prediction) == gradable(vsi)
    assert token_letter(cvbench.letter(first_token(prediction))) == cv
    assert scored_letter(lambda p, g: cvbench.correct(p, f"({g})"), prediction) == gradable(cv)
    assert scored_letter(mmsi.correct, prediction) == mmsi_readme
    assert scored_letter(lambda p, g: mmsi.correct(p, g, "lmms-eval"), prediction) == mmsi_lmms
    assert mindcube.extract_letter(prediction) == mc
    assert mindcube.extract_letter(prediction, "v1-2025-06") == mc_v1
    assert scored_letter(mindcube.correct, prediction) == mc
    assert scored_letter(lambda p, g: mindcube.correct(p, g, "v1-2025-06"), prediction) == mc_v1
    assert (blink.extract_letter(prediction) or None) == blink_
    assert scored_letter(lambda p, g: blink.correct(p, f"({g})"), prediction) == gradable(blink_)


@pytest.mark.parametrize(("prediction", "vsi", "cv", "mmsi_readme", "mmsi_lmms", "mc", "mc_v1", "blink_"), TABLE)
def test_the_references_read_the_table_as_the_official_code(prediction, vsi, cv, mmsi_readme, mmsi_lmms, mc, mc_v1,
                                                             blink_):
    assert token_letter(vsi_token(prediction)) == vsi
    assert token_letter(vsi_token(prediction).strip().strip("()").strip()) == cv
    assert mmsi_reference(prediction, lmms_eval=False) == mmsi_readme
    assert mmsi_reference(prediction, lmms_eval=True) == mmsi_lmms
    assert mindcube_reference(prediction, first_version=False) == mc
    assert mindcube_reference(prediction, first_version=True) == mc_v1
    assert blink_reference(prediction) == blink_


@pytest.mark.parametrize(("prediction", "number", "score"), NUMERIC_TABLE)
def test_vsibench_numbers_read_as_the_official_code(prediction, number, score):
    assert to_float(first_token(prediction)) == number
    assert mra_from_text(prediction, "2.0") == pytest.approx(score)
    assert mra_reference(prediction, 2.0) == pytest.approx(score)


def documented_table() -> list[tuple[str | None, ...]]:
    """The tricky-answer table of docs/evaluation.md, as TABLE writes it."""
    text = (Path(__file__).parents[2] / "docs" / "evaluation.md").read_text(encoding="utf-8")
    lines = text[text.index("**The rules on the tricky answers.**"):].splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| prediction"))
    table = []
    for line in itertools.takewhile(lambda x: x.startswith("|"), lines[header + 2:]):
        cells = [c.strip() for c in line.strip("|").split("|")]
        shown = cells[0]
        prediction = ("" if shown == "empty" else " B" if shown == "` B` (leading space)"
                      else shown[3:-3] if shown.startswith("`` ") else shown[1:-1]).replace("\\n", "\n")
        table.append((prediction, *(None if c == "-" else c for c in cells[1:])))
    return table


def test_the_docs_show_this_table():
    assert documented_table() == TABLE


# ---- references, from what the official code does ----

def vsi_token(prediction: str) -> str:
    """VSI-Bench: the text before the first space character, periods cut from its end, then stripped."""
    head = prediction.split(" ", 1)[0]
    while head.endswith("."):
        head = head[:-1]
    return head.strip()


def mra_reference(prediction: str, truth: float) -> float:
    """VSI-Bench's Mean Relative Accuracy: the share of the ten thresholds whose complement the
    relative error stays within; an answer that is no number earns 0. The thresholds are numpy's
    linspace(0.5, 0.95, 10) in float64, which decides the ties: 11 against 10 passes 0.9."""
    try:
        value = float(vsi_token(prediction))
    except ValueError:
        return 0.0
    error = abs(value - truth) / truth
    return sum(bool(error <= 1 - theta) for theta in np.linspace(0.5, 0.95, 10)) / 10


def mmsi_reference(prediction: str, lmms_eval: bool) -> str | None:
    """MMSI-Bench: narrow to ``...``, then `...`, then {...} (the first of each, when present); then
    the first stand-alone letter not followed by whitespace and an ASCII letter. The README looks
    for capital A-D, lmms-eval (since 2026-03-01) for A-F of either case."""
    text = prediction
    for enclosed in (r"``([^`]*)``", r"`([^`]*)`", r"\{([^}]*)\}"):
        inner = re.search(enclosed, text)
        if inner is not None:
            text = inner.group(1)
    letters, flags = ("A-F", re.IGNORECASE) if lmms_eval else ("A-D", 0)
    for hit in re.finditer(rf"\b[{letters}]\b", text, flags):
        if re.match(r"\s[a-zA-Z]", text[hit.end():], flags) is None:
            return hit.group().upper()
    return None


_DESCRIPTION = "A-Za-z0-9 \\-\\(\\)\\'\""


def mindcube_reference(prediction: str, first_version: bool) -> str | None:
    """MindCube's extractor: stages in order, the first that finds a letter wins, and each keeps the
    last of its matches; the first version had one more pattern in its third stage."""
    if not prediction:
        return None

    def last(pattern: str, text: str) -> str | None:
        found = re.findall(pattern, text)
        return found[-1] if found else None

    whole = last(r"([A-E])\.", prediction)
    if whole:
        return whole
    section = re.search(r"<Answer>(.*?)(?:<|$)", prediction, re.DOTALL)
    if section is not None:
        for pattern in (r"[Mm]y answer is ([A-E])", r"[Tt]he answer is ([A-E])", r"(?:Answer: )?([A-E])\.",
                        r"\b([A-E])\b"):
            found = last(pattern, section.group(1))
            if found:
                return found
    patterns = [rf"(?:Answer: )?([A-E])\. [{_DESCRIPTION},]+(?=(?:\n|$|\.|\"))",
                rf"(?:Answer: )?([A-E])\. [{_DESCRIPTION}]+"]
    if first_version:
        patterns.append(r"(?:Answer: )?([A-E])(?:\.|$|\s)")
    patterns += [r"(?:^|\n)(?:Answer: )?([A-E])(?:\.|$|\s)", r"[\*\"]([A-E])[\*\"]", r"\bAnswer:?\s*([A-E])\b",
                 r"[Mm]y answer is ([A-E])", r"answer is ([A-E])"]
    for pattern in patterns:
        found = last(pattern, prediction)
        if found:
            return found
    lines = prediction.split("\n")
    described = [m.group(1) for line in lines if (m := re.search(rf"([A-E])\. [{_DESCRIPTION},]+", line))]
    if described:
        return described[-1]
    for line in lines[::-1]:
        word = re.search(r"\b([A-E])\b", line)
        if word:
            return word.group(1)
    return None


def blink_reference(prediction: str) -> str | None:
    """lmms-eval's BLINK: after stripping, any run of "(" and whitespace, then a letter (either case)."""
    found = re.match(r"[(\s]*([a-zA-Z])", prediction.strip())
    return found.group(1).upper() if found else None


# ---- generated answers ----

PIECES = ["A", "B", "C", "D", "E", "F", "a", "b", "e", ".", " ", " ", "\n", "(", ")", ",", ":", "Answer: ", "Answer:",
          "answer is ", "The answer is ", "My answer is ", "<Answer>", "</Answer>", "<answer>", "</answer>", "<",
          "`", "``", "{", "}", "*", '"', "'", "-", "and", "chair", "Above", "I", "1", "2.5"]
ANSWERS = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)
MANY = settings(max_examples=2000, derandomize=True, deadline=None)


@MANY
@given(ANSWERS)
def test_mindcube_agrees_with_the_reference(prediction):
    assert mindcube.extract_letter(prediction) == mindcube_reference(prediction, first_version=False)
    assert mindcube.extract_letter(prediction, "v1-2025-06") == mindcube_reference(prediction, first_version=True)


@MANY
@given(ANSWERS, st.sampled_from("ABCD"))
def test_mmsi_agrees_with_the_reference(prediction, answer):
    for rule, lmms_eval in (("readme", False), ("lmms-eval", True)):
        assert mmsi.correct(prediction, answer, rule) == float(mmsi_reference(prediction, lmms_eval) == answer)


def test_vsibench_thresholds_are_numpy_floats():
    """A relative error of exactly 0.1 passes the 0.9 threshold: 1 - linspace's 0.8999999999999999."""
    assert mra_from_text("11", "10") == mra_reference("11", 10.0) == pytest.approx(0.9)


@MANY
@given(st.lists(st.sampled_from(["1", "2", "0", ".", " ", "e", "-", "+", "_", "\n", "m", "nan"]), max_size=8).map("".join),
       st.sampled_from([0.5, 2.0, 3.7, 10.0]))
def test_vsibench_numbers_agree_with_the_reference(prediction, truth):
    assert mra_from_text(prediction, str(truth)) == pytest.approx(mra_reference(prediction, truth))


@MANY
@given(ANSWERS, st.sampled_from("ABCD"))
def test_blink_vsibench_and_cvbench_agree_with_the_references(prediction, answer):
    assert (blink.extract_letter(prediction) or None) == blink_reference(prediction)
    assert blink.correct(prediction, f"({answer})") == float(blink_reference(prediction) == answer)
    assert first_token(prediction) == vsi_token(prediction)
    assert exact_match(prediction, answer) == float(vsi_token(prediction).lower() == answer.lower())
    assert cvbench.correct(prediction, f"({answer})") == float(
        vsi_token(prediction).strip().strip("()").strip().lower() == answer.lower())


def test_the_two_mindcube_extractors_differ_on_answers_with_several_letters():
    """How often the authors' change moves a reading, on the generated answers (seeded)."""
    import random

    rng = random.Random(0)
    answers = ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12))) for _ in range(5000)]
    moved = [a for a in answers if mindcube.extract_letter(a) != mindcube.extract_letter(a, "v1-2025-06")]
    assert 0.02 < len(moved) / len(answers) < 0.2
    # The change only removed a pattern: every moved answer read something under the first version.
    assert all(mindcube.extract_letter(a, "v1-2025-06") is not None for a in moved)
