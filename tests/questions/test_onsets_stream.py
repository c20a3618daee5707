"""Appearance onsets on a long video, searched coarse to fine, against the exhaustive frame-by-frame search.

A camera at the origin pans once around five cubes (400 frames at 30 fps), with a three-frame swing
early on that shows the last cube firmly long before the pan reaches it. The exhaustive search is
the frame-by-frame rule written out here; the coarse search examines `stream_frames` of the video
and bisects before each first sighting.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from numerical3d.pipeline.geometry import box_glimpses
from numerical3d.pipeline.questions import QuestionConfig
from numerical3d.pipeline.questions.appearance_order import onsets
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.frame_cover import uniform_pick
from numerical3d.pipeline.questions.generate import generate_scene
from numerical3d.sources.scene import Frame, Scene

from depth_truth import H, K, W, solid, zbuffer

N, FPS, GRID = 400, 30.0, 40
LABELS = ["armchair", "bench", "crate", "drum", "easel"]  # at 0, 40, 80, 120, 160 degrees; no minimum sides


def yaw_pose(deg: float) -> np.ndarray:
    t = math.radians(deg)
    out = np.eye(4)
    out[:3, :3] = [[math.cos(t), 0, math.sin(t)], [0, 1, 0], [-math.sin(t), 0, math.cos(t)]]
    return out


def spike() -> range:
    """Three frames strictly between two examined ones, early in the pan."""
    grid = uniform_pick(list(range(N)), GRID)
    return range(grid[10] + 2, grid[10] + 5)


@pytest.fixture(scope="module")
def pan() -> tuple[Scene, list[int]]:
    objects = []
    for i, lab in enumerate(LABELS):
        c = 3.0 * np.array([math.sin(math.radians(40 * i)), 0.0, math.cos(math.radians(40 * i))])
        objects.append(solid(i + 1, lab, c - 0.2, c + 0.2, step=0.04))
    pts = np.vstack([o.points for o in objects])
    decoded: list[int] = []
    frames = []
    for i in range(N):
        deg = 160.0 if i in spike() else -30.0 + 220.0 * i / (N - 1)
        p = yaw_pose(deg)
        depth = zbuffer(pts, p)
        frames.append(Frame(i, i / FPS, K, p, W, H, f"mem#{i}",
                            load_depth=lambda d=depth, i=i: (decoded.append(i), d)[1]))
    return Scene("pan", "synthetic", objects, frames=frames), decoded


def exhaustive(ctx: Context) -> tuple[dict[str, float], dict[str, float], dict[str, tuple[int, int]]]:
    """Every frame in time order: first visible point, first firm sighting, then box glimpses before."""
    label_of = {o.instance_id: o.label for o in ctx.objects}
    frames = sorted(ctx.scene.frames, key=lambda f: (f.timestamp, f.index))
    first_any: dict[str, float] = {}
    first_firm: dict[str, float] = {}
    where: dict[str, tuple[int, int]] = {}
    for frame in frames:
        vis = ctx.visibility(frame)
        named = ctx.nameable(frame.index)
        for iid in sorted(vis, key=lambda i: (-vis[i].pixels, i)):
            lab = label_of[iid]
            first_any.setdefault(lab, frame.timestamp)
            if iid in named and lab not in first_firm:
                first_firm[lab] = frame.timestamp
                where[lab] = (frame.index, iid)
    for frame in frames:
        pending = [o for o in ctx.objects if o.label in first_firm and frame.timestamp < first_any[o.label]]
        for iid in box_glimpses(pending, frame):
            first_any[label_of[iid]] = min(first_any[label_of[iid]], frame.timestamp)
    return first_any, first_firm, where


@pytest.fixture(scope="module")
def reference(pan) -> tuple[Context, tuple]:
    """A context examining every frame, and the exhaustive search's onsets on it."""
    ctx = Context(pan[0], QuestionConfig())
    return ctx, exhaustive(ctx)


def firm(ctx: Context, index: int) -> set[str]:
    named = ctx.nameable(index)
    return {o.label for o in ctx.objects if o.instance_id in named}


