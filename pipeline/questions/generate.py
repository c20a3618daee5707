"""The driver: run the selected generators over scenes with a seeded config.

Same scenes + config + seed give the same items in the same order: every generator draws from
its own generator seeded by (seed, source, scene, subtask), and scenes and subtasks are visited
in a fixed order.
"""

from __future__ import annotations

import importlib
from itertools import islice
from typing import Iterable, Iterator

from pipeline.items import Item
from pipeline.questions.common import Context, QuestionConfig
from pipeline.questions.gates import DropCounter, LetterBalancer
from pipeline.templating import templates
from sources.scene import Scene, SceneError

_MODULES = ("object_count", "object_size", "room_size", "abs_distance", "camera_distance", "grounding_3d",
            "grounding_2d", "rel_distance", "rel_direction", "appearance_order", "route_plan", "position_relation")
SUBTASKS = {name: importlib.import_module(f"pipeline.questions.{name}") for name in _MODULES}


def selected(config: QuestionConfig) -> list[str]:
    names = list(config.subtasks) or list(SUBTASKS)
    unknown = [n for n in names if n not in SUBTASKS]
    if unknown:
        raise ValueError(f"unknown subtask(s) {unknown}; known: {', '.join(SUBTASKS)}")
    return names


def generate_scene(scene: Scene, config: QuestionConfig, drops: DropCounter | None = None,
                   balancer: LetterBalancer | None = None) -> list[Item]:
    """All items of one scene, subtask by subtask, at most `max_per_subtask` each."""
    ctx = Context(scene, config, drops, balancer, templates(config.templates_dir))
    out: list[Item] = []
    for name in selected(config):
        mod = SUBTASKS[name]
        if not mod.BOX_ONLY and not scene.frames:
            ctx.drops.drop(name, "source_has_no_frames")
            continue
        out.extend(islice(mod.generate(ctx), config.max_per_subtask))
    return out


def generate_items(scenes: Iterable[Scene | SceneError], config: QuestionConfig,
                   drops: DropCounter | None = None) -> Iterator[Item]:
    """Items of every scene in order; unreadable scenes are counted as drops, not raised."""
    drops = drops if drops is not None else DropCounter()
    balancer = LetterBalancer()
    selected(config)
    for scene in scenes:
        if isinstance(scene, SceneError):
            drops.drop("scene", "unreadable_scene")
            continue
        yield from generate_scene(scene, config, drops, balancer)
