"""What every question generator shares: the per-scene `Context` and the numeric items.

A `Context` is one scene under generation, made of three parts, each in its own module: its facts
(`facts.FactsView` over a `ProcessedScene`), its frames and visibility (`views.FrameViews`) and
emission (`emission.Emission`: `place`, `emit`, `self_check`). Subtask modules use them all through
the one `ctx`. The question config lives in `config.py`; its names are importable from here too.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

import numpy as np

from numerical3d.pipeline.questions.config import DEFAULT_IGNORE, QuestionConfig
from numerical3d.pipeline.questions.emission import Emission
from numerical3d.pipeline.questions.facts import FactsView, ProcessedScene, process_scene
from numerical3d.pipeline.questions.gates import DropCounter
from numerical3d.pipeline.questions.registry import template_dirs
from numerical3d.pipeline.questions.views import FrameViews
from numerical3d.pipeline.templating import templates
from numerical3d.sources.scene import Scene, SceneObject

__all__ = ["DEFAULT_IGNORE", "Context", "ProcessedScene", "QuestionConfig", "fmt_number", "numeric_distractors",
           "numeric_items", "process_scene"]


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little")


class Context(FactsView, FrameViews, Emission):
    """One scene under generation: its processed facts, seeded generators, frames, counters, and `emit`."""

    def __init__(self, scene: Scene | ProcessedScene, config: QuestionConfig, drops: DropCounter | None = None):
        if isinstance(scene, ProcessedScene):
            if scene.ignore_labels != config.ignore_labels:
                raise ValueError(f"scene {scene.scene.scene_id} was processed with other ignore_labels than the config's")
            self.facts = scene
        else:
            self.facts = ProcessedScene(scene, config.ignore_labels)
        self.scene = self.facts.scene
        self.config = config
        self._init_views()
        self._init_emission(drops, templates(config.templates_dir, template_dirs()))

    def rng(self, subtask: str) -> np.random.Generator:
        """A generator per (seed, scene, subtask): adding a subtask never changes another's items."""
        return np.random.default_rng(_seed(self.config.seed, self.scene.source, self.scene.scene_id, subtask))


def numeric_distractors(value: float, n: int, gap: float, rng: np.random.Generator, decimals: int) -> list[float]:
    """n - 1 wrong values around `value`, every pair of the n options at least `gap` (relative) apart.

    Options are drawn on a log scale: consecutive options differ by a factor of at least
    1 / (1 - gap), with a random extra spread, and the correct value sits at a random rank.
    """
    step = -np.log1p(-gap) * 1.05  # a little above the minimal factor so rounding never breaks the gap
    rank = int(rng.integers(n))  # how many options are below the answer
    logs = np.log(value) + step * (np.arange(n) - rank) * (1.0 + 0.5 * rng.random())
    vals = [round(float(np.exp(v)), decimals) for i, v in enumerate(logs) if i != rank]
    return vals


def fmt_number(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}"


def numeric_items(ctx: Context, subtask: str, rng: np.random.Generator, *, value: float, unit: str,
                  decimals: int, qctx: dict[str, Any], params: dict[str, Any], objects: Sequence[SceneObject],
                  frames: Sequence[int] | None, rule: dict[str, Any]):
    """The open-ended and/or multiple-choice items of one numeric measurement.

    Visibility is checked before any letter is placed, so the per-scene letter balance holds for
    the items kept (one `object_not_visible` drop per form, as `emit` would count them)."""
    from numerical3d.pipeline.questions.gates import distractors_apart, named_visible
    from numerical3d.verifiers.spec import choice_spec, numeric_spec
    from numerical3d.verifiers.units import UNITS

    cfg = ctx.config
    if frames is None:
        seen, reason = named_visible(ctx, objects)
        if not seen:
            for _ in cfg.form(subtask):
                ctx.drops.drop(subtask, reason)
            return
    answer = round(float(value), decimals)
    for form in cfg.form(subtask):
        common = dict(qctx=qctx, objects=objects, frames=frames, rule=rule, value=float(value))
        if form == "open":
            extra = {"error": cfg.numeric_error} if cfg.numeric_error else {}
            spec = numeric_spec(answer, unit, **extra)
            item = ctx.emit(subtask, rng, spec=spec, kind="numeric", unit=unit,
                            params={**params, "form": "open"}, **common)
        else:
            wrong = numeric_distractors(answer, cfg.n_options, cfg.distractor_gap, rng, decimals)
            if not ctx.drops.check(subtask, distractors_apart([answer, *wrong], cfg.distractor_gap)):
                continue
            shown = UNITS[unit].option
            options, letter = ctx.place(subtask, f"{fmt_number(answer, decimals)} {shown}",
                                        [f"{fmt_number(v, decimals)} {shown}" for v in wrong], rng)
            item = ctx.emit(subtask, rng, spec=choice_spec(letter, options), kind="choice", options=options,
                            params={**params, "form": "mc"}, **common)
        yield item
