"""One bad input costs its own scene or frame, never the build, and never hangs it.

Scenes written by `numerical3d synth`, then corrupted the way real copies go wrong: a symbolic
link loop in a scene's folder, a named pipe in place of a scene file, a deleted pose, a NaN
pose and an empty image. Built through the command line (`build --engine plain`) with a
timeout, so a reader that blocks on the pipe fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from numerical3d.sources.io import check_regular, image_size, open_regular, read_json, read_matrix_txt
from numerical3d.sources.scene import SceneError

CLI = "from numerical3d.cli import main; main()"
LOOP, PIPE, FRAMES, CLEAN = "scene9000_00", "scene9001_00", "scene9002_00", "scene9003_00"


def cli(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def finite_pose_frames(scene: Path) -> list[int]:
    """Frames whose pose file holds a finite pose (the synthetic walk loses tracking on a few)."""
    return sorted(int(p.stem) for p in (scene / "pose").glob("*.txt")
                  if np.isfinite(np.loadtxt(p)).all() and (scene / "color" / f"{p.stem}.jpg").is_file())


@pytest.mark.slow
def test_a_symlink_loop_and_a_named_pipe_quarantine_their_scenes_and_bad_frames_are_named(tmp_path):
    made = cli("synth", str(tmp_path / "tree"), "--scenes", "4", "--seed", "7", "--frames", "10", "--width", "160",
               "--height", "120", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    scans = tmp_path / "tree" / "scans"
    loop = scans / LOOP / "loop"
    loop.symlink_to("loop")  # a stray link to itself in a scene's folder
    pipe = scans / PIPE / f"{PIPE}.aggregation.json"
    pipe.unlink()
    os.mkfifo(pipe)  # nobody ever writes to it: opening it for reading would block for ever
    frames = scans / FRAMES
    gone, nan, empty = finite_pose_frames(frames)[:3]
    (frames / "pose" / f"{gone}.txt").unlink()
    (frames / "pose" / f"{nan}.txt").write_text(" ".join(["nan"] * 16) + "\n")
    (frames / "color" / f"{empty}.jpg").write_bytes(b"")
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "seed": 0, "sources": [{"name": "scannet", "root": str(tmp_path / "tree")}], "dataset": "demo",
        "dataset_overrides": {"total": 40}, "runner": {"kind": "threads", "max_workers": 2},
        "retry": {"retries": 1, "delay_s": 0.0, "backoff": 1.0}, "code_version": "test"}))
    args = ("build", "--config", str(plan), "--out", str(tmp_path / "out"), "--engine", "plain", "--json")

    run = cli(*args, cwd=tmp_path, timeout=240)
    assert run.returncode == 0, run.stderr  # quarantined data errors are not failures
    summary = json.loads(run.stdout)
    assert summary["scenes"] == {"done": 3, "quarantined": 1} and summary["selected"] > 0
    reasons = {r["scene_id"]: r["reason"] for r in summary["quarantine"]}
    assert reasons == {PIPE: f"{pipe}: is a named pipe, not a regular file"}  # a stray link costs no scene
    assert not any(r["bug"] for r in summary["quarantine"])
    report = json.loads((tmp_path / "out.work" / "build_report.json").read_text())
    named = {(r["reason"], r["detail"]) for r in report["dropped"] if r["scene_id"] == FRAMES}
    assert {("missing pose file", str(frames / "pose" / f"{gone}.txt")),
            ("non-finite pose", str(frames / "pose" / f"{nan}.txt")),
            ("unreadable colour image", f"{frames / 'color' / f'{empty}.jpg'}: empty image file")} <= named
    assert report["dropped"] == summary["dropped"]
    assert ("file", "skipped: symbolic link loop", str(loop)) in {
        (r["what"], r["reason"], r["detail"]) for r in report["dropped"] if r["scene_id"] == LOOP}
    assert {r["scene_id"] for r in report["dropped"]} <= {FRAMES, CLEAN, LOOP}

    again = cli(*args, cwd=tmp_path, timeout=240)  # every verdict is cached, the pipe's too
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["scenes"] == {"cached": 3, "quarantined": 1}


def test_only_regular_files_are_opened(tmp_path):
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)
    loop = tmp_path / "loop.txt"
    loop.symlink_to("loop.txt")
    for reader in (read_json, lambda p: read_matrix_txt(p, (4, 4)), image_size, check_regular, open_regular):
        with pytest.raises(SceneError, match="is a named pipe, not a regular file"):
            reader(pipe)
        with pytest.raises(SceneError, match="symbolic link loop"):
            reader(loop)
    with pytest.raises(SceneError, match="is a folder, not a regular file"):
        read_json(tmp_path)
    with pytest.raises(SceneError, match="is a character device"):
        check_regular("/dev/null")
    with pytest.raises(SceneError, match="file is missing"):
        open_regular(tmp_path / "absent")
    (tmp_path / "empty.jpg").write_bytes(b"")
    with pytest.raises(SceneError, match="empty image file"):
        image_size(tmp_path / "empty.jpg")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file without read permission")
def test_a_file_without_read_permission_is_a_scene_error(tmp_path):
    locked = tmp_path / "pose.txt"
    locked.write_text("1 0 0 0 0 1 0 0 0 0 1 0 0 0 0 1")
    locked.chmod(0)
    with pytest.raises(SceneError, match="Permission denied"):
        read_matrix_txt(locked, (4, 4))


def test_a_symlink_loop_never_stops_the_size_estimate_nor_the_cache_key(tmp_path):
    """`input_bytes` runs for every scene before any starts: it used to raise ELOOP and abort the
    build; the cache key then quarantined the scene for one stray link. Now the link counts by its
    name (removing it changes the key) and a link to the folder itself is not followed."""
    from numerical3d.pipeline.build.cache import fingerprint
    from numerical3d.pipeline.build.scenes import input_bytes
    from numerical3d.sources.io import stray_entries

    scene = tmp_path / "scene0001_00"
    scene.mkdir()
    (scene / "mesh.ply").write_bytes(b"x" * 100)
    (scene / "loop").symlink_to("loop")
    (scene / "self").symlink_to(".")
    os.mkfifo(scene / "pipe")
    assert input_bytes(scene) == 100
    with_loop = fingerprint(scene)
    assert fingerprint(scene, "content")
    assert stray_entries(scene) == [(scene / "loop", "symbolic link loop"), (scene / "pipe", "a named pipe, not a regular file")]
    (scene / "loop").unlink()
    assert fingerprint(scene) != with_loop
    assert fingerprint(scene) == fingerprint(scene, "stat")  # the pipe is not an input: never opened
