"""`numerical3d synth OUT --scenes N --seed S [--frames F] [--width W --height H]`."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from numerical3d.pipeline.cli import app


def test_synth_writes_scenes_and_lists_their_ids(tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["synth", str(out), "--scenes", "2", "--seed", "11", "--frames", "6",
                                   "--width", "160", "--height", "120"])
    assert res.exit_code == 0, res.output
    assert res.stdout.split()[-2:] == ["scene9000_00", "scene9001_00"]
    assert sorted(p.name for p in (out / "scans").iterdir()) == ["scene9000_00", "scene9001_00"]
    truth = json.loads((out / "scans" / "scene9001_00" / "scene9001_00.truth.json").read_text())
    assert (truth["seed"], truth["index"], truth["width"], len(truth["frames"])) == (11, 1, 160, 6)
    assert not (out / "scans" / "scene9001_00" / "instance").exists()  # masks only with --masks


def test_synth_matches_the_library(tmp_path, small_root, syn):
    out = tmp_path / "cli"
    res = CliRunner().invoke(app, ["synth", str(out), "-n", "1", "--seed", "11", "--frames", "6", "--width", "160",
                                   "--height", "120", "--workers", "1", "--masks"])
    assert res.exit_code == 0, res.output
    assert syn.tree_hashes(out / "scans" / "scene9000_00") == syn.tree_hashes(small_root / "scans" / "scene9000_00")


def test_synth_rejects_bad_options(tmp_path):
    runner = CliRunner()
    for args in (["--scenes", "0"], ["--objects", "99"], ["--width", "4"], ["--frames", "0"]):
        res = runner.invoke(app, ["synth", str(tmp_path / "x"), *args])
        assert res.exit_code == 2, (args, res.output)
    assert not (tmp_path / "x").exists()
