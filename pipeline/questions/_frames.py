"""Frames for questions: the walk over frame-level candidates, and the frames a scene-level item carries.

A scene-level item names objects (the counted instances, the reference and candidates, the route's
landmarks); the frames it carries must show each of them, or a model is asked about something it
cannot see. `frame_cover.cover_frames` picks them: first the frames the item cannot do without (appearance
onsets), then, greedily, the frame showing the most still-unseen named objects, then frames spread
over the video (each the farthest in time from those already taken) up to the budget.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from numerical3d.pipeline.questions.common import Context
from numerical3d.pipeline.questions.gates import min_pixels
from numerical3d.sources.scene import Frame, SceneObject


def visible_objects(ctx: Context, subtask: str, rng: np.random.Generator) -> Iterator[tuple[Frame, SceneObject, object]]:
    """(frame, object, visibility) in a seeded order: frames shuffled, then the frame's objects.

    An object qualifies when its label is visible exactly once in the frame ('the chair' is then
    unambiguous in that image) and it covers at least `min_visible_pixels` pixels.
    """
    frames = ctx.level_frames
    for fi in rng.permutation(len(frames)):
        frame = frames[fi]
        unique, vis = ctx.frame_unique_visible(frame)
        labels = sorted(unique)
        for li in rng.permutation(len(labels)):
            obj = unique[labels[li]]
            v = vis[obj.instance_id]
            if ctx.drops.check(subtask, min_pixels(v.pixels, ctx.config.min_visible_pixels)):
                yield frame, obj, v


def camera_coords(points: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """World points into the camera's OpenCV axes (x right, y down, z forward)."""
    pose = np.asarray(pose, dtype=np.float64)
    return (np.asarray(points, dtype=np.float64).reshape(-1, 3) - pose[:3, 3]) @ pose[:3, :3]
