"""`numerical3d questions`: writes JSON lines with the required fields and prints counts and drop reasons."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from numerical3d.pipeline.cli import app

FIXTURE = Path(__file__).parent / "data" / "vsi_590k_sample.jsonl"


def test_questions_on_meta_info(tmp_path, meta_scenes):
    meta = meta_scenes[0].meta["file"]
    out = tmp_path / "items.jsonl"
    args = ["questions", "vsi-meta", meta, "--out", str(out), "--subtasks", "object_count,abs_distance",
            "--seed", "3", "--max-per-subtask", "2"]
    res = CliRunner().invoke(app, args, terminal_width=200)
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and {r["subtask"] for r in rows} == {"object_count", "abs_distance"}
    for r in rows:
        assert {"id", "scene_id", "subtask", "question", "answer", "verifier"} <= set(r)
    assert "object_count" in res.output and "count_below_min" in res.output
    assert f"{len(rows)} items" in res.output
    res2 = CliRunner().invoke(app, args, terminal_width=200)
    assert out.read_text().splitlines() == [json.dumps(r, sort_keys=True, ensure_ascii=False) for r in rows]
    assert res2.exit_code == 0


def test_questions_rejects_unknown_subtask(tmp_path, meta_scenes):
    res = CliRunner().invoke(app, ["questions", "vsi-meta", meta_scenes[0].meta["file"], "--out",
                                   str(tmp_path / "x.jsonl"), "--subtasks", "nonsense"])
    assert res.exit_code != 0 and "nonsense" in res.output
    assert not (tmp_path / "x.jsonl").exists()


def test_questions_vsi590k(tmp_path):
    out = tmp_path / "v.jsonl"
    res = CliRunner().invoke(app, ["questions", "vsi590k", str(FIXTURE), "--out", str(out)], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert len(out.read_text().splitlines()) == 14
    assert "unknown question_type 'route_plan'" in res.output and "line 19" in res.output
