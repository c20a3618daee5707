"""What every question generator shares: the config, the per-scene context and `emit`.

`emit` is the single place where a candidate becomes an `Item`: it renders a paraphrase, wraps
it in the prompt, takes the canonical answer text from the verifier's own canonical completion
(so the answer a model is trained towards is exactly what the verifier parses), derives the
stable id and, unless disabled, checks that the item verifies itself.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, Sequence

import numpy as np

from pipeline.items import Item, frame_id, item_id
from pipeline.questions.gates import DropCounter, LetterBalancer
from pipeline.templating import LETTERS, Templates, templates
from sources.scene import Frame, Scene, SceneObject

Form = Literal["open", "mc", "both"]

# Structural or catch-all labels that never make a sensible question subject.
DEFAULT_IGNORE = frozenset({"wall", "floor", "ceiling", "object", "otherstructure", "otherfurniture", "otherprop",
                            "remove", "unknown", "split", "structure", "window frame", "doorframe"})


@dataclass
class QuestionConfig:
    """Everything that decides which questions a scene yields (recorded in item provenance)."""

    subtasks: tuple[str, ...] = ()  # empty: all registered subtasks
    seed: int = 0
    scene_frames: int = 16  # frames attached to scene-level questions, uniformly sampled
    frame_level_frames: int = 8  # frames examined per scene for frame-level questions
    max_per_subtask: int = 12  # items per subtask per scene (after the gates)
    forms: dict[str, str] = field(default_factory=lambda: {
        "object_count": "open", "object_size": "open", "room_size": "open", "abs_distance": "open",
        "camera_distance": "open", "rel_distance": "mc", "rel_direction": "both",
        "appearance_order": "both", "route_plan": "mc"})
    n_options: int = 4
    distractor_gap: float = 0.20  # numeric multiple-choice options differ pairwise by >= 20%
    ignore_labels: frozenset[str] = DEFAULT_IGNORE
    max_count: int = 20  # counting questions for 2..max_count instances
    min_pair_distance: float = 0.20  # m, abs_distance skips closer pairs
    rel_distance_margin: float = 0.15  # m, top two candidates at least this far apart
    rel_distance_candidates: int = 4
    direction_levels: tuple[str, ...] = ("hard", "medium", "easy", "ring8")
    direction_edge_margin: float = 10.0  # degrees from any bin edge
    direction_min_distance: float = 0.5  # m, A-B and A-C centre distances (a facing needs a baseline)
    appearance_n: int = 4
    appearance_gap: float = 1.0  # s, consecutive first appearances
    min_visible_pixels: int = 100  # distinct pixels hit by visible points (a lower bound of the silhouette)
    min_camera_distance: float = 0.3  # m
    relation_margin: float = 0.10  # m, left/right/front/behind interval gaps must clear this
    vertical_margin: float = 0.05  # m, above/below interval gap margin
    near_threshold: float = 1.0  # m, closest box distance for "near"
    near_margin: float = 0.15  # m, distances within this of the threshold are too close to call
    grid_cell: float = 0.10  # m, route_plan occupancy grid
    robot_radius: float = 0.20  # m, object footprints are grown by this on the grid
    min_turn: float = 30.0  # degrees, a smaller heading change is "go forward"
    turn_margin: float = 10.0  # degrees around the turn thresholds (30, 150) rejected as ambiguous
    max_turns: int = 4
    max_landmark_height: float = 1.0  # m, route_plan start/goal/facing objects have their bottom below this
    numeric_error: str | None = None  # verifier error form for numeric specs; None: the verifier default
    self_check: bool = True
    templates_dir: str | None = None

    def form(self, subtask: str) -> tuple[str, ...]:
        f = self.forms.get(subtask, "open")
        if f not in ("open", "mc", "both"):
            raise ValueError(f"forms[{subtask!r}]: {f!r} is not one of open, mc, both")
        return ("open", "mc") if f == "both" else (f,)

    def params(self) -> dict[str, Any]:
        """The config as plain JSON (for provenance and manifests)."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["ignore_labels"] = sorted(self.ignore_labels)
        out["subtasks"] = list(self.subtasks)
        out["direction_levels"] = list(self.direction_levels)
        return out


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little")


_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


