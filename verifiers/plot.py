"""Figure of SNRA reward curves over the sharpness schedule (the paper's Figure 2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .schedules import make_schedule
from .snra import snra

__all__ = ["plot_snra_curves"]


def plot_snra_curves(
    out: str | Path,
    *,
    schedule: str = "sigmoid",
    kmin: float = 1.0,
    kmax: float = 100.0,
    s: float = 10.0,
    tau: float = 0.5,
    e_max: float = 0.5,
    fractions: list[float] | None = None,
    total: int = 1000,
) -> Path:
    """Left: r = SNRA(k(t), e) for e in [0, e_max] at each training fraction t/T.
    Right: k(t) over training with those points marked. Writes a PNG (temp file, then rename)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fractions = [0.0, 0.25, 0.5, 0.75, 1.0] if fractions is None else fractions
    if not fractions or any(not 0.0 <= f <= 1.0 for f in fractions):
        raise ValueError(f"training fractions must be in [0, 1], got {fractions}")
    if not e_max > 0:
        raise ValueError(f"e_max must be > 0, got {e_max}")
    params = {"sigmoid": {"kmin": kmin, "kmax": kmax, "s": s, "tau": tau},
              "linear": {"kmin": kmin, "kmax": kmax}, "fixed": {"k": kmax}}
    if schedule not in params:
        raise ValueError(f"unknown schedule {schedule!r}; choose one of {sorted(params)}")
    sched = make_schedule({"name": schedule, **params[schedule]})
    e = np.linspace(0.0, e_max, 400)
    steps = np.arange(total + 1)
    ks = np.array([sched(t, total) for t in steps])

    fig, (ax_r, ax_k) = plt.subplots(1, 2, figsize=(10, 4), dpi=120)
    colors = plt.cm.viridis(np.linspace(0.0, 0.9, len(fractions)))
    for f, color in zip(fractions, colors):
        k = sched(f * total, total)
        ax_r.plot(e, snra(k, e), color=color, label=f"t/T={f:g}, k={k:.1f}")
        ax_k.plot([f], [k], "o", color=color)
    ax_r.set(xlabel="error e", ylabel="reward r = 2 / (1 + exp(k e))", ylim=(0, 1.02),
             title="SNRA reward over training")
    ax_r.legend(fontsize=8)
    ax_r.grid(alpha=0.3)
    ax_k.plot(steps / total, ks, color="black", lw=1)
    ax_k.set(xlabel="training progress t/T", ylabel="sharpness k(t)", title=f"{schedule} schedule")
    ax_k.grid(alpha=0.3)
    fig.tight_layout()

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp.png")
    fig.savefig(tmp, format="png")
    plt.close(fig)
    tmp.replace(out)
    return out
