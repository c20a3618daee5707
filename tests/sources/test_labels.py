"""Label maps: aliases, plurals, exclusions, floor labels, unknown policy, user overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sources.labels import LabelMap, load_label_map, normalize_text
from sources.scene import SceneError


@pytest.fixture(scope="module")
def scannet_map() -> LabelMap:
    return load_label_map("scannet")


@pytest.mark.parametrize(
    "raw, label",
    [
        ("chair", "chair"),
        ("Trash Bin", "trash can"),
        ("tv_monitor", "tv"),
        ("  Office   Chair ", "office chair"),
        ("chairs", "chair"),
        ("kitchen cabinets", "kitchen cabinet"),
        ("couch", "sofa"),
    ],
)
def test_scannet_map_keeps_and_merges(scannet_map, raw, label):
    assert scannet_map.resolve(raw).label == label


def test_structural_unknown_and_floor_labels_are_dropped_with_reasons(scannet_map):
    wall = scannet_map.resolve("wall")
    assert wall.label is None and "excluded" in wall.reason
    floor = scannet_map.resolve("Floor")
    assert floor.label is None and floor.floor
    unknown = scannet_map.resolve("flux capacitor")
    assert unknown.label is None and unknown.reason == "unknown label 'flux capacitor'"
    assert scannet_map.resolve("").reason == "empty label"


def test_vsi_meta_map_keeps_every_label():
    m = load_label_map("vsi-meta")
    assert m.resolve("ceiling light").label == "ceiling light"
    assert m.resolve("flux capacitor").label == "flux capacitor"


def test_user_yaml_extends_a_packaged_map(tmp_path: Path):
    f = tmp_path / "mine.yaml"
    f.write_text("extends: scannet\nunknown: keep\naliases:\n  armchair: chair\nexclude: [door]\n")
    m = load_label_map("scannet", f)
    assert m.resolve("armchair").label == "chair"
    assert m.resolve("door").label is None
    assert m.resolve("flux capacitor").label == "flux capacitor"
    assert m.resolve("trash bin").label == "trash can"  # inherited


def test_standalone_user_yaml_replaces_the_map(tmp_path: Path):
    f = tmp_path / "only.yaml"
    f.write_text("categories: [chair]\n")
    m = load_label_map("scannet", f)
    assert m.resolve("chair").label == "chair"
    assert m.resolve("table").label is None


def test_scannet_tsv_is_merged_onto_the_source_map(tmp_path: Path):
    f = tmp_path / "scannetv2-labels.combined.tsv"
    f.write_text("id\traw_category\tcategory\tcount\tnyu40class\n1\twooden chair\tchair\t5\tchair\n"
                 "2\tmoose head\ttrophy\t1\tpicture\n")
    m = load_label_map("scannet", f)
    assert m.resolve("Wooden Chair").label == "chair"
    assert m.resolve("moose head").label == "trophy"
    assert m.resolve("couch").label == "sofa"


@pytest.mark.parametrize(
    "text, problem",
    [
        ("aliases: [a, b]\n", "'aliases' must map strings to strings"),
        ("unknown: maybe\n", "'unknown' must be drop or keep"),
        ("colour: red\n", "unexpected keys"),
        ("extends: nowhere\n", "no packaged label map 'nowhere'"),
        ("categories: [a\n", "invalid YAML"),
    ],
)
def test_bad_user_maps_name_the_file(tmp_path: Path, text, problem):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(SceneError) as err:
        load_label_map("scannet", f)
    assert problem in str(err.value) and str(f) in str(err.value)


@given(st.text(max_size=40))
def test_resolve_never_raises_and_normalization_is_idempotent(scannet_map, raw):
    decision = scannet_map.resolve(raw)
    assert (decision.label is None) == (decision.reason is not None)
    assert normalize_text(normalize_text(raw)) == normalize_text(raw)
