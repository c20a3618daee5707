"""The subtask registry: what it holds for every subtask, and a question type added from outside the project.

The throwaway subtask `object_height` lives in a temporary folder as a module, its template and a
`*.dist-info/entry_points.txt` naming it in the `numerical3d.subtasks` group, the way a separately
installed distribution registers one. No file of the project is edited: putting the folder on the path
is all it takes for it to be generated, sampled, drawn on the site and graded.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from distribution import write_distribution
from pydantic import TypeAdapter

import numerical3d.pipeline.questions.registry as reg
from numerical3d.pipeline.browse.evidence import DRAWINGS
from numerical3d.pipeline.manifest import content_hash
from numerical3d.pipeline.questions.common import QuestionConfig
from numerical3d.pipeline.questions.registry import SubtaskError, registry
from numerical3d.sources.scene import OrientedBox, Scene, SceneObject

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from numerical3d.cli import main; main()"]
PLUGIN = "object_height"

PLUGIN_MODULE = '''"""object_height: how tall a single-instance object's box is, in centimetres."""

from pathlib import Path
from typing import Iterator

import numpy as np

from numerical3d.pipeline.questions.common import Context, numeric_items
from numerical3d.pipeline.questions.gates import value_range
from numerical3d.pipeline.questions.registry import SectionConfig, Subtask

NAME = "object_height"


class ObjectHeightConfig(SectionConfig):
    min_height: float = 5.0  # cm


def generate(ctx: Context) -> Iterator:
    own = ctx.config.section(NAME)
    rng = ctx.rng(NAME)
    labels = sorted(ctx.unique)
    for i in rng.permutation(len(labels)):
        obj = ctx.unique[labels[i]]
        height = float(np.ptp(obj.box.corners()[:, 2])) * 100.0
        if not ctx.drops.check(NAME, value_range(height, own.min_height, name="height")):
            continue
        yield from numeric_items(ctx, NAME, rng, value=height, unit="cm", decimals=1, qctx={"label": obj.label},
                                 params={"object": obj.instance_id}, objects=[obj], frames=None,
                                 rule={"name": "vertical_box_extent", "min_height_cm": own.min_height})


def draw(b) -> None:
    for o in b.objects():
        b.highlight(o, "a")
        height = float(np.ptp(o.corners[:, 2])) * 100.0
        b.facts.append(f"vertical extent of the recorded box: {height:.1f} cm")
        b.check("height (cm)", height, b.value)


SUBTASK = Subtask(NAME, order=1000, level="scene", needs_frames=False, generate=generate, config=ObjectHeightConfig,
                  evidence=draw, templates=Path(__file__).parent / "templates")
