"""Hypothesis properties for every verifier kind: never raises, e >= 0, V in [0, 1],
rewards in [0, 1] and monotone in the error, and the canonical answer scores 1."""

from __future__ import annotations

import math
from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from numerical3d import verifiers as V
from numerical3d.verifiers.scores import kendall_score

from .conftest import DIRS8

QUAD = ["front", "right", "back", "left"]
FAST = settings(max_examples=150, deadline=None)

finite = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False)
positive = st.floats(0.01, 1e4, allow_nan=False, allow_infinity=False)
label = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=8)
words = ["chair", "table", "sofa", "lamp", "bed", "tv", "desk", "door", "window", "sink"]

numeric_specs = st.builds(
    lambda a, unit, err, scale: V.numeric_spec(a, unit, error=err, scale=scale),
    positive, st.sampled_from(["m", "cm", "mm", "m2", ""]), st.sampled_from(["relative_squared", "squared"]),
    st.floats(0.01, 10),
)
count_specs = st.builds(lambda n, form, tau: V.count_spec(n, form=form, tau=tau),
                        st.integers(0, 50), st.sampled_from(["exp", "linear"]), st.floats(0.1, 5))
choice_specs = st.integers(2, 6).flatmap(
    lambda n: st.builds(lambda i, opts: V.choice_spec(chr(65 + i), opts), st.integers(0, n - 1),
                        st.lists(st.sampled_from(words), min_size=n, max_size=n, unique=True)))
direction_specs = st.one_of(
    st.builds(lambda c: V.direction_spec(c, DIRS8), st.sampled_from(DIRS8)),
    st.floats(0, 359.9).map(lambda a: V.direction_spec(QUAD[round(a / 90) % 4], QUAD, angle=a)),
    st.builds(lambda c: V.direction_spec(c, ["left", "back", "right"]), st.sampled_from(["left", "back", "right"])),
)
order_specs = st.one_of(
    st.lists(st.sampled_from(words), min_size=2, max_size=6, unique=True).map(V.order_spec),
    st.lists(st.sampled_from(words), min_size=2, max_size=5, unique=True).flatmap(
        lambda labs: st.lists(st.floats(0, 100), min_size=len(labs), max_size=len(labs)).map(
            lambda ts: V.order_spec(labs, form="pairwise", times=sorted(ts)))),
)
relation_specs = st.one_of(
    st.lists(st.sampled_from(V.spec.DEFAULT_RELATIONS), max_size=4, unique=True).map(V.relations_spec),
    st.sampled_from(V.spec.DEFAULT_RELATIONS).map(lambda r: V.relations_spec([r], form="graph")),
)
grounding_specs = st.builds(lambda a, s: V.grounding_spec(a, scale=s),
                            st.lists(st.floats(-5, 5), min_size=2, max_size=3), st.floats(0.1, 2))
any_specs = st.one_of(numeric_specs, count_specs, choice_specs, direction_specs, order_specs, relation_specs,
                      grounding_specs)

tokens = st.sampled_from(
    ["<think>", "</think>", "<answer>", "</answer>", "1.5", "3", " m", " cm", "^2", "three", "a dozen", ",", " or ",
     "A", "B", " front", "-left", " behind", " left of", " near", " none", *[f" {w}" for w in words], "nan", "inf",
     "1e9", "(", ")", "°", " degrees", "\x00", "é", "  "])
completions = st.one_of(st.text(max_size=200), st.lists(tokens, max_size=25).map("".join))
ks = st.floats(0.01, 1e3)


@given(any_specs, completions, ks)
@settings(max_examples=600, deadline=None)
def test_verify_never_raises_and_stays_in_range(spec, completion, k):
    r = V.verify(spec, completion, k)
    assert math.isfinite(r.error) and r.error >= 0.0
    assert 0.0 <= r.accuracy_reward <= 1.0 and 0.0 <= r.reward <= 1.0
    if V.spec.is_discrete(spec["kind"]):
        assert r.score is not None and 0.0 <= r.score <= 1.0
    else:
        assert r.score is None
    assert r.reward == (1 - 0.1) * r.accuracy_reward + 0.1 * r.format_ok or math.isclose(
        r.reward, 0.9 * r.accuracy_reward + 0.1 * r.format_ok)


