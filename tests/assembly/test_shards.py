"""Shards: round trip through load_dataset, byte-identical rebuilds, atomic writes, frames."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pyarrow.parquet as pq
import pytest
from datasets import load_dataset

from numerical3d.pipeline.sampling import sample
from numerical3d.pipeline.frames import resize_longest
from numerical3d.pipeline.hub_features import arrow_schema
from numerical3d.pipeline.shards import FRAME_FEATURES, ITEM_FEATURES, read_items
from numerical3d.pipeline.writer import write_dataset


def same(a, b) -> bool:
    """Equal, except that floats may differ in the last bit (datasets decodes Json with pandas'
    ujson, which is not correctly rounded; the stored JSON text itself is exact, see below)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= 2 * math.ulp(max(abs(a), abs(b)))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


def published(item) -> dict:
    """The row an item is published as: its prompt in `question`, its frames by id."""
    d = item.to_dict()
    del d["frame_indices"], d["prompt"]
    return {**d, "question": item.prompt, "frames": item.frames}


def test_load_dataset_gives_back_exactly_the_items_and_features(built):
    ds = load_dataset(str(built.dir))
    assert sorted(ds) == ["test", "train"]
    for split, items in built.selection.splits.items():
        assert ds[split].features.arrow_schema.equals(arrow_schema(ITEM_FEATURES), check_metadata=True)
        rows = [dict(r) for r in ds[split]]
        assert len(rows) == len(items)
        for row, item in zip(rows, items):
            assert same(row, published(item)), (row, published(item))
        # the stored JSON text round-trips exactly
        raw = ds[split].with_format("arrow")[:]
        assert [json.loads(v) for v in raw["verifier"].to_pylist()] == [i.verifier for i in items]
        assert [json.loads(v) for v in raw["provenance"].to_pylist()] == [i.provenance for i in items]
    frames = load_dataset(str(built.dir), "frames")
    assert frames["train"].features.arrow_schema.equals(arrow_schema(FRAME_FEATURES), check_metadata=True)
    wanted = sorted({f for i in built.selection.splits["train"] for f in i.frames})
    assert frames["train"]["frame_id"] == wanted
    img = frames["train"][0]["image"]
    assert max(img.size) == 32 and img.format == "JPEG"  # longest side from the config (64 -> 32)


def test_read_items_streams_the_same_items(built):
    assert [i.to_dict() for i in read_items(built.dir, "test")] == [i.to_dict() for i in built.selection.splits["test"]]


