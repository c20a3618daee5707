"""One built dataset folder, read through one object: `DatasetFolder`.

Every command that reads a dataset (score, browse, publish, hydrate, and training's data
hand-off) opens it here, so every one of them refuses the same things with the same words:

- a folder without a committed `manifest.json` (written last by a build, so its absence means
  the build never finished, or this is not a dataset folder);
- a manifest whose `format_version` this code does not know (a dataset written by a newer or
  older layout would be misread silently otherwise);
- a card (`README.md`) without `configs` in its YAML header, once the configs are asked for.

The configs, their splits and data files come from the card's `configs`, the way the Hub and
`datasets.load_dataset` read the folder; the manifest gives the build's record (format version,
name, seed, media, counts, code version, the hash of every file). Rows are streamed one row
group at a time. Nothing here imports the rest of the project, so `pipeline` and `training` can
both read a folder the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from numerical3d.errors import Numerical3DError

FORMAT_VERSION = 1  # of the folder's layout and manifest; a reader refuses any other
MANIFEST = "manifest.json"  # written last: config, code version, hash of every file
CARD = "README.md"  # the dataset card; its YAML header declares the configs


class DatasetError(ValueError, Numerical3DError):
    """A dataset folder cannot be read: names the folder or file and what is wrong or missing."""


@dataclass(frozen=True)
class DatasetInfo:
    """The typed header of a build's manifest."""

    format_version: int
    name: str
    seed: int | None
    media_mode: str  # embed | reference
    hydrated: bool
    counts: dict[str, Any]
    code_version: dict[str, Any]

    @classmethod
    def from_manifest(cls, manifest: dict[str, Any]) -> "DatasetInfo":
        media = manifest.get("media") or {}
        return cls(
            format_version=int(manifest["format_version"]),
            name=str(manifest.get("name", "")),
            seed=manifest.get("seed"),
            media_mode=str(media.get("mode", "embed")),
            hydrated=bool(media.get("hydrated", False)),
            counts=dict(manifest.get("counts") or {}),
            code_version=dict(manifest.get("code_version") or {}),
        )


