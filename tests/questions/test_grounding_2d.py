"""grounding_2d's box on hand-built frames where the object's sampled points stop short of the image
border: an object filling the frame, and one cut by the right border. The truth is the box of the
depth-map pixels the object's dense surface is drawn in (tests/support/depth_truth.py)."""

from __future__ import annotations

import numpy as np
import pytest

from numerical3d.pipeline.geometry import frame_visibility
from numerical3d.pipeline.questions import DropCounter, QuestionConfig
from numerical3d.pipeline.questions.generate import generate_scene
from numerical3d.pipeline.questions.grounding_2d import visible_extent
from numerical3d.sources.scene import Frame, Scene

from depth_truth import H, K, W, solid, zbuffer

POSE = np.eye(4)  # camera at the origin looking along +z (OpenCV axes: x right, y down)


def frame_of(obj, lo, hi) -> tuple[Scene, np.ndarray]:
    """A scene of `obj` (its points sparse) whose one frame's depth map is drawn from its front face
    [lo, hi] sampled every 5 mm, in front of a wall at 3 m; and the box of the face's pixels."""
    face = solid(9, "face", lo, hi, step=0.005).points
    wall = solid(9, "wall", (-3.0, -3.0, 3.0), (3.0, 3.0, 3.0), step=0.02).points
    depth = zbuffer(np.vstack([face, wall]), POSE)
    rows, cols = np.nonzero(np.abs(depth - lo[2]) < 1e-3)
    truth = np.array([cols.min(), rows.min(), cols.max() + 1, rows.max() + 1])
    frame = Frame(0, 0.0, K, POSE, W, H, "mem#0", load_depth=lambda: depth)
    return Scene("s", "synthetic", [obj], frames=[frame]), truth


