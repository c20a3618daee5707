"""The dataset card (`README.md`, from `templates/dataset_card.md.j2`) and its plots.

Statistics are gathered while the shards are written (`DatasetStats.observe`, one item at a
time, so the card costs no second pass), then rendered with jinja2. The YAML header declares
the configs (`default` questions, `frames` pixels, `scenes` geometry) so `load_dataset(folder)` and the Hub
see the same layout. Plots are PNG files in `plots/`, drawn with matplotlib with no
time-dependent metadata, so the same build gives the same bytes.
"""

from __future__ import annotations

import html
import json
import re
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from numerical3d.pipeline.config import DatasetMix
from numerical3d.pipeline.items import Item
from numerical3d.pipeline.layout import BLIND_PLOT, CARD, PLOTS
from numerical3d.pipeline.ingest import CORPORA
from numerical3d.sources import licence_of
from numerical3d.sources.io import atomic_output, atomic_write_text

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"

NUMERICAL_KINDS = frozenset({"numeric", "grounding"})

# What a subtask's answer measures, in the card's words; a subtask missing here (one added by a
# plugin) is named by its own name. Only the subtasks a build holds are described.
MEASURES = {
    "abs_distance": "distances between objects",
    "camera_distance": "camera-to-object distances",
    "object_size": "object sizes",
    "room_size": "floor areas",
    "grounding_3d": "3D positions in the camera's frame",
    "grounding_2d": "2D positions in the image",
}
# What a discrete verifier kind asks for.
ASKS = {"count": "counts", "choice": "multiple choice", "direction": "directions", "order": "orders",
        "relations": "spatial relations"}
PARTIAL_CREDIT = frozenset({"count", "direction", "order", "relations"})  # may grade in [0, 1], not right/wrong


def partial_credit(spec: dict[str, Any]) -> bool:
    """Whether a near miss earns part of the score: always for counts, orders and relation sets; for
    directions only on a ring of classes (a neighbour) or with an angle (left/back/right: none)."""
    kind = spec.get("kind")
    if kind != "direction":
        return kind in PARTIAL_CREDIT
    from numerical3d.verifiers.spec import SpecError, validate_spec

    try:
        s = validate_spec(spec)
    except SpecError:
        return False
    return "angle" in s or bool(s["ring"] and s["adjacent_credit"] > 0)


def answer_size(kind: str, n: int) -> str:
    """A plot label for a list answer: "none", "1 relation", "3 relations", "4 labels in order"."""
    if kind == "relations":
        return "none" if n == 0 else f"{n} relation" + ("s" if n != 1 else "")
    return f"{n} label" + ("s" if n != 1 else "") + " in order"


@dataclass(frozen=True)
class Example:
    """One built question shown on the card: the first of its subtask and verifier kind in write order."""

    subtask: str
    kind: str
    split: str
    id: str
    prompt: str
    answer: str
    spec: dict[str, Any]

    @property
    def verified(self) -> str:
        return how_verified(self.spec)


def _num(x: Any) -> str:
    return f"{float(x):g}"


