"""Parsers fed arbitrary bytes raise SceneError (naming the file) and nothing else."""

from __future__ import annotations

import struct
from pathlib import Path

import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numerical3d.sources.arkitscenes import read_traj
from numerical3d.sources.io import read_json, read_ply
from numerical3d.sources.scannetpp import DepthBin
from numerical3d.sources.scene import SceneError
from numerical3d.sources.sens import SensReader

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _expect_scene_error_or_value(fn, path: Path):
    try:
        return fn()
    except SceneError as exc:
        assert exc.path.startswith(str(path))
        return None


@FUZZ
@given(data=st.binary(max_size=400), header=st.booleans())
def test_sens_reader_on_arbitrary_bytes(tmp_path, data, header):
    path = tmp_path / "x.sens"
    if header:  # a valid version so that parsing gets past the first field
        data = struct.pack("<IQ", 4, 3) + b"abc" + data
    path.write_bytes(data)
    reader = _expect_scene_error_or_value(lambda: SensReader(path), path)
    if reader is not None:
        for i in range(len(reader)):
            _expect_scene_error_or_value(lambda: reader.depth(i), path)


@FUZZ
@given(data=st.binary(max_size=400))
def test_ply_and_json_on_arbitrary_bytes(tmp_path, data):
    ply = tmp_path / "m.ply"
    ply.write_bytes(b"ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty float x\n"
                    b"property float y\nproperty float z\nend_header\n" + data)
    mesh = _expect_scene_error_or_value(lambda: read_ply(ply), ply)
    if mesh is not None:
        assert mesh.vertices.shape == (3, 3)
    js = tmp_path / "a.json"
    js.write_bytes(data)
    _expect_scene_error_or_value(lambda: read_json(js), js)


@FUZZ
@given(data=st.binary(max_size=300))
def test_depth_bin_on_arbitrary_bytes(tmp_path, data):
    path = tmp_path / "depth.bin"
    path.write_bytes(data)
    reader = _expect_scene_error_or_value(lambda: DepthBin(path), path)
    if reader is not None:
        _expect_scene_error_or_value(lambda: reader(0), path)


@FUZZ
@given(
    aa=st.lists(st.tuples(*[st.floats(-3, 3)] * 3), min_size=1, max_size=5),
    t=st.tuples(*[st.floats(-20, 20)] * 3),
)
def test_traj_round_trip(tmp_path, aa, t):
    path = tmp_path / "lowres_wide.traj"
    lines = [" ".join(repr(v) for v in [100.0 + i, *a, *t]) for i, a in enumerate(aa)]
    path.write_text("\n".join(lines))
    stamps, poses = read_traj(path)
    assert stamps.tolist() == [100.0 + i for i in range(len(aa))]
    for a, pose in zip(aa, poses):
        w2c = np.eye(4)
        w2c[:3, :3] = cv2.Rodrigues(np.array(a, dtype=np.float64))[0]
        w2c[:3, 3] = t
        assert np.allclose(pose @ w2c, np.eye(4), atol=1e-9)


@pytest.mark.parametrize("text, problem", [("1 2 3\n", "expected 7 numbers"), ("1 a 2 3 4 5 6\n", "not numeric")])
def test_bad_traj_lines(tmp_path, text, problem):
    path = tmp_path / "lowres_wide.traj"
    path.write_text(text)
    with pytest.raises(SceneError, match=problem):
        read_traj(path)
