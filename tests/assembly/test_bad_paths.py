"""A path the user gave that cannot be written or read ends every command with one line naming it,
no traceback: an output on an existing file, under a file, on a read-only file system; a missing
model. And `browse` draws what `assemble` just wrote."""

from __future__ import annotations

import json
import subprocess

import pytest


def one_line(res: subprocess.CompletedProcess, *names: str) -> str:
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode != 0 and "Traceback" not in res.stderr + res.stdout, res.stderr[-3000:]
    assert len(lines) == 1, lines
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("keep me\n")
    yield path
    assert path.read_text() == "keep me\n"


def test_outputs_on_or_under_a_file(built, cli, tmp_path, a_file):
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"id": "x", "prediction": "1"}) + "\n")
    res = cli("plot-snra", "--out", a_file / "snra.png")
    assert res.returncode == 1
    one_line(res, str(a_file))
    res = cli("synth", a_file, "-n", "1", "--frames", "2")  # after its progress bar
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines()[-1] == f"error: {a_file}/scans: Not a directory"
    res = cli("score", preds, "--dataset", built.dir, "--out", a_file / "scores.json")
    assert res.returncode == 1 and f"error: {a_file}: " in res.stderr and "Traceback" not in res.stderr


def test_eval_of_a_missing_model_is_one_line(cli, built, tmp_path):
    res = cli("eval", "--model", tmp_path / "runs" / "missing", "--dataset", built.dir, "--split", "train",
              "--output", tmp_path / "ev")
    assert res.returncode == 2 and "Traceback" not in res.stderr  # the split's loading bars come first
    assert res.stderr.strip().splitlines()[-1].startswith(f"error: --model {tmp_path / 'runs' / 'missing'}: "
                                                          "no such model folder")
    assert not (tmp_path / "ev").exists()


@pytest.mark.slow
def test_browse_draws_what_assemble_wrote(cli, tmp_path, a_file):
    assert cli("synth", "sc", "-n", "1", "--frames", "8", "--width", "160", "--height", "120").returncode == 0
    assert cli("questions", "synthetic", "sc", "--out", "items.jsonl").returncode == 0
    res = cli("assemble", "items.jsonl", "--out", "ds", "--config", "demo", "--source-root", "synthetic=sc")
    assert res.returncode == 0, res.stderr[-3000:]
    res = cli("browse", "ds", "--out", "site")
    assert res.returncode == 0, res.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").is_file() and list((tmp_path / "site").rglob("*.svg"))
    for out, code in ((a_file, 5), (a_file / "site", 1)):  # 5: the output guard refuses a file as the site folder
        res = cli("browse", "ds", "--out", out)
        assert res.returncode == code
        one_line(res, str(a_file))


def test_questions_with_a_missing_template_folder_is_refused_at_once(cli, tmp_path):
    res = cli("questions", "synthetic", tmp_path, "--out", tmp_path / "q.jsonl", "--templates", tmp_path / "mine")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "--templates" in res.stderr and "template folder does not exist" in res.stderr
    assert not (tmp_path / "q.jsonl").exists()


@pytest.fixture
def read_only(tmp_path):
    """A folder on a read-only bind mount (root ignores permission bits, not a read-only mount)."""
    src, ro = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    ro.mkdir()
    if subprocess.run(["mount", "--bind", str(src), str(ro)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here (not root, or a container without CAP_SYS_ADMIN)")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True, capture_output=True)
        yield ro
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=False)
    assert list(src.iterdir()) == []


def test_outputs_on_a_read_only_file_system(cli, read_only):
    res = cli("build", "--engine", "plain", "--out", read_only / "ds")
    assert res.returncode == 5
    one_line(res, f"{read_only / 'ds'}: cannot write in {read_only}")
    res = cli("plot-snra", "--out", read_only / "snra.png")
    assert res.returncode == 1
    one_line(res, str(read_only), "Read-only file system")