def how_verified(spec: dict[str, Any]) -> str:
    """One sentence saying how a completion is graded against this spec, from its resolved defaults."""
    from numerical3d.verifiers.spec import SpecError, validate_spec

    try:
        s = validate_spec(spec)
    except SpecError as exc:
        return f"not checkable: {exc}"
    kind = s["kind"]
    if kind == "numeric":
        if s["error"] == "relative_squared":
            err = "error ((y_hat - y) / y)^2"
        elif s["error"] == "angular":
            err = f"error (wrapped angle difference / {_num(s['scale'])})^2"
        else:
            err = f"error ((y_hat - y) / {_num(s['scale'])})^2 in SI units"
        return (f"the number in the answer, in {s['unit']} or any unit convertible to it, against {_num(s['answer'])}; "
                f"{err}, capped at {_num(s['e_max'])}")
    if kind == "grounding":
        return (f"the {len(s['answer'])} numbers against ({', '.join(_num(v) for v in s['answer'])}); error the squared "
                f"Euclidean distance / {_num(s['scale'])}^2, capped at {_num(s['e_max'])}")
    if kind == "count":
        if s["form"] == "exp":
            return f"the number against {s['answer']}; V = exp(-|n - {s['answer']}| / {_num(s['tau'])})"
        return f"the number against {s['answer']}; V = max(0, 1 - |n - {s['answer']}| / ({max(s['answer'], 1)} + {_num(s['c'])}))"
    if kind == "choice":
        return f"the option named (its letter or its text); V = 1 for {s['answer']}, else 0"
    if kind == "direction":
        classes = ", ".join(s["classes"])
        if "angle" in s:
            return (f"a class ({classes}) or an angle in degrees, against {_num(s['angle'])} degrees; V falls off "
                    f"with the angular difference (sigma {_num(s['sigma'])})")
        credit = f"{_num(s['adjacent_credit'])} for a neighbouring class" if s["ring"] else "no partial credit"
        return f"the class named ({classes}); V = 1 for {s['answer']}, {credit}"
    if kind == "order":
        how = "Kendall's tau (1 - inversions / pairs)" if s["form"] == "kendall" else "time-weighted pairwise agreement"
        return f"the labels in the order given; V = {how} against {', '.join(s['answer'])}"
    if kind == "relations":
        gold = f"{{{', '.join(s['answer'])}}}" if s["answer"] else "the empty set (none)"
        if s["form"] == "jaccard":
            return f"the relations named ({', '.join(s['vocabulary'])}, or none); V = Jaccard similarity with {gold}"
        return f"the relation named; V = 1 - its distance to {gold} in the relation graph / the largest distance"
    return f"kind `{kind}`"


def panel_label(kind: str) -> str:
    """What a panel of one verifier kind plots: option letters and class names never share a panel."""
    return {"choice": "option letter", "direction": "class", "count": "count", "order": "labels to order",
            "relations": "relations that hold", "grounding": "position"}.get(kind, "value")


@dataclass
class DatasetStats:
    """Counts and answer values gathered item by item while the shards are written.

    Answers are kept per (subtask, verifier kind): a subtask asked both as multiple choice and as a
    class (rel_direction) has two distributions, letters and classes, never one mixed plot."""

    items: Counter = field(default_factory=Counter)  # split -> items
    frames: Counter = field(default_factory=Counter)  # split -> frames
    subtasks: Counter = field(default_factory=Counter)
    sources: Counter = field(default_factory=Counter)
    source_subtask: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    kinds: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # subtask -> verifier kinds used
    per_kind: Counter = field(default_factory=Counter)  # (subtask, kind) -> items
    values: dict[tuple[str, str], list[float]] = field(default_factory=lambda: defaultdict(list))  # numeric, count
    points: dict[tuple[str, str], list[list[float]]] = field(default_factory=lambda: defaultdict(list))  # grounding
    classes: dict[tuple[str, str], Counter] = field(default_factory=lambda: defaultdict(Counter))  # discrete answers
    examples: dict[tuple[str, str], Example] = field(default_factory=dict)  # (subtask, kind) -> first item seen
    units: dict[str, str] = field(default_factory=dict)  # subtask -> answer unit
    with_frames: int = 0  # items that show frames (a box-only source has none)
    partial: set[str] = field(default_factory=set)  # verifier kinds of which some item grades a near miss
    exact: set[str] = field(default_factory=set)  # discrete kinds of which some item is right or wrong only
    scenes: set = field(default_factory=set)

    def observe(self, split: str, item: Item) -> None:
        spec = item.verifier
        kind = str(spec.get("kind"))
        key = (item.subtask, kind)
        self.items[split] += 1
        self.subtasks[item.subtask] += 1
        self.sources[item.source] += 1
        self.source_subtask[item.source][item.subtask] += 1
        self.kinds[item.subtask].add(kind)
        self.per_kind[key] += 1
        self.with_frames += bool(item.frames)
        if kind in PARTIAL_CREDIT or kind == "choice":
            (self.partial if partial_credit(spec) else self.exact).add(kind)
        if key not in self.examples:
            self.examples[key] = Example(item.subtask, kind, split, item.id, item.prompt, item.answer, spec)
        if spec.get("unit"):
            self.units.setdefault(item.subtask, str(spec["unit"]))
        self.scenes.add((item.source, item.scene_id))
        ans = spec.get("answer")
        if kind in ("numeric", "count"):
            try:
                self.values[key].append(float(ans))
            except (TypeError, ValueError):
                pass
        elif kind == "grounding":
            try:
                self.points[key].append([float(v) for v in ans])
            except (TypeError, ValueError):
                pass
        elif kind in ("choice", "direction"):
            self.classes[key][str(ans)] += 1
        elif kind in ("order", "relations") and isinstance(ans, list):
            self.classes[key][answer_size(kind, len(ans))] += 1

    def kind_names(self, subtask: str) -> list[str]:
        return sorted(self.kinds.get(subtask, ()))

    def panels(self) -> list[tuple[str, str]]:
        """(subtask, kind) of every answer distribution, by subtask then kind."""
        return sorted(self.per_kind)

    def summary(self) -> dict[str, Any]:
        return {
            "items": dict(sorted(self.items.items())),
            "frames": dict(sorted(self.frames.items())),
            "subtasks": dict(sorted(self.subtasks.items())),
            "sources": dict(sorted(self.sources.items())),
            "scenes": len(self.scenes),
        }


