"""Shapes that a person names from any side they are seen from (generator 12): a printer by the sheets
in its feed, a loudspeaker by round drivers in light surrounds, a bench by the floor seen through its
legs. Each test fails on generator 11's shape; the step ladder's on generator 13's (an A-frame, generator 14)."""

from __future__ import annotations

import numpy as np
import pytest

from numerical3d.sources.synthetic import load_catalog
from numerical3d.sources.synthetic_shapes import SHAPES, front_disc, strut


def _bounds(prim) -> tuple[np.ndarray, np.ndarray]:
    return prim.points.min(0), prim.points.max(0)


@pytest.mark.parametrize("w, d, h", [(0.4, 0.35, 0.2), (0.6, 0.55, 0.45)])
def test_a_printer_shows_white_sheets_above_its_body(w, d, h):
    """The top of the box is reached only by the sheets, a material of their own, across most of its width."""
    prims = SHAPES["printer"](w, d, h, np.random.default_rng(0))
    top = max(_bounds(p)[1][2] for p in prims)
    highest = [p for p in prims if _bounds(p)[1][2] > top - 0.15 * h]
    assert [p.material for p in highest] == [3]
    lo, hi = _bounds(highest[0])
    assert hi[0] - lo[0] >= 0.5 * w and hi[2] - lo[2] >= 0.15 * h
    sheets = load_catalog().categories["printer"].colors[3]
    assert min(min(c) for c in sheets) >= 230  # white, whatever the body's colour


@pytest.mark.parametrize("w, d, h", [(0.2, 0.2, 0.25), (0.35, 0.3, 1.1)])
def test_a_speaker_has_round_drivers_in_light_surrounds(w, d, h):
    prims = SHAPES["speaker"](w, d, h, np.random.default_rng(0))
    drivers = [p for p in prims if p.material in (1, 2)]
    assert len(drivers) >= 2 and {p.material for p in drivers} == {1, 2}
    for p in drivers:  # round: no point further from the centre than the half width (a square's corners are)
        lo, hi = _bounds(p)
        centre, half = (lo + hi) / 2, (hi - lo) / 2
        xz = p.points[:, [0, 2]] - centre[[0, 2]]
        assert np.hypot(*xz.T).max() <= 1.05 * half[[0, 2]].max()  # a 16-gon; a square: 1.41
        assert hi[1] <= d / 2 + 1e-9 and lo[1] >= d / 2 - 0.01  # on the front face
    palettes = load_catalog().categories["speaker"].colors
    assert min(np.mean(c) for c in palettes[2]) - max(np.mean(c) for c in palettes[1]) >= 80  # the ring shows


@pytest.mark.parametrize("w, d, h", [(0.8, 0.3, 0.4), (2.2, 0.5, 0.5)])
def test_a_bench_is_open_between_its_legs(w, d, h):
    """Seen end-on, the middle of each end frame, between the floor and the seat, is empty."""
    prims = SHAPES["bench"](w, d, h, np.random.default_rng(0))
    for x in (-(w / 2 - 0.15), w / 2 - 0.15):
        point = np.array([x, 0.0, 0.5 * h])
        inside = [p for p in prims if np.all(_bounds(p)[0] <= point) and np.all(point <= _bounds(p)[1])]
        assert not inside


def test_a_front_disc_faces_forward():
    """Its front cap lies in the plane y + t with outward normals along +y (a rotation keeps winding)."""
    disc = front_disc(0.1, 0.2, 0.5, 0.05, 0.01)
    lo, hi = _bounds(disc)
    np.testing.assert_allclose([lo[1], hi[1]], [0.2, 0.21])
    assert hi[0] - lo[0] == pytest.approx(0.1, abs=0.01) and hi[2] - lo[2] == pytest.approx(0.1, abs=0.01)
    tris = disc.tris
    normals = np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0])
    front = np.isclose(tris[:, :, 1], 0.21).all(axis=1)
    assert front.sum() > 0 and np.all(normals[front, 1] > 0)
    back = np.isclose(tris[:, :, 1], 0.2).all(axis=1)
    assert back.sum() > 0 and np.all(normals[back, 1] < 0)


def test_a_strut_is_a_leaning_bar_with_level_planar_ends():
    bar = strut((0.1, 0.2, 0.0), (0.05, -0.1, 1.5), 0.04)
    z = bar.points[:, 2]
    assert set(np.round(z, 12)) == {0.0, 1.5}  # cut level at the floor and at the top
    for quad in bar.quads:  # every side planar
        n = np.cross(quad[1] - quad[0], quad[2] - quad[0])
        assert abs(np.dot(quad[3] - quad[0], n)) <= 1e-12 * np.linalg.norm(n)
    lo, hi = _bounds(bar)
    np.testing.assert_allclose(lo, [0.03, -0.12, 0.0])
    np.testing.assert_allclose(hi, [0.12, 0.22, 1.5])


@pytest.mark.parametrize("w, d, h", [(0.35, 0.4, 0.5), (0.6, 0.9, 2.2)])
def test_a_step_ladder_is_an_a_frame_with_thin_treads(w, d, h):
    """Front rails lean back and back legs forward to a cap narrower than the feet; the treads are thin and
    of the rails' colour. Vertical rails with wide coloured treads read as a shelf unit (generator 13)."""
    prims = SHAPES["ladder"](w, d, h, np.random.default_rng(0))
    points = np.concatenate([p.points for p in prims])
    np.testing.assert_allclose(points.min(0), [-w / 2, -d / 2, 0.0], atol=1e-12)  # fills its box
    np.testing.assert_allclose(points.max(0), [w / 2, d / 2, h], atol=1e-12)
    tall = [p for p in prims if np.ptp(p.points[:, 2]) > 0.8 * h]
    assert len(tall) == 4
    for p in tall:  # each leans: its top is at least a fifth of the depth nearer the middle than its foot
        foot, top = p.points[p.points[:, 2] < 1e-9], p.points[p.points[:, 2] > 0.8 * h]
        assert abs(foot[:, 1].mean()) - abs(top[:, 1].mean()) >= 0.2 * d
    treads = [p for p in prims if all(p is not t for t in tall) and _bounds(p)[1][2] < h - 0.04 - 1e-9]
    assert len(treads) >= 2
    for p in treads:
        lo, hi = _bounds(p)
        assert hi[1] - lo[1] <= 0.1 and p.material == tall[0].material


def test_a_backpacks_pocket_and_straps_stand_out_from_every_body_colour():
    """A black pocket on a black body read as a box (generator 13's eye check): every detail colour is
    at least 50 levels of mean value lighter than every body colour."""
    body, detail = load_catalog().categories["backpack"].colors[:2]
    assert min(np.mean(c) for c in detail) - max(np.mean(c) for c in body) >= 50
