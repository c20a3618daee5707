"""The Source interface: what the build, the dataset card and `sources check` ask of a dataset.

One subclass per dataset, at the bottom of its adapter module, holds everything that is
specific to it: its typed options (`Config`, a pydantic model, unknown keys are errors), how
a root is listed (`list_scenes` -> `SceneRef`s), how one scene is loaded from its ref (`load`,
no re-listing of the root), the cheap per-scene checks (`required_files`, `check`) and the
facts the rest needs (`has_frames`, `frame_options`, `licence`, `label_map`). The registry in
`sources/__init__.py` maps names to these classes (each adapter module lists its own in
`SOURCES`), so nothing outside `sources/` switches on a source's name.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from numerical3d.errors import Numerical3DError
from numerical3d.sources.io import open_regular, ply_truncation
from numerical3d.sources.labels import LabelMap, load_label_map
from numerical3d.sources.scene import Scene, SceneError


@dataclass(frozen=True)
class SceneRef:
    """Where one scene was found: enough to load it on any worker without listing the root again."""

    source: str
    scene_id: str
    path: str  # the scene's folder, or the file that holds it (vsi-meta)
    root: str  # the source root it was listed from

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, str]) -> "SceneRef":
        return cls(**d)


class SourceConfig(BaseModel):
    """Options every source takes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    labels: Path | None = None  # label map override: a YAML map or ScanNet's .tsv (default: the packaged map)


class FrameOptions(SourceConfig):
    """Options of a source with camera frames."""

    frames: Literal["auto", "none"] = "auto"  # "none": objects only (fastest)
    frame_stride: int = Field(1, ge=1)  # keep frames whose index is a multiple of it


class SourceConfigError(ValueError, Numerical3DError):
    """Options a source does not take, or values it rejects; names the source and the field."""


class Source(ABC):
    """One dataset: list its scenes, load one by its ref, check one cheaply."""

    name: ClassVar[str]
    description: ClassVar[str]
    label_map: ClassVar[str]  # packaged label map used unless the config names another
    licence: ClassVar[str]  # the note the dataset card prints for items of this source
    has_frames: ClassVar[bool]  # a scene without any usable frame is bad data
    Config: ClassVar[type[SourceConfig]] = SourceConfig

    def __init__(self, config: SourceConfig | Mapping[str, Any] | None = None, *, labels: LabelMap | None = None):
        if isinstance(config, self.Config):
            self.config = config
        else:
            try:
                self.config = self.Config.model_validate(dict(config or {}))
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'options'}: {e['msg']}" for e in exc.errors())
                raise SourceConfigError(f"source {self.name}: {problems}") from None
        self._labels = labels

    @classmethod
    def frame_options(cls, **options: Any) -> dict[str, Any]:
        """A command's frame options (`frames`, `frame_stride`) for this source: all of them for a source
        with frames, none for one without (its config refuses them)."""
        return dict(options) if cls.has_frames else {}

    def loader_options(self) -> dict[str, Any]:
        """The config as keyword arguments of the adapter's loader (the label map goes separately)."""
        return self.config.model_dump(exclude={"labels"})

    @property
    def labels(self) -> LabelMap:
        """The label map, read once per source object (the packaged one or the config's override)."""
        if self._labels is None:
            self._labels = load_label_map(self.label_map, self.config.labels)
        return self._labels

    def list_scenes(self, root: str | Path) -> list[SceneRef]:
        """Every scene under `root`, in the adapter's order; raises SceneError for a bad root."""
        root = Path(root)
        if not root.exists():
            raise SceneError(root, f"{self.name} root does not exist")
        return self._list(root)

    @abstractmethod
    def _list(self, root: Path) -> list[SceneRef]:
        """The refs of an existing root."""

    @abstractmethod
    def load(self, ref: SceneRef) -> Scene:
        """The scene `ref` points at (raises SceneError, or OSError for I/O trouble)."""

    def try_load(self, ref: SceneRef) -> Scene | SceneError:
        """`load`, with any failure turned into a SceneError naming the scene, so that one bad
        scene never stops a loop over the others."""
        try:
            return self.load(ref)
        except SceneError as exc:
            return exc
        except Exception as exc:  # a bug or an unforeseen file problem must not stop the other scenes
            return SceneError(ref.path, f"unexpected {type(exc).__name__}: {exc}")

    def required_files(self, ref: SceneRef) -> list[tuple[str, ...]]:
        """Groups of alternative paths relative to the scene folder; one of each group must exist."""
        return []

    def check(self, ref: SceneRef) -> list[str]:
        """Missing files, unreadable JSON, PLY files without a header or shorter than it promises:
        cheap enough for every scene."""
        scene = Path(ref.path)
        problems = [f"missing {' or '.join(group)}" for group in self.required_files(ref)
                    if not any((scene / rel).exists() for rel in group)]
        for f in sorted(scene.glob("*.json")) + sorted(scene.glob("scans/*.json")):
            try:
                with open_regular(f) as fh:
                    json.load(fh)
            except SceneError as exc:
                problems.append(f"{f.name}: {exc.problem}")
            except (OSError, ValueError) as exc:
                problems.append(f"{f.name}: unreadable JSON ({type(exc).__name__}: {str(exc)[:80]})")
        for f in sorted(scene.glob("*.ply")) + sorted(scene.glob("scans/*.ply")):
            try:
                with open_regular(f) as fh:
                    head = fh.read(4096)
            except SceneError as exc:
                problems.append(f"{f.name}: {exc.problem}")
                continue
            if not head.startswith(b"ply") or b"end_header" not in head:
                problems.append(f"{f.name}: not a PLY file (no header)")
                continue
            if broken := ply_truncation(f):
                problems.append(f"{f.name}: {broken}")
        return problems


class FolderSource(Source):
    """A dataset whose scenes are folders named by their ids."""

    @staticmethod
    @abstractmethod
    def scene_dirs(root: Path) -> list[Path]:
        """The scene folders under an existing root, in order."""

    def _list(self, root: Path) -> list[SceneRef]:
        return [SceneRef(self.name, d.name, str(d), str(root)) for d in self.scene_dirs(root)]
