"""The generic parquet writer of a dataset folder: one config's split streamed into shards.

Rows are written a row group at a time with `pyarrow.parquet.ParquetWriter`, so memory does not
grow with the number of rows. Each shard is written under a hidden temp name (`sources.io`) and
committed only once the whole split is written (the final name carries the shard count), so an
interrupted build never leaves a file that looks complete. Writer options are fixed and nothing
time-dependent is written, so the same rows give byte-identical files.

It knows no record type: the item and frame shards (`pipeline.shards`) and the scene records
(`pipeline.scene_geometry`) each bring their schema and columns.
"""

from __future__ import annotations

import hashlib

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from numerical3d.pipeline.config import ShardOptions
from numerical3d.pipeline.layout import shard_name
from numerical3d.sources.io import commit, temp_beside


@dataclass
class ShardSet:
    """Streams the rows of one config and split into shards; `close()` publishes them."""

    root: Path
    folder: str  # layout.DATA, FRAMES or SCENES
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
        """Finish the last shard and commit every shard under its final `-NNNNN-of-NNNNN-<tag>` name."""
        self._close_writer()
        n = len(self._partials)
        final = []
        for i, partial in enumerate(self._partials):
            with open(partial, "rb") as fh:
                tag = hashlib.file_digest(fh, "sha256").hexdigest()[:8]
            target = partial.parent / shard_name(self.split, i, n, tag)
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