class DatasetFolder:
    """A built dataset folder: its manifest, typed info, configs, splits, files, schemas and rows.

    Opening checks the manifest (present, valid, a known format version); the card is read on
    first use of the configs.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not self.root.is_dir():
            raise DatasetError(f"{self.root}: no such dataset folder")
        self.manifest = _read_manifest(self.root)
        self.info = DatasetInfo.from_manifest(self.manifest)

    def __repr__(self) -> str:
        return f"DatasetFolder({str(self.root)!r}, format {self.info.format_version})"

    @cached_property
    def configs(self) -> dict[str, dict[str, list[str]]]:
        """config name -> split -> data file patterns (relative), from the card's `configs`."""
        return card_configs(self.root)

    def splits(self, config: str = "default") -> list[str]:
        """The splits of a config, in the card's order."""
        return list(self._config(config))

    def files(self, config: str = "default", split: str | None = None) -> list[Path]:
        """The parquet files of a config (one split, or all in split order), sorted within a split.

        A split the card declares but whose files are absent is an error naming the pattern.
        """
        layout = self._config(config)
        if split is not None and split not in layout:
            raise DatasetError(f"{self.root}: the card's config {config!r} has no split {split!r} "
                               f"(it has {sorted(layout)})")
        out: list[Path] = []
        for name in [split] if split is not None else list(layout):
            patterns = layout[name]
            listed = [p for p in patterns if not any(ch in p for ch in "*?[")]
            if missing := [p for p in listed if not (self.root / p).is_file()]:  # a card that lists its shards
                raise DatasetError(f"{self.root}: {', '.join(missing[:3])}{' and more' if len(missing) > 3 else ''} "
                                   f"missing (config {config!r}, split {name!r}; the card lists it)")
            found = sorted({p for pattern in patterns for p in self.root.glob(pattern) if p.is_file()})
            if not found:
                raise DatasetError(f"{self.root}: no {', '.join(patterns)} files (config {config!r}, split {name!r})")
            out += found
        return out

    def schema(self, config: str = "default") -> pa.Schema:
        """The arrow schema of a config (its first file's; a build writes one schema per config)."""
        return pq.read_schema(self.files(config)[0])

    def features(self, config: str = "default") -> Any:
        """The config's `datasets.Features`, as `load_dataset` would see them."""
        from datasets import Features  # heavy: only for the callers that want features

        return Features.from_arrow_schema(self.schema(config))

    def rows(self, config: str = "default", split: str | None = None,
             columns: list[str] | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
        """(split, row) of every row of a config, in file order, one row group at a time.

        `columns` limits the columns read; one a file does not have (an optional column such as
        `preview`) is skipped.
        """
        for name, _, row in self.file_rows(config, split, columns):
            yield name, row

    def file_rows(self, config: str = "default", split: str | None = None,
                  columns: list[str] | None = None) -> Iterator[tuple[str, Path, dict[str, Any]]]:
        """(split, file, row) of every row, as `rows` gives them: for a reader that names the file
        of a row it cannot use."""
        for name in [split] if split is not None else self.splits(config):
            for path in self.files(config, name):
                pf = pq.ParquetFile(path)
                cols = None if columns is None else [c for c in columns if c in pf.schema_arrow.names]
                for g in range(pf.num_row_groups):
                    for row in pf.read_row_group(g, columns=cols).to_pylist():
                        yield name, path, row

    def _config(self, config: str) -> dict[str, list[str]]:
        if config not in self.configs:
            raise DatasetError(f"{self.root}: the card declares no {config!r} config (it has {sorted(self.configs)})")
        return self.configs[config]


def _read_manifest(root: Path) -> dict[str, Any]:
    path = root / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{root}: missing {MANIFEST}; it is written last by a build, so the folder is not a "
                           "finished dataset build") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: not a readable JSON manifest: {exc}") from exc
    if not isinstance(manifest, dict):
        raise DatasetError(f"{path}: the manifest is not a JSON object")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise DatasetError(f"{path}: dataset format version {version!r}, but this code reads format version "
                           f"{FORMAT_VERSION}; use the numerical3d release that wrote it, or rebuild the dataset")
    if not isinstance(manifest.get("files"), dict):
        raise DatasetError(f"{path}: the manifest has no 'files' table")
    return manifest


def card_configs(folder: Path) -> dict[str, dict[str, list[str]]]:
    """config name -> split -> data file patterns, from the `configs` of the card's YAML header."""
    card = folder / CARD
    try:
        text = card.read_text(encoding="utf-8")
    except OSError as exc:
        raise DatasetError(f"{folder}: no readable dataset card ({CARD}) to take the configs from: {exc}") from exc
    header = re.match(r"---\s*\n(.*?)\n---\s*(\n|$)", text, re.DOTALL)
    try:
        meta = yaml.safe_load(header.group(1)) if header else None
    except yaml.YAMLError as exc:
        raise DatasetError(f"{card}: the YAML header is not valid YAML: {exc}") from exc
    configs = meta.get("configs") if isinstance(meta, dict) else None
    if not isinstance(configs, list) or not configs:
        raise DatasetError(f"{card}: the YAML header declares no `configs` (config_name, data_files)")
    layout: dict[str, dict[str, list[str]]] = {}
    for entry in configs:
        files = entry.get("data_files") if isinstance(entry, dict) else None
        if not (isinstance(entry, dict) and "config_name" in entry and isinstance(files, list)
                and all(isinstance(f, dict) and "split" in f and "path" in f for f in files)):
            raise DatasetError(f"{card}: every entry of `configs` needs a config_name and data_files as a list of "
                               f"{{split, path}}, got {entry!r}")
        layout[entry["config_name"]] = {f["split"]: [f["path"]] if isinstance(f["path"], str) else list(f["path"])
                                        for f in files}
    return layout
