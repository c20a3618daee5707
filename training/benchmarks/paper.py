"""Published numbers to set a model beside: Smooth Operator's Table 1 (tab:vsi_bench_full, VSI-Bench
per question type, percent) and Table 1(b) (CV-Bench, MMSI-Bench, MindCube, BLINK), for the rows
the comparison plots and tables show.
"""

from __future__ import annotations

import os
from pathlib import Path

from numerical3d.verifiers.vsibench import OFFICIAL_TYPES

# Columns in the paper's order: Avg., then the eight types (OFFICIAL_TYPES' order).
_VSI_ROWS = {
    "GPT-4o": (34.0, 46.2, 5.3, 43.8, 38.2, 37.0, 41.3, 31.5, 28.5),
    "Gemini-1.5 Pro": (45.4, 56.2, 30.9, 64.1, 43.6, 51.3, 46.3, 36.0, 34.6),
    "Qwen2.5-VL-7B": (32.7, 34.5, 19.4, 47.6, 40.8, 32.8, 24.5, 32.5, 29.4),
    "SpaceR-7B": (43.5, 61.9, 28.6, 60.9, 35.2, 38.2, 46.0, 31.4, 45.6),
    "ViLaSR-7B": (45.4, 63.5, 34.4, 60.6, 30.9, 48.9, 45.2, 30.4, 49.2),
    "VST-7B-SFT": (60.6, 72.0, 44.4, 74.3, 68.3, 59.7, 55.8, 44.9, 65.2),
    "SmoothOp-3B": (53.9, 70.1, 42.8, 69.9, 38.3, 60.4, 45.4, 38.7, 65.5),
    "SmoothOp-7B": (60.0, 71.1, 41.4, 72.2, 70.3, 61.7, 55.1, 42.8, 65.4),
}
VSIBENCH_TABLE: dict[str, dict[str, float]] = {
    model: dict(zip(("overall", *OFFICIAL_TYPES), values, strict=True)) for model, values in _VSI_ROWS.items()
}
# CV-Bench accuracy (percent) of the same rows where Table 1(b) gives one.
CVBENCH_TABLE: dict[str, float] = {
    "GPT-4o": 76.0, "Qwen2.5-VL-7B": 75.4, "SpaceR-7B": 74.8, "ViLaSR-7B": 81.8, "VST-7B-SFT": 85.5,
    "SmoothOp-3B": 84.9, "SmoothOp-7B": 86.4,
}

# Table 1(b), accuracy in percent per benchmark, for the rows set beside a model on the image benchmarks.
_TABLE_1B_COLUMNS = ("cvbench", "mmsi", "mindcube", "blink")
_TABLE_1B_ROWS = {
    "GPT-4o": (76.0, 30.3, 53.4, 65.9),
    "Qwen2.5-VL-3B": (71.4, 28.6, 37.6, 47.6),
    "Qwen2.5-VL-7B": (75.4, 26.8, 36.0, 56.4),
    "SmoothOp-3B": (84.9, 32.2, 39.4, 56.9),
    "SmoothOp-7B": (86.4, 33.7, 39.6, 62.6),
}
TABLE_1B: dict[str, dict[str, float]] = {
    model: dict(zip(_TABLE_1B_COLUMNS, values, strict=True)) for model, values in _TABLE_1B_ROWS.items()
}

TYPE_LABELS = {
    "overall": "Avg.", "object_counting": "Obj. Cnt.", "object_abs_distance": "Abs. Dist.",
    "object_size_estimation": "Obj. Size", "room_size_estimation": "Room Size", "object_rel_distance": "Rel. Dist.",
    "object_rel_direction": "Rel. Dir.", "route_planning": "Route Plan", "obj_appearance_order": "Appr. Ord.",
}


def plot_comparison(columns: list[str], model: str, scores: dict[str, float], table: dict[str, dict[str, float]],
                    out: str | os.PathLike, title: str, labels: dict[str, str] | None = None) -> Path:
    """Grouped bars: per column, the paper's rows and the evaluated model (hatched, last).
    Columns the model has no score for show only the paper's bars. Writes a PNG atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = list(table)
    n = len(rows) + 1
    width = 0.8 / n
    x = np.arange(len(columns))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(columns) + 2), 4.8))
    cmap = plt.get_cmap("tab10")
    for i, row in enumerate(rows):
        values = [table[row].get(c, np.nan) for c in columns]
        ax.bar(x - 0.4 + (i + 0.5) * width, values, width, label=row, color=cmap(i % 10), alpha=0.75)
    ours = [scores.get(c, np.nan) for c in columns]
    bars = ax.bar(x - 0.4 + (n - 0.5) * width, ours, width, label=f"{model} (this run)", color="black",
                  hatch="//", edgecolor="white")
    for bar, value in zip(bars, ours):
        if np.isfinite(value):
            ax.annotate(f"{value:.1f}", (bar.get_x() + bar.get_width() / 2, value), ha="center", va="bottom", fontsize=7)
    labels = {**TYPE_LABELS, **(labels or {})}
    ax.set_xticks(x, [labels.get(c, c) for c in columns])
    ax.set_ylabel("score (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=min(n, 5), loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    fig.savefig(tmp, format="png", dpi=110, metadata={"Software": None}, bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, out)
    return out
