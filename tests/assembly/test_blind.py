"""Text-only diagnostic and Iterative Bias Pruning: features, scores, pruning, sampling, card, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from numerical3d.pipeline.blind import diagnose, named_labels, prune, vector_mra
from numerical3d.pipeline.blind.features import candidates_of
from numerical3d.pipeline.blind.predictors import best_constant, constant_scores
from numerical3d.pipeline.blind.pruning import _split_evenly
from numerical3d.pipeline.config import load_mix
from numerical3d.pipeline.items import Item, item_id
from numerical3d.pipeline.settings import ConfigError
from numerical3d.verifiers.spec import choice_spec, count_spec, numeric_spec, order_spec

LABELS = ["chair", "table", "sofa", "lamp", "sink", "tv", "bed", "door"]


def _item(scene: int, q: int, subtask: str, spec: dict, question: str, labels: list[str], options=None) -> Item:
    return Item(id=item_id("synthetic", f"s{scene:03d}", subtask, {"q": q}), source="synthetic",
                scene_id=f"s{scene:03d}", subtask=subtask, question=question, prompt=question, answer=str(spec["answer"]),
                verifier=spec, options=options,
                provenance={"objects": [{"instance_id": i, "label": lab} for i, lab in enumerate(labels)]})


def closest_items(predictable: bool, scenes: int = 15, per_scene: int = 8, seed: int = 0) -> list[Item]:
    """rel_distance-like items: 4 label options; with `predictable` the bed is always the answer."""
    rng = np.random.default_rng(seed)
    items = []
    for s in range(scenes):
        for q in range(per_scene):
            ref = LABELS[int(rng.integers(len(LABELS)))]
            pool = [lab for lab in LABELS if lab != ref and lab != "bed"]
            others = [pool[i] for i in rng.choice(len(pool), 3, replace=False)]
            if predictable:
                gold, rest = "bed", others
            else:
                cands = [*others, "bed"]
                gold = cands[int(rng.integers(4))]
                rest = [c for c in cands if c != gold]
            options = [*rest]
            slot = int(rng.integers(4))
            options.insert(slot, gold)
            letter = "ABCD"[slot]
            q_text = f"Which is closest to the {ref}? " + " ".join(f"{'ABCD'[i]}. {o}" for i, o in enumerate(options))
            items.append(_item(s, q, "rel_distance", choice_spec(letter, options), q_text, [ref, *options], options))
    return items


def size_items(predictable: bool, scenes: int = 15, per_scene: int = 6, seed: int = 0) -> list[Item]:
    """object_size-like items: with `predictable` the size is fixed per label, else log-uniform."""
    rng = np.random.default_rng(seed)
    fixed = {lab: 20.0 * (i + 1) for i, lab in enumerate(LABELS)}
    items = []
    for s in range(scenes):
        for q in range(per_scene):
            lab = LABELS[int(rng.integers(len(LABELS)))]
            size = fixed[lab] if predictable else float(np.round(10 ** rng.uniform(1, 2.5), 1))
            items.append(_item(s, q, "object_size", numeric_spec(size, unit="cm"),
                               f"How long is the {lab}, in cm?", [lab]))
    return items


def test_hand_computed_features():
    item = _item(0, 0, "appearance_order", order_spec(["lamp", "chair", "tv"]),
                 "In which order do the chair, the tv and the lamp first appear?", ["lamp", "chair", "tv", "door"])
    assert named_labels(item) == ("chair", "tv", "lamp")  # text order; the door is not named
    shelves = _item(0, 2, "object_count", count_spec(3), "Count the bookshelves in this scene.", ["bookshelf"] * 3)
    assert named_labels(shelves) == ("bookshelf",)  # an irregular plural still names its label
    cands, gold = candidates_of(item, [])
    assert len(cands) == 6 and cands[0] == "chair > tv > lamp" and cands[gold] == "lamp > chair > tv"
    mc = _item(0, 1, "rel_distance", choice_spec("C", ["a", "b", "c"]), "?", [], ["a", "b", "c"])
    assert candidates_of(mc, []) == (["a", "b", "c"], 2)
    # MRA: |11.8 - 10| / 10 = 0.18 is within 1 - theta for theta 0.50..0.80 (7 of 10)
    assert vector_mra(np.array([11.8]), np.array([10.0])) == pytest.approx(0.7)
    # a vector: |(3, 4.4) - (3, 4)| / |(3, 4)| = 0.08 is within it for theta 0.50..0.90 (9 of 10)
    assert vector_mra(np.array([3.0, 4.4]), np.array([3.0, 4.0])) == pytest.approx(0.9)
    # best constant over 10, 10, 20: 10 scores 1, 1 and 0.1 (|10 - 20| / 20 = 0.5 passes theta 0.50 only);
    # 20 would score 0, 0, 1
    assert best_constant([np.array([10.0]), np.array([10.0]), np.array([20.0])], integer=True) == pytest.approx(2.1 / 3)
    assert constant_scores([np.array([10.0]), np.array([10.0]), np.array([20.0])], integer=True) == pytest.approx([1, 1, 0.1])
    assert _split_evenly(5, {"a": 10, "b": 5, "c": 5}) == {"a": 3, "b": 1, "c": 1}


def test_predictable_choice_scores_high_and_balanced_near_chance():
    biased = diagnose(closest_items(True, scenes=10), seed=0, folds=3)
    fair = diagnose(closest_items(False, scenes=10), seed=0, folds=3)
    b, f = biased.subtasks["rel_distance"], fair.subtasks["rel_distance"]
    assert b.chance == f.chance == pytest.approx(0.25)
    assert b.constant == 1.0  # "bed" is every answer: a constant answer text is the shortcut
    assert b.blind > 0.9 and b.gain > 0.6 and np.mean(list(biased.scores.values())) > 0.8
    assert abs(f.blind - 0.25) < 0.12 and f.gain < 0.1
    assert np.mean(list(fair.scores.values())) < 0.4


def test_predictable_numbers_score_high_and_random_ones_do_not():
    biased = diagnose(size_items(True), seed=0).subtasks["object_size"]
    fair = diagnose(size_items(False), seed=0).subtasks["object_size"]
    assert biased.metric == "MRA" and biased.chance == 0.0
    assert biased.blind > 0.9 and biased.gain > 0.4
    assert fair.blind < fair.constant + 0.05


def test_scores_are_deterministic_and_scene_grouped():
    items = closest_items(True, scenes=6)
    a, b = diagnose(items, seed=3), diagnose(list(reversed(items)), seed=3)
    assert a.scores == b.scores and a.subtasks == b.subtasks
    one_scene = [it for it in items if it.scene_id == "s000"]
    assert diagnose(one_scene).subtasks == {}  # no held-out scene: nothing to say


def test_prune_takes_the_most_solvable_keeps_floors_and_is_deterministic():
    # half the scenes give away their answer, half do not: pruning must take the former first
    items = closest_items(True, scenes=10, seed=1)[:40] + closest_items(False, scenes=10, seed=2)[40:]
    removed, report = prune(items, {"rel_distance": 50}, budget=0.5, rounds=2, stop_gain=0.0, folds=3, seed=0)
    assert len(removed) == len(items) - 50 == report.subtasks["rel_distance"].pruned
    again, _ = prune(list(reversed(items)), {"rel_distance": 50}, budget=0.5, rounds=2, stop_gain=0.0, folds=3, seed=0)
    assert again == removed
    gold_bed = {it.id for it in items if it.options[ord(it.verifier["answer"]) - 65] == "bed"}
    assert len(removed & gold_bed) / len(removed) > 0.8
    sub = report.subtasks["rel_distance"]
    assert sub.after < sub.before
    few, rep = prune(items, {}, budget=0.9, rounds=1, stop_gain=0.0, floor=70, folds=3, seed=0)
    assert len(few) == 10 and rep.subtasks["rel_distance"].pruned == 10  # the floor holds
    none, rep = prune(items, {}, budget=0.5, rounds=1, stop_gain=1.0, folds=3, seed=0)
    assert none == set() and rep.subtasks["rel_distance"].pruned == 0  # nothing beats chance by 1.0


def test_named_subtasks_alone_are_fit_and_score_as_in_a_full_diagnosis(monkeypatch):
    from numerical3d.pipeline.blind import pruning

    items = closest_items(True, scenes=10) + size_items(True, scenes=10)
    full = diagnose(items, seed=0, folds=3)
    only = diagnose(items, seed=0, folds=3, subtasks={"object_size"})
    assert set(only.subtasks) == {"object_size"} and only.subtasks["object_size"] == full.subtasks["object_size"]
    assert only.scores == {i: p for i, p in full.scores.items() if full.groups[i] == "object_size:numeric"}
    calls: list = []
    real = pruning.diagnose
    monkeypatch.setattr(pruning, "diagnose", lambda its, **kw: calls.append(set(kw["subtasks"])) or real(its, **kw))
    by_id = {it.id: it for it in items}
    removed, rep = pruning.prune(items, {}, budget=0.5, rounds=2, stop_gain=0.0, folds=3, seed=0, subtasks=["object_size"])
    assert removed and {by_id[i].subtask for i in removed} == {"object_size"} and set(rep.subtasks) == {"object_size"}
    assert calls and all(c == {"object_size"} for c in calls)


def test_a_subtask_within_stop_gain_is_not_refit(monkeypatch):
    """Within `stop_gain` on two rounds in a row (two fold assignments: one read is noisy), a subtask is
    not pruned and not refit from then on."""
    from numerical3d.pipeline.blind import pruning

    items = closest_items(True, scenes=10) + size_items(False, scenes=10)
    calls: list = []
    real = pruning.diagnose
    monkeypatch.setattr(pruning, "diagnose", lambda its, **kw: calls.append(set(kw["subtasks"])) or real(its, **kw))
    removed, rep = pruning.prune(items, {}, budget=0.5, rounds=4, stop_gain=0.3, folds=3, seed=0)
    assert calls[0] == calls[1] == {"object_size", "rel_distance"} and len(calls) >= 3  # a fair size: far below 0.3
    assert all(c == {"rel_distance"} for c in calls[2:])
    size = rep.subtasks["object_size"]
    assert size.pruned == 0 and rep.subtasks["rel_distance"].pruned > 0


def test_default_mix_prunes_named_subtasks_and_a_plan_can_turn_it_off(tmp_path):
    from numerical3d.pipeline.build import resolve_plan

    d = load_mix("default").debias
    assert d is not None and d.subtasks == ["appearance_order", "camera_distance", "grounding_2d", "grounding_3d", "object_size",
                                           "position_relation", "rel_direction", "rel_distance", "route_plan"] and not d.keep_quotas and d.floor > 0
    assert load_mix("demo").debias is None
    plan = resolve_plan("demo", overrides={"dataset": "default", "dataset_overrides": {"debias": False}})
    off = plan.dataset_config()
    assert off.debias is None and "debias" not in off.model_dump(mode="json")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: t\ntotal: 10\nquotas: {object_size: 1}\ndebias: {subtasks: [object_sise]}\n")
    with pytest.raises(ConfigError, match=r"(?s)bad\.yaml.*debias.*object_sise"):
        load_mix(bad)


def _mix(**debias):
    from numerical3d.pipeline.config import DatasetMix

    return DatasetMix(name="t", total=60, quotas={"rel_distance": 0.5, "object_size": 0.5},
                       splits={"train": 1.0}, **({"debias": debias} if debias else {}))


def test_sampling_off_is_unchanged_and_on_meets_quotas_deterministically():
    from numerical3d.pipeline.sampling import sample

    items = closest_items(True, scenes=12, per_scene=6) + size_items(False, scenes=12, per_scene=6)
    sel, rep = sample(items, _mix(), seed=0)
    assert "debias" not in rep.to_dict() and "debias" not in _mix().model_dump(mode="json")
    on = _mix(budget=0.5, rounds=1, stop_gain=0.0, folds=3)
    sel1, rep1 = sample(items, on, seed=0)
    sel2, rep2 = sample(list(reversed(items)), on, seed=0)
    assert [i.id for i in sel1] == [i.id for i in sel2] and rep1.to_dict() == rep2.to_dict()
    assert Counter(i.subtask for i in sel1) == {"rel_distance": 30, "object_size": 30}
    d = rep1.to_dict()["debias"]
    assert d["subtasks"]["rel_distance"]["pruned"] == int(0.5 * 72) and d["subtasks"]["rel_distance"]["selected"] is not None
    assert "text-only diagnostic" in rep1.render()


def test_a_pool_keeps_each_pruned_subtask_to_a_multiple_of_its_quota_spread_over_scenes(monkeypatch):
    from numerical3d.pipeline import blind, sampling

    items = closest_items(True, scenes=12, per_scene=8) + size_items(False, scenes=12, per_scene=8)
    seen: list = []
    real = blind.prune
    monkeypatch.setattr(blind, "prune", lambda its, *a, **kw: seen.append(list(its)) or real(its, *a, **kw))
    on = _mix(budget=0.5, rounds=1, stop_gain=0.0, folds=3, subtasks=["rel_distance"], pool=1.5)
    sel, rep = sampling.sample(items, on, seed=0)
    fed = Counter(it.subtask for it in seen[0])
    # rel_distance's quota is 30: 45 of its 96 candidates are pruned or selected from, 9 scenes with 4
    # of them (every scene's fourth after every scene's third); object_size is not pruned, so not pooled
    assert fed["rel_distance"] == 45
    assert sorted(Counter(it.scene_id for it in seen[0] if it.subtask == "rel_distance").values()) == [3] * 3 + [4] * 9
    d = rep.to_dict()["debias"]
    assert d["pool"] == 1.5 and d["pooled_out"] == {"rel_distance": 51}
    assert Counter(i.subtask for i in sel) == {"rel_distance": 30, "object_size": 30}
    again, rep2 = sampling.sample(list(reversed(items)), on, seed=0)
    assert [i.id for i in again] == [i.id for i in sel] and rep2.to_dict() == rep.to_dict()
    _, off = sampling.sample(items, _mix(budget=0.5, rounds=1, stop_gain=0.0, folds=3, subtasks=["rel_distance"]), seed=0)
    assert "pool" not in off.to_dict()["debias"]
    unpooled = Counter(it.subtask for it in seen[-1])
    assert unpooled["rel_distance"] == 96 and unpooled["object_size"] == fed["object_size"] > 45


def test_cli_assemble_with_debias_writes_the_card_section_and_plot(tmp_path):
    items = closest_items(True, scenes=12, per_scene=6) + size_items(False, scenes=12, per_scene=6)
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(i.to_dict()) + "\n" for i in items))
    mix = tmp_path / "mix.yaml"
    mix.write_text("name: t\ntotal: 60\nquotas: {rel_distance: 0.5, object_size: 0.5}\n"
                   "debias: {budget: 0.4, rounds: 1, floor: 5, folds: 3}\nmedia: {mode: reference}\n")
    out = tmp_path / "ds"
    res = subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "assemble",
                          str(path), "--out", str(out), "--config", str(mix)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr + res.stdout
    assert "text-only diagnostic" in res.stdout
    card = (out / "README.md").read_text()
    assert "## Text-only shortcuts" in card and "plots/blind_scores.png" in card
    assert (out / "plots" / "blind_scores.png").is_file()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sampling"]["debias"]["subtasks"]["rel_distance"]["pruned"] > 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(mix.read_text().replace("budget: 0.4", "budget: 1.5"))
    with pytest.raises(ConfigError, match="budget"):  # the file and the field are named
        load_mix(bad)


def prior_sizes(scenes: int, per_scene: int, planted: float, seed: int = 0) -> list[Item]:
    """object_size-like items: a `planted` share sized by their label (10% noise), the rest log-uniform."""
    rng = np.random.default_rng(seed)
    typical = {lab: 15.0 * 1.5 ** i for i, lab in enumerate(LABELS)}
    items = []
    for s in range(scenes):
        for q in range(per_scene):
            lab = LABELS[int(rng.integers(len(LABELS)))]
            by_label = rng.random() < planted
            size = typical[lab] * float(np.exp(rng.normal(0, 0.1))) if by_label else float(10 ** rng.uniform(1, 2.6))
            items.append(_item(s, q, "object_size", numeric_spec(round(size, 1), unit="cm"),
                               f"How long is the {lab}, in cm?", [lab]))
    return items


def test_numbers_are_pruned_by_what_they_add_over_the_best_constant():
    """Half the items are chairs of 100 cm, the size the best constant gives: the label's median answers
    them, but so does the constant, so they carry no shortcut. The beds (300 cm) and cups (10 cm) a
    label median answers and the constant does not are what the blind gain is made of, and go first."""
    rng = np.random.default_rng(5)
    items, q = [], 0
    for s in range(12):
        for lab, size, n in (("chair", 100.0, 6), ("bed", 300.0, 3), ("cup", 10.0, 3)):
            for _ in range(n):
                v = size if lab == "chair" else round(size * float(np.exp(rng.normal(0, 0.04))), 1)
                items.append(_item(s, q, "object_size", numeric_spec(v, unit="cm"), f"How long is the {lab}, in cm?", [lab]))
                q += 1
    diag = diagnose(items, seed=0, folds=4)
    label = {it.id: named_labels(it)[0] for it in items}
    gold = {it.id: float(it.verifier["answer"]) for it in items}
    # the baseline is the score of a 100 cm answer, computed here with VSI-Bench's thresholds
    for i, b in diag.baseline.items():
        rel = abs(100.0 - gold[i]) / gold[i]
        assert b == pytest.approx(np.mean([rel <= 1 - t for t in np.arange(0.50, 0.951, 0.05)]))
    assert all(diag.scores[i] == 1.0 for i in label if label[i] == "chair")  # the best predicted, raw
    removed, report = prune(items, {}, budget=0.4, rounds=1, stop_gain=0.0, folds=4, seed=0)
    assert len(removed) == 57 and {label[i] for i in removed} == {"bed", "cup"}
    assert report.subtasks["object_size"].after < report.subtasks["object_size"].before


def test_numbers_a_blind_guess_is_paid_on_are_pruned_by_what_it_earns():
    """Sizes of one label spread narrowly around 100 cm: the label's median is no better than the
    constant (no gain), yet answering 100 earns well at k = 100. With `max_reward` the items nearest
    100 go first, and what the guess earns falls; without it nothing is pruned."""
    from numerical3d.pipeline.count_guess import guess_rewards

    rng = np.random.default_rng(8)
    items = [_item(s, q, "object_size", numeric_spec(round(100.0 * float(np.exp(rng.normal(0, 0.2))), 1), unit="cm"),
                   "How long is the chair, in cm?", ["chair"]) for s in range(12) for q in range(8)]
    diag = diagnose(items, seed=0, folds=4)
    assert abs(diag.subtasks["object_size"].gain) <= 0.02
    paid = guess_rewards(items, diag.predictions)
    assert len(paid) == len(items) and np.mean(list(paid.values())) > 0.3
    none, _ = prune(items, {}, budget=0.5, rounds=4, stop_gain=0.02, folds=4, seed=0)
    assert none == set()
    removed, _ = prune(items, {}, budget=0.5, rounds=4, stop_gain=0.02, folds=4, seed=0, max_reward=0.25)
    off = {it.id: abs(np.log(float(it.verifier["answer"]) / 100.0)) for it in items}
    near = {i for i in off if off[i] < 0.1}
    assert removed and len(removed & near) / len(removed) > 0.7
    assert np.mean([off[i] for i in removed]) < np.mean([off[i] for i in off if i not in removed]) / 2
    left = [it for it in items if it.id not in removed]
    after = guess_rewards(left, diagnose(left, seed=0, folds=4).predictions)
    assert np.mean(list(after.values())) < np.mean(list(paid.values())) - 0.1


def test_per_label_median_agrees_with_an_independent_baseline():
    items = prior_sizes(scenes=8, per_scene=6, planted=0.5, seed=4)
    score = diagnose(items, seed=0, folds=8).subtasks["object_size"]  # 8 scenes, 8 folds: leave one scene out
    label = {it.id: it.question.split("the ")[1].split(",")[0] for it in items}
    gold = {it.id: float(it.verifier["answer"]) for it in items}
    thresholds = np.arange(0.50, 0.951, 0.05)
    mras = []
    for it in items:
        others = [o for o in items if o.scene_id != it.scene_id]
        same = [gold[o.id] for o in others if label[o.id] == label[it.id]]
        guess = float(np.median(same or [gold[o.id] for o in others]))
        mras.append(np.mean(abs(guess - gold[it.id]) / gold[it.id] <= 1 - thresholds))
    assert score.predictors["median given label"] == pytest.approx(float(np.mean(mras)), abs=1e-12)
    assert score.blind <= max(score.predictors.values())


def test_a_planted_label_prior_is_found_by_its_predictor_and_pruned_away():
    items = prior_sizes(scenes=16, per_scene=8, planted=0.45, seed=1)
    before = diagnose(items, seed=0, folds=4).subtasks["object_size"]
    assert before.gain > 0.1 and before.predictor.startswith("median given")
    removed, report = prune(items, {}, budget=0.5, rounds=4, stop_gain=0.02, folds=4, seed=0)
    after = diagnose([it for it in items if it.id not in removed], seed=0, folds=4).subtasks["object_size"]
    assert after.gain <= 0.05 and report.subtasks["object_size"].predictor == before.predictor


def test_a_cut_below_the_quota_is_decided_on_the_mean_of_several_fold_assignments(monkeypatch):
    """Sizes with nothing to learn, read over the bar on any single assignment (the noise of one deal of
    scenes to folds, planted here) and within it on the mean of three. Above the quota the one read
    prunes; a cut that would go below the quota is read again on three assignments, the round's own
    first, and makes none."""
    import dataclasses

    from numerical3d.pipeline.blind import pruning

    items = size_items(predictable=False, scenes=16, per_scene=6, seed=3)
    real = pruning.diagnose
    calls: list[tuple[tuple[int, ...], frozenset[str]]] = []

    def one_read_over_the_bar(its, **kw):
        diag = real(its, **kw)
        seeds = tuple(kw["fold_seeds"])
        calls.append((seeds, frozenset(kw["subtasks"])))
        if len(seeds) == 1:  # one assignment's luck: 0.05 over the bar
            diag.kinds = {k: dataclasses.replace(b, blind=b.baseline + 0.07) for k, b in diag.kinds.items()}
        return diag

    monkeypatch.setattr(pruning, "diagnose", one_read_over_the_bar)
    assert real(items, seed=0, folds=4, fold_seeds=(0, 1000, 2000)).kinds["object_size:numeric"].gain <= 0.02
    kept, _ = pruning.prune(items, {}, budget=0.5, rounds=4, stop_gain=0.02, folds=4, seed=0,
                            quotas={"object_size": len(items)})
    assert kept == set()
    assert calls[:2] == [((0,), frozenset({"object_size"})), ((0, 1000, 2000), frozenset({"object_size"}))]
    calls.clear()
    cut, _ = pruning.prune(items, {}, budget=0.5, rounds=4, stop_gain=0.02, folds=4, seed=0)
    assert len(cut) == len(items) // 2 and all(len(seeds) == 1 for seeds, _ in calls)
    above, _ = pruning.prune(items, {}, budget=0.5, rounds=4, stop_gain=0.02, folds=4, seed=0, quotas={"object_size": 24})
    assert len(above) == len(items) // 2  # every cut leaves more than 24 of the 96: none is read again


def test_a_confirmed_shortcut_is_cut_down_to_the_quota_then_on(monkeypatch):
    """Every read, one assignment or three, over the bar: 96 candidates, steps of 12 in 4 rounds. With a
    quota of 90 the first cut stops at it (6), and each later one is a step again (12): 42 go."""
    import dataclasses

    from numerical3d.pipeline.blind import pruning

    items = size_items(predictable=False, scenes=16, per_scene=6, seed=3)
    real = pruning.diagnose

    def over_the_bar(its, **kw):
        diag = real(its, **kw)
        diag.kinds = {k: dataclasses.replace(b, blind=b.baseline + 0.07) for k, b in diag.kinds.items()}
        return diag

    monkeypatch.setattr(pruning, "diagnose", over_the_bar)
    removed, report = pruning.prune(items, {}, budget=0.5, rounds=4, stop_gain=0.02, folds=4, seed=0,
                                    quotas={"object_size": 90})
    assert [r["object_size"] for r in report.removed_per_round] == [6, 12, 12, 12] and len(removed) == 42
    assert pruning._cut(100, 12, 90) == (10, True) and pruning._cut(120, 12, 90) == (12, False)
    assert pruning._cut(80, 12, 90) == (12, True) and pruning._cut(80, 0, 90) == (0, False)


def test_a_class_given_the_template_is_a_prior_the_diagnostic_names():
    """Direction items whose easy level is mostly "left": the class given the template beats chance."""
    rng = np.random.default_rng(2)
    items = []
    for s in range(12):
        for q in range(8):
            labs = [LABELS[i] for i in rng.choice(len(LABELS), 3, replace=False)]
            easy = q % 2 == 0
            classes = ["left", "right"] if easy else ["left", "back", "right"]
            answer = "left" if easy and rng.random() < 0.85 else classes[int(rng.integers(len(classes)))]
            text = (f"Standing at the {labs[0]} facing the {labs[1]}, is the {labs[2]} to my "
                    + " or ".join(classes) + "?")
            items.append(_item(s, q, "rel_direction", {"kind": "direction", "answer": answer, "classes": classes},
                               text, labs))
    score = diagnose(items, seed=0, folds=4).subtasks["rel_direction"]
    assert score.predictors["answer given template"] - score.chance > 0.15 and score.gain > 0.15


def test_a_subtask_pruned_below_its_quota_says_so_in_its_shortfall_line():
    """The mix's default (`keep_quotas: false`) prunes a shortcut even below quota; the build then
    says why the subtask is short instead of starving it silently."""
    from numerical3d.pipeline.config import DatasetMix
    from numerical3d.pipeline.sampling import sample

    items = prior_sizes(scenes=16, per_scene=8, planted=0.45, seed=1)
    mix = DatasetMix(name="t", total=len(items), quotas={"object_size": 1.0}, splits={"train": 1.0},
                     debias={"budget": 0.5, "rounds": 4, "stop_gain": 0.02, "folds": 4, "keep_quotas": False})
    selection, report = sample(items, mix, seed=0)
    pruned = report.debias.subtasks["object_size"].pruned
    assert pruned > 0 and len(selection) <= len(items) - pruned
    line = next(w for w in report.warnings if w.startswith("subtask object_size: quota"))
    assert f"{pruned} pruned as text-only shortcuts" in line and "median given" in line


def test_the_selection_is_checked_and_a_planted_label_prior_swapped_out():
    """Pruning that leaves a per-label shortcut in the pool (here: a budget of 0) delivered it; the check
    of the selected items (phase 9) swaps the items the label median predicts for other candidates,
    keeps the quota, and says so in the report."""
    from numerical3d.pipeline.config import DatasetMix
    from numerical3d.pipeline.sampling import sample

    items = prior_sizes(scenes=30, per_scene=6, planted=0.45, seed=3)  # 150 distinct questions

    def mix(**debias):
        return DatasetMix(name="t", total=100, quotas={"object_size": 1.0}, splits={"train": 1.0},
                          debias={"budget": 0.0, "folds": 4, **debias})

    unchecked, _ = sample(items, mix(selected_gain=None), seed=0)
    assert diagnose(list(unchecked), seed=0, folds=4).subtasks["object_size"].gain > 0.1
    checked, report = sample(items, mix(), seed=0)
    again, report2 = sample(list(reversed(items)), mix(), seed=0)
    assert [i.id for i in checked] == [i.id for i in again] and report.to_dict() == report2.to_dict()
    blind = diagnose(list(checked), seed=0, folds=4).subtasks["object_size"]
    assert len(checked) == 100 and blind.max_gain <= 0.05  # every predictor alone, not only the one chosen per fold
    sub = report.debias.subtasks["object_size"]
    assert sub.swapped > 0 and sub.selected == pytest.approx(blind.blind)
    assert not [w for w in report.warnings if "selected_gain" in w]
    # with no candidate left to swap in, the report says what the selection still gives away
    _, short = sample(items, mix().model_copy(update={"total": len(items)}), seed=0)
    assert any(w.startswith("object_size:numeric: the median given") and "no candidate left to swap in" in w
               for w in short.warnings)


def _counts_giving_themselves_away(n_scenes: int, own: float) -> list[Item]:
    """A count item per label and scene whose answer is the label's own count with probability `own`."""
    rng = np.random.default_rng(5)
    items = []
    for s in range(n_scenes):
        for q, lab in enumerate(LABELS):
            n = 3 + LABELS.index(lab) if rng.random() < own else int(rng.integers(2, 16))
            items.append(_item(s, q, "object_count", count_spec(n), f"How many {lab}s are there?", [lab] * n))
    return items


