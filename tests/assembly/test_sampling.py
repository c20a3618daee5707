"""Sampling: quotas, dedup by meaning, balancing, caps, exclusion, fill rule, determinism."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numerical3d.pipeline.config import Balance
from numerical3d.pipeline.sampling import SamplingError, meaning_key, sample


def test_quotas_met_exactly_hand_computed(kit):
    cfg = kit.make_config()
    sel, rep = sample(kit.make_candidates(kit.SCENES), cfg, seed=0)
    got = Counter(i.subtask for i in sel)
    # total 60 x shares (0.3, 0.2, 0.1, 0.15, 0.1, 0.05, 0.1)
    assert got == {"abs_distance": 18, "object_size": 12, "object_count": 6, "rel_distance": 9,
                   "rel_direction": 6, "appearance_order": 3, "camera_distance": 6}
    assert rep.total_selected == len(sel) == 60
    assert not rep.warnings


def test_dedup_by_meaning_not_text(kit):
    items = kit.make_candidates(kit.SCENES[:1], per_scene=3, paraphrases=2)
    cfg = kit.make_config(total=1000, splits={"train": 1.0})
    sel, rep = sample(items, cfg, seed=0)
    # each question exists in two wordings (objects listed in reverse for symmetric subtasks)
    assert rep.duplicates_by_meaning == len(items) // 2
    keys = [meaning_key(i) for i in sel]
    assert len(keys) == len(set(keys)) == len(items) // 2


def test_order_matters_for_directional_subtasks(kit):
    item = [i for i in kit.make_candidates(kit.SCENES[:1], per_scene=1) if i.subtask == "rel_direction"][0]
    swapped = replace(item, provenance={**item.provenance, "objects": item.provenance["objects"][::-1]})
    assert meaning_key(item) != meaning_key(swapped)
    dist = [i for i in kit.make_candidates(kit.SCENES[:1], per_scene=1) if i.subtask == "abs_distance"]
    assert meaning_key(dist[0]) == meaning_key(dist[1])  # (A, B) and (B, A)
    other_frame = replace(dist[0], frame_indices=[99])
    assert meaning_key(other_frame) != meaning_key(dist[0])


def test_result_does_not_depend_on_input_order(kit):
    items = kit.make_candidates(kit.SCENES)
    cfg = kit.make_config()
    a, _ = sample(items, cfg, seed=5)
    b, _ = sample(items[::-1], cfg, seed=5)
    assert [i.to_dict() for i in a] == [i.to_dict() for i in b]
    c, _ = sample(items, cfg, seed=6)
    assert [i.id for i in c] != [i.id for i in a]


def test_planted_eval_scene_is_excluded_and_reported(kit):
    scenes = kit.SCENES + [("scannet", "scene0025_01"), ("arkitscenes", "41069025")]
    cfg = kit.make_config(total=10_000)
    sel, rep = sample(kit.make_candidates(scenes), cfg, seed=0)
    assert not {i.scene_id for i in sel} & {"scene0025_01", "41069025"}
    per = rep.excluded["per_source"]
    assert per["scannet"]["scenes"] == 1 and per["arkitscenes"]["scenes"] == 1
    assert per["scannet"]["items"] == 6 * 7 * 2  # every candidate of the planted scene
    assert "scannet: 1 scenes / 84 items" in rep.render()
    assert rep.excluded["scene_ids"]["scannet"] == ["scene0025_01"]


def test_choice_letters_and_discrete_classes_balanced(kit):
    items = kit.make_candidates(kit.SCENES, per_scene=40, seed=3)
    cfg = kit.make_config(total=400, quotas={"rel_distance": 1.0, "rel_direction": 1.0}, splits={"train": 1.0})
    sel, rep = sample(items, cfg, seed=0)
    letters = Counter(i.verifier["answer"] for i in sel if i.subtask == "rel_distance")
    assert set(letters) == set("ABCD") and max(letters.values()) - min(letters.values()) <= 1
    dirs = Counter(i.verifier["answer"] for i in sel if i.subtask == "rel_direction")
    assert len(dirs) == 8 and max(dirs.values()) - min(dirs.values()) <= 1
    # letters level within each paraphrase too (the kit words its questions two ways)
    assert rep.subtasks["rel_distance"].classes == {f"letter:{c}/4/p{p}": 25 for c in "ABCD" for p in (0, 1)}


def test_numeric_answers_spread_over_magnitude_bins(kit):
    items = kit.make_candidates(kit.SCENES, per_scene=40, seed=1)
    cfg = kit.make_config(total=60, quotas={"object_size": 1.0}, splits={"train": 1.0})
    sel, rep = sample(items, cfg, seed=0)
    classes = rep.subtasks["object_size"].classes
    assert len(classes) == 8 and max(classes.values()) - min(classes.values()) <= 1


def test_shortfall_is_reported_and_filled_proportionally(kit):
    items = [i for i in kit.make_candidates(kit.SCENES) if i.subtask != "object_count"]
    cfg = kit.make_config(total=100)
    sel, rep = sample(items, cfg, seed=0)
    assert len(sel) == 100
    assert rep.subtasks["object_count"].shortfall == 10
    assert any("object_count: quota 10 not met, selected 0 (10 short)" in w for w in rep.warnings)
    assert sum(s.filled for s in rep.subtasks.values()) == 10
    cfg_none = kit.make_config(total=100, fill="none")
    sel2, rep2 = sample(items, cfg_none, seed=0)
    assert len(sel2) == 90 and any("90 of 100" in w for w in rep2.warnings)
    with pytest.raises(SamplingError, match="object_count"):
        sample(items, kit.make_config(total=100, strict=True), seed=0)


def test_never_fewer_than_asked_without_saying_so(kit):
    items = kit.make_candidates(kit.SCENES[:2], per_scene=2)
    sel, rep = sample(items, kit.make_config(total=500), seed=0)
    assert len(sel) < 500
    assert any(f"selected {len(sel)} of 500" in w for w in rep.warnings)


def test_caps_per_source_and_scene(kit):
    items = kit.make_candidates(kit.SCENES, per_scene=10)
    cfg = kit.make_config(total=100, source_caps={"arkitscenes": 0.1}, scene_cap=12, scene_subtask_cap=3)
    sel, rep = sample(items, cfg, seed=0)
    assert Counter(i.source for i in sel)["arkitscenes"] <= 10
    assert max(Counter((i.source, i.scene_id) for i in sel).values()) <= 12
    assert max(Counter((i.scene_id, i.subtask) for i in sel).values()) <= 3
    assert sum(s.capped for s in rep.subtasks.values()) > 0


def test_a_subtask_short_of_its_quota_takes_what_only_the_scene_subtask_cap_kept_out(kit):
    """The per-scene-and-subtask cap spreads a subtask over scenes; where the subtask cannot reach its
    quota within it, the items only that cap kept out are taken before any other subtask fills in,
    and the report says how many. The scene and source caps still hold."""
    items = kit.make_candidates(kit.SCENES[:3], per_scene=4)
    cfg = kit.make_config(total=60, scene_subtask_cap=2, scene_cap=30, fill="none")
    sel, rep = sample(items, cfg, seed=0)
    got = Counter(i.subtask for i in sel)
    for name, sub in rep.subtasks.items():
        # three scenes of four questions each: every quota up to 12 is met, past the cap of 2 a scene
        assert got[name] == min(sub.quota, 12), (name, got[name], sub.quota)
        assert sub.beyond_scene_cap == max(0, got[name] - 3 * 2)
    assert rep.subtasks["abs_distance"].beyond_scene_cap == 12 - 6  # quota 18, 12 candidates
    assert "abs_distance: its quota needed 6 items past scene_subtask_cap and 0 in full scenes" in rep.render()
    assert max(Counter(i.scene_id for i in sel).values()) <= 30
    spread = kit.make_candidates(kit.SCENES, per_scene=4)  # nine scenes: every quota fits the cap
    sel, rep = sample(spread, kit.make_config(total=60, scene_subtask_cap=2, fill="none"), seed=0)
    assert max(Counter((i.scene_id, i.subtask) for i in sel).values()) <= 2
    assert not any(s.beyond_scene_cap for s in rep.subtasks.values())


def test_a_subtask_short_of_its_quota_gets_a_place_in_a_full_scene_without_breaking_a_cap(kit):
    """object_size has candidates in one scene only, which abs_distance fills up to the scene cap first;
    abs_distance has candidates elsewhere too. object_size reaches its quota in that scene, each place
    made by moving one abs_distance item to another scene: every cap holds, abs_distance keeps its count."""
    scenes = kit.SCENES[:3]
    items = [i for i in kit.make_candidates(scenes, per_scene=6)
             if (i.subtask == "object_size" and i.scene_id == scenes[0][1]) or i.subtask == "abs_distance"]
    cfg = kit.make_config(total=12, quotas={"abs_distance": 0.5, "object_size": 0.5}, scene_cap=6, fill="none")
    sel, rep = sample(items, cfg, seed=0)
    got = Counter(i.subtask for i in sel)
    assert got == {"abs_distance": 6, "object_size": 6}
    assert max(Counter(i.scene_id for i in sel).values()) <= 6
    assert rep.subtasks["object_size"].made_room > 0
    assert "in full scenes (another subtask's item there moved to another scene)" in rep.render()
    hard = kit.make_config(total=12, quotas={"abs_distance": 0.5, "object_size": 0.5}, scene_cap=6, fill="none",
                           scene_subtask_cap=None)
    alone = [i for i in items if i.subtask == "object_size" or i.scene_id == scenes[0][1]]  # nowhere to move to
    sel, rep = sample(alone, hard, seed=0)
    assert len(sel) <= 6 and rep.subtasks["object_size"].made_room == 0


def test_invalid_and_unquoted_candidates_are_counted(kit):
    items = kit.make_candidates(kit.SCENES[:2], per_scene=2)
    bad = [replace(items[0], id="x1", verifier={}), replace(items[1], id="x2", subtask="route_plan")]
    _, rep = sample(items + bad, kit.make_config(), seed=0)
    assert rep.invalid == {"verifier spec without kind": 1}
    assert rep.unquoted_subtasks == {"route_plan": 1}
    assert any("route_plan" in w for w in rep.warnings)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    total=st.integers(1, 300),
    n_scenes=st.integers(1, 9),
    per_scene=st.integers(1, 5),
    scene_cap=st.one_of(st.none(), st.integers(1, 30)),
    seed=st.integers(0, 2**31),
)
def test_sampling_invariants(kit, total, n_scenes, per_scene, scene_cap, seed):
    scenes = kit.SCENES[:n_scenes] + [("scannetpp", "09c1414f1b")]  # a VSI-Bench eval scene
    items = kit.make_candidates(scenes, per_scene=per_scene, seed=seed % 7)
    cfg = kit.make_config(total=total, scene_cap=scene_cap)
    sel, rep = sample(items, cfg, seed=seed)
    assert len(sel) <= total
    assert len({i.id for i in sel}) == len(sel)
    assert "09c1414f1b" not in {i.scene_id for i in sel}
    split_of_scene = {}
    for split, its in sel.splits.items():
        for i in its:
            assert split_of_scene.setdefault(i.scene_id, split) == split  # a scene in one split only
    if scene_cap:
        assert max(Counter(i.scene_id for i in sel).values(), default=0) <= scene_cap
    eligible = sum(s.candidates for s in rep.subtasks.values())
    if scene_cap is None:
        assert len(sel) == min(total, eligible)
    if len(sel) < total:
        assert rep.warnings


def _choice(kit, scene: str, q: int, subtask: str, options: list[str], gold: int, balance=None):
    from numerical3d.pipeline.items import Item, item_id

    prov = {"objects": [{"instance_id": q, "label": "ref"}], "rule": {"method": "test"}}
    if balance is not None:
        prov["balance"] = balance
    letter = "ABCD"[gold]
    return Item(id=item_id("scannet", scene, subtask, {"q": q}), source="scannet", scene_id=scene, subtask=subtask,
                question=f"{subtask} {q}?", prompt=f"{subtask} {q}?", answer=letter,
                verifier=kit.make_spec("choice", letter, options=options), frame_indices=[q], options=options,
                provenance=prov)


def test_letters_balanced_within_each_option_count(kit):
    """Two-option items can only be A or B: balanced over all counts together, the sampler would fill
    C and D from the four-option items and leave the two-option ones skewed (13 of 16 'A' once)."""
    rng = __import__("numpy").random.default_rng(0)
    items = []
    for q in range(400):
        n = 2 if q % 2 else 4
        gold = 0 if (n == 2 and q % 10 < 8) else int(rng.integers(n))  # two-option candidates mostly A
        items.append(_choice(kit, f"s{q % 20}", q, "rel_direction", [f"o{k}" for k in range(n)], gold))
    sel, rep = sample(items, kit.make_config(total=80, quotas={"rel_direction": 1.0}, splits={"train": 1.0}), seed=0)
    by_n = Counter((len(i.options), i.verifier["answer"]) for i in sel)
    assert by_n[(2, "A")] + by_n[(2, "B")] > 20 and abs(by_n[(2, "A")] - by_n[(2, "B")]) <= 1
    assert max(by_n[(4, c)] for c in "ABCD") - min(by_n[(4, c)] for c in "ABCD") <= 1


def test_classes_balanced_within_each_level(kit):
    """The generator declares (level, class); the sampler is uniform over levels, then over classes
    inside each level, however skewed the candidates are."""
    levels = {"easy": ["left", "right"], "medium": ["left", "back", "right"]}
    items, q = [], 0
    for level, classes in levels.items():
        for cls in classes:
            for _ in range(5 if cls == "back" else 60):  # back is rare among the candidates
                items.append(_choice(kit, f"s{q % 30}", q, "rel_direction", ["x", "y"], q % 2, balance=[level, cls]))
                q += 1
    sel, rep = sample(items, kit.make_config(total=40, quotas={"rel_direction": 1.0}, splits={"train": 1.0},
                                             scene_subtask_cap=None), seed=0)
    got = Counter(tuple(i.provenance["balance"]) for i in sel)
    assert got == {("easy", "left"): 10, ("easy", "right"): 10,
                   ("medium", "back"): 5, ("medium", "left"): 8, ("medium", "right"): 7} or \
        got == {("easy", "left"): 10, ("easy", "right"): 10,
                ("medium", "back"): 5, ("medium", "left"): 7, ("medium", "right"): 8}
    assert "easy / left / letter:A/2" in rep.subtasks["rel_direction"].classes


def test_each_form_of_a_subtask_balanced_on_its_own(kit):
    """rel_direction asks a question as a choice or as an open direction. Candidates whose classes are
    even over both forms together but skewed within each (back common among the choices, rare among
    the open ones) give each form its own near-uniform classes, and each form half the quota."""
    from numerical3d.pipeline.items import Item, item_id

    classes = ["left", "back", "right"]
    items, q = [], 0
    for cls in classes:
        for form, n in (("choice", 60 if cls == "back" else 10), ("direction", 10 if cls == "back" else 60)):
            for _ in range(n):
                if form == "choice":
                    items.append(_choice(kit, f"s{q % 30}", q, "rel_direction", ["x", "y"], q % 2, balance=["medium", cls]))
                else:
                    items.append(Item(id=item_id("scannet", f"s{q % 30}", "rel_direction", {"q": q}), source="scannet",
                                      scene_id=f"s{q % 30}", subtask="rel_direction", question=f"where {q}?",
                                      prompt=f"where {q}?", answer=cls, verifier=kit.make_spec("direction", cls, classes=classes),
                                      frame_indices=[q], provenance={"objects": [{"instance_id": q, "label": "ref"}],
                                                                     "rule": {"method": "test"}, "balance": ["medium", cls]}))
                q += 1
    sel, rep = sample(items, kit.make_config(total=60, quotas={"rel_direction": 1.0}, splits={"train": 1.0},
                                             scene_subtask_cap=None), seed=0)
    got = Counter((i.verifier["kind"], i.provenance["balance"][1]) for i in sel)
    assert got == {(form, cls): 10 for form in ("choice", "direction") for cls in classes}
    assert "form:direction / medium / back" in rep.subtasks["rel_direction"].classes


def test_room_size_quota_lowered_to_one_per_scene_through_the_cli(kit, tmp_path):
    """A scene has one floor area: 3 scenes cannot meet a room_size quota of 10; the quota becomes 3,
    the 7 go to the other subtask before sampling, and the command says so in one line."""
    import json
    import subprocess
    import sys

    from numerical3d.pipeline.items import Item, item_id

    items = [i for i in kit.make_candidates(kit.SCENES[:3], per_scene=12) if i.subtask == "object_size"]
    for source, scene in kit.SCENES[:3]:
        for form in ("open", "mc"):  # two forms of one question: duplicates by meaning
            items.append(Item(id=item_id(source, scene, "room_size", {"form": form}), source=source, scene_id=scene,
                              subtask="room_size", question="How big is the room?", prompt="How big is the room?",
                              answer="20.0", verifier=kit.make_spec("numeric", 20.0, unit="m2"), frame_indices=[0],
                              provenance={"objects": [], "rule": {"method": "test"}}))
    cfg = kit.make_config(total=20, quotas={"room_size": 0.5, "object_size": 0.5}, fill="none")
    sel, rep = sample(items, cfg, seed=0)
    assert rep.subtasks["room_size"].quota == 3 and rep.subtasks["object_size"].quota == 17
    assert Counter(i.subtask for i in sel) == {"room_size": 3, "object_size": 17} and rep.subtasks["room_size"].shortfall == 0
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(i.to_dict()) + "\n" for i in items))
    mix = tmp_path / "mix.yaml"
    mix.write_text("name: t\ntotal: 20\nquotas: {room_size: 0.5, object_size: 0.5}\nfill: none\nmedia: {mode: reference}\n")
    res = subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "assemble",
                          str(path), "--out", str(tmp_path / "ds"), "--config", str(mix)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr + res.stdout
    line = " ".join(res.stdout.split())  # rich wraps long lines
    assert "subtask room_size: quota 10 lowered to 3, all that 3 scenes can give (at most 1 per scene); " \
           "7 items moved to the other subtasks by share" in line


def _counts_of(kit, label: str, shape: dict[int, int]) -> list:
    """One object_count candidate per scene, all asking for `label`, `shape[k]` of them answering k."""
    from numerical3d.pipeline.items import Item

    items = []
    for k, n in sorted(shape.items()):
        for j in range(n):
            items.append(Item(id=f"{label}-{k}-{j}", source="synthetic", scene_id=f"scene9{k:02d}{j:02d}_00",
                              subtask="object_count", question=f"How many {label}s are in the room?",
                              prompt=f"How many {label}s?", answer=str(k), verifier=kit.make_spec("count", k),
                              frame_indices=[0], provenance={"frame_indices": [0], "objects": [
                                  {"instance_id": i + 1, "label": label} for i in range(k)]}))
    return items


def _held_out_rewards(items: list) -> dict[str, float]:
    """Written apart from the sampler: the mean reward at k = 100 (paper profile) of a text-only guess of
    each item's count fit on the *other* scenes' items: the label's mode (the count earning the most over
    them; the pool's when the label is asked nowhere else), the label's median (halves up) and one
    constant for every label (the count earning the most over all of them); ties to the smaller count.
    And one constant fit on all the items it answers, as a model trained on them would."""
    from numerical3d.verifiers.profiles import guess_reward
    from numerical3d.verifiers.spec import count_spec

    def r(a: int, g: int) -> float:
        return guess_reward(count_spec(a), [str(g)], 100.0, "paper")

    def mode(answers: list[int]) -> int:
        return max(range(0, 25), key=lambda g: (sum(r(a, g) for a in answers), -g))

    answers = [int(i.answer) for i in items]
    got: dict[str, list[float]] = {"mode": [], "median": [], "constant": [],
                                   "constant fit on all": [r(a, mode(answers)) for a in answers]}
    for it in items:
        label = it.provenance["objects"][0]["label"]
        others = [i for i in items if i.scene_id != it.scene_id]
        pool = [int(i.answer) for i in others]
        own = [int(i.answer) for i in others if i.provenance["objects"][0]["label"] == label] or pool
        a = int(it.answer)
        got["mode"].append(r(a, mode(own)))
        got["median"].append(r(a, int(np.floor(np.median(own) + 0.5))))
        got["constant"].append(r(a, mode(pool)))
    return {k: float(np.mean(v)) for k, v in got.items()}


def test_count_answers_capped_so_a_blind_guess_earns_little(kit):
    """The count cap keeps, per label, a flat cut of its counts and over the subtask a flat cut of all
    counts, so that a text-only guess (label mode, label median, one constant, fit on the other scenes,
    and one constant fit on the items themselves: written apart in `_held_out_rewards`) earns at most
    `max_count_guess` at k = 100; a label spread flat over 2..19 alone keeps everything, and a tighter
    bound never keeps more."""
    from numerical3d.verifiers.profiles import guess_reward

    assert round(guess_reward(kit.make_spec("count", 5), ["6"], 100.0, "paper"), 2) == 0.60  # one off
    assert round(guess_reward(kit.make_spec("count", 5), ["7"], 100.0, "paper"), 2) == 0.31  # two off
    piled = {2: 20, 3: 10, 4: 5, 6: 3, 9: 2, 11: 2, 13: 2, 15: 2, 17: 2}
    chairs = _counts_of(kit, "chair", piled)
    fridges = _counts_of(kit, "fridge", {2: 12})
    desks = _counts_of(kit, "desk", {k: 1 for k in range(2, 20)})
    everything = chairs + fridges + desks
    assert max(_held_out_rewards(everything).values()) > 0.4  # uncapped, a guess of 2 or 3 pays
    only = dict(total=200, quotas={"object_count": 1.0}, splits={"train": 1.0})
    flat, _ = sample(desks, kit.make_config(**only, balance={"max_count_guess": 0.3}), seed=0)
    assert len(flat) == 18  # nothing to drop
    sizes = []
    for target in (0.3, 0.25):
        sel, rep = sample(everything, kit.make_config(**only, balance={"max_count_guess": target}), seed=0)
        scores = _held_out_rewards(sel)
        assert max(scores.values()) <= target, scores
        assert len(sel) >= 18  # the wide labels stay
        sizes.append(len(sel))
        sub = rep.subtasks["object_count"]
        assert sub.candidates == len(sel) == 78 - sub.count_capped
        assert f"object_count: {sub.count_capped} of 78 candidates left out" in rep.render()
        assert rep.to_dict()["subtasks"]["object_count"]["count_capped"] == sub.count_capped
    assert sizes[1] <= sizes[0]
    off, rep = sample(everything, kit.make_config(**only, balance={"max_count_guess": None}), seed=0)
    assert len(off) == 78 and rep.subtasks["object_count"].count_capped == 0
    assert "left out" not in rep.render()
    assert Balance().max_count_guess == 0.3
    _, rep = sample(everything, kit.make_config(**only, balance=Balance()), seed=0)  # the default
    assert rep.subtasks["object_count"].count_capped > 12
    assert any(f"{rep.subtasks['object_count'].count_capped} left out by the count cap" in w for w in rep.warnings)
