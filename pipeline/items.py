"""The question item: what question generation emits and what assembly shards.

An item is self-contained: its verifier spec (a JSON-serialisable dict from
`verifiers`) is all a reward function needs, and its frames are scene frame indices; their
published ids (`"<source>/<scene_id>/<frame index>"`, `frame_id`) point into the dataset's
`frames` config. Ids are only composed from the indices, never parsed back, except by readers
of a published folder (`parse_frame_id`), where the id is all there is.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

def frame_id(source: str, scene_id: str, index: int) -> str:
    """Stable id of one scene frame, shared by items and the frames config."""
    return f"{source}/{scene_id}/{index}"


def parse_frame_id(fid: str) -> tuple[str, str, int]:
    """`<source>/<scene_id>/<index>` -> (source, scene_id, index)."""
    try:
        source, rest = fid.split("/", 1)
        scene_id, index = rest.rsplit("/", 1)
        return source, scene_id, int(index)
    except ValueError:
        raise ValueError(f"frame id {fid!r} is not '<source>/<scene_id>/<index>'") from None


def item_id(source: str, scene_id: str, subtask: str, params: dict[str, Any]) -> str:
    """Stable id: a hash of source, scene, subtask and the generating parameters."""
    key = json.dumps([source, scene_id, subtask, params], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(key.encode()).hexdigest()[:20]


@dataclass
class Item:
    """One verifiable question."""

    id: str
    source: str
    scene_id: str
    subtask: str
    question: str  # the question itself, as the subtask's template words it
    prompt: str  # the full prompt a model sees: `question` wrapped by `Templates.prompt` (published as `question`)
    answer: str  # canonical answer, as text a model would write
    verifier: dict[str, Any]  # the verifier spec (see verifiers.spec)
    frame_indices: list[int] = field(default_factory=list)  # scene frame indices, in temporal order
    options: list[str] | None = None  # multiple-choice options, in letter order
    provenance: dict[str, Any] = field(default_factory=dict)  # objects, rule and its parameters

    @property
    def frames(self) -> list[str]:
        """The frames' published ids, in the dataset's `frames` config."""
        return [frame_id(self.source, self.scene_id, i) for i in self.frame_indices]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def fields(self) -> dict[str, Any]:
        """The fields by name, their values shared with the item (not copied as by `to_dict`): for
        writing the item out at once, where `asdict`'s deep copy cost a tenth of a scene's stage.
        Its JSON is `to_dict`'s (a value holds no dataclass)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Item":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})
