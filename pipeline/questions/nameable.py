"""When a frame shows an object well enough for a person to name it.

Visible is not nameable: a cup two metres away is a dozen pixels, and a toilet cut by the image border
shows one corner of its bowl. An object an item names counts as shown in a frame only when, under the
occlusion-aware visibility rule (`pipeline.geometry.visibility`):

- at least `min_named_pixels` image pixels hold a visible point of it (it is there at all);
- its visible extent, the 2D box around its visible points rescaled to a 640x480 frame, covers at least
  `min_named_area` pixels (it is big enough to recognise at the size a model sees a frame);
- that extent is at least `min_named_share` of the extent of its whole annotated box projected into the
  same frame, beyond the image border too (enough of it shows: not a corner, not a sliver behind
  something), unless the visible extent alone covers `named_view_area` pixels (a bed or a sofa filling
  the view is recognisable from a part of it).

Only what every source with frames has is used: the frame's visibility (object points, depth map,
pose) and the object's box. The 2D box of visible points does not depend on how densely a source
samples its surfaces, unlike the count of pixels they hit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from numerical3d.pipeline.geometry.visibility import Visibility, _clipped_projection_bounds
from numerical3d.sources.scene import Frame, SceneObject

REFERENCE_PIXELS = 640 * 480  # areas are compared at this frame size, whatever a source's image size


@dataclass(frozen=True)
class NameRule:
    """The thresholds of the rule (QuestionConfig's fields of the same names)."""

    min_pixels: int
    min_area: int
    min_share: float
    view_area: int

    def shown(self, objects: Mapping[int, SceneObject], frame: Frame, vis: Mapping[int, Visibility],
              near: float = 0.05) -> dict[int, int]:
        """instance id -> visible pixels, for the instances of `vis` the frame shows well enough to name."""
        scale = REFERENCE_PIXELS / (float(frame.width) * float(frame.height))
        out: dict[int, int] = {}
        for iid, v in vis.items():
            obj = objects.get(iid)
            if obj is None or v.pixels < self.min_pixels:
                continue
            x0, y0, x1, y1 = v.bbox2d
            area = (x1 - x0) * (y1 - y0) * scale
            if area < self.min_area:
                continue
            if area < self.view_area and area < self.min_share * _box_extent(obj, frame, near) * scale:
                continue
            out[iid] = v.pixels
        return out


def _box_extent(obj: SceneObject, frame: Frame, near: float) -> float:
    """Area (image pixels) of the 2D box around the object's whole annotated box projected into the frame,
    the part behind the camera's near plane cut off, the image border not."""
    box = obj.box
    bounds = _clipped_projection_bounds(box.center, box.extents / 2.0, box.rotation, frame.intrinsics,
                                        np.asarray(frame.pose, dtype=np.float64), near)
    if bounds is None:
        return 0.0
    w, h = bounds[1] - bounds[0]
    return float(w * h)
