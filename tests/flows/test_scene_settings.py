"""The scene stage's settings: resolved once per plan, the stage's argument and its key payload."""

from __future__ import annotations

import pytest

from numerical3d.pipeline import build as b
from numerical3d.pipeline.build import plan as plan_module
from numerical3d.pipeline.build.cache import scene_key

from .conftest import write_plan_file


def test_the_mix_is_read_once_per_plan_not_per_scene(synthetic_tree, tmp_path, monkeypatch):
    reads = []
    real = plan_module.load_mix
    monkeypatch.setattr(plan_module, "load_mix", lambda *a, **kw: reads.append(a) or real(*a, **kw))
    plan = b.resolve_plan(None, write_plan_file(tmp_path / "plan.yaml", synthetic_tree, questions={
        "subtasks": ["object_count"]}), out=tmp_path / "out")
    jobs = b.enumerate_plan(plan)[:3]
    outcomes = [b.process_scene(job, plan.scene, plan.work_dir()) for job in jobs]
    assert [o.status for o in outcomes] == ["done"] * 3
    assert len(reads) == 1  # when the plan is resolved (its quotas checked), never per scene
    assert plan.scene is plan.scene and plan.scene.question_config is plan.scene.question_config


def test_settings_are_frozen_and_a_copied_plan_resolves_its_own(synthetic_tree, tmp_path):
    plan = b.resolve_plan(None, write_plan_file(tmp_path / "plan.yaml", synthetic_tree), out=tmp_path / "out")
    settings = plan.scene
    with pytest.raises(Exception, match="frozen"):
        settings.seed = 4
    other = plan.model_copy(update={"seed": 4, "dataset_overrides": {"media": {"mode": "reference"}}})
    assert (other.scene.seed, other.scene.media_mode, other.scene.question_config.seed) == (4, "reference", 4)
    assert (plan.scene.seed, plan.scene.media_mode) == (3, settings.media_mode)
    job = b.enumerate_plan(plan)[0]
    assert scene_key(job, other.scene) != scene_key(job, settings)
    # The settings value is all a key hashes besides the job: equal settings, equal keys.
    same = b.resolve_plan(None, write_plan_file(tmp_path / "again.yaml", synthetic_tree), out=tmp_path / "elsewhere")
    assert same.scene == settings and scene_key(job, same.scene) == scene_key(job, settings)
