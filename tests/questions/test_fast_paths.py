"""The speed-ups of item generation change no output: template skeletons render exactly what jinja2
renders, the id hash is `item_id`'s, the batched self-check admits exactly the items a one-by-one
check would, and the per-scene distance matrix holds `box_distance`'s values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import verifiers
from pipeline.items import item_id
from pipeline.questions import DropCounter, QuestionConfig
from pipeline.questions.common import Context, fast_item_id
from pipeline.questions.generate import SUBTASKS, generate_scene
from pipeline.templating import Templates
from sources.scene import OrientedBox, Scene, SceneObject

# Labels as a model or a user may write them: whitespace runs, braces, quotes, unicode, empty.
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
WORDS = st.lists(TEXT, max_size=5)

CONTEXTS = {  # per subtask: which variables are strings and which lists
    "object_count": {"label": TEXT, "plural": TEXT},
    "object_size": {"label": TEXT},
    "room_size": {},
    "abs_distance": {"a": TEXT, "b": TEXT},
    "camera_distance": {"label": TEXT},
    "grounding_3d": {"label": TEXT},
    "grounding_2d": {"label": TEXT},
    "rel_distance": {"reference": TEXT, "candidates": WORDS},
    "rel_direction": {"standing": TEXT, "facing": TEXT, "target": TEXT, "level": TEXT, "classes": WORDS},
    "appearance_order": {"labels": WORDS},
    "route_plan": {"start": TEXT, "facing": TEXT, "goal": TEXT, "steps": WORDS},
    "position_relation": {"a": TEXT, "b": TEXT, "vocabulary": WORDS},
}


def jinja_question(t: Templates, subtask: str, variant: int, context: dict) -> str:
    """The paraphrase rendered by jinja2 itself, as `Templates.question` did before skeletons."""
    tmpl = t.env.get_template(f"questions/{subtask}.j2")
    block = tmpl.blocks[f"paraphrase_{variant + 1}"]
    return " ".join("".join(block(tmpl.new_context(context))).split())


def test_contexts_cover_every_subtask():
    assert set(CONTEXTS) == set(SUBTASKS)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), subtask=st.sampled_from(sorted(CONTEXTS)))
def test_question_skeletons_render_what_jinja_renders(data, subtask):
    t = Templates()
    context = {k: data.draw(s) for k, s in CONTEXTS[subtask].items()}
    for variant in range(t.n_paraphrases(subtask)):
        assert t.question(subtask, variant, **context) == jinja_question(t, subtask, variant, context)
    assert all(p.enabled for p in t.paraphrases(subtask))  # our templates all take the fast path


@settings(max_examples=150, deadline=None)
@given(question=TEXT, kind=st.sampled_from(["numeric", "count", "choice", "direction", "order", "relations",
                                            "grounding"]),
       options=st.none() | st.lists(TEXT, min_size=1, max_size=10), unit=st.sampled_from(["m", "cm", "mm", "m2", "x"]),
       classes=WORDS, vocabulary=WORDS, dims=st.sampled_from([2, 3]))
def test_prompt_skeletons_render_what_jinja_renders(question, kind, options, unit, classes, vocabulary, dims):
    t = Templates()
    ref = t.env.get_template("prompt.j2").render(
        question=question, kind=kind, options=list(options) if options else None, letters="ABCDEFGHIJ",
        unit=unit, classes=classes, vocabulary=vocabulary, dims=dims).strip()
    for _ in range(2):  # the first call compiles the skeleton, the second fills it
        assert t.prompt(question, kind, options=options, unit=unit, classes=classes, vocabulary=vocabulary,
                        dims=dims) == ref


def test_variables_used_beyond_printing_key_the_skeleton(tmp_path):
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
    assert not Templates(tmp_path).paraphrases("room_size")[0].enabled  # assignments: plain jinja2


def test_missing_variable_still_names_the_paraphrase():
    t = Templates()
    t.question("abs_distance", 0, a="bed", b="door")
    with pytest.raises(Exception, match="abs_distance.j2 paraphrase 1"):
        t.question("abs_distance", 0, a="bed")


@settings(max_examples=200, deadline=None)
@given(source=TEXT, scene_id=TEXT, subtask=TEXT,
       params=st.dictionaries(TEXT, st.integers() | st.floats(allow_nan=False) | TEXT | st.lists(st.integers())
                              | st.booleans() | st.none(), max_size=5))
def test_fast_item_id_is_item_id(source, scene_id, subtask, params):
    assert fast_item_id(source, scene_id, subtask, params) == item_id(source, scene_id, subtask, params)


def test_fast_item_id_numpy_params():
    params = {"objects": [np.int64(3), np.int64(5)], "form": "open"}
    assert fast_item_id("s", "x", "abs_distance", params) == item_id("s", "x", "abs_distance", params)


def box(x, y, z=0.5, size=(0.4, 0.4, 1.0), yaw=0.0):
    c, s = np.cos(yaw), np.sin(yaw)
    return OrientedBox(np.array([x, y, z]), np.array(size), np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]))


def crafted_scene() -> Scene:
    rng = np.random.default_rng(4)
    labels = ["bed", "tv", "sofa", "lamp", "door", "desk", "sink", "chair", "chair", "chair", "pillow", "pillow"]
    objs = [SceneObject(i, lab, lab, box(*rng.uniform(-3, 3, 2), size=tuple(rng.uniform(0.2, 1.2, 3)),
                                          yaw=float(rng.uniform(0, np.pi))))
            for i, lab in enumerate(labels)]
    objs.append(SceneObject(len(objs), "cup", "cup", box(objs[0].box.center[0], objs[0].box.center[1], 0.6,
                                                          size=(0.1, 0.1, 0.1))))  # inside the bed: distance 0
    return Scene("crafted_fast", "vsi-meta", objs, room_size=30.0)


def test_scene_distance_matrix_holds_box_distance_values():
    from pipeline.geometry import box_distance

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


BOX_ONLY = tuple(n for n, m in SUBTASKS.items() if m.BOX_ONLY)


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
    counted and skipped, until `max_per_subtask` are kept."""
    from dataclasses import replace

    drops = DropCounter()
    ctx = Context(scene, replace(config, self_check=False), drops)
    out = []
    for name in config.subtasks:
        kept = 0
        gen = SUBTASKS[name].generate(ctx)
        while kept < config.max_per_subtask:  # like islice: never asks for one more than it needs
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


