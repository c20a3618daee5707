"""Fixtures for the synthetic generator's tests: small scenes written once per session (with their
instance masks), file hashes, and an independent reference renderer (one ray per pixel against the
fine mesh, like ScanNet tools)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

SMALL = {"n_frames": 6, "width": 160, "height": 120}


def tree_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under root, by relative path."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def reference_render(mesh, intrinsics: np.ndarray, pose: np.ndarray, width: int, height: int):
    """One open3d ray per pixel against the fine triangle mesh (what the PLY holds); colours interpolated
    with the hit's barycentric coordinates from the vertex colours (the face's lit colour plus noise).
    Returns rgb, depth, instance."""
    import open3d as o3d

    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(o3d.core.Tensor(mesh.vertices.astype(np.float32)),
                        o3d.core.Tensor(mesh.triangles.astype(np.uint32)))
    u, v = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
    k = intrinsics
    cam = np.stack([(u - k[0, 2]) / k[0, 0], (v - k[1, 2]) / k[1, 1], np.ones_like(u)], -1).reshape(-1, 3)
    rays = np.empty((len(cam), 6), np.float32)
    rays[:, :3] = pose[:3, 3]
    rays[:, 3:] = cam @ pose[:3, :3].T
    ans = scene.cast_rays(o3d.core.Tensor(rays))
    t = ans["t_hit"].numpy()
    hit = np.isfinite(t)
    tri = mesh.triangles[ans["primitive_ids"].numpy()[hit]]
    uv = ans["primitive_uvs"].numpy()[hit]
    col = mesh.colors.astype(np.float64)
    color = ((1 - uv[:, 0] - uv[:, 1])[:, None] * col[tri[:, 0]] + uv[:, :1] * col[tri[:, 1]]
             + uv[:, 1:] * col[tri[:, 2]])
    rgb = np.zeros((len(cam), 3), np.uint8)
    rgb[hit] = np.clip(np.rint(color), 0, 255)
    depth = np.zeros(len(cam), np.float32)
    depth[hit] = t[hit]
    inst = np.zeros(len(cam), np.uint16)
    inst[hit] = mesh.vertex_instance[tri[:, 0]]
    return rgb.reshape(height, width, 3), depth.reshape(height, width), inst.reshape(height, width)


@pytest.fixture(scope="session")
def syn() -> SimpleNamespace:
    """Helpers for test modules (importlib mode gives tests no import path to conftest)."""
    return SimpleNamespace(tree_hashes=tree_hashes, reference_render=reference_render, SMALL=SMALL)


@pytest.fixture(scope="session")
def small_root(tmp_path_factory) -> Path:
    """Three small scenes (seed 11): the determinism baseline and the format/truth checks' input."""
    from numerical3d.sources.synthetic import write_synthetic_scenes

    root = tmp_path_factory.mktemp("synthetic_small")
    ids = write_synthetic_scenes(root, 3, 11, instance_masks=True, **SMALL)
    assert ids == ["scene9000_00", "scene9001_00", "scene9002_00"]
    return root


@pytest.fixture(scope="session")
def catalog():
    from numerical3d.sources.synthetic import load_catalog

    return load_catalog()
