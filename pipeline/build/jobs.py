"""A scene job: the `SceneRef` its source listed and the source's options.

Its own module because both the cache (which keys a job) and the scene stage (which runs it)
need it, and neither should import the other's module for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from numerical3d.sources import SceneRef, Source, make_source


@dataclass(frozen=True)
class SceneJob:
    """One scene to process: where its source found it, and the source's options (cheap to ship)."""

    ref: SceneRef
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"ref": self.ref.to_dict(), "options": self.options}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SceneJob":
        return cls(SceneRef.from_dict(d["ref"]), dict(d["options"]))

    @property
    def name(self) -> str:
        return f"{self.ref.source}/{self.ref.scene_id}"

    def source(self) -> Source:
        return make_source(self.ref.source, **self.options)
