"""VSI-Bench's official scoring (verifiers.vsibench): MRA, first-token extraction, exact match,
per-question scores, the benchmark aggregation, and the same metric on the project's own items."""

from __future__ import annotations

import numpy as np
import pytest

from numerical3d import verifiers as V
from numerical3d.verifiers import vsibench as vb


def test_mra_thresholds_are_the_official_ten():
    assert len(vb.MRA_THRESHOLDS) == 10
    np.testing.assert_allclose(vb.MRA_THRESHOLDS, [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95])


@pytest.mark.parametrize(
    "pred, gt, expected",
    [
        (1.0, 1.0, 1.0),
        (1.5, 1.0, 0.1),  # |d|/gt = 0.5 <= 1 - 0.5 only
        (0.5, 1.0, 0.1),
        (1.05, 1.0, 1.0),  # 0.05000000000000004 <= 1 - 0.95 == 0.05000000000000004 in float
        (1.45, 1.0, 0.2),  # 0.44999999999999996 <= 1 - 0.55 == 0.44999999999999996
        (1.1, 1.0, 0.9),  # 0.10000000000000009 > 1 - 0.9 == 0.09999999999999998
        (1.6, 1.0, 0.0),
        (3.0, 2.0, 0.1),
        (11.0, 10.0, 0.9),
        (float("nan"), 1.0, 0.0),
        (float("inf"), 1.0, 0.0),
        (None, 1.0, 0.0),
        (5.0, -1.0, 1.0),  # official quirk: negative ground truth passes every threshold
    ],
)
def test_mra_boundaries_as_the_official_code(pred, gt, expected):
    assert V.mra(pred, gt) == expected


def _official_reference(pred, target):
    """The official arithmetic, written out independently for the comparison."""
    conf = np.linspace(0.5, 0.95, int((0.95 - 0.5) / 0.05 + 2))
    return float((abs(pred - target) / target <= 1 - conf).mean())


def test_mra_matches_reference_on_a_grid():
    rng = np.random.default_rng(7)
    gts = rng.uniform(0.1, 30, 300).round(2)
    preds = gts * rng.uniform(0, 2.2, 300).round(2)
    for p, g in zip(preds.tolist(), gts.tolist()):
        assert V.mra(p, g) == _official_reference(p, g)


@pytest.mark.parametrize(
    "prediction, expected",
    [
        ("1.5", 0.1),
        ("1.5.", 0.1),  # trailing period stripped
        ("1.5 meters", 0.1),  # first token only
        ("1.5m", 0.0),  # "1.5m" is not a float
        (" 1.5", 0.0),  # split(' ') gives an empty first token
        ("1e0", 1.0),
        ("about 1", 0.0),
        ("", 0.0),
    ],
)
def test_mra_text_extraction_as_the_official_code(prediction, expected):
    assert V.mra_from_text(prediction, "1.0") == expected


def test_mra_zero_ground_truth_is_an_error():
    with pytest.raises(ValueError, match="ground truth 0"):
        V.mra(1.0, 0.0)
    with pytest.raises(ValueError, match="number"):
        V.mra(1.0, "abc")


def test_exact_match_and_first_token():
    assert vb.exact_match("B", "B") == 1.0
    assert vb.exact_match("b. The table", "B") == 1.0
    assert vb.exact_match("(B)", "B") == 0.0
    assert vb.exact_match("The answer is B", "B") == 0.0
    assert vb.first_token("B.. x") == "B"
    assert vb.first_token("2\nmeters") == "2\nmeters"  # the official split is on ' ' only


@pytest.mark.parametrize(
    "qtype, prediction, gt, expected",
    [
        ("object_counting", "3", "3", 1.0),
        ("object_counting", "about three", "3", 0.0),  # first token "about" is not a number
        ("object_counting", "", "3", 0.0),
        ("object_abs_distance", "2.5.", "2.0", 0.6),  # "2.5": 0.5 / 2 = 0.25 <= 1 - theta for theta 0.50 ... 0.75
        ("object_abs_distance", "2.5 meters", "2.0", 0.6),
        ("object_size_estimation", "The answer is D", "50", 0.0),
        ("room_size_estimation", "nan", "20.5", 0.0),
        ("object_rel_distance", "A.", "A", 1.0),
        ("object_rel_direction_hard", "c", "C", 1.0),
        ("route_planning", "The answer is D", "D", 0.0),
        ("obj_appearance_order", "", "B", 0.0),
        ("obj_appearance_order", "2.5.", "B", 0.0),
    ],
)
def test_question_score(qtype, prediction, gt, expected):
    assert vb.question_score(qtype, prediction, gt) == expected


