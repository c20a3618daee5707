"""How much of a kind's best-alone gain is noise: the same diagnosis on answers that carry nothing.

`BlindScore.max_gain` is the best of about ten predictors, each scored on held-out folds, and taking
the best of ten picks up noise as well as shortcuts. On small groups the noise is large: on the
72 rel_direction items of the real VSI-Bench boxes, answers drawn at random scored +0.071 over chance
at the median. So a gain above the bar can be read against answers with nothing to learn. The
draws are answers at chance where the question offers candidates (a random option or class, or a
random order), and answers shuffled among the items for numbers (the distribution stays, the link
to the question goes). `chance_floor` reruns `diagnose` on each draw.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from numerical3d.pipeline.blind.crossval import diagnose
from numerical3d.pipeline.blind.features import NUMBER_KINDS
from numerical3d.pipeline.items import Item


@dataclass(frozen=True)
class NoiseFloor:
    """Best-alone gains of one kind on answers with nothing to learn, against the observed one."""

    kind: str  # "<subtask>:<kind>"
    observed: float  # the best-alone gain on the real answers
    draws: tuple[float, ...]  # the best-alone gain on each draw

    @property
    def median(self) -> float:
        return float(np.median(self.draws))

    @property
    def p95(self) -> float:
        return float(np.quantile(self.draws, 0.95))

    @property
    def p_value(self) -> float:
        """Share of draws (the observed one counted among them) whose gain reaches the observed gain."""
        return (1 + sum(d >= self.observed for d in self.draws)) / (1 + len(self.draws))


def _drawn(items: Sequence[Item], rng: np.random.Generator) -> list[Item] | None:
    """`items` (one verifier kind) with answers at chance or shuffled; None for a kind without a null."""
    kind = items[0].verifier.get("kind")
    if kind in NUMBER_KINDS:
        answers = [it.verifier.get("answer") for it in items]
        order = rng.permutation(len(items))
        return [dataclasses.replace(it, verifier={**it.verifier, "answer": answers[j]}) for it, j in zip(items, order)]
    out = []
    for it in items:
        spec = it.verifier
        if kind == "choice":
            n = len(spec.get("options") or it.options or [])
            answer = chr(ord("A") + int(rng.integers(n)))
        elif kind == "direction":
            answer = str(rng.choice(spec["classes"]))
        elif kind == "order":
            answer = [str(x) for x in rng.permutation(spec["answer"])]
        else:
            return None
        out.append(dataclasses.replace(it, verifier={**spec, "answer": answer}))
    return out


def chance_floor(items: Sequence[Item], kind: str, *, draws: int = 20, seed: int = 0) -> NoiseFloor | None:
    """The best-alone gain of `kind` ("<subtask>:<kind>") on `draws` answer draws (seeded), beside
    the observed one; None when the kind has no items, no null (relation sets) or is not diagnosable."""
    subtask, _, vkind = kind.partition(":")
    members = [it for it in items if it.subtask == subtask and str(it.verifier.get("kind")) == vkind]
    if not members:
        return None
    observed = diagnose(members, seed=seed).kinds.get(kind)
    if observed is None:
        return None
    rng = np.random.default_rng([seed, len(members)])
    gains = []
    for _ in range(draws):
        drawn = _drawn(members, rng)
        score = None if drawn is None else diagnose(drawn, seed=seed).kinds.get(kind)
        if score is None:
            return None
        gains.append(score.max_gain)
    return NoiseFloor(kind, observed.max_gain, tuple(gains))
