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