def test_the_selection_check_holds_delivered_counts_to_the_count_bound(monkeypatch):
    """Count items the count cap let through (here: a cap that keeps everything) whose label gives its
    count away: the check leaves out the ones the strongest text-only count earns most on, until it
    earns at most `balance.max_count_guess` at k = 100 on what is delivered, and says so."""
    from numerical3d.pipeline import sampling
    from numerical3d.pipeline.config import DatasetMix
    from numerical3d.pipeline.count_guess import guess_rewards

    items = _counts_giving_themselves_away(24, 0.7)
    monkeypatch.setattr(sampling, "cap_count_guess", lambda ids, by_id, priority, bound: (ids, 0))
    mix = DatasetMix(name="t", total=len(items), quotas={"object_count": 1.0}, splits={"train": 1.0},
                     debias={"budget": 0.0, "folds": 4, "subtasks": ["object_size"]})
    unchecked = diagnose(items, seed=0, folds=4)
    assert np.mean(list(guess_rewards(items, unchecked.predictions, ("count",)).values())) > 0.3
    selection, report = sampling.sample(items, mix, seed=0)
    kept = list(selection)
    rewards = guess_rewards(kept, diagnose(kept, seed=0, folds=4).predictions, ("count",))
    assert 0 < len(kept) < len(items) and np.mean(list(rewards.values())) <= 0.3
    assert report.subtasks["object_count"].count_capped == len(items) - len(kept)


