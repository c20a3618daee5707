"""What a scene's failure becomes: bad data is quarantined and cached, a bug in the code is
reported as a bug and never cached; the user's templates are checked before any scene runs
and key the cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from numerical3d.pipeline import build as b
from numerical3d.pipeline.build import scenes
from numerical3d.pipeline.build.cache import scene_dir

from .conftest import write_plan_file

REPO = Path(__file__).resolve().parents[2]
BAD_SCENE = "scene9001_00"

# The console script with one scene's item generation broken by a RuntimeError (a code bug).
BROKEN_CLI = f"""
import numerical3d.pipeline.build.scenes as scenes
real = scenes.generate_items
def broken(facts, plan):  # the build passes the scene processed (ProcessedScene)
    if facts.scene.scene_id == {BAD_SCENE!r}:
        raise RuntimeError("boom: a bug in a generator")
    return real(facts, plan)
scenes.generate_items = broken
from numerical3d.cli import main
main()
"""


def cli(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def result_files(work: Path, scene_id: str) -> list[Path]:
    return list((work / "scenes" / "scannet" / scene_id).glob("*.json"))


@pytest.mark.slow
def test_a_bug_fails_its_scene_loudly_is_reported_as_a_bug_and_is_not_cached(tree_copy, tmp_path):
    plan = write_plan_file(tmp_path / "plan.yaml", tree_copy)
    out = tmp_path / "out"
    run = cli(BROKEN_CLI, "build", "--config", str(plan), "--out", str(out), "--engine", "plain", "--json", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert "bug in the code" in run.stderr and BAD_SCENE in run.stderr
    assert "RuntimeError: boom" in run.stderr  # the traceback is logged
    summary = json.loads(run.stdout)
    assert summary["scenes"] == {"done": 5, "failed": 1}
    [record] = summary["quarantine"]
    assert record["scene_id"] == BAD_SCENE and record["bug"] is True
    assert record["reason"].startswith("bug") and "RuntimeError: boom" in record["reason"]
    report = json.loads((tmp_path / "out.work" / "build_report.json").read_text())
    assert report["quarantine"] == summary["quarantine"]
    assert result_files(tmp_path / "out.work", BAD_SCENE) == []  # not cached: the next build tries again
    assert len(result_files(tmp_path / "out.work", "scene9000_00")) == 1

    fixed = cli("from numerical3d.cli import main; main()", "build", "--config", str(plan), "--out", str(out),
                "--engine", "plain", "--json", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads(fixed.stdout)["scenes"] == {"cached": 5, "done": 1}


@pytest.mark.parametrize("error", [ValueError("a wrong index in a generator"), KeyError("forms"), IndexError("list")])
def test_errors_that_are_not_data_errors_escape_the_scene(tree_copy, tmp_path, monkeypatch, error):
    """ValueError, KeyError and IndexError used to be cached as quarantines of every scene."""
    plan = b.resolve_plan(None, write_plan_file(tmp_path / "plan.yaml", tree_copy), out=tmp_path / "out")
    job = b.enumerate_plan(plan)[1]

    def broken(scene, plan):
        raise error

    monkeypatch.setattr(scenes, "generate_items", broken)
    with pytest.raises(type(error)):
        b.process_scene(job, plan.scene, plan.work_dir())
    assert not list(scene_dir(plan.work_dir(), job).glob("*.json"))
    outcome = b.failed_outcome(job, error, 1)
    assert outcome.status == "failed" and outcome.bug and outcome.reason.startswith("bug")
    transient = b.failed_outcome(job, OSError(5, "Input/output error"), 3)
    assert not transient.bug and transient.reason.startswith("failed after 3 attempts")


def test_a_missing_templates_folder_fails_the_plan_before_any_scene(tree_copy, tmp_path):
    plan = write_plan_file(tmp_path / "plans" / "plan.yaml", tree_copy, questions={"templates_dir": "my_templates"})
    run = cli("from numerical3d.cli import main; main()", "build", "--config", str(plan), "--out",
              str(tmp_path / "out"), "--engine", "plain", cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    # Anchored to the plan file's folder, not to the current directory, and named.
    message = "".join(run.stderr.split())  # rich wraps long lines, even inside a path
    assert f"questions.templates_dir:{tmp_path / 'plans' / 'my_templates'}:templatefolderdoesnotexist" in message
    assert "Traceback" not in run.stderr and "validation error" not in run.stderr
    assert not (tmp_path / "out.work").exists()


def test_templates_dir_is_anchored_to_the_plan_file_and_a_broken_template_fails_the_plan(tree_copy, tmp_path,
                                                                                           monkeypatch):
    folder = tmp_path / "plans" / "my_templates" / "questions"
    folder.mkdir(parents=True)
    plan_path = write_plan_file(tmp_path / "plans" / "plan.yaml", tree_copy, questions={"templates_dir": "my_templates"})
    monkeypatch.chdir(tree_copy)
    plan = b.resolve_plan(None, plan_path, out=tmp_path / "out")
    assert plan.questions["templates_dir"] == str(tmp_path / "plans" / "my_templates")
    (folder / "object_count.j2").write_text("{% block paraphrase_1 %}How many {{ plural }?{% endblock %}")
    with pytest.raises(b.PlanError, match="object_count.j2:1"):
        b.resolve_plan(None, plan_path, out=tmp_path / "out")


def test_editing_a_template_reruns_the_scenes(tree_copy, tmp_path):
    folder = tmp_path / "my_templates" / "questions"
    folder.mkdir(parents=True)
    template = folder / "object_count.j2"
    template.write_text("{% block paraphrase_1 %}How many {{ plural }} can you find?{% endblock %}")
    plan = b.resolve_plan(None, write_plan_file(tmp_path / "plan.yaml", tree_copy, questions={
        "templates_dir": "my_templates", "subtasks": ["object_count"]}), out=tmp_path / "out")
    for job in b.enumerate_plan(plan):  # the first scene with a count to ask
        first = b.process_scene(job, plan.scene, plan.work_dir())
        if first.n_items:
            break
    assert first.status == "done" and first.n_items > 0
    assert b.process_scene(job, plan.scene, plan.work_dir()).status == "cached"

    stat = template.stat()
    template.write_text("{% block paraphrase_1 %}How many {{ plural }} can you spot?{% endblock %}")
    os.utime(template, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert template.stat().st_size == stat.st_size  # same size and mtime: only the content tells the edit
    again = b.process_scene(job, plan.scene, plan.work_dir())
    assert again.status == "done" and again.result != first.result
    questions = [it["question"] for it in json.loads(Path(again.result).read_text())["items"]]
    assert questions and all("can you spot?" in q for q in questions)
    assert not Path(first.result).exists()  # the stale result was dropped
