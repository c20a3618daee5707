"""Scene sources: one `Source` class per dataset, all returning the canonical `Scene`.

`registry()` maps a name to its class (`sources.base.Source`): the classes in the `SOURCES`
tuple of each module of this package (`scannet` and `synthetic`, the generator's scenes in
ScanNet's format read by the same adapter under their own name; `scannetpp`, `arkitscenes`,
`vsi-meta`), then those of the `numerical3d.sources` entry points (`numerical3d.plugins`).
`make_source(name, **options)` validates the options against the class's typed config. The
build lists a root once (`Source.list_scenes` -> `SceneRef`s) and loads each scene from its ref
(`Source.load`).

`load_scenes(source, root)` is the convenience loop over a whole root for everything else
(CLI, hydration, tests): it yields a `Scene` per scene, or the `SceneError` that scene
raised, so that one bad scene never stops the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

from numerical3d.plugins import Kind
from numerical3d.sources.base import SceneRef, Source, SourceConfig, SourceConfigError
from numerical3d.sources.labels import LabelMap, load_label_map
from numerical3d.sources.scene import Drop, Frame, OrientedBox, Scene, SceneError, SceneObject

KIND: Kind[type[Source]] = Kind("source", __name__, "SOURCES", "numerical3d.sources",
                                lambda obj: isinstance(obj, type) and issubclass(obj, Source),
                                lambda cls: cls.name, SourceConfigError)
UNKNOWN_LICENCE = "See the licence of the source dataset."


@cache
def registry() -> dict[str, type[Source]]:
    """Every source class by name (found once per process)."""
    return KIND.by_name()


def names() -> tuple[str, ...]:
    """Every source name, in the registry's order."""
    return tuple(registry())


def source_class(name: str) -> type[Source]:
    """The class of source `name`; an unknown name fails listing the known ones."""
    known = registry()
    if name not in known:
        raise SourceConfigError(f"unknown source {name!r}; known: {', '.join(known)}")
    return known[name]


def make_source(name: str, labels: str | Path | LabelMap | None = None, **options: Any) -> Source:
    """A source object; `options` are checked against its config, `labels` overrides its label map."""
    cls = source_class(name)
    if isinstance(labels, LabelMap):
        return cls(options, labels=labels)
    return cls({**options, "labels": labels} if labels is not None else options)


def licence_of(name: str) -> str:
    """The licence note of a source's items (any other origin: a pointer to its own licence)."""
    return registry()[name].licence if name in registry() else UNKNOWN_LICENCE


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
    LabelMap). `scene_ids` restricts loading to those ids. `options` are the source's config
    (`frames`, `frame_stride`, ...); an option the source does not take raises SourceConfigError.
    """
    src = make_source(source, labels, **options)
    try:
        refs = src.list_scenes(root)
    except SceneError as exc:
        yield exc
        return
    wanted = set(scene_ids) if scene_ids is not None else None
    for ref in refs:
        if wanted is None or ref.scene_id in wanted:
            yield src.try_load(ref)


__all__ = [
    "KIND",
    "Drop",
    "Frame",
    "LabelMap",
    "OrientedBox",
    "Scene",
    "SceneError",
    "SceneObject",
    "SceneRef",
    "Source",
    "SourceConfig",
    "SourceConfigError",
    "licence_of",
    "load_label_map",
    "load_scenes",
    "make_source",
    "names",
    "registry",
    "source_class",
]
