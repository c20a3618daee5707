"""3D geometry the answers are computed from: exact, from the scene's own boxes and points, so a
verifier checks an answer against a measured value, never against an estimate.

Boxes from points, exact box/point/category distances (python-fcl), the room's
floor polygon and area, and per-frame visibility with a depth test. Methods and
parameters are documented in docs/geometry.md.
"""

from numerical3d.pipeline.geometry.boxes import fit_box, refit_boxes
from numerical3d.pipeline.geometry.distance import box_distance, box_distance_matrix, category_distance, point_box_distance
from numerical3d.pipeline.geometry.floor import FloorEstimate, FloorParams, floor_estimate, floor_polygon, room_area
from numerical3d.pipeline.geometry.visibility import (
    SceneCloud,
    Visibility,
    VisibilityParams,
    box_glimpses,
    first_appearance,
    first_appearance_by_label,
    frame_visibility,
    project_points,
    scene_visibility,
    world_to_camera,
)

__all__ = [
    "FloorEstimate",
    "FloorParams",
    "SceneCloud",
    "Visibility",
    "VisibilityParams",
    "box_distance",
    "box_glimpses",
    "box_distance_matrix",
    "category_distance",
    "first_appearance",
    "first_appearance_by_label",
    "fit_box",
    "floor_estimate",
    "floor_polygon",
    "frame_visibility",
    "point_box_distance",
    "project_points",
    "refit_boxes",
    "room_area",
    "scene_visibility",
    "world_to_camera",
]
