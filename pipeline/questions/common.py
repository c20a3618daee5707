"""What every question generator shares: the config, the per-scene context and `emit`.

`emit` is the single place where a candidate becomes an `Item`: it renders a paraphrase, wraps
it in the prompt, takes the canonical answer text from the verifier's own canonical completion
(so the answer a model is trained towards is exactly what the verifier parses) and derives the
stable id. `Context.self_check` then verifies a scene's candidates in one batch (unless disabled):
only items whose canonical completion gets error 0 and reward 1 leave the driver.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np
from pydantic import ConfigDict, GetCoreSchemaHandler, ValidationError
from pydantic_core import CoreSchema, core_schema

from numerical3d.pipeline.items import Item, item_id
from numerical3d.pipeline.questions.frame_cover import cover_frames, uniform_pick
from numerical3d.pipeline.questions.gates import DropCounter, LetterBalancer
from numerical3d.pipeline.questions.nameable import NameRule
from numerical3d.pipeline.questions.registry import registry, template_dirs
from numerical3d.pipeline.questions.registry import subtask as registered
from numerical3d.pipeline.settings import describe_errors
from numerical3d.pipeline.templating import LETTERS, templates
from numerical3d.sources.scene import Frame, Scene, SceneObject

if TYPE_CHECKING:
    from numerical3d.pipeline.geometry.floor import FloorEstimate

# Structural or catch-all labels that never make a sensible question subject.
DEFAULT_IGNORE = frozenset({"wall", "floor", "ceiling", "object", "otherstructure", "otherfurniture", "otherprop",
                            "remove", "unknown", "split", "structure", "window frame", "doorframe"})


@dataclass
class QuestionConfig:
    """Everything that decides which questions a scene yields.

    A build plan's `questions:` mapping is validated into it by pydantic (unknown keys fail). The
    parameters shared by subtasks are fields; each subtask's own parameters are its section, the
    plan key `questions.<subtask>` (see `Subtask.config`), read with `section(name)`.
    """

    __pydantic_config__ = ConfigDict(extra="forbid")

    subtasks: tuple[str, ...] = ()  # empty: all registered subtasks
    seed: int = 0
    scene_frames: int = 16  # frames attached to scene-level questions (showing their objects, spread over the video)
    frame_level_frames: int = 8  # frames examined per scene for frame-level questions
    # frames of a video that visibility is computed on for covers and onsets (a uniform sample of a longer
    # video, onsets refined between them): a scene's cost does not grow with its video's length
    stream_frames: int = 160
    max_per_subtask: int = 12  # items per subtask per scene (after the gates)
    forms: dict[str, str] = field(default_factory=dict)  # subtask -> open | mc | both; default: the subtask's
    n_options: int = 4
    distractor_gap: float = 0.20  # numeric multiple-choice options differ pairwise by >= 20%
    ignore_labels: frozenset[str] = DEFAULT_IGNORE
    min_visible_pixels: int = 100  # distinct pixels hit by visible points (a lower bound of the silhouette)
    # A named object counts as shown in a frame when a person could name it there (pipeline.questions.nameable):
    min_named_pixels: int = 20  # at least this many visible pixels (occlusion-aware), and
    min_named_area: int = 576  # its visible extent (2D box of its visible points, at 640x480) covers >= 24x24 px, and
    min_named_share: float = 0.8  # that extent is >= this share of its whole box's projected extent in the frame
    named_view_area: int = 38400  # (share waived from this extent on, 1/8 of the frame, for a bed, sofa or bookshelf)
    numeric_error: str | None = None  # verifier error form for numeric specs; None: the verifier default
    self_check: bool = True
    templates_dir: str | None = None
    sections: dict[str, Any] = field(default_factory=dict)  # subtask -> its SectionConfig (or a mapping of one)

    def __post_init__(self) -> None:
        if self.stream_frames < 2:
            raise ValueError(f"stream_frames must be at least 2 (a video's first and last frame), got {self.stream_frames}")
        if not 0.0 <= self.min_named_share <= 1.0:
            raise ValueError(f"min_named_share is a share of an object's projected extent, in [0, 1]; got {self.min_named_share}")
        self.sections = {name: _section(name, value) for name, value in sorted(self.sections.items())}

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        # A plan writes a subtask's section as `questions.<subtask>`; gather those keys into `sections`.
        return core_schema.no_info_before_validator_function(_gather_sections, handler(source))

    def section(self, subtask: str) -> Any:
        """The subtask's own parameters: its section, or the defaults of its config model."""
        found = self.sections.get(subtask)
        return found if found is not None else registered(subtask).config()

    def form(self, subtask: str) -> tuple[str, ...]:
        f = self.forms.get(subtask) or registered(subtask).default_form
        if f not in ("open", "mc", "both"):
            raise ValueError(f"forms[{subtask!r}]: {f!r} is not one of open, mc, both")
        return ("open", "mc") if f == "both" else (f,)


