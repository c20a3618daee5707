"""The data hand-off: frame/pixel budget and TRL rows from the pipeline-built dataset."""

from __future__ import annotations

import pytest
from PIL import Image

from training.config import DataConfig
from training.data import DatasetError, FrameBudget, load_items, prompt_dataset


@pytest.mark.parametrize(
    "n, k, expected",
    [(3, 8, [0, 1, 2]), (10, 4, [0, 3, 6, 9]), (9, 3, [0, 4, 8]), (5, 1, [2]), (0, 4, [])],
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


@pytest.mark.slow
def test_prompt_rows_from_built_dataset(built_dataset):
    cfg = DataConfig(split="train", max_frames=2, max_pixels=64 * 48, max_total_pixels=2 * 64 * 48, max_items=10)
    rows = prompt_dataset(str(built_dataset), cfg)
    assert len(rows) == 10
    items = {r["id"]: r for r in load_items(str(built_dataset), cfg)}
    for row in rows:
        item = items[row["id"]]
        assert isinstance(row["verifier"], dict) and row["verifier"] == item["verifier"]
        (turn,) = row["prompt"]
        assert turn["role"] == "user"
        parts = turn["content"]
        assert parts[-1] == {"type": "text", "text": item["question"]}
        assert len(parts) - 1 == len(row["images"]) == min(2, len(item["frames"]))
        for image in row["images"]:
            assert image.mode == "RGB" and image.size[0] * image.size[1] <= 64 * 48


@pytest.mark.slow
def test_subtask_filter_and_errors(built_dataset, tmp_path):
    rows = load_items(str(built_dataset), DataConfig(split="train", subtasks=["object_count"]))
    assert len(rows) > 0 and set(rows["subtask"]) == {"object_count"}
    with pytest.raises(DatasetError, match="no items left"):
        load_items(str(built_dataset), DataConfig(split="train", subtasks=["no_such_task"]))
    with pytest.raises(DatasetError, match="no data/nosplit"):
        load_items(str(built_dataset), DataConfig(split="nosplit"))
    with pytest.raises(DatasetError, match=str(tmp_path)):
        load_items(str(tmp_path), DataConfig())
