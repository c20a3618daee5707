"""The dataset card (`README.md`, from `templates/dataset_card.md.j2`) and its plots.

Statistics are gathered while the shards are written (`DatasetStats.observe`, one item at a
time, so the card costs no second pass), then rendered with jinja2. The YAML header declares
the configs (`default` questions, `frames` pixels, `scenes` geometry) so `load_dataset(folder)` and the Hub
see the same layout. Plots are PNG files in `plots/`, drawn with matplotlib with no
time-dependent metadata, so the same build gives the same bytes.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from numerical3d.pipeline.config import BuildConfig
from numerical3d.pipeline.items import Item
from numerical3d.pipeline.layout import BLIND_PLOT, CARD, DATA, FRAMES, PLOTS, SCENES, shard_pattern
from numerical3d.sources import licence_of
from numerical3d.sources.io import atomic_output, atomic_write_text

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"

NUMERICAL_KINDS = frozenset({"numeric", "grounding"})

def answer_size(kind: str, n: int) -> str:
    """A plot label for a list answer: "none", "1 relation", "3 relations", "4 labels in order"."""
    if kind == "relations":
        return "none" if n == 0 else f"{n} relation" + ("s" if n != 1 else "")
    return f"{n} label" + ("s" if n != 1 else "") + " in order"


@dataclass
class DatasetStats:
    """Counts and answer values gathered item by item while the shards are written."""

    items: Counter = field(default_factory=Counter)  # split -> items
    frames: Counter = field(default_factory=Counter)  # split -> frames
    subtasks: Counter = field(default_factory=Counter)
    sources: Counter = field(default_factory=Counter)
    source_subtask: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    kinds: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # subtask -> verifier kinds used
    values: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # numeric answers
    classes: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))  # discrete answers
    examples: dict[str, dict[str, Any]] = field(default_factory=dict)  # kind -> first spec seen
    units: dict[str, str] = field(default_factory=dict)  # subtask -> answer unit
    scenes: set = field(default_factory=set)

    def observe(self, split: str, item: Item) -> None:
        spec = item.verifier
        kind = str(spec.get("kind"))
        self.items[split] += 1
        self.subtasks[item.subtask] += 1
        self.sources[item.source] += 1
        self.source_subtask[item.source][item.subtask] += 1
        self.kinds[item.subtask].add(kind)
        self.examples.setdefault(kind, spec)
        if spec.get("unit"):
            self.units.setdefault(item.subtask, str(spec["unit"]))
        self.scenes.add((item.source, item.scene_id))
        ans = spec.get("answer")
        if kind == "numeric" or kind == "count":
            try:
                self.values[item.subtask].append(float(ans))
            except (TypeError, ValueError):
                pass
        elif kind == "grounding":
            try:
                self.values[item.subtask].append(float(np.linalg.norm(np.asarray(ans, dtype=np.float64))))
            except (TypeError, ValueError):
                pass
        if kind in ("choice", "direction"):
            self.classes[item.subtask][str(ans)] += 1
        elif kind in ("order", "relations") and isinstance(ans, list):
            self.classes[item.subtask][answer_size(kind, len(ans))] += 1

    def kind_names(self, subtask: str) -> list[str]:
        return sorted(self.kinds.get(subtask, ()))

    def summary(self) -> dict[str, Any]:
        return {
            "items": dict(sorted(self.items.items())),
            "frames": dict(sorted(self.frames.items())),
            "subtasks": dict(sorted(self.subtasks.items())),
            "sources": dict(sorted(self.sources.items())),
            "scenes": len(self.scenes),
        }


def plot_answers(stats: DatasetStats, path: Path) -> None:
    """One panel per subtask: a histogram of numeric answers or bars of discrete answers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted(stats.subtasks)
    ncols = min(4, max(1, len(names)))
    nrows = max(1, math.ceil(len(names) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(4 * ncols, 3 * nrows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        vals = np.asarray(stats.values.get(name, []), dtype=np.float64)
        if stats.kind_names(name) == ["count"] and len(vals):
            keys, counts = np.unique(vals.astype(int), return_counts=True)
            ax.bar([str(k) for k in keys], counts, color="tab:blue")
            ax.set_xlabel("count")
        elif len(vals):
            pos = vals[vals > 0]
            if len(pos) == len(vals) and pos.max() / pos.min() > 10:
                ax.hist(vals, bins=np.geomspace(pos.min(), pos.max(), 21), color="tab:blue")
                ax.set_xscale("log")
                ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            else:
                ax.hist(vals, bins=20, color="tab:blue")
            ax.set_xlabel(stats.units.get(name, "|answer|"))
        else:
            cls = sorted(stats.classes.get(name, {}).items())
            ax.bar([c for c, _ in cls], [n for _, n in cls], color="tab:orange")
            ax.tick_params(axis="x", labelrotation=45, labelsize=7)
        ax.set_title(f"{name} ({stats.subtasks[name]})", fontsize=9)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.suptitle("Answer distribution per subtask")
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.12, top=0.88, wspace=0.3, hspace=0.6)
    _save(fig, path)


def plot_snra(path: Path) -> None:
    """SNRA reward over error at points of the sharpness schedule, and the schedules themselves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from numerical3d.verifiers.schedules import sharpness
    from numerical3d.verifiers.snra import snra

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    e = np.linspace(0.0, 0.5, 400)
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        k = sharpness(frac, 1.0, "sigmoid")
        left.plot(e, snra(k, e), label=f"t/T={frac:.2f} (k={k:.1f})")
    left.set_xlabel("error e")
    left.set_ylabel("reward r = 2 / (1 + exp(k e))")
    left.set_title("SNRA over the sigmoid schedule")
    left.legend(fontsize=7)
    t = np.linspace(0.0, 1.0, 200)
    for name in ("sigmoid", "linear"):
        right.plot(t, [sharpness(x, 1.0, name) for x in t], label=name)
    right.set_xlabel("training progress t/T")
    right.set_ylabel("sharpness k(t)")
    right.set_title("Sharpness schedules (kmin 1, kmax 100)")
    right.legend(fontsize=8)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.15, top=0.9, wspace=0.25)
    _save(fig, path)


def plot_blind(debias: dict[str, Any], path: Path) -> None:
    """Per subtask: the text-only score before and after pruning and on the selection, against
    chance (choices) or the best constant answer (numbers)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    subs = debias["subtasks"]
    names = sorted(subs)
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(max(8.0, 0.8 * len(names) + 2), 4.2))
    bars = [("before", "candidates before pruning", "tab:red"), ("after", "after pruning", "tab:blue"),
            ("selected", "selected items", "tab:green")]
    for j, (key, label, colour) in enumerate(bars):
        ax.bar(x + (j - 1) * 0.27, [subs[n].get(key) or 0.0 for n in names], 0.27, label=label, color=colour)
    from numerical3d.pipeline.blind import baseline

    base = [baseline(subs[n]["chance"], subs[n]["constant"]) for n in names]
    ax.scatter(x, base, marker="_", s=400, color="black", zorder=3, label="chance (choices) / best constant")
    ax.set_xticks(x, [f"{n}\n({subs[n]['pruned']} pruned)" for n in names], rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("blind score (accuracy / MRA)")
    ax.set_ylim(0, 1.3)
    ax.set_yticks(np.linspace(0, 1, 6))
    ax.set_title("Text-only (blind) score per subtask, scene-grouped cross-validation", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", ncol=4)
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.3, top=0.92)
    _save(fig, path)


def _save(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    try:
        with atomic_output(path) as tmp:
            fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    finally:
        plt.close(fig)


def card_yaml(config: BuildConfig, splits: dict[str, list[str]], frame_splits: dict[str, list[str]], stats: DatasetStats,
              scene_splits: dict[str, list[str]] | None = None) -> str:
    """The card's YAML header: configs with their data files, licence, tags, size."""
    n = sum(stats.items.values())
    size = "n<1K" if n < 1_000 else "1K<n<10K" if n < 10_000 else "10K<n<100K" if n < 100_000 else "100K<n<1M"
    header: dict[str, Any] = {
        "pretty_name": config.name,
        "license": "other",
        "license_name": "mixed-per-source",
        "task_categories": ["visual-question-answering"],
        "tags": ["3d", "spatial-reasoning", "verifiable-rewards", "grpo"],
        "size_categories": [size],
        "configs": [
            {
                "config_name": "default",
                "default": True,
                "data_files": [{"split": s, "path": f"{DATA}/{shard_pattern(s)}"} for s in sorted(splits) if splits[s]],
            }
        ],
    }
    frames = [{"split": s, "path": f"{FRAMES}/{shard_pattern(s)}"} for s in sorted(frame_splits) if frame_splits[s]]
    if frames:
        header["configs"].append({"config_name": "frames", "data_files": frames})
    scenes = [{"split": s, "path": f"{SCENES}/{shard_pattern(s)}"} for s in sorted(scene_splits or {}) if scene_splits[s]]
    if scenes:
        header["configs"].append({"config_name": "scenes", "data_files": scenes})
    return yaml.safe_dump(header, sort_keys=False)


def render_card(
    root: Path,
    config: BuildConfig,
    stats: DatasetStats,
    *,
    seed: int,
    splits: dict[str, list[str]],
    frame_splits: dict[str, list[str]],
    report: dict[str, Any] | None,
    scene_splits: dict[str, list[str]] | None = None,
    quarantine: list[dict[str, Any]] | None = None,
) -> list[str]:
    """Write README.md and the plots; returns the paths written, relative to `root`."""
    plot_answers(stats, root / PLOTS["answers"])
    plot_snra(root / PLOTS["snra"])
    debias = (report or {}).get("debias")
    if debias:
        plot_blind(debias, root / BLIND_PLOT)
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES_DIR)), undefined=StrictUndefined, keep_trailing_newline=True,
        trim_blocks=True, lstrip_blocks=True,
    )
    env.filters["tojson_pretty"] = lambda x: json.dumps(x, indent=2, sort_keys=True)
    numerical = {s for s, kinds in stats.kinds.items() if kinds <= NUMERICAL_KINDS}
    text = env.get_template("dataset_card.md.j2").render(
        yaml_header=card_yaml(config, splits, frame_splits, stats, scene_splits),
        scene_config=bool(scene_splits and any(scene_splits.values())),
        preview=config.preview,
        config=config,
        seed=seed,
        stats=stats,
        total=sum(stats.items.values()),
        subtasks=[
            {
                "name": s,
                "kinds": stats.kind_names(s),
                "type": "numerical" if s in numerical else "discrete",
                "count": n,
            }
            for s, n in sorted(stats.subtasks.items())
        ],
        numerical_share=sum(stats.subtasks[s] for s in numerical) / max(1, sum(stats.subtasks.values())),
        sources=sorted(stats.sources.items()),
        source_subtask={s: dict(sorted(c.items())) for s, c in sorted(stats.source_subtask.items())},
        licences={s: licence_of(s) for s in sorted(stats.sources)},
        examples=dict(sorted(stats.examples.items())),
        excluded=(report or {}).get("excluded", {}),
        warnings=(report or {}).get("warnings", []),
        quarantine=quarantine or [],
        plots=PLOTS,
        debias=debias,
        blind_plot=BLIND_PLOT,
        media=config.media,
        splits={s: stats.items.get(s, 0) for s in sorted(splits)},
        frames={s: stats.frames.get(s, 0) for s in sorted(frame_splits)},
    )
    atomic_write_text(root / CARD, text)
    return [CARD, *PLOTS.values(), *([BLIND_PLOT] if debias else [])]
