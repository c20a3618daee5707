"""Real training runs on CPU: the tiny Qwen2.5-VL on the pipeline-built dataset.

AP-GRPO and the binary-reward baseline both train for a few steps (parameters change, the ap/*
metrics are logged every step, k(t) rises with the step); with alpha 0 and no clipping the
trainer's advantages are TRL's own, bit for bit, on the same generated batch; the CLI trains with
`--preset tiny-cpu` and `numerical3d eval` grades the result.
"""

from __future__ import annotations

import json

import pytest
import torch
import verifiers
from typer.testing import CliRunner

from training.config import PRESETS, config_from_dict
from training.diagnostics import METRICS, plot_diagnostics
from training.run import build_trainer
from training.trainer import APGRPOTrainer

from .conftest import TINY

pytestmark = [pytest.mark.slow, TINY]


class RecordingTrainer(APGRPOTrainer):
    """Keeps TRL's advantages and the replacement for every generated batch."""

    records: list[tuple[torch.Tensor, torch.Tensor]]

    def _ap_advantages(self, trl_advantages, local_size):
        ours = super()._ap_advantages(trl_advantages, local_size)
        self.records = getattr(self, "records", []) + [(trl_advantages.clone(), ours.clone())]
        return ours


def _config(model, **over):
    base = json.loads(json.dumps(PRESETS["tiny-cpu"]))
    base["model"]["name_or_path"] = str(model)
    base["max_steps"] = 3
    base["weight_decay"] = 0.0  # parameters may move only through gradients
    base["grpo"]["report_to"] = "none"
    for key, value in over.items():
        if isinstance(value, dict):
            base[key] = {**base.get(key, {}), **value}
        else:
            base[key] = value
    return config_from_dict(base)


def _train(cfg, dataset, out):
    trainer = build_trainer(cfg, str(dataset), out, trainer_cls=RecordingTrainer)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    moved = sum((p.detach() - before[n]).abs().sum().item() for n, p in trainer.model.named_parameters())
    steps = [e for e in trainer.state.log_history if "ap/k" in e]
    return trainer, moved, steps


def test_ap_grpo_trains_and_logs(tiny_model, built_dataset, tmp_path, monkeypatch):
    schedules = []
    real = verifiers.SigmoidSchedule.__post_init__
    monkeypatch.setattr(verifiers.SigmoidSchedule, "__post_init__", lambda self: (schedules.append(self), real(self)))
    trainer, moved, steps = _train(_config(tiny_model), built_dataset, tmp_path / "ap")
    # One schedule for the whole run, shared by the accuracy reward and the trainer's ap/k log.
    assert len(schedules) == 1 and trainer.sharpness.schedule is schedules[0]
    assert trainer.reward_funcs[0].sharpness is trainer.sharpness
    assert moved > 0
    assert [e["step"] for e in steps] == [1, 2, 3]
    for entry in steps:
        for key in METRICS:
            assert key in entry, key
        assert 0.0 <= entry["ap/collapse_frac"] <= 1.0 and 0.0 <= entry["ap/nonzero_adv_frac"] <= 1.0
    ks = [e["ap/k"] for e in steps]
    assert ks == sorted(ks) and ks[0] < ks[-1]  # the sigmoid schedule rises with global_step
    assert ks[0] == pytest.approx(trainer.sharpness(0, 3))
    assert any(e["ap/nonzero_adv_frac"] > 0 for e in steps)
    for trl_adv, ours in trainer.records:
        assert ours.abs().max() <= 1.5 + 1e-6  # clipped at c
    png = plot_diagnostics(trainer.state.log_history, tmp_path / "diag.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_binary_baseline_trains(tiny_model, built_dataset, tmp_path):
    # Discrete subtasks: a sampled letter or count can be exactly right, so groups have spread.
    cfg = _config(tiny_model, reward={"operator": "binary"}, advantage={"mode": "grpo"},
                  data={"subtasks": ["rel_distance", "rel_direction", "route_plan", "object_count"]},
                  per_device_train_batch_size=8, max_steps=3)
    trainer, moved, steps = _train(cfg, built_dataset, tmp_path / "s1")
    assert len(steps) == 3
    rewards = [e["rewards/accuracy/mean"] for e in steps]
    assert all(r in (0.0, 1.0) or 0.0 < r < 1.0 for r in rewards)
    for trl_adv, ours in trainer.records:  # plain GRPO mode = TRL's advantage (clipped at c)
        torch.testing.assert_close(ours, trl_adv.clamp(-1.5, 1.5), rtol=0, atol=0)
    if any(e["ap/nonzero_adv_frac"] > 0 for e in steps):
        assert moved > 0


def test_alpha_zero_without_clip_reproduces_trl(tiny_model, built_dataset, tmp_path):
    cfg = _config(tiny_model, advantage={"mode": "ap", "alpha": 0.0, "clip": None}, max_steps=2)
    trainer, _, _ = _train(cfg, built_dataset, tmp_path / "a0")
    assert len(trainer.records) == 2
    for trl_adv, ours in trainer.records:
        torch.testing.assert_close(ours, trl_adv, rtol=0, atol=0)
    assert any(bool((trl != 0).any()) for trl, _ in trainer.records)


def test_cli_train_tiny_cpu_then_eval(tiny_model, built_dataset, tmp_path):
    from numerical3d import app

    runner = CliRunner()
    out = tmp_path / "run"
    res = runner.invoke(app, ["train", "--config", "qwen2.5-vl-3b", "--preset", "tiny-cpu", "--dataset",
                              str(built_dataset), "--model", str(tiny_model), "--output", str(out), "--max-steps", "2"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    history = json.loads((out / "log_history.json").read_text())
    assert [e["step"] for e in history if "ap/k" in e] == [1, 2]
    assert (out / "diagnostics.png").stat().st_size > 1000
    assert (out / "final" / "config.json").exists()
    config = json.loads((out / "train_config.json").read_text())
    assert config["beta"] == 0.02 and config["loss_type"] == "grpo" and config["advantage"]["alpha"] == 1.0

    res = runner.invoke(app, ["eval", "--model", str(out / "final"), "--dataset", str(built_dataset), "--max-items",
                              "12", "--max-new-tokens", "24", "--max-frames", "2", "--max-pixels", "3136", "--json"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    report = json.loads((out / "final" / "eval" / "report.json").read_text())
    assert json.loads(next(line for line in res.stdout.splitlines() if line.startswith("{"))) == report
    assert sum(t["n"] for t in report["tasks"].values()) == 12 == report["overall"]["n"]
    for t in report["tasks"].values():
        assert 0.0 <= t["vsi"] <= 1.0 and 0.0 <= t["reward"] <= 1.0
    questions = (out / "final" / "eval" / "vsibench_questions.jsonl").read_text().splitlines()
    assert len(questions) == 12
    assert {"question_type", "question", "ground_truth", "options", "scene_name"} <= set(json.loads(questions[0]))
    predictions = (out / "final" / "eval" / "predictions.jsonl").read_text().splitlines()
    assert len(predictions) == 12
