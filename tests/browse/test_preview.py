"""The optional `preview` column: off by default, deterministic, and pixel-free in reference mode."""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow.parquet as pq
from PIL import Image

from numerical3d.pipeline.shards import read_items


def _table(ds):
    return pq.read_table(sorted((ds / "data").glob("*.parquet"))[0])


def test_preview_is_off_by_default(dataset):
    assert "preview" not in _table(dataset).column_names
    assert "`preview` (image)" not in (dataset / "README.md").read_text()


def test_preview_column_adds_one_composite_per_item_and_changes_nothing_else(preview_dataset, dataset):
    from datasets import load_dataset

    with_preview, without = _table(preview_dataset), _table(dataset)
    assert with_preview.drop_columns(["preview"]).equals(without)
    ds = load_dataset(str(preview_dataset), split="train")
    assert ds.features["preview"].__class__.__name__ == "Image"
    assert ds[0]["preview"].size == (200, 100)
    assert "`preview` (image)" in (preview_dataset / "README.md").read_text()
    for rel in json.loads((dataset / "manifest.json").read_text())["files"]:
        if rel.startswith(("frames/", "scenes/")):
            assert (preview_dataset / rel).read_bytes() == (dataset / rel).read_bytes(), rel


def test_preview_bytes_are_reproducible_from_the_build_inputs(preview_dataset):
    from numerical3d.pipeline.build.assemble import exported_frames
    from numerical3d.pipeline.browse.preview import Previewer
    from numerical3d.pipeline.config import DatasetMix
    from numerical3d.pipeline.scene_geometry import read_scenes

    config = DatasetMix.model_validate(json.loads((preview_dataset / "manifest.json").read_text())["config"])
    work = preview_dataset.parent / f"{preview_dataset.name}.work"
    frames = exported_frames(sorted(str(p) for p in (work / "scenes").rglob("*.json")))
    previewer = Previewer(config.preview, read_scenes(preview_dataset), frames)
    stored = dict(zip(_table(preview_dataset)["id"].to_pylist(), _table(preview_dataset)["preview"].to_pylist()))
    items = [it for it in read_items(preview_dataset) if it.id in stored]
    subtasks = {}
    for it in items:
        subtasks.setdefault(it.subtask, it)
    for it in subtasks.values():
        assert previewer(it) == stored[it.id]["bytes"], it.subtask


def test_reference_previews_carry_no_pixels(scenes_tree, tmp_path, kit, preview_dataset):
    from numerical3d.pipeline.browse.raster import NO_PIXELS

    ref = kit.build(scenes_tree, tmp_path / "ref", preview={"enabled": True, "width": 200, "height": 100},
                    media={"mode": "reference"})
    table = _table(ref)
    subtask = table["subtask"].to_pylist()
    k = subtask.index("camera_distance")
    left = np.asarray(Image.open(io.BytesIO(table["preview"][k].as_py()["bytes"])).convert("RGB"))[:, :100]
    grey = np.all(np.abs(left.astype(int) - np.array(NO_PIXELS)) <= 6, axis=2)
    assert grey.mean() > 0.25  # the frame is a grey canvas (the drawings of a large object cover up to 2/3)
    embedded = _table(preview_dataset)
    k = embedded["id"].to_pylist().index(table["id"][k].as_py())
    left = np.asarray(Image.open(io.BytesIO(embedded["preview"][k].as_py()["bytes"])).convert("RGB"))[:, :100]
    assert np.all(np.abs(left.astype(int) - np.array(NO_PIXELS)) <= 6, axis=2).mean() < 0.2
    assert "carry no pixels" in (ref / "README.md").read_text()
