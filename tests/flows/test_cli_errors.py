"""Everyday mistakes with `numerical3d build` and `questions`, through the real console script:
a non-zero exit at once, a short message naming the file and the field, no traceback."""

from __future__ import annotations

import shutil
import time

import pytest

from .conftest import write_plan_file


def test_quota_for_an_unknown_subtask(cli, synthetic_tree, tmp_path):
    plan = write_plan_file(tmp_path / "plan.yaml", synthetic_tree,
                           dataset_overrides={"total": 60, "quotas": {"object_count": 1, "grounding_4d": 2}})
    res = cli("build", "--engine", "plain", "--config", plan, "--out", tmp_path / "ds")
    text = cli.user_error(res, str(plan), "dataset_overrides.quotas", "grounding_4d", "unknown subtask")
    assert res.returncode == 2 and len(text) < 600
    assert not (tmp_path / "ds").exists()


def test_unknown_subtask_in_a_mix_file_names_that_file(cli, synthetic_tree, tmp_path):
    mix = tmp_path / "mix.yaml"
    mix.write_text("total: 10\nquotas: {object_count: 1, objekt_size: 1}\n")
    plan = write_plan_file(tmp_path / "plan.yaml", synthetic_tree, dataset=str(mix), dataset_overrides={})
    res = cli("build", "--engine", "plain", "--config", plan, "--out", tmp_path / "ds")
    cli.user_error(res, str(mix), "quotas", "objekt_size")
    assert res.returncode == 2 and not (tmp_path / "ds").exists()


def test_negative_total_blames_the_plan_not_the_preset(cli, synthetic_tree, tmp_path):
    plan = write_plan_file(tmp_path / "plan.yaml", synthetic_tree, dataset_overrides={"total": -5})
    text = cli.user_error(cli("build", "--engine", "plain", "--config", plan, "--out", tmp_path / "ds"),
                          str(plan), "dataset_overrides.total = -5", "greater than or equal to 1")
    assert "mixes/demo.yaml" not in text


@pytest.mark.parametrize("extra, field", [
    ({"dataset_overrides": {"media": {"longest_side": "big"}}}, "dataset_overrides.media.longest_side = 'big'"),
    ({"dataset_overrides": {"quotas": {"route_plan": -1}}}, "dataset_overrides.quotas.route_plan = -1"),
    ({"questions": {"route_plan": {"max_turn": 2}}}, "questions.route_plan.max_turn"),
])
def test_sources_check_names_the_plan_and_field_of_a_bad_value_in_one_line(cli, tmp_path, extra, field):
    """pydantic's errors become the project's own at the config boundary: one line, exit 2."""
    plan = write_plan_file(tmp_path / "plan.yaml", tmp_path, **extra)
    res = cli("sources", "check", plan)
    cli.user_error(res, f"{plan}: ", field)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_source_root_that_does_not_exist(cli, tmp_path):
    missing = tmp_path / "no-such-tree"
    start = time.monotonic()
    res = cli("build", "--engine", "plain", "--preset", "demo", "--source", f"scannet={missing}",
              "--out", tmp_path / "ds")
    cli.user_error(res, "--source", "sources[0] (scannet)", str(missing), "does not exist")
    assert res.returncode == 2 and time.monotonic() - start < 60
    assert len(res.stderr.splitlines()) <= 3
    plan = write_plan_file(tmp_path / "plan.yaml", missing)
    cli.user_error(cli("build", "--config", plan, "--out", tmp_path / "ds"), str(plan), str(missing))


def test_questions_on_a_missing_path_writes_nothing(cli, tmp_path):
    out = tmp_path / "items.jsonl"
    res = cli("questions", "scannet", tmp_path / "nope", "--out", out)
    cli.user_error(res, str(tmp_path / "nope"), "does not exist")
    assert res.returncode == 2 and not out.exists()


def test_shallow_sources_check_finds_a_truncated_mesh_and_a_missing_pose_folder(cli, tree_copy, tmp_path):
    import json
    import shutil

    scans = sorted((tree_copy / "scans").iterdir())
    mesh = scans[0] / f"{scans[0].name}_vh_clean_2.ply"
    data = mesh.read_bytes()
    mesh.write_bytes(data[: len(data) * 9 // 10])  # a copy cut short: the header is intact
    shutil.rmtree(scans[1] / "pose")
    plan = write_plan_file(tmp_path / "plan.yaml", tree_copy)
    res = cli("sources", "check", plan, "--json")
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    problems = {p["scene_id"]: p["problem"] for p in map(json.loads, res.stdout.splitlines())}
    assert set(problems) == {scans[0].name, scans[1].name}
    assert problems[scans[0].name].startswith(f"{mesh.name}: truncated: {len(data) * 9 // 10} bytes")
    assert "pose" in problems[scans[1].name]


def test_one_scene_id_in_two_roots_of_a_source_is_refused_before_any_scene(cli, synthetic_tree, tmp_path):
    """Two roots holding the same scene id would share its result file and its item ids."""
    twin = tmp_path / "twin"
    shutil.copytree(synthetic_tree / "scans" / "scene9000_00", twin / "scans" / "scene9000_00")
    plan = write_plan_file(tmp_path / "plan.yaml", synthetic_tree,
                           sources=[{"name": "scannet", "root": str(synthetic_tree)},
                                    {"name": "scannet", "root": str(twin)}])
    res = cli("build", "--engine", "plain", "--config", plan, "--out", tmp_path / "ds")
    cli.user_error(res, "scannet/scene9000_00", "two roots", str(twin / "scans" / "scene9000_00"))
    assert res.returncode == 2 and [line.startswith("error:") for line in res.stderr.splitlines()].count(True) == 1
    assert not (tmp_path / "ds" / "manifest.json").exists() and not (tmp_path / "ds.work" / "scenes").exists()
