"""When a frame shows an object well enough for a person to name it.

Visible is not nameable: a cup two metres away is a dozen pixels, and a toilet cut by the image border
shows one corner of its bowl. An object an item names counts as shown in a frame only when, under the
occlusion-aware visibility rule (`pipeline.geometry.visibility`):

- at least `min_named_pixels` image pixels hold a visible point of it (it is there at all);
- its visible extent, the 2D box around its visible points rescaled to a 640x480 frame, covers at least
  `min_named_area` pixels (it is big enough to recognise at the size a model sees a frame), and its
  shorter side is at least its category's `MIN_SIDE` (a lamp 30 px across or a cabinet seen as a
  sliver is a stick or a panel, whatever its area; `MEDIUM_SIDE` for a category not listed);
- that extent is at least `min_named_share` of the extent of its whole annotated box projected into the
  same frame, beyond the image border too (enough of it shows: not a corner, not a sliver behind
  something; furniture on legs, `LEGGED`, needs `LEGGED_SHARE` of that share), and at least
  `named_in_image` of that whole extent lies inside the image (not cut by the border; `LEGGED_SHARE` of
  it for furniture on legs, and for a category a part of names where that part fills the view, below),
  unless the visible extent alone covers `named_view_area` pixels and the category is one a part of
  names (`PART_NAMES`: a bed or a sofa filling the view; a chair's back filling it is a panel);
- where the scene also holds a category a viewer confuses it with (`CONFUSABLE`: a desk and a table with
  a monitor on it, a refrigerator and a door, a cabinet and a dresser), that extent is at least
  `CONFUSABLE_SHARE` of the whole box's: the frame shows the object whole enough for its form (a desk's
  drawers, a refrigerator's depth and freezer door) to tell the two apart;
- at most `named_max_hidden` (`MAX_HIDDEN`) of its projected box shows something nearer
  (`visibility.hidden_share`): the box around its visible points stretches over an occluder, so a
  nightstand behind a chair has a large extent and little of itself in view;
- the frame shows objects at all: the visible extents of every object it shows cover at least
  `MIN_COVER` of it. A frame of a bare wall with a lamp on it shows a viewer nothing to go by, and an
  item never carries it.

Only what every source with frames has is used: the frame's visibility (object points, depth map,
pose) and the object's box. The 2D box of visible points does not depend on how densely a source
samples its surfaces, unlike the count of pixels they hit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from numerical3d.pipeline.geometry.visibility import Visibility, _clipped_projection_bounds, hidden_share
from numerical3d.sources.naming import LOOKED_AT_SIDE, MEDIUM_SIDE
from numerical3d.sources.scene import Frame, SceneObject

REFERENCE_PIXELS = 640 * 480  # areas are compared at this frame size, whatever a source's image size

# Shorter side (px at 640x480) of the visible extent from which a category can be named: the sides a look
# at full-size frames asked for (`sources.naming`; a lamp 30 px across is a stick, a table seen edge-on a
# line), a category not listed `MEDIUM_SIDE`. Earlier rules took 0.6 of them for small categories only,
# to keep the supply of subtasks naming several objects; generator 10's walks aimed at the objects (and
# 11's at their fronts) frame most objects at these sides (docs/questions.md, "Generator 11").
MIN_SIDE: Mapping[str, int] = LOOKED_AT_SIDE
PART_NAMES = frozenset({"bed", "sofa", "bookshelf"})  # named from a part that fills the view
# Furniture on legs is named from its seat or top and a leg or two: a third of a chair cut by the border
# is still a chair, while a third of a cabinet, refrigerator or speaker is a panel. These need `LEGGED_SHARE`
# times `min_named_share`; they are also most of what object_count counts, which needs every instance.
LEGGED = frozenset({"chair", "stool", "table", "desk", "bench"})
LEGGED_SHARE = 0.6
CONFUSABLE: tuple[frozenset[str], ...] = (frozenset({"desk", "table"}), frozenset({"refrigerator", "door"}),
                                          frozenset({"cabinet", "dresser"}))
CONFUSABLE_SHARE = 0.5
MIN_COVER = 0.05  # share of the frame the objects' visible extents cover: below, a bare wall or floor
MAX_HIDDEN = 0.5  # share of an object's projected box that something nearer may cover (visibility.hidden_share)


@dataclass(frozen=True)
class NameRule:
    """The thresholds of the rule (QuestionConfig's fields of the same names; the per-category ones are
    this module's tables)."""

    min_pixels: int
    min_area: int
    min_share: float
    view_area: int
    min_side: Mapping[str, int] = field(default_factory=lambda: MIN_SIDE)
    medium_side: int = field(default_factory=lambda: MEDIUM_SIDE)  # a category `min_side` does not list
    side_scale: float = 1.0  # the sides asked are this times the table's
    part_names: frozenset[str] = PART_NAMES
    legged: frozenset[str] = LEGGED
    legged_share: float = LEGGED_SHARE
    confusable: tuple[frozenset[str], ...] = CONFUSABLE
    confusable_share: float = CONFUSABLE_SHARE
    min_cover: float = MIN_COVER
    max_hidden: float = MAX_HIDDEN
    min_in_image: float = 0.0  # least share of the whole box's projected extent inside the image (1: not cut)

    def in_image_of(self, label: str, by_part: bool = False) -> float:
        """The least share of its whole box's projected extent inside the image for an object of `label`
        (furniture on legs, or a bed or sofa filling the view: `legged_share` of it, named from its seat
        or top and a leg, or from most of it; a bed's corner at the border is a blanket)."""
        return self.legged_share * self.min_in_image if label in self.legged or by_part else self.min_in_image

    def share_of(self, label: str) -> float:
        """The least share of its whole box's extent a frame must show of an object of `label`."""
        return self.legged_share * self.min_share if label in self.legged else self.min_share

    def shown(self, objects: Mapping[int, SceneObject], frame: Frame, vis: Mapping[int, Visibility],
              near: float = 0.05, depth_map: np.ndarray | None = None) -> dict[int, int]:
        """instance id -> visible pixels, for the instances of `vis` the frame shows well enough to name.
        `depth_map`: the frame's depth map when the caller has it decoded (else decoded when needed)."""
        scale = REFERENCE_PIXELS / (float(frame.width) * float(frame.height))
        if covered(frame, [v for iid, v in vis.items() if iid in objects]) < self.min_cover:
            return {}
        labels = {o.label for o in objects.values()}
        depth: list[np.ndarray] = [] if depth_map is None else [depth_map]  # decoded once some object needs it
        out: dict[int, int] = {}
        for iid, v in vis.items():
            obj = objects.get(iid)
            if obj is None or v.pixels < self.min_pixels:
                continue
            x0, y0, x1, y1 = v.bbox2d
            area = (x1 - x0) * (y1 - y0) * scale
            if area < self.min_area or min(x1 - x0, y1 - y0) * math.sqrt(scale) < \
                    self.side_scale * self.min_side.get(obj.label, self.medium_side):
                continue
            confused = any(obj.label in pair and pair <= labels for pair in self.confusable)
            by_part = not confused and area >= self.view_area and obj.label in self.part_names
            bounds = _projected_bounds(obj, frame, near) if confused or not by_part or self.min_in_image > 0.0 else None
            if confused:
                if area < self.confusable_share * _box_extent(bounds) * scale:
                    continue
            elif not by_part and area < self.share_of(obj.label) * _box_extent(bounds) * scale:
                continue
            if self.min_in_image > 0.0 and _share_in_image(bounds, frame) < self.in_image_of(obj.label, by_part):
                continue
            if frame.load_depth is not None:
                depth = depth or [np.asarray(frame.depth(), dtype=np.float32)]
                if hidden_share(obj, frame, depth[0], near=near) > self.max_hidden:
                    continue
            out[iid] = v.pixels
        return out


def covered(frame: Frame, vis: list[Visibility], cell: int = 8) -> float:
    """Share of the frame inside the union of the visible extents (on a grid of `cell`-pixel squares,
    a cell counting when an extent touches it)."""
    grid = np.zeros((-(-int(frame.height) // cell), -(-int(frame.width) // cell)), dtype=bool)
    for v in vis:
        x0, y0, x1, y1 = v.bbox2d
        grid[y0 // cell:-(-y1 // cell), x0 // cell:-(-x1 // cell)] = True
    return float(grid.mean())


def _projected_bounds(obj: SceneObject, frame: Frame, near: float) -> np.ndarray | None:
    """The 2D box (min and max corner, image pixels) around the object's whole annotated box projected
    into the frame, the part behind the camera's near plane cut off, the image border not; None when
    nothing of it is in front of the camera."""
    box = obj.box
    return _clipped_projection_bounds(box.center, box.extents / 2.0, box.rotation, frame.intrinsics,
                                      np.asarray(frame.pose, dtype=np.float64), near)


def _share_in_image(bounds: np.ndarray | None, frame: Frame) -> float:
    """Share of the projected box (`_projected_bounds`) that lies inside the image: 1 when the border
    cuts nothing off."""
    if bounds is None:
        return 0.0
    lo, hi = bounds[0], bounds[1]
    inside = np.clip(hi, 0.0, [frame.width, frame.height]) - np.clip(lo, 0.0, [frame.width, frame.height])
    whole = float(np.prod(hi - lo))
    return float(np.prod(inside)) / whole if whole > 0 else 0.0


def _box_extent(bounds: np.ndarray | None) -> float:
    """Area (image pixels) of the projected box (`_projected_bounds`)."""
    if bounds is None:
        return 0.0
    w, h = bounds[1] - bounds[0]
    return float(w * h)
