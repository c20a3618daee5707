"""A `.sens` stream written with `SensWriter` reads back through `SensReader` and the ScanNet adapter,
frame data decoded only when a frame is used; poses of a whole stream are checked in one pass."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from numerical3d.sources.io import valid_pose, valid_poses
from numerical3d.sources.sens import SensReader, SensRecord, SensWriter


def _stream(path, n: int = 5) -> list[SensRecord]:
    rng = np.random.default_rng(3)
    k_c = np.array([[120.0, 0, 31.5], [0, 120.0, 23.5], [0, 0, 1]])
    k_d = np.array([[60.0, 0, 15.5], [0, 60.0, 11.5], [0, 0, 1]])
    records = []
    w = SensWriter(path, n, intrinsic_color=k_c, color_size=(64, 48), intrinsic_depth=k_d, depth_size=(32, 24))
    for i in range(n):
        pose = np.eye(4)
        pose[:3, 3] = rng.uniform(-1, 1, 3)
        ok, jpg = cv2.imencode(".jpg", rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
        rec = SensRecord(pose, 33_333 * i, jpg.tobytes(), rng.integers(0, 5000, (24, 32)).astype(np.uint16))
        w.add(rec)
        records.append(rec)
    with pytest.raises(ValueError, match="more frames"):
        w.add(records[0])
    w.close()
    return records


def test_written_stream_reads_back_frame_by_frame(tmp_path):
    path = tmp_path / "s.sens"
    records = _stream(path)
    reader = SensReader(path)
    assert (len(reader), reader.color_compression, reader.depth_compression) == (5, "jpeg", "zlib_ushort")
    assert (reader.color_width, reader.color_height, reader.depth_width, reader.depth_height) == (64, 48, 32, 24)
    for i in (3, 0, 4):  # any order: each frame is read where the index says it is
        assert reader.color_bytes(i) == records[i].color
        assert np.array_equal(reader.depth(i), records[i].depth.astype(np.float32) / 1000.0)
        assert np.allclose(reader.frames[i].pose, records[i].pose, atol=1e-6)
        assert reader.frames[i].color_timestamp == 33_333 * i


def test_valid_poses_agrees_with_valid_pose_one_by_one():
    rng = np.random.default_rng(0)
    poses = np.repeat(np.eye(4)[None], 12, axis=0)
    poses[:, :3, 3] = rng.uniform(-3, 3, (12, 3))
    poses[1] = -np.inf  # lost tracking
    poses[2, :3, :3] *= 2.0  # scaled
    poses[3, :3, :3] = 0.0  # singular
    poses[4, 0, :3] *= -1  # a reflection
    poses[5, 3] = [0, 0, 1, 1]  # bad last row
    poses[6, :3, :3] += 2e-4  # within tolerance
    got = valid_poses(poses)
    assert got == [valid_pose(p) for p in poses]
    assert [g is None for g in got] == [True, False, False, False, False, False, True] + [True] * 5
    assert valid_poses(np.zeros((0, 4, 4))) == []
