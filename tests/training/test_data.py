"""The data hand-off: frame/pixel budget and TRL rows from the pipeline-built dataset, whose
layout training reads from the dataset card's `configs`."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from PIL import Image

from numerical3d.training.config import DataConfig
from numerical3d.dataset import card_configs
from numerical3d.training.data import DatasetError, FrameBudget, conversation, load_items, prompt, prompt_dataset

from .conftest import TINY


@pytest.mark.parametrize(
    "n, k, expected",
    [(3, 8, [0, 1, 2]), (10, 4, [0, 3, 6, 9]), (10, 3, [0, 4, 9]), (9, 3, [0, 4, 8]), (5, 1, [2]), (0, 4, []),
     (5, 0, [])],
)
def test_frame_pick_uniform_keeps_ends(n, k, expected):
    assert FrameBudget(max_frames=k).pick(n) == expected


def test_pixel_budget():
    budget = FrameBudget(max_frames=8, max_pixels=10_000, max_total_pixels=24_000)
    assert budget.per_frame_pixels(2) == 10_000 and budget.per_frame_pixels(4) == 6_000
    small = budget.resize(Image.new("L", (40, 30)), 10_000)
    assert small.size == (40, 30) and small.mode == "RGB"  # never upscaled, always RGB
    big = budget.resize(Image.new("RGB", (400, 300)), 6_000)
    assert big.size[0] * big.size[1] <= 6_000 and abs(big.size[0] / big.size[1] - 4 / 3) < 0.05


def test_text_only_prompt_and_system_turn():
    class NoFrames:  # a frame store that must not be asked for frames
        def images(self, frame_ids):
            raise AssertionError(f"asked for {frame_ids}")

    for visual in ("images", "video"):
        framed = prompt("How far?", ["s/x/0", "s/x/1"], NoFrames(), FrameBudget(max_frames=0), visual=visual)
        assert framed.frames == [] and framed.video_metadata is None
        assert framed.turns == [{"role": "user", "content": [{"type": "text", "text": "How far?"}]}]
    assert conversation("Q", 1, "Be brief.") == [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Q"}]},
    ]


@TINY
@pytest.mark.slow
def test_prompt_rows_from_built_dataset(built_dataset):
    cfg = DataConfig(split="train", max_frames=2, max_pixels=64 * 48, max_total_pixels=2 * 64 * 48, max_items=10)
    rows, report = prompt_dataset(str(built_dataset), cfg)
    assert report.kept == 10 and not report.bad
    assert len(rows) == 10
    items = {r["id"]: r for r in load_items(str(built_dataset), cfg)}
    for row in rows:
        item = items[row["id"]]
        assert isinstance(row["verifier"], dict) and row["verifier"] == json.loads(item["verifier"])  # raw text there
        (turn,) = row["prompt"]
        assert turn["role"] == "user"
        parts = turn["content"]
        assert parts[-1] == {"type": "text", "text": item["question"]}
        assert len(parts) - 1 == len(row["images"]) == min(2, len(item["frames"]))
        for image in row["images"]:
            assert image.mode == "RGB" and image.size[0] * image.size[1] <= 64 * 48


@TINY
@pytest.mark.slow
def test_subtask_filter_and_errors(built_dataset, tmp_path):
    rows = load_items(str(built_dataset), DataConfig(split="train", subtasks=["object_size"]))
    assert len(rows) > 0 and set(rows["subtask"]) == {"object_size"}
    with pytest.raises(DatasetError, match="no items left"):
        load_items(str(built_dataset), DataConfig(split="train", subtasks=["no_such_task"]))
    with pytest.raises(DatasetError, match=r"config 'default' has no split 'nosplit' \(it has \['train', 'validation'\]\)"):
        load_items(str(built_dataset), DataConfig(split="nosplit"))
    with pytest.raises(DatasetError, match=f"{tmp_path}: missing manifest.json"):
        load_items(str(tmp_path), DataConfig())
    shutil.copy(built_dataset / "manifest.json", tmp_path / "manifest.json")
    with pytest.raises(DatasetError, match=f"{tmp_path}: no readable dataset card"):
        load_items(str(tmp_path), DataConfig())
    (tmp_path / "README.md").write_text("---\nlicense: other\n---\n# no configs\n")
    with pytest.raises(DatasetError, match=r"README.md: the YAML header declares no `configs`"):
        load_items(str(tmp_path), DataConfig())
    shutil.copy(built_dataset / "README.md", tmp_path / "README.md")  # the card, without its shards
    with pytest.raises(DatasetError, match=r"data/train-00000-of-\d{5}-[0-9a-f]{8}\.parquet.* missing \(config 'default', split 'train'"):
        load_items(str(tmp_path), DataConfig())


def _header(card: str) -> tuple[dict, str]:
    _, header, body = card.split("---\n", 2)
    return yaml.safe_load(header), body


@TINY
@pytest.mark.slow
def test_layout_comes_from_the_card_configs(built_dataset, tmp_path):
    """Shards renamed and moved, and the card updated to match: training follows the card."""
    moved = tmp_path / "moved"
    shutil.copytree(built_dataset, moved)
    meta, body = _header((moved / "README.md").read_text())
    assert {c["config_name"] for c in meta["configs"]} == {"default", "frames", "scenes"}
    for config in meta["configs"]:
        for entry in config["data_files"]:
            folder = f"{config['config_name']}-shards"
            (moved / folder).mkdir(exist_ok=True)
            for shard in sorted(p for pattern in ([entry["path"]] if isinstance(entry["path"], str) else entry["path"])
                                for p in moved.glob(pattern)):
                shard.rename(moved / folder / f"part-{entry['split']}-{shard.name}")
            entry["path"] = f"{folder}/part-{entry['split']}-*.parquet"
    (moved / "README.md").write_text(f"---\n{yaml.safe_dump(meta, sort_keys=False)}---\n{body}")
    assert not list((moved / "data").glob("*.parquet")) and not list((moved / "frames").glob("*.parquet"))
    assert card_configs(moved)["default"]["train"] == ["default-shards/part-train-*.parquet"]
    cfg = DataConfig(split="train", max_frames=2, max_pixels=64 * 48, max_total_pixels=2 * 64 * 48, max_items=6)
    original, _ = prompt_dataset(str(built_dataset), cfg)
    rows, _ = prompt_dataset(str(moved), cfg)
    assert [r["id"] for r in rows] == [r["id"] for r in original]
    for got, want in zip(rows, original):
        assert got["prompt"] == want["prompt"] and got["verifier"] == want["verifier"]
        assert [im.tobytes() for im in got["images"]] == [im.tobytes() for im in want["images"]]


def _damaged_copy(built_dataset, tmp_path):
    """The built dataset with one malformed verifier spec, one item naming an absent frame and two
    frameless items, written back in the same parquet schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    copy = tmp_path / "damaged"
    shutil.copytree(built_dataset, copy)
    (shard,) = sorted((copy / "data").glob("train-*.parquet"))
    table = pq.read_table(shard)
    rows = table.to_pylist()
    ids = [r["id"] for r in rows[:4]]
    rows[0]["verifier"] = '{"kind": "numeric", "unit": "cm", "version": 1}'  # no answer
    rows[1]["frames"] = ["synthetic/no_such_scene/0"]
    rows[2]["frames"] = []
    rows[3]["frames"] = []
    for r in rows[1:]:
        r["verifier"] = json.dumps(r["verifier"]) if isinstance(r["verifier"], dict) else r["verifier"]
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), shard)
    return copy, ids


