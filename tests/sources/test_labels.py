"""Label maps: aliases, plurals, exclusions, floor labels, unknown policy, user overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numerical3d.sources.labels import LabelMap, load_label_map, normalize_text
from numerical3d.sources.scene import SceneError


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


@pytest.mark.parametrize(
    "name, text, expected",
    [
        pytest.param("mine.yaml", "extends: scannet\nunknown: keep\naliases:\n  armchair: chair\nexclude: [door]\n",
                     {"armchair": "chair", "door": None, "flux capacitor": "flux capacitor",
                      "trash bin": "trash can"},  # the last one inherited from the packaged map
                     id="yaml-extends-the-packaged-map"),
        pytest.param("only.yaml", "categories: [chair]\n", {"chair": "chair", "table": None},
                     id="standalone-yaml-replaces-the-map"),
        pytest.param("scannetv2-labels.combined.tsv",
                     "id\traw_category\tcategory\tcount\tnyu40class\n1\twooden chair\tchair\t5\tchair\n"
                     "2\tmoose head\ttrophy\t1\tpicture\n",
                     {"Wooden Chair": "chair", "moose head": "trophy", "couch": "sofa"},
                     id="scannet-tsv-is-merged-onto-the-source-map"),
    ],
)
def test_user_label_files_change_the_scannet_map(tmp_path: Path, name, text, expected):
    f = tmp_path / name
    f.write_text(text)
    m = load_label_map("scannet", f)
    assert {raw: m.resolve(raw).label for raw in expected} == expected


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


# Rows of ScanNet's scannetv2-labels.combined.tsv exactly as it ships (17 tab-separated columns),
# including the categories the packaged map used to lose and the identity rows that used to
# override its merges.
TSV_HEADER = ("id\traw_category\tcategory\tcount\tnyu40id\teigen13id\tnyuClass\tnyu40class\teigen13class\t"
              "ModelNet40\tModelNet10\tShapeNetCore55\tsynsetoffset\twnsynsetid\twnsynsetkey\tmpcat40\tmpcat40index")
TSV_ROWS = [
    '1\twall\twall\t8277\t1\t12\twall\twall\tWall\t\t\t\t\tn04546855\twall.n.01\twall\t1',
    '2\tchair\tchair\t4646\t5\t4\tchair\tchair\tChair\tchair\tchair\tchair\t3001627\tn03001627\tchair.n.01\tchair\t3',
    '3\tfloor\tfloor\t1553\t2\t5\tfloor\tfloor\tFloor\t\t\t\t\tn03365592\tfloor.n.01\tfloor\t2',
    '6\tcouch\tcouch\t502\t6\t9\tsofa\tsofa\tSofa\tsofa\tsofa\tsofa\t4256520\tn04256520\tsofa.n.01\tsofa\t10',
    '63\tshoes\tshoe\t272\t40\t7\tshoe\totherprop\tObjects\t\t\t\t\tn04199027\tshoe.n.01\tclothes\t38',
    '32\tclothing\tclothes\t165\t21\t7\tclothes\tclothes\tObjects\t\t\t\t\tn02728440\tapparel.n.01\tclothes\t38',
    '159\tkitchen counter\tkitchen counter\t140\t12\t6\tcounter\tcounter\tFurniture\ttable\ttable\ttable\t4379243\tn03116530\tcounter.n.01\tcounter\t26',
    '128\tshower walls\tshower wall\t109\t1\t12\twall\twall\tWall\t\t\t\t\tn04546855\twall.n.01\twall\t1',
    '72\tcopier\tcopier\t70\t40\t7\t\totherprop\tObjects\t\t\t\t\tn03257586\tduplicator.n.01\tappliances\t37',
    '1167\tbathroom stall door\tbathroom stall door\t62\t8\t12\tdoor\tdoor\tWall\tdoor\t\t\t\tn03221720\tdoor.n.01\tdoor\t4',
    '1169\ttrash bin\ttrash bin\t52\t39\t6\tgarbage bin\totherfurniture\tFurniture\t\t\ttrash_bin\t2747177\tn02747177\tashcan.n.01\tobjects\t39',
    '80\tperson\tperson\t46\t31\t7\tperson\tperson\tObjects\tperson\t\t\t\tn05217688\tperson.n.02\tmisc\t40',
    '1173\tbathroom cabinet\tbathroom cabinet\t39\t3\t6\tcabinet\tcabinet\tFurniture\t\t\tcabinet\t2933112\tn02933112\tcabinet.n.01\tcabinet\t7',
    '570\tpaper bag\tpaper bag\t39\t37\t7\tbag\tbag\tObjects\t\t\t\t\tn04122825\tsack.n.01\tobjects\t39',
    '276\tcloset doors\tcloset door\t38\t8\t12\tdoor\tdoor\tWall\tdoor\t\t\t\tn03221720\tdoor.n.01\tdoor\t4',
    '2\tstack of chairs\tchair\t35\t5\t4\tchair\tchair\tChair\tchair\tchair\tchair\t3001627\tn03001627\tchair.n.01\tchair\t3',
    '540\tmailboxes\tmailbox\t28\t29\t7\tbox\tbox\tObjects\t\t\tmailbox\t3710193\tn03710193\tmailbox.n.01\tmisc\t40',
    '188\tshower door\tshower door\t19\t8\t12\tdoor\tdoor\tWall\tdoor\t\t\t\tn04208936\tshower.n.01\tdoor\t4',
    '28\tlamp base\tlamp\t15\t35\t7\tlamp\tlamp\tObjects\tlamp\t\tlamp\t3636649\tn03636649\tlamp.n.02\tlighting\t28',
    '1184\tfolded chair\tfolded chair\t14\t5\t4\tchair\tchair\tChair\tchair\tchair\tchair\t3001627\tn03001627\tchair.n.01\tchair\t3',
]
NOT_OBJECT_CLASSES = {"wall", "floor", "ceiling", "otherstructure", "otherfurniture", "otherprop"}


@pytest.fixture()
def scannet_tsv(tmp_path: Path) -> Path:
    f = tmp_path / "scannetv2-labels.combined.tsv"
    f.write_text(TSV_HEADER + "\n" + "\n".join(TSV_ROWS))  # the real file has no final newline
    return f


@pytest.mark.parametrize("raw, label", [
    ("clothing", "clothes"), ("bathroom stall door", "door"), ("paper bag", "bag"),
    ("bathroom cabinet", "cabinet"), ("stack of chairs", "stack of chairs"), ("shower door", "door"),
    ("folded chair", "chair"), ("mailboxes", "mailbox"), ("lamp base", "lamp"), ("closet doors", "door"),
    ("copier", "copier"), ("shoes", "shoes"), ("kitchen counter", "counter"), ("couch", "sofa")])
def test_scannet_map_keeps_the_categories_it_used_to_drop(scannet_map, raw, label):
    assert scannet_map.resolve(raw).label == label


def test_scannet_map_keeps_object_class_instances_of_the_tsv(scannet_tsv, scannet_map):
    import csv

    rows = list(csv.DictReader(scannet_tsv.open(newline=""), delimiter="\t"))
    objects = [r for r in rows if r["nyu40class"] not in NOT_OBJECT_CLASSES]
    kept = sum(int(r["count"]) for r in objects if scannet_map.resolve(r["raw_category"]).label)
    lost = {r["raw_category"] for r in objects if not scannet_map.resolve(r["raw_category"]).label}
    assert lost == {"person"}  # people move during a scan: excluded on purpose
    assert kept / sum(int(r["count"]) for r in objects) > 0.99
    assert all(scannet_map.knows(r["raw_category"]) for r in rows)
    assert "excluded" in scannet_map.resolve("person").reason
    assert scannet_map.resolve("shower walls").reason == "excluded label 'wall'"


def test_passing_the_tsv_changes_no_label_of_the_packaged_map(scannet_tsv, scannet_map):
    with_tsv = load_label_map("scannet", scannet_tsv)
    for row in TSV_ROWS:
        raw = row.split("\t")[1]
        assert with_tsv.resolve(raw) == scannet_map.resolve(raw), raw
    assert with_tsv.resolve("couch").label == "sofa" and with_tsv.resolve("shoes").label == "shoes"


def test_tsv_rows_the_map_does_not_know_extend_it_through_its_aliases(scannet_tsv):
    extra = ["9001\tgreen couch\tcouch\t3\t6\t9\tsofa\tsofa\tSofa\t\t\t\t\t\t\tsofa\t10",
             "9002\tflux capacitor\tflux capacitor\t1\t40\t7\t\totherprop\tObjects\t\t\t\t\t\t\tobjects\t39"]
    scannet_tsv.write_text(scannet_tsv.read_text() + "\n" + "\n".join(extra) + "\n")
    m = load_label_map("scannet", scannet_tsv)
    assert m.resolve("green couch").label == "sofa"  # the table's target read through the map's own aliases
    assert m.resolve("flux capacitor").label == "flux capacitor"
    assert load_label_map("scannet").resolve("flux capacitor").label is None


def test_a_tsv_without_the_columns_names_the_file(tmp_path: Path):
    f = tmp_path / "labels.tsv"
    f.write_text("raw\tcat\nchair\tchair\n")
    with pytest.raises(SceneError, match="raw_category") as err:
        load_label_map("scannet", f)
    assert str(f) in str(err.value)
