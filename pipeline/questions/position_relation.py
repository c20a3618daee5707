"""position_relation: which relations hold between two objects in frame k's view (multi-label).

Tests on the boxes' corners: left-of / right-of on the camera x interval, in-front-of / behind on
the camera depth interval, above / below on the world (gravity) z interval, each a signed gap
(positive: the relation holds, the intervals are apart); near: closest box distance under
`near_threshold`. A gap within the margin of 0 is too close to call and drops the pair, so no
emitted relation is borderline. Verified by Jaccard over the relation set.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from pipeline.items import Item
from pipeline.questions._frames import camera_coords
from pipeline.questions.common import Context
from pipeline.questions.gates import min_pixels, relation_margins
from sources.scene import SceneObject

SUBTASK = "position_relation"
LEVEL = "frame"
BOX_ONLY = False
VOCABULARY = ["left-of", "right-of", "above", "below", "in-front-of", "behind", "near"]


def relation_gaps(a: SceneObject, b: SceneObject, pose: np.ndarray, distance: float, near: float) -> dict[str, float]:
    """Signed gap per relation of A with respect to B (positive = holds)."""
    ca, cb = camera_coords(a.box.corners(), pose), camera_coords(b.box.corners(), pose)
    za, zb = a.box.corners()[:, 2], b.box.corners()[:, 2]
    return {
        "left-of": cb[:, 0].min() - ca[:, 0].max(),
        "right-of": ca[:, 0].min() - cb[:, 0].max(),
        "above": za.min() - zb.max(),
        "below": zb.min() - za.max(),
        "in-front-of": cb[:, 2].min() - ca[:, 2].max(),
        "behind": ca[:, 2].min() - cb[:, 2].max(),
        "near": near - distance,
    }


def generate(ctx: Context) -> Iterator[Item]:
    from pipeline.geometry import box_distance
    from verifiers.spec import relations_spec

    cfg = ctx.config
    rng = ctx.rng(SUBTASK)
    frames = ctx.level_frames
    for fi in rng.permutation(len(frames)):
        frame = frames[fi]
        unique, vis = ctx.frame_unique_visible(frame)
        objs = [unique[lab] for lab in sorted(unique)
                if ctx.drops.check(SUBTASK, min_pixels(vis[unique[lab].instance_id].pixels, cfg.min_visible_pixels))]
        pairs = [(i, j) for i in range(len(objs)) for j in range(len(objs)) if i != j]
        for p in rng.permutation(len(pairs)):
            a, b = objs[pairs[p][0]], objs[pairs[p][1]]
            gaps = relation_gaps(a, b, frame.pose, box_distance(a.box, b.box), cfg.near_threshold)
            margins = {r: (cfg.vertical_margin if r in ("above", "below") else
                           cfg.near_margin if r == "near" else cfg.relation_margin) for r in gaps}
            if not ctx.drops.check(SUBTASK, relation_margins([gaps[r] / margins[r] for r in gaps], 1.0)):
                continue
            answer = [r for r in VOCABULARY if gaps[r] > 0]
            if not answer:
                ctx.drops.drop(SUBTASK, "no_relation")
                continue
            item = ctx.emit(SUBTASK, rng, qctx={"a": a.label, "b": b.label, "vocabulary": VOCABULARY},
                            spec=relations_spec(answer), kind="relations", vocabulary=VOCABULARY,
                            params={"a": a.instance_id, "b": b.instance_id, "frame": frame.index},
                            objects=[a, b], frames=[frame.index],
                            value={r: round(float(g), 4) for r, g in gaps.items()},
                            rule={"name": "box_interval_gaps", "margins": margins, "near_threshold": cfg.near_threshold,
                                  "above_below": "world_z", "left_right_front_behind": "camera_axes"})
            yield item