def test_a_tighter_selected_count_bound_swaps_but_never_starves_below_the_caps_own(monkeypatch):
    """`debias.selected_count_guess` under the count cap's 0.3: with candidates to spare, the check swaps
    the counts a blind guess earns most on for others until it earns at most the tighter bound, and keeps
    the quota; with none to spare, it leaves out no more than the cap's own bound asks, and says so."""
    from numerical3d.pipeline import sampling
    from numerical3d.pipeline.config import DatasetMix
    from numerical3d.pipeline.count_guess import guess_rewards

    items = _counts_giving_themselves_away(60, 0.5)
    monkeypatch.setattr(sampling, "cap_count_guess", lambda ids, by_id, priority, bound: (ids, 0))

    def mix(total: int, tighter: float | None) -> DatasetMix:
        return DatasetMix(name="t", total=total, quotas={"object_count": 1.0}, splits={"train": 1.0},
                          debias={"budget": 0.0, "folds": 4, "subtasks": ["object_size"], "selected_count_guess": tighter})

    def paid(sel) -> float:
        kept = list(sel)
        return float(np.mean(list(guess_rewards(kept, diagnose(kept, seed=0, folds=4).predictions, ("count",)).values())))

    loose, _ = sampling.sample(items, mix(200, None), seed=0)
    tight, report = sampling.sample(items, mix(200, 0.2), seed=0)
    assert paid(loose) > 0.2 >= paid(tight) and len(tight) == len(loose) == 200
    assert not [w for w in report.warnings if "count still earns" in w]
    # every candidate taken: nothing to swap in, so only what the cap's own bound leaves out goes
    capped, _ = sampling.sample(items, mix(len(items), None), seed=0)
    held, short = sampling.sample(items, mix(len(items), 0.2), seed=0)
    assert len(held) == len(capped) and paid(held) <= 0.3
    assert any(w.startswith("object_count:count: a text-only count still earns") and "held to 0.2" in w
               for w in short.warnings)