def test_question_score_unknown_type():
    with pytest.raises(ValueError, match="unknown VSI-Bench question type 'object_rel_direction'"):
        vb.question_score("object_rel_direction", "A", "A")


def test_aggregate_hand_computed():
    scored = [
        ("object_counting", 1.0), ("object_counting", 0.5),  # 0.75
        ("object_abs_distance", 0.2),
        ("object_size_estimation", 0.0), ("object_size_estimation", 0.9), ("object_size_estimation", 0.3),  # 0.4
        ("room_size_estimation", 0.6),
        ("object_rel_distance", 1.0), ("object_rel_distance", 0.0),  # 0.5
        ("object_rel_direction_easy", 1.0),  # levels 1.0, 0.5, 0.0 -> 0.5
        ("object_rel_direction_medium", 1.0), ("object_rel_direction_medium", 0.0),
        ("object_rel_direction_hard", 0.0),
        ("route_planning", 1.0),
        ("obj_appearance_order", 0.0), ("obj_appearance_order", 1.0), ("obj_appearance_order", 1.0), ("obj_appearance_order", 0.0),
    ]
    res = vb.aggregate(scored)
    expected = {"object_counting": 0.75, "object_abs_distance": 0.2, "object_size_estimation": 0.4,
                "room_size_estimation": 0.6, "object_rel_distance": 0.5, "object_rel_direction": 0.5,
                "route_planning": 1.0, "obj_appearance_order": 0.5}
    assert res.types == pytest.approx(expected)
    assert res.overall == pytest.approx(sum(expected.values()) / 8)
    assert res.missing == []
    assert res.counts["object_rel_direction_medium"] == 2 and res.counts["obj_appearance_order"] == 4
    pct = res.percent()
    assert list(pct) == ["overall", *vb.OFFICIAL_TYPES]
    assert pct["overall"] == pytest.approx(55.625)


def test_aggregate_of_a_subset_names_what_is_missing():
    res = vb.aggregate([("object_counting", 1.0), ("object_rel_direction_easy", 0.0), ("object_rel_direction_hard", 1.0)])
    assert res.types == {"object_counting": 1.0, "object_rel_direction": 0.5}
    assert res.overall == 0.75
    assert "object_abs_distance" in res.missing and "object_rel_direction_medium" in res.missing


def test_item_score_kinds():
    num = V.numeric_spec(2.0, "m")
    assert vb.item_score(num, V.verify(num, "<answer>2.5 m</answer>", 10.0)) == 0.6
    assert vb.item_score(num, V.verify(num, "<answer>far</answer>", 10.0)) == 0.0
    count0 = V.count_spec(0)
    assert vb.item_score(count0, V.verify(count0, "<answer>0</answer>", 10.0)) == 1.0
    assert vb.item_score(count0, V.verify(count0, "<answer>1</answer>", 10.0)) == 0.0
    ring = V.direction_spec("front", ["front", "right", "back", "left"])
    assert vb.item_score(ring, V.verify(ring, "<answer>front</answer>", 10.0)) == 1.0
    adjacent = V.verify(ring, "<answer>right</answer>", 10.0)
    assert adjacent.score == 0.5 and vb.item_score(ring, adjacent) == 0.0  # partial credit is not a match
    g = V.grounding_spec([1.0, 0.0, 0.0])
    assert vb.item_score(g, V.verify(g, "<answer>(1.22, 0, 0)</answer>", 10.0)) == pytest.approx(0.6)
    assert vb.item_metric("grounding") == "MRA" and vb.item_metric("order") == "accuracy"


def test_grounding_mra():
    assert vb.grounding_mra([1.0, 0.0, 0.0], [1.0, 0.0, 0.0]) == 1.0
    assert vb.grounding_mra([1.22, 0.0, 0.0], [1.0, 0.0, 0.0]) == pytest.approx(0.6)  # 0.22 <= 0.5 ... 0.25
    assert vb.grounding_mra(None, [1.0, 2.0]) == 0.0
