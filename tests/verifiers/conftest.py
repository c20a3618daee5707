"""Shared fixtures for the verifier tests: one valid spec of every kind."""

from __future__ import annotations

import pytest

from numerical3d import verifiers as V

DIRS8 = ["front", "front-right", "right", "back-right", "back", "back-left", "left", "front-left"]


def all_kind_specs() -> list[dict]:
    return [
        V.numeric_spec(1.5, "m"),
        V.numeric_spec(85.0, "cm", error="squared", scale=0.1),
        V.numeric_spec(20.0, "m2"),
        V.count_spec(3),
        V.count_spec(12, form="linear", c=2.0),
        V.choice_spec("B", ["chair", "table", "sofa", "lamp"]),
        V.direction_spec("front-left", DIRS8),
        V.direction_spec("left", ["front", "right", "back", "left"], angle=265.0),
        V.direction_spec("back", ["left", "back", "right"]),
        V.order_spec(["chair", "coffee table", "sofa", "lamp"]),
        V.order_spec(["tv", "bed", "desk"], form="pairwise", times=[0.0, 1.5, 6.0], beta=2.0),
        V.relations_spec(["left-of", "near"]),
        V.relations_spec(["above"], form="graph"),
        V.grounding_spec([0.25, 0.75]),
        V.grounding_spec([0.4, -0.2, 2.5]),
    ]


@pytest.fixture(params=all_kind_specs(), ids=lambda s: f"{s['kind']}-{s['answer']}")
def any_spec(request) -> dict:
    return request.param
