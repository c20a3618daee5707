"""Answer extraction, format reward and unit-aware number parsing."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numerical3d.verifiers.parsing import (
    MAX_ANSWER_CHARS,
    choice_candidates,
    extract_answer,
    find_phrases,
    format_ok,
    format_reward,
    numeric_candidates,
    parse_numbers,
    replace_number_words,
    split_completion,
)


@pytest.mark.parametrize(
    "text, unit, expected",
    [
        ("1.5 m", "m", [1.5]),
        ("150 cm", "m", [1.5]),
        ("1,500 mm", "m", [1.5]),
        ("2 meters", "m", [2.0]),
        ("2 Metres.", "m", [2.0]),
        ("1.5", "cm", [1.5]),  # a bare number is read in the item's unit
        ("0.85 m", "cm", [85.0]),
        ("20 m^2", "m2", [20.0]),
        ("20 m²", "m2", [20.0]),
        ("20 square meters", "m2", [20.0]),
        ("20 sq m", "m2", [20.0]),
        ("200000 cm^2", "m2", [20.0]),
        ("three", "", [3.0]),
        ("a dozen", "", [12.0]),
        ("twenty-five", "", [25.0]),
        ("one hundred and twenty", "", [120.0]),
        ("three meters", "m", [3.0]),
        ("1,5 m", "m", [1.5]),  # decimal comma
        ("-3.2", "m", [-3.2]),
        (".5m", "m", [0.5]),
        ("10 feet", "m", [3.048]),
        ("20 m^2", "m", []),  # an area is not a length
        ("2 m", "m2", []),
        ("about 1.5 m (150 cm)", "m", [1.5, 1.5]),
        ("1-2 m", "m", [1.0, 2.0]),
        ("nan", "m", []),
        ("inf m", "m", []),
        ("1e400", "m", []),
        ("5e6 m", "m", []),  # absurd magnitude
        ("1.2.3", "m", []),
        ("scene0001", "m", []),
    ],
)
def test_numeric_candidates(text, unit, expected):
    assert numeric_candidates(text, unit) == pytest.approx(expected)


def test_number_words():
    assert replace_number_words("one or two chairs") == "1 or 2 chairs"
    assert replace_number_words("a hundred") == "100"
    assert replace_number_words("two thousand and five") == "2005"
    assert parse_numbers("one two") == [1.0, 2.0]  # two numbers, not 3
    assert replace_number_words("someone alone") == "someone alone"


def test_extract_answer_last_tag_wins():
    assert extract_answer("<think>1</think><answer>2</answer> <answer>3</answer>") == "3"
    assert extract_answer("<answer> 4 m </answer>") == "4 m"


def test_extract_answer_fallbacks():
    assert extract_answer("<think>x</think><answer>5 m") == "5 m"  # unclosed
    assert extract_answer("<think>it is 3 or 4</think> 7") == "7"  # after </think>
    assert extract_answer("Let me think. The answer is 2.5 m") == "2.5 m"
    assert extract_answer("Answer: B") == "B"
    assert extract_answer("4") == "4"
    assert extract_answer("") is None
    assert extract_answer("<answer></answer>") is None
    assert extract_answer("<answer>" + "9" * (MAX_ANSWER_CHARS + 1) + "</answer>") is None
    assert extract_answer(None) is None  # type: ignore[arg-type]


def test_extract_answer_nested_tags():
    assert extract_answer("<answer><answer>1</answer></answer>") == "1"
    assert extract_answer("<think><answer>1</answer></think><answer>2</answer>") == "2"


@pytest.mark.parametrize(
    "completion, ok",
    [
        ("<think>a</think><answer>b</answer>", True),
        ("  <think>a</think>\n\n<answer>b</answer>\n", True),
        ("<think></think><answer>b</answer>", True),
        ("<think>a < b</think><answer>1</answer>", True),
        ("<answer>b</answer>", False),
        ("<think>a</think>", False),
        ("<think>a</think>x<answer>b</answer>", False),
        ("<think>a</think><answer>b</answer>x", False),
        ("<think>a</think><answer> </answer>", False),
        ("<think>a<think>b</think><answer>c</answer>", False),
        ("<think>a</think><answer>b</answer><answer>c</answer>", False),
        ("<answer>b</answer><think>a</think>", False),
        ("", False),
    ],
)
def test_format_reward(completion, ok):
    assert format_ok(completion) is ok
    assert format_reward(completion) == float(ok)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("B", ["B"]), ("b", ["B"]), ("(B)", ["B"]), ("B.", ["B"]), ("B. table", ["B"]), ("table", ["B"]),
        ("The table", ["B"]), ("Option C", ["C"]), ("A or B", ["A", "B"]), ("A, B, C, D", ["A", "B", "C", "D"]),
        ("B. chair", ["B", "A"]), ("nothing", []),
    ],
)
def test_choice_candidates(text, expected):
    assert choice_candidates(text, ("chair", "table", "sofa", "lamp")) == expected


def test_choice_article_is_not_a_letter():
    assert choice_candidates("A chair", ("table", "chair")) == ["B"]


junk = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    st.lists(st.sampled_from(["<think>", "</think>", "<answer>", "</answer>", "1.5", " m", "cm", "three", ",", "."
                              , "-", "e", "A", "nan", "²", "^2", "\x00", "é"]), max_size=30).map("".join),
)


@given(junk)
@settings(max_examples=400, deadline=None)
def test_parsing_never_raises(text):
    ok, ans = split_completion(text)
    assert isinstance(ok, bool)
    assert ans is None or (isinstance(ans, str) and ans and len(ans) <= MAX_ANSWER_CHARS)
    assert ok == format_ok(text)
    for unit in ("m", "cm", "mm", "m2", ""):
        for v in numeric_candidates(text, unit):
            assert math.isfinite(v) and abs(v) <= 1e6
    choice_candidates(text, ("x", "y", "z"))


@given(st.floats(-1e5, 1e5, allow_nan=False).map(lambda x: round(x, 4)), st.sampled_from(["m", "cm", "mm"]))
@settings(max_examples=200, deadline=None)
def test_written_number_round_trips(x, unit):
    assert numeric_candidates(f"{x} {unit}", unit) == pytest.approx([x])
    assert numeric_candidates(repr(x), unit) == pytest.approx([x])


@given(st.lists(st.floats(-1e4, 1e4, allow_nan=False).map(lambda x: round(x, 3)), min_size=1, max_size=4),
       st.sampled_from(["({})", "[{}]", "{}", "{}."]))
@settings(max_examples=150, deadline=None)
def test_plain_tuples_parse_like_the_general_scanner(values, wrap):
    text = wrap.format(", ".join(repr(v) for v in values))
    assert parse_numbers(text) == pytest.approx(values)
    assert parse_numbers(text + " m") == pytest.approx(values)  # the general path agrees


def test_find_phrases_whole_words_longest_first():
    phrases = ("chair", "table", "coffee table", "lamp")
    hits = find_phrases("Chairs, then the coffee-table; table and lamps", phrases, plural=True)
    assert [p for _, p in hits] == ["chair", "coffee table", "table", "lamp"]
    assert find_phrases("armchair tablet", phrases, plural=True) == []
    assert find_phrases("chairs", phrases) == []  # plural only when asked
