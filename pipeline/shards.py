"""Item and frame shards in the Hugging Face Hub layout: their features, columns and readers.

- `data/<split>-NNNNN-of-NNNNN.parquet` (config `default`): one row per item.
- `frames/<split>-NNNNN-of-NNNNN.parquet` (config `frames`): one row per scene frame that the
  split's items refer to, with the JPEG embedded (`media.mode: embed`) or no pixels at all
  (`media.mode: reference`; `numerical3d hydrate` rebuilds them from the user's own copy).

The streaming, atomic writer is `pipeline.parquet`; the whole folder (shards, scenes, card,
manifest) is written by `pipeline.writer`. Names and folders: `pipeline.layout`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from numerical3d.dataset import DatasetFolder
from numerical3d.pipeline.config import ShardOptions
from numerical3d.pipeline.frames import EncodedFrame, encode_pixels
from numerical3d.pipeline.hub_features import Features, Image, Json, List, Value, arrow_schema
from numerical3d.pipeline.items import Item, parse_frame_id
from numerical3d.pipeline.layout import DATA, FRAMES
from numerical3d.pipeline.parquet import ShardSet, batched, write_config
from numerical3d.pipeline.templating import question_of

ITEM_FEATURES: Features = {
    "id": Value("string"),
    "source": Value("string"),
    "scene_id": Value("string"),
    "subtask": Value("string"),
    "question": Value("string"),
    "answer": Value("string"),
    "verifier": Json(),
    "frames": List(Value("string")),
    "options": List(Value("string")),
    "provenance": Json(),
}

FRAME_FEATURES: Features = {
    "frame_id": Value("string"),
    "image": Image(),
    "width": Value("int32"),
    "height": Value("int32"),
    "pixel_sha256": Value("string"),  # sha256 of the stored RGB pixels (after resizing), to check hydration
}

# frame id -> the shard's JPEG (`EncodedFrame`, stored as it is) or RGB uint8 (H, W, 3) pixels (encoded once)
FrameProvider = Callable[[str], EncodedFrame | np.ndarray]


def _default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"{type(obj).__name__} is not JSON-serialisable")


def _dumps(obj: Any, what: str) -> str:
    """Canonical compact JSON (sorted keys) via orjson (a dependency of prefect), ~7x faster than
    `json.dumps`. orjson writes NaN/inf as null, so any `null` is re-checked strictly."""
    try:
        out = orjson.dumps(obj, default=_default, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY)
        if b"null" in out:
            json.dumps(obj, allow_nan=False, default=_default)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what}: not JSON-serialisable without NaN/inf: {exc}") from exc
    return out.decode()


def item_columns(items: list[Item], previews: Any = None) -> dict[str, pa.Array]:
    """Arrow columns for a batch of items (vectorised per column), plus `preview` when a
    `pipeline.browse.preview.Previewer` is given."""
    columns = {
        "id": pa.array([i.id for i in items], pa.string()),
        "source": pa.array([i.source for i in items], pa.string()),
        "scene_id": pa.array([i.scene_id for i in items], pa.string()),
        "subtask": pa.array([i.subtask for i in items], pa.string()),
        "question": pa.array([i.prompt for i in items], pa.string()),  # what a model reads
        "answer": pa.array([i.answer for i in items], pa.string()),
        "verifier": pa.array([_dumps(i.verifier, f"item {i.id} verifier") for i in items], pa.json_()),
        "frames": pa.array([list(i.frames) for i in items], pa.list_(pa.string())),
        "options": pa.array([None if i.options is None else list(i.options) for i in items], pa.list_(pa.string())),
        "provenance": pa.array([_dumps(i.provenance, f"item {i.id} provenance") for i in items], pa.json_()),
    }
    if previews is not None:
        columns["preview"] = previews.column(items)
    return columns


def write_items(root: Path, split: str, items: Iterable[Item], options: ShardOptions) -> tuple[list[Path], int]:
    """Write one split's items; returns the shard paths and the row count."""
    return write_config(root, DATA, split, arrow_schema(ITEM_FEATURES),
                        (item_columns(batch) for batch in batched(items, options.row_group_size)),
                        options.rows_per_shard, options)


