"""Spec validation (errors name the field, defaults), constructors and canonical answer text."""

from __future__ import annotations

import json

import numpy as np
import pytest

from numerical3d import verifiers as V


@pytest.mark.parametrize(
    "spec, field",
    [
        ([], "spec"),
        ({"version": 1, "answer": 1}, "kind"),
        ({"kind": "numeric", "answer": 1.0, "unit": "m"}, "version"),
        ({"kind": "numeric", "version": 2, "answer": 1.0, "unit": "m"}, "version"),
        ({"kind": "numeric", "version": 1, "unit": "m"}, "answer"),
        ({"kind": "numeric", "version": 1, "answer": "1.5", "unit": "m"}, "answer"),
        ({"kind": "numeric", "version": 1, "answer": float("nan"), "unit": "m"}, "answer"),
        ({"kind": "numeric", "version": 1, "answer": 0.0, "unit": "m"}, "answer"),
        ({"kind": "numeric", "version": 1, "answer": 1.0, "unit": "furlong"}, "unit"),  # ft, in, ft2 are known
        ({"kind": "numeric", "version": 1, "answer": 1.0, "unit": "deg"}, "error"),  # angles need "angular"
        ({"kind": "numeric", "version": 1, "answer": 1.0, "unit": "m", "error": "angular"}, "error"),
        ({"kind": "numeric", "version": 1, "answer": 1.0, "unit": "m", "error": "abs"}, "error"),
        ({"kind": "numeric", "version": 1, "answer": 1.0, "unit": "m", "scale": 0}, "scale"),
        ({"kind": "numeric", "version": 1, "answer": 1.0, "unit": "m", "e_max": -1}, "e_max"),
        ({"kind": "numeric", "version": 1, "answer": 1.0, "unit": "m", "tolerance": 1}, "tolerance"),
        ({"kind": "count", "version": 1, "answer": 2.5}, "answer"),
        ({"kind": "count", "version": 1, "answer": True}, "answer"),
        ({"kind": "count", "version": 1, "answer": 2, "tau": 0}, "tau"),
        ({"kind": "count", "version": 1, "answer": 2, "form": "log"}, "form"),
        ({"kind": "choice", "version": 1, "answer": "E", "options": ["a", "b"]}, "answer"),
        ({"kind": "choice", "version": 1, "answer": "A", "options": ["a"]}, "options"),
        ({"kind": "choice", "version": 1, "answer": "A", "options": ["a", "A"]}, "options"),
        ({"kind": "direction", "version": 1, "answer": "up", "classes": ["left", "right"]}, "answer"),
        ({"kind": "direction", "version": 1, "answer": "left", "classes": ["left", "right"], "angle": 3}, "class_angles"),
        ({"kind": "direction", "version": 1, "answer": "left", "classes": ["left", "right"], "sigma": 3}, "sigma"),
        ({"kind": "direction", "version": 1, "answer": "left", "classes": ["left", "right"], "adjacent_credit": 2}, "adjacent_credit"),
        ({"kind": "order", "version": 1, "answer": ["a"]}, "answer"),
        ({"kind": "order", "version": 1, "answer": ["a", "a"]}, "answer"),
        ({"kind": "order", "version": 1, "answer": ["a", "b"], "form": "pairwise"}, "times"),
        ({"kind": "order", "version": 1, "answer": ["a", "b"], "form": "pairwise", "times": [2, 1]}, "times"),
        ({"kind": "order", "version": 1, "answer": ["a", "b"], "beta": 1}, "beta"),
        ({"kind": "relations", "version": 1, "answer": ["inside"]}, "answer"),
        ({"kind": "relations", "version": 1, "answer": ["near", "above"], "form": "graph"}, "answer"),
        ({"kind": "relations", "version": 1, "answer": ["x"], "vocabulary": ["x", "y"], "form": "graph"}, "graph"),
        ({"kind": "grounding", "version": 1, "answer": []}, "answer"),
        ({"kind": "grounding", "version": 1, "answer": [0.1, None]}, "answer"),
        ({"kind": "count", "version": 1, "answer": 2, "gamma": -1}, "gamma"),
    ],
)
def test_invalid_spec_names_the_field(spec, field):
    with pytest.raises(V.SpecError) as info:
        V.validate_spec(spec)
    assert info.value.field == field
    assert repr(field) in str(info.value)


def test_defaults_are_filled():
    s = V.validate_spec({"kind": "numeric", "version": 1, "answer": 2, "unit": "m"})
    assert s == {"kind": "numeric", "version": 1, "answer": 2.0, "unit": "m", "error": "relative_squared",
                 "scale": 1.0, "e_max": 4.0}
    sq = V.validate_spec({"kind": "numeric", "version": 1, "answer": 300, "unit": "cm", "error": "squared"})
    assert sq["e_max"] == pytest.approx(4 * 3.0**2)
    c = V.validate_spec(V.count_spec(3))
    assert (c["form"], c["tau"], c["c"]) == ("exp", 1.0, 1.0)
    d = V.validate_spec(V.direction_spec("a", ["a", "b", "c", "d"], angle=10.0))
    assert d["ring"] is True and d["adjacent_credit"] == 0.5 and d["sigma"] == 90.0
    assert d["class_angles"] == [0.0, 90.0, 180.0, 270.0]
    assert V.validate_spec(V.direction_spec("a", ["a", "b", "c"]))["ring"] is False
    r = V.validate_spec(V.relations_spec(["near"]))
    assert r["vocabulary"] == list(V.spec.DEFAULT_RELATIONS) and r["form"] == "jaccard"


def test_constructors_are_compact_json_and_validate():
    spec = V.numeric_spec(np.float32(1.25), "m")
    assert spec == {"kind": "numeric", "version": 1, "answer": 1.25, "unit": "m"}
    assert type(spec["answer"]) is float
    assert json.loads(json.dumps(spec)) == spec
    assert V.choice_spec("b", ["x", "y"])["answer"] == "B"
    with pytest.raises(V.SpecError):
        V.count_spec(-1)


def test_answer_text():
    assert V.answer_text(V.numeric_spec(1.5, "m")) == "1.5 m"
    assert V.answer_text(V.numeric_spec(20.0, "m2")) == "20 m^2"
    assert V.answer_text(V.numeric_spec(0.1 + 0.2, "m")) == "0.30000000000000004 m"  # exact round trip
    assert V.answer_text(V.order_spec(["a", "b"])) == "a, b"
    assert V.answer_text(V.grounding_spec([0.5, 1])) == "(0.5, 1)"