def test_the_selection_check_holds_delivered_numbers_to_max_reward():
    """Sizes bunched around 100 cm, no gain over the constant: the selection, drawn unpruned, pays a
    blind guess more than `max_reward`; the check swaps out what the guess earns most on for candidates
    not taken until it earns at most that, and keeps the quota."""
    from numerical3d.pipeline.config import DatasetMix
    from numerical3d.pipeline.count_guess import guess_rewards
    from numerical3d.pipeline.sampling import sample

    rng = np.random.default_rng(9)
    items = [_item(s, q, "object_size", numeric_spec(round(100.0 * float(np.exp(rng.normal(0, 0.12))), 1),
                                                     unit="cm"), f"How long is the chair {q}, in cm?", ["chair", str(q)])
             for s in range(20) for q in range(8)]

    def mix(**debias):
        return DatasetMix(name="t", total=60, quotas={"object_size": 1.0}, splits={"train": 1.0},
                          debias={"budget": 0.0, "folds": 4, **debias})

    def paid(sel) -> float:
        kept = list(sel)
        return float(np.mean(list(guess_rewards(kept, diagnose(kept, seed=0, folds=4).predictions).values())))

    unchecked, _ = sample(items, mix(), seed=0)
    assert paid(unchecked) > 0.3
    checked, report = sample(items, mix(max_reward=0.25), seed=0)
    assert len(checked) == 60 and paid(checked) <= 0.25 and report.debias.subtasks["object_size"].swapped > 0
    assert not [w for w in report.warnings if "max_reward" in w]
    # with no candidate left to swap in, the report says what a blind guess still earns
    _, short = sample(items, mix(max_reward=0.25).model_copy(update={"total": len(items)}), seed=0)
    assert any(w.startswith("object_size:numeric: a text-only guess still earns") for w in short.warnings)