def frame_rows(
    frame_ids: Iterable[str],
    provider: FrameProvider | None,
    *,
    embed: bool,
    longest_side: int,
    quality: int,
) -> Iterator[dict[str, Any]]:
    """One frames-config row per id. Without pixels (reference mode, no provider) only the id is known.

    An `EncodedFrame` from the provider is stored as it is (bytes copied, nothing decoded); RGB
    pixels are resized and encoded once here.
    """
    for fid in frame_ids:
        if provider is None:
            yield {"frame_id": fid, "image": None, "width": None, "height": None, "pixel_sha256": None}
            continue
        got = provider(fid)
        enc = got if isinstance(got, EncodedFrame) else encode_pixels(got, longest_side, quality, fid)
        yield {
            "frame_id": fid,
            "image": {"bytes": enc.data, "path": None} if embed else None,
            "width": enc.width,
            "height": enc.height,
            "pixel_sha256": enc.pixel_sha256,
        }


def frame_columns(rows: list[dict[str, Any]]) -> dict[str, pa.Array]:
    return {
        "frame_id": pa.array([r["frame_id"] for r in rows], pa.string()),
        "image": pa.array(
            [r["image"] for r in rows], pa.struct([("bytes", pa.binary()), ("path", pa.string())])
        ),
        "width": pa.array([r["width"] for r in rows], pa.int32()),
        "height": pa.array([r["height"] for r in rows], pa.int32()),
        "pixel_sha256": pa.array([r["pixel_sha256"] for r in rows], pa.string()),
    }


def write_frames(
    root: Path,
    split: str,
    frame_ids: Iterable[str],
    provider: FrameProvider | None,
    options: ShardOptions,
    *,
    embed: bool,
    longest_side: int,
    quality: int,
) -> tuple[list[Path], int]:
    """Write one split's frames config (ids in the given order)."""
    if embed and provider is None:
        raise ValueError("media mode 'embed' needs a frame provider (or use media mode 'reference')")
    shards = ShardSet(root, FRAMES, split, arrow_schema(FRAME_FEATURES), options.frames_per_shard, options)
    group = min(options.row_group_size, options.frames_per_shard)
    try:
        rows = frame_rows(frame_ids, provider, embed=embed, longest_side=longest_side, quality=quality)
        for batch in batched(rows, group):
            shards.write(frame_columns(batch))
    except BaseException:
        shards.abort()
        raise
    return shards.close(), shards.rows


def item_from_row(row: dict[str, Any]) -> Item:
    """The item of a `default`-config row (its JSON columns parsed; a `preview` column is ignored).

    The published `question` column is the prompt a model reads; the bare question is its head
    (`question_of`). The `frames` column's ids give the frame indices; an id of another scene is
    refused, since the item could not point at it.
    """
    indices = []
    for fid in row.get("frames") or []:
        source, scene_id, index = parse_frame_id(fid)
        if (source, scene_id) != (row["source"], row["scene_id"]):
            raise ValueError(f"item {row['id']}: frame {fid} is not of its scene {row['source']}/{row['scene_id']}")
        indices.append(index)
    return Item(id=row["id"], source=row["source"], scene_id=row["scene_id"], subtask=row["subtask"],
                question=question_of(row["question"]), prompt=row["question"], answer=row["answer"],
                verifier=json.loads(row["verifier"]), frame_indices=indices, options=row.get("options"),
                provenance=json.loads(row["provenance"]))


def read_items(dataset: str | Path | DatasetFolder, split: str | None = None) -> Iterator[Item]:
    """Stream the items of a dataset folder (one split, or all), one row group at a time, in file order."""
    folder = dataset if isinstance(dataset, DatasetFolder) else DatasetFolder(dataset)
    for _, row in folder.rows("default", split):
        yield item_from_row(row)
