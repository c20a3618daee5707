"""Everyday mistakes with the dataset commands, through the real console script: a non-zero exit,
one short message naming the file and the field, no traceback."""

from __future__ import annotations

import json
import os
import subprocess

import pytest


def test_score_of_a_split_the_dataset_lacks(built, cli, tmp_path):
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"id": "x", "prediction": "1"}) + "\n")
    res = cli("score", preds, "--dataset", built.dir, "--split", "validation")
    text = cli.user_error(res, str(built.dir), "'validation'", "--split", "train")
    assert res.returncode == 2 and len(text) < 400
    assert not preds.with_suffix(".scores.json").exists()


def test_score_of_a_folder_that_is_not_a_finished_build(cli, tmp_path):
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"id": "x", "prediction": "1"}) + "\n")
    (tmp_path / "empty").mkdir()
    res = cli("score", preds, "--dataset", tmp_path / "empty")
    cli.user_error(res, str(tmp_path / "empty"), "missing manifest.json")
    assert res.returncode == 2


def test_score_of_a_malformed_predictions_file(built, cli, tmp_path):
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"id": "a", "prediction": "1"}\n{"id": "b", "prediction": \n')
    res = cli("score", preds, "--dataset", built.dir)
    cli.user_error(res, f"{preds}:2", "not valid JSON")
    assert res.returncode == 2


def test_assemble_with_a_negative_total_blames_the_option(cli, tmp_path):
    items = tmp_path / "items.jsonl"
    items.write_text("")
    res = cli("assemble", items, "--out", tmp_path / "out", "--config", "demo", "--total", "-5")
    text = cli.user_error(res, "--total", "total = -5", "greater than or equal to 1")
    assert "demo.yaml" not in text


@pytest.mark.parametrize("env", [{"HF_HUB_OFFLINE": "1"}, {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"}],
                         ids=["offline", "unreachable"])
def test_publish_without_network_is_one_line(built, cli, env):
    res = cli("publish", built.dir, "--repo-id", "org/name", env={"HF_TOKEN": "hf_test_token", **env}, timeout=120)
    text = cli.user_error(res, "publish failed", str(built.dir), "org/name")
    assert res.returncode == 1
    assert ("HF_HUB_OFFLINE" in text) if env["HF_HUB_OFFLINE"] == "1" else ("127.0.0.1:9" in text)
    assert len(res.stdout.strip().splitlines()) + len(res.stderr.strip().splitlines()) <= 3


def test_tables_are_whole_when_piped(built, cli, tmp_path):
    """With no terminal at all (stdin, stdout and stderr not ttys) rich would cut tables at 80 columns."""
    from numerical3d.pipeline.shards import read_items

    subtasks = sorted({i.subtask for i in read_items(built.dir)})
    assert any(len(s) > 8 for s in subtasks)
    preds = tmp_path / "preds.jsonl"
    preds.write_text("")
    res = subprocess.run(["numerical3d", "score", str(preds), "--dataset", str(built.dir)], cwd=tmp_path,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={k: v for k, v in os.environ.items() if k != "COLUMNS"}, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "…" not in res.stdout
    for name in subtasks:
        assert f" {name} " in res.stdout, name
