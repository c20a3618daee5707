"""The files are in ScanNet's exported format: PLY with per-vertex colour, segs, aggregation, `<id>.txt`
with a non-identity axisAlignment, colour/depth/pose/intrinsic exports, ScanNet-style invalid poses."""

from __future__ import annotations

import json

import cv2
import numpy as np
import plyfile
import pytest

IDS = ["scene9000_00", "scene9001_00", "scene9002_00"]


def read_info(path) -> dict[str, str]:
    return dict(line.split(" = ", 1) for line in path.read_text().splitlines())


def axis_alignment(scan) -> np.ndarray:
    info = read_info(scan / f"{scan.name}.txt")
    return np.array([float(v) for v in info["axisAlignment"].split()]).reshape(4, 4)


@pytest.mark.parametrize("sid", IDS)
def test_mesh_segments_and_aggregation(small_root, sid):
    scan = small_root / "scans" / sid
    ply = plyfile.PlyData.read(str(scan / f"{sid}_vh_clean_2.ply"))
    vertex, face = ply["vertex"], ply["face"]
    assert {p.name for p in vertex.properties} >= {"x", "y", "z", "red", "green", "blue"}
    assert vertex["red"].dtype == np.uint8 and np.ptp(vertex["red"]) > 0  # colours vary (category + noise)
    tris = np.stack(face["vertex_indices"])
    assert tris.shape[1] == 3 and tris.min() == 0 and tris.max() == vertex.count - 1

    segs = json.loads((scan / f"{sid}_vh_clean_2.0.010000.segs.json").read_text())
    assert segs["sceneId"] == sid
    seg = np.asarray(segs["segIndices"])
    assert len(seg) == vertex.count

    agg = json.loads((scan / f"{sid}.aggregation.json").read_text())
    assert agg["sceneId"] == f"scannet.{sid}" and agg["segmentsFile"].endswith(".segs.json")
    groups = agg["segGroups"]
    for g in groups:
        assert set(g) == {"id", "objectId", "label", "segments"} and g["id"] == g["objectId"]
        assert isinstance(g["label"], str) and g["segments"] and all(isinstance(s, int) for s in g["segments"])
    listed = [s for g in groups for s in g["segments"]]
    assert len(listed) == len(set(listed)) and set(listed) == set(seg.tolist())  # a partition of the segments
    labels = [g["label"] for g in groups]
    assert labels.count("floor") == 1 and labels.count("ceiling") == 1 and labels.count("wall") >= 4
    objects = [g for g in groups if g["label"] not in ("floor", "wall", "ceiling")]
    assert sum(len(g["segments"]) > 1 for g in objects) == len(objects)  # several segments per object


@pytest.mark.parametrize("sid", IDS)
def test_axis_alignment_round_trip(small_root, sid):
    """Raw vertices aligned with axisAlignment land in the true boxes; raw poses align to the truth's."""
    scan = small_root / "scans" / sid
    truth = json.loads((scan / f"{sid}.truth.json").read_text())
    align = axis_alignment(scan)
    assert np.allclose(align, np.asarray(truth["axis_alignment"]).reshape(4, 4), atol=1e-8)
    assert not np.allclose(align, np.eye(4), atol=1e-3)
    assert np.allclose(align[:3, :3] @ align[:3, :3].T, np.eye(3), atol=1e-8) and np.allclose(align[3], [0, 0, 0, 1])

    ply = plyfile.PlyData.read(str(scan / f"{sid}_vh_clean_2.ply"))
    raw = np.stack([ply["vertex"][c] for c in "xyz"], axis=1).astype(np.float64)
    aligned = raw @ align[:3, :3].T + align[:3, 3]
    assert aligned[:, 2].min() == pytest.approx(truth["room"]["floor_z"], abs=1e-4)
    assert aligned[:, 2].max() == pytest.approx(truth["room"]["ceiling_z"], abs=1e-4)
    inst = {}
    agg = json.loads((scan / f"{sid}.aggregation.json").read_text())
    seg = np.asarray(json.loads((scan / f"{sid}_vh_clean_2.0.010000.segs.json").read_text())["segIndices"])
    for g in agg["segGroups"]:
        inst[g["objectId"]] = np.isin(seg, g["segments"])
    for o in truth["objects"]:
        local = (aligned[inst[o["instance_id"]]] - o["center"]) @ np.asarray(o["rotation"])
        half = np.asarray(o["extents"]) / 2
        assert np.all(np.abs(local) <= half + 2e-4), o["label"]  # float32 PLY coordinates
        assert np.allclose(local.max(0), half, atol=2e-4) and np.allclose(local.min(0), -half, atol=2e-4)

    for f in truth["frames"]:
        raw_pose = np.loadtxt(scan / "pose" / f"{f['index']}.txt")
        if f["valid_pose"]:
            assert np.allclose(align @ raw_pose, np.asarray(f["pose"]), atol=1e-6)
            assert not np.allclose(raw_pose, np.asarray(f["pose"]), atol=1e-3)  # the pose file is NOT aligned