def test_the_best_predictor_alone_is_reported_beside_the_one_chosen_per_fold():
    """Choosing the strongest per fold can score below a predictor's own held-out score (a fold where
    another one looked better); a reviewer who runs the forest alone reports the forest's number, so the
    checks hold the best alone to the bound."""
    from numerical3d.pipeline.blind.crossval import BlindScore

    b = BlindScore("accuracy", 120, blind=0.299, chance=0.25, constant=0.27, kind="choice", predictor="letter given template",
                   predictors={"forest": 0.323, "letter given template": 0.299, "answer text": 0.28})
    assert b.gain == pytest.approx(0.049) and b.max_gain == pytest.approx(0.073)
    assert b.best_alone == "forest"
    assert BlindScore("MRA", 10, blind=0.4, chance=0.0, constant=0.3).max_gain == pytest.approx(0.1)


def test_the_noise_floor_tells_a_planted_prior_from_answers_with_nothing_to_learn():
    """`chance_floor` reruns the diagnosis on answers drawn at chance (choices) or shuffled (numbers): a
    planted prior reads far above every draw; random answers read inside them. On 120 random
    four-option items the best of the predictors alone already reads above chance at the median, which
    is why a gain over the bar on a small group is read against it."""
    from numerical3d.pipeline.blind.noise import chance_floor

    planted = chance_floor(closest_items(True), "rel_distance:choice", draws=8)
    assert planted.observed > planted.p95 + 0.3 and planted.p_value == pytest.approx(1 / 9)
    random = chance_floor(closest_items(False), "rel_distance:choice", draws=8)
    assert random.p_value > 0.1 and min(random.draws) <= random.observed <= max(random.draws) + 0.05
    assert random.median > 0.0  # the best of several predictors, each held out, still picks up noise
    sizes = chance_floor(size_items(True), "object_size:numeric", draws=4)
    assert sizes.observed > sizes.p95 + 0.3 and len(sizes.draws) == 4
    assert chance_floor(closest_items(True), "object_size:numeric") is None  # no such items


