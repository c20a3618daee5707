"""Balance classes inside a subtask, and the round-robin order that evens them out.

Sampling (`pipeline.sampling`, phase 6) gives every candidate nested classes (`balance_facets`)
and takes a subtask's candidates in `interleave` order, so every prefix of what it takes is near
uniform over the classes, coarsest first.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from numerical3d.pipeline.config import DatasetMix
from numerical3d.pipeline.items import Item

DISCRETE_KINDS = frozenset({"count", "choice", "direction"})


def answer_magnitude(spec: dict[str, Any]) -> float | None:
    """The number a numeric or grounding answer is binned by (its absolute value / norm)."""
    ans = spec.get("answer")
    try:
        if spec.get("kind") == "numeric":
            return abs(float(ans))
        if spec.get("kind") == "grounding":
            return float(np.linalg.norm(np.asarray(ans, dtype=np.float64)))
    except (TypeError, ValueError):
        return None
    return None


def log_edges(values: list[float], bins: int) -> np.ndarray:
    """Interior edges of `bins` equal-width bins in log10 space over the positive values."""
    pos = np.asarray([v for v in values if v > 0], dtype=np.float64)
    if len(pos) == 0 or bins <= 1:
        return np.empty(0)
    lo, hi = np.log10(pos.min()), np.log10(pos.max())
    if hi - lo < 1e-12:
        return np.empty(0)
    return np.linspace(lo, hi, bins + 1)[1:-1]


def balance_facets(item: Item, edges: np.ndarray | None, config: DatasetMix, by_kind: bool = False) -> tuple[str, ...]:
    """The classes an item is balanced by inside its subtask, coarsest first.

    `by_kind` (a subtask asked in two forms, rel_direction's choice and open direction): the verifier
    kind first, so each form is balanced over the classes below on its own; balanced over the two
    together, pruning that took more of one form left it with a class missing (seed 24242: no "back"
    at the medium level among its 31 open-form items, whose answer given the first label gained +0.17).
    Numbers: their log-magnitude bin. Discrete answers: the classes the generator declares in
    `provenance["balance"]` (rel_direction: level, then direction class; route_plan: turn count),
    else the answer itself (counts, direction classes); then, for multiple
    choice, the correct letter within its option count (two-option items are only ever A or B, so
    letters balanced over all counts together would leave them skewed).
    """
    spec = item.verifier
    kind = spec.get("kind")
    facets: list[str] = [f"form:{kind}"] if by_kind else []
    if kind in ("numeric", "grounding"):
        mag = answer_magnitude(spec)
        if mag is None or edges is None or len(edges) == 0:
            return (*facets, "bin0")
        b = 0 if mag <= 0 else int(np.searchsorted(edges, math.log10(mag), side="right"))
        return (*facets, f"bin{b}")
    declared = item.provenance.get("balance")
    if config.balance.discrete:
        if declared:
            facets += [str(x) for x in declared]
        elif kind in DISCRETE_KINDS and kind != "choice":
            facets.append(f"{kind}:{spec.get('answer')}")
    if kind == "choice" and config.balance.letters:
        facets.append(letter_facet(item))
    return tuple(facets) or ("-",)


def option_count(item: Item) -> int:
    """The options a multiple-choice item offers (0 for other kinds)."""
    return len(item.verifier.get("options") or item.options or [])


def letter_facet(item: Item) -> str:
    """A multiple-choice item's correct letter within its option count and its question's paraphrase,
    `letter:<letter>/<options>[/p<paraphrase>]`: letters level over all paraphrases together left one
    paraphrase's answers on C and another's on A, which the letter given the wording learns (seed
    42424's appearance_order: +0.051 over chance on 62 items)."""
    paraphrase = item.provenance.get("paraphrase")
    tail = "" if paraphrase is None else f"/p{paraphrase}"
    return f"letter:{item.verifier.get('answer')}/{option_count(item)}{tail}"


def interleave(ids: list[str], facets: dict[str, tuple[str, ...]], priority: dict[str, int], depth: int = 0) -> list[str]:
    """Round-robin over the classes at `depth` of the items' facets, each class ordered the same way
    one level down: every prefix of the result is near-uniform over levels, then over the answer
    classes inside each level, then over letters inside each class (as far as the candidates allow)."""
    if all(len(facets[i]) <= depth for i in ids):
        return sorted(ids, key=priority.__getitem__)
    groups: dict[str, list[str]] = defaultdict(list)
    for i in ids:
        groups[facets[i][depth] if len(facets[i]) > depth else ""].append(i)
    rank: dict[str, int] = {}
    for members in groups.values():
        for r, i in enumerate(interleave(members, facets, priority, depth + 1)):
            rank[i] = r
    return sorted(ids, key=lambda i: (rank[i], priority[i]))
