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
are not in the dataset are counted and listed. Each row's verifier cell is checked from its raw
text (valid JSON, a spec `verifiers.validate_spec` accepts: a known kind, finite answers): a row
that fails is skipped and listed in `skipped` with its id, file and reason, and the rest is scored.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from numerical3d.dataset import DatasetFolder
from numerical3d.errors import Numerical3DError
from numerical3d.sources.io import atomic_write_text
from numerical3d.verifiers import SpecError, validate_spec, verify
from numerical3d.verifiers.vsibench import item_metric, item_score


class ScoreError(Numerical3DError):
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
    skipped: list[dict[str, str]] = field(default_factory=list)  # {id, file, reason}: rows that cannot be scored
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
    skipped: list[dict[str, str]] = []
    n_items = 0
    for _, path, row in folder.file_rows("default", split, ["id", "subtask", "verifier"]):
        item_id = str(row.get("id"))
        seen.add(item_id)
        spec, problem = row_spec(row)
        if spec is None:
            skipped.append({"id": item_id, "file": str(path), "reason": problem})
            continue
        n_items += 1
        subtask = row["subtask"]
        kinds.setdefault(subtask, spec["kind"])
        pred = predictions.get(item_id)
        res = verify(spec, pred if pred is not None else "", k)
        s = sums[subtask]
        s["n"] += 1
        s["missing"] += pred is None
        s["value"] += item_score(spec, res)
        s["reward"] += res.accuracy_reward
        s["total"] += res.reward
        s["fail"] += res.parsed is None
    report = ScoreReport(
        k=k, split=split, items=n_items, predictions=len(predictions),
        missing=int(sum(s["missing"] for s in sums.values())),
        unknown_ids=sorted(set(predictions) - seen), skipped=skipped,
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


def row_spec(row: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The verifier spec of a raw `default`-config row, or None and why the row cannot be scored
    (its cell is not JSON, not a spec `validate_spec` accepts, or the row has no subtask)."""
    cell = row.get("verifier")
    if not isinstance(cell, str):
        return None, f"verifier cell is {type(cell).__name__}, not JSON text"
    try:
        spec = json.loads(cell)
    except json.JSONDecodeError as exc:
        return None, f"verifier cell is not JSON ({exc}): {cell[:60]!r}"
    try:
        validate_spec(spec)
    except SpecError as exc:
        return None, str(exc)
    if not isinstance(row.get("subtask"), str):
        return None, "no subtask"
    return spec, ""


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


REPORT_KIND = "score"  # the report's `report` field: how `score --out` knows a file it may replace


def write_report(report: ScoreReport, path: str | Path) -> None:
    body = {"report": REPORT_KIND, **report.to_dict()}
    atomic_write_text(Path(path), json.dumps(body, indent=2, sort_keys=True) + "\n")