@given(any_specs, ks)
@FAST
def test_canonical_answer_scores_one(spec, k):
    r = V.verify(spec, V.canonical_completion(spec), k)
    assert r.error == 0.0 and r.reward == 1.0
    assert r.score in (None, 1.0)


@given(any_specs, completions, ks, ks)
@FAST
def test_reward_non_increasing_in_error_and_k(spec, completion, k1, k2):
    """Larger sharpness never raises the reward of the same answer (e >= 0)."""
    lo, hi = sorted((k1, k2))
    assert V.verify(spec, completion, lo).accuracy_reward >= V.verify(spec, completion, hi).accuracy_reward


@given(numeric_specs, st.floats(-3, 3), st.floats(-3, 3), ks)
@FAST
def test_numeric_reward_monotone_in_distance(spec, d1, d2, k):
    y = spec["answer"]
    near, far = sorted((d1, d2), key=abs)
    r_near = V.verify(spec, repr(y + near * abs(y)), k)
    r_far = V.verify(spec, repr(y + far * abs(y)), k)
    assert r_near.error <= r_far.error + 1e-12
    assert r_near.accuracy_reward >= r_far.accuracy_reward - 1e-12


@given(count_specs, st.integers(0, 80), st.integers(0, 80), ks)
@FAST
def test_count_reward_monotone_in_distance(spec, p1, p2, k):
    n = spec["answer"]
    near, far = sorted((p1, p2), key=lambda p: abs(p - n))
    assert V.verify(spec, str(near), k).score >= V.verify(spec, str(far), k).score
    assert V.verify(spec, str(near), k).accuracy_reward >= V.verify(spec, str(far), k).accuracy_reward


@given(st.sampled_from(DIRS8), st.sampled_from(DIRS8), st.sampled_from(DIRS8), ks)
@FAST
def test_direction_reward_monotone_in_ring_distance(gt, p1, p2, k):
    spec = V.direction_spec(gt, DIRS8)

    def dist(c: str) -> int:
        d = abs(DIRS8.index(c) - DIRS8.index(gt)) % 8
        return min(d, 8 - d)

    near, far = sorted((p1, p2), key=dist)
    assert V.verify(spec, near, k).accuracy_reward >= V.verify(spec, far, k).accuracy_reward


@given(st.permutations(words[:6]), st.permutations(words[:6]))
@FAST
def test_kendall_is_one_minus_normalised_inversions(gt, pred):
    pos = {w: i for i, w in enumerate(pred)}
    inversions = sum(1 for a, b in combinations(gt, 2) if pos[a] > pos[b])
    assert kendall_score(list(pred), list(gt)) == 1 - inversions / 15
    spec = V.order_spec(list(gt))
    assert V.verify(spec, ", ".join(pred), 1.0).score == 1 - inversions / 15


@given(st.floats(0, 1), st.floats(0, 1), ks)
@FAST
def test_phi_then_snra_is_monotone_in_score(v1, v2, k):
    lo, hi = sorted((v1, v2))
    assert V.phi(hi) <= V.phi(lo)
    assert V.snra(k, V.phi(hi)) >= V.snra(k, V.phi(lo))


@given(relation_specs, st.lists(st.sampled_from(V.spec.DEFAULT_RELATIONS), max_size=7, unique=True))
@FAST
def test_relations_jaccard_matches_sets(spec, pred):
    if spec.get("form", "jaccard") != "jaccard":
        return
    gt, p = set(spec["answer"]), set(pred)
    text = ", ".join(pred) if pred else "none"
    expected = len(gt & p) / len(gt | p) if gt | p else 1.0
    assert abs(V.verify(spec, text, 1.0).score - expected) < 1e-12
