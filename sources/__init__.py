"""Scene sources: one adapter per dataset, all returning the canonical `Scene`.

`load_scenes(source, root)` is the single entry point the pipeline uses. It yields a
`Scene` per scene, or the `SceneError` that scene raised, so that one bad scene never
stops the others. Sources: `scannet`, `synthetic` (the generator's scenes, in ScanNet's
format, read by the same adapter), `scannetpp`, `arkitscenes`, `vsi-meta`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sources.labels import LabelMap, load_label_map
from sources.scene import Drop, Frame, OrientedBox, Scene, SceneError, SceneObject


@dataclass(frozen=True)
class SourceAdapter:
    """How to find and load the scenes of one source."""

    name: str
    label_map: str  # packaged label map used when the caller gives none
    description: str
    iter_scenes: Callable[..., Iterator[Scene | SceneError]]  # (root, labels, scene_ids, **options)
    list_scenes: Callable[[Path], list[Path]]


def _guarded(load: Callable[..., Scene], scene_dir: Path, *args: Any, **kwargs: Any) -> Scene | SceneError:
    """Run one scene's loader; any failure becomes a SceneError naming the scene folder."""
    try:
        return load(scene_dir, *args, **kwargs)
    except SceneError as exc:
        return exc
    except Exception as exc:  # a bug or an unforeseen file problem must not stop the other scenes
        return SceneError(scene_dir, f"unexpected {type(exc).__name__}: {exc}")


def _folder_source(list_dirs: Callable[[Path], list[Path]], load: Callable[..., Scene], **fixed: Any):
    def iter_scenes(root: Path, labels: LabelMap, scene_ids: set[str] | None = None, **options: Any):
        try:
            dirs = list_dirs(root)
        except SceneError as exc:
            yield exc
            return
        for d in dirs:
            if scene_ids is None or d.name in scene_ids:
                yield _guarded(load, d, labels, **fixed, **options)

    return iter_scenes


def _scannet() -> tuple[Callable, Callable]:
    from sources import scannet

    return scannet.list_scene_dirs, scannet.load_scannet_scene


def _iter_scannet(root, labels, scene_ids=None, **options):
    list_dirs, load = _scannet()
    yield from _folder_source(list_dirs, load, source="scannet")(root, labels, scene_ids, **options)


def _iter_synthetic(root, labels, scene_ids=None, **options):
    list_dirs, load = _scannet()
    yield from _folder_source(list_dirs, load, source="synthetic")(root, labels, scene_ids, **options)


def _iter_scannetpp(root, labels, scene_ids=None, **options):
    from sources import scannetpp

    yield from _folder_source(scannetpp.list_scene_dirs, scannetpp.load_scannetpp_scene)(root, labels, scene_ids, **options)


def _iter_arkitscenes(root, labels, scene_ids=None, **options):
    from sources import arkitscenes

    root = Path(root)
    try:
        dirs = arkitscenes.list_scene_dirs(root)
        sky = arkitscenes.read_sky_directions(root)
    except SceneError as exc:
        yield exc
        return
    for d in dirs:
        if scene_ids is None or d.name in scene_ids:
            sky_d = sky.get(d.name) or arkitscenes.read_sky_directions(d.parent).get(d.name)
            yield _guarded(arkitscenes.load_arkitscenes_scene, d, labels, sky_direction=sky_d, **options)


def _iter_vsi_meta(root, labels, scene_ids=None, **options):
    from sources import vsi_meta

    if options:
        raise TypeError(f"vsi-meta takes no options, got {sorted(options)}")
    yield from vsi_meta.iter_vsi_meta(root, labels, scene_ids)


def _list_vsi_meta(root: Path) -> list[Path]:
    from sources import vsi_meta

    return vsi_meta.list_meta_files(root)


def _list(module: str) -> Callable[[Path], list[Path]]:
    def list_scenes(root: Path) -> list[Path]:
        import importlib

        return importlib.import_module(f"sources.{module}").list_scene_dirs(root)

    return list_scenes


SOURCES: dict[str, SourceAdapter] = {
    "scannet": SourceAdapter(
        "scannet", "scannet", "ScanNet v2: ROOT/scans/<scene_id>/ with mesh, segs, aggregation, exported frames or .sens",
        _iter_scannet, _list("scannet")),
    "synthetic": SourceAdapter(
        "synthetic", "scannet", "procedural scenes written in ScanNet's format (read by the ScanNet adapter)",
        _iter_synthetic, _list("scannet")),
    "scannetpp": SourceAdapter(
        "scannetpp", "scannetpp", "ScanNet++: ROOT/data/<scene_id>/ with scans/ and iphone/",
        _iter_scannetpp, _list("scannetpp")),
    "arkitscenes": SourceAdapter(
        "arkitscenes", "arkitscenes", "ARKitScenes 3dod: ROOT/<split>/<video_id>/ plus metadata.csv",
        _iter_arkitscenes, _list("arkitscenes")),
    "vsi-meta": SourceAdapter(
        "vsi-meta", "vsi-meta", "VSI-Bench / VLM-3R scene meta-info JSON (boxes only)",
        _iter_vsi_meta, _list_vsi_meta),
}


def get_source(source: str) -> SourceAdapter:
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; known: {', '.join(SOURCES)}")
    return SOURCES[source]


def list_scene_dirs(source: str, root: str | Path) -> list[Path]:
    """The scene folders (or, for vsi-meta, the meta-info files) a source root holds."""
    return get_source(source).list_scenes(Path(root))


def load_scenes(
    source: str,
    root: str | Path,
    labels: str | Path | LabelMap | None = None,
    *,
    scene_ids: Iterable[str] | None = None,
    **options: Any,
) -> Iterator[Scene | SceneError]:
    """Yield each scene of `root` as a `Scene`, or as the `SceneError` it raised.

    `labels` overrides the source's packaged label map (YAML file, ScanNet .tsv or a
    LabelMap). `scene_ids` restricts loading to those ids. Options go to the adapter:
    `frames` ("auto" | "export" | "sens" | "none"; scannet/synthetic, while scannetpp and
    arkitscenes take "auto" | "none") and `frame_stride` (keep every n-th frame).
    """
    adapter = get_source(source)
    label_map = load_label_map(adapter.label_map, labels)
    ids = set(scene_ids) if scene_ids is not None else None
    yield from adapter.iter_scenes(Path(root), label_map, ids, **options)


__all__ = [
    "SOURCES",
    "Drop",
    "Frame",
    "LabelMap",
    "OrientedBox",
    "Scene",
    "SceneError",
    "SceneObject",
    "SourceAdapter",
    "get_source",
    "list_scene_dirs",
    "load_label_map",
    "load_scenes",
]
