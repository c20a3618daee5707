"""The dataset folder written whole: item shards, frames, scene records, card, plots, manifest.

It sits above everything it writes (shards, scene records, the previews drawn by
`pipeline.browse`, the card, the manifest) and nothing of those imports it back, so the
record types and the site never depend on assembly. Build assembly
(`pipeline.build.assemble`) and `numerical3d assemble` call `write_dataset`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from numerical3d.pipeline.browse.preview import previewer, with_preview
from numerical3d.pipeline.card import DatasetStats, render_card
from numerical3d.pipeline.config import DatasetMix
from numerical3d.pipeline.hub_features import arrow_schema
from numerical3d.pipeline.ingest import CORPORA
from numerical3d.pipeline.items import Item
from numerical3d.pipeline.layout import DATA, OWNED_GLOBS
from numerical3d.pipeline.manifest import code_version, write_manifest
from numerical3d.pipeline.parquet import ShardSet
from numerical3d.pipeline.scene_geometry import SceneGeometry, write_scenes_config
from numerical3d.pipeline.shards import ITEM_FEATURES, FrameProvider, item_columns, write_frames


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
    config: DatasetMix,
    *,
    seed: int | None = None,
    report: Any = None,
    code: str | None = None,
    scenes: Mapping[tuple[str, str], SceneGeometry] | None = None,
    quarantine: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Write shards, frames, card, plots and manifest for the selected items; returns the manifest.

    `selection` is a `pipeline.sampling.Selection` or any iterable of its items (each knows its
    split), consumed once and streamed. `frames_provider(frame_id)` returns the shard's JPEG (an
    `EncodedFrame`, copied as it is) or RGB pixels (encoded once); it may be None in `reference`
    media mode (the frames config then lists ids only). `report` is the
    `SamplingReport` (its exclusions and warnings go into the card and the manifest). `code` is
    the content hash of the code that made the items (the build's cache key; default: this code's).
    `scenes` maps (source, scene_id) to its `SceneGeometry`: given, the
    `scenes` config is written (and `preview.enabled` draws the previews from it). `quarantine`
    lists the scenes the build left out (source, scene_id, status, reason): card and manifest name them.
    """
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
    previews = previewer(config, scenes, frames_provider)
    files, frame_ids, uses = _write_items(root, selection, config, previews, stats)
    frame_files = _write_frame_shards(root, frame_ids, frames_provider, config, stats)
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


def _write_items(root: Path, selection: Iterable[Item], config: DatasetMix, previews: Any,
                 stats: DatasetStats) -> tuple[dict[str, list[str]], dict[str, set[str]],
                                               dict[str, dict[tuple[str, str], set[int]]]]:
    """Stream the items into each split's shards (row group by row group); returns the shard files,
    the frame ids and the (scene -> frame indices) each split's items use. A failure removes the
    half-written shards."""
    opts = config.shards
    schema = arrow_schema(ITEM_FEATURES if previews is None else with_preview(ITEM_FEATURES))
    writers: dict[str, ShardSet] = {}
    buffers: dict[str, list[Item]] = {}
    frame_ids: dict[str, set[str]] = {}
    uses: dict[str, dict[tuple[str, str], set[int]]] = {}  # split -> scene -> frame indices its items use
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
            if item.source not in CORPORA:  # a corpus's items refer to its own media: no scene geometry
                uses[split].setdefault((item.source, item.scene_id), set()).update(item.frame_indices)
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
    files = {s: [str(p.relative_to(root)) for p in w.close()] for s, w in sorted(writers.items())}
    return files, frame_ids, uses


def _write_frame_shards(root: Path, frame_ids: dict[str, set[str]], frames_provider: FrameProvider | None,
                        config: DatasetMix, stats: DatasetStats) -> dict[str, list[str]]:
    """The frames config: each split's frames, embedded or listed by id (`media.mode`)."""
    frame_files: dict[str, list[str]] = {}
    for split in sorted(frame_ids):
        if not frame_ids[split]:
            continue
        paths, n = write_frames(
            root, split, sorted(frame_ids[split]), frames_provider, config.shards,
            embed=config.media.mode == "embed", longest_side=config.media.longest_side,
            quality=config.media.jpeg_quality,
        )
        frame_files[split] = [str(p.relative_to(root)) for p in paths]
        stats.frames[split] = n
    return frame_files
