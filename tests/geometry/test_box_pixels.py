"""`pixels_in_box` (one composed map, one axis at a time) against the (N, 3) matrix products it replaced."""

from __future__ import annotations

import numpy as np

from numerical3d.pipeline.geometry.visibility import depth_window, pixels_in_box
from numerical3d.sources.scene import OrientedBox

from depth_truth import H, K, W


def reference(dmap, window, Kinv, pose, box, half):
    w = window
    sub = dmap[w.r0:w.r1, w.c0:w.c1]
    rr, cc = np.nonzero((sub >= w.near) & (sub <= w.far))
    d = sub[rr, cc].astype(np.float64)
    world = ((np.stack([cc + w.c0, rr + w.r0, np.ones(len(rr))], axis=1) @ Kinv.T) * d[:, None]) @ pose[:3, :3].T + pose[:3, 3]
    inside = np.all(np.abs((world - box.center) @ box.rotation) <= half, axis=1)
    return rr[inside] + w.r0, cc[inside] + w.c0, d[inside]


def test_pixels_in_box_equal_the_matrix_products():
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(40):
        dmap = rng.uniform(0.5, 4.0, size=(H, W)).astype(np.float32)
        dmap[rng.random((H, W)) < 0.1] = 0.0
        yaw, tilt = rng.uniform(-np.pi, np.pi), rng.uniform(-0.4, 0.4)
        rot = np.array([[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]])
        box = OrientedBox(rng.uniform([-1, -1, 1], [1, 1, 3]), rng.uniform(0.2, 2.0, 3), rot)
        pose = np.eye(4)
        pose[:3, :3] = [[1, 0, 0], [0, np.cos(tilt), -np.sin(tilt)], [0, np.sin(tilt), np.cos(tilt)]]
        pose[:3, 3] = rng.uniform(-0.3, 0.3, 3)
        half = box.extents / 2 + 0.02
        window = depth_window(box, half, K, pose, 0.05, W, H)
        if window is None:
            continue
        got = pixels_in_box(dmap, window, np.linalg.inv(K), pose, box, half)
        want = reference(dmap, window, np.linalg.inv(K), pose, box, half)
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
        checked += len(got[0]) > 0
    assert checked >= 20


def test_counts_are_kept_per_live_depth_map():
    """`count_in_box` is `pixels_in_box`'s count; a map with other values (even one reusing a freed map's
    memory) never gets a count of the map it replaced, and a freed map's counts go with it."""
    import gc

    from numerical3d.pipeline.geometry import visibility

    rng = np.random.default_rng(5)
    box = OrientedBox(np.array([0.0, 0.0, 2.0]), np.array([1.0, 0.8, 0.6]), np.eye(3))
    half, pose = box.extents / 2 + 0.02, np.eye(4)
    window = depth_window(box, half, K, pose, 0.05, W, H)
    seen = set()
    for _ in range(6):
        dmap = rng.uniform(1.0, 3.0, size=(H, W)).astype(np.float32)
        want = len(pixels_in_box(dmap, window, np.linalg.inv(K), pose, box, half)[0])
        assert visibility.count_in_box(dmap, window, np.linalg.inv(K), pose, box, half) == want
        assert visibility.count_in_box(dmap, window, np.linalg.inv(K), pose, box, half) == want
        seen.add(want)
        key = id(dmap)
        del dmap
        gc.collect()
        assert key not in visibility._COUNTS
    assert len(seen) > 1
