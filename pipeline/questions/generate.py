"""The driver: run the selected generators over scenes with a seeded config.

Same scenes + config + seed give the same items in the same order: every generator draws from
its own generator seeded by (seed, source, scene, subtask), and scenes and subtasks are visited
in a fixed order.

The self-check runs over the candidates of every subtask of a scene at once. A subtask's generator
is advanced exactly as far as checking each candidate in turn would advance it: it is asked for as
many candidates as it still has items to fill, and asked again only for the shortfall left by
failed checks.

`generate_items` verifies the first round of several scenes in one batch (a verify call has a fixed
cost that a scene's dozens of items otherwise pay alone). That is speculative: scenes share the
multiple-choice letter balancer, so a scene started before an earlier one has finished may have
seen the wrong letter counts. Almost every scene finishes in its first round; when one does not,
the scenes after it are discarded (balancer restored, their drop counts never merged) and started
again, so the items are exactly those of generating the scenes one by one.
"""

from __future__ import annotations

import importlib
from collections import deque
from itertools import islice
from typing import Iterable, Iterator

from pipeline.items import Item
from pipeline.questions.common import Context, ProcessedScene, QuestionConfig, SpecMemo
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


class _SceneRun:
    """One scene in generation: its context and, per selected subtask, the generator and its admitted items."""

    def __init__(self, scene: Scene | ProcessedScene, config: QuestionConfig, drops: DropCounter | None,
                 balancer: LetterBalancer | None, memo: SpecMemo | None):
        self.ctx = Context(scene, config, drops, balancer, templates(config.templates_dir), memo)
        self.cap = config.max_per_subtask
        self.runs: list[tuple[Iterator[Item], list[Item]]] = []
        for name in selected(config):
            mod = SUBTASKS[name]
            if not mod.BOX_ONLY and not self.ctx.scene.frames:
                self.ctx.drops.drop(name, "source_has_no_frames")
                continue
            self.runs.append((mod.generate(self.ctx), []))
        self.pending = [run for run in self.runs if self.cap > 0]  # runs that may still be asked for candidates
        self.asked: list[tuple[tuple[Iterator[Item], list[Item]], list[Item]]] = []

    def ask(self) -> list[Item]:
        """This round's candidates: from each pending subtask, as many as it still has items to fill."""
        self.asked = [(run, list(islice(run[0], self.cap - len(run[1])))) for run in self.pending]
        return [it for _, got in self.asked for it in got]

    def settle(self, candidates: list[Item]) -> bool:
        """Self-check the round's candidates and keep the admitted ones; True when the scene is complete."""
        admitted = {id(it) for it in self.ctx.self_check(candidates)}
        self.pending = []
        for run, got in self.asked:
            want = self.cap - len(run[1])
            run[1].extend(it for it in got if id(it) in admitted)
            if len(got) == want and len(run[1]) < self.cap:  # not exhausted, and failed checks left a shortfall
                self.pending.append(run)
        return not self.pending

    def finish(self) -> list[Item]:
        """Run the remaining rounds; all admitted items, subtask by subtask."""
        while self.pending:
            self.settle(self.ask())
        return [it for _, items in self.runs for it in items]


def generate_scene(scene: Scene | ProcessedScene, config: QuestionConfig, drops: DropCounter | None = None,
                   balancer: LetterBalancer | None = None, memo: SpecMemo | None = None) -> list[Item]:
    """All items of one scene, subtask by subtask, at most `max_per_subtask` each.

    A `ProcessedScene` (see `process_scene`) brings its geometry along; a plain `Scene` is processed
    here, on the fly.
    """
    return _SceneRun(scene, config, drops, balancer, memo).finish()


def generate_items(scenes: Iterable[Scene | ProcessedScene | SceneError], config: QuestionConfig,
                   drops: DropCounter | None = None, *, batch: int = 32) -> Iterator[Item]:
    """Items of every scene in order; unreadable scenes are counted as drops, not raised.

    The first-round self-checks of up to `batch` scenes share one verify call (see the module doc);
    the items are those of `generate_scene` over the scenes in turn.
    """
    drops = drops if drops is not None else DropCounter()
    balancer = LetterBalancer()
    memo = SpecMemo()
    selected(config)
    source = iter(scenes)
    queue: deque[Scene | ProcessedScene | SceneError] = deque()
    while True:
        queue.extend(islice(source, max(batch, 1) - len(queue)))
        if not queue:
            return
        started: list[tuple[_SceneRun | None, dict, DropCounter, list[Item]]] = []
        for entry in queue:  # first rounds, in order, each on its own drop counter
            before = {key: list(c) for key, c in balancer.counts.items()}
            if isinstance(entry, SceneError):
                started.append((None, before, drops, []))
                continue
            own = DropCounter()
            try:
                run = _SceneRun(entry, config, own, balancer, memo)
                candidates = run.ask()
            except Exception:
                balancer.counts = before
                break  # the scenes before it finish first; then it runs one by one, raising where it would
            started.append((run, before, own, candidates))
        if not started:
            yield from generate_scene(queue.popleft(), config, drops, balancer, memo)
            continue
        if config.self_check:
            memo.verify({key: spec for run, _, _, got in started if run is not None
                         for key, spec in run.ctx.unchecked(got).items()})
        for k, (run, _, own, candidates) in enumerate(started):
            queue.popleft()
            if run is None:
                drops.drop("scene", "unreadable_scene")
                continue
            complete = run.settle(candidates)
            if not complete and k + 1 < len(started):
                # Its further rounds come before the next scene's first: undo the scenes started after it.
                balancer.counts = started[k + 1][1]
            items = run.finish()
            drops.merge(own)
            yield from items
            if not complete:
                break