def test_with_every_frame_examined_the_search_is_the_exhaustive_one(pan, reference):
    assert onsets(Context(pan[0], QuestionConfig(stream_frames=N))) == reference[1]


def test_coarse_onsets_are_first_firm_sightings_and_cost_does_not_follow_the_length(pan, reference):
    scene, decoded = pan
    decoded.clear()
    ctx = Context(scene, QuestionConfig(stream_frames=GRID))
    first_any, first_firm, where = onsets(ctx)
    # visibility on the examined frames and the bisection probes only; the glimpse pass decodes no others
    steps = math.ceil(math.log2(N / (GRID - 1))) + 1
    assert len(ctx._visibility) <= GRID + len(LABELS) * steps
    assert set(decoded) == set(ctx._visibility)
    full, (ref_any, ref_firm, _) = reference
    assert set(first_firm) == set(ref_firm) == set(LABELS)
    grid = ctx.examined_frames
    for lab, (index, iid) in where.items():
        assert lab in firm(full, index) and first_firm[lab] == index / FPS
        assert index == 0 or lab not in firm(full, index - 1)  # the frame before does not show it firmly
        assert not any(lab in firm(full, g) for g in grid if g < index)
        assert ref_firm[lab] <= first_firm[lab]
        if ref_firm[lab] < first_firm[lab]:  # only a sighting that starts and ends between two examined frames
            missed = [i for i in range(N) if ref_firm[lab] <= i / FPS < first_firm[lab] and lab in firm(full, i)]
            assert not set(missed) & set(grid)
    # the swing shows the easel firmly for three frames the sample skips: its onset is the pan's
    assert ref_firm["easel"] == spike()[0] / FPS < first_firm["easel"]
    assert ref_firm["easel"] - ref_any["easel"] <= 0.5 and first_firm["easel"] - first_any["easel"] <= 0.5
    assert {lab: first_firm[lab] for lab in LABELS[:4]} == {lab: ref_firm[lab] for lab in LABELS[:4]}


def test_appearance_items_on_a_long_video_show_their_order_in_their_own_frames(pan, reference):
    scene, _ = pan
    config = QuestionConfig(subtasks=("appearance_order",), stream_frames=GRID, scene_frames=8)
    items = [it for it in generate_scene(scene, config) if it.verifier["kind"] == "order"]
    assert items
    ctx, full = Context(scene, config), reference[0]
    for it in items:
        order = it.verifier["answer"]
        frames = it.provenance["frame_indices"]
        assert set(frames) <= set(ctx.examined_frames) | {int(round(t * FPS)) for t in it.provenance["value"].values()}
        first = {lab: min(i for i in frames if lab in firm(full, i)) for lab in order}
        assert sorted(order, key=first.__getitem__) == order


def test_a_plan_examining_fewer_than_two_frames_is_refused(tmp_path):
    import subprocess
    import sys

    cfg = tmp_path / "plan.yaml"
    cfg.write_text(f"sources: [{{name: scannet, root: {tmp_path}}}]\nquestions: {{stream_frames: 1}}\n")
    run = subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "build", "--config", str(cfg),
                          "--engine", "plain", "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=300)
    assert run.returncode != 0 and "stream_frames must be at least 2" in run.stderr
    assert "plan.yaml" in run.stderr
    assert not (tmp_path / "o").exists()
    assert QuestionConfig(stream_frames=2).stream_frames == 2


def test_glimpses_decode_a_depth_map_only_when_some_box_shows_in_it(pan):
    """A source that states its depth maps' size (a `.sens` header) lets the glimpse test skip decoding
    the frames in which every box lies outside the map; the glimpses are the same."""
    import dataclasses

    scene, decoded = pan
    sized = [dataclasses.replace(f, depth_size=(W, H)) for f in scene.frames]
    decoded.clear()
    objects = scene.objects[-1:]  # the easel: out of view for most of the pan
    same = [box_glimpses(objects, f) == box_glimpses(objects, g) for f, g in zip(scene.frames, sized)]
    assert all(same)
    unsized_decodes = len(scene.frames)
    assert 0 < len(decoded) - unsized_decodes < unsized_decodes // 2
