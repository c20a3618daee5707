"""`build` never writes into what it reads: its source roots, corpus files and media folders.

Beside `test_hostile_inputs.py`, whose tests need the real VSI-Bench meta-info next to the checkout:
these need none, so they run wherever the suite runs.
"""

from __future__ import annotations

from .test_hostile_inputs import cli, tree


def test_build_never_writes_into_its_own_source_nor_around_it_even_with_force(tmp_path):
    """`--out` (or `--work`) inside a source root, the root itself or a folder holding it is refused
    before any work, `--force` or not: --force keeps a user's files beside a dataset, it never makes a
    scan folder one. The source's files are byte for byte as before."""
    src = tmp_path / "src"
    (src / "scans" / "scene0000_00").mkdir(parents=True)
    (src / "scans" / "scene0000_00" / "scene0000_00.txt").write_text("axisAlignment = 1 0 0 0 0 1 0 0 0 0 1 0 0 0 0 1\n")
    before = tree(src)
    for args in (["--out", str(src / "scans" / "scene0000_00" / "ds")], ["--out", str(src), "--force"],
                 ["--out", str(tmp_path), "--force"], ["--out", str(tmp_path / "ds"), "--work", str(src / "w")]):
        got = cli("build", "--preset", "demo", "--engine", "plain", "--source", f"scannet={src}", *args, cwd=tmp_path)
        assert got.returncode == 5 and "would write into the input" in got.stderr, (args, got.stderr)
    assert tree(src) == before and not (tmp_path / "ds").exists() and not (tmp_path / "ds.work").exists()


def test_build_never_writes_into_the_synthetic_scenes_it_generates(tmp_path, monkeypatch):
    """The generated scenes are an input like any source root: an --out inside their cache folder is
    refused, --force or not, and the scenes stay as they were."""
    cache = tmp_path / "cache"
    plan = tmp_path / "plan.yaml"
    plan.write_text("seed: 0\nsynthetic: {n_scenes: 1, seed: 3, n_frames: 4}\ndataset_overrides: {total: 20}\n")
    monkeypatch.setenv("NUMERICAL3D_CACHE", str(cache))
    first = cli("build", "--config", str(plan), "--engine", "plain", "--out", str(tmp_path / "ds"), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    scans = next((cache / "synthetic").glob("*/scans"))
    before = tree(scans.parent)
    for out in (scans, scans / "ds", scans.parent):
        got = cli("build", "--config", str(plan), "--engine", "plain", "--out", str(out), "--force", cwd=tmp_path)
        assert got.returncode == 5 and "would write into the input" in got.stderr, (out, got.stderr)
    assert tree(scans.parent) == before
