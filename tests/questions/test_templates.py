"""Templates: every paraphrase of every subtask renders, strictly; user folders override ours in a sandbox."""

from __future__ import annotations

import jinja2
import pytest
from jinja2.exceptions import SecurityError

from numerical3d.pipeline.questions.registry import registry
from numerical3d.pipeline.templating import TemplateError, Templates, plural

CONTEXTS = {
    "object_count": {"label": "chair", "plural": "chairs"},
    "object_size": {"label": "sofa"},
    "room_size": {},
    "abs_distance": {"a": "bed", "b": "door"},
    "camera_distance": {"label": "lamp"},
    "grounding_3d": {"label": "lamp"},
    "grounding_2d": {"label": "lamp"},
    "rel_distance": {"reference": "tv", "candidates": ["sofa", "lamp", "table", "door"]},
    "rel_direction": {"standing": "bed", "facing": "tv", "target": "sofa", "level": "hard",
                      "classes": ["front-left", "back-left", "back-right", "front-right"]},
    "appearance_order": {"labels": ["sofa", "lamp", "table", "door"]},
    "route_plan": {"start": "bed", "facing": "tv", "goal": "door",
                   "steps": ["[please fill in]", "Go forward about 1.2 meters."]},
    "position_relation": {"a": "lamp", "b": "sofa", "vocabulary": ["left-of", "right-of", "near"]},
}


def test_every_subtask_has_a_template_context():
    assert set(CONTEXTS) == set(registry())


@pytest.mark.parametrize("subtask", sorted(CONTEXTS))
def test_every_paraphrase_renders(subtask):
    t = Templates()
    n = t.n_paraphrases(subtask)
    assert n >= 3
    texts = [t.question(subtask, i, **CONTEXTS[subtask]) for i in range(n)]
    assert len(set(texts)) == n  # real paraphrases, not copies
    for text in texts:
        assert "{{" not in text and "{%" not in text and text.strip()
        names = [v for v in CONTEXTS[subtask].values() if isinstance(v, str) and v != "hard"]
        assert all(any(v in text for v in (n, n.rstrip("s"))) for n in names)


@pytest.mark.parametrize("subtask", sorted(s for s, c in CONTEXTS.items() if c))
def test_missing_variable_is_an_error(subtask):
    t = Templates()
    for i in range(t.n_paraphrases(subtask)):
        with pytest.raises(TemplateError, match=f"{subtask}.j2 paraphrase {i + 1}"):
            t.question(subtask, i)


def test_prompt_states_the_answer_form():
    t = Templates()
    p = t.prompt("How far?", "numeric", unit="m")
    assert "<think>...</think>" in p and "<answer>...</answer>" in p and "meters" in p
    assert "square meters" in t.prompt("How big?", "numeric", unit="m2")
    assert "centimeters" in t.prompt("How long?", "numeric", unit="cm")
    assert "whole number" in t.prompt("How many?", "count")
    assert "left, right" in t.prompt("Where?", "direction", classes=["left", "right"])
    assert "(x, y, z)" in t.prompt("Where?", "grounding", dims=3)
    mc = t.prompt("Which?", "choice", options=["sofa", "lamp", "door"])
    assert "Options:\nA. sofa\nB. lamp\nC. door\n" in mc
    assert "letter of the correct option (A, B, C)" in mc


def test_user_folder_overrides_and_is_sandboxed(tmp_path):
    (tmp_path / "questions").mkdir()
    (tmp_path / "questions" / "room_size.j2").write_text(
        "{% block paraphrase_1 %}Mine: how big is it?{% endblock %}")
    t = Templates(tmp_path)
    assert t.sandboxed and isinstance(t.env, jinja2.sandbox.SandboxedEnvironment)
    assert t.n_paraphrases("room_size") == 1
    assert t.question("room_size", 0) == "Mine: how big is it?"
    assert t.n_paraphrases("object_size") >= 3  # ours still serves the rest
    (tmp_path / "questions" / "object_size.j2").write_text(
        "{% block paraphrase_1 %}{{ label.__class__.__mro__ }}{% endblock %}")
    with pytest.raises(SecurityError):
        Templates(tmp_path).question("object_size", 0, label="x")


def test_bad_user_templates_fail_with_the_file(tmp_path):
    with pytest.raises(TemplateError, match="does not exist"):
        Templates(tmp_path / "nope")
    (tmp_path / "questions").mkdir()
    (tmp_path / "questions" / "room_size.j2").write_text("no blocks here")
    with pytest.raises(TemplateError, match="room_size.j2: no paraphrase_N blocks"):
        Templates(tmp_path).question("room_size", 0)


@pytest.mark.parametrize("label,expected", [("chair", "chairs"), ("trash can", "trash cans"), ("box", "boxes"),
                                            ("bookshelf", "bookshelves"), ("couch", "couches"),
                                            ("shelf", "shelves"), ("study table", "study tables"),
                                            ("laundry basket", "laundry baskets"), ("battery", "batteries")])
def test_plural(label, expected):
    assert plural(label) == expected