def test_noise_draws_keep_the_numbers_and_give_each_choice_a_valid_answer():
    from numerical3d.pipeline.blind.noise import _drawn

    sizes = size_items(False, scenes=3)
    drawn = _drawn(sizes, np.random.default_rng(0))
    assert sorted(it.verifier["answer"] for it in drawn) == sorted(it.verifier["answer"] for it in sizes)
    assert [it.id for it in drawn] == [it.id for it in sizes]
    letters = Counter(it.verifier["answer"] for it in _drawn(closest_items(True), np.random.default_rng(0)))
    assert set(letters) == set("ABCD") and min(letters.values()) >= 15  # 120 items, about 30 a letter
    orders = _drawn([_item(0, 0, "appearance_order", order_spec(["lamp", "chair", "tv"]), "?", ["lamp"])],
                    np.random.default_rng(1))
    assert sorted(orders[0].verifier["answer"]) == ["chair", "lamp", "tv"]


def mixed_items(scenes: int = 10, seed: int = 3) -> list[Item]:
    """Items of every diagnosed kind: choices, orders of 2-5 labels, directions, relation sets,
    counts, numbers and grounding vectors, with answers drawn at random."""
    from numerical3d.verifiers.spec import direction_spec, grounding_spec, relations_spec

    rng = np.random.default_rng(seed)
    items = closest_items(False, scenes=scenes, per_scene=4, seed=seed) + size_items(False, scenes=scenes, per_scene=4,
                                                                                      seed=seed)
    for s in range(scenes):
        for q in range(4):
            labs = [LABELS[i] for i in rng.choice(len(LABELS), int(rng.integers(2, 6)), replace=False)]
            gold = [labs[i] for i in rng.permutation(len(labs))]
            items.append(_item(s, q, "appearance_order", order_spec(gold),
                               f"In which order do the {', the '.join(labs)} first appear?", labs))
            a, b = (LABELS[i] for i in rng.choice(len(LABELS), 2, replace=False))
            classes = ["left", "right", "back"][: int(rng.integers(2, 4))]
            items.append(_item(s, q, "rel_direction", direction_spec(classes[int(rng.integers(len(classes)))], classes),
                               f"Standing by the {a}, is the {b} {' or '.join(classes)}?", [a, b]))
            rel = [["left-of"], ["right-of"], [], ["near", "left-of"]][int(rng.integers(4))]
            items.append(_item(s, q, "position_relation", relations_spec(rel), f"Where is the {a} from the {b}?", [a, b]))
            items.append(_item(s, q, "object_count", count_spec(int(rng.integers(2, 9))), f"How many {plural_of(a)}?", [a]))
            items.append(_item(s, q, "grounding_3d", grounding_spec(rng.uniform(-3, 3, 3).round(2).tolist()),
                               f"Where is the {a}?", [a]))
    return items


def plural_of(label: str) -> str:
    from numerical3d.pipeline.templating import plural

    return plural(label)


def _reference_choice_rows(cands, labels, stats, encode) -> np.ndarray:
    """The choice features as their definition reads, summed item by item in per-key dicts."""
    from itertools import combinations

    def keys(lab, opts, i):
        return [("cand", opts[i]), ("pos", i, len(opts)), ("first", lab[0] if lab else "", opts[i]), ("labels", lab, opts[i])]

    wins, trials, before = Counter(), Counter(), Counter()
    for t in stats:
        opts, gold = cands[t]
        for i in range(len(opts)):
            for k in keys(labels[t], opts, i):
                wins[k] += float(i == gold)
                trials[k] += 1.0
        if " > " in opts[gold]:
            for a, b in combinations(opts[gold].split(" > "), 2):
                before[("won", a, b)] += 1.0
                before[("seen", a, b)] += 1.0
                before[("seen", b, a)] += 1.0
    rows = []
    for t in encode:
        opts, _ = cands[t]
        n = len(opts)
        for i in range(n):
            feats = []
            for k in keys(labels[t], opts, i):
                feats += [(wins[k] + 1.0 / n) / (trials[k] + 1.0), trials[k]]
            pairs = list(combinations(opts[i].split(" > "), 2))
            order = float(np.mean([(before[("won", a, b)] + 0.5) / (before[("seen", a, b)] + 1.0) for a, b in pairs])) \
                if pairs else 0.5
            rows.append(feats + [i / max(1, n - 1), n, 1.0 / n, order])
    return np.asarray(rows, dtype=np.float64)


def _reference_number_rows(targets, labels, stats, encode) -> np.ndarray:
    d = len(targets[0])
    sums: dict = {}
    for t in stats:
        lab = labels[t]
        for k in [("first", lab[0] if lab else ""), ("last", lab[-1] if lab else ""), ("labels", lab)]:
            s = sums.setdefault(k, [0.0] * (d + 1))
            for j, v in enumerate([*targets[t], 1.0]):
                s[j] += float(v)
    glob = np.mean([targets[t] for t in stats], axis=0)
    rows = []
    for t in encode:
        lab, feats = labels[t], []
        for k in [("first", lab[0] if lab else ""), ("last", lab[-1] if lab else ""), ("labels", lab)]:
            s = sums.get(k, [0.0] * (d + 1))
            feats += [(s[j] + glob[j]) / (s[d] + 1.0) for j in range(d)] + [s[d]]
        rows.append(feats)
    return np.asarray(rows, dtype=np.float64)


