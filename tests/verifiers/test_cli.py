"""End-to-end: `numerical3d reward` on JSON lines and `numerical3d plot-snra`."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from numerical3d import verifiers as V
from numerical3d.cli import app

runner = CliRunner()


def _lines(specs_and_completions) -> str:
    return "\n".join(json.dumps({"verifier": s, "completion": c}) for s, c in specs_and_completions) + "\n"


def test_reward_reads_a_file_and_writes_json_lines(tmp_path):
    rows = [
        (V.numeric_spec(1.5, "m"), "<think>x</think><answer>150 cm</answer>"),
        (V.count_spec(3), "four"),
        (V.choice_spec("A", ["x", "y"]), "<think></think><answer>B</answer>"),
    ]
    src = tmp_path / "in.jsonl"
    src.write_text(_lines(rows) + "\n")  # a blank line is skipped
    res = runner.invoke(app, ["reward", str(src), "--k", "10"])
    assert res.exit_code == 0, res.output
    out = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(out) == 3
    assert out[0] == {"error": 0.0, "score": None, "format_ok": True, "accuracy_reward": 1.0, "reward": 1.0,
                      "parsed": 1.5}
    expected = V.verify(rows[1][0], rows[1][1], 10.0)
    assert out[1]["score"] == pytest.approx(expected.score) and out[1]["format_ok"] is False
    assert out[1]["reward"] == pytest.approx(expected.reward)
    assert out[2]["score"] == 0.0 and out[2]["reward"] == pytest.approx(0.9 * out[2]["accuracy_reward"] + 0.1)


def test_reward_from_stdin_with_schedule_and_ids(tmp_path):
    row = {"id": "q1", "verifier": V.numeric_spec(2.0, "m"), "completion": "2.5"}
    res = runner.invoke(app, ["reward", "--step", "50", "--total-steps", "100", "--out", str(tmp_path / "o.jsonl")],
                        input=json.dumps(row) + "\n")
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "o.jsonl").read_text())
    assert out["id"] == "q1"
    assert out["accuracy_reward"] == pytest.approx(V.snra(50.5, 0.0625))  # k(T/2) = 50.5
    linear = runner.invoke(app, ["reward", "--step", "0", "--total-steps", "10", "--schedule", "linear"],
                           input=json.dumps(row))
    assert json.loads(linear.stdout)["accuracy_reward"] == pytest.approx(V.snra(1.0, 0.0625))


def test_reward_invalid_spec_names_line_and_field(tmp_path):
    src = tmp_path / "bad.jsonl"
    src.write_text(_lines([(V.count_spec(1), "1")]) + json.dumps({"verifier": {"kind": "count", "version": 1,
                                                                              "answer": -2}, "completion": "1"}))
    res = runner.invoke(app, ["reward", str(src), "--k", "1"])
    assert res.exit_code == 2
    assert "bad.jsonl:2" in res.stderr and "'answer'" in res.stderr


@pytest.mark.parametrize("payload, message", [("{not json", "not valid JSON"), ('{"verifier": {}}', "completion")])
def test_reward_malformed_lines(payload, message):
    res = runner.invoke(app, ["reward", "--k", "1"], input=payload)
    assert res.exit_code == 2 and message in res.stderr


def test_reward_needs_a_sharpness():
    res = runner.invoke(app, ["reward"], input="")
    assert res.exit_code != 0
    res = runner.invoke(app, ["reward", "--k", "1", "--step", "3"], input="")
    assert res.exit_code != 0


def test_plot_snra_writes_a_png(tmp_path):
    out = tmp_path / "fig" / "snra.png"
    res = runner.invoke(app, ["plot-snra", "--out", str(out), "--points", "0,0.5,1"])
    assert res.exit_code == 0, res.output
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert not list(out.parent.glob("*.tmp*"))
    bad = runner.invoke(app, ["plot-snra", "--out", str(out), "--points", "0,2"])
    assert bad.exit_code != 0


def test_reward_scores_the_good_lines_around_a_bad_one_and_reads_a_missing_version_as_current(cli, tmp_path):
    unversioned = {k: v for k, v in V.numeric_spec(2.0, "m").items() if k != "version"}
    src = tmp_path / "mixed.jsonl"
    src.write_text("\n".join([
        json.dumps({"id": "a", "verifier": unversioned, "completion": "<think></think><answer>2 m</answer>"}),
        "{not json",
        json.dumps({"id": "c", "verifier": {"kind": "count", "answer": -2}, "completion": "1"}),
        json.dumps({"id": "d", "verifier": V.count_spec(3), "completion": "<think></think><answer>3</answer>"}),
    ]) + "\n")
    res = cli("reward", src, "--k", "10")
    cli.user_error(res, f"{src}:2: not valid JSON", f"{src}:3:", "'answer'")
    assert res.returncode == 2
    out = [json.loads(line) for line in res.stdout.splitlines()]
    assert [o.get("id") for o in out] == ["a", None, "c", "d"]
    assert out[0]["reward"] == 1.0 and out[3]["reward"] == 1.0
    assert out[0]["accuracy_reward"] == 1.0 and out[0]["parsed"] == 2.0
    assert out[1] == {"line": 2, "input_error": out[1]["input_error"]} and "JSON" in out[1]["input_error"]
    assert out[2]["line"] == 3 and "answer" in out[2]["input_error"]