def test_memo_verifies_each_distinct_spec_once(monkeypatch):
    from pipeline.questions import generate_items

    real = verifiers.verify_batch
    seen: list[str] = []

    def verify_batch(specs, completions, k, **kw):
        seen.extend(repr(s) for s in specs)
        return real(specs, completions, k, **kw)

    monkeypatch.setattr(verifiers, "verify_batch", verify_batch)
    scenes = [crafted_scene(), crafted_scene()]  # the same specs twice
    items = list(generate_items(scenes, QuestionConfig(subtasks=BOX_ONLY)))
    assert len(seen) == len(set(seen)) == len({repr(it.verifier) for it in items})
    assert len(seen) < len(items)  # repeated specs (counts, the second scene) were not verified again


def test_processed_scene_gives_the_items_of_the_raw_scene():
    """Geometry done up front (`process_scene`) changes no item and no drop count; a scene processed
    with other ignored labels is refused rather than silently giving other questions."""
    from dataclasses import replace

    from pipeline.questions import generate_items, process_scene

    config = QuestionConfig(subtasks=BOX_ONLY)
    raw_drops, done_drops = DropCounter(), DropCounter()
    raw = list(generate_items([crafted_scene(), crafted_scene()], config, raw_drops))
    processed = [process_scene(crafted_scene(), config) for _ in range(2)]
    assert all({"unique_distances", "label_distances"} <= set(vars(p)) for p in processed)  # done by processing
    done = list(generate_items(processed, config, done_drops))
    assert raw and [it.to_dict() for it in done] == [it.to_dict() for it in raw]
    assert done_drops.to_dict() == raw_drops.to_dict()
    with pytest.raises(ValueError, match="ignore_labels"):
        list(generate_items(processed, replace(config, ignore_labels=frozenset({"bed"}))))