@TINY
@pytest.mark.slow
def test_bad_and_frameless_rows_are_reported_not_fatal(built_dataset, tmp_path):
    damaged, (bad_spec, bad_frame, frameless_a, frameless_b) = _damaged_copy(built_dataset, tmp_path)
    cfg = DataConfig(split="train", max_frames=2, max_pixels=56 * 56, max_total_pixels=2 * 56 * 56)
    rows, report = prompt_dataset(str(damaged), cfg)
    total = len(load_items(str(built_dataset), DataConfig(split="train")))
    assert report.loaded == total and report.kept == len(rows) == total - 4
    reasons = {b["id"]: b["reason"] for b in report.bad}
    assert set(reasons) == {bad_spec, bad_frame}
    assert reasons[bad_spec].startswith("verifier:") and "answer" in reasons[bad_spec]
    assert "no_such_scene" in reasons[bad_frame]
    assert sorted(report.frameless) == sorted([frameless_a, frameless_b])
    assert not {bad_spec, bad_frame, frameless_a, frameless_b} & set(rows["id"])
    written = json.loads(report.write(tmp_path / "report.json").read_text())
    assert written["bad"] == report.bad and written["kept"] == report.kept

    text_rows, text_report = prompt_dataset(str(damaged), cfg.model_copy(update={"frameless": "text"}))
    assert text_report.kept == total - 2 and {frameless_a, frameless_b} <= set(text_rows["id"])
    assert all(row["images"] == [] for row in text_rows)  # a text-only run: no batch mixes images and none
