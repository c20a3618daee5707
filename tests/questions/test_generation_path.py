"""One generation path: `numerical3d questions` and the build give the same items for the same scenes
and seed; the per-scene batched self-check admits exactly what checking candidates one by one admits;
the scene's distance matrix holds exact box distances; templates print context values verbatim."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from numerical3d import verifiers
from numerical3d.pipeline.questions import DropCounter, QuestionConfig, generate_items, process_scene
from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.generate import generate_scene
from numerical3d.pipeline.questions.registry import registry
from numerical3d.pipeline.templating import Templates
from numerical3d.sources.scene import OrientedBox, Scene, SceneError, SceneObject

# Labels as a model or a user may write them: braces, quotes, unicode; whitespace runs collapse.
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp")), min_size=1, max_size=12)


def test_questions_command_and_build_give_the_same_items(synthetic_root, tmp_path):
    """The same synthetic scenes through `numerical3d questions` and through the build's per-scene stage
    (`pipeline.build.scenes.generate_items` on each scene the build enumerates and loads): the same ids,
    text, answers, options and multiple-choice letters, scene by scene."""
    from numerical3d.pipeline.build import BuildPlan, enumerate_plan
    from numerical3d.pipeline.build.scenes import generate_items as build_items
    from numerical3d.pipeline.build.scenes import load_scene
    from numerical3d.pipeline.cli import app

    out = tmp_path / "items.jsonl"
    res = CliRunner().invoke(app, ["questions", "synthetic", str(synthetic_root), "--out", str(out), "--seed", "5"],
                             terminal_width=200)
    assert res.exit_code == 0, res.output
    cli = [json.loads(line) for line in out.read_text().splitlines()]
    plan = BuildPlan(seed=5, sources=[{"name": "synthetic", "root": synthetic_root}], out=tmp_path / "unused")
    built = []
    for job in enumerate_plan(plan):
        items, _ = build_items(load_scene(job.source(), job.ref), plan.scene)
        built += [json.loads(json.dumps(it.to_dict())) for it in items]
    assert len({r["scene_id"] for r in built}) >= 2  # letters of a later scene must not depend on earlier ones
    assert sum(1 for r in built if r["options"]) >= 10
    key = lambda r: r["scene_id"]  # noqa: E731 (scene order may differ; items within a scene may not)
    assert sorted(cli, key=key) == sorted(built, key=key)


def box(x, y, z=0.5, size=(0.4, 0.4, 1.0), yaw=0.0):
    c, s = np.cos(yaw), np.sin(yaw)
    return OrientedBox(np.array([x, y, z]), np.array(size), np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]))


def crafted_scene(scene_id: str = "crafted") -> Scene:
    rng = np.random.default_rng(4)
    labels = ["bed", "tv", "sofa", "lamp", "door", "desk", "sink", "chair", "chair", "chair", "pillow", "pillow"]
    objs = [SceneObject(i, lab, lab, box(*rng.uniform(-3, 3, 2), size=tuple(rng.uniform(0.2, 1.2, 3)),
                                          yaw=float(rng.uniform(0, np.pi))))
            for i, lab in enumerate(labels)]
    objs.append(SceneObject(len(objs), "cup", "cup", box(objs[0].box.center[0], objs[0].box.center[1], 0.6,
                                                          size=(0.1, 0.1, 0.1))))  # inside the bed: distance 0
    return Scene(scene_id, "vsi-meta", objs, room_size=30.0)


BOX_ONLY = tuple(n for n, s in registry().items() if not s.needs_frames)
MIXED_FORMS = {**QuestionConfig().forms, "object_size": "both", "abs_distance": "mc"}


def test_generate_items_is_generate_scene_per_scene(monkeypatch):
    """With injected self-check failures and an unreadable scene in the run: the items, their order and
    the drop counts of `generate_items` are those of `generate_scene` on each scene alone."""
    scenes: list[Scene | SceneError] = [crafted_scene(f"crafted_{i}") for i in range(4)]
    scenes.insert(2, SceneError("crafted_2x", "unreadable"))
    config = QuestionConfig(subtasks=BOX_ONLY, max_per_subtask=3, forms=MIXED_FORMS)
    every = [it for s in scenes if isinstance(s, Scene) for it in generate_scene(s, replace(config, self_check=False))]
    failing = {key for i, key in enumerate(sorted({repr(it.verifier) for it in every})) if i % 3 == 0}
    fail_specs(monkeypatch, failing)
    want_drops, want = DropCounter(), []
    for s in scenes:
        if isinstance(s, SceneError):
            want_drops.drop("scene", "unreadable_scene")
        else:
            want += generate_scene(s, config, want_drops)
    got_drops = DropCounter()
    got = list(generate_items(scenes, config, got_drops))
    assert [it.to_dict() for it in got] == [it.to_dict() for it in want]
    assert got_drops.to_dict() == want_drops.to_dict()
    assert any(it.options for it in got) and any(r == "self_check_failed" for _, r in got_drops.drops)
    alone = generate_scene(scenes[3], config)  # a scene's items (letters included) ignore the scenes before it
    assert [it.to_dict() for it in alone] == [it.to_dict() for it in got if it.scene_id == scenes[3].scene_id]


def test_a_scene_that_raises_stops_the_run_after_the_scenes_before_it():
    """A generator error surfaces when its scene's turn comes: earlier scenes' items come out first."""
    good = crafted_scene("crafted_ok")
    bad = replace(crafted_scene(), scene_id="crafted_bad", objects=[None])  # type: ignore[list-item]
    out = []
    with pytest.raises(AttributeError):
        for it in generate_items([good, bad, good], QuestionConfig(subtasks=BOX_ONLY)):
            out.append(it)
    assert out and {it.scene_id for it in out} == {"crafted_ok"}
    assert len(out) == len(generate_scene(good, QuestionConfig(subtasks=BOX_ONLY)))


def fail_specs(monkeypatch, failing: set[str]) -> list[int]:
    """Make `verifiers.verify_batch` fail the specs whose repr is in `failing`; returns the batch sizes seen."""
    real = verifiers.verify_batch
    calls: list[int] = []

    def verify_batch(specs, completions, k, **kw):
        calls.append(len(specs))
        results = real(specs, completions, k, **kw)
        for spec, res in zip(specs, results):
            if repr(spec) in failing:
                res.error, res.reward = 1.0, 0.0
        return results

    monkeypatch.setattr(verifiers, "verify_batch", verify_batch)
    return calls


def one_by_one(scene: Scene, config: QuestionConfig, fails) -> tuple[list, DropCounter]:
    """The reference semantics: each subtask's generator asked one candidate at a time, failing ones
    counted and skipped, until `QuestionConfig.scene_cap` are kept."""
    drops = DropCounter()
    ctx = Context(scene, replace(config, self_check=False), drops)
    out = []
    for name in config.subtasks:
        kept = 0
        gen = registry()[name].generate(ctx)
        while kept < config.scene_cap(name):  # like islice: never asks for one more
            it = next(gen, None)
            if it is None:
                break
            if fails(it):
                drops.drop(name, "self_check_failed")
                continue
            drops.keep(name)
            out.append(it)
            kept += 1
    return out, drops


@pytest.mark.parametrize("cap", [1, 3, 12])
def test_batched_self_check_admits_what_a_one_by_one_check_admits(monkeypatch, cap):
    """Inject failures: every third distinct spec fails its check; the kept items, their order and the
    drop counts must be those of checking each candidate as it is generated."""
    config = QuestionConfig(subtasks=BOX_ONLY, max_per_subtask=cap,
                            forms={**QuestionConfig().forms, "object_size": "both"})
    every = generate_scene(crafted_scene(), QuestionConfig(subtasks=BOX_ONLY, self_check=False, max_per_subtask=999))
    failing = {key for i, key in enumerate(sorted({repr(it.verifier) for it in every})) if i % 3 == 0}
    calls = fail_specs(monkeypatch, failing)
    drops = DropCounter()
    got = generate_scene(crafted_scene(), config, drops)
    want, want_drops = one_by_one(crafted_scene(), config, lambda it: repr(it.verifier) in failing)
    assert [it.to_dict() for it in got] == [it.to_dict() for it in want]
    assert drops.to_dict() == want_drops.to_dict()
    assert got and any(r == "self_check_failed" for _, r in drops.drops)
    assert len(calls) < len(got)  # batched, not one call per item


def test_each_distinct_spec_is_verified_once_per_scene(monkeypatch):
    real = verifiers.verify_batch
    seen: list[str] = []

    def verify_batch(specs, completions, k, **kw):
        seen.extend(repr(s) for s in specs)
        return real(specs, completions, k, **kw)

    monkeypatch.setattr(verifiers, "verify_batch", verify_batch)
    # 24 per subtask: enough rel_direction items that classes and letters repeat
    items = generate_scene(crafted_scene(), QuestionConfig(subtasks=BOX_ONLY, forms=MIXED_FORMS, max_per_subtask=24))
    assert len(seen) == len(set(seen)) == len({repr(it.verifier) for it in items})
    assert len(seen) < len(items)  # repeated specs (letters, direction classes) were not verified again


def test_scene_distance_matrix_holds_box_distance_values():
    from numerical3d.pipeline.geometry import box_distance

    ctx = Context(crafted_scene(), QuestionConfig())
    unique = list(ctx.unique.values())
    assert len(unique) >= 5
    for a in unique:
        for b in ctx.objects:
            assert ctx.distance(a, b) == box_distance(a.box, b.box)  # exactly, in this orientation
        for label in ctx.counts:
            assert ctx.label_distance(a, label) == min(box_distance(a.box, o.box) for o in ctx.objects
                                                       if o.label == label)
    assert ctx.distance(ctx.unique["bed"], ctx.unique["cup"]) == 0.0


def test_processed_scene_gives_the_items_of_the_raw_scene():
    """Geometry done up front (`process_scene`) changes no item and no drop count; a scene processed
    with other ignored labels is refused rather than silently giving other questions."""
    config = QuestionConfig(subtasks=BOX_ONLY)
    raw_drops, done_drops = DropCounter(), DropCounter()
    raw = list(generate_items([crafted_scene(), crafted_scene()], config, raw_drops))
    processed = [process_scene(crafted_scene(), config) for _ in range(2)]
    assert all("unique_distances" in vars(p) for p in processed)  # done by processing
    done = list(generate_items(processed, config, done_drops))
    assert raw and [it.to_dict() for it in done] == [it.to_dict() for it in raw]
    assert done_drops.to_dict() == raw_drops.to_dict()
    with pytest.raises(ValueError, match="ignore_labels"):
        list(generate_items(processed, replace(config, ignore_labels=frozenset({"bed"}))))


def test_ids_do_not_depend_on_the_wording(tmp_path):
    """Ids hash the generating parameters, not the paraphrase: a reworded template keeps every id."""
    ours = Templates()
    folder = tmp_path / "questions"
    folder.mkdir()
    folder.joinpath("object_count.j2").write_text("".join(
        f"{{% block paraphrase_{i + 1} %}}Count #{i + 1}: {{{{ plural }}}}?{{% endblock %}}"
        for i in range(ours.n_paraphrases("object_count"))))
    config = QuestionConfig(subtasks=("object_count",))
    plain = generate_scene(crafted_scene(), config)
    reworded = generate_scene(crafted_scene(), replace(config, templates_dir=str(tmp_path)))
    assert plain and [it.id for it in reworded] == [it.id for it in plain]
    assert all(a.question != b.question and "Count #" in b.question for a, b in zip(plain, reworded))


@settings(max_examples=100, deadline=None)
@given(a=TEXT, b=TEXT, options=st.lists(TEXT, min_size=2, max_size=6))
def test_context_values_are_printed_verbatim(a, b, options):
    """Labels with braces, quotes or template syntax are text, never template code."""
    t = Templates()
    for variant in range(t.n_paraphrases("abs_distance")):
        q = t.question("abs_distance", variant, a=a, b=b)
        assert a in q and b in q
    prompt = t.prompt("Which one?", "choice", options=options)
    assert all(f"{letter}. {o}" in prompt for letter, o in zip("ABCDEF", options))


def test_user_template_logic_renders_through_jinja2(tmp_path):
    (tmp_path / "questions").mkdir()
    (tmp_path / "questions" / "object_size.j2").write_text(
        "{% block paraphrase_1 %}{% if label == 'sofa' %}A couch?{% else %}{{ label | upper }} size?{% endif %}"
        "{% endblock %}{% block paraphrase_2 %}{{ label | plural }}{% endblock %}"
        "{% block paraphrase_3 %}{% for w in label %}{{ w }}.{% endfor %}{% endblock %}")
    t = Templates(tmp_path)
    assert [t.question("object_size", 0, label=x) for x in ("sofa", "lamp", "sofa", "bed")] == \
        ["A couch?", "LAMP size?", "A couch?", "BED size?"]
    assert [t.question("object_size", 1, label=x) for x in ("shelf", "lamp")] == ["shelves", "lamps"]
    assert [t.question("object_size", 2, label=x) for x in ("ab", "xyz")] == ["a.b.", "x.y.z."]
    (tmp_path / "questions" / "room_size.j2").write_text(
        "{% block paraphrase_1 %}{% set n = 3 %}{{ n }} rooms{% endblock %}")
    assert Templates(tmp_path).question("room_size", 0) == "3 rooms"


def test_missing_variable_still_names_the_paraphrase():
    t = Templates()
    t.question("abs_distance", 0, a="bed", b="door")
    with pytest.raises(Exception, match="abs_distance.j2 paraphrase 1"):
        t.question("abs_distance", 0, a="bed")
