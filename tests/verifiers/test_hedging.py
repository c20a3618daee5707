"""No hedging pays: for every kind that reads free text, an answer that names several
different candidates ("2 or 3 m", "between -45 and 45 degrees", "A or B", "left-of or near") never
scores better than the worst of those candidates answered alone."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from numerical3d import verifiers as V
from numerical3d.verifiers.scores import nearest_classes

from .conftest import DIRS8

QUAD = ["front", "right", "back", "left"]
WORDS = ["chair", "table", "sofa", "lamp", "bed", "tv", "desk"]
CONNECTORS = st.sampled_from([" or ", ", ", " / ", "; or maybe "])
HEDGE = settings(max_examples=300, deadline=None)


def _score(spec: dict, text: str) -> tuple[float, bool]:
    """(badness, ambiguous): the error for continuous kinds, 1 - V for discrete ones."""
    _, e, v, ambiguous = V.score_answer(spec, text)
    return (e if v is None else 1.0 - v), ambiguous


def _check(spec: dict, singles: list[str], hedge: str) -> None:
    """A text the verifier cannot read (an area for a length) is no answer, so no candidate."""
    answers = [t for t in singles if V.score_answer(spec, t)[0] is not None]
    if not answers:
        return
    worst_single = max(_score(spec, t)[0] for t in answers)
    hedged, _ = _score(spec, hedge)
    assert hedged >= worst_single - 1e-9, (spec, singles, hedge)


def _num(x: float) -> str:
    return f"{x:.2f}"


# ------------------------------------------------------------------ numeric
@given(st.floats(0.05, 500), st.sampled_from(["m", "cm", "ft", "m2"]),
       st.lists(st.tuples(st.floats(0.0, 900), st.sampled_from(["m", "cm", "mm", "ft", "inches", ""])),
                min_size=2, max_size=4),
       CONNECTORS, st.booleans())
@HEDGE
def test_numeric_hedges_score_the_worst(answer, unit, cands, sep, shared_unit):
    spec = V.numeric_spec(answer, unit)
    if shared_unit:  # the unit written once, after the list or range
        u = cands[0][1]
        singles = [f"{_num(v)} {u}" for v, _ in cands]
        _check(spec, singles, sep.join(_num(v) for v, _ in cands) + f" {u}")
        _check(spec, singles[:2], f"between {_num(cands[0][0])} and {_num(cands[1][0])} {u}")
    else:
        singles = [f"{_num(v)} {u}" for v, u in cands]
        _check(spec, singles, sep.join(singles))


def test_bare_number_beside_a_unit_is_read_in_either_unit():
    spec = V.numeric_spec(150.0, "cm")
    parsed, e, _, ambiguous = V.score_answer(spec, "between 1 and 1.5 m")  # 1 cm, 1 m or 150 cm
    assert ambiguous and parsed == 1.0 and e == V.score_answer(spec, "1 cm")[1]
    assert V.score_answer(spec, "150")[1] == 0.0 and not V.score_answer(spec, "1.5 m (150 cm)")[3]


# -------------------------------------------------------------------- count
@given(st.integers(0, 30), st.lists(st.integers(0, 40), min_size=2, max_size=4), CONNECTORS)
@HEDGE
def test_count_hedges_score_the_worst(n, cands, sep):
    spec = V.count_spec(n)
    singles = [str(c) for c in cands]
    _check(spec, singles, sep.join(singles))
    _check(spec, singles[:2], f"between {cands[0]} and {cands[1]}")


# ------------------------------------------------------------------- choice
@given(st.integers(0, 3), st.lists(st.integers(0, 3), min_size=2, max_size=4), CONNECTORS, st.booleans())
@HEDGE
def test_choice_hedges_score_the_worst(right, picks, sep, as_text):
    options = WORDS[:4]
    spec = V.choice_spec(chr(65 + right), options)
    singles = [options[p] if as_text else chr(65 + p) for p in picks]
    _check(spec, singles, sep.join(singles))


# ---------------------------------------------------------------- direction
@given(st.sampled_from(DIRS8), st.lists(st.sampled_from(DIRS8), min_size=2, max_size=4), CONNECTORS)
@HEDGE
def test_direction_class_hedges_score_the_worst(answer, cands, sep):
    spec = V.direction_spec(answer, DIRS8)
    _check(spec, cands, sep.join(cands))


@given(st.floats(0, 359.9), st.lists(st.floats(-180, 360), min_size=1, max_size=3),
       st.lists(st.sampled_from(QUAD), max_size=2), CONNECTORS)
@HEDGE
def test_direction_angle_hedges_score_the_worst(angle, degs, names, sep):
    spec = V.direction_spec(QUAD[min(nearest_classes(angle, [0, 90, 180, 270]))], QUAD, angle=angle)
    written = [round(d, 2) for d in degs]
    # a class whose bin holds one of the angles is that angle's own answer ("left (265 degrees)")
    names = [c for c in names if not any(QUAD.index(c) in nearest_classes(d, [0, 90, 180, 270]) for d in written)]
    singles = [f"{_num(d)} degrees" for d in written] + names
    if len(singles) < 2:
        return
    _check(spec, singles, sep.join(singles))
    unit_once = sep.join(_num(d) for d in written) + " degrees"  # "-45 or 45 degrees"
    _check(spec, singles, unit_once + "".join(f"{sep}{c}" for c in names))
    if len(written) >= 2:
        _check(spec, singles[:2], f"between {_num(written[0])} and {_num(written[1])} degrees")


def test_issue_13_range_of_angles_scores_its_worst_end():
    spec = V.direction_spec("front", QUAD, angle=40.0)
    hedge = V.score_answer(spec, "between -45 and 45 degrees")
    worst = V.score_answer(spec, "-45 degrees")
    assert hedge[1:3] == worst[1:3] and hedge[3]
    assert V.score_answer(spec, "front (40 degrees)")[2] == 1.0  # a class with its own angle is one answer


# -------------------------------------------------------------------- order
@given(st.lists(st.permutations(WORDS[:4]), min_size=2, max_size=4), CONNECTORS,
       st.sampled_from(["kendall", "pairwise"]))
@HEDGE
def test_order_hedges_score_the_worst(perms, sep, form):
    spec = (V.order_spec(WORDS[:4]) if form == "kendall"
            else V.order_spec(WORDS[:4], form="pairwise", times=[0.0, 1.0, 3.0, 7.0]))
    singles = [", ".join(p) for p in perms]
    _check(spec, singles, sep.join(singles) if sep.strip() not in (",", "") else " or ".join(singles))


# ---------------------------------------------------------------- relations
RELS = list(V.spec.DEFAULT_RELATIONS)


@given(st.lists(st.sampled_from(RELS), max_size=3, unique=True),
       st.lists(st.lists(st.sampled_from(RELS), max_size=3, unique=True), min_size=2, max_size=3),
       st.sampled_from([" or ", " / ", "; or "]))
@HEDGE
def test_relation_set_hedges_score_the_worst(answer, sets, sep):
    spec = V.relations_spec(answer)
    singles = [", ".join(s) if s else "none" for s in sets]
    _check(spec, singles, sep.join(singles))


@given(st.sampled_from(RELS), st.lists(st.sampled_from(RELS), min_size=2, max_size=4), CONNECTORS)
@HEDGE
def test_relation_graph_hedges_score_the_worst(answer, cands, sep):
    spec = V.relations_spec([answer], form="graph")
    _check(spec, cands, sep.join(cands))


# ---------------------------------------------------------------- grounding
@given(st.lists(st.floats(-3, 3), min_size=3, max_size=3),
       st.lists(st.lists(st.floats(-3, 3), min_size=3, max_size=3), min_size=2, max_size=3))
@HEDGE
def test_grounding_hedges_score_the_worst(answer, points):
    spec = V.grounding_spec(answer)
    singles = ["(" + ", ".join(_num(c) for c in p) + ")" for p in points]
    _check(spec, singles, " or ".join(singles))
