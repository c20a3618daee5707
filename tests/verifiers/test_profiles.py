"""Verifier profiles: the paper's parameters by default, the strict ones leave a guess little reward."""

from __future__ import annotations

import math

import pytest

from numerical3d.verifiers.profiles import PROFILES, apply_profile, chance_answers, guess_reward
from numerical3d.verifiers.spec import count_spec, direction_spec, order_spec, validate_spec

DIRS = ["front", "front-right", "right", "back-right", "back", "back-left", "left", "front-left"]
E_STAR = math.log(2 / 0.01 - 1) / 100  # error whose reward at k = 100 is 0.01 (the paper's calibration)
M_FAIL = -math.log(2e-3)  # -log(2 eps), eps = 1e-3


def reward(v: float, gamma: float) -> float:
    """SNRA at k = 100 of Phi(1 - V), by hand: e = e* (-log(V + eps) / -log(2 eps))^gamma, V >= eps."""
    e = E_STAR * (max(0.0, -math.log(max(v, 1e-3) + 1e-3)) / M_FAIL) ** gamma  # V = 1: e = 0
    return 2 / (1 + math.exp(100 * e))


def test_paper_profile_is_the_spec_unchanged():
    spec = direction_spec("front", DIRS)
    assert apply_profile(spec) == apply_profile(spec, "paper") == validate_spec(spec)
    strict = apply_profile(spec, "strict")
    assert strict["adjacent_credit"] == 0.0 and strict["gamma"] == 0.25
    assert apply_profile(count_spec(3), "strict")["tau"] == 0.5
    with pytest.raises(ValueError, match="unknown verifier profile"):
        apply_profile(spec, "lenient")


def test_random_order_of_four_hand_computed():
    spec = order_spec(["a", "b", "c", "d"])
    perms = chance_answers(spec)
    assert len(perms) == 24
    # Kendall V = 1 - inversions / 6; the inversion counts of the 24 orders of four (Mahonian numbers)
    mahonian = {0: 1, 1: 3, 2: 5, 3: 6, 4: 5, 5: 3, 6: 1}
    for name, gamma in (("paper", 1.0), ("strict", 0.25)):
        expected = sum(n * reward(1 - i / 6, gamma) for i, n in mahonian.items()) / 24
        assert guess_reward(spec, perms, 100.0, name) == pytest.approx(expected, rel=1e-9)
    assert guess_reward(spec, perms, 100.0, "paper") > 0.6  # the paper's parameters pay a random order
    assert guess_reward(spec, perms, 100.0, "strict") <= 0.2
    assert guess_reward(spec, ["b, a, d, c"], 100.0, "paper") == pytest.approx(reward(4 / 6, 1.0))


def test_direction_guess_is_exact_hits_only_under_strict():
    spec = direction_spec("front", DIRS)
    guesses = chance_answers(spec)
    # 8 classes: 1 exact (V 1), 2 adjacent (V 0.5 paper, 0 strict), 5 wrong (V 0 -> reward 0.01)
    paper = (1 + 2 * reward(0.5, 1.0) + 5 * 0.01) / 8
    assert guess_reward(spec, guesses, 100.0, "paper") == pytest.approx(paper, rel=1e-6)
    assert guess_reward(spec, guesses, 100.0, "strict") == pytest.approx((1 + 7 * 0.01) / 8, rel=1e-6)


def test_count_off_by_one_under_each_profile():
    spec = count_spec(4)
    assert guess_reward(spec, ["5"], 100.0, "paper") == pytest.approx(reward(math.exp(-1), 1.0))
    assert guess_reward(spec, ["5"], 100.0, "strict") == pytest.approx(reward(math.exp(-2), 0.25))
    assert guess_reward(spec, ["5"], 100.0, "strict") < 0.05 < 0.3 < guess_reward(spec, ["5"], 100.0, "paper")
    assert set(PROFILES) == {"paper", "strict"}
