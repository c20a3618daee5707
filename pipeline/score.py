"""Grade a model's predictions on the dataset with the items' own verifiers and VSI-Bench's metric.

Input: predictions `{id: prediction}` (the raw model output; the verifier extracts the
`<answer>`), as `verifiers.vsibench.read_predictions` reads them from a JSONL file. Per subtask the report gives:

- `metric`: VSI-Bench's metric, `verifiers.vsibench.item_score` (the one scorer `numerical3d
  eval` uses too). Numbers (numeric and count kinds) get Mean Relative Accuracy of the verifier's
  parsed value; coordinates (grounding) get the same thresholds applied to the Euclidean error
  relative to the answer's norm; choice, direction, order and relations get exact-match accuracy
  (verifier score V == 1).
- `mean_reward`: the mean SNRA accuracy reward r at the chosen sharpness k, and
  `mean_total_reward` R = (1 - lambda) r + lambda r_fmt.
- `parse_failure_rate`: the share of predictions with no parseable answer.
Items without a prediction are counted as missing (and scored as parse failures); ids that
are not in the dataset are counted and listed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from numerical3d.dataset import DatasetFolder
from numerical3d.pipeline.shards import read_items
from numerical3d.sources.io import atomic_write_text
from numerical3d.verifiers import verify
from numerical3d.verifiers.vsibench import item_metric, item_score


class ScoreError(Exception):
    """The dataset cannot be scored as asked (no shards, or no such split); names the folder."""

@dataclass
class SubtaskScore:
    metric: str  # "MRA" or "accuracy"
    n: int = 0
    missing: int = 0
    value: float = 0.0
    mean_reward: float = 0.0
    mean_total_reward: float = 0.0
    parse_failure_rate: float = 0.0


@dataclass
class ScoreReport:
    k: float
    split: str | None
    items: int
    predictions: int
    missing: int
    unknown_ids: list[str] = field(default_factory=list)
    subtasks: dict[str, SubtaskScore] = field(default_factory=dict)
    overall: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def score(dataset: str | Path, predictions: dict[str, str], *, k: float = 100.0, split: str | None = None) -> ScoreReport:
    """Grade `predictions` against the dataset folder's items (one split, or all)."""
    folder = DatasetFolder(dataset)
    splits = folder.splits("default")
    if split is not None and split not in splits:
        raise ScoreError(f"{dataset}: no split {split!r} (--split); the dataset has {', '.join(splits)}")
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    kinds: dict[str, str] = {}
    seen: set[str] = set()
    n_items = 0
    for item in read_items(folder, split):
        n_items += 1
        seen.add(item.id)
        kind = item.verifier["kind"]
        kinds.setdefault(item.subtask, kind)
        pred = predictions.get(item.id)
        res = verify(item.verifier, pred if pred is not None else "", k)
        s = sums[item.subtask]
        s["n"] += 1
        s["missing"] += pred is None
        s["value"] += item_score(item.verifier, res)
        s["reward"] += res.accuracy_reward
        s["total"] += res.reward
        s["fail"] += res.parsed is None
    report = ScoreReport(
        k=k, split=split, items=n_items, predictions=len(predictions),
        missing=int(sum(s["missing"] for s in sums.values())),
        unknown_ids=sorted(set(predictions) - seen),
    )
    for name in sorted(sums):
        s = sums[name]
        n = s["n"]
        report.subtasks[name] = SubtaskScore(
            metric=item_metric(kinds[name]),
            n=int(n), missing=int(s["missing"]), value=s["value"] / n, mean_reward=s["reward"] / n,
            mean_total_reward=s["total"] / n, parse_failure_rate=s["fail"] / n,
        )
    if report.subtasks:
        subs = list(report.subtasks.values())
        total = sum(x.n for x in subs)
        report.overall = {
            "metric_mean_over_subtasks": float(np.mean([x.value for x in subs])),
            "mean_reward": sum(x.mean_reward * x.n for x in subs) / total,
            "mean_total_reward": sum(x.mean_total_reward * x.n for x in subs) / total,
            "parse_failure_rate": sum(x.parse_failure_rate * x.n for x in subs) / total,
        }
    return report


def render_table(report: ScoreReport) -> Any:
    """A rich table of the per-subtask scores."""
    from rich.table import Table

    table = Table(title=f"Scores (k = {report.k:g}{', split ' + report.split if report.split else ''})")
    for col in ("subtask", "n", "metric", "value", "mean SNRA r", "mean R", "parse fail", "missing"):
        table.add_column(col, justify="left" if col in ("subtask", "metric") else "right")
    for name, s in report.subtasks.items():
        table.add_row(name, str(s.n), s.metric, f"{100 * s.value:.1f}", f"{s.mean_reward:.3f}",
                      f"{s.mean_total_reward:.3f}", f"{100 * s.parse_failure_rate:.1f}%", str(s.missing))
    if report.overall:
        o = report.overall
        table.add_row("overall", str(report.items), "mean", f"{100 * o['metric_mean_over_subtasks']:.1f}",
                      f"{o['mean_reward']:.3f}", f"{o['mean_total_reward']:.3f}", f"{100 * o['parse_failure_rate']:.1f}%",
                      str(report.missing))
    return table


def write_report(report: ScoreReport, path: str | Path) -> None:
    atomic_write_text(Path(path), json.dumps(report.to_dict(), indent=2, sort_keys=True) + "\n")
