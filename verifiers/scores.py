"""Discrete verifier scores V in [0, 1] with partial credit (appendix C.3).

Pure functions of already-parsed answers; verify.py does the parsing and the
worst-of policy for answers that name several candidates.
"""

from __future__ import annotations

import math
from functools import lru_cache
from itertools import combinations

import numpy as np

__all__ = [
    "count_score",
    "ring_distance",
    "direction_score",
    "angle_difference",
    "angular_score",
    "nearest_classes",
    "kendall_score",
    "pairwise_order_score",
    "jaccard_score",
    "graph_distances",
    "graph_score",
]


def count_score(pred: float, n: int, form: str = "exp", tau: float = 1.0, c: float = 1.0) -> float:
    """exp(-|pred - n| / tau), or the normalised linear max(0, 1 - |d| / (max(n, 1) + c))."""
    d = abs(pred - n)
    if form == "exp":
        return math.exp(-d / tau)
    return max(0.0, 1.0 - d / (max(n, 1) + c))


def ring_distance(i: int, j: int, k: int) -> int:
    """Circular distance between bins i and j on a ring of k bins."""
    d = abs(i - j) % k
    return min(d, k - d)


def direction_score(pred: int, gt: int, n_classes: int, ring: bool = True, adjacent_credit: float = 0.5) -> float:
    """1 for the right bin, `adjacent_credit` one bin off on the ring, else 0.

    Non-ring class sets (left/right, left/back/right) give no partial credit.
    """
    if pred == gt:
        return 1.0
    if ring and ring_distance(pred, gt, n_classes) == 1:
        return adjacent_credit
    return 0.0


def angle_difference(a_deg: float, b_deg: float) -> float:
    """The wrapped difference of two angles in [0, 180] degrees: 350 and -10 are one direction."""
    d = abs(a_deg - b_deg) % 360.0
    return min(d, 360.0 - d)


def angular_score(pred_deg: float, gt_deg: float, sigma_deg: float) -> float:
    """exp(-D^2 / 2 sigma^2) with D the wrapped angle difference in [0, 180] degrees."""
    d = angle_difference(pred_deg, gt_deg)
    return math.exp(-(d * d) / (2.0 * sigma_deg * sigma_deg))


def nearest_classes(deg: float, centres: list[float]) -> set[int]:
    """Indices of the class centres closest to `deg` on the circle (two at a bin edge)."""
    d = [abs((deg - c + 180.0) % 360.0 - 180.0) for c in centres]
    low = min(d)
    return {i for i, x in enumerate(d) if x <= low + 1e-9}


def _concordance(pred: list[str], gt: list[str]) -> list[int]:
    """For each gt pair (i < j): 1 if pred orders it the same way, 0 if reversed or a label is missing.

    Plain Python: orders have a handful of labels, where numpy's call overhead dominates."""
    missing = len(pred) + len(gt)
    ranks = [missing] * len(gt)
    pos = {lab: i for i, lab in enumerate(pred)}
    for i, lab in enumerate(gt):
        ranks[i] = pos.get(lab, missing)
    return [1 if ra < rb < missing else 0 for ra, rb in combinations(ranks, 2)]


def kendall_score(pred: list[str], gt: list[str]) -> float:
    """1 - inversions / C(n, 2); a pair with a label missing from pred counts as an inversion."""
    if len(gt) < 2:
        return 1.0 if list(pred) == list(gt) else 0.0
    conc = _concordance(pred, gt)
    inversions = len(conc) - sum(conc)
    return 1.0 - inversions / len(conc)


def pairwise_order_score(pred: list[str], gt: list[str], times: list[float], beta: float) -> float:
    """Pairwise verification with margin: each gt pair weighs w = 1 - exp(-|t_a - t_b| / beta).

    Normalised by the total weight so that the true order scores exactly 1 and
    swapping a nearly tied pair costs little (the paper's down-weighting of
    near ties, without penalising a correct answer).
    """
    w = [1.0 - math.exp(-abs(tb - ta) / beta) for ta, tb in combinations(times, 2)]
    conc = _concordance(pred, gt)
    total = sum(w)
    if total <= 0.0:  # every pair tied: only the exact order counts
        return float(min(conc)) if conc else 1.0
    return sum(wi * ci for wi, ci in zip(w, conc)) / total


def jaccard_score(pred: set[str], gt: set[str]) -> float:
    """|pred & gt| / |pred | gt|; two empty sets agree."""
    union = pred | gt
    return len(pred & gt) / len(union) if union else 1.0


@lru_cache(maxsize=256)
def _graph_table(edges: tuple[tuple[str, tuple[str, ...]], ...], nodes: tuple[str, ...]) -> tuple[dict[str, int], np.ndarray]:
    from scipy.sparse import lil_matrix
    from scipy.sparse.csgraph import shortest_path

    index = {n: i for i, n in enumerate(nodes)}
    adj = lil_matrix((len(nodes), len(nodes)))
    for a, nbrs in edges:
        for b in nbrs:
            adj[index[a], index[b]] = 1.0
    dist = shortest_path(adj.tocsr(), method="D", directed=False, unweighted=True)
    return index, dist


def graph_distances(graph: dict[str, list[str]], nodes: list[str]) -> tuple[dict[str, int], np.ndarray]:
    """All-pairs shortest-path distances (undirected) over the relation graph."""
    edges = tuple(sorted((k, tuple(v)) for k, v in graph.items()))
    return _graph_table(edges, tuple(nodes))


def graph_score(pred: str, gt: str, graph: dict[str, list[str]], nodes: list[str]) -> float:
    """1 - d(pred, gt) / d_max with d_max the largest finite distance; unreachable gives 0."""
    index, dist = graph_distances(graph, nodes)
    finite = dist[np.isfinite(dist)]
    d_max = float(finite.max()) if finite.size else 0.0
    d = float(dist[index[pred], index[gt]])
    if pred == gt:
        return 1.0
    if not math.isfinite(d) or d_max <= 0:
        return 0.0
    return max(0.0, 1.0 - d / d_max)
