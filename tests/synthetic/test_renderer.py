"""The renderer against an independent per-pixel ray cast of the fine mesh and against one ray per
pixel of its own faces, hand-computed views of a single quad, the lighting, and the tessellation of
faces into the fine mesh."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numerical3d.sources.synthetic_render import FaceSet, Renderer, intrinsics_for, look_pose


def _per_pixel(faces: FaceSet, k: np.ndarray, w: int, h: int) -> Renderer:
    """The same renderer with no sample lattice: one ray for every pixel."""
    ref = Renderer(faces, k, w, h)
    ref.STRIDES = ()
    return ref


@pytest.mark.parametrize("index", [0, 1])
def test_matches_a_ray_per_pixel_on_the_fine_mesh(index, syn):
    from numerical3d.sources.synthetic import generate_scene

    scene = generate_scene(index, 21, n_frames=4, width=200, height=150)
    renderer = Renderer(scene.faces.render_set(), scene.intrinsics, 200, 150)
    for pose in scene.poses:
        fast = renderer.render(pose)
        rgb, depth, inst = syn.reference_render(scene.mesh, scene.intrinsics, pose, 200, 150)
        same = fast.instance == inst
        assert same.mean() > 0.999  # only slivers narrower than the sample spacing may differ
        # off only where a part narrower than the 4 px lattice lies in front of a face of the same object
        # (a trim, a chair's leg before its seat): the fast render misses it and sees the face behind,
        # never a surface in front of what the ray per pixel hits
        gap = (fast.depth - depth)[same]
        assert (np.abs(gap) < 1e-3).mean() > 0.999 and gap.min() > -1e-3
        diff = np.abs(fast.rgb.astype(int) - rgb).max(axis=2)[same]
        assert diff.mean() < 8 and (diff > 40).mean() < 1e-3  # the mesh's vertex colours carry noise


def test_sampled_render_equals_one_ray_per_pixel_at_full_size():
    """Filling pixels between samples on the same face changes almost nothing against a ray for
    every pixel: the same faces, colours and depths up to float rounding."""
    from numerical3d.sources.synthetic import generate_scene

    scene = generate_scene(0, 8, n_frames=3)
    faces = scene.faces.render_set()
    fast, ref = Renderer(faces, scene.intrinsics, 640, 480), _per_pixel(faces, scene.intrinsics, 640, 480)
    for pose in scene.poses[:2]:
        a, b = fast.render(pose), ref.render(pose)
        same = a.instance == b.instance
        assert same.mean() > 0.999  # slivers narrower than the sample spacing (chair legs in rows) may differ
        # colour differs where the instance does, and on a sliver of one object before another of its faces
        # (a walk that frames objects close up shows more of them: 0.11% of a frame of seed 8's scene 0)
        assert (a.rgb == b.rgb).all(axis=2).mean() > 0.998
        # a sliver narrower than the sample spacing may hide behind a face of the same object and
        # colour (a bookshelf's board before its back panel, 5 m away): a few pixels in a frame
        assert (np.abs(a.depth - b.depth)[same & (a.rgb == b.rgb).all(axis=2)] >= 1e-4).mean() < 1e-3
    assert fast.rays_cast < 0.25 * ref.rays_cast


def test_the_colour_image_encodes_as_its_rgb_does():
    """The renderer keeps colour as B, G, R, 0 so that the scene writer hands it to OpenCV without a
    copy: the JPEG is byte for byte the one of the RGB image reversed to BGR."""
    import cv2

    from numerical3d.sources.synthetic import JPEG_QUALITY, generate_scene

    scene = generate_scene(2, 8, n_frames=2, width=200, height=150)
    view = Renderer(scene.faces.render_set(), scene.intrinsics, 200, 150).render(scene.poses[0])
    assert view.rgb.shape == (150, 200, 3) and not view.bgrx[:, :, 3].any()
    params = [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY]
    assert cv2.imencode(".jpg", view.bgrx, params)[1].tobytes() == \
        cv2.imencode(".jpg", np.ascontiguousarray(view.rgb[:, :, ::-1]), params)[1].tobytes()


def _one_quad(color=(200, 100, 50), z=2.0) -> FaceSet:
    """A 2 m x 1 m quad in the plane z = const facing a camera at the origin (OpenCV axes = world axes)."""
    c = np.array([[-1.0, -0.5, z], [1.0, -0.5, z], [1.0, 0.5, z], [-1.0, 0.5, z]])
    return FaceSet(np.stack([c[[0, 1, 2]], c[[0, 2, 3]]]), np.array([0, 0]), np.array([color], dtype=np.uint8),
                   np.array([7]))


def test_a_quad_seen_head_on():
    k = intrinsics_for(64, 48)  # f = 51.2 px: the 2 m x 1 m quad at 2 m spans about 51 x 26 px
    view = Renderer(_one_quad(), k, 64, 48).render(np.eye(4))
    u, v = np.meshgrid(np.arange(64), np.arange(48))
    x, y = (u - k[0, 2]) / k[0, 0] * 2.0, (v - k[1, 2]) / k[1, 1] * 2.0
    inside = (np.abs(x) < 1.0 - 1e-3) & (np.abs(y) < 0.5 - 1e-3)
    outside = (np.abs(x) > 1.0 + 1e-3) | (np.abs(y) > 0.5 + 1e-3)
    assert inside.sum() > 1000 and outside.sum() > 1000
    assert np.all(view.instance[inside] == 7) and np.all(view.instance[outside] == 0)
    assert np.allclose(view.depth[inside], 2.0, atol=1e-5) and np.all(view.depth[outside] == 0)
    assert np.all(view.rgb[outside] == 0) and np.all(view.rgb[inside] == [200, 100, 50])  # flat-shaded face


def test_look_pose_uses_opencv_axes():
    pose = look_pose(np.array([1.0, 2.0, 1.5]), np.pi / 2, 0.0, 0.0)  # looking along +y of a z-up world
    assert np.allclose(pose[:3, 2], [0, 1, 0]) and np.allclose(pose[:3, 1], [0, 0, -1])  # forward, down
    assert np.allclose(pose[:3, 0], [1, 0, 0]) and np.allclose(pose[:3, 3], [1, 2, 1.5])  # right


def test_nothing_hit_gives_empty_images():
    view = Renderer(_one_quad(z=-2.0), intrinsics_for(33, 25), 33, 25).render(np.eye(4))  # behind the camera
    assert view.rgb.shape == (25, 33, 3) and not view.rgb.any() and not view.depth.any() and not view.instance.any()


def test_faces_are_lit_by_their_normal():
    """Lambert shading: a face towards the light is brightest, one away from it gets the ambient and
    bounce light; the sides of an object show different shades, so shapes read in 3D."""
    from numerical3d.sources import synthetic as syn_mod

    light = np.array([0.0, 0.6, 0.8])
    shade = syn_mod._shade(np.array([light, -light, [1.0, 0.0, 0.0]]), light)
    assert shade == pytest.approx([syn_mod.AMBIENT + syn_mod.DIFFUSE, syn_mod.AMBIENT + syn_mod.BOUNCE,
                                   syn_mod.AMBIENT])
    scene = syn_mod.generate_scene(3, 4, n_frames=2)
    faces = scene.faces
    for o in scene.objects:
        colors = faces.color[faces.instance == o.instance_id]
        assert len(np.unique(colors, axis=0)) >= 3, o.label


def _area(tri: np.ndarray) -> np.ndarray:
    return 0.5 * np.linalg.norm(np.cross(tri[..., 1, :] - tri[..., 0, :], tri[..., 2, :] - tri[..., 0, :]), axis=-1)


@settings(max_examples=40, deadline=None)
@given(a=st.floats(0.05, 2.0), b=st.floats(0.05, 2.0), shear=st.floats(-0.5, 0.5), taper=st.floats(0.3, 1.0),
       spacing=st.floats(0.04, 0.5))
def test_faces_are_tessellated_into_a_fine_mesh_covering_them(a, b, shear, taper, spacing):
    """A planar quad (here a trapezoid) and a triangle cut at `spacing`: the fine triangles cover the
    face exactly (same plane, same area), their edges are about `spacing` long, and every vertex
    takes its face's instance and segment."""
    from numerical3d.sources.synthetic import SceneFaces, tessellate

    quad = np.array([[0.0, 0.0, 1.0], [a, 0.0, 1.0], [a * (1 + taper) / 2 + shear, b, 1.0],
                     [a * (1 - taper) / 2 + shear, b, 1.0]])
    tri = np.array([[0.0, 0.0, 0.0], [a, 0.0, 0.0], [shear, 0.0, b]])
    faces = SceneFaces(quad[None], tri[None], np.array([[10, 20, 30], [40, 50, 60]], np.uint8), np.array([3, 4]),
                       np.array([0, 1]))
    mesh = tessellate(faces, [], spacing, 0)
    fine = mesh.vertices[mesh.triangles]
    on_quad = mesh.vertex_instance[mesh.triangles[:, 0]] == 3
    assert np.allclose(fine[on_quad][..., 2], 1.0) and np.allclose(fine[~on_quad][..., 1], 0.0)
    assert _area(fine[on_quad]).sum() == pytest.approx(_area(quad[[0, 1, 2]]) + _area(quad[[0, 2, 3]]), rel=1e-9)
    assert _area(fine[~on_quad]).sum() == pytest.approx(_area(tri), rel=1e-9)
    edges = np.linalg.norm(fine - np.roll(fine, 1, axis=1), axis=2)
    assert edges.max() <= 2.5 * spacing + 1e-9
    assert set(zip(mesh.vertex_instance.tolist(), mesh.segments.tolist())) == {(3, 0), (4, 1)}
