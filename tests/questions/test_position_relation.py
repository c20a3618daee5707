"""position_relation is informative: no constant answer scores well on built items."""

from __future__ import annotations

from itertools import combinations

from numerical3d.pipeline.questions.position_relation import NOT_NEAR, outcomes
from numerical3d.verifiers import score_answer
from numerical3d.verifiers.spec import DEFAULT_RELATIONS

MARGINS = {r: 0.1 for r in DEFAULT_RELATIONS}


def constant_answers() -> list[str]:
    """Every single relation, every pair, all seven, and the empty answer."""
    sets = [[r] for r in DEFAULT_RELATIONS] + [list(p) for p in combinations(DEFAULT_RELATIONS, 2)]
    return [", ".join(s) for s in sets] + [", ".join(DEFAULT_RELATIONS), "none"]


def test_no_constant_answer_scores_above_0_3_on_built_items(synthetic_build):
    items, _, _ = synthetic_build
    specs = [it.verifier for it in items if it.subtask == "position_relation"]
    assert len(specs) >= 10
    means = {text: sum(score_answer(s, text)[2] for s in specs) / len(specs) for text in constant_answers()}
    best = max(means, key=means.__getitem__)
    assert means[best] <= 0.3, (best, means[best])
    assert {tuple(s["answer"]) for s in specs} >= {("left-of",), ("right-of",), ("near",)}


def test_outcomes_offer_both_orders_of_a_directional_fact_and_skip_close_calls():
    gaps = {"left-of": 0.5, "right-of": -1.5, "above": -0.3, "below": -0.2, "in-front-of": 0.05,
            "behind": -0.9, "near": -0.4}
    got = outcomes(gaps, MARGINS)
    # left/right: A left-of B, or B right-of A; front/behind is too close to call (0.05 < 0.1);
    # above/below: the vertical intervals overlap, neither holds; not near
    assert got == [("left_right", "left-of", False), ("left_right", "right-of", True), ("near", NOT_NEAR, False)]
    gaps["near"] = 0.05
    assert ("near", NOT_NEAR, False) not in outcomes(gaps, MARGINS)