CASES = {
    # a cabinet 0.8 m away, 4 m wide: it fills the 100 x 100 frame (0.8 m across at that depth); its
    # points, 30 cm apart, fall in columns and rows 25 and 63 only
    "fills the frame": (solid(1, "cabinet", (-2.0, -2.0, 0.8), (2.2, 2.2, 1.0), step=0.3),
                        (-2.0, -2.0, 0.8), (2.2, 2.2, 0.8)),
    # a sofa 1 m away from x = 0.1 m (column 60) to 2 m, far past the right border (column 99 sees x = 0.495)
    "cut by the border": (solid(1, "sofa", (0.1, -0.1, 1.0), (2.0, 0.15, 1.4), step=0.12),
                          (0.1, -0.1, 1.0), (2.0, 0.15, 1.0)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_box_is_the_visible_extent_border_included(case):
    obj, lo, hi = CASES[case]
    scene, truth = frame_of(obj, lo, hi)
    frame = scene.frames[0]
    vis = frame_visibility(scene, frame)[1]
    points_box = np.array(vis.bbox2d)
    assert points_box[2] < W  # the sampled points stop short of the right border
    extent = np.array(visible_extent(obj, frame, vis, frame.depth()))
    assert extent.tolist() == truth.tolist()
    assert extent[2] == W  # the border column is included
    if case == "fills the frame":
        assert extent.tolist() == [0, 0, W, H]
    items = generate_scene(scene, QuestionConfig(subtasks=("grounding_2d",), min_visible_pixels=1), DropCounter())
    assert len(items) == 1
    centre = [(truth[0] + truth[2]) / 2 / W, (truth[1] + truth[3]) / 2 / H]
    assert items[0].verifier["answer"] == [round(c, 3) for c in centre]
    assert items[0].provenance["rule"]["bbox2d"] == truth.tolist()
    # the box of the points alone was off (0.055 of the frame filled, 0.015 cut by the border)
    assert abs((points_box[0] + points_box[2]) / 2 / W - centre[0]) > 0.01


def test_a_depth_map_coarser_than_the_image_reaches_the_border():
    """The same cabinet with the depth map at half the image's resolution: its border pixels stand for
    the image's last two rows and columns."""
    obj, lo, hi = CASES["fills the frame"]
    scene, _ = frame_of(obj, lo, hi)
    frame = scene.frames[0]
    half = scene.frames[0].depth()[::2, ::2]
    vis = frame_visibility(scene, frame, depth=half)[1]
    assert vis.bbox2d[2] < W
    assert visible_extent(obj, frame, vis, half) == (0, 0, W, H)


def reference_extent(obj, frame, vis, depth) -> tuple[int, int, int, int]:
    """The rule as first written: every depth pixel inside the grown box takes the nearness test, with
    (N, 3) matrix products throughout; `visible_extent` tests only the pixels that can move the box."""
    from numerical3d.pipeline.geometry.visibility import _clipped_projection_bounds, depth_intrinsics
    from numerical3d.pipeline.questions.grounding_2d import EXTENT_MARGIN, NEAR, _samples

    x0, y0, x1, y1 = vis.bbox2d
    dmap = np.asarray(depth, dtype=np.float32)
    dh, dw = dmap.shape
    Kd, pose, box = depth_intrinsics(frame, dw, dh), np.asarray(frame.pose), obj.box
    half = box.extents / 2.0 + EXTENT_MARGIN
    bounds = _clipped_projection_bounds(box.center, half, box.rotation, Kd, pose, NEAR)
    c0, r0 = np.maximum(np.floor(bounds[0] + 0.5).astype(int), 0)
    c1, r1 = np.minimum(np.floor(bounds[1] + 0.5).astype(int) + 1, [dw, dh])
    sub = dmap[r0:r1, c0:c1]
    rr, cc = np.nonzero((sub >= bounds[2]) & (sub <= bounds[3]))
    d = sub[rr, cc].astype(np.float64)
    cam = (np.stack([cc + c0, rr + r0, np.ones(len(rr))], axis=1) @ np.linalg.inv(Kd).T) * d[:, None]
    world = cam @ pose[:3, :3].T + pose[:3, 3]
    inside = np.all(np.abs((world - box.center) @ box.rotation) <= half, axis=1)
    tree, spacing = _samples(obj)
    near = inside & (tree.query(world, distance_upper_bound=spacing)[0] <= spacing)
    rr, cc, cam = rr[near] + r0, cc[near] + c0, cam[near]
    if len(rr) == 0:
        return vis.bbox2d
    uv = (cam / cam[:, 2:3]) @ np.asarray(frame.intrinsics, dtype=np.float64).T
    col, row = np.clip(np.floor(uv[:, 0] + 0.5).astype(int), 0, W - 1), np.clip(np.floor(uv[:, 1] + 0.5).astype(int), 0, H - 1)
    return (0 if (cc == 0).any() else min(x0, int(col.min())), 0 if (rr == 0).any() else min(y0, int(row.min())),
            W if (cc == dw - 1).any() else max(x1, int(col.max()) + 1),
            H if (rr == dh - 1).any() else max(y1, int(row.max()) + 1))


@pytest.mark.parametrize("step", [1, 2])
def test_visible_extent_equals_testing_every_pixel(step):
    """Objects in the middle of the frame, cut by a border and filling it, seen from turned cameras, on
    full- and half-resolution depth maps: the same box as the nearness test on every pixel."""
    rng = np.random.default_rng(7)
    cases = [*CASES.values(), (solid(1, "lamp", (-0.2, -0.1, 1.5), (0.1, 0.3, 1.7), step=0.13),
                               (-0.2, -0.1, 1.5), (0.1, 0.3, 1.5))]
    for obj, lo, hi in cases:
        scene, _ = frame_of(obj, lo, hi)
        for _ in range(3):
            angle = rng.uniform(-0.3, 0.3)
            pose = np.eye(4)
            pose[:3, :3] = [[np.cos(angle), 0, np.sin(angle)], [0, 1, 0], [-np.sin(angle), 0, np.cos(angle)]]
            wall = solid(9, "wall", (-4.0, -4.0, 3.0), (4.0, 4.0, 3.0), step=0.02).points
            depth = zbuffer(np.vstack([solid(1, "x", lo, hi, step=0.005).points, wall]), pose)[::step, ::step]
            frame = Frame(0, 0.0, K, pose, W, H, "mem#0", load_depth=lambda d=depth: d)
            vis = frame_visibility(Scene("s", "synthetic", [obj], frames=[frame]), frame, depth=depth).get(1)
            if vis is not None:
                assert visible_extent(obj, frame, vis, depth) == reference_extent(obj, frame, vis, depth)
