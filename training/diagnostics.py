"""Training diagnostics plotted after training, from the trainer's log history.

Panels: k(t); advantage variance (the paper's Adv. Var.) and mean advantage; fraction of groups
with no learning signal (advantage collapse, by the run's advantage mode); fraction of near-miss
samples; fraction of samples with a non-zero advantage as trained, under plain GRPO's relative
advantage on the same rewards and under standard GRPO on S1's binary rewards; mean SNRA reward.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

PANELS: list[tuple[str, list[tuple[str, str]]]] = [
    ("sharpness k(t)", [("ap/k", "k")]),
    ("advantage variance and mean", [("ap/adv_var", "Adv. Var."), ("ap/adv_mean", "mean advantage")]),
    ("advantage collapse", [("ap/collapse_frac", "groups with no learning signal")]),
    ("near-miss samples", [("ap/near_miss_frac", "near-miss fraction")]),
    ("non-zero advantage", [("ap/nonzero_adv_frac", "trained"),
                            ("ap/nonzero_adv_frac_grpo", "plain GRPO, same rewards"),
                            ("ap/nonzero_adv_frac_binary_grpo", "standard GRPO, binary rewards (S1)")]),
    ("mean SNRA reward", [("ap/snra_mean", "SNRA r")]),
]
METRICS = [key for _, series in PANELS for key, _ in series]


def series(log_history: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of one metric over the training log entries that carry it."""
    steps, values = [], []
    for entry in log_history:
        if key in entry and "step" in entry:
            steps.append(float(entry["step"]))
            values.append(float(entry[key]))
    return steps, values


def plot_diagnostics(log_history: list[dict[str, Any]], out: str | os.PathLike, title: str = "AP-GRPO") -> Path:
    """Write the six-panel diagnostics figure as PNG (temp name, then rename)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not any(key in entry for entry in log_history for key in METRICS):
        raise ValueError(f"log history has none of the AP metrics {METRICS}; was this an APGRPOTrainer run?")
    out = Path(out)
    fig, axes = plt.subplots(2, 3, figsize=(13, 7), constrained_layout=True)
    for ax, (name, lines) in zip(axes.flat, PANELS):
        for key, label in lines:
            steps, values = series(log_history, key)
            ax.plot(steps, values, marker="o", markersize=3, label=label)
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if len(lines) > 1:
            ax.legend()
    fig.suptitle(title)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    os.replace(tmp, out)
    return out


def write_history(log_history: list[dict[str, Any]], out: str | os.PathLike) -> Path:
    """The log history as JSON, for plotting again or comparing runs."""
    out = Path(out)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(log_history, indent=1))
    os.replace(tmp, out)
    return out