class Context:
    """One scene under generation: caches, seeded generators, counters, and `emit`."""

    def __init__(self, scene: Scene, config: QuestionConfig, drops: DropCounter | None = None,
                 balancer: LetterBalancer | None = None, tpl: Templates | None = None):
        self.scene = scene
        self.config = config
        self.drops = drops if drops is not None else DropCounter()
        self.balancer = balancer if balancer is not None else LetterBalancer()
        self.tpl = tpl if tpl is not None else templates(config.templates_dir)
        self._visibility: dict[int, dict] = {}

    def rng(self, subtask: str) -> np.random.Generator:
        """A generator per (seed, scene, subtask): adding a subtask never changes another's items."""
        return np.random.default_rng(_seed(self.config.seed, self.scene.source, self.scene.scene_id, subtask))

    # --- scene facts -------------------------------------------------------------------------------
    @cached_property
    def objects(self) -> list[SceneObject]:
        """Question-worthy objects (structural labels removed), in scene order."""
        return [o for o in self.scene.objects if o.label not in self.config.ignore_labels]

    @cached_property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for o in self.objects:
            out[o.label] = out.get(o.label, 0) + 1
        return dict(sorted(out.items()))

    @cached_property
    def unique(self) -> dict[str, SceneObject]:
        """label -> its only instance, for labels with exactly one instance."""
        return {o.label: o for o in self.objects if self.counts[o.label] == 1}

    @cached_property
    def scene_frame_indices(self) -> list[int]:
        """Uniformly sampled frame indices for scene-level questions (empty for box-only sources)."""
        return _uniform([f.index for f in self.scene.frames], self.config.scene_frames)

    @cached_property
    def scene_frame_ids(self) -> list[str]:
        return [frame_id(self.scene.source, self.scene.scene_id, i) for i in self.scene_frame_indices]

    @cached_property
    def level_frames(self) -> list[Frame]:
        """Frames examined for frame-level questions, uniformly spread over the video."""
        by_index = {f.index: f for f in self.scene.frames}
        return [by_index[i] for i in _uniform(sorted(by_index), self.config.frame_level_frames)]

    @cached_property
    def cloud(self):
        """All object points stacked once, shared by every frame's visibility test."""
        from pipeline.geometry.visibility import SceneCloud

        return SceneCloud.from_scene(self.scene)

    def visibility(self, frame: Frame) -> dict:
        """Per-instance visibility in a frame (cached; the expensive part of frame-level questions)."""
        if frame.index not in self._visibility:
            from pipeline.geometry.visibility import frame_visibility

            self._visibility[frame.index] = frame_visibility(self.scene, frame, cloud=self.cloud)
        return self._visibility[frame.index]

    def frame_unique_visible(self, frame: Frame) -> tuple[dict[str, SceneObject], dict]:
        """Objects whose label is visible exactly once in the frame, and the frame's visibility."""
        vis = self.visibility(frame)
        seen: dict[str, list[SceneObject]] = {}
        for o in self.objects:
            v = vis.get(o.instance_id)
            if v is not None and v.pixels > 0:
                seen.setdefault(o.label, []).append(o)
        return {lab: objs[0] for lab, objs in sorted(seen.items()) if len(objs) == 1}, vis

    # --- multiple choice ---------------------------------------------------------------------------
    def place(self, subtask: str, correct: str, distractors: Sequence[str], rng: np.random.Generator) -> tuple[list[str], str]:
        """Options in letter order with the correct one at a balanced letter; returns (options, letter)."""
        others = [distractors[i] for i in rng.permutation(len(distractors))]
        pos = self.balancer.position(subtask, len(others) + 1, rng)
        options = others[:pos] + [correct] + others[pos:]
        return options, LETTERS[pos]

    # --- the one way out ---------------------------------------------------------------------------
    def emit(self, subtask: str, rng: np.random.Generator, *, qctx: dict[str, Any], spec: dict[str, Any],
             kind: str, params: dict[str, Any], objects: Sequence[SceneObject], frames: Sequence[int] | None,
             rule: dict[str, Any], value: Any = None, options: Sequence[str] | None = None,
             unit: str | None = None, classes: Sequence[str] | None = None,
             vocabulary: Sequence[str] | None = None, dims: int | None = None) -> Item | None:
        """Build the item (or count a self-check failure and return None)."""
        from verifiers.spec import canonical_completion

        variant = int(rng.integers(self.tpl.n_paraphrases(subtask)))
        question = self.tpl.question(subtask, variant, **qctx)
        prompt = self.tpl.prompt(question, "choice" if options else kind, options=options, unit=unit,
                                 classes=classes, vocabulary=vocabulary, dims=dims)
        completion = canonical_completion(spec)
        m = _ANSWER.search(completion)
        if m is None:
            raise ValueError(f"verifiers.canonical_completion gave no <answer> for {spec!r}")
        if self.config.self_check:
            from verifiers import verify

            res = verify(spec, completion, k=100.0)
            if not (res.error == 0 and abs(res.reward - 1.0) < 1e-9):
                self.drops.drop(subtask, "self_check_failed")
                return None
        scene = self.scene
        frame_indices = list(self.scene_frame_indices if frames is None else frames)
        provenance = {
            "objects": [{"instance_id": o.instance_id, "label": o.label} for o in objects],
            "rule": rule,
            "frame_indices": frame_indices,
            "paraphrase": variant + 1,
            "value": value,
        }
        self.drops.keep(subtask)
        return Item(
            id=item_id(scene.source, scene.scene_id, subtask, params),
            source=scene.source, scene_id=scene.scene_id, subtask=subtask, question=prompt,
            answer=m.group(1).strip(), verifier=spec,
            frames=[frame_id(scene.source, scene.scene_id, i) for i in frame_indices],
            options=list(options) if options else None, provenance=provenance)


def _uniform(indices: Sequence[int], n: int) -> list[int]:
    """Up to n indices spread evenly from first to last (all of them when there are fewer)."""
    if len(indices) <= n:
        return list(indices)
    pick = np.round(np.linspace(0, len(indices) - 1, n)).astype(int)
    return [indices[i] for i in pick]


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
    """The open-ended and/or multiple-choice items of one numeric measurement."""
    from pipeline.questions.gates import distractors_apart
    from verifiers.spec import choice_spec, numeric_spec

    cfg = ctx.config
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
            shown = {"m": "m", "cm": "cm", "mm": "mm", "m2": "square meters"}.get(unit, unit)
            options, letter = ctx.place(subtask, f"{fmt_number(answer, decimals)} {shown}",
                                        [f"{fmt_number(v, decimals)} {shown}" for v in wrong], rng)
            item = ctx.emit(subtask, rng, spec=choice_spec(letter, options), kind="choice", options=options,
                            params={**params, "form": "mc"}, **common)
        if item is not None:
            yield item
