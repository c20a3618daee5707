"""A 24-scene tree as real copies go wrong: 14 scenes no build can use, 10 good scenes with one
damaged frame or file each (JPEG tails, one making a 2 GiB file). Built through the command line: the 10 are built (the bad frame or
file dropped and named), the 14 are quarantined with their file named, and no published frame is
larger than its clean image (tails after a JPEG's end are never published)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

pytestmark = pytest.mark.slow

CLI = "from numerical3d.cli import main; main()"
TAIL = b"\xff\xd9" + b"\x00TAIL" * (1 << 18)  # 1.25 MiB after the end marker (a second end marker included)


def finite_frames(scene: Path) -> list[int]:
    return sorted(int(p.stem) for p in (scene / "pose").glob("*.txt") if np.isfinite(np.loadtxt(p)).all())


def damage_good(scene: Path, k: int) -> None:
    """One damaged frame or one stray file: the scene must still be built."""
    f = finite_frames(scene)[1]
    color, depth, pose = scene / "color" / f"{f}.jpg", scene / "depth" / f"{f}.png", scene / "pose" / f"{f}.txt"
    if k == 0:
        depth.write_bytes(depth.read_bytes()[: depth.stat().st_size // 3])  # truncated depth map
    elif k == 1:
        pose.unlink()
        pose.symlink_to(pose.name)  # a pose that links to itself
    elif k == 2:
        (scene / "loop").symlink_to(".")  # a stray link to the scene's own folder
    elif k == 3:
        for jpg in (scene / "color").glob("*.jpg"):  # every colour frame carries a tail
            jpg.write_bytes(jpg.read_bytes() + TAIL)
        with open(color, "r+b") as fh:  # and one is 2 GiB long (sparse): never read past its end marker
            fh.truncate(2 << 30)
    elif k == 4:
        color.write_bytes(color.read_bytes()[: int(color.stat().st_size * 0.4)])  # truncated colour image
    elif k == 5:
        pose.write_text(" ".join(["nan"] * 16))
    elif k == 6:
        color.write_bytes(b"")
    elif k == 7:
        os.mkfifo(scene / "notes")  # a named pipe nobody writes
    elif k == 8:
        depth.unlink()
    elif k == 9:
        (scene / "old").symlink_to("/nonexistent/target")  # a dangling link


def damage_unusable(scans: Path, scene: Path, k: int) -> Path:
    """What makes a scene unusable; returns the file its reason must name."""
    sid = scene.name
    agg, mesh, meta = scene / f"{sid}.aggregation.json", scene / f"{sid}_vh_clean_2.ply", scene / f"{sid}.txt"
    segs = scene / f"{sid}_vh_clean_2.0.010000.segs.json"
    if k == 0:
        agg.unlink()
        return agg
    if k == 1:
        agg.unlink()
        os.mkfifo(agg)
        return agg
    if k == 2:
        mesh.write_bytes(mesh.read_bytes()[: mesh.stat().st_size // 2])
        return mesh
    if k == 3:
        meta.write_text("sceneType = Office\n")
        return meta
    if k == 4:
        for jpg in (scene / "color").glob("*.jpg"):
            jpg.write_bytes(jpg.read_bytes()[:100])
        return scene
    if k == 5:
        for p in (scene / "pose").glob("*.txt"):
            p.write_text(" ".join(["nan"] * 16))
        return scene
    if k == 6:
        segs.write_text("{not json")
        return segs
    if k == 7:
        doc = agg.read_text()
        agg.write_text(doc.replace("{", '{"segGroups": [], ', 1))  # the key twice in one object
        return agg
    if k == 8:
        agg.write_text("[1, 2, 3]")
        return agg
    if k == 9:
        mesh.write_text("not a mesh at all")
        return mesh
    if k == 10:
        for p in scene.iterdir():
            if p.is_dir():
                for q in p.iterdir():
                    q.unlink()
                p.rmdir()
            else:
                p.unlink()
        return scene
    if k == 11:
        _remove(scene)
        scene.symlink_to(scene.name)  # the scene folder links to itself
        return scene
    if k == 12:
        _remove(scene)
        os.mkfifo(scene)  # a named pipe named like a scene
        return scene
    meta.unlink()
    return meta


def _remove(folder: Path) -> None:
    for p in sorted(folder.rglob("*"), reverse=True):
        p.unlink() if not p.is_dir() or p.is_symlink() else p.rmdir()
    folder.rmdir()


def test_ten_damaged_scenes_are_built_and_fourteen_unusable_ones_quarantined_by_name(tmp_path):
    from numerical3d.sources.synthetic import write_synthetic_scenes

    ids = write_synthetic_scenes(tmp_path / "tree", 24, 11, n_frames=10, width=160, height=120)
    scans = tmp_path / "tree" / "scans"
    good, bad = ids[:10], ids[10:]
    clean = {p.name: p.read_bytes() for p in (scans / good[3] / "color").glob("*.jpg")}
    for k, sid in enumerate(good):
        damage_good(scans / sid, k)
    named = {sid: damage_unusable(scans, scans / sid, k) for k, sid in enumerate(bad)}
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "seed": 0, "sources": [{"name": "scannet", "root": str(tmp_path / "tree")}], "dataset": "demo",
        "dataset_overrides": {"total": 200}, "runner": {"kind": "threads", "max_workers": 2},
        "retry": {"retries": 0, "delay_s": 0.0, "backoff": 1.0}, "code_version": "test"}))
    run = subprocess.run([sys.executable, "-c", CLI, "build", "--config", str(plan), "--out", str(tmp_path / "ds"),
                          "--engine", "plain", "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert summary["scenes"] == {"done": 10, "quarantined": 14}, summary["quarantine"]
    reasons = {r["scene_id"]: r["reason"] for r in summary["quarantine"]}
    assert set(reasons) == set(bad) and not any(r.get("bug") for r in summary["quarantine"])
    for sid, path in named.items():
        assert str(path) in reasons[sid], (sid, reasons[sid])
    dropped = {(r["scene_id"], r["what"]) for r in summary["dropped"]}
    for k, sid in enumerate(good):
        if k != 3:  # the tails cost nothing: the frame is used without them
            assert any(s == sid for s, _ in dropped), (k, sid)
    for shard in sorted((tmp_path / "ds" / "frames").glob("*.parquet")):
        for row in pq.read_table(shard, columns=["frame_id", "image"]).to_pylist():
            source, scene, index = row["frame_id"].rsplit("/", 2)
            if scene == good[3] and row["image"]:
                assert row["image"]["bytes"] == clean[f"{index}.jpg"]  # the clean image, byte for byte
            assert b"TAIL" not in (row["image"] or {}).get("bytes", b"")
