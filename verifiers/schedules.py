"""Sharpness schedules k(t, T) for SNRA.

Each schedule is a small frozen dataclass selectable by name, so the paper's
ablation rows are plain configs: S2/S3 `{"name": "fixed", "k": ...}`,
S4 `{"name": "linear"}`, S5 `{"name": "sigmoid"}` (the default).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Union

__all__ = [
    "SigmoidSchedule",
    "LinearSchedule",
    "FixedSchedule",
    "Schedule",
    "SCHEDULES",
    "make_schedule",
    "sharpness",
]


def _progress(t: float, total: float) -> float:
    """t / T clipped to [0, 1]; a non-positive total means training is over."""
    if total <= 0:
        return 1.0
    return min(max(float(t) / float(total), 0.0), 1.0)


def _check_range(kmin: float, kmax: float) -> None:
    if not (kmin > 0 and kmax >= kmin and math.isfinite(kmax)):
        raise ValueError(f"sharpness needs 0 < kmin <= kmax < inf, got kmin={kmin}, kmax={kmax}")


@dataclass(frozen=True)
class SigmoidSchedule:
    """Paper eq. 5: k = kmin + (kmax - kmin) * sigmoid(s (t/T - tau))."""

    kmin: float = 1.0
    kmax: float = 100.0
    s: float = 10.0
    tau: float = 0.5
    name: ClassVar[str] = "sigmoid"

    def __post_init__(self) -> None:
        _check_range(self.kmin, self.kmax)
        if self.s <= 0:
            raise ValueError(f"sigmoid schedule needs s > 0, got s={self.s}")

    def __call__(self, t: float, total: float) -> float:
        x = self.s * (_progress(t, total) - self.tau)
        return self.kmin + (self.kmax - self.kmin) / (1.0 + math.exp(-x))

    def to_config(self) -> dict[str, Any]:
        return {"name": self.name, **asdict(self)}


@dataclass(frozen=True)
class LinearSchedule:
    """k rises linearly from kmin at t = 0 to kmax at t = T (paper's S4 row)."""

    kmin: float = 1.0
    kmax: float = 100.0
    name: ClassVar[str] = "linear"

    def __post_init__(self) -> None:
        _check_range(self.kmin, self.kmax)

    def __call__(self, t: float, total: float) -> float:
        return self.kmin + (self.kmax - self.kmin) * _progress(t, total)

    def to_config(self) -> dict[str, Any]:
        return {"name": self.name, **asdict(self)}


@dataclass(frozen=True)
class FixedSchedule:
    """A constant k (paper's S2/S3 rows)."""

    k: float = 100.0
    name: ClassVar[str] = "fixed"

    def __post_init__(self) -> None:
        if not (self.k > 0 and math.isfinite(self.k)):
            raise ValueError(f"fixed schedule needs a finite k > 0, got k={self.k}")

    def __call__(self, t: float, total: float) -> float:
        return float(self.k)

    def to_config(self) -> dict[str, Any]:
        return {"name": self.name, **asdict(self)}


Schedule = Union[SigmoidSchedule, LinearSchedule, FixedSchedule]
SCHEDULES: dict[str, type] = {c.name: c for c in (SigmoidSchedule, LinearSchedule, FixedSchedule)}


def make_schedule(config: str | dict[str, Any] | Schedule) -> Schedule:
    """Build a schedule from its name or a `{"name": ..., **params}` config."""
    if isinstance(config, (SigmoidSchedule, LinearSchedule, FixedSchedule)):
        return config
    if isinstance(config, str):
        config = {"name": config}
    params = dict(config)
    name = params.pop("name", "sigmoid")
    if name not in SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}; choose one of {sorted(SCHEDULES)}")
    try:
        return SCHEDULES[name](**params)
    except TypeError as exc:
        raise ValueError(f"bad parameters for schedule {name!r}: {exc}") from None


def sharpness(
    t: float,
    total: float,
    schedule: str = "sigmoid",
    kmin: float = 1.0,
    kmax: float = 100.0,
    s: float = 10.0,
    tau: float = 0.5,
    k: float | None = None,
) -> float:
    """k(t) for step t of total steps under the named schedule.

    `fixed` uses `k` when given, else `kmax`; `linear` ignores s and tau.
    """
    if schedule == "sigmoid":
        sched: Schedule = SigmoidSchedule(kmin, kmax, s, tau)
    elif schedule == "linear":
        sched = LinearSchedule(kmin, kmax)
    elif schedule == "fixed":
        sched = FixedSchedule(kmax if k is None else k)
    else:
        raise ValueError(f"unknown schedule {schedule!r}; choose one of {sorted(SCHEDULES)}")
    return sched(t, total)
