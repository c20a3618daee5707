"""Streaming, atomic, reproducible parquet shards in the Hugging Face Hub layout.

- `data/<split>-NNNNN-of-NNNNN.parquet` (config `default`): one row per item.
- `frames/<split>-NNNNN-of-NNNNN.parquet` (config `frames`): one row per scene frame that the
  split's items refer to, with the JPEG embedded (`media.mode: embed`) or no pixels at all
  (`media.mode: reference`; `numerical3d hydrate` rebuilds them from the user's own copy).

Rows are written a row group at a time with `pyarrow.parquet.ParquetWriter`, so memory does not
grow with the number of items. Each shard is written under a hidden temp name (`sources.io`) and
committed only once the whole split is written (the final name carries the shard count), so an
interrupted build never leaves a file that looks complete. Names and folders: `pipeline.layout`.
Writer options are fixed and nothing time-dependent is written, so the same rows give
byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Features, Image, Json, List, Value

from numerical3d.pipeline.config import BuildConfig, ShardOptions
from numerical3d.pipeline.frames import resize_longest
from numerical3d.pipeline.items import Item, parse_frame_id
from numerical3d.pipeline.layout import DATA, FRAMES, OWNED_GLOBS, shard_name, shard_pattern
from numerical3d.sources.io import commit, temp_beside

ITEM_FEATURES = Features(
    {
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
)

FRAME_FEATURES = Features(
    {
        "frame_id": Value("string"),
        "image": Image(),
        "width": Value("int32"),
        "height": Value("int32"),
        "pixel_sha256": Value("string"),  # sha256 of the stored RGB pixels (after resizing), to check hydration
    }
)

FrameProvider = Callable[[str], np.ndarray]  # frame id -> RGB uint8 (H, W, 3)


def _schema(features: Features) -> pa.Schema:
    """The arrow schema with the `huggingface` features metadata `load_dataset` reads back."""
    return features.arrow_schema


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
        "question": pa.array([i.question for i in items], pa.string()),
        "answer": pa.array([i.answer for i in items], pa.string()),
        "verifier": pa.array([_dumps(i.verifier, f"item {i.id} verifier") for i in items], pa.json_()),
        "frames": pa.array([list(i.frames) for i in items], pa.list_(pa.string())),
        "options": pa.array([None if i.options is None else list(i.options) for i in items], pa.list_(pa.string())),
        "provenance": pa.array([_dumps(i.provenance, f"item {i.id} provenance") for i in items], pa.json_()),
    }
    if previews is not None:
        columns["preview"] = previews.column(items)
    return columns


@dataclass
class ShardSet:
    """Streams the rows of one config and split into shards; `close()` publishes them."""

    root: Path
    folder: str  # layout.DATA or layout.FRAMES
    split: str
    schema: pa.Schema
    rows_per_shard: int
    options: ShardOptions
    _partials: list[Path] = field(default_factory=list)
    _writer: pq.ParquetWriter | None = None
    _rows_in_shard: int = 0
    rows: int = 0

    def _open(self) -> None:
        path = temp_beside(self.root / self.folder / f"{self.split}-{len(self._partials):05d}.parquet")
        compression = None if self.options.compression == "none" else self.options.compression
        level = self.options.compression_level if compression in ("zstd", "gzip") else None
        self._writer = pq.ParquetWriter(
            path,
            self.schema,
            compression=compression,
            compression_level=level,
            use_dictionary=False,
            write_statistics=True,
            data_page_size=1 << 20,
            write_page_index=False,
            store_schema=True,
        )
        self._partials.append(path)
        self._rows_in_shard = 0

    def write(self, columns: dict[str, pa.Array]) -> None:
        """Write a batch (at most one row group), starting a new shard when this one is full."""
        table = pa.table(columns, schema=self.schema)
        start = 0
        while start < table.num_rows:
            if self._writer is None or self._rows_in_shard >= self.rows_per_shard:
                self._close_writer()
                self._open()
            take = min(self.rows_per_shard - self._rows_in_shard, table.num_rows - start)
            self._writer.write_table(table.slice(start, take), row_group_size=self.options.row_group_size)
            self._rows_in_shard += take
            self.rows += take
            start += take

    def _close_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def close(self) -> list[Path]:
        """Finish the last shard and commit every shard under its final `-NNNNN-of-NNNNN` name."""
        self._close_writer()
        n = len(self._partials)
        final = []
        for i, partial in enumerate(self._partials):
            target = partial.parent / shard_name(self.split, i, n)
            commit(partial, target)
            final.append(target)
        return final

    def abort(self) -> None:
        """Remove the partial shards (the build failed)."""
        self._close_writer()
        for p in self._partials:
            p.unlink(missing_ok=True)


def batched(it: Iterable[Any], n: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for x in it:
        batch.append(x)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def write_config(root: Path, folder: str, split: str, schema: pa.Schema, batches: Iterable[dict[str, pa.Array]],
                 rows_per_shard: int, options: ShardOptions) -> tuple[list[Path], int]:
    """Write one split of a config from column batches; returns the shard paths and the row count
    (a failure removes the partial shards)."""
    shards = ShardSet(root, folder, split, schema, rows_per_shard, options)
    try:
        for columns in batches:
            shards.write(columns)
    except BaseException:
        shards.abort()
        raise
    return shards.close(), shards.rows


def write_items(root: Path, split: str, items: Iterable[Item], options: ShardOptions) -> tuple[list[Path], int]:
    """Write one split's items; returns the shard paths and the row count."""
    return write_config(root, DATA, split, _schema(ITEM_FEATURES),
                        (item_columns(batch) for batch in batched(items, options.row_group_size)),
                        options.rows_per_shard, options)