def _section(name: str, value: Any) -> Any:
    """A subtask's section validated into its config model (an unknown subtask or key fails naming it)."""
    model = registered(name).config
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise ValueError(describe_errors(exc.errors(), model, prefix=f"questions.{name}.")) from None


def _gather_sections(data: Any) -> Any:
    """`questions:` as written in a plan -> QuestionConfig's fields; an old flat key fails naming its new place."""
    if not isinstance(data, dict):
        return data
    reg = registry()
    out = {k: v for k, v in data.items() if k not in reg}
    sections = dict(out.pop("sections", None) or {})
    sections.update({k: v for k, v in data.items() if k in reg})
    for key in out:
        moved = [f"questions.{s.name}.{s.config.RENAMED[key]}" for s in reg.values() if key in s.config.RENAMED]
        if moved:
            raise ValueError(f"questions.{key} is now {' / '.join(moved)}")
    if sections:
        out["sections"] = {name: _section(name, value) for name, value in sections.items()}
    return out


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little")


_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)

# Decoded depth maps a scene keeps (float32: 1.2 MB at 640x480, so 100 such frames).
DEPTH_CACHE_BYTES = 128 * 2**20


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


class Context:
    """One scene under generation: its processed facts, seeded generators, counters, and `emit`."""

    def __init__(self, scene: Scene | ProcessedScene, config: QuestionConfig, drops: DropCounter | None = None):
        if isinstance(scene, ProcessedScene):
            if scene.ignore_labels != config.ignore_labels:
                raise ValueError(f"scene {scene.scene.scene_id} was processed with other ignore_labels than the config's")
            self.facts = scene
        else:
            self.facts = ProcessedScene(scene, config.ignore_labels)
        self.scene = self.facts.scene
        self.config = config
        self.drops = drops if drops is not None else DropCounter()
        self.balancer = LetterBalancer()  # per scene: a scene's letters never depend on other scenes
        self.tpl = templates(config.templates_dir, template_dirs())
        self._visibility: dict[int, dict] = {}
        self._nameable: dict[int, dict[int, int]] = {}  # frame index -> Context.nameable
        self._depths: dict[int, np.ndarray] = {}  # frame index -> its decoded depth map (see `depth`)
        self._depth_bytes = 0
        self._covers: dict[tuple, list[int] | None] = {}  # (named ids, required frames) -> cover_frames
        # id(item) -> item, for items naming an object none of the scene's frames shows (held, so ids stay unique)
        self._unseen: dict[int, Item] = {}
        # Canonical completions and self-check verdicts are pure functions of the spec, and a scene
        # repeats specs (counts, direction classes), so each distinct spec is rendered and verified once.
        # The key is `repr(spec)`: it tells apart every value and type that could change the outcome
        # (1, 1.0 and True; 0.0 and -0.0).
        self._completions: dict[str, tuple[str, str]] = {}  # key -> (completion, answer text)
        self._verdicts: dict[str, bool] = {}  # key -> error 0 and reward 1
        self._unchecked: dict[int, str] = {}  # id(item) -> its spec's key, until self-checked

    def rng(self, subtask: str) -> np.random.Generator:
        """A generator per (seed, scene, subtask): adding a subtask never changes another's items."""
        return np.random.default_rng(_seed(self.config.seed, self.scene.source, self.scene.scene_id, subtask))

    # --- scene facts (see ProcessedScene) ----------------------------------------------------------
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
        return NameRule(c.min_named_pixels, c.min_named_area, c.min_named_share, c.named_view_area)

    def nameable(self, index: int) -> dict[int, int]:
        """instance id -> visible pixels, for the instances frame `index` shows well enough to be named
        (`pipeline.questions.nameable`): what an item may name from that frame, and what makes an onset."""
        if index not in self._nameable:
            frame = self.frame_by_index[index]
            self._nameable[index] = self.name_rule.shown(self.facts.by_id, frame, self.visibility(frame))
        return self._nameable[index]

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
             vocabulary: Sequence[str] | None = None, dims: int | None = None) -> Item:
        """Build the item; `self_check` (run by the driver) later admits it or counts its failure."""
        from numerical3d.verifiers.spec import canonical_completion

        tpl = self.tpl
        variant = int(rng.integers(tpl.n_paraphrases(subtask)))
        question = tpl.question(subtask, variant, **qctx)
        prompt = tpl.prompt(question, "choice" if options else kind, options=options, unit=unit,
                            classes=classes, vocabulary=vocabulary, dims=dims)
        key = repr(spec)
        known = self._completions.get(key)
        if known is None:
            completion = canonical_completion(spec)
            m = _ANSWER.search(completion)
            if m is None:
                raise ValueError(f"verifiers.canonical_completion gave no <answer> for {spec!r}")
            known = self._completions[key] = (completion, m.group(1).strip())
        scene = self.scene
        source, scene_id = scene.source, scene.scene_id
        unseen = False
        if frames is None and scene.frames:
            frames = self.item_frames(objects)
            unseen = frames is None
        frame_indices = list(self.scene_frame_indices if frames is None else frames)
        provenance = {
            "objects": [{"instance_id": o.instance_id, "label": o.label} for o in objects],
            "rule": rule,
            "frame_indices": frame_indices,
            "paraphrase": variant + 1,
            "value": value,
        }
        item = Item(
            id=item_id(source, scene_id, subtask, params),
            source=source, scene_id=scene_id, subtask=subtask, question=question, prompt=prompt,
            answer=known[1], verifier=spec, frame_indices=list(frame_indices),
            options=list(options) if options else None, provenance=provenance)
        if self.config.self_check:
            self._unchecked[id(item)] = key
        if unseen:
            self._unseen[id(item)] = item
        return item

    def self_check(self, items: Sequence[Item]) -> list[Item]:
        """The items whose canonical completion verifies with error 0 and reward 1, in order.

        Items naming an object that none of the scene's frames shows are dropped first, counted as
        `object_not_visible` (with `self_check` off too: that is about the data, not the verifier).
        Specs not verified before in this scene go through one `verifiers.verify_batch` call (its
        reward operator runs vectorised, and each call has a fixed cost); failures are counted as
        `self_check_failed`, admitted items as kept. With `self_check` off, every other item is admitted.
        """
        if self._unseen:
            unseen = {id(item) for item in items if self._unseen.pop(id(item), None) is item}
            for item in items:
                if id(item) in unseen:
                    self.drops.drop(item.subtask, "object_not_visible")
                    self._unchecked.pop(id(item), None)
            items = [item for item in items if id(item) not in unseen]
        if not self.config.self_check or not items:
            for item in items:
                self.drops.keep(item.subtask)
            return list(items)
        from numerical3d.verifiers import verify_batch

        keys = [self._unchecked.pop(id(item)) for item in items]
        todo = {key: item.verifier for item, key in zip(items, keys) if key not in self._verdicts}
        if todo:
            results = verify_batch(list(todo.values()), [self._completions[key][0] for key in todo], 100.0)
            for key, res in zip(todo, results):
                self._verdicts[key] = res.error == 0 and abs(res.reward - 1.0) < 1e-9
        out: list[Item] = []
        for item, key in zip(items, keys):
            if self._verdicts[key]:
                self.drops.keep(item.subtask)
                out.append(item)
            else:
                self.drops.drop(item.subtask, "self_check_failed")
        return out


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
            shown = {"m": "m", "cm": "cm", "mm": "mm", "m2": "square meters"}.get(unit, unit)
            options, letter = ctx.place(subtask, f"{fmt_number(answer, decimals)} {shown}",
                                        [f"{fmt_number(v, decimals)} {shown}" for v in wrong], rng)
            item = ctx.emit(subtask, rng, spec=choice_spec(letter, options), kind="choice", options=options,
                            params={**params, "form": "mc"}, **common)
        yield item
