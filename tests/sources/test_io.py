"""Robust readers (every bad file gives a SceneError naming the file and the problem) and the atomic write."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from numerical3d.sources.io import (
    atomic_output,
    atomic_write_text,
    read_json,
    read_key_values,
    read_matrix_txt,
    read_ply,
    temp_beside,
    valid_pose,
)
from numerical3d.sources.scene import SceneError


@pytest.mark.parametrize("text", [False, True])
def test_read_ply_binary_and_ascii(w, tmp_path: Path, text):
    pts = np.random.default_rng(0).uniform(-1, 1, (30, 3)).astype(np.float32)
    path = tmp_path / "m.ply"
    w.write_ply(path, pts, text=text)
    mesh = read_ply(path)
    assert np.array_equal(mesh.vertices, pts.astype(np.float64))
    assert mesh.n_faces == 10 and mesh.colors is not None and (mesh.colors[:, 0] == 200).all()


def test_truncated_ply_names_the_file(w, tmp_path: Path):
    path = tmp_path / "m.ply"
    w.write_ply(path, np.zeros((300, 3)))
    path.write_bytes(path.read_bytes()[:-500])
    with pytest.raises(SceneError) as err:
        read_ply(path)
    assert err.value.path == str(path) and "truncated" in err.value.problem


@pytest.mark.parametrize("content, problem", [(b"not a ply at all", "invalid PLY header"), (None, "missing")])
def test_garbage_or_missing_ply(tmp_path: Path, content, problem):
    path = tmp_path / "m.ply"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SceneError, match=problem):
        read_ply(path)


def test_nan_vertices_are_rejected(w, tmp_path: Path):
    pts = np.zeros((6, 3))
    pts[2, 1] = np.nan
    path = tmp_path / "m.ply"
    w.write_ply(path, pts)
    with pytest.raises(SceneError, match="non-finite"):
        read_ply(path)


def test_invalid_json_names_the_file(tmp_path: Path):
    path = tmp_path / "x.json"
    path.write_text('{"segIndices": [1, 2,')
    with pytest.raises(SceneError) as err:
        read_json(path)
    assert err.value.path == str(path) and "invalid JSON" in err.value.problem


def test_matrix_files(tmp_path: Path):
    path = tmp_path / "pose.txt"
    path.write_text("1 0 0 0\n0 1 0 0\n0 0 1 0\n0 0 0 1\n")
    assert np.array_equal(read_matrix_txt(path, (4, 4)), np.eye(4))
    path.write_text("1 0 0\n")
    with pytest.raises(SceneError, match="has 3 numbers, expected 16"):
        read_matrix_txt(path, (4, 4))
    path.write_text("-inf " * 16)
    with pytest.raises(SceneError, match="non-finite"):
        read_matrix_txt(path, (4, 4))
    assert np.isinf(read_matrix_txt(path, (4, 4), finite=False)).all()


def test_key_values(tmp_path: Path):
    path = tmp_path / "s.txt"
    path.write_text("axisAlignment = 1 2 3\nsceneType = Office = yes\nnoise\n")
    assert read_key_values(path) == {"axisAlignment": "1 2 3", "sceneType": "Office = yes"}


def test_valid_pose_reasons():
    good = np.eye(4)
    good[:3, 3] = [1, 2, 3]
    assert valid_pose(good) is None
    assert valid_pose(np.full((4, 4), -np.inf)) == "non-finite pose"
    singular = np.eye(4)
    singular[2, 2] = 0
    assert valid_pose(singular) == "singular pose"
    mirror = np.diag([1.0, 1.0, -1.0, 1.0])
    assert valid_pose(mirror) == "pose rotation is not a rotation"
    bad_row = np.eye(4)
    bad_row[3, 0] = 1
    assert valid_pose(bad_row) == "pose last row is not [0, 0, 0, 1]"


def test_atomic_write_leaves_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    atomic_write_text(target, "old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp file left behind


def test_a_writer_that_fails_midway_leaves_no_partial_file(tmp_path):
    target = tmp_path / "sub" / "shard.parquet"
    with pytest.raises(RuntimeError, match="killed"):
        with atomic_output(target) as tmp:
            tmp.write_bytes(b"half a file")
            assert tmp.parent == target.parent and tmp.name.startswith(".shard.parquet.")
            raise RuntimeError("killed")
    assert list(target.parent.iterdir()) == []  # neither the target nor the temp file


def test_atomic_write_commits_whole_file_with_normal_permissions(tmp_path):
    target = tmp_path / "card.md"
    with atomic_output(target) as tmp:
        with open(tmp, "w") as fh:
            fh.write("# card\n")
        assert not target.exists()  # readers see nothing until the commit
    assert target.read_text() == "# card\n" and [p.name for p in tmp_path.iterdir()] == ["card.md"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # a published file, not a private temp file


def test_temp_names_are_unique_per_writer(tmp_path):
    target = tmp_path / "result.json"
    names = {temp_beside(target) for _ in range(50)}
    assert len(names) == 50 and all(p.parent == tmp_path and p.name.endswith(".tmp") for p in names)


def test_ply_truncation_from_the_header_and_the_size(tmp_path):
    import plyfile

    from numerical3d.sources.io import ply_truncation

    vertex = np.array([(0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)],
                      dtype=[("x", "f4"), ("y", "f4"), ("z", "f4")])
    face = np.array([([0, 1, 2],), ([0, 1, 3],), ([0, 2, 3],)], dtype=[("vertex_indices", "i4", (3,))])
    elements = [plyfile.PlyElement.describe(vertex, "vertex"), plyfile.PlyElement.describe(face, "face")]
    path = tmp_path / "m.ply"
    plyfile.PlyData(elements).write(str(path))
    assert ply_truncation(path) is None
    full = path.read_bytes()
    path.write_bytes(full[:-1])
    assert ply_truncation(path) == f"truncated: {len(full) - 1} bytes, its header promises {len(full)} (element 'face', 3 rows)"
    path.write_bytes(full[: full.index(b"end_header") + 11 + 20])  # inside the vertices
    assert "element 'vertex'" in ply_truncation(path)
    plyfile.PlyData(elements, text=True).write(str(path))
    path.write_bytes(path.read_bytes()[:-5])
    assert ply_truncation(path) is None  # ASCII: only a full read judges it
    path.write_bytes(b"ply\nformat binary_little_endian 1.0\nelement vertex x\nend_header\n")
    assert ply_truncation(path).startswith("invalid PLY header")
