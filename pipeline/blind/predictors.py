"""The text-only predictors: a random forest on the features, and the best constant answer."""

from __future__ import annotations

import os

import numpy as np

from numerical3d.pipeline.blind.features import MRA_TOLERANCES, vector_mra

FIT_THREADS = min(4, os.cpu_count() or 1)  # a forest of 40 small trees gains little beyond this


def fit_forest(kind: str, seed: int, X: np.ndarray, y: np.ndarray):
    """A fitted forest. Its trees are grown on threads (each tree's seed is drawn before, so the forest
    is the same for any thread count) and it predicts on one: threads would add the trees' votes in
    the order they finish, and a last-bit difference could move an item across a pruning threshold."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    cls = RandomForestClassifier if kind == "classifier" else RandomForestRegressor
    model = cls(n_estimators=40, min_samples_leaf=3, max_features=0.6, random_state=seed, n_jobs=FIT_THREADS)
    return model.fit(X, y).set_params(n_jobs=1)


def constant_scores(gold: list[np.ndarray], integer: bool) -> np.ndarray:
    """Each item's score under the best constant answer (the one whose mean score is highest): what
    an item adds to a blind model's gain is its score above this, so pruning ranks by the difference."""
    G = np.vstack(gold)
    if G.shape[1] > 1:
        c = np.median(G, axis=0)
        return np.array([vector_mra(c, g) for g in gold])
    y = G[:, 0]
    cands = np.unique(np.rint(y)) if integer else np.unique(np.quantile(y, np.linspace(0, 1, 101)))
    # the MRA of every candidate constant on every answer at once, as `mra` computes it one by one
    rel = np.abs(cands[:, None] - y[None, :]) / y[None, :]
    per_item = (rel[:, :, None] <= MRA_TOLERANCES).mean(axis=2)
    return per_item[int(np.argmax(per_item.mean(axis=1)))]


def best_constant(gold: list[np.ndarray], integer: bool) -> float:
    """The best constant answer's mean score."""
    return float(constant_scores(gold, integer).mean())