def test_feature_frames_equal_per_key_sums_taken_item_by_item():
    """The frames count keys with array sums; the rows must equal, bit for bit, those of the
    definition summed one item at a time (a last-bit change would move items across a pruning cut)."""
    from numerical3d.pipeline.blind.crossval import _relation_sets
    from numerical3d.pipeline.blind.features import ChoiceFrame, NumberFrame, target_of

    rng = np.random.default_rng(11)
    items = mixed_items()
    by_kind: dict[str, list[Item]] = {}
    for it in items:
        by_kind.setdefault(it.verifier["kind"], []).append(it)
    for kind, members in sorted(by_kind.items()):
        labels = [named_labels(it) for it in members]
        if kind in ("choice", "direction", "order", "relations"):
            sets = _relation_sets(members)
            cands = [candidates_of(it, sets) for it in members]
            frame, ref = ChoiceFrame(members, cands, labels), lambda s, e: _reference_choice_rows(cands, labels, s, e)
        else:
            targets = [np.log(target_of(it)) if kind != "grounding" else target_of(it) for it in members]
            frame, ref = NumberFrame(targets, labels), lambda s, e: _reference_number_rows(targets, labels, s, e)
        for _ in range(4):
            order = rng.permutation(len(members))
            stats, encode = np.sort(order[: len(members) // 2]), order[len(members) // 2:]
            got, want = frame(stats, encode), ref(stats, encode)
            assert got.shape == want.shape and np.array_equal(got, want), kind
        assert frame(stats[:0], encode).shape[0] == want.shape[0]  # no statistics: rows all the same


def _same_diagnosis(a, b) -> None:
    assert a.scores == b.scores and a.baseline == b.baseline and a.predictions == b.predictions
    assert a.groups == b.groups and a.subtasks == b.subtasks and a.kinds == b.kinds


def test_diagnosis_in_worker_processes_equals_one_process():
    from numerical3d.pipeline.blind.parallel import ParallelDiagnosis

    items = mixed_items()
    one = diagnose(items, seed=2, folds=3)
    assert len(one.kinds) == 7
    # the last scene's items were not handed to the workers at their start: groups holding them go whole
    held = [it for it in items if it.scene_id != "s009"]
    with ParallelDiagnosis(held, 2) as workers:
        _same_diagnosis(diagnose(items, seed=2, folds=3, parallel=workers), one)
        _same_diagnosis(diagnose(held, seed=2, folds=3, parallel=workers, subtasks={"object_size", "rel_distance"}),
                        diagnose(held, seed=2, folds=3, subtasks={"object_size", "rel_distance"}))
        assert set(workers.seconds) >= {("object_size", "numeric"), ("rel_distance", "choice")}


def test_sampling_with_workers_selects_what_one_process_selects(monkeypatch):
    from numerical3d.pipeline.blind import parallel
    from numerical3d.pipeline.sampling import sample

    items = closest_items(True, scenes=12, per_scene=6) + size_items(True, scenes=12, per_scene=6)
    on = _mix(budget=0.5, rounds=2, stop_gain=0.0, folds=3)
    monkeypatch.setattr(parallel, "MIN_ITEMS", 1)
    started: list = []
    real = parallel.ParallelDiagnosis.__init__
    monkeypatch.setattr(parallel.ParallelDiagnosis, "__init__", lambda self, *a: started.append(a[1]) or real(self, *a))
    sel2, rep2 = sample(items, on, seed=0, workers=2)
    sel1, rep1 = sample(items, on, seed=0)
    assert started == [2]  # one set of workers, for pruning and the check
    assert [i.id for i in sel2] == [i.id for i in sel1] and rep2.to_dict() == rep1.to_dict()


def test_mra_rows_equals_the_metric_item_by_item():
    from numerical3d.pipeline.blind.features import mra_rows

    rng = np.random.default_rng(5)
    gold = [np.array([g]) for g in rng.uniform(0.1, 10, 300)] + [np.array([1.0])] * 4
    # predictions on the thresholds' edges too: 1.5 and 0.5 of 1.0 are at relative error 0.5 exactly
    values = np.vstack([rng.uniform(0, 20, (300, 1)), [[1.5], [0.5], [1.05], [np.inf]]])
    assert np.array_equal(mra_rows(values, gold), [vector_mra(v, g) for v, g in zip(values, gold)])
    boxes = [rng.uniform(-2, 2, 4) for _ in range(50)]  # vectors (and signs) go one by one, as the metric reads them
    guesses = rng.uniform(-2, 2, (50, 4))
    assert np.array_equal(mra_rows(guesses, boxes), [vector_mra(v, g) for v, g in zip(guesses, boxes)])


def test_pruning_keeps_the_correct_letters_near_level_within_each_option_count():
    """The predictable items all answer C: ranked by score alone, pruning takes them and leaves C the
    rarest letter, on which the letter prior scores over chance. It takes C down to the other letters
    first, then never takes a letter more than `LETTER_SLACK` below the others; two-option items keep
    A and B as level among themselves."""
    from numerical3d.pipeline.blind.pruning import LETTER_SLACK

    rng = np.random.default_rng(3)
    pool = [lab for lab in LABELS if lab != "bed"]
    items = []
    for s in range(20):
        for q in range(6):
            ref, a, b, c = (pool[i] for i in rng.choice(len(pool), 4, replace=False))
            if q < 3:  # predictable: the bed, always at C
                options, letter = [a, b, "bed", c], "C"
            else:
                options = [[a, b, c, "bed"][i] for i in rng.permutation(4)]
                letter = "ABCD"[int(rng.integers(4))]
            q_text = f"Which is closest to the {ref}? " + " ".join(f"{'ABCD'[i]}. {o}" for i, o in enumerate(options))
            items.append(_item(s, q, "rel_distance", choice_spec(letter, options), q_text, [ref, *options], options))
        for q in (6, 7):  # two options, the bed at A
            pair = ["bed", pool[(s + q) % len(pool)]]
            items.append(_item(s, q, "rel_distance", choice_spec("AB"[q % 2], pair),
                               f"Which is closer to the {pool[-1]}? A. {pair[0]} B. {pair[1]}", [pool[-1], *pair], pair))
    four = [it for it in items if len(it.options) == 4]
    before = Counter(it.verifier["answer"] for it in four)
    assert before["C"] > 2 * max(before[x] for x in "ABD")
    removed, _ = prune(items, {}, budget=0.5, rounds=1, stop_gain=0.0, folds=4)
    left = Counter(it.verifier["answer"] for it in four if it.id not in removed)
    assert len(removed) == len(items) // 2 and set(left) == set("ABCD")
    assert max(left.values()) - min(left.values()) <= LETTER_SLACK
    two = Counter(it.verifier["answer"] for it in items if len(it.options) == 2 and it.id not in removed)
    assert abs(two["A"] - two["B"]) <= LETTER_SLACK


def test_pruning_levels_the_declared_balance_classes_off_from_the_largest():
    """A predictable class of 24 and an unpredictable one of 72: by score alone pruning takes the first
    whole and leaves sampling none of it to balance with; cut in proportion (12 and 36) the classes keep
    their imbalance, on which the class prior alone stays over the bar round after round. Pruning takes
    the largest class first, down to the others, then both alike."""
    easy = closest_items(True, scenes=4, per_scene=6, seed=1)
    hard = [it for it in closest_items(False, scenes=16, per_scene=6, seed=2) if int(it.scene_id[1:]) >= 4]
    for it in easy:
        it.provenance["balance"] = ["easy"]
    for it in hard:
        it.provenance["balance"] = ["hard"]

    def cut(budget: float) -> Counter:
        removed, _ = prune(easy + hard, {}, budget=budget, rounds=1, stop_gain=0.0, folds=3)
        return Counter("easy" if it in easy else "hard" for it in easy + hard if it.id in removed)

    assert cut(0.5) == {"hard": 48}  # 24 and 24 left
    assert cut(0.75) == {"hard": 60, "easy": 12}  # 12 and 12 left
    # without declared classes the same cut takes nearly every predictable item (21 of 24)
    for it in easy + hard:
        del it.provenance["balance"]
    removed, _ = prune(easy + hard, {}, budget=0.5, rounds=1, stop_gain=0.0, folds=3)
    # (more than the 12 a cut in proportion takes: ranked by score, within what keeps the letters level)
    assert sum(it.id in removed for it in easy) > 12


def test_pruning_takes_at_most_its_budget_of_each_verifier_kind():
    """A subtask asked in two forms, one predictable: the subtask's whole budget spent on that form
    would leave it a sliver, on which noise alone reads over the bar; each form loses at most `budget`
    of its own candidates."""
    import dataclasses

    choices = closest_items(True, scenes=15, per_scene=8)
    numbers = [dataclasses.replace(it, subtask="rel_distance", id=item_id("synthetic", it.scene_id, "rel_distance", {"n": k}))
               for k, it in enumerate(size_items(False, scenes=15, per_scene=8, seed=4))]
    removed, report = prune(choices + numbers, {}, budget=0.5, rounds=4, stop_gain=0.0, folds=3)
    by_kind = Counter(it.verifier["kind"] for it in choices + numbers if it.id in removed)
    assert by_kind["choice"] == 60  # half of its 120, though the subtask's budget is 120


def test_the_selection_check_swaps_each_item_for_one_of_its_own_balance_class():
    """A planted label prior in one class only (a lamp is always on the right): the check swaps the lamp
    items out, each for another item of its class, so the classes stay even; the old order with holes
    handed the swapped items' places to the other class, a class prior of its own."""
    from numerical3d.pipeline.config import DatasetMix
    from numerical3d.pipeline.sampling import sample

    rng = np.random.default_rng(11)
    others = [lab for lab in LABELS if lab != "lamp"]
    items = []
    for q in range(240):
        cls = "right" if q % 2 else "left"
        label = "lamp" if cls == "right" and q % 4 == 1 else others[int(rng.integers(len(others)))]
        item = _item(q % 30, q, "rel_direction", choice_spec("AB"[cls == "right"], ["left", "right"]),
                     f"Where is the {label}? A. left B. right", [label], ["left", "right"])
        item.provenance.update(objects=[{"instance_id": q, "label": label}], balance=["easy", cls])
        items.append(item)
    mix = DatasetMix(name="t", total=60, quotas={"rel_direction": 1.0}, splits={"train": 1.0},
                     debias={"budget": 0.0, "folds": 4})
    checked, report = sample(items, mix, seed=0)
    assert report.debias.subtasks["rel_direction"].swapped > 0
    assert Counter(i.provenance["balance"][1] for i in checked) == {"left": 30, "right": 30}
    assert diagnose(list(checked), seed=0, folds=4).kinds["rel_direction:choice"].max_gain <= 0.05


def test_fold_seed_zero_deals_scenes_as_before_and_other_seeds_deal_them_afresh():
    """Seed 0 is the assignment every build before fold seeds used (scenes in the order of the sha256 of
    their name, dealt round-robin), written out here; other seeds deal the same scenes otherwise, and a
    scene keeps its fold when some items go."""
    import hashlib

    from numerical3d.pipeline.blind.crossval import Split

    groups = [("synthetic", f"s{i:03d}") for i in range(20) for _ in range(3)]
    order = sorted(set(groups), key=lambda g: hashlib.sha256(repr(g).encode()).hexdigest())
    expected = {g: r % 5 for r, g in enumerate(order)}

    def fold_of(folds, gs):
        return {gs[t]: f for f, (_, test) in enumerate(folds) for t in test}

    assert fold_of(Split(5).folds(groups), groups) == expected
    other = [fold_of(Split(5, s).folds(groups), groups) for s in (1, 2)]
    assert all(o != expected for o in other) and other[0] != other[1]
    for f in other:
        assert sorted(Counter(f.values()).values()) == [4] * 5  # still 4 scenes a fold
    kept = groups[:9] + groups[10:]  # one item of s003 gone
    assert fold_of(Split(5, 1).folds(kept), kept) == other[0]


def test_a_diagnosis_over_fold_seeds_is_the_mean_of_each_seeds():
    """Scores and every predictor's held-out score averaged over the assignments, computed here from
    three one-seed diagnoses; baselines and `predictions` are the first assignment's, `fold_predictions`
    every assignment's."""
    items = closest_items(False, scenes=12) + size_items(True, scenes=12)
    runs = [diagnose(items, seed=1, folds=4, fold_seeds=(s,)) for s in (0, 1, 2)]
    both = diagnose(items, seed=1, folds=4, fold_seeds=(0, 1, 2))
    assert both.scores.keys() == runs[0].scores.keys()
    for i, v in both.scores.items():
        assert v == pytest.approx(sum(r.scores[i] for r in runs) / 3)
    assert both.baseline == runs[0].baseline and both.predictions == runs[0].predictions
    # every assignment's predicted numbers, in order: what the blind rewards are averaged over
    assert both.fold_predictions.keys() == both.predictions.keys() and both.predictions
    for i, per_run in both.fold_predictions.items():
        assert per_run == [r.predictions[i] for r in runs]
    for key, b in both.kinds.items():
        assert b.blind == pytest.approx(np.mean([r.kinds[key].blind for r in runs]))
        for name, score in b.predictors.items():
            assert score == pytest.approx(np.mean([r.kinds[key].predictors[name] for r in runs]))
    assert diagnose(items, seed=1, folds=4, fold_seeds=(0,)).scores == diagnose(items, seed=1, folds=4).scores


def test_blind_rewards_over_fold_seeds_are_each_items_mean_over_the_assignments():
    """A reward held down on one assignment's predictions reads higher on another's: the check and the
    audit average each item's reward over the assignments' predictions, computed here item by item."""
    from numerical3d.pipeline.count_guess import guess_rewards, mean_guess_rewards

    rng = np.random.default_rng(8)
    items = [_item(s, q, "object_count", count_spec(n := int(rng.integers(2, 9))), f"How many {lab}s are there?", [lab] * n)
             for s in range(12) for q, lab in enumerate(LABELS)]
    diag = diagnose(items, seed=0, folds=4, fold_seeds=(0, 1, 2))
    per_run = [guess_rewards(items, diagnose(items, seed=0, folds=4, fold_seeds=(s,)).predictions) for s in (0, 1, 2)]
    mean = mean_guess_rewards(items, diag.fold_predictions)
    assert mean.keys() == per_run[0].keys() == {it.id for it in items}
    for i, reward in mean.items():
        assert reward == pytest.approx((per_run[0][i] + per_run[1][i] + per_run[2][i]) / 3)
    assert any(per_run[0][i] != per_run[1][i] for i in mean)  # the assignments do predict differently
    assert mean_guess_rewards(items, {}) == {}


def test_each_pruning_round_deals_the_scenes_afresh_and_the_check_averages_its_seeds(monkeypatch):
    """Removals ranked round after round by one assignment's held-out scores lower what that assignment
    reads, not the shortcut: round r diagnoses on fold seed r, the last refit on a seed no round used,
    and the selection check on `check_fold_seeds` assignments at once."""
    from numerical3d.pipeline import blind
    from numerical3d.pipeline.blind import pruning
    from numerical3d.pipeline.sampling import sample

    items = closest_items(True, scenes=10)
    seen: list[tuple[int, ...]] = []
    real = pruning.diagnose
    monkeypatch.setattr(pruning, "diagnose", lambda its, **kw: seen.append(tuple(kw["fold_seeds"])) or real(its, **kw))
    pruning.prune(items, {}, budget=0.5, rounds=3, stop_gain=0.0, folds=3, seed=0)
    assert seen == [(0,), (1,), (2,), (3,)]
    checked: list[tuple[int, ...]] = []
    real_check = blind.diagnose
    monkeypatch.setattr(blind, "diagnose", lambda its, **kw: checked.append(tuple(kw["fold_seeds"])) or real_check(its, **kw))
    sample(items, _mix(budget=0.0, check_fold_seeds=3), seed=0)
    assert checked and set(checked) == {(0, 1, 2)}