def encode_frame(rgb: np.ndarray, longest_side: int, quality: int, frame: str = "frame") -> tuple[bytes, np.ndarray]:
    """(JPEG bytes, stored RGB pixels) for one frame; deterministic for the same pixels."""
    rgb = np.asarray(rgb)
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"{frame}: frame provider must return RGB uint8 (H, W, 3), got {rgb.dtype} {rgb.shape}")
    small = np.ascontiguousarray(resize_longest(rgb, longest_side))
    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(small, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError(f"{frame}: JPEG encoding failed")
    return buf.tobytes(), small


def frame_rows(
    frame_ids: Iterable[str],
    provider: FrameProvider | None,
    *,
    embed: bool,
    longest_side: int,
    quality: int,
) -> Iterator[dict[str, Any]]:
    """One frames-config row per id. Without pixels (reference mode, no provider) only the id is known."""
    for fid in frame_ids:
        if provider is None:
            yield {"frame_id": fid, "image": None, "width": None, "height": None, "pixel_sha256": None}
            continue
        data, small = encode_frame(provider(fid), longest_side, quality, fid)
        # The hash is of the decoded JPEG, what a user gets back, so hydration can be checked exactly.
        decoded = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        yield {
            "frame_id": fid,
            "image": {"bytes": data, "path": None} if embed else None,
            "width": int(small.shape[1]),
            "height": int(small.shape[0]),
            "pixel_sha256": hashlib.sha256(decoded.tobytes()).hexdigest(),
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
    shards = ShardSet(root, FRAMES, split, _schema(FRAME_FEATURES), options.frames_per_shard, options)
    group = min(options.row_group_size, options.frames_per_shard)
    try:
        rows = frame_rows(frame_ids, provider, embed=embed, longest_side=longest_side, quality=quality)
        for batch in batched(rows, group):
            shards.write(frame_columns(batch))
    except BaseException:
        shards.abort()
        raise
    return shards.close(), shards.rows


def read_items(root: str | Path, split: str | None = None) -> Iterator[Item]:
    """Stream the items back from the shards (one row group at a time), in file order."""
    root = Path(root)
    pattern = shard_pattern(split)
    paths = sorted((root / DATA).glob(pattern))
    if not paths:
        raise FileNotFoundError(f"{root / DATA}: no shards matching {pattern}")
    for path in paths:
        pf = pq.ParquetFile(path)
        for g in range(pf.num_row_groups):
            for row in pf.read_row_group(g).to_pylist():
                row["verifier"] = json.loads(row["verifier"])
                row["provenance"] = json.loads(row["provenance"])
                yield Item.from_dict(row)


def clear_outputs(root: Path) -> None:
    """Remove a previous build's files (manifest first, so the folder never looks complete meanwhile)."""
    for pattern in OWNED_GLOBS:
        for path in sorted(root.glob(pattern)):
            if path.is_file():
                path.unlink()


def split_of(item: Item, config_splits: dict[str, float]) -> str:
    """The split an item was sampled into (`provenance["split"]`); a single-split config needs none."""
    split = item.provenance.get("split")
    if split is None:
        if len(config_splits) == 1:
            return next(iter(config_splits))
        raise ValueError(f"item {item.id}: no provenance['split'] (items must come from pipeline.sampling.sample)")
    if split not in config_splits:
        raise ValueError(f"item {item.id}: split {split!r} is not in the config's splits {sorted(config_splits)}")
    return split


def write_dataset(
    selection: Iterable[Item],
    frames_provider: FrameProvider | None,
    out_dir: str | Path,
    config: BuildConfig,
    *,
    seed: int | None = None,
    report: Any = None,
    code: str | None = None,
    scenes: Mapping[tuple[str, str], Any] | None = None,
    quarantine: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Write shards, frames, card, plots and manifest for the selected items; returns the manifest.

    `selection` is a `pipeline.sampling.Selection` or any iterable of its items (each knows its
    split), consumed once and streamed. `frames_provider(frame_id)` returns RGB pixels; it may be
    None in `reference` media mode (the frames config then lists ids only). `report` is the
    `SamplingReport` (its exclusions and warnings go into the card and the manifest). `code` is
    the content hash of the code that made the items (the build's cache key; default: this code's).
    `scenes` maps (source, scene_id) to its `pipeline.scene_geometry.SceneGeometry`: given, the
    `scenes` config is written (and `preview.enabled` draws the previews from it). `quarantine`
    lists the scenes the build left out (source, scene_id, status, reason): card and manifest name them.
    """
    from numerical3d.pipeline.browse.preview import previewer, with_preview
    from numerical3d.pipeline.card import DatasetStats, render_card
    from numerical3d.pipeline.manifest import code_version, write_manifest
    from numerical3d.pipeline.scene_geometry import write_scenes_config

    root = Path(out_dir)
    if seed is None:
        seed = getattr(selection, "seed", None)
    if seed is None:
        raise ValueError("write_dataset: pass seed= (it is recorded in the manifest)")
    root.mkdir(parents=True, exist_ok=True)
    clear_outputs(root)
    report_dict = report.to_dict() if hasattr(report, "to_dict") else report
    opts = config.shards
    stats = DatasetStats()
    writers: dict[str, ShardSet] = {}
    buffers: dict[str, list[Item]] = {}
    frame_ids: dict[str, set[str]] = {}
    uses: dict[str, dict[tuple[str, str], set[int]]] = {}  # split -> scene -> frame indices its items use
    previews = previewer(config, scenes, frames_provider)
    schema = _schema(ITEM_FEATURES if previews is None else with_preview(ITEM_FEATURES))
    try:
        for item in selection:
            split = split_of(item, config.splits)
            if split not in writers:
                writers[split] = ShardSet(root, DATA, split, schema, opts.rows_per_shard, opts)
                buffers[split] = []
                frame_ids[split] = set()
                uses[split] = {}
            stats.observe(split, item)
            frame_ids[split].update(item.frames)
            uses[split].setdefault((item.source, item.scene_id), set()).update(parse_frame_id(f)[2] for f in item.frames)
            buf = buffers[split]
            buf.append(item)
            if len(buf) == opts.row_group_size:
                writers[split].write(item_columns(buf, previews))
                buf.clear()
        for split, buf in buffers.items():
            if buf:
                writers[split].write(item_columns(buf, previews))
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    files: dict[str, list[str]] = {s: [str(p.relative_to(root)) for p in w.close()] for s, w in sorted(writers.items())}

    frame_files: dict[str, list[str]] = {}
    embed = config.media.mode == "embed"
    for split in sorted(frame_ids):
        if not frame_ids[split]:
            continue
        paths, n = write_frames(
            root, split, sorted(frame_ids[split]), frames_provider, opts,
            embed=embed, longest_side=config.media.longest_side, quality=config.media.jpeg_quality,
        )
        frame_files[split] = [str(p.relative_to(root)) for p in paths]
        stats.frames[split] = n

    scene_files = write_scenes_config(root, uses, scenes, opts) if scenes is not None else {}
    card_files = render_card(root, config, stats, seed=seed, splits=files, frame_splits=frame_files,
                             scene_splits=scene_files, report=report_dict, quarantine=quarantine)
    body = {
        "name": config.name,
        "seed": seed,
        "config": config.model_dump(mode="json"),
        "code_version": code_version(code),
        "media": {"mode": config.media.mode, "hydrated": False},
        "counts": stats.summary(),
        "splits": {"default": files, "frames": frame_files, "scenes": scene_files},
        "sampling": report_dict,
        "quarantine": quarantine or [],
    }
    all_files = [f for group in (files, frame_files, scene_files) for fs in group.values() for f in fs] + card_files
    return write_manifest(root, body, all_files)