# Specs in the shapes the constructors build (the fast validator's cases) and near misses of each.
SPEC_CASES = [
    {"kind": "numeric", "version": 1, "answer": a, "unit": u}
    for a in (1.25, -3.5, 0.0, -0.0, float("nan"), float("inf"), 2, True, np.float64(1.5), "1.5")
    for u in ("m", "cm", "m2", "", "km", None, ["m"])
] + [
    {"kind": "count", "version": v, "answer": a} for a in (0, 3, -1, 2.0, True, np.int64(4), "3", None)
    for v in (1, 1.0, True, 2)
] + [
    {"kind": "choice", "version": 1, "answer": a, "options": o}
    for a in ("A", "b", "D", "E", "", "AB", "\u0131", 1, None)
    for o in (["chair", "table", "lamp", "sofa"], ["a", "A", "b"], ["x", "x_y", "x-y"], ["x", " "], ["x"],
              ("x", "y"), ["x", 3], [chr(97 + i) for i in range(27)], None)
] + [
    {"kind": "direction", "version": 1, "answer": a, "classes": c}
    for a in ("left", "right", "back", "up", 1)
    for c in (["left", "right"], ["left", "back", "right"], ["front-left", "back-left", "back-right", "front-right"],
              ["left", "Left"], ["left"], ("left", "right"), None)
] + [
    {"kind": "numeric", "version": 1, "answer": 1.5, "unit": "m", "error": "squared"},
    {"kind": "count", "version": 1, "answer": 2, "tau": 2.0},
    {"kind": "choice", "version": 1, "answer": "A", "options": ["x", "y"], "gamma": 2.0},
    {"kind": "direction", "version": 1, "answer": "left", "classes": ["left", "right"], "angle": 30.0},
    {"kind": "numeric", "version": 1, "answer": 1.5},
    {"kind": "numeric", "answer": 1.5, "unit": "m", "scale": 1.0},
]


@pytest.mark.parametrize("spec", SPEC_CASES, ids=range(len(SPEC_CASES)))
def test_fast_spec_validation_is_the_full_validation(spec):
    """`verifiers.spec._fast` (used by `validate_spec`) returns exactly what the full per-kind validator
    returns, value and type, or defers to it (then errors are the full validator's own)."""
    from verifiers.spec import _VALIDATORS, SpecError, _fast, validate_spec

    def full(s):
        try:
            return _VALIDATORS[s["kind"]](s) if s.get("version") == 1 and not isinstance(s.get("version"), bool) \
                else "bad version"
        except SpecError as exc:
            return ("error", exc.field)

    fast = _fast(spec)
    want = full(spec)
    if fast is not None:
        assert repr(fast) == repr(want)  # repr tells apart 1 / 1.0 / True and -0.0 / 0.0
        assert [type(v) for v in fast.values()] == [type(v) for v in want.values()]
    try:
        got = validate_spec(spec)
    except SpecError as exc:
        got = ("error", exc.field)
    if want != "bad version":
        assert repr(got) == repr(want)


def test_fast_spec_validation_covers_the_generated_specs():
    """Every spec a box-only build makes takes the fast path (else the speed-up is silently lost)."""
    from verifiers.spec import _fast

    items = generate_scene(crafted_scene(), QuestionConfig(subtasks=BOX_ONLY, forms={
        **QuestionConfig().forms, "object_size": "both", "abs_distance": "both"}))
    assert {it.verifier["kind"] for it in items} >= {"numeric", "count", "choice", "direction"}
    assert all(_fast(it.verifier) is not None for it in items)


FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64) | st.sampled_from([0.0, -0.0, 180.0, -180.0, 22.5])


@settings(max_examples=400, deadline=None)
@given(angle=FLOATS, edges=st.lists(st.integers(-720, 720) | FLOATS, min_size=1, max_size=9),
       margin=st.floats(0, 90), values=st.lists(FLOATS, min_size=2, max_size=6))
