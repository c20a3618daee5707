"""The training commands at the console script's root: the `--preset tiny-cpu` dataset is the
pipeline's job, handed to training's `train` by the root (training never imports the pipeline)."""

from __future__ import annotations

import importlib.util

import pytest
from typer.testing import CliRunner

from numerical3d.training.cli import app

TINY_CPU = ["train", "--config", "qwen2.5-vl-3b", "--preset", "tiny-cpu"]


def test_tiny_cpu_without_dataset_asks_the_root_to_build_it(monkeypatch, tmp_path):
    from numerical3d import cli as numerical3d
    from numerical3d.training.data import DatasetError

    asked = []

    def build(output):
        asked.append(output)
        raise DatasetError(f"{output}: the tiny build produced no train items")

    monkeypatch.setattr(numerical3d, "tiny_dataset", build)
    res = CliRunner().invoke(numerical3d.app, [*TINY_CPU, "--output", str(tmp_path)])
    assert res.exit_code == 2 and asked == [tmp_path]
    assert "produced no train items" in " ".join(res.output.split())


def test_training_group_alone_names_what_is_missing(tmp_path):
    from numerical3d.training.cli import app

    res = CliRunner().invoke(app, [*TINY_CPU, "--output", str(tmp_path)])
    assert res.exit_code == 2
    assert "--preset tiny-cpu builds its dataset with the pipeline" in " ".join(res.output.split())
    res = CliRunner().invoke(app, ["train", "--config", "qwen2.5-vl-3b", "--output", str(tmp_path)])
    assert res.exit_code == 2 and "no dataset: pass --dataset" in " ".join(res.output.split())


def test_tiny_cpu_needs_no_config(cli, tmp_path):
    """`--preset tiny-cpu` alone resolves its config (the run then stops at the missing dataset, named)."""
    missing = tmp_path / "no-such-dataset"
    res = cli("train", "--preset", "tiny-cpu", "--dataset", missing, "--output", tmp_path / "run", timeout=300)
    text = cli.user_error(res, str(missing))
    assert res.returncode == 2 and "--config" not in text
    res = cli("train", "--output", tmp_path / "run")
    cli.user_error(res, "--config", "--preset")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_eval_vllm_backend_without_vllm_is_one_line_error(tmp_path):
    res = CliRunner().invoke(app, ["eval", "--model", str(tmp_path / "m"), "--dataset", str(tmp_path / "d"),
                                   "--backend", "vllm"])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit)  # a message, no traceback
    assert "needs the vllm package, which is not installed" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(app, ["eval", "--model", "m", "--dataset", "d", "--backend", "sglang"])
    assert res.exit_code == 2 and "unknown backend 'sglang'" in res.output


@pytest.mark.parametrize("kmax", [25.0, 400.0])
def test_reward_calibrates_phi_at_kmax(kmax):
    """`reward --kmax K` scores a complete failure of a discrete item 0.01 at k = K (Phi calibrated
    at K, as a training run with reward.kmax K), through the console script in a subprocess."""
    import json
    import subprocess
    import sys

    line = json.dumps({"verifier": {"kind": "choice", "answer": "B", "options": ["chair", "table", "sofa"]},
                       "completion": "<think>x</think><answer>A</answer>"})

    def score(*args: str) -> float:
        run = subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "reward", *args],
                             input=line + "\n", capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout)["accuracy_reward"]

    assert score("--k", f"{kmax:g}", "--kmax", f"{kmax:g}") == pytest.approx(0.01)
    # calibrated at the default 100 instead, the same failure keeps 2 / (1 + 199^(K/100)) at k = K
    assert score("--k", f"{kmax:g}") == pytest.approx(2 / (1 + 199 ** (kmax / 100)))