def test_shard_names_and_row_groups(built):
    names = sorted(p.name for p in (built.dir / "data").iterdir())
    n_train = len(built.selection.splits["train"])
    k = -(-n_train // 16)
    train = [n for n in names if n.startswith("train")]
    assert [n[: -len("-12345678.parquet")] for n in train] == [f"train-{i:05d}-of-{k:05d}" for i in range(k)]
    for n in train:  # the tag is the file's own sha256: another content, another name
        assert n[-len("12345678.parquet"):-len(".parquet")] == hashlib.sha256((built.dir / "data" / n).read_bytes()).hexdigest()[:8]
    meta = pq.ParquetFile(built.dir / "data" / names[-1]).metadata
    assert all(meta.row_group(g).num_rows <= 8 for g in range(meta.num_row_groups))
    assert not [p for p in built.dir.rglob(".*") if p.is_file()]  # no temp file of a shard left behind


def test_manifest_hashes_every_file(built):
    import hashlib

    files = built.manifest["files"]
    on_disk = sorted(str(p.relative_to(built.dir)) for p in built.dir.rglob("*") if p.is_file() and p.name != "manifest.json")
    assert sorted(files) == on_disk
    for rel, entry in files.items():
        assert hashlib.sha256((built.dir / rel).read_bytes()).hexdigest() == entry["sha256"]
    m = json.loads((built.dir / "manifest.json").read_text())
    assert m["seed"] == 0 and m["config"]["total"] == 60
    assert m["counts"]["items"] == {s: len(v) for s, v in built.selection.splits.items()}
    assert m["counts"]["subtasks"]["abs_distance"] == 18
    assert "version" in m["code_version"]


def test_same_config_and_seed_byte_identical_other_seed_differs(tmp_path, kit):
    cfg = kit.make_config()
    items = kit.make_candidates(kit.SCENES)
    hashes = []
    for n, seed in enumerate([11, 11, 12]):
        sel, rep = sample(items if n != 1 else items[::-1], cfg, seed=seed)
        out = tmp_path / f"b{n}"
        manifest = write_dataset(sel, kit.fake_frame, out, cfg, report=rep)
        hashes.append({k: v["sha256"] for k, v in manifest["files"].items()})
    shards = lambda h: {k: v for k, v in h.items() if k.endswith(".parquet")}  # noqa: E731
    assert shards(hashes[0]) == shards(hashes[1])
    assert hashes[0] == hashes[1]  # card and plots too
    assert shards(hashes[0]) != shards(hashes[2])


def test_interrupted_build_leaves_no_complete_looking_shard(tmp_path, kit):
    cfg = kit.make_config()
    sel, rep = sample(kit.make_candidates(kit.SCENES), cfg, seed=0)
    calls = {"n": 0}

    def flaky(fid: str) -> np.ndarray:
        calls["n"] += 1
        if calls["n"] > 5:
            raise OSError("disk went away")
        return kit.fake_frame(fid)

    with pytest.raises(OSError, match="disk went away"):
        write_dataset(sel, flaky, tmp_path / "out", cfg, report=rep)
    out = tmp_path / "out"
    assert not (out / "manifest.json").exists()
    assert not list(out.glob("frames/*.parquet"))  # no frames shard under a final name
    assert not [p for p in out.rglob(".*") if p.is_file()]  # partial (temp) shards removed on failure
    # A rerun over the same folder completes and removes nothing it should keep.
    manifest = write_dataset(sel, kit.fake_frame, out, cfg, report=rep)
    assert (out / "manifest.json").exists() and manifest["counts"]["frames"]


def test_rebuild_removes_stale_shards(tmp_path, kit):
    cfg = kit.make_config()
    sel, rep = sample(kit.make_candidates(kit.SCENES), cfg, seed=0)
    write_dataset(sel, kit.fake_frame, tmp_path, cfg, report=rep)
    small = kit.make_config(total=10)
    sel2, rep2 = sample(kit.make_candidates(kit.SCENES), small, seed=0)
    manifest = write_dataset(sel2, kit.fake_frame, tmp_path, small, report=rep2)
    on_disk = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.parquet"))
    assert on_disk == sorted(f for f in manifest["files"] if f.endswith(".parquet"))


def test_reference_mode_publishes_no_pixels(tmp_path, kit):
    cfg = kit.make_config(media={"mode": "reference", "longest_side": 32})
    sel, rep = sample(kit.make_candidates(kit.SCENES), cfg, seed=0)
    write_dataset(sel, None, tmp_path, cfg, report=rep)
    frames = load_dataset(str(tmp_path), "frames")
    assert all(r["image"] is None for r in frames["train"])
    with pytest.raises(ValueError, match="embed"):
        write_dataset(sel, None, tmp_path / "x", kit.make_config(), report=rep)


def test_plain_item_list_needs_its_split(tmp_path, kit):
    from numerical3d.pipeline.items import Item

    cfg = kit.make_config()
    item = kit.make_candidates(kit.SCENES[:1], per_scene=1)[0]
    with pytest.raises(ValueError, match="provenance\\['split'\\]"):
        write_dataset([item], kit.fake_frame, tmp_path, cfg, seed=0)
    one = kit.make_config(splits={"train": 1.0})
    m = write_dataset([item], kit.fake_frame, tmp_path, one, seed=0)
    assert m["counts"]["items"] == {"train": 1}
    bad = Item(**{**item.to_dict(), "verifier": {"kind": "numeric", "answer": float("nan")}})
    with pytest.raises(ValueError, match=f"item {item.id} verifier"):
        write_dataset([bad], kit.fake_frame, tmp_path / "nan", one, seed=0)


def test_resize_longest_never_upscales():
    img = np.zeros((480, 640, 3), np.uint8)
    assert resize_longest(img, 320).shape == (240, 320, 3)
    assert resize_longest(img, 1000).shape == (480, 640, 3)
