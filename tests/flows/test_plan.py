"""Build plans, keys, fingerprints, the code version, runner selection (no Prefect server needed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from numerical3d.pipeline import build as b
from numerical3d.pipeline.build.cache import fingerprint, scene_key
from numerical3d.pipeline.manifest import content_hash
from numerical3d.pipeline.runners import RunnerConfig, describe
from numerical3d.prefect_engine import make_task_runner
from numerical3d.sources import SceneRef


def test_presets_resolve(tmp_path, monkeypatch):
    monkeypatch.setenv(b.CACHE_ENV, str(tmp_path / "cache"))
    assert set(b.build_presets()) >= {"demo", "full", "synthetic-50k"}
    demo = b.resolve_plan("demo", out=tmp_path / "out")
    assert demo.synthetic is not None and demo.dataset == "demo"
    # The demo scenes are generated into the cache folder named by seed and count.
    root = demo.all_sources()[0].root
    assert root.parent == tmp_path / "cache" / "synthetic"
    assert root.name.startswith(f"{demo.synthetic.seed}-{demo.synthetic.n_scenes}")
    assert demo.work_dir() == tmp_path / "out.work"
    big = b.resolve_plan("synthetic-50k", out=tmp_path / "o")
    assert big.synthetic.n_scenes == 2400 and big.synthetic.n_frames == 24
    cfg = big.dataset_config()
    assert cfg.total == 50_000 and cfg.media.mode == "embed"
    assert big.all_sources()[0].name == "synthetic"


def test_full_preset_needs_sources(tmp_path):
    with pytest.raises(b.PlanError, match="no sources"):
        b.resolve_plan("full", out=tmp_path)
    plan = b.resolve_plan("full", out=tmp_path, sources={"scannet": str(tmp_path)})
    assert [(s.name, s.root) for s in plan.all_sources()] == [("scannet", tmp_path)]
    assert plan.runner.kind == "processes"


def test_config_layers_over_preset_and_anchors_paths(tmp_path):
    cfg = tmp_path / "sub" / "plan.yaml"
    cfg.parent.mkdir()
    cfg.write_text(yaml.safe_dump({"sources": [{"name": "scannet", "root": "data/scannet"}],
                                   "runner": {"max_workers": 3}, "out": "built"}))
    plan = b.resolve_plan("full", cfg)
    assert plan.sources[0].root == cfg.parent.resolve() / "data/scannet"  # relative to the file
    assert plan.out == cfg.parent.resolve() / "built"
    assert plan.runner.kind == "processes" and plan.runner.max_workers == 3  # deep merge keeps the preset's kind
    plan = b.resolve_plan("full", cfg, seed=9, out=tmp_path / "x", overrides={"runner": {"kind": "threads"}})
    assert (plan.seed, plan.out, plan.runner.kind, plan.runner.max_workers) == (9, tmp_path / "x", "threads", 3)


@pytest.mark.parametrize(
    "text, match",
    [
        ("sources: [", "not valid YAML"),
        ("- 1\n- 2\n", "expected a mapping"),
        ("sources: [{name: scannet, root: /x}]\nbogus: 1\n", "bogus"),
        ("sources: [{name: kinect, root: /x}]\n", "kinect"),
        ("sources: [{name: scannet, root: /x}]\nrunner: {kind: threads, address: 'tcp://h:1'}\n", "address"),
        ("sources: [{name: scannet, root: /x}]\ndataset: nosuchmix\n", "nosuchmix"),
        ("sources: [{name: scannet, root: /x}]\nquestions: {max_per_subtask: 3, bogus_key: 1}\n", r"questions\.bogus_key"),
        ("sources: [{name: scannet, root: /x}]\nquestions: {object_count: {max_count: many}}\n", r"questions\.object_count\.max_count = 'many'"),
        # A typo'd key is named with the nearest known one, beside it or one level down.
        ("synthetic: {n_scnes: 3}\n", r"bad\.yaml: unknown key 'synthetic\.n_scnes'; did you mean 'synthetic\.n_scenes'\?$"),
        ("n_scnes: 3\n", r"bad\.yaml: unknown key 'n_scnes'; did you mean 'synthetic\.n_scenes'\?$"),
        ("sources: [{name: scannet, root: /x}]\nrunner: {max_worker: 2}\n", r"did you mean 'runner\.max_workers'\?$"),
        ("sources: [{name: scannet, root: /x}]\nquestions: {scene_frame: 8}\n", r"did you mean 'questions\.scene_frames'\?$"),
        ("sources: [{name: scannet, root: /x}]\ndataset_overrides: {totl: 8}\n", r"did you mean 'dataset_overrides\.total'\?$"),
        ("sources: [{name: scannet, rot: /x}]\n", r"unknown key 'sources\.0\.rot'; did you mean 'sources\.0\.root'\?$"),
        ("sources: [{name: scannet, root: /x}]\nzzz: 1\n", r"unknown key 'zzz'; the keys there are: allow_partial, code_version"),
        ("sources: [{name: scannet, root: /x}]\nquestions: {max_count: 5}\n", r"questions\.max_count is now questions\.object_count\.max_count"),
        ("sources: [{name: scannetpp, root: /x, options: {frames: sens}}]\n", "source scannetpp: frames"),
        ("sources: [{name: vsi-meta, root: /x, options: {frame_stride: 2}}]\n", "source vsi-meta: frame_stride"),
    ],
)
def test_bad_plans_name_the_file_and_problem(tmp_path, text, match):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    with pytest.raises(b.PlanError, match=match) as err:
        b.resolve_plan(None, cfg, out=tmp_path / "o")
    assert "bad.yaml" in str(err.value) or "dataset config" in str(err.value)


def test_a_plans_dataset_overrides_merge_into_its_mix_like_every_config(tmp_path):
    """One merge rule: a preset, the user's file and the options layer key by key, and so do the
    plan's `dataset_overrides` over its mix; `null` leaves a table's entry out."""
    from numerical3d.pipeline.config import load_mix

    cfg = tmp_path / "plan.yaml"
    cfg.write_text("dataset_overrides: {media: {mode: reference}, splits: {validation: null}}\n")
    plan = b.resolve_plan("demo", cfg, out=tmp_path / "o", overrides={"dataset_overrides": {"total": 40}})
    demo = load_mix("demo")
    assert plan.dataset_overrides == {"media": {"mode": "reference"}, "splits": {"validation": None}, "total": 40}
    assert plan.dataset_config() == demo.model_copy(update={
        "total": 40, "splits": {"train": 0.8}, "media": demo.media.model_copy(update={"mode": "reference"})})


def test_unknown_preset_lists_presets(tmp_path):
    with pytest.raises(b.PlanError, match="demo, full, paper, synthetic-50k"):
        b.resolve_plan("huge", out=tmp_path)


def test_plan_round_trips_through_json(tmp_path):
    plan = b.resolve_plan("demo", out=tmp_path / "o")
    path = b.write_plan(plan, tmp_path / "work")
    assert b.load_plan(path) == plan
    assert json.loads(path.read_text())["dataset"] == "demo"


def test_question_config_is_validated_by_pydantic(tmp_path):
    cfg = tmp_path / "q.yaml"
    cfg.write_text(yaml.safe_dump({"sources": [{"name": "scannet", "root": str(tmp_path)}], "seed": 5, "questions": {
        "subtasks": ["object_count"], "ignore_labels": ["wall"], "rel_direction": {"levels": ["easy"]}, "seed": 99}}))
    q = b.resolve_plan(None, cfg, out=tmp_path / "o").scene.question_config
    assert q.subtasks == ("object_count",) and q.ignore_labels == frozenset({"wall"})
    assert q.section("rel_direction").levels == ("easy",) and q.seed == 5  # the plan's seed wins


def test_source_options_and_label_maps_are_anchored_and_keyed(tmp_path):
    cfg = tmp_path / "plan.yaml"
    cfg.write_text(yaml.safe_dump({"sources": [{"name": "scannet", "root": "scans",
                                                "options": {"frame_stride": 2, "labels": "labels.tsv"}}]}))
    plan = b.resolve_plan(None, cfg, out=tmp_path / "o")
    assert plan.sources[0].options == {"frame_stride": 2, "labels": str(tmp_path / "labels.tsv")}
    d = _scene(tmp_path)
    (tmp_path / "labels.tsv").write_text("raw_category\tcategory\nchair\tchair\n")
    job = b.SceneJob(SceneRef("scannet", d.name, str(d), str(tmp_path)), plan.sources[0].options)
    k = scene_key(job, plan.scene)
    assert scene_key(b.SceneJob(job.ref, {"frame_stride": 2}), plan.scene) != k
    (tmp_path / "labels.tsv").write_text("raw_category\tcategory\nchair\tseat\n")
    assert scene_key(job, plan.scene) != k  # a changed label map invalidates the scene's result


def test_retry_delays_are_exponential():
    assert b.RetryPolicy(retries=4, delay_s=0.5, backoff=2).delays() == [0.5, 1.0, 2.0, 4.0]
    assert b.RetryPolicy(retries=0).delays() == []


def _scene(tmp_path: Path) -> Path:
    d = tmp_path / "scene0001_00"
    (d / "pose").mkdir(parents=True)
    (d / "a.txt").write_text("one")
    (d / "pose" / "0.txt").write_text("1 0 0 0")
    return d


def test_fingerprint_tracks_size_mtime_and_content(tmp_path):
    d = _scene(tmp_path)
    stat0, content0 = fingerprint(d, "stat"), fingerprint(d, "content")
    assert fingerprint(d, "stat") == stat0
    st = os.stat(d / "a.txt")
    os.utime(d / "a.txt", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert fingerprint(d, "stat") != stat0  # touched
    assert fingerprint(d, "content") == content0  # same bytes
    (d / "a.txt").write_text("two")  # same size, new bytes
    assert fingerprint(d, "content") != content0
    (d / "pose" / "1.txt").write_text("x")  # a new file
    assert fingerprint(d, "content") != fingerprint(_scene(tmp_path / "other"), "content")


def test_scene_key_depends_on_inputs_settings_and_code(tmp_path):
    d = _scene(tmp_path)
    job = b.SceneJob(SceneRef("scannet", d.name, str(d), str(tmp_path)))
    base = b.resolve_plan(None, _plan_yaml(tmp_path), out=tmp_path / "o")
    k = scene_key(job, base.scene)
    assert scene_key(job, base.scene) == k
    assert scene_key(job, base.model_copy(update={"seed": 1}).scene) != k
    assert scene_key(job, base.model_copy(update={"questions": {"max_per_subtask": 8}}).scene) != k
    assert scene_key(job, base.model_copy(update={"code_version": "v2"}).scene) != k
    # Assembly-only settings (the dataset mix) do not invalidate scene results.
    assert scene_key(job, base.model_copy(update={"dataset_overrides": {"total": 7}}).scene) == k
    (d / "a.txt").write_text("changed")
    assert scene_key(job, base.scene) != k


def _plan_yaml(tmp_path: Path) -> Path:
    p = tmp_path / "plan.yaml"
    p.write_text(yaml.safe_dump({"sources": [{"name": "scannet", "root": str(tmp_path)}],
                                 "dataset": "demo", "code_version": "v1"}))
    return p


def test_code_version_hashes_code_files():
    v = content_hash()
    assert len(v) == 16 and int(v, 16) >= 0


def test_content_hash_ignores_the_commands_and_the_site(tmp_path, monkeypatch):
    from numerical3d.pipeline import manifest

    files = {"pipeline/stage.py": "A = 1\n", "pipeline/cli/cmd.py": "", "pipeline/browse/site.py": "",
             "templates/site/index.html.j2": "", "templates/q.j2": "q"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.setattr(manifest, "REPO_ROOT", tmp_path)
    before = manifest.content_hash.__wrapped__()
    for rel in ("pipeline/cli/cmd.py", "pipeline/browse/site.py", "templates/site/index.html.j2"):
        (tmp_path / rel).write_text("changed")
    assert manifest.content_hash.__wrapped__() == before
    (tmp_path / "templates/q.j2").write_text("other question")
    assert manifest.content_hash.__wrapped__() != before


@given(st.lists(st.sampled_from(["scannet", "arkitscenes", "vsi-meta"]), min_size=1, max_size=3, unique=True),
       st.integers(min_value=0, max_value=2**31))
@settings(max_examples=30, deadline=None)
def test_source_overrides_parse_into_entries(names, seed):
    plan = b.resolve_plan("full", sources={n: f"/data/{n}" for n in names}, seed=seed, out="/tmp/o")
    assert sorted((s.name, str(s.root)) for s in plan.sources) == sorted((n, f"/data/{n}") for n in names)
    assert plan.seed == seed


def test_runner_selection():
    from prefect.task_runners import ThreadPoolTaskRunner
    from prefect_dask import DaskTaskRunner

    assert isinstance(make_task_runner(RunnerConfig()), ThreadPoolTaskRunner)
    assert not RunnerConfig().scene_processes
    # processes: a thread per worker, each handing its scenes to a scene process of its own
    r = make_task_runner(RunnerConfig(kind="processes", max_workers=2))
    assert isinstance(r, ThreadPoolTaskRunner) and r._max_workers == 2
    assert RunnerConfig(kind="processes").scene_processes
    d = make_task_runner(RunnerConfig(kind="dask", address="tcp://127.0.0.1:8786"))
    assert isinstance(d, DaskTaskRunner) and d.address == "tcp://127.0.0.1:8786"
    local = make_task_runner(RunnerConfig(kind="dask", max_workers=2))
    assert local.cluster_kwargs["n_workers"] == 2
    assert local.cluster_class == "numerical3d.prefect_engine.local_cluster"
    assert describe(RunnerConfig(kind="threads", max_workers=3)) == "threads (3 workers)"
    with pytest.raises(ValueError, match="address"):
        RunnerConfig(kind="threads", address="tcp://x:1")
    with pytest.raises(ValueError):
        RunnerConfig(kind="gpu")


def test_cli_resolves_the_plan_once_and_hands_the_flow_the_plan(tmp_path, monkeypatch):
    """With a Prefect API configured, `numerical3d build` runs the flow by default; it resolves the
    plan (reading the mix once) and gives the flow the resolved plan as JSON, not the arguments to
    resolve it again."""
    from contextlib import nullcontext

    from typer.testing import CliRunner

    import numerical3d.cli as cli
    import numerical3d.flows as flows
    import numerical3d.pipeline.build.plan as plan_module
    import numerical3d.prefect_engine as prefect_engine

    for var in ("PREFECT_SERVER_ANALYTICS_ENABLED", "DO_NOT_TRACK", "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS",
                "PREFECT_LOGGING_LEVEL", "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "PREFECT_API_URL"):
        monkeypatch.setenv(var, os.environ.get(var, ""))  # the CLI sets them for Prefect; restored after
        if not os.environ[var]:
            monkeypatch.delenv(var)  # unset as before (an empty value is a setting Prefect rejects)
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")  # configured: no server is started
    monkeypatch.setattr(prefect_engine, "ApiWatch", lambda *args: nullcontext())
    reads: list[str] = []
    real_load = plan_module.load_mix
    monkeypatch.setattr(plan_module, "load_mix", lambda name, **kw: reads.append(name) or real_load(name, **kw))
    calls: list[tuple[dict, int]] = []

    def build(**kwargs):
        calls.append((kwargs, len(reads)))
        return b.BuildSummary(out="o", work="o.work", scenes={}, quarantine=[], items_per_source_subtask={}, drops=[],
                              dropped=[], candidates=0, selected=0, card=None, manifest=None)

    monkeypatch.setattr(flows, "build", build)
    res = CliRunner().invoke(cli.app, ["build", "--preset", "demo", "--out", str(tmp_path / "o"), "--seed", "3", "--json"])
    assert res.exit_code == 0, res.output
    (kwargs, reads_before_flow), = calls
    assert set(kwargs) == {"plan", "site", "on_event"} and reads_before_flow == 1
    assert json.loads(json.dumps(kwargs["plan"])) == kwargs["plan"]  # a JSON flow parameter
    assert b.BuildPlan.model_validate(kwargs["plan"]) == b.resolve_plan("demo", out=tmp_path / "o", seed=3)


def test_without_a_prefect_api_the_build_runs_on_the_plain_executor_and_says_how_to_get_prefect(tmp_path, monkeypatch):
    """No API configured: the default engine is the plain executor (no temporary server), and one
    line says how to get Prefect's UI and history."""
    from typer.testing import CliRunner

    import numerical3d.cli as cli
    import numerical3d.plain_build as plain_build

    for name in ("PREFECT_API_URL", "PREFECT_PROFILE", "PREFECT_PROFILES_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)  # no ./prefect.toml
    calls: list[tuple[b.BuildPlan, str | None]] = []

    def run_build(plan, on_event, site):
        calls.append((plan, site))
        return b.BuildSummary(out="o", work="o.work", scenes={"done": 1}, quarantine=[], items_per_source_subtask={},
                              drops=[], dropped=[], candidates=1, selected=1, card=None, manifest=None)

    monkeypatch.setattr(plain_build, "run_build", run_build)
    res = CliRunner().invoke(cli.app, ["build", "--preset", "demo", "--out", str(tmp_path / "o"), "--workers", "2",
                                       "--json"])
    assert res.exit_code == 0, res.output
    [(plan, site)] = calls
    assert plan.runner.max_workers == 2 and site is None
    assert json.loads(res.stdout)["scenes"] == {"done": 1}
    [note] = res.stderr.strip().splitlines()
    assert "no Prefect API configured" in note and "--engine prefect" in note and "prefect server start" in note
