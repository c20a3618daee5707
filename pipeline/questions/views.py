"""Frames and visibility for question generation: which frames an item may carry and what each shows.

`FrameViews` is the part of a generation `Context` that picks frames (scene-level samples, the
examined stream, frame-level frames), says which objects a frame shows nameably, covers an item's
named objects with frames, and caches per-frame visibility and decoded depth maps.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import Iterable, Sequence

import numpy as np

from numerical3d.pipeline.questions.config import QuestionConfig
from numerical3d.pipeline.questions.facts import ProcessedScene
from numerical3d.pipeline.questions.frame_cover import cover_frames, uniform_pick
from numerical3d.pipeline.questions.nameable import NameRule
from numerical3d.sources.scene import Frame, Scene, SceneObject

# Decoded depth maps a scene keeps (float32: 1.2 MB at 640x480, so 100 such frames).
DEPTH_CACHE_BYTES = 128 * 2**20


class FrameViews:
    """The frames part of a generation context, with the caches it keeps for one scene."""

    facts: ProcessedScene
    scene: Scene
    config: QuestionConfig
    objects: list[SceneObject]

    def _init_views(self) -> None:
        self._visibility: dict[int, dict] = {}
        self._nameable: dict[tuple[int, int], dict[int, int]] = {}  # (id of a rule, frame index) -> FrameViews.nameable
        self._rules: dict[int, NameRule] = {}  # the rules asked for by id (kept alive: their ids key _nameable)
        self._depths: dict[int, np.ndarray] = {}  # frame index -> its decoded depth map (see `depth`)
        self._depth_bytes = 0
        self._covers: dict[tuple, list[int] | None] = {}  # (named ids, required frames) -> cover_frames

    @cached_property
    def scene_frame_indices(self) -> list[int]:
        """Uniformly sampled frame indices for scene-level questions (empty for box-only sources)."""
        return uniform_pick([f.index for f in self.scene.frames], self.config.scene_frames)

    @cached_property
    def frame_order(self) -> list[int]:
        """The scene's frame indices in time order."""
        return [f.index for f in sorted(self.scene.frames, key=lambda f: (f.timestamp, f.index))]

    @cached_property
    def frame_by_index(self) -> dict[int, Frame]:
        return {f.index: f for f in self.scene.frames}

    @cached_property
    def examined_frames(self) -> list[int]:
        """The frames (time order) that items pick from and onsets are searched on: every frame of a video
        of at most `stream_frames`, else that many spread evenly over it, first and last included."""
        return uniform_pick(self.frame_order, self.config.stream_frames)

    @cached_property
    def name_rule(self) -> NameRule:
        c = self.config
        return NameRule(c.min_named_pixels, c.min_named_area, c.min_named_share, c.named_view_area,
                        min_in_image=c.named_in_image, max_hidden=c.named_max_hidden, side_scale=c.named_side_scale)

    def name_rule_with(self, min_share: float, in_image: float, max_hidden: float, side_scale: float) -> NameRule:
        """The config's rule with a subtask's own share, in-image share, hidden share and side scale."""
        return dataclasses.replace(self.name_rule, min_share=min_share, min_in_image=in_image, max_hidden=max_hidden,
                                   side_scale=side_scale)

    def nameable(self, index: int, rule: NameRule | None = None) -> dict[int, int]:
        """instance id -> visible pixels, for the instances frame `index` shows well enough to be named
        (`pipeline.questions.nameable`): what an item may name from that frame, and what makes an onset.
        `rule`: a subtask's own rule instead of the config's (object_count's: a counted chair need not
        show as much of itself as a chair an item asks about)."""
        rule = rule or self.name_rule
        key = (id(rule), index)
        if key not in self._nameable:
            self._rules.setdefault(id(rule), rule)
            frame = self.frame_by_index[index]
            vis = self.visibility(frame)  # decodes the depth map, which the occlusion test reads again
            self._nameable[key] = rule.shown(self.facts.by_id, frame, vis, depth_map=self.decoded_depth(frame))
        return self._nameable[key]

    def _sightings(self, indices: Iterable[int]) -> dict[int, dict[int, int]]:
        out: dict[int, dict[int, int]] = {}
        for index in indices:
            for iid, px in sorted(self.nameable(index).items()):
                out.setdefault(iid, {})[index] = px
        return out

    @cached_property
    def sightings(self) -> dict[int, dict[int, int]]:
        """instance id -> {frame index: visible pixels} for the examined frames showing it nameably."""
        return self._sightings(self.examined_frames)

    def item_frames(self, objects: Sequence[SceneObject], required: Sequence[int] = ()) -> list[int] | None:
        """The frames a scene-level item about `objects` carries: at most `scene_frames`, showing each object.

        They are examined frames, plus the `required` ones (always among them). None when an object is
        visible in none of them (or they need more frames than the budget): such an item is dropped.
        """
        key = (tuple(o.instance_id for o in objects), tuple(required))
        if key not in self._covers:
            order, seen = self.examined_frames, self.sightings
            extra = set(required) - set(order)
            if extra:  # frames found between the examined ones (appearance onsets)
                keep = extra | set(order)
                order = [i for i in self.frame_order if i in keep]
                seen = {iid: dict(px) for iid, px in seen.items()}
                for iid, px in self._sightings(sorted(extra)).items():
                    seen.setdefault(iid, {}).update(px)
            self._covers[key] = cover_frames(order, seen, key[0], self.config.scene_frames, required)
        return self._covers[key]

    @cached_property
    def level_frames(self) -> list[Frame]:
        """Frames examined for frame-level questions, uniformly spread over the video."""
        by_index = {f.index: f for f in self.scene.frames}
        return [by_index[i] for i in uniform_pick(sorted(by_index), self.config.frame_level_frames)]

    @cached_property
    def cloud(self):
        """All object points stacked once, shared by every frame's visibility test."""
        from numerical3d.pipeline.geometry.visibility import SceneCloud

        return SceneCloud.from_scene(self.scene)

    def visibility(self, frame: Frame) -> dict:
        """Per-instance visibility in a frame (cached; the expensive part of frame-level questions)."""
        if frame.index not in self._visibility:
            from numerical3d.pipeline.geometry.visibility import frame_visibility

            self._visibility[frame.index] = frame_visibility(self.scene, frame, depth=self.depth(frame), cloud=self.cloud)
        return self._visibility[frame.index]

    def depth(self, frame: Frame) -> np.ndarray:
        """The frame's depth map, decoded once per scene: visibility and appearance onsets' glimpse test
        read the same maps, and decoding a PNG costs more than either test. Maps are kept while they
        fit in `DEPTH_CACHE_BYTES` (a long stream's later frames are decoded again when asked again)."""
        kept = self._depths.get(frame.index)
        if kept is not None:
            return kept
        dmap = np.asarray(frame.depth(), dtype=np.float32)
        if self._depth_bytes + dmap.nbytes <= DEPTH_CACHE_BYTES:
            self._depths[frame.index] = dmap
            self._depth_bytes += dmap.nbytes
        return dmap

    def decoded_depth(self, frame: Frame) -> np.ndarray | None:
        """The frame's depth map if this scene has it decoded already, else None (nothing is decoded)."""
        return self._depths.get(frame.index)

    def frame_unique_visible(self, frame: Frame) -> tuple[dict[str, SceneObject], dict]:
        """Objects whose label is visible exactly once in the frame, and the frame's visibility."""
        vis = self.visibility(frame)
        seen: dict[str, list[SceneObject]] = {}
        for o in self.objects:
            v = vis.get(o.instance_id)
            if v is not None and v.pixels > 0 and o.label not in self.scene.uncertain_labels:
                seen.setdefault(o.label, []).append(o)
        return {lab: objs[0] for lab, objs in sorted(seen.items()) if len(objs) == 1}, vis