'''

PLUGIN_TEMPLATE = """{% block paraphrase_1 %}How tall is the {{ label }}, in centimeters?{% endblock %}
{% block paraphrase_2 %}From the floor side of the {{ label }} to its top, how many centimeters is it?{% endblock %}
"""


def write_plugin(root: Path) -> Path:
    """The throwaway subtask as a separately installed distribution would lay it out under `root`."""
    write_distribution(root, "n3d_height_plugin", PLUGIN_MODULE, {"numerical3d.subtasks": {PLUGIN: "n3d_height_plugin"}})
    (root / "n3d_height_plugin" / "templates" / "questions").mkdir(parents=True)
    (root / "n3d_height_plugin" / "templates" / "questions" / f"{PLUGIN}.j2").write_text(PLUGIN_TEMPLATE)
    return root


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The registry with the throwaway subtask on the path; the plain registry again afterwards."""
    root = write_plugin(tmp_path / "plugin")
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    registry.cache_clear()
    yield root
    monkeypatch.undo()
    sys.modules.pop("n3d_height_plugin", None)
    registry.cache_clear()
    content_hash.cache_clear()  # it covers the registered subtasks' code


def crafted_scene() -> Scene:
    """Four single-instance objects of known heights (box z sizes 0.8, 1.2, 0.45, 2.0 m)."""
    heights = {"bed": 0.8, "wardrobe": 2.0, "chair": 1.2, "table": 0.45}
    objs = [SceneObject(i, lab, lab, OrientedBox(np.array([i * 1.5, 0.0, h / 2]), np.array([0.6, 0.5, h]), np.eye(3)))
            for i, (lab, h) in enumerate(heights.items())]
    return Scene("crafted", "vsi-meta", objs, room_size=20.0)


# --- the registry as the project ships it --------------------------------------------------------------


# The generation order of the released subtasks: items are generated subtask by subtask in this order,
# so changing it changes every shard. A subtask added later needs no line here: it must come after them.
RELEASED_ORDER = {"object_count": 10, "object_size": 20, "room_size": 30, "abs_distance": 40, "camera_distance": 50,
                  "grounding_3d": 60, "grounding_2d": 70, "rel_distance": 80, "rel_direction": 90,
                  "appearance_order": 100, "route_plan": 110, "position_relation": 120}


def test_generation_order_is_the_order_the_shards_were_built_in():
    orders = {name: sub.order for name, sub in registry().items()}
    assert {name: orders.get(name) for name in RELEASED_ORDER} == RELEASED_ORDER
    assert all(order > max(RELEASED_ORDER.values()) for name, order in orders.items() if name not in RELEASED_ORDER)
    assert list(registry()) == sorted(orders, key=lambda name: (orders[name], name))


@pytest.mark.parametrize("name", list(registry()))
def test_every_subtask_is_complete(name):
    sub = registry()[name]
    assert sub.name == name and callable(sub.generate)
    assert sub.level == "scene" or sub.needs_frames  # a frame-level question is about a frame
    assert callable(DRAWINGS[name])  # every bundled subtask draws its own evidence on the site
    sub.config()  # its section's defaults are valid
    assert (REPO / "templates" / sub.template).is_file()


@pytest.mark.parametrize("mix", ["default", "demo"])
def test_the_bundled_mixes_give_every_subtask_a_quota(mix):
    """Else the bundled presets would refuse to build (a generated subtask without a quota)."""
    from numerical3d.pipeline.config import load_mix

    assert set(load_mix(mix).quotas) == set(registry())


def test_a_plan_generating_a_subtask_without_quota_is_refused_naming_it(tmp_path):
    others = [n for n in registry() if n not in ("object_count", "rel_distance")]
    plan = {"sources": [{"name": "scannet", "root": str(tmp_path)}], "dataset": "demo",  # `null` leaves a quota out
            "dataset_overrides": {"quotas": {n: None for n in others}}}
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    res = subprocess.run([*CLI, "build", "--config", str(tmp_path / "plan.yaml"), "--engine", "plain", "--out",
                          str(tmp_path / "out")], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "COLUMNS": "400"})
    assert res.returncode != 0 and f"gives no quota to subtask(s) {', '.join(others)}" in res.stderr
    plan["questions"] = {"subtasks": ["object_count", "rel_distance"]}  # generating only the quoted ones is fine
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    from numerical3d.pipeline.build import resolve_plan

    assert resolve_plan(None, tmp_path / "plan.yaml", out=tmp_path / "out").scene.question_config.subtasks == (
        "object_count", "rel_distance")


def test_training_vsi_types_mirror_the_registry():
    """training may not import pipeline, so it keeps VSI-Bench's names as data; they must agree."""
    from numerical3d.training.evaluate import VSI_QUESTION_TYPES

    assert VSI_QUESTION_TYPES == {n: s.vsibench for n, s in registry().items() if s.vsibench}


def test_vsi590k_ingest_maps_onto_registered_subtasks():
    from numerical3d.pipeline.ingest.vsi590k import QUESTION_TYPES

    assert {subtask for subtask, _ in QUESTION_TYPES.values()} <= set(registry())


@pytest.mark.parametrize("old, name, new", [(old, s.name, new) for s in registry().values()
                                            for old, new in s.config.RENAMED.items()])
def test_a_flat_key_of_an_old_plan_names_its_new_place(old, name, new):
    default = getattr(registry()[name].config(), new)
    with pytest.raises(ValueError, match=rf"questions\.{old} is now questions\.{name}\.{new}"):
        TypeAdapter(QuestionConfig).validate_python({old: default})
    moved = TypeAdapter(QuestionConfig).validate_python({name: {new: default}})
    assert moved.section(name) == registry()[name].config()


def test_a_section_reaches_its_generator():
    q = TypeAdapter(QuestionConfig).validate_python({"subtasks": ["object_count"], "object_count": {"max_count": 2}})
    assert q.section("object_count").max_count == 2 and q.section("rel_distance").margin == 0.15
    with pytest.raises(ValueError, match=r"unknown key 'questions\.object_count\.max_cont'; did you mean 'questions\.object_count\.max_count'\?"):
        TypeAdapter(QuestionConfig).validate_python({"object_count": {"max_cont": 2}})
    with pytest.raises(ValueError, match="unknown subtask 'object_cont'"):
        QuestionConfig(sections={"object_cont": {}})


def test_two_subtasks_with_one_order_are_refused(monkeypatch):
    twin = registry()["object_size"]
    clash = reg.Subtask("object_size_twin", order=twin.order, level="scene", needs_frames=False, generate=twin.generate)
    monkeypatch.setattr(type(reg.KIND), "found", lambda self: iter([(twin, "here"), (clash, "there")]))
    registry.cache_clear()
    try:
        with pytest.raises(SubtaskError, match="object_size, object_size_twin share an order"):
            registry()
    finally:
        monkeypatch.undo()
        registry.cache_clear()


def test_a_subtask_with_an_unknown_vsibench_type_is_refused():
    with pytest.raises(SubtaskError, match="'object_heights' is not a VSI-Bench question type"):
        reg.Subtask("x", order=1, level="scene", needs_frames=False, generate=iter, vsibench="object_heights")


def test_cli_help_lists_the_registered_subtasks(tmp_path):
    def help_text(*path: str) -> str:
        env = {**os.environ, "COLUMNS": "400", "PYTHONPATH": os.pathsep.join([*path, os.environ.get("PYTHONPATH", "")])}
        res = subprocess.run([*CLI, "questions", "--help"], capture_output=True, text=True, cwd=REPO, env=env)
        assert res.returncode == 0, res.stderr
        return res.stdout

    plain = help_text()
    assert all(name in plain for name in registry()) and PLUGIN not in plain
    assert PLUGIN in help_text(str(write_plugin(tmp_path / "plugin")))


# --- a subtask added from outside -----------------------------------------------------------------------


def test_a_plugin_subtask_is_generated_sampled_drawn_and_graded(plugin):
    from numerical3d.pipeline.browse.evidence import evidence
    from numerical3d.pipeline.config import DatasetMix
    from numerical3d.pipeline.questions import DropCounter, generate_scene
    from numerical3d.pipeline.sampling import sample
    from numerical3d.pipeline.scene_geometry import scene_geometry
    from numerical3d.verifiers import verify
    from numerical3d.verifiers.spec import canonical_completion

    assert list(registry())[-1] == PLUGIN and not registry()[PLUGIN].needs_frames
    scene = crafted_scene()
    config = TypeAdapter(QuestionConfig).validate_python({"subtasks": ["object_size", PLUGIN],
                                                          PLUGIN: {"min_height": 50.0}})
    drops = DropCounter()
    items = generate_scene(scene, config, drops)
    mine = [it for it in items if it.subtask == PLUGIN]
    # generated: one per object at least 50 cm tall (the section's threshold), self-checked by its verifier
    assert sorted(it.provenance["value"] for it in mine) == pytest.approx([80.0, 120.0, 200.0])
    assert drops.reasons(PLUGIN) == {"height_below_min": 1} and drops.kept[PLUGIN] == 3
    assert mine[0].question.startswith(("How tall is the", "From the floor side of the"))
    # graded: the canonical answer scores 1, a wrong one less
    completion = canonical_completion(mine[0].verifier)
    right = verify(mine[0].verifier, completion, 100.0)
    doubled = completion.replace(mine[0].answer, f"{2 * mine[0].provenance['value']:.1f} cm")
    wrong = verify(mine[0].verifier, doubled, 100.0)
    assert right.error == 0 and right.reward == pytest.approx(1.0) and wrong.error > 0.5 and wrong.reward < 0.5
    # sampled: its quota is served like any other
    cfg = DatasetMix(total=4, quotas={"object_size": 1.0, PLUGIN: 1.0})
    chosen, report = sample(items, cfg, seed=0)
    assert report.subtasks[PLUGIN].selected == 2 and sum(it.subtask == PLUGIN for it in chosen) == 2
    # drawn: the site's evidence comes from the plugin's own function
    ev = evidence(mine[0], scene_geometry(scene, []))
    assert any(f.startswith("vertical extent of the recorded box") for f in ev.facts) and not ev.warnings


def test_a_plugin_subtask_is_part_of_the_code_version(plugin):
    """The scene cache is keyed by the code version: editing a plugin's template must re-run scenes."""
    content_hash.cache_clear()
    with_plugin = content_hash()
    template = plugin / "n3d_height_plugin" / "templates" / "questions" / f"{PLUGIN}.j2"
    template.write_text(template.read_text().replace("How tall", "How high"))
    content_hash.cache_clear()
    edited = content_hash()
    registry.cache_clear()
    sys.path.remove(str(plugin))
    content_hash.cache_clear()
    try:
        assert len({with_plugin, edited, content_hash()}) == 3
    finally:
        sys.path.insert(0, str(plugin))
        content_hash.cache_clear()


@pytest.mark.slow
def test_a_plugin_subtask_goes_through_build_site_and_score(plugin, tmp_path):
    """The user path, in subprocesses: a build without a quota for it is refused naming it; with one, the
    dataset has its items, the site draws them and `score` grades them."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin), os.environ.get("PYTHONPATH", "")]),
           "NUMERICAL3D_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)

    res = cli("synth", str(tmp_path / "scenes"), "-n", "2", "--frames", "8", "--width", "160", "--height", "120")
    assert res.returncode == 0, res.stderr
    plan = {"seed": 0, "sources": [{"name": "scannet", "root": str(tmp_path / "scenes")}], "dataset": "demo",
            "dataset_overrides": {"total": 40}, "runner": {"kind": "threads", "max_workers": 1},
            "questions": {"subtasks": ["object_size", PLUGIN]}}
    (tmp_path / "bundled.yaml").write_text(yaml.safe_dump(plan))
    res = cli("build", "--config", "bundled.yaml", "--engine", "plain", "--out", "refused")
    assert res.returncode != 0 and f"gives no quota to subtask(s) {PLUGIN}" in res.stderr
    assert not (tmp_path / "refused").exists()

    (tmp_path / "mix.yaml").write_text(yaml.safe_dump({"total": 40, "quotas": {"object_size": 1, PLUGIN: 1}}))
    plan.update(dataset="mix.yaml", dataset_overrides={})
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    res = cli("build", "--config", "plan.yaml", "--engine", "plain", "--out", "ds", "--site", "site", "--json")
    assert res.returncode == 0, res.stderr
    from numerical3d.pipeline.shards import read_items

    items = [it for it in read_items(tmp_path / "ds") if it.subtask == PLUGIN]
    assert items
    page = (tmp_path / "site" / "items" / items[0].id[:2] / f"{items[0].id}.html").read_text()
    assert "vertical extent of the recorded box" in page

    with open(tmp_path / "pred.jsonl", "w") as f:
        for it in items:
            f.write(json.dumps({"id": it.id, "prediction": f"<answer>{it.answer}</answer>"}) + "\n")
    res = cli("score", "pred.jsonl", "--dataset", "ds", "--out", "scores.json")
    assert res.returncode == 0, res.stderr
    scores = json.loads((tmp_path / "scores.json").read_text())["subtasks"]
    assert scores[PLUGIN]["n"] == len(items) and scores[PLUGIN]["value"] == pytest.approx(1.0)
