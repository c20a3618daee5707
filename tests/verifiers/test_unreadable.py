"""A completion a verifier cannot read (None, bytes, a number, a mapping, message parts without text)
is the empty answer: unparseable, scored as such, never an exception; the same in training's rewards."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from numerical3d import verifiers as V
from numerical3d.training.config import load_config
from numerical3d.training.rewards import AccuracyReward, FormatReward, completion_text

SPECS = [V.numeric_spec(1.5, "m"), V.count_spec(3), V.choice_spec("B", ["chair", "table", "sofa", "lamp"]),
         V.direction_spec("left", ["front", "right", "back", "left"]), V.order_spec(["chair", "sofa", "lamp"]),
         V.relations_spec(["left-of", "near"]), V.grounding_spec([0.25, 0.75])]

# JSON-like junk as a trainer, a broken generation or a hand-made file may pass it.
leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20) | st.binary(max_size=20)
junk = st.recursive(leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8)
message = st.fixed_dictionaries({"role": st.just("assistant"), "content": junk}) | st.fixed_dictionaries(
    {"content": st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": junk}), max_size=3)})
completion = junk | st.lists(message, min_size=1, max_size=2)


def test_the_audits_cases_score_as_the_empty_answer():
    cases = [None, [{"role": "assistant", "content": None}], [{"role": "assistant", "content": [{"type": "text", "text": None}]}],
             [{"role": "assistant", "content": [None, {"text": 5}]}], 3, {"a": 1}, b"\xff\xfe", [None]]
    for spec in SPECS:
        empty = V.verify(spec, "", 100.0)
        for case in cases:
            got = V.verify(spec, case, 100.0)
            assert (got.reward, got.parsed, got.format_ok) == (empty.reward, empty.parsed, False), (spec, case)


@settings(max_examples=300, deadline=None)
@given(completion, st.sampled_from(SPECS))
def test_verify_never_raises_and_reads_only_text(c, spec):
    got = V.verify(spec, c, 50.0)
    assert 0.0 <= got.reward <= 1.0
    text = completion_text(c)
    assert isinstance(text, str)
    if not text:  # nothing readable: exactly the empty answer's score
        assert got.reward == V.verify(spec, "", 50.0).reward


@settings(max_examples=100, deadline=None)
@given(st.lists(completion, min_size=2, max_size=4))
def test_trainings_rewards_never_raise(cs):
    fn = AccuracyReward(load_config("qwen2.5-vl-7b").reward)
    numeric = V.numeric_spec(2.0, "m")
    rewards = fn(prompts=[None] * len(cs), completions=cs, verifier=[numeric] * len(cs),
                 trainer_state=type("S", (), {"global_step": 0, "max_steps": 10})())
    assert len(rewards) == len(cs) and all(0.0 <= r <= 1.0 for r in rewards)
    assert FormatReward()(completions=cs) == [0.0 if not completion_text(c) else FormatReward()(completions=[completion_text(c)])[0]
                                              for c in cs]
