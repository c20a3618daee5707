"""Build config presets and validation; scene splits; the VSI-Bench exclusion list."""

from __future__ import annotations

import numpy as np
import pytest

from numerical3d.pipeline.config import ConfigError, load_mix
from numerical3d.pipeline.splits import EVAL_SCENES_FILE, Exclusions, _largest_remainder, assign_splits, load_scene_list

NUMERICAL = {"abs_distance", "camera_distance", "object_size", "room_size", "object_count", "grounding_3d", "grounding_2d"}


def test_default_preset_is_50k_and_favours_numerical_subtasks():
    cfg = load_mix("default")
    assert cfg.total == 50_000
    share = sum(v for k, v in cfg.quotas.items() if k in NUMERICAL) / sum(cfg.quotas.values())
    assert share > 0.6
    assert load_mix("demo").total < 1000


def test_config_errors_name_the_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("total: 10\nquotas: {abs_distance: 1}\nsplitz: {train: 1}\n")
    with pytest.raises(ConfigError, match=r"(?s)bad\.yaml.*splitz"):
        load_mix(bad)
    bad.write_text("total: 10\nquotas: {abs_distance: 0}\n")
    with pytest.raises(ConfigError, match="quotas"):
        load_mix(bad)
    with pytest.raises(ConfigError, match="no such config"):
        load_mix("no-such-preset")


def test_overrides_merge_key_by_key_and_null_leaves_a_table_entry_out():
    demo = load_mix("demo")
    cfg = load_mix("demo", total=7, media={"mode": "reference"}, quotas={"route_plan": None, "room_size": 2},
                   splits={"validation": None}, debias={"budget": 0.3}, balance={"max_count_guess": None})
    assert cfg.total == 7
    assert cfg.media == demo.media.model_copy(update={"mode": "reference"})  # the demo's size and quality kept
    assert cfg.quotas == {**{k: v for k, v in demo.quotas.items() if k != "route_plan"}, "room_size": 2}
    assert cfg.splits == {"train": 0.8}
    assert cfg.debias is not None and cfg.debias.budget == 0.3  # the demo has none: its defaults, the budget changed
    assert cfg.balance == demo.balance.model_copy(update={"max_count_guess": None})  # null on a field: its "off"
    assert load_mix("default", debias=False).debias is None
    assert load_mix("default", debias={"rounds": 2}).debias == load_mix("default").debias.model_copy(update={"rounds": 2})


def test_an_overrides_error_names_the_override_not_the_file(tmp_path):
    from numerical3d.pipeline.config import OverrideError

    with pytest.raises(OverrideError, match=r"^media\.longest_side = 2:"):
        load_mix("demo", media={"longest_side": 2})
    bad = tmp_path / "bad.yaml"
    bad.write_text("total: 10\nquotas: {abs_distance: 1}\nmedia: {longest_side: 2}\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: media\.longest_side") as err:
        load_mix(bad, media={"mode": "embed"})  # the file's value is wrong, the override beside it is not
    assert not isinstance(err.value, OverrideError)


def test_eval_scene_list_is_the_shared_one():
    scenes = load_scene_list(EVAL_SCENES_FILE)
    assert len(scenes) == 288
    counts = {s: list(scenes.values()).count(s) for s in set(scenes.values())}
    assert counts == {"scannet": 88, "scannetpp": 50, "arkitscenes": 150}
    assert scenes["scene0025_01"] == "scannet"


def test_exclusion_matches_ids_from_any_source_and_counts_them():
    ex = Exclusions.vsibench()
    assert ex.excludes("scannet", "scene0025_01")
    assert ex.excludes("vsi-meta", "scene0025_01")  # the meta source carries ScanNet ids
    assert ex.excludes("scannet", "scene0025_01")
    assert not ex.excludes("scannet", "scene9000_00")
    rep = ex.report()
    assert rep["per_source"] == {"scannet": {"scenes": 1, "items": 2}, "vsi-meta": {"scenes": 1, "items": 1}}


def test_bad_scene_list_names_the_file(tmp_path):
    p = tmp_path / "list.tsv"
    p.write_text("id\tscene\nx\ty\n")
    with pytest.raises(ValueError, match="list.tsv.*header"):
        load_scene_list(p)


def test_largest_remainder_hand_computed():
    assert _largest_remainder(10, [0.5, 0.3, 0.2]) == [5, 3, 2]
    assert _largest_remainder(7, [1, 1, 1]) == [3, 2, 2]
    assert sum(_largest_remainder(50_000, [0.13, 0.13, 0.12, 0.05])) == 50_000


def test_assign_splits_by_scene_proportional_and_order_independent():
    scenes = [("scannet", f"scene9{i:03d}_00") for i in range(20)]
    a = assign_splits(scenes, {"train": 0.8, "test": 0.2}, np.random.default_rng([3, 1]))
    b = assign_splits(scenes[::-1], {"train": 0.8, "test": 0.2}, np.random.default_rng([3, 1]))
    assert a == b
    assert sorted(a.values()).count("test") == 4
    c = assign_splits(scenes, {"train": 0.8, "test": 0.2}, np.random.default_rng([4, 1]))
    assert c != a
    # a tiny split still gets a scene
    d = assign_splits(scenes[:3], {"train": 0.95, "test": 0.05}, np.random.default_rng(0))
    assert sorted(d.values()) == ["test", "train", "train"]


def test_a_folder_named_like_a_mix_is_not_a_config(tmp_path, monkeypatch):
    """`numerical3d build --preset demo --out demo` creates ./demo (the build lock) before it reads the mix."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo").mkdir()
    from numerical3d.pipeline.config import MIXES_DIR

    assert load_mix("demo") == load_mix(MIXES_DIR / "demo.yaml")
