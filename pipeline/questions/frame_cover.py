"""Which frames an item carries: a spread over the video, or a cover of the objects it names.

A leaf of the questions package (numpy only), so both the context that emits items and the
frame helpers of the frame-level subtasks use it without importing each other.
"""

from __future__ import annotations

import functools
from typing import Iterable, Mapping, Sequence

import numpy as np


def uniform_pick(indices: Sequence[int], n: int) -> list[int]:
    """Up to n indices spread evenly from first to last (all of them when there are fewer)."""
    if len(indices) <= n:
        return list(indices)
    pick = np.round(np.linspace(0, len(indices) - 1, n)).astype(int)
    return [indices[i] for i in pick]


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
        return uniform_pick(list(order), budget)
    return [order[i] for i in _spread(tuple(sorted(pos[f] for f in chosen)), len(order), budget)]


@functools.lru_cache(maxsize=4096)
def _spread(taken: tuple[int, ...], n: int, budget: int) -> list[int]:
    """Positions `taken` among n frames, topped up to the budget with the frames farthest from every
    frame taken (sorted). A scene's items share their covers and videos, so each is worked out once."""
    picked = np.array(taken)
    gap = np.min(np.abs(np.arange(n)[:, None] - picked[None, :]), axis=1)
    while len(picked) < min(budget, n):
        k = int(np.argmax(gap))  # the first of the frames farthest from every frame taken
        picked = np.append(picked, k)
        gap = np.minimum(gap, np.abs(np.arange(n) - k))
    return sorted(int(i) for i in picked)
