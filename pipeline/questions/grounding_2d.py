"""grounding_2d: normalized pixel centre of an object's visible extent in frame k.

The box is the object's visible extent, clipped to the image: the 2D box of the pixels showing it,
the image's border rows and columns included. Pixels showing it are those its visible points fall in
(the visibility rule, `pipeline.geometry.visibility`) and the depth-map pixels whose surface point lies
inside its annotated box grown by `EXTENT_MARGIN` (2 cm) and within the object's sample spacing of
one of its points (the median distance from a point to its nearest other point). Object points are a
sample of the surface (mesh vertices centimetres apart): close to the camera the last of them inside
the image can fall many pixels short of where the surface leaves it, while the depth map sees every
pixel, and every point of a surface so sampled lies within the spacing of a sample, in view or not.
So an object cut by the border reaches that border (x0 = 0, or x1 = width: boxes are numpy-slice
style, x1 and y1 exclusive), and one filling the frame gets the whole image, a centre of (0.5, 0.5).
A depth map coarser than the image reaches the image's border from its own border pixels. The box
around the annotated box alone would take in the floor under a table or the wall behind a lamp; the
spacing keeps what is read to the object's own surface. On 12 synthetic scenes (109 items, 71 touching
the border), against the renderer's instance masks: the centre is off by 0.003 on average and 0.025
at most (the visible points' box alone: 0.004 and 0.037).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from numerical3d.pipeline.geometry.visibility import BoxView, Visibility
from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions._frames import visible_objects
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.registry import Subtask
from numerical3d.sources.scene import Frame, SceneObject

NAME = "grounding_2d"
EXTENT_MARGIN = 0.02  # m, the annotated box is grown by this when reading the depth map (as box_glimpses)
NEAR = 0.05  # m, depth-map surfaces nearer than this to the camera plane are not read


def visible_extent(obj: SceneObject, frame: Frame, vis: Visibility, depth: np.ndarray,
                   samples: tuple | None = None) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1) image pixels, x1 and y1 exclusive: the rule of the module docstring.
    `samples`: the object's `_samples`, when the caller keeps them across frames."""
    W, H = int(frame.width), int(frame.height)
    x0, y0, x1, y1 = vis.bbox2d
    view = BoxView.of(obj, frame, depth, EXTENT_MARGIN, NEAR)
    if view is None:
        return vis.bbox2d
    rr, cc, d = view.pixels()
    if len(rr) == 0:
        return vis.bbox2d
    dh, dw = view.dmap.shape
    pose = view.pose
    cam = (np.stack([cc, rr, np.ones(len(rr))], axis=1) @ np.linalg.inv(view.Kd).T) * d[:, None]
    uv = (cam / cam[:, 2:3]) @ np.asarray(frame.intrinsics, dtype=np.float64).T
    col = np.clip(np.floor(uv[:, 0] + 0.5).astype(int), 0, W - 1)
    row = np.clip(np.floor(uv[:, 1] + 0.5).astype(int), 0, H - 1)
    # Only a pixel that would grow the box or touches the map's border can change the answer, so only
    # those take the (costly) nearness test: the same box as testing them all.
    edge = ((col < x0) | (row < y0) | (col >= x1) | (row >= y1)
            | (cc == 0) | (rr == 0) | (cc == dw - 1) | (rr == dh - 1))
    rr, cc, cam, col, row = rr[edge], cc[edge], cam[edge], col[edge], row[edge]
    tree, spacing = samples if samples is not None else _samples(obj)
    near = tree.query(cam @ pose[:3, :3].T + pose[:3, 3], distance_upper_bound=spacing)[0] <= spacing
    rr, cc, col, row = rr[near], cc[near], col[near], row[near]
    if len(rr) == 0:
        return vis.bbox2d
    return (0 if (cc == 0).any() else min(x0, int(col.min())),
            0 if (rr == 0).any() else min(y0, int(row.min())),
            W if (cc == dw - 1).any() else max(x1, int(col.max()) + 1),
            H if (rr == dh - 1).any() else max(y1, int(row.max()) + 1))


def _samples(obj: SceneObject):
    """A k-d tree of the object's points and their spacing (median distance to the nearest other point,
    repeated vertices counted once)."""
    from scipy.spatial import cKDTree

    pts = np.unique(np.asarray(obj.points, dtype=np.float64).reshape(-1, 3), axis=0)
    tree = cKDTree(pts)
    return tree, float(np.median(tree.query(pts, k=2)[0][:, 1])) if len(pts) > 1 else 0.0


def generate(ctx: Context) -> Iterator[Item]:
    from numerical3d.verifiers.spec import grounding_spec

    rng = ctx.rng(NAME)
    samples: dict[int, tuple] = {}  # instance id -> _samples: an object is asked about in several frames
    for frame, obj, vis in visible_objects(ctx, NAME, rng):
        if obj.instance_id not in samples:
            samples[obj.instance_id] = _samples(obj)
        x0, y0, x1, y1 = visible_extent(obj, frame, vis, ctx.depth(frame), samples[obj.instance_id])
        uv = [(x0 + x1) / 2.0 / frame.width, (y0 + y1) / 2.0 / frame.height]
        answer = [round(float(v), 3) for v in uv]
        item = ctx.emit(NAME, rng, qctx={"label": obj.label}, spec=grounding_spec(answer), kind="grounding",
                        dims=2, params={"object": obj.instance_id, "frame": frame.index}, objects=[obj],
                        frames=[frame.index], value=uv,
                        rule={"name": "visible_extent_centre", "normalized": True, "bbox2d": [x0, y0, x1, y1],
                              "points_bbox2d": list(vis.bbox2d), "extent_margin": EXTENT_MARGIN,
                              "pixels": vis.pixels, "min_visible_pixels": ctx.config.min_visible_pixels})
        yield item


SUBTASK = Subtask(NAME, order=70, level="frame", needs_frames=True, generate=generate)
