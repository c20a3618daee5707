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


def test_train_options_are_the_fields_of_train_options_and_set_the_config_keys_they_name(monkeypatch, tmp_path):
    from pathlib import Path

    import numerical3d.training.cli as training_cli
    from numerical3d.training.cli import TrainOptions

    res = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "400"})
    for name, field in TrainOptions.model_fields.items():
        flag = (field.json_schema_extra or {}).get("flags", [f"--{name.replace('_', '-')}"])[0]
        assert flag in res.output and field.description.split(" (")[0] in " ".join(res.output.split())
    given = TrainOptions(max_steps=3, use_vllm=True, vllm_mode="server", deepspeed=Path("z3.json"), visual="video",
                         save_total_limit=2, report_to="none", gpus=4)
    assert given.overrides({"report_to": lambda v: [v]}) == {
        "max_steps": 3, "grpo": {"use_vllm": True, "vllm_mode": "server", "deepspeed": "z3.json",
                                 "save_total_limit": 2, "report_to": ["none"]}, "data": {"visual": "video"}}
    assert TrainOptions(vllm_mode="server").overrides({}) == {}  # the mode goes only with --use-vllm

    seen = []
    monkeypatch.setattr(training_cli, "_plan", lambda config, overrides, *rest: seen.append((config, overrides)))
    res = CliRunner().invoke(app, [*TINY_CPU, "--plan", "--max-steps", "7", "--visual", "video"])
    assert res.exit_code == 0, res.output
    (config, overrides), = seen
    assert config == "qwen2.5-vl-3b" and overrides["max_steps"] == 7 and overrides["data"]["visual"] == "video"
    assert overrides["data"]["max_frames"] == 2  # the preset's keys beside the options'
