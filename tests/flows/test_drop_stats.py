"""Drops as typed, additive stats: keys, sums and the JSON rows they travel as."""

from __future__ import annotations

from numerical3d.pipeline.build.stats import DropKey, DropStats
from numerical3d.pipeline.questions.gates import DropCounter
from numerical3d.sources.scene import Drop


def test_a_scenes_gate_and_adapter_drops_add_up_and_round_trip():
    gates = DropCounter()
    gates.drop("route_plan", "no_path")
    gates.drop("route_plan", "no_path")
    gates.check("abs_distance", (False, "distance_below_min"))
    gates.check("abs_distance", (True, ""))
    a = DropStats.of_scene(gates, "scannet", [Drop("frame", "non-finite pose"), Drop("frame", "non-finite pose")])
    b = DropStats.of_scene(DropCounter(), "scannet", [Drop("frame", "non-finite pose"), Drop("object", "empty")])
    total = a + b
    assert total[DropKey("gate", "route_plan", "candidate", "no_path")] == 2
    assert total[DropKey("source", "scannet", "frame", "non-finite pose")] == 3
    assert (total.total(), total.total("gate"), total.total("source")) == (7, 3, 4)
    assert a.total() == 5 and b.total() == 2  # adding leaves both operands as they were
    rows = total.to_rows()
    assert rows == sorted(rows, key=lambda r: (r["stage"], r["owner"], r["what"], r["reason"]))
    assert DropStats.from_rows(rows).counts == total.counts
    assert {"stage": "gate", "owner": "abs_distance", "what": "candidate", "reason": "distance_below_min",
            "count": 1} in rows
