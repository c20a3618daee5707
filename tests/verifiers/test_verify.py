"""verify(): every kind against hand-computed values, the multi-answer policy and bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from numerical3d import verifiers as V
from numerical3d.verifiers.scores import graph_score, kendall_score, pairwise_order_score
from numerical3d.verifiers.snra import snra

from .conftest import DIRS8


def ans(text: str) -> str:
    return f"<think>reasoning</think><answer>{text}</answer>"


# ------------------------------------------------------------------ numeric
def test_numeric_relative_squared_hand_value():
    r = V.verify(V.numeric_spec(2.0, "m"), ans("2.5 m"), k=10.0)
    assert r.parsed == 2.5 and r.error == pytest.approx(0.0625)  # ((2.5-2)/2)^2
    assert r.score is None and r.format_ok
    assert r.accuracy_reward == pytest.approx(2 / (1 + math.exp(0.625)))
    assert r.reward == pytest.approx(0.9 * r.accuracy_reward + 0.1)


def test_numeric_squared_in_si_units_with_scale():
    spec = V.numeric_spec(85.0, "cm", error="squared")
    assert V.verify(spec, ans("95 cm"), 1.0).error == pytest.approx(0.01)  # (0.1 m)^2
    assert V.verify(spec, ans("0.95 m"), 1.0).error == pytest.approx(0.01)
    scaled = V.numeric_spec(85.0, "cm", error="squared", scale=0.1)  # errors in units of 10 cm
    assert V.verify(scaled, ans("95"), 1.0).error == pytest.approx(1.0)


def test_numeric_unparseable_gets_e_max_and_clamps():
    spec = V.numeric_spec(2.0, "m")
    r = V.verify(spec, ans("no idea"), 1.0)
    assert r.parsed is None and r.error == 4.0  # default e_max for relative_squared
    far = V.verify(spec, ans("2000 m"), 1.0)
    assert far.error == 4.0  # a parsed error never exceeds e_max
    assert V.verify(V.numeric_spec(2.0, "m", e_max=9.0), ans("x"), 1.0).error == 9.0
    assert V.verify(spec, ans("20 m^2"), 1.0).parsed is None  # wrong dimension


def test_numeric_several_answers_score_as_worst():
    spec = V.numeric_spec(2.0, "m")
    hedge = V.verify(spec, ans("2 m or 3 m"), 10.0)
    assert hedge.ambiguous and hedge.parsed == 3.0
    assert hedge.error == pytest.approx(0.25)
    assert hedge.reward == V.verify(spec, ans("3 m"), 10.0).reward
    same = V.verify(spec, ans("2 m (200 cm)"), 10.0)  # one value written twice is one answer
    assert not same.ambiguous and same.error == 0.0


def test_numeric_bare_number_and_fallback_without_tags():
    spec = V.numeric_spec(1.5, "m")
    r = V.verify(spec, "The answer is 1.5", 10.0)
    assert r.error == 0.0 and not r.format_ok
    assert r.reward == pytest.approx(0.9)


# ------------------------------------------------------------------ count
def test_count_off_by_one_gives_e_minus_one():
    r = V.verify(V.count_spec(3), ans("4"), 50.0)
    assert r.score == pytest.approx(math.exp(-1))
    assert r.error == pytest.approx(V.phi(math.exp(-1)))
    assert V.verify(V.count_spec(3), ans("three"), 50.0).score == 1.0
    assert V.verify(V.count_spec(3, tau=2.0), ans("5 chairs"), 50.0).score == pytest.approx(math.exp(-1))


def test_count_linear_form():
    # max(0, 1 - |d| / (max(n, 1) + c)) = 1 - 2 / (4 + 1)
    assert V.verify(V.count_spec(4, form="linear"), ans("6"), 1.0).score == pytest.approx(0.6)
    assert V.verify(V.count_spec(0, form="linear"), ans("9"), 1.0).score == 0.0


def test_count_hedge_and_unparseable():
    assert V.verify(V.count_spec(3), ans("3 or 5"), 1.0).score == pytest.approx(math.exp(-2))
    r = V.verify(V.count_spec(3), ans("several"), 100.0)
    assert r.score == 0.0 and r.accuracy_reward == pytest.approx(V.DEFAULT_PHI.eps_r)


# ------------------------------------------------------------------ choice
def test_choice_letter_or_text():
    spec = V.choice_spec("B", ["chair", "table", "sofa"])
    assert V.verify(spec, ans("B"), 1.0).score == 1.0
    assert V.verify(spec, ans("table"), 1.0).score == 1.0
    assert V.verify(spec, ans("(b) table"), 1.0).score == 1.0
    assert V.verify(spec, ans("A"), 1.0).score == 0.0


def test_choice_listing_every_option_scores_zero():
    spec = V.choice_spec("B", ["chair", "table", "sofa"])
    for hedge in ("A, B, C", "B or C", "table or sofa"):
        r = V.verify(spec, ans(hedge), 100.0)
        assert r.score == 0.0 and r.ambiguous


# --------------------------------------------------------------- direction
def test_direction_ring_partial_credit():
    spec = V.direction_spec("front-left", DIRS8)
    assert V.verify(spec, ans("front-left"), 1.0).score == 1.0
    assert V.verify(spec, ans("left front"), 1.0).score == 1.0  # word order and synonyms
    assert V.verify(spec, ans("front"), 1.0).score == 0.5
    assert V.verify(spec, ans("left"), 1.0).score == 0.5
    assert V.verify(spec, ans("back-left"), 1.0).score == 0.0
    assert V.verify(spec, ans("behind"), 1.0).score == 0.0
    four = V.direction_spec("right", ["front", "right", "back", "left"])
    assert V.verify(four, ans("ahead"), 1.0).score == 0.5
    assert V.verify(four, ans("left"), 1.0).score == 0.0


def test_direction_non_ring_has_no_partial_credit():
    spec = V.direction_spec("back", ["left", "back", "right"])
    assert V.verify(spec, ans("left"), 1.0).score == 0.0
    assert V.verify(spec, ans("behind"), 1.0).score == 1.0


def test_direction_hedge_is_worst():
    spec = V.direction_spec("front-left", DIRS8)
    r = V.verify(spec, ans("front-left or back-right"), 1.0)
    assert r.score == 0.0 and r.ambiguous


def test_direction_angular_score():
    spec = V.direction_spec("left", ["front", "right", "back", "left"], angle=260.0)  # sigma 90 deg
    assert V.verify(spec, ans("260 degrees"), 1.0).score == 1.0
    assert V.verify(spec, ans("350°"), 1.0).score == pytest.approx(math.exp(-(90**2) / (2 * 90**2)))
    # a class answer scores at its centre angle (left = 270)
    assert V.verify(spec, ans("left"), 1.0).score == pytest.approx(math.exp(-(10**2) / (2 * 90**2)))
    # wrap-around: 10 deg vs 350 deg is 20 deg apart
    wrap = V.direction_spec("front", ["front", "right", "back", "left"], angle=350.0, sigma=20.0)
    assert V.verify(wrap, ans("10 degrees"), 1.0).score == pytest.approx(math.exp(-0.5))


# ------------------------------------------------------------------- order
def test_kendall_example():
    gt = ["a", "b", "c", "d"]
    assert kendall_score(["b", "a", "c", "d"], gt) == pytest.approx(5 / 6)  # 1 inversion of C(4,2)=6
    assert kendall_score(["d", "c", "b", "a"], gt) == 0.0
    assert kendall_score(["a", "c", "b", "d"], gt) == pytest.approx(5 / 6)
    assert kendall_score(["a", "b", "c"], gt) == pytest.approx(3 / 6)  # pairs with d missing count as inversions


def test_order_verifier_reads_labels_in_text():
    spec = V.order_spec(["chair", "coffee table", "sofa", "lamp"])
    assert V.verify(spec, ans("chairs, then the coffee table, the sofa and finally a lamp"), 1.0).score == 1.0
    r = V.verify(spec, ans("coffee table, chair, sofa, lamp"), 1.0)
    assert r.score == pytest.approx(5 / 6) and r.parsed == ["coffee table", "chair", "sofa", "lamp"]


def test_order_repeated_labels_take_the_worst_reading():
    spec = V.order_spec(["a1", "b1", "c1"])
    r = V.verify(spec, ans("a1, b1, c1, a1"), 1.0)  # first reading a b c, last reading b c a
    assert r.ambiguous and r.score == pytest.approx(1 / 3)


def test_pairwise_order_with_margin():
    gt, times = ["tv", "bed", "desk"], [0.0, 1.5, 6.0]
    w = [1 - math.exp(-1.5 / 2), 1 - math.exp(-6 / 2), 1 - math.exp(-4.5 / 2)]
    assert pairwise_order_score(gt, gt, times, 2.0) == 1.0
    # swapping the near tie (tv, bed) loses only its small weight
    assert pairwise_order_score(["bed", "tv", "desk"], gt, times, 2.0) == pytest.approx((w[1] + w[2]) / sum(w))
    spec = V.order_spec(gt, form="pairwise", times=times, beta=2.0)
    assert V.verify(spec, ans("bed, tv, desk"), 1.0).score == pytest.approx((w[1] + w[2]) / sum(w))


# --------------------------------------------------------------- relations
def test_relations_jaccard():
    spec = V.relations_spec(["left-of", "near"])
    assert V.verify(spec, ans("left of, near"), 1.0).score == 1.0
    assert V.verify(spec, ans("to the left"), 1.0).score == 0.5
    assert V.verify(spec, ans("left of, near, above"), 1.0).score == pytest.approx(2 / 3)
    assert V.verify(spec, ans("left of, not near"), 1.0).score == 0.5  # negation is not a claim
    every = ", ".join(V.spec.DEFAULT_RELATIONS)
    assert V.verify(spec, ans(every), 1.0).score == pytest.approx(2 / 7)  # listing all relations does not pay


def test_relations_empty_set_needs_an_explicit_none():
    spec = V.relations_spec([])
    assert V.verify(spec, ans("none"), 1.0).score == 1.0
    assert V.verify(spec, ans("hmm"), 1.0).score == 0.0


def test_relations_graph_form():
    spec = V.relations_spec(["left-of"], form="graph")
    assert V.verify(spec, ans("left of"), 1.0).score == 1.0
    assert V.verify(spec, ans("in front of"), 1.0).score == pytest.approx(0.5)  # d = 1, d_max = 2
    assert V.verify(spec, ans("right of"), 1.0).score == 0.0  # d = 2
    custom = {"a": ["b"], "b": ["c"], "c": []}
    assert graph_score("c", "a", custom, ["a", "b", "c"]) == 0.0
    assert graph_score("b", "a", custom, ["a", "b", "c"]) == 0.5


# --------------------------------------------------------------- grounding
def test_grounding_squared_euclidean():
    spec = V.grounding_spec([0.25, 0.75])
    r = V.verify(spec, ans("(0.35, 0.55)"), 1.0)
    assert r.error == pytest.approx(0.1**2 + 0.2**2) and r.parsed == pytest.approx([0.35, 0.55])
    assert V.verify(spec, ans("(0.3)"), 1.0).parsed is None  # wrong arity
    hedge = V.verify(spec, ans("(0.25, 0.75) or (0.9, 0.9)"), 1.0)
    assert hedge.ambiguous and hedge.error == pytest.approx(0.65**2 + 0.15**2)
    assert V.verify(V.grounding_spec([0.4, -0.2, 2.5], scale=0.5), ans("0.4, -0.2, 3.0"), 1.0).error == pytest.approx(1.0)


# ------------------------------------------------------------- bad inputs
BAD = [
    "",
    "x" * 1_000_000,
    "<answer>" + "1 " * 500_000 + "</answer>",
    bytes(range(256)).decode("latin-1"),
    "\x00\x01\x02<answer>\udcff</answer>",
    "数字是三米 🚀 <answer>三</answer>",
    "<think><think><answer><answer>1</answer></think></answer>",
    "</answer></answer><answer>",
    "<answer>nan</answer>",
    "<answer>inf m</answer>",
    "<answer>1e308 m</answer>",
    "<answer>" + "9" * 5000 + "</answer>",
    "<answer>-0</answer>",
]


@pytest.mark.parametrize("completion", BAD, ids=range(len(BAD)))
def test_any_completion_gives_a_finite_result(any_spec, completion):
    r = V.verify(any_spec, completion, 100.0)
    assert 0.0 <= r.accuracy_reward <= 1.0 and 0.0 <= r.reward <= 1.0
    assert math.isfinite(r.error) and r.error >= 0.0
    assert r.score is None or 0.0 <= r.score <= 1.0
    json.dumps(r.to_dict())


def test_non_string_completions():
    spec = V.count_spec(2)
    assert V.verify(spec, None, 1.0).score == 0.0
    assert V.verify(spec, b"<answer>2</answer>", 1.0).score == 1.0
    chat = [{"role": "assistant", "content": ans("2")}]
    r = V.verify(spec, chat, 1.0)
    assert r.score == 1.0 and r.format_ok


def test_canonical_completion_scores_one(any_spec):
    for k in (1.0, 50.5, 100.0):
        r = V.verify(any_spec, V.canonical_completion(any_spec), k)
        assert r.reward == 1.0 and r.accuracy_reward == 1.0 and r.error == 0.0 and r.format_ok


# ------------------------------------------------------------------ batch
def test_batch_equals_single_and_accepts_per_item_k(any_spec):
    comps = [V.canonical_completion(any_spec), ans("1"), "garbage", ans("B or C, 2 m, left")]
    ks = [1.0, 5.0, 50.0, 100.0]
    batch = V.verify_batch([any_spec] * 4, comps, ks)
    assert [b.to_dict() for b in batch] == [V.verify(any_spec, c, k).to_dict() for c, k in zip(comps, ks)]


def test_batch_repeated_answers_are_separate_results():
    """A group repeats its answers; each row still gets its own parsed list, and the batch leaves
    the garbage collector as it found it (also when a spec is bad)."""
    import gc

    spec = V.order_spec(["chair", "table", "lamp"])
    batch = V.verify_batch([spec] * 3, [ans("lamp, chair, table")] * 2 + [ans("chair, table, lamp")], 100.0)
    assert batch[0].to_dict() == batch[1].to_dict() == V.verify(spec, ans("lamp, chair, table"), 100.0).to_dict()
    assert batch[0].parsed is not batch[1].parsed and batch[2].score == 1.0
    batch[0].parsed.append("sofa")
    assert batch[1].parsed == ["lamp", "chair", "table"]
    assert gc.isenabled()
    with pytest.raises(V.SpecError):
        V.verify_batch([{"kind": "count"}], ["1"], 1.0)
    assert gc.isenabled()
    gc.disable()
    try:
        V.verify_batch([spec], [ans("chair")], 1.0)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_batch_errors():
    with pytest.raises(ValueError, match="specs"):
        V.verify_batch([V.count_spec(1)], [], 1.0)
    with pytest.raises(ValueError, match="k must be"):
        V.verify(V.count_spec(1), "1", 0.0)
    with pytest.raises(ValueError, match="operator"):
        V.verify(V.count_spec(1), "1", 1.0, operator="relu")
    assert V.verify_batch([], [], 1.0) == []


def test_operators_change_only_the_activation():
    spec = V.numeric_spec(2.0, "m")
    e = V.verify(spec, ans("2.4"), 3.0).error
    assert V.verify(spec, ans("2.4"), 3.0, operator="tanh").accuracy_reward == pytest.approx(1 - math.tanh(3 * e))
    assert V.verify(spec, ans("2.4"), 3.0, operator="binary").accuracy_reward == 0.0
    assert V.verify(spec, ans("2.4"), 3.0, format_weight=0.0).reward == pytest.approx(snra(3.0, e))


def test_reward_total_formula():
    r = V.verify(V.count_spec(3), "4", 10.0)  # no format
    assert r.reward == pytest.approx(0.9 * r.accuracy_reward)
    assert np.isclose(V.verify(V.count_spec(3), ans("4"), 10.0).reward, 0.9 * r.accuracy_reward + 0.1)