# Titles at the top of their axes, where matplotlib's automatic placement puts them anyway (no panel
# has ticks above it): it skips measuring every panel's tick labels at draw time, a tenth of the card.
FIXED_TITLES = {"axes.titley": 1.0}


def plot_answers(stats: DatasetStats, path: Path) -> None:
    """One panel per subtask and verifier kind: a histogram of numbers, bars of counts, the positions
    of grounding answers, bars of option letters, of classes or of answer sizes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = stats.panels()
    ncols = min(4, max(1, len(panels)))
    nrows = max(1, math.ceil(len(panels) / ncols))
    with matplotlib.rc_context(FIXED_TITLES):
        fig, axes = plt.subplots(nrows, ncols, figsize=(4 * ncols, 3.0 * nrows), squeeze=False)
    for ax, (name, kind) in zip(axes.flat, panels):
        key = (name, kind)
        vals = np.asarray(stats.values.get(key, []), dtype=np.float64)
        pts = stats.points.get(key, [])
        if kind == "count" and len(vals):
            keys, counts = np.unique(vals.astype(int), return_counts=True)
            ax.bar([str(k) for k in keys], counts, color="tab:blue")
            ax.set_xlabel("count")
        elif kind == "numeric" and len(vals):
            pos = vals[vals > 0]
            if len(pos) == len(vals) and pos.max() / pos.min() > 10:
                ax.hist(vals, bins=np.geomspace(pos.min(), pos.max(), 21), color="tab:blue")
                ax.set_xscale("log")
                ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            else:
                ax.hist(vals, bins=20, color="tab:blue")
            ax.set_xlabel(stats.units.get(name, "answer"))
        elif kind == "grounding" and pts:
            dims = {len(p) for p in pts}
            xy = np.asarray([p[:2] if len(p) == 2 else (p[0], p[2]) for p in pts if len(p) in (2, 3)], dtype=np.float64)
            if len(xy):
                ax.scatter(xy[:, 0], xy[:, 1], s=8, color="tab:blue")
            if dims == {2}:  # image coordinates: top-left is (0, 0)
                ax.set_xlim(0, 1)
                ax.set_ylim(1, 0)
                ax.set_xlabel("x (image width)")
                ax.set_ylabel("y (image height)", fontsize=8)
            else:  # seen from above, the camera at the origin looking up the plot
                ax.scatter([0], [0], marker="^", color="black")
                ax.set_xlabel("x, right (m)")
                ax.set_ylabel("z, ahead (m)", fontsize=8)
        else:
            cls = sorted(stats.classes.get(key, {}).items())
            ax.bar([c for c, _ in cls], [n for _, n in cls], color="tab:green" if kind == "choice" else "tab:orange")
            crowded = sum(len(c) for c, _ in cls) > 28  # long class names side by side: tilt them
            ax.tick_params(axis="x", labelrotation=35 if crowded else 0, labelsize=8)
            ax.set_xlabel(panel_label(kind))
        ax.set_title(f"{name}: {kind} ({stats.per_kind[key]})", fontsize=9)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle("Answer distribution per subtask and verifier kind")
    height = 3.0 * nrows  # margins in inches, so that one row or five keep their axis labels
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.75 / height, top=1 - 0.7 / height, wspace=0.3, hspace=0.8)
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


def data_files(splits: dict[str, list[str]]) -> list[dict[str, Any]]:
    """A config's `data_files`: every shard of each split by name (names carry the content's hash, so
    the card, and with it the cache key of `datasets.load_dataset(folder)`, changes with the rows)."""
    return [{"split": s, "path": sorted(files)} for s, files in sorted(splits.items()) if files]


def replace_config_files(root: Path, config_name: str, splits: dict[str, list[str]]) -> None:
    """Point config `config_name` of the card at new shards (hydration rewrites the frames), keeping
    the rest of the card as it is."""
    card = root / CARD
    text = card.read_text(encoding="utf-8")
    header = re.match(r"---\s*\n(.*?)\n---\s*\n", text, re.DOTALL)
    if header is None:
        raise ValueError(f"{card}: no YAML header")
    meta = yaml.safe_load(header.group(1))
    for entry in meta.get("configs", []):
        if entry.get("config_name") == config_name:
            entry["data_files"] = data_files(splits)
    atomic_write_text(card, f"---\n{yaml.safe_dump(meta, sort_keys=False)}---\n" + text[header.end():])


def card_yaml(config: DatasetMix, splits: dict[str, list[str]], frame_splits: dict[str, list[str]], stats: DatasetStats,
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
                "data_files": data_files(splits),
            }
        ],
    }
    frames = data_files(frame_splits)
    if frames:
        header["configs"].append({"config_name": "frames", "data_files": frames})
    scenes = data_files(scene_splits or {})
    if scenes:
        header["configs"].append({"config_name": "scenes", "data_files": scenes})
    return yaml.safe_dump(header, sort_keys=False)


# Every value the card takes from the data (labels inside questions, ids, answers, reasons) goes
# through one of these: a CommonMark renderer with HTML on must show it as text, never run it.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")  # mid-line: emphasis, code, links, table cells, strike


def md_text(value: Any) -> str:
    """Literal text in the middle of a Markdown line (a table cell, a list item, after `# `): HTML's
    `<`, `>`, `&` as entities (no tag, no autolink), the punctuation of inline Markdown
    backslash-escaped, one line."""
    text = html.escape(str(value), quote=False)
    return _MD_SPECIAL.sub(r"\\\1", text).replace("\r", " ").replace("\n", " ")


def md_code(value: Any) -> str:
    """An inline code span holding `value` whatever backticks it holds (CommonMark: the fence is
    longer than any run of backticks inside, padded with a space where the text starts or ends
    with a backtick or a space)."""
    text = str(value).replace("\r", " ").replace("\n", " ")
    fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_fence(value: Any) -> str:
    """The fence of a code block that `value` cannot close."""
    return "`" * max(3, max((len(r) for r in re.findall(r"`+", str(value))), default=0) + 1)


def render_card(
    root: Path,
    config: DatasetMix,
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
    env.filters["tojson_compact"] = lambda x: json.dumps(x, sort_keys=True, ensure_ascii=False)
    env.filters["md_code"] = md_code
    env.filters["md_text"] = md_text
    env.filters["md_fence"] = md_fence
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
        measures=[MEASURES.get(s, s.replace("_", " ")) for s in sorted(numerical)],
        asks=sorted({ASKS.get(k, k) for s, kinds in stats.kinds.items() if s not in numerical
                     for k in kinds if k not in NUMERICAL_KINDS}),
        partial=[k + (" on a ring of classes" if k == "direction" and k in stats.exact else "") for k in sorted(stats.partial)],
        exact=[k + (" off a ring" if k == "direction" and k in stats.partial else "") for k in sorted(stats.exact)],
        with_frames=stats.with_frames,
        sources=sorted(stats.sources.items()),
        source_subtask={s: dict(sorted(c.items())) for s, c in sorted(stats.source_subtask.items())},
        licences={s: CORPORA[s].licence if s in CORPORA else licence_of(s) for s in sorted(stats.sources)},
        corpora=[{"name": s, "title": CORPORA[s].title, "items": n, "licence": CORPORA[s].licence,
                  "pixels": "yes" if CORPORA[s].pixels_published else "no (referenced)"}
                 for s, n in sorted(stats.sources.items()) if s in CORPORA],
        examples=[stats.examples[k] for k in stats.panels()],
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
