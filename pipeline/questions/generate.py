"""The driver: run the selected generators over scenes with a seeded config.

Same scenes + config + seed give the same items in the same order: every generator draws from
its own generator seeded by (seed, source, scene, subtask), and scenes and subtasks are visited
in a fixed order. `generate_scene` is the one generation path: the build calls it per scene and
`generate_items` (behind `numerical3d questions`) calls it for each scene in turn, so a scene's
items, multiple-choice letters included, never depend on which other scenes run with it.

The self-check runs over the candidates of every subtask of a scene at once. A subtask's generator
is advanced exactly as far as checking each candidate in turn would advance it: it is asked for as
many candidates as it still has items to fill, and asked again only for the shortfall left by
failed checks.
"""

from __future__ import annotations

from itertools import islice
from typing import Iterable, Iterator

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.common import Context, ProcessedScene, QuestionConfig
from numerical3d.pipeline.questions.gates import DropCounter
from numerical3d.pipeline.questions.registry import Subtask, SubtaskError, registry
from numerical3d.sources.scene import Scene, SceneError


def selected(config: QuestionConfig) -> list[Subtask]:
    """The subtasks a config generates: the ones it names, in its order, or every registered one."""
    reg = registry()
    names = list(config.subtasks) or list(reg)
    unknown = [n for n in names if n not in reg]
    if unknown:
        raise SubtaskError(f"unknown subtask(s) {unknown}; known: {', '.join(reg)}")
    return [reg[n] for n in names]


def generate_scene(scene: Scene | ProcessedScene, config: QuestionConfig, drops: DropCounter | None = None) -> list[Item]:
    """All items of one scene, subtask by subtask, at most `QuestionConfig.scene_cap` each.

    A `ProcessedScene` (see `process_scene`) brings its geometry along; a plain `Scene` is processed
    here, on the fly.
    """
    ctx = Context(scene, config, drops)
    # (generator, admitted items, cap) per selected subtask
    runs: list[tuple[Iterator[Item], list[Item], int]] = []
    for sub in selected(config):
        if sub.needs_frames and not ctx.scene.frames:
            ctx.drops.drop(sub.name, "source_has_no_frames")
            continue
        runs.append((sub.generate(ctx), [], config.scene_cap(sub.name)))
    pending = [run for run in runs if run[2] > 0]  # runs that may still be asked for candidates
    while pending:
        asked = [(run, list(islice(run[0], run[2] - len(run[1])))) for run in pending]
        admitted = {id(it) for it in ctx.self_check([it for _, got in asked for it in got])}
        pending = []
        for run, got in asked:
            want = run[2] - len(run[1])
            run[1].extend(it for it in got if id(it) in admitted)
            if len(got) == want and len(run[1]) < run[2]:  # not exhausted, and failed checks left a shortfall
                pending.append(run)
    return [it for _, items, _ in runs for it in items]


def generate_items(scenes: Iterable[Scene | ProcessedScene | SceneError], config: QuestionConfig,
                   drops: DropCounter | None = None) -> Iterator[Item]:
    """`generate_scene` over the scenes in order; unreadable scenes are counted as drops, not raised."""
    drops = drops if drops is not None else DropCounter()
    selected(config)
    for scene in scenes:
        if isinstance(scene, SceneError):
            drops.drop("scene", "unreadable_scene")
            continue
        yield from generate_scene(scene, config, drops)
