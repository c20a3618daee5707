"""Frames go from source to shard once: the source's JPEG as it is, or one encode; assembly copies bytes.

The synthetic tree's colour frames are 160x120 JPEGs in ScanNet's `color/N.jpg` layout, so the
demo mix (longest side 320) needs no resize, and a longest side of 64 forces one.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import cv2
import numpy as np
import pyarrow.parquet as pq
import pytest

from numerical3d.pipeline import build as b
from numerical3d.pipeline.frames import resize_longest
from numerical3d.pipeline.items import parse_frame_id
from numerical3d.sources.io import read_image_rgb

from .conftest import write_plan_file


def _build(tree: Path, tmp_path: Path, monkeypatch, media: dict) -> tuple[Path, Path]:
    """Scene stage over two scenes, then assembly with every OpenCV decoder patched to raise."""
    plan = b.resolve_plan(None, write_plan_file(tmp_path / "plan.yaml", tree, dataset_overrides={"total": 40, "media": media}),
                          out=tmp_path / "out")
    outcomes = [b.process_scene(job, plan.scene, plan.work_dir()) for job in b.enumerate_plan(plan)[:2]]
    assert {o.status for o in outcomes} == {"done"}

    def no_decoding(*args, **kwargs):
        raise AssertionError("assembly decoded pixels")

    with monkeypatch.context() as m:
        for name in ("imdecode", "imread", "resize", "imencode"):
            m.setattr(cv2, name, no_decoding)
        summary = b.assemble(plan, outcomes)
    assert summary.selected > 0
    return plan.out_dir(), plan.work_dir()


def _frames(out: Path) -> dict[str, dict]:
    rows: dict[str, dict] = {}
    for path in sorted((out / "frames").glob("*.parquet")):
        for row in pq.read_table(path).to_pylist():
            rows[row["frame_id"]] = row
    assert rows
    return rows


def _source_jpeg(tree: Path, fid: str) -> Path:
    _, scene_id, index = parse_frame_id(fid)
    return tree / "scans" / scene_id / "color" / f"{index}.jpg"


def test_source_jpeg_needing_no_resize_reaches_the_shard_byte_for_byte(synthetic_tree, tmp_path, monkeypatch):
    out, work = _build(synthetic_tree, tmp_path, monkeypatch, {"mode": "embed", "longest_side": 320})
    for fid, row in _frames(out).items():
        source = _source_jpeg(synthetic_tree, fid).read_bytes()
        assert row["image"]["bytes"] == source, fid
        decoded = cv2.imdecode(np.frombuffer(source, np.uint8), cv2.IMREAD_COLOR)
        assert (row["height"], row["width"]) == decoded.shape[:2]
        assert row["pixel_sha256"] == hashlib.sha256(decoded.tobytes()).hexdigest()
    # The work folder holds the shard's JPEGs, no lossless copy.
    exported = [p for p in (work / "scenes").rglob("*") if p.is_file() and p.parent.suffix == ".frames"]
    assert exported and {p.suffix for p in exported} == {".jpg"}
    assert not list(work.rglob("*.png"))


def test_frame_needing_resize_is_encoded_once_at_the_configured_quality(synthetic_tree, tmp_path, monkeypatch):
    out, work = _build(synthetic_tree, tmp_path, monkeypatch, {"mode": "embed", "longest_side": 64, "jpeg_quality": 70})
    for fid, row in _frames(out).items():
        data = row["image"]["bytes"]
        decoded = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        assert decoded.shape == (48, 64, 3) and (row["width"], row["height"]) == (64, 48)
        # One resize and one encode of the source's pixels at quality 70, nothing in between.
        small = resize_longest(read_image_rgb(_source_jpeg(synthetic_tree, fid)), 64)
        ok, once = cv2.imencode(".jpg", np.ascontiguousarray(small[:, :, ::-1]), [cv2.IMWRITE_JPEG_QUALITY, 70])
        assert ok and data == once.tobytes(), fid
        assert row["pixel_sha256"] == hashlib.sha256(decoded.tobytes()).hexdigest()
    assert not list(work.rglob("*.png"))


@pytest.mark.parametrize("problem", ["gray", "size"])
def test_source_jpeg_unlike_its_frame_is_encoded_instead(tmp_path, problem):
    """Bytes pass through only when they decode to the frame's three-channel pixels at its size."""
    from numerical3d.pipeline.frames import encode_source_frame
    from numerical3d.sources.scene import Frame

    rgb = np.random.default_rng(0).integers(0, 255, (40, 60, 3), dtype=np.uint8)
    img = rgb[:, :, 0] if problem == "gray" else rgb[:20]
    ok, buf = cv2.imencode(".jpg", img)
    frame = Frame(0, 0.0, np.eye(3), np.eye(4), 60, 40, "x.jpg", load_image=lambda: rgb, load_jpeg=buf.tobytes)
    got = encode_source_frame(frame, 320, 90)
    assert got.data != buf.tobytes() and (got.width, got.height) == (60, 40)


def test_hydrated_frames_are_the_bytes_an_embed_build_publishes(synthetic_tree, tmp_path, monkeypatch):
    from numerical3d.pipeline.hydrate import hydrate

    embed, _ = _build(synthetic_tree, tmp_path / "embed", monkeypatch, {"mode": "embed", "longest_side": 320})
    ref, _ = _build(synthetic_tree, tmp_path / "ref", monkeypatch, {"mode": "reference", "longest_side": 320})
    result = hydrate(ref, source_roots={"scannet": synthetic_tree})
    assert result.frames == len(_frames(embed))
    for path in sorted((embed / "frames").glob("*.parquet")):
        assert (ref / "frames" / path.name).read_bytes() == path.read_bytes()


def test_floor_is_estimated_once_per_scene(synthetic_tree, tmp_path, monkeypatch):
    """room_size, route_plan and the scene's geometry record share one floor polygon."""
    from numerical3d.pipeline.build.cache import read_result
    from numerical3d.pipeline.geometry import floor

    calls = []
    real = floor.floor_estimate
    monkeypatch.setattr(floor, "floor_estimate", lambda scene, *a: calls.append(scene.scene_id) or real(scene, *a))
    plan = b.resolve_plan(None, write_plan_file(tmp_path / "plan.yaml", synthetic_tree), out=tmp_path / "out")
    jobs = b.enumerate_plan(plan)
    subtasks: set[str] = set()
    for job in jobs:
        result = read_result(b.process_scene(job, plan.scene, plan.work_dir()).result)
        assert result["geometry"]["floor"]
        subtasks |= {it["subtask"] for it in result["items"]}
    assert calls == [job.ref.scene_id for job in jobs]  # once per scene
    assert {"room_size", "route_plan"} <= subtasks
