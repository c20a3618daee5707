"""Dataset rows -> TRL-ready conversational rows with images, in one call.

TRL's GRPO trainer takes a conversational `prompt` (a list of chat messages) and, for vision
language models, the images in an `images` column; every other column (here `verifier`,
`subtask`, `answer`, `id`) reaches the reward functions as a keyword argument, so the AP-GRPO
reward needs nothing but the row. Usage:

    from pipeline.trl_rows import trl_dataset
    train = trl_dataset("path/to/dataset", split="train", max_images=8)
    train[0]  # {"prompt": [...], "images": [PIL.Image, ...], "verifier": {...}, ...}

Rows are built lazily (`Dataset.with_transform`), so images are decoded only when a batch
is drawn and no copy of the pixels is made.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

KEEP = ("id", "subtask", "answer", "verifier", "source", "scene_id")


class FrameStore:
    """Frame id -> PIL image from a dataset folder's `frames` shards.

    Reads the parquet files directly (ids up front, pixels one row group at a time, on
    demand), so a hydrated folder is seen as it is now, with no dataset cache in between.
    """

    def __init__(self, folder: str | Path, split: str | None = None):
        import pyarrow.parquet as pq

        self.folder = Path(folder)
        pattern = f"{split}-*.parquet" if split else "*.parquet"
        self._files = [pq.ParquetFile(p) for p in sorted((self.folder / "frames").glob(pattern))]
        if not self._files:
            raise FileNotFoundError(f"{self.folder / 'frames'}: no frames shards matching {pattern}")
        self._index: dict[str, tuple[int, int, int]] = {}
        for f, pf in enumerate(self._files):
            for g in range(pf.num_row_groups):
                ids = pf.read_row_group(g, columns=["frame_id"])["frame_id"].to_pylist()
                for r, fid in enumerate(ids):
                    self._index[fid] = (f, g, r)
        self._cached: tuple[tuple[int, int], list[Any]] | None = None

    def __contains__(self, fid: str) -> bool:
        return fid in self._index

    def __call__(self, fid: str) -> Any:
        from PIL import Image

        try:
            f, g, r = self._index[fid]
        except KeyError:
            raise KeyError(f"{self.folder}: frame {fid!r} is not in the frames config") from None
        if self._cached is None or self._cached[0] != (f, g):
            self._cached = ((f, g), self._files[f].read_row_group(g, columns=["image"])["image"].to_pylist())
        image = self._cached[1][r]
        if image is None or image.get("bytes") is None:
            raise ValueError(
                f"{self.folder}: frame {fid!r} has no pixels (media published by reference); "
                "run `numerical3d hydrate` with your own copy of the source first"
            )
        return Image.open(io.BytesIO(image["bytes"]))


def pick_frames(frames: list[str], max_images: int | None) -> list[str]:
    """At most `max_images` frame ids, spread evenly and keeping the first and last (temporal order kept)."""
    if max_images is None or len(frames) <= max_images:
        return list(frames)
    idx = np.unique(np.round(np.linspace(0, len(frames) - 1, max_images)).astype(int))
    return [frames[i] for i in idx]


def to_trl_row(
    row: Mapping[str, Any],
    frames: Callable[[str], Any] | Mapping[str, Any] | None,
    *,
    max_images: int | None = None,
    system_prompt: str | None = None,
) -> dict[str, Any]:
    """One dataset row (as `load_dataset` returns it) -> a TRL conversational row with `images`.

    `frames` maps a frame id to an image (a `FrameStore`, a dict, or any callable); None gives a
    text-only row. The user turn holds one image placeholder per image, then the question.
    """
    ids = pick_frames(list(row.get("frames") or []), max_images) if frames is not None else []
    get = frames.__getitem__ if isinstance(frames, Mapping) else frames
    images = [get(fid) for fid in ids]
    content = [{"type": "image"} for _ in images] + [{"type": "text", "text": row["question"]}]
    prompt = [{"role": "system", "content": [{"type": "text", "text": system_prompt}]}] if system_prompt else []
    prompt.append({"role": "user", "content": content})
    out = {k: row[k] for k in KEEP if k in row}
    out["prompt"] = prompt
    out["images"] = images
    return out


def trl_dataset(
    folder: str | Path,
    split: str = "train",
    *,
    max_images: int | None = 8,
    system_prompt: str | None = None,
    with_images: bool = True,
):
    """The split as a `datasets.Dataset` whose rows are TRL-ready (see `to_trl_row`)."""
    from datasets import load_dataset

    ds = load_dataset(str(folder), split=split)
    store = FrameStore(folder, split) if with_images else None

    def transform(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        n = len(batch["id"])
        rows = [
            to_trl_row({k: v[i] for k, v in batch.items()}, store, max_images=max_images, system_prompt=system_prompt)
            for i in range(n)
        ]
        return {k: [r[k] for r in rows] for k in rows[0]} if rows else {}

    return ds.with_transform(transform)
