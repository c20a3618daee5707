"""`numerical3d sources inspect`: JSON per scene, rich tables, and failing scenes."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from numerical3d.pipeline.cli import app

runner = CliRunner()


def test_inspect_json_one_object_per_scene(w, tmp_path):
    a = w.write_scannet_scene(tmp_path, "scene0001_00", n_frames=2)
    w.write_scannet_scene(tmp_path, "scene0002_00", n_frames=2)
    result = runner.invoke(app, ["sources", "inspect", "scannet", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in result.stdout.splitlines()]
    assert [x["scene_id"] for x in lines] == ["scene0001_00", "scene0002_00"]
    first = lines[0]
    assert first["source"] == "scannet" and first["n_frames"] == 2 and first["fps"] == 30.0
    table = next(o for o in first["objects"] if o["label"] == "table")
    truth = a.boxes[2][1]
    assert np.allclose(table["center"], truth.center, atol=1e-5)
    rot = np.array(table["rotation"])  # rows; columns are the box axes
    assert rot.shape == (3, 3) and np.allclose(rot[:, 2], [0, 0, 1])
    assert abs(abs(rot[:, 0] @ truth.rotation[:, 0]) - 1) < 1e-6 or abs(abs(rot[:, 0] @ truth.rotation[:, 1]) - 1) < 1e-6
    assert set(table) >= {"label", "center", "extents", "rotation"}
    assert first["drops"][0]["reason"] == "excluded label 'wall'"


def test_inspect_table_and_errors(w, tmp_path):
    ms = w.write_scannet_scene(tmp_path, "scene0001_00", n_frames=1)
    bad = w.write_scannet_scene(tmp_path, "scene0002_00", n_frames=1)
    (bad.path / f"{bad.scene_id}.aggregation.json").write_text("{")
    result = runner.invoke(app, ["sources", "inspect", "scannet", str(tmp_path), "--no-frames"])
    assert result.exit_code == 1
    assert f"scannet / {ms.scene_id}: 4 objects, 0 frames" in result.stdout
    assert "trash can" in result.stdout and "dropped 1 x object: excluded label 'wall'" in result.stdout
    assert "1 scenes read, 1 failed" in result.stdout
    assert "invalid JSON" in result.stderr


def test_inspect_rejects_unknown_source(tmp_path):
    result = runner.invoke(app, ["sources", "inspect", "nope", str(tmp_path)])
    assert result.exit_code != 0 and "unknown source" in result.output
