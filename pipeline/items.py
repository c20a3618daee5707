"""The question item: what question generation emits and what assembly shards.

An item is self-contained: its verifier spec (a JSON-serialisable dict from
`verifiers`) is all a reward function needs, and its frame references
(`"<source>/<scene_id>/<frame index>"`) point into the dataset's `frames` config.
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
    question: str  # the full prompt text shown to the model
    answer: str  # canonical answer, as text a model would write
    verifier: dict[str, Any]  # the verifier spec (see verifiers.spec)
    frames: list[str] = field(default_factory=list)  # frame ids, in temporal order
    options: list[str] | None = None  # multiple-choice options, in letter order
    provenance: dict[str, Any] = field(default_factory=dict)  # objects, rule and its parameters

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Item":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})
