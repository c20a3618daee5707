"""One malformed verifier cell costs its own row, never the run: `score` (through the command line)
and training's data hand-off skip it and name its id, file and reason.

The dataset is the tiny demo build with three cells of one shard rewritten (invalid JSON, an
unknown kind, an infinite answer) and the manifest's hash of that shard updated, as a user's
edit that keeps the folder consistent would leave it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from numerical3d.dataset import DatasetFolder
from numerical3d.training.config import DataConfig
from numerical3d.training.data import prompt_dataset, valid_spec

from .conftest import TINY

def train_shard(folder: Path) -> str:
    """The first train shard of a dataset folder (shard names carry their content's hash)."""
    return sorted(f for f in json.loads((folder / "manifest.json").read_text())["files"] if f.startswith("data/train-"))[0]


BAD_CELLS = {
    "{not json": "not JSON",
    '{"answer":2,"kind":"kount","version":1}': "'kind': must be one of",
    '{"answer":1e999,"kind":"numeric","unit":"m","version":1}': "'answer': must be finite",
}


def rewrite_cells(folder: Path, rel: str, cells: list[str]) -> list[str]:
    """Replace the verifier cells of the first rows of `rel` (schema kept), update the manifest; the ids."""
    path = folder / rel
    table = pq.read_table(path)
    i = table.schema.get_field_index("verifier")
    field = table.schema.field(i)
    values = table.column(i).to_pylist()
    values[: len(cells)] = cells
    storage = pa.array(values, pa.string())
    column = pa.ExtensionArray.from_storage(field.type, storage) if hasattr(field.type, "storage_type") else storage
    pq.write_table(table.set_column(i, field, column), path)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"][rel] = {"bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return [str(x) for x in table.column("id").to_pylist()[: len(cells)]]


@pytest.fixture
def bad_dataset(built_dataset, tmp_path) -> tuple[Path, dict[str, str]]:
    """A copy of the demo dataset with BAD_CELLS in its train shard; (folder, id -> expected reason)."""
    folder = tmp_path / "dataset"
    shutil.copytree(built_dataset, folder)
    ids = rewrite_cells(folder, train_shard(folder), list(BAD_CELLS))
    return folder, dict(zip(ids, BAD_CELLS.values()))


@TINY
def test_score_skips_and_reports_each_bad_row(bad_dataset, tmp_path):
    folder, expected = bad_dataset
    ids = [str(r["id"]) for _, r in DatasetFolder(folder).rows("default", "train", ["id"])]
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(json.dumps({"id": i, "prediction": "<answer>2</answer>"}) + "\n" for i in ids))
    run = subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "score", str(predictions),
                          "--dataset", str(folder), "--split", "train", "--out", str(tmp_path / "scores.json")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    report = json.loads((tmp_path / "scores.json").read_text())
    assert {r["id"]: r["file"] for r in report["skipped"]} == {i: str(folder / train_shard(folder)) for i in expected}
    for row in report["skipped"]:
        assert expected[row["id"]] in row["reason"]
        assert f"skippedrow{row['id']}of{folder / train_shard(folder)}" in "".join(run.stderr.split())  # rich wraps long lines
    assert report["items"] == len(ids) - len(expected) and report["unknown_ids"] == []
    assert report["missing"] == 0  # the skipped rows' predictions are neither scored nor "unknown"


@TINY
def test_training_data_skips_and_reports_each_bad_row(bad_dataset, built_dataset):
    folder, expected = bad_dataset
    rows, report = prompt_dataset(str(folder), DataConfig(split="train", frameless="text"))
    clean, clean_report = prompt_dataset(str(built_dataset), DataConfig(split="train", frameless="text"))
    assert clean_report.bad == [] and len(rows) == len(clean) - len(expected)
    assert {b["id"]: b["file"] for b in report.bad} == {i: str(folder / train_shard(folder)) for i in expected}
    for bad in report.bad:
        assert expected[bad["id"]] in bad["reason"]
    assert {r["id"] for r in rows} == {r["id"] for r in clean} - set(expected)
    assert f"{len(expected)} bad row(s) skipped" in report.summary()
    assert all(valid_spec(cell) is None for cell in BAD_CELLS)


@pytest.mark.slow
@TINY
def test_train_reports_each_bad_row_and_the_tiny_model_is_built(bad_dataset, tiny_model, tmp_path, caplog):
    """The run's hand-off: data_report.json names each row with its file and reason, and each is logged."""
    import logging

    from numerical3d.training.run import build_trainer
    from numerical3d.training.tiny import tiny_model_for

    from .conftest import tiny_config

    folder, expected = bad_dataset
    with caplog.at_level(logging.WARNING, logger="numerical3d.training.run"):
        build_trainer(tiny_config(tiny_model, max_steps=1), str(folder), tmp_path / "run")
    report = json.loads((tmp_path / "run" / "data_report.json").read_text())
    assert {b["id"]: b["file"] for b in report["bad"]} == {i: str(folder / train_shard(folder)) for i in expected}
    for i in expected:
        assert f"skipped row {i} of {folder / train_shard(folder)}" in caplog.text
    assert (tiny_model_for(tmp_path / "tiny", str(folder), "train") / "config.json").is_file()
