"""Phi: maps a discrete verifier score V in [0, 1] to an SNRA error e >= 0.

Appendix "Discrete Verification Scores": e = eta * (-log(V + eps))^gamma with
the miss u = 1 - V clipped to 1 - eps (so V >= eps) and e clamped at 0 (V = 1
gives -log(1 + eps) < 0). eta is calibrated so that a complete failure (V = 0)
gets exactly the reward eps_r at the terminal sharpness kmax:
e* = ln(2 / eps_r - 1) / kmax and eta = e* / (-log(2 eps))^gamma.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["PhiConfig", "DEFAULT_PHI", "phi"]


@dataclass(frozen=True)
class PhiConfig:
    """Calibration of Phi; one config is shared by all discrete tasks (paper's choice).

    Defaults: eps_r 1e-2 (a failure keeps 1% of the reward at kmax), kmax 100
    (the sigmoid schedule's end), gamma 1, eps 1e-3. eps 1e-3 rather than 1e-6
    spreads partial credit over the gradient-sensitive zone: with 1e-6, V = 0.5
    still keeps 0.86 of the reward at kmax; with 1e-3 it keeps 0.71.
    """

    eps_r: float = 1e-2
    kmax: float = 100.0
    gamma: float = 1.0
    eps: float = 1e-3

    def __post_init__(self) -> None:
        if not 0.0 < self.eps_r < 1.0:
            raise ValueError(f"phi: eps_r must be in (0, 1), got {self.eps_r}")
        if not 0.0 < self.eps < 0.5:
            raise ValueError(f"phi: eps must be in (0, 0.5), got {self.eps}")
        if not (self.kmax > 0 and math.isfinite(self.kmax)):
            raise ValueError(f"phi: kmax must be finite and > 0, got {self.kmax}")
        if not (self.gamma > 0 and math.isfinite(self.gamma)):
            raise ValueError(f"phi: gamma must be finite and > 0, got {self.gamma}")
        object.__setattr__(self, "_log2eps", -math.log(2.0 * self.eps))
        object.__setattr__(self, "_e_star", math.log(2.0 / self.eps_r - 1.0) / self.kmax)

    @property
    def e_star(self) -> float:
        """Error whose SNRA reward at kmax is eps_r."""
        return self._e_star  # type: ignore[attr-defined]

    def eta(self, gamma: float | None = None) -> float:
        g = self.gamma if gamma is None else gamma
        return self.e_star / self._log2eps**g  # type: ignore[attr-defined]


DEFAULT_PHI = PhiConfig()


def phi(v: Any, config: PhiConfig = DEFAULT_PHI, gamma: float | None = None) -> Any:
    """e = Phi(1 - V) for a score (float) or scores (numpy array); NaN scores count as 0."""
    g = config.gamma if gamma is None else gamma
    eta = config.eta(g)
    if isinstance(v, (float, int)):
        x = float(v)
        x = config.eps if not x >= config.eps else min(x, 1.0)  # NaN -> eps too
        m = -math.log(x + config.eps)
        return eta * m**g if m > 0.0 else 0.0
    arr = np.nan_to_num(np.asarray(v, dtype=np.float64), nan=0.0)
    arr = np.clip(arr, config.eps, 1.0)
    m = np.maximum(-np.log(arr + config.eps), 0.0)
    out = eta * m**g
    return out if out.ndim else float(out)
