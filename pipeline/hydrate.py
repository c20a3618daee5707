"""Rebuild the pixels of a dataset published by reference (`media.mode: reference`).

ScanNet's and ScanNet++'s terms forbid redistributing their images, so such a dataset ships the
frames config with ids only. `hydrate(folder, provider)` reads the user's own copy of the
sources through a frame provider (`provider_from_sources`), writes the frames shards with the
JPEGs embedded exactly as an `embed` build would (same names, same options, atomic replace),
checks each frame's decoded pixels against the published `pixel_sha256` when there is one, and
rewrites the manifest's hashes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pydantic import ValidationError

from numerical3d.errors import Numerical3DError
from numerical3d.pipeline.card import replace_config_files
from numerical3d.pipeline.config import DatasetMix, MediaOptions
from numerical3d.pipeline.frames import EncodedFrame, encode_source_frame
from numerical3d.pipeline.items import Item, frame_id, parse_frame_id
from numerical3d.pipeline.layout import FRAMES
from numerical3d.dataset import DatasetFolder
from numerical3d.pipeline.manifest import write_manifest
from numerical3d.pipeline.scene_geometry import SceneGeometry, scene_geometry
from numerical3d.pipeline.settings import describe_errors
from numerical3d.pipeline.shards import FrameProvider, write_frames
from numerical3d.sources import load_scenes
from numerical3d.sources.io import commit
from numerical3d.sources.scene import Scene, SceneError


class HydrateError(ValueError, Numerical3DError):
    """The folder cannot be hydrated (names the folder and the problem)."""


@dataclass
class HydrateResult:
    frames: int = 0
    checked: int = 0  # frames that had a published pixel hash
    mismatched: list[str] = field(default_factory=list)  # frame ids whose pixels differ from the published hash
    files: list[str] = field(default_factory=list)


def provider_from_sources(source_roots: dict[str, str | Path], frame_ids: Iterable[str], media: MediaOptions,
                          **options: Any) -> FrameProvider:
    """A frame provider backed by `sources.load_scenes`, loading only the scenes the ids name.

    Each frame becomes the shard's JPEG exactly as a build's scene stage makes it
    (`encode_source_frame`: the source's bytes when no resize is needed), so hydration
    publishes the bytes an `embed` build does.
    """
    return _provider(_load_wanted(source_roots, frame_ids, **options), media)


def frames_and_scenes(source_roots: dict[str, str | Path], items: Iterable[Item], media: MediaOptions,
                      **options: Any) -> tuple[FrameProvider, dict[tuple[str, str], SceneGeometry]]:
    """The frame provider of `items` and the scene record (`scene_geometry`) of each of their
    scenes, from one load of those scenes: what `numerical3d assemble` needs to write a dataset
    that `browse` can draw (its maps come from the scene records)."""
    uses: dict[tuple[str, str], set[int]] = defaultdict(set)
    frame_ids: list[str] = []
    for it in items:
        uses[(it.source, it.scene_id)].update(it.frame_indices)
        frame_ids += it.frames
    scenes = _load_wanted(source_roots, frame_ids, **options)
    records = {key: scene_geometry(scene, sorted(uses[key])) for key, scene in scenes.items()}
    return _provider(scenes, media), records


def _load_wanted(source_roots: dict[str, str | Path], frame_ids: Iterable[str], **options: Any) -> dict[tuple[str, str], Scene]:
    """The scenes the frame ids name, loaded from the user's roots, by (source, scene_id)."""
    wanted: dict[str, set[str]] = defaultdict(set)
    for fid in frame_ids:
        source, scene_id, _ = parse_frame_id(fid)
        wanted[source].add(scene_id)
    scenes: dict[tuple[str, str], Scene] = {}
    for source, scene_ids in sorted(wanted.items()):
        if source not in source_roots:
            raise HydrateError(f"frames of source {source!r} are needed: pass --source-root {source}=PATH")
        for scene in load_scenes(source, source_roots[source], scene_ids=sorted(scene_ids), **options):
            if isinstance(scene, SceneError):
                raise HydrateError(f"cannot load a scene needed for hydration: {scene}")
            scenes[(source, scene.scene_id)] = scene
    return scenes


def _provider(scenes: dict[tuple[str, str], Scene], media: MediaOptions) -> FrameProvider:
    frames = {frame_id(source, scene_id, frame.index): frame
              for (source, scene_id), scene in scenes.items() for frame in scene.frames}

    def provide(fid: str) -> EncodedFrame:
        frame = frames.get(fid)
        if frame is None:
            raise HydrateError(f"frame {fid} is not in your copy of the source (scene or frame missing)")
        return encode_source_frame(frame, media.longest_side, media.jpeg_quality)

    return provide


def frame_ids_of(root: Path, manifest: dict[str, Any]) -> dict[str, list[tuple[str, str | None]]]:
    """{split: [(frame_id, pixel_sha256)]} in the published order."""
    out: dict[str, list[tuple[str, str | None]]] = {}
    for split, files in sorted(manifest["splits"]["frames"].items()):
        rows: list[tuple[str, str | None]] = []
        for rel in files:
            table = pq.read_table(root / rel, columns=["frame_id", "pixel_sha256"])
            rows += list(zip(table["frame_id"].to_pylist(), table["pixel_sha256"].to_pylist()))
        out[split] = rows
    return out


def hydrate(folder: str | Path, provider: FrameProvider | None = None, *, source_roots: dict[str, str | Path] | None = None,
            strict: bool = True) -> HydrateResult:
    """Embed the frames of a reference-mode dataset from the user's sources.

    Pass a `provider` (frame id -> RGB), or `source_roots` ({source: path}) to read the
    scenes with `sources.load_scenes`. With `strict`, a frame whose pixels differ from the
    published hash stops the run before anything is replaced.
    """
    root = Path(folder)
    dataset = DatasetFolder(root)
    manifest = dataset.manifest
    if dataset.info.media_mode != "reference" or dataset.info.hydrated:
        raise HydrateError(f"{root}: frames are already embedded (media {manifest['media']})")
    try:
        config = DatasetMix.model_validate(manifest["config"])
    except ValidationError as exc:  # a manifest this version did not write, or one edited by hand
        raise HydrateError(f"{root / 'manifest.json'}: config: {describe_errors(exc.errors(), DatasetMix)}") from None
    ids = frame_ids_of(root, manifest)
    if provider is None:
        if not source_roots:
            raise HydrateError("hydrate needs a frame provider or source roots")
        provider = provider_from_sources(source_roots, (fid for rows in ids.values() for fid, _ in rows), config.media)

    result = HydrateResult()
    expected = {fid: sha for rows in ids.values() for fid, sha in rows}

    new_frames: dict[str, list[str]] = {}
    staging = root / ".hydrate"
    staging.mkdir(exist_ok=True)
    try:
        for split, rows in ids.items():
            paths, n = write_frames(
                staging, split, [fid for fid, _ in rows], provider, config.shards,
                embed=True, longest_side=config.media.longest_side, quality=config.media.jpeg_quality,
            )
            new_frames[split] = [str(p.relative_to(staging)) for p in paths]
            result.frames += n
            for p in paths:
                got = pq.read_table(p, columns=["frame_id", "pixel_sha256"])
                for fid, sha in zip(got["frame_id"].to_pylist(), got["pixel_sha256"].to_pylist()):
                    if expected.get(fid) is not None:
                        result.checked += 1
                        if expected[fid] != sha:
                            result.mismatched.append(fid)
        if strict and result.mismatched:
            raise HydrateError(
                f"{root}: {len(result.mismatched)} frame(s) differ from the published pixels "
                f"(first: {', '.join(result.mismatched[:5])}); your copy of the source is not the one the "
                "dataset was built from. Nothing was replaced; pass strict=False (--no-strict) to accept them."
            )
        old = [rel for files in manifest["splits"]["frames"].values() for rel in files]
        for split, files in new_frames.items():
            for rel in files:
                commit(staging / rel, root / rel)
        for rel in set(old) - {f for fs in new_frames.values() for f in fs}:
            (root / rel).unlink(missing_ok=True)
    finally:
        for p in sorted(staging.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        staging.rmdir()

    replace_config_files(root, "frames", new_frames)  # new shard names: readers see the new frames
    body = {k: v for k, v in manifest.items() if k not in ("files", "format_version")}
    body["media"] = {"mode": "reference", "hydrated": True}
    body["splits"] = {**manifest["splits"], "frames": new_frames}
    others = [rel for rel in manifest["files"] if not rel.startswith(f"{FRAMES}/")]
    result.files = sorted(others + [f for fs in new_frames.values() for f in fs])
    write_manifest(root, body, result.files)
    return result
