"""Reward operators that turn an error e >= 0 into a reward in [0, 1].

SNRA (paper eq. 2): r = 2 / (1 + exp(k e)). It is evaluated as
2 exp(-x) / (1 + exp(-x)) with x = k e >= 0, so exp never overflows: huge k*e
underflows cleanly to a reward of exactly 0.0, with no warning and no NaN.
Works on Python floats, numpy arrays and torch tensors (torch is never imported
here; a tensor is recognised by its type's module).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

__all__ = ["snra", "tanh_reward", "binary_reward", "OPERATORS", "get_operator"]


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _snra_scalar(k: float, e: float) -> float:
    x = k * e
    if x != x:  # NaN error (or 0 * inf): no information, no reward
        return 0.0
    if x <= 0.0:
        return 1.0
    if x > 745.2:  # exp(-x) underflows to 0 in double precision
        return 0.0
    z = math.exp(-x)
    return 2.0 * z / (1.0 + z)


def snra(k: Any, e: Any) -> Any:
    """Smooth Numerical Reward Activation: 2 / (1 + exp(k e)).

    Negative errors are clamped to 0 (reward 1); NaN errors give 0. The result
    has the type of the inputs (float, numpy array, or torch tensor).
    """
    if _is_torch(e) or _is_torch(k):
        import torch

        x = torch.as_tensor(k) * torch.as_tensor(e)
        x = torch.nan_to_num(x.clamp_min(0.0), nan=float("inf"))
        z = torch.exp(-x)
        return 2.0 * z / (1.0 + z)
    if isinstance(e, (float, int)) and isinstance(k, (float, int)):
        return _snra_scalar(float(k), float(e))
    x = np.asarray(np.multiply(k, e, dtype=np.float64))
    np.maximum(x, 0.0, out=x)
    np.negative(x, out=x)
    with np.errstate(under="ignore", invalid="ignore"):
        np.exp(x, out=x)  # z = exp(-k e) in [0, 1]; NaN stays NaN
    d = x + 1.0
    np.divide(x, d, out=x)
    x *= 2.0
    x[np.isnan(x)] = 0.0
    return x if x.ndim else float(x)


def tanh_reward(k: Any, e: Any) -> Any:
    """The paper's tanh ablation operator, 1 - tanh(k e).

    Identity: 1 - tanh(x) = 2 exp(-2x) / (1 + exp(-2x)) = snra(2k, e), which is
    evaluated instead because it is exact where 1 - tanh(x) cancels to 0.
    """
    return snra(2 * k, e)


def binary_reward(k: Any, e: Any) -> Any:
    """The 0-1 reward (paper's S1 row): 1 exactly when e == 0; k is ignored."""
    if _is_torch(e):
        import torch

        return (e <= 0).to(e.dtype if e.is_floating_point() else torch.float32)
    if isinstance(e, (float, int)):
        return 1.0 if e <= 0 else 0.0
    out = (np.asarray(e) <= 0).astype(np.float64)
    return out if out.ndim else float(out)


OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "snra": snra,
    "tanh": tanh_reward,
    "binary": binary_reward,
}


def get_operator(name: str) -> Callable[[Any, Any], Any]:
    """Look a reward operator up by name (`snra`, `tanh`, `binary`)."""
    try:
        return OPERATORS[name]
    except KeyError:
        raise ValueError(f"unknown reward operator {name!r}; choose one of {sorted(OPERATORS)}") from None