def test_frames_intrinsics_and_invalid_poses(small_root, syn):
    n_invalid = []
    for sid in IDS:
        scan = small_root / "scans" / sid
        truth = json.loads((scan / f"{sid}.truth.json").read_text())
        info = read_info(scan / f"{sid}.txt")
        assert (int(info["colorWidth"]), int(info["colorHeight"])) == (160, 120)
        k = np.loadtxt(scan / "intrinsic" / "intrinsic_color.txt")
        assert k.shape == (4, 4) and np.allclose(k, np.loadtxt(scan / "intrinsic" / "intrinsic_depth.txt"))
        assert np.allclose(k[:3, :3], truth["intrinsics"]) and float(info["fx_color"]) == pytest.approx(k[0, 0], 1e-6)
        indices = sorted(int(p.stem) for p in (scan / "color").glob("*.jpg"))
        assert indices == [10 * i for i in range(syn.SMALL["n_frames"])]
        for sub in ("depth", "instance", "pose"):
            assert sorted(int(p.stem) for p in (scan / sub).iterdir()) == indices
        bad = 0
        for idx in indices:
            color = cv2.imread(str(scan / "color" / f"{idx}.jpg"), cv2.IMREAD_UNCHANGED)
            depth = cv2.imread(str(scan / "depth" / f"{idx}.png"), cv2.IMREAD_UNCHANGED)
            inst = cv2.imread(str(scan / "instance" / f"{idx}.png"), cv2.IMREAD_UNCHANGED)
            assert color.shape == (120, 160, 3) and color.dtype == np.uint8
            assert depth.shape == inst.shape == (120, 160) and depth.dtype == inst.dtype == np.uint16
            assert 300 < np.median(depth) < 15000  # millimetres inside a room
            pose = np.loadtxt(scan / "pose" / f"{idx}.txt")
            if np.isfinite(pose).all():
                assert np.allclose(pose[:3, :3] @ pose[:3, :3].T, np.eye(3), atol=1e-6)
                assert np.allclose(pose[3], [0, 0, 0, 1])
            else:
                assert np.all(np.isneginf(pose))  # ScanNet writes a whole matrix of -inf
                assert "-inf" in (scan / "pose" / f"{idx}.txt").read_text()
                bad += 1
        assert bad == sum(not f["valid_pose"] for f in truth["frames"])
        assert indices[0] not in [f["index"] for f in truth["frames"] if not f["valid_pose"]]
        n_invalid.append(bad)
    assert all(1 <= b <= 2 for b in n_invalid)


def test_scannet_adapter_reads_them_with_the_invalid_frames_dropped(small_root):
    from numerical3d.sources import load_scenes

    scenes = list(load_scenes("synthetic", small_root))
    assert [s.scene_id for s in scenes] == IDS
    for scene in scenes:
        truth = json.loads((small_root / "scans" / scene.scene_id / f"{scene.scene_id}.truth.json").read_text())
        invalid = {f["index"] for f in truth["frames"] if not f["valid_pose"]}
        assert {f.index for f in scene.frames} == {f["index"] for f in truth["frames"]} - invalid
        assert sum(d.what == "frame" and "pose" in d.reason for d in scene.drops) == len(invalid)
        structural = {s["instance_id"] for s in truth["structures"]}
        excluded = [d for d in scene.drops if d.what == "object"]
        assert len(excluded) == len(structural) - 1  # walls and ceiling excluded; the floor feeds the floor points
        assert all(("wall" in d.reason or "ceiling" in d.reason) for d in excluded)
        assert {o.instance_id for o in scene.objects} == {o["instance_id"] for o in truth["objects"]}
