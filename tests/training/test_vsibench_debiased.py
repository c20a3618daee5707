"""`numerical3d benchmark run vsibench-debiased` on a folder in the revised VSI-Bench release's
layout: `test_debiased.parquet` (the questions kept), `test_pruned.parquet` and `pruned_ids.txt`
(those removed) beside the `<dataset>/<scene_name>.mp4` videos. It grades the debiased table only,
exactly as VSI-Bench grades it, and adds the micro average."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from .test_vsibench import CASES, EXPECTED, write_benchmark, write_predictions_file

SMALL_VIDEOS = {"scannet/scene0011_00": 3, "arkitscenes/41069025": 3, "scannetpp/0d2ee665be": 3}


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    """The kept questions are the VSI-Bench test's CASES; the pruned ones carry other ids and a
    ground truth no prediction matches, so reading them would change every score."""
    root = write_benchmark(tmp_path_factory.mktemp("vsi-debiased"), videos=SMALL_VIDEOS,
                           table_name="test_debiased.parquet")
    pruned = pq.read_table(root / "test_debiased.parquet").to_pydict()
    pruned["id"] = [1000 + i for i in pruned["id"]]
    pruned["ground_truth"] = ["9" if o is None else "D" for o in pruned["options"]]
    pq.write_table(pa.table(pruned), root / "test_pruned.parquet")
    (root / "pruned_ids.txt").write_text("".join(f"{i}\n" for i in pruned["id"]))
    return root


def run(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "benchmark", "run",
                           *map(str, args)], capture_output=True, text=True, timeout=300)


def test_debiased_table_graded_as_vsibench_with_the_micro_average(release, tmp_path):
    preds = write_predictions_file(tmp_path / "fixed.jsonl")
    out = tmp_path / "out"
    res = run("vsibench-debiased", "--data", release, "--predictions", preds, "--out", out)
    assert res.returncode == 0, res.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["benchmark"] == "VSI-Bench-Debiased" and results["table"] == str(release / "test_debiased.parquet")
    assert {t: results[t] for t in EXPECTED} == pytest.approx(EXPECTED)
    assert results["overall"] == pytest.approx(sum(EXPECTED.values()) / 8)  # VSI-Bench's mean over types
    # every question once, from the hand scores of CASES
    assert results["overall_micro"] == pytest.approx(100 * sum(c[4] for c in CASES) / len(CASES))
    assert results["questions"] == len(CASES) and results["missing_predictions"] == 1
    assert "Avg. (micro)" in res.stdout and "(paper)" not in res.stdout
    assert (out / "vsibench-debiased.png").read_bytes()[:4] == b"\x89PNG"

    # the same table through VSI-Bench itself: the same numbers
    same = run("vsibench", "--data", release, "--table", "test_debiased.parquet", "--predictions", preds,
               "--out", tmp_path / "vsi", "--json")
    assert same.returncode == 0, same.stderr
    vsi = json.loads(same.stdout)
    assert {k: vsi[k] for k in ["overall", *EXPECTED]} == {k: results[k] for k in ["overall", *EXPECTED]}
    # without --table VSI-Bench cannot tell the release's tables apart
    assert "pass --table" in run("vsibench", "--data", release, "--predictions", preds, "--out", tmp_path / "x").stderr


def test_a_folder_without_the_debiased_table_is_named(tmp_path):
    root = write_benchmark(tmp_path / "old", videos=SMALL_VIDEOS)  # the first release: one table
    preds = write_predictions_file(tmp_path / "p.jsonl")
    res = run("vsibench-debiased", "--data", root, "--predictions", preds, "--out", tmp_path / "o")
    assert res.returncode == 2
    assert f"{root / 'test_debiased.parquet'}: not found" in res.stderr and "--table" in res.stderr
