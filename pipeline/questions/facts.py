"""Scene facts for question generation: question-worthy objects, counts, exact distances, the floor.

`ProcessedScene` is scene processing, done once per scene; `FactsView` is the part of a
generation `Context` that reads it (so subtask modules write `ctx.unique`, `ctx.distance(a, b)`).
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from numerical3d.pipeline.questions.config import DEFAULT_IGNORE, QuestionConfig
from numerical3d.sources.scene import Scene, SceneObject

if TYPE_CHECKING:
    from numerical3d.pipeline.geometry.floor import FloorEstimate


class ProcessedScene:
    """A scene with the geometry its box questions need: question-worthy objects and exact distances.

    This is scene processing, not question synthesis: build it once per scene (`process_scene`) and
    every later generation run over it (other seeds, forms, subtasks) reads the facts instead of
    recomputing them. The facts depend on the scene and the ignored labels only. Each one is computed
    when first read; `process_scene` reads the distance matrix, the one costly fact, up front.
    """

    def __init__(self, scene: Scene, ignore_labels: frozenset[str] = DEFAULT_IGNORE):
        self.scene = scene
        self.ignore_labels = frozenset(ignore_labels)

    @cached_property
    def objects(self) -> list[SceneObject]:
        """Question-worthy objects (structural labels removed), in scene order."""
        return [o for o in self.scene.objects if o.label not in self.ignore_labels]

    @cached_property
    def by_id(self) -> dict[int, SceneObject]:
        """instance id -> question-worthy object."""
        return {o.instance_id: o for o in self.objects}

    @cached_property
    def counts(self) -> dict[str, int]:
        """Instances per label, for labels whose count is trusted (not in `Scene.uncertain_labels`)."""
        out: dict[str, int] = {}
        for o in self.objects:
            if o.label not in self.scene.uncertain_labels:
                out[o.label] = out.get(o.label, 0) + 1
        return dict(sorted(out.items()))

    @cached_property
    def unique(self) -> dict[str, SceneObject]:
        """label -> its only instance, for labels with exactly one (trusted) instance."""
        return {o.label: o for o in self.objects if self.counts.get(o.label) == 1}

    @cached_property
    def unique_distances(self) -> tuple[dict[int, int], dict[int, int], np.ndarray]:
        """Exact box distances from each unique object (rows) to each question-worthy object (columns).

        One batched `box_distance_matrix` call per scene: per pair the cost is fcl's, but every call
        has a fixed cost (and pays the exact fallback once for any touching pair), which per-pair or
        per-reference calls paid again and again. Rows and columns are keyed by object identity.
        """
        from numerical3d.pipeline.geometry import box_distance_matrix

        rows = [self.unique[lab] for lab in sorted(self.unique)]
        matrix = box_distance_matrix([o.box for o in rows], [o.box for o in self.objects]) if rows \
            else np.zeros((0, len(self.objects)))
        return ({id(o): i for i, o in enumerate(rows)}, {id(o): j for j, o in enumerate(self.objects)}, matrix)

    @cached_property
    def label_columns(self) -> dict[str, np.ndarray]:
        """label -> the columns of its instances in `objects` (and in the distance matrix)."""
        cols: dict[str, list[int]] = {}
        for j, o in enumerate(self.objects):
            cols.setdefault(o.label, []).append(j)
        return {lab: np.array(js) for lab, js in cols.items()}

    @cached_property
    def _floor(self) -> FloorEstimate | ValueError:
        from numerical3d.pipeline.geometry.floor import floor_estimate

        try:
            return floor_estimate(self.scene)
        except ValueError as exc:
            return exc

    def floor(self) -> FloorEstimate:
        """The floor polygon (`floor_estimate`), estimated once per scene: room_size, route_plan and
        the scene's geometry record share it. Raises ValueError when the scene has no floor evidence."""
        if isinstance(self._floor, ValueError):
            raise ValueError(str(self._floor))
        return self._floor

    def floor_or_none(self) -> FloorEstimate | None:
        """The floor polygon, or None for a scene with no floor evidence."""
        return None if isinstance(self._floor, ValueError) else self._floor


def process_scene(scene: Scene, config: QuestionConfig | None = None) -> ProcessedScene:
    """Scene processing for question generation: the exact distance matrix, computed once."""
    out = ProcessedScene(scene, (config or QuestionConfig()).ignore_labels)
    _ = out.unique_distances
    return out


class FactsView:
    """The facts part of a generation context: reads of its `ProcessedScene`."""

    facts: ProcessedScene

    @property
    def objects(self) -> list[SceneObject]:
        return self.facts.objects

    @property
    def counts(self) -> dict[str, int]:
        return self.facts.counts

    @property
    def unique(self) -> dict[str, SceneObject]:
        return self.facts.unique

    @property
    def unique_distances(self) -> tuple[dict[int, int], dict[int, int], np.ndarray]:
        return self.facts.unique_distances

    def distance(self, a: SceneObject, b: SceneObject) -> float:
        """Exact box distance from the unique object `a` to the question-worthy object `b` (a's box first)."""
        rows, cols, matrix = self.facts.unique_distances
        return float(matrix[rows[id(a)], cols[id(b)]])

    def label_distance(self, a: SceneObject, label: str) -> float:
        """Exact box distance from the unique object `a` to the closest instance of `label`."""
        rows, _, matrix = self.facts.unique_distances
        return float(matrix[rows[id(a)], self.facts.label_columns[label]].min())
