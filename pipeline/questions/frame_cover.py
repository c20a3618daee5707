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
    The cover is topped up to the budget only with frames showing a named instance (with nothing named,
    any instance): a frame of a bare wall or of other objects shows a viewer nothing the question asks
    about, so an item carries fewer frames rather than such ones.
    Deterministic: ties go to the frame with more visible pixels of the still-unseen instances, then
    to the earlier frame.
    """
    pos = {f: i for i, f in enumerate(order)}
    named = list(dict.fromkeys(named))
    chosen = set(required)
    todo = [iid for iid in named if not chosen & seen.get(iid, {}).keys()]
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
    showing = {f for iid in (named or seen) for f in seen.get(iid, {}) if f in pos}
    if not showing | chosen:
        return uniform_pick(list(order), budget)
    taken = tuple(sorted(pos[f] for f in chosen))
    return [order[i] for i in _spread(taken, tuple(sorted(pos[f] for f in showing)), budget)]


@functools.lru_cache(maxsize=4096)
def _spread(taken: tuple[int, ...], pool: tuple[int, ...], budget: int) -> list[int]:
    """Positions `taken`, topped up to the budget with the positions of `pool` farthest from every
    position taken (sorted). A scene's items share their covers and videos, so each is worked out once."""
    picked = list(taken)
    free = np.array(sorted(set(pool) - set(taken)), dtype=np.int64)
    if picked:
        gap = np.min(np.abs(free[:, None] - np.array(picked)[None, :]), axis=1)
    else:
        gap = np.full(len(free), np.iinfo(np.int64).max)
    while len(picked) < budget and len(free):
        k = int(np.argmax(gap))  # the first of the pool's positions farthest from every position taken
        picked.append(int(free[k]))
        gap = np.minimum(np.delete(gap, k), np.abs(np.delete(free, k) - free[k]))
        free = np.delete(free, k)
    return sorted(int(i) for i in picked)
