"""The face-plane renderer against an independent per-pixel ray cast of the fine mesh, hand-computed
views of a single quad, and the face-grid vertex indexing the renderer relies on."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numerical3d.sources.synthetic_render import FaceGrids, Renderer, intrinsics_for, look_pose


@pytest.mark.parametrize("index", [0, 1])
def test_matches_a_ray_per_pixel_on_the_fine_mesh(index, syn):
    from numerical3d.sources.synthetic import generate_scene

    scene = generate_scene(index, 21, n_frames=4, width=200, height=150)
    mesh = scene.mesh
    renderer = Renderer(mesh.faces, mesh.colors, scene.intrinsics, 200, 150)
    for pose in scene.poses:
        fast = renderer.render(pose)
        rgb, depth, inst = syn.reference_render(mesh, scene.intrinsics, pose, 200, 150)
        same = fast.instance == inst
        assert same.mean() > 0.999  # only slivers narrower than the sample spacing may differ
        assert np.abs(fast.depth - depth)[same].max() < 1e-3
        diff = np.abs(fast.rgb.astype(int) - rgb).max(axis=2)[same]
        assert diff.mean() < 1.0 and (diff > 16).mean() < 1e-3


def test_colours_match_the_per_pixel_reference_at_full_size(syn):
    """Colours between ray-cast samples are interpolated linearly within a face: off by a level or two
    where the vertex colours bend between two samples (faces seen edge-on), exact elsewhere."""
    from numerical3d.sources.synthetic import generate_scene

    scene = generate_scene(0, 8, n_frames=3)
    renderer = Renderer(scene.mesh.faces, scene.mesh.colors, scene.intrinsics, 640, 480)
    for pose in scene.poses[:2]:
        fast = renderer.render(pose)
        rgb, _, inst = syn.reference_render(scene.mesh, scene.intrinsics, pose, 640, 480)
        same = fast.instance == inst
        assert same.mean() > 0.9999
        diff = np.abs(fast.rgb.astype(int) - rgb).max(axis=2)[same]
        # (a ray exactly on a box edge may pick the other face of the same object: differently shaded)
        assert diff.mean() < 0.2 and (diff <= 2).mean() > 0.995 and (diff > 16).sum() <= 5


def _one_quad(color=(200, 100, 50), nu=4, nv=2, z=2.0) -> tuple[FaceGrids, np.ndarray]:
    """A 2 m x 1 m quad in the plane z = const facing a camera at the origin (OpenCV axes = world axes)."""
    faces = FaceGrids(origin=np.array([[-1.0, -0.5, z]]), du=np.array([[2.0, 0.0, 0.0]]),
                      dv=np.array([[0.0, 1.0, 0.0]]),
                      nu=np.array([nu]), nv=np.array([nv]), offset=np.array([0]), instance=np.array([7]))
    colors = np.tile(np.array(color, dtype=np.uint8), ((nu + 1) * (nv + 1), 1))
    return faces, colors


def test_a_quad_seen_head_on():
    k = intrinsics_for(64, 48)  # f = 51.2 px: the 2 m x 1 m quad at 2 m spans about 51 x 26 px
    faces, colors = _one_quad()
    view = Renderer(faces, colors, k, 64, 48).render(np.eye(4))
    u, v = np.meshgrid(np.arange(64), np.arange(48))
    x, y = (u - k[0, 2]) / k[0, 0] * 2.0, (v - k[1, 2]) / k[1, 1] * 2.0
    inside = (np.abs(x) < 1.0 - 1e-3) & (np.abs(y) < 0.5 - 1e-3)
    outside = (np.abs(x) > 1.0 + 1e-3) | (np.abs(y) > 0.5 + 1e-3)
    assert inside.sum() > 1000 and outside.sum() > 1000
    assert np.all(view.instance[inside] == 7) and np.all(view.instance[outside] == 0)
    assert np.allclose(view.depth[inside], 2.0, atol=1e-5) and np.all(view.depth[outside] == 0)
    assert np.all(view.rgb[outside] == 0)
    # head light: colour x (0.55 + 0.45 cos), cos = 1 / |(x, y, 1)| for the quad's normal (0, 0, 1)
    shade = 0.55 + 0.45 / np.sqrt(1 + ((u - k[0, 2]) / k[0, 0]) ** 2 + ((v - k[1, 2]) / k[1, 1]) ** 2)
    expect = np.rint(np.array([200, 100, 50])[None, None] * shade[..., None])
    assert np.abs(view.rgb[inside].astype(int) - expect[inside]).max() <= 1


def test_look_pose_uses_opencv_axes():
    pose = look_pose(np.array([1.0, 2.0, 1.5]), np.pi / 2, 0.0, 0.0)  # looking along +y of a z-up world
    assert np.allclose(pose[:3, 2], [0, 1, 0]) and np.allclose(pose[:3, 1], [0, 0, -1])  # forward, down
    assert np.allclose(pose[:3, 0], [1, 0, 0]) and np.allclose(pose[:3, 3], [1, 2, 1.5])  # right


def test_nothing_hit_gives_empty_images():
    faces, colors = _one_quad(z=-2.0)  # behind the camera
    view = Renderer(faces, colors, intrinsics_for(33, 25), 33, 25).render(np.eye(4))
    assert view.rgb.shape == (25, 33, 3) and not view.rgb.any() and not view.depth.any() and not view.instance.any()


def test_vertex_colours_are_interpolated_across_the_grid():
    """A colour ramp along u over the vertex grid shows up as a ramp across the image (not flat per face)."""
    k = intrinsics_for(80, 60)
    faces, colors = _one_quad(nu=8, nv=1)
    iu = np.repeat(np.arange(9), 2)  # vertex iu * (nv + 1) + iv
    colors = np.stack([iu * 30, np.full_like(iu, 128), 255 - iu * 30], axis=1).astype(np.uint8)
    view = Renderer(faces, colors, k, 80, 60).render(np.eye(4))
    row = view.rgb[30, :, 0].astype(int)[view.instance[30] == 7]
    assert len(row) > 40 and np.all(np.diff(row) >= -1) and row[-1] - row[0] > 150


@settings(max_examples=60, deadline=None)
@given(lu=st.floats(0.05, 3.0), lv=st.floats(0.05, 3.0), spacing=st.floats(0.03, 0.5), u=st.floats(0.0, 1.0),
       v=st.floats(0.0, 1.0))
def test_face_grid_vertex_index_formula(lu, lv, spacing, u, v):
    """The renderer's vertex index offset + iu (nv + 1) + iv names the grid vertex at (iu/nu, iv/nv)
    of the tessellation the mesh writer produced (`_quad`), and the triangles split cells a-b-c / a-c-d."""
    from numerical3d.sources.synthetic import _quad

    origin, du, dv = np.array([0.3, -1.0, 0.5]), np.array([lu, 0.0, 0.0]), np.array([0.0, 0.0, lv])
    verts, tris, _, (nu, nv) = _quad(origin, du, dv, spacing, None)
    assert len(verts) == (nu + 1) * (nv + 1) and len(tris) == 2 * nu * nv
    iu, iv = min(int(u * nu), nu - 1), min(int(v * nv), nv - 1)
    a = iu * (nv + 1) + iv
    assert np.allclose(verts[a], origin + iu / nu * du + iv / nv * dv)
    b, c, d = a + nv + 1, a + nv + 2, a + 1
    tri_set = {tuple(t) for t in tris.tolist()}
    assert (a, b, c) in tri_set and (a, c, d) in tri_set
