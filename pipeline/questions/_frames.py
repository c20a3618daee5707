"""Frames for questions: the walk over frame-level candidates, and the frames a scene-level item carries.

A scene-level item names objects (the counted instances, the reference and candidates, the route's
landmarks); the frames it carries must show each of them, or a model is asked about something it
cannot see. `cover_frames` picks them: first the frames the item cannot do without (appearance
onsets), then, greedily, the frame showing the most still-unseen named objects, then frames spread
over the video (each the farthest in time from those already taken) up to the budget.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np

from numerical3d.pipeline.questions.common import Context, _uniform
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


def cover_frames(order: Sequence[int], seen: Mapping[int, Mapping[int, int]], named: Iterable[int],
                 budget: int, required: Iterable[int] = ()) -> list[int] | None:
    """Frame indices (in video order) that show every named instance, at most `budget` of them.

    order: the scene's frame indices in time order. seen: instance id -> {frame index: visible pixels}
    for the frames where the instance counts as visible. required: frames to keep whatever they show.
    None when a named instance is visible in no frame, or covering them all takes more than `budget`.
    Deterministic: ties go to the frame with more visible pixels of the still-unseen instances, then
    to the earlier frame.
    """
    pos = {f: i for i, f in enumerate(order)}
    chosen = set(required)
    todo = [iid for iid in dict.fromkeys(named) if not chosen & seen.get(iid, {}).keys()]
    if any(not seen.get(iid) for iid in todo):
        return None
    while todo:
        gain: dict[int, tuple[int, int]] = {}
        for iid in todo:
            for f, px in seen[iid].items():
                n, total = gain.get(f, (0, 0))
                gain[f] = (n + 1, total + px)
        best = min(gain, key=lambda f: (-gain[f][0], -gain[f][1], pos[f]))
        chosen.add(best)
        todo = [iid for iid in todo if best not in seen[iid]]
    if len(chosen) > budget:
        return None
    if not chosen:
        return _uniform(list(order), budget)
    taken = np.array(sorted(pos[f] for f in chosen))
    gap = np.min(np.abs(np.arange(len(order))[:, None] - taken[None, :]), axis=1)
    while len(taken) < min(budget, len(order)):
        k = int(np.argmax(gap))  # the first of the frames farthest from every frame taken
        taken = np.append(taken, k)
        gap = np.minimum(gap, np.abs(np.arange(len(order)) - k))
    return [order[i] for i in sorted(taken)]
