"""The one way out of question generation: a candidate becomes an `Item`, and a scene's items are self-checked.

`emit` renders a paraphrase, wraps it in the prompt, takes the canonical answer text from the
verifier's own canonical completion (so the answer a model is trained towards is exactly what the
verifier parses) and derives the stable id. `self_check` then verifies a scene's candidates in one
batch (unless disabled): only items whose canonical completion gets error 0 and reward 1 leave the driver.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import numpy as np

from numerical3d.pipeline.items import Item, item_id
from numerical3d.pipeline.questions.config import QuestionConfig
from numerical3d.pipeline.questions.gates import DropCounter, LetterBalancer
from numerical3d.pipeline.templating import LETTERS, Templates
from numerical3d.sources.scene import Scene, SceneObject

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


class Emission:
    """The emission part of a generation context: letter placement, `emit`, `self_check`.

    An item's frames come from the context's frames part (`item_frames`, `scene_frame_indices`).
    """

    scene: Scene
    config: QuestionConfig
    scene_frame_indices: list[int]
    item_frames: Callable[[Sequence[SceneObject]], list[int] | None]

    def _init_emission(self, drops: DropCounter | None, tpl: Templates) -> None:
        self.drops = drops if drops is not None else DropCounter()
        self.balancer = LetterBalancer()  # per scene: a scene's letters never depend on other scenes
        self.tpl = tpl
        # id(item) -> item, for items naming an object none of the scene's frames shows (held, so ids stay unique)
        self._unseen: dict[int, Item] = {}
        # Canonical completions and self-check verdicts are pure functions of the spec, and a scene
        # repeats specs (counts, direction classes), so each distinct spec is rendered and verified once.
        # The key is `repr(spec)`: it tells apart every value and type that could change the outcome
        # (1, 1.0 and True; 0.0 and -0.0).
        self._completions: dict[str, tuple[str, str]] = {}  # key -> (completion, answer text)
        self._verdicts: dict[str, bool] = {}  # key -> error 0 and reward 1
        self._unchecked: dict[int, str] = {}  # id(item) -> its spec's key, until self-checked

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