def test_plain_float_gates_decide_as_numpy_does(angle, edges, margin, values):
    """`angle_margin` and `top_two_margin` on plain floats (Python arithmetic) decide exactly as their
    numpy forms do, NaN and infinities included."""
    from pipeline.questions.gates import angle_margin, top_two_margin

    with np.errstate(invalid="ignore"):
        d = np.abs((np.asarray(edges, dtype=np.float64) - angle + 180.0) % 360.0 - 180.0)
        assert angle_margin(angle, edges, margin) == angle_margin(angle, np.asarray(edges, dtype=np.float64), margin)
        assert angle_margin(angle, edges, margin)[0] == bool(d.min() >= margin)
        a, b = np.partition(np.asarray(values, dtype=np.float64), 1)[:2]
        assert top_two_margin(values, margin)[0] == bool(b - a >= margin)
        assert angle_margin(5.0, [10, float("inf")], 1.0) == (False, "near_bin_edge")


@pytest.mark.parametrize("batch", [1, 2, 5, 32])
@pytest.mark.parametrize("fail_every", [0, 3, 7])
def test_batched_scenes_give_the_items_of_one_scene_at_a_time(monkeypatch, batch, fail_every):
    """`generate_items` verifies several scenes' first rounds at once, speculatively; with injected
    self-check failures (forcing further rounds, so later scenes must be discarded and redone) and an
    unreadable scene in the run, items, order, letters and drop counts are those of `generate_scene`
    over the scenes in turn."""
    from dataclasses import replace

    from pipeline.questions import generate_items
    from pipeline.questions.common import SpecMemo
    from pipeline.questions.gates import LetterBalancer
    from sources.scene import SceneError

    scenes = [replace(crafted_scene(), scene_id=f"crafted_{i}") for i in range(6)]
    scenes.insert(3, SceneError("crafted_3x", "unreadable"))
    config = QuestionConfig(subtasks=BOX_ONLY, max_per_subtask=3,
                            forms={**QuestionConfig().forms, "object_size": "both", "abs_distance": "mc"})
    every = [it for s in scenes if isinstance(s, Scene) for it in generate_scene(s, replace(config, self_check=False))]
    keys = sorted({repr(it.verifier) for it in every})
    failing = {key for i, key in enumerate(keys) if fail_every and i % fail_every == 0}
    fail_specs(monkeypatch, failing)
    want_drops, balancer, memo = DropCounter(), LetterBalancer(), SpecMemo()
    want = []
    for s in scenes:
        if isinstance(s, SceneError):
            want_drops.drop("scene", "unreadable_scene")
        else:
            want += generate_scene(s, config, want_drops, balancer, memo)
    got_drops = DropCounter()
    got = list(generate_items(scenes, config, got_drops, batch=batch))
    assert [it.to_dict() for it in got] == [it.to_dict() for it in want]
    assert got_drops.to_dict() == want_drops.to_dict()
    assert list(got_drops.drops) == list(want_drops.drops)  # the same first-seen order of reasons
    assert any(it.options for it in got)  # multiple choice present: the letter balancer is exercised
    if fail_every:
        assert any(r == "self_check_failed" for _, r in got_drops.drops)


def test_a_scene_that_raises_stops_the_run_after_the_scenes_before_it():
    """A generator error surfaces when its scene's turn comes: earlier scenes' items come out first."""
    from dataclasses import replace

    from pipeline.questions import generate_items

    good = replace(crafted_scene(), scene_id="crafted_ok")
    bad = replace(crafted_scene(), scene_id="crafted_bad", objects=[None])  # type: ignore[list-item]
    out = []
    with pytest.raises(AttributeError):
        for it in generate_items([good, bad, good], QuestionConfig(subtasks=BOX_ONLY)):
            out.append(it)
    assert out and {it.scene_id for it in out} == {"crafted_ok"}
    assert len(out) == len(generate_scene(good, QuestionConfig(subtasks=BOX_ONLY)))
