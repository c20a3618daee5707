"""How big a category must look for a person to name it: one table for the generator's walk and the
pipeline's nameable rule.

The sides come from looking at the named objects of 40-scene synthetic builds on contact sheets
(`benchmarks/nameable_sheet.py`; docs/questions.md, "What an item's frames show"): the shorter side, in
pixels of a 640 px wide frame, of the 2D box around what shows of an object, below which a bottle is a
stick, a cabinet a panel and a sofa a low wall. A category not listed needs `MEDIUM_SIDE`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

MEDIUM_SIDE = 64
LOOKED_AT_SIDE: Mapping[str, int] = MappingProxyType({
    "bottle": 48, "keyboard": 48,  # thin: the side is their width
    "cup": 56, "book": 56,
    "trash can": 64, "microwave": 64, "monitor": 64, "stool": 64, "plant": 64, "sink": 64, "tv": 64, "lamp": 64,
    "toilet": 64, "nightstand": 64, "speaker": 64, "basket": 64, "fan": 64, "printer": 64,
    "laptop": 72, "box": 72, "pillow": 72, "backpack": 72, "chair": 72,
    "cabinet": 96, "dresser": 96, "desk": 96, "table": 96, "bookshelf": 96, "refrigerator": 96, "door": 96,
    "sofa": 112, "bed": 112,
})


def looked_at_side(label: str) -> int:
    """The side (px at 640 wide) an object of `label` must show to be named."""
    return LOOKED_AT_SIDE.get(label, MEDIUM_SIDE)
