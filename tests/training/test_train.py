"""Real training runs on CPU: the tiny Qwen2.5-VL on the pipeline-built dataset.

AP-GRPO and the binary-reward baseline both train for a few steps (parameters change, the ap/*
metrics are logged every step, k(t) rises with the step); with alpha 0 and no clipping the
trainer's advantages are TRL's own, bit for bit, on the same generated batch; the CLI trains with
`--preset tiny-cpu` and `numerical3d eval` grades the result.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
import torch
from numerical3d import verifiers
from typer.testing import CliRunner

from numerical3d.training.config import PRESETS, load_config
from numerical3d.training.diagnostics import METRICS, plot_diagnostics
from numerical3d.training.run import build_trainer
from numerical3d.training.trainer import APGRPOTrainer

from .conftest import TINY, tiny_config

pytestmark = [pytest.mark.slow, TINY]


class RecordingTrainer(APGRPOTrainer):
    """Keeps TRL's advantages and the replacement for every generated batch."""

    records: list[tuple[torch.Tensor, torch.Tensor]]

    def _ap_advantages(self, trl_advantages, local_size):
        ours = super()._ap_advantages(trl_advantages, local_size)
        self.records = getattr(self, "records", []) + [(trl_advantages.clone(), ours.clone())]
        return ours


# Discrete subtasks: a sampled letter or count can be exactly right, so groups have spread (an untrained
# model's numbers are all far off and earn the same reward, which leaves every advantage at zero).
DISCRETE = {"subtasks": ["rel_distance", "rel_direction", "route_plan", "object_count"]}


def _config(model, **over):
    return tiny_config(model, **{"max_steps": 3, **over})


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
    trainer, moved, steps = _train(_config(tiny_model, data=DISCRETE), built_dataset, tmp_path / "ap")
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
    cfg = _config(tiny_model, reward={"operator": "binary"}, advantage={"mode": "grpo"}, data=DISCRETE,
                  per_device_train_batch_size=8, max_steps=3)
    trainer, moved, steps = _train(cfg, built_dataset, tmp_path / "s1")
    assert len(steps) == 3
    rewards = [e["rewards/accuracy/mean"] for e in steps]
    assert all(r in (0.0, 1.0) or 0.0 < r < 1.0 for r in rewards)
    for trl_adv, ours in trainer.records:  # plain GRPO mode = TRL's advantage (clipped at c)
        torch.testing.assert_close(ours, trl_adv.clamp(-1.5, 1.5), rtol=0, atol=0)
    # The binary-GRPO diagnostic is gathered beside TRL's rewards: under S1 it is the same as plain GRPO's.
    assert all(e["ap/nonzero_adv_frac_binary_grpo"] == e["ap/nonzero_adv_frac_grpo"] for e in steps)
    if any(e["ap/nonzero_adv_frac"] > 0 for e in steps):
        assert moved > 0


def test_alpha_zero_without_clip_reproduces_trl(tiny_model, built_dataset, tmp_path):
    cfg = _config(tiny_model, advantage={"mode": "ap", "alpha": 0.0, "clip": None}, data=DISCRETE,
                  per_device_train_batch_size=8, max_steps=2)
    trainer, _, _ = _train(cfg, built_dataset, tmp_path / "a0")
    assert len(trainer.records) == 2
    for trl_adv, ours in trainer.records:
        torch.testing.assert_close(ours, trl_adv, rtol=0, atol=0)
    assert any(bool((trl != 0).any()) for trl, _ in trainer.records)


def test_cli_train_tiny_cpu_then_eval(tiny_model, built_dataset, tmp_path):
    from numerical3d.cli import app

    runner = CliRunner()
    out = tmp_path / "run"
    res = runner.invoke(app, ["train", "--config", "qwen2.5-vl-3b", "--preset", "tiny-cpu", "--dataset",
                              str(built_dataset), "--model", str(tiny_model), "--output", str(out), "--max-steps", "2"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    history = json.loads((out / "log_history.json").read_text())
    assert [e["step"] for e in history if "ap/k" in e] == [1, 2]
    assert (out / "diagnostics.png").stat().st_size > 1000
    assert (out / "final" / "config.json").exists()
    data_report = json.loads((out / "data_report.json").read_text())
    results = json.loads((out / "results.json").read_text())
    validated = [e for e in history if "val/accuracy" in e]
    assert [e["step"] for e in validated] == [2]  # tiny-cpu validates every 2 steps; the last step once
    assert not any(k.startswith("ap/") or k == "loss" for e in validated for k in e)  # its own entry
    assert results["accuracy"] == validated[-1]["val/accuracy"] and 0.0 <= results["accuracy"] <= 1.0
    assert results["t_conv"] == 2 and results["steps"] == 2
    adv = [e["ap/adv_var"] for e in history if "ap/adv_var" in e]
    assert results["adv_var_mean"] == pytest.approx(sum(adv) / len(adv))
    assert data_report["kept"] == 8 and data_report["bad"] == [] and "8 of" in res.output.replace("\n", " ")
    config = json.loads((out / "train_config.json").read_text())
    assert config["beta"] == 0.02 and config["loss_type"] == "grpo" and config["advantage"]["alpha"] == 1.0
    assert config["reward"]["profile"] == "paper"  # the paper run's verifier parameters, recorded

    res = runner.invoke(app, ["eval", "--model", str(out / "final"), "--dataset", str(built_dataset), "--max-items",
                              "12", "--max-new-tokens", "24", "--max-frames", "2", "--max-pixels", "3136", "--json"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    report = json.loads((out / "final" / "eval" / "report.json").read_text())
    assert json.loads(next(line for line in res.stdout.splitlines() if line.startswith("{"))) == report
    from numerical3d.training.evaluate import VSI_QUESTION_TYPES

    vsi = {t: v for t, v in report["tasks"].items() if t in VSI_QUESTION_TYPES}
    assert vsi and report["overall_over"] == "vsibench_tasks"
    assert sum(t["n"] for t in report["tasks"].values()) == 12 == report["overall"]["n"] + report["others"]["n"]
    assert report["overall"]["n"] == sum(t["n"] for t in vsi.values())  # overall: VSI-Bench's question types only
    assert report["overall"]["vsi"] == pytest.approx(sum(t["vsi"] for t in vsi.values()) / len(vsi))
    for t in report["tasks"].values():
        assert 0.0 <= t["vsi"] <= 1.0 and 0.0 <= t["reward"] <= 1.0
    questions = (out / "final" / "eval" / "vsibench_questions.jsonl").read_text().splitlines()
    assert len(questions) == 12
    assert {"question_type", "question", "ground_truth", "options", "scene_name"} <= set(json.loads(questions[0]))
    predictions = (out / "final" / "eval" / "predictions.jsonl").read_text().splitlines()
    assert len(predictions) == 12
    # The file eval writes is the file score reads: scored as is, through the command line.
    scored = subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "score",
                             str(out / "final" / "eval" / "predictions.jsonl"), "--dataset", str(built_dataset),
                             "--split", "validation", "--out", str(tmp_path / "scores.json")],
                            capture_output=True, text=True, timeout=300)
    assert scored.returncode == 0, scored.stderr
    scores = json.loads((tmp_path / "scores.json").read_text())
    assert scores["predictions"] == 12 and scores["unknown_ids"] == [] and scores["skipped"] == []
    assert scores["missing"] == scores["items"] - 12


def test_paper_config_learns_at_lr_1e6_with_fp32_master_weights(tiny_model, built_dataset, tmp_path):
    """The 7B recipe (bf16 compute, lr 1e-6) with the tiny model: bf16 weights would round most
    updates away; fp32 master weights under bf16 autocast change (nearly) every weight."""
    from safetensors.torch import load_file

    over = json.loads(json.dumps(PRESETS["tiny-cpu"]))
    over.update(learning_rate=1e-6, max_steps=4, model={"name_or_path": str(tiny_model)})
    cfg = load_config("qwen2.5-vl-7b", over)
    assert cfg.model.dtype == "bfloat16"  # the preset keeps the config's precision
    trainer = build_trainer(cfg, str(built_dataset), tmp_path / "run")
    assert trainer.accelerator.mixed_precision == "bf16"
    assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}
    assert {p.dtype for p in trainer.ref_model.parameters()} == {torch.bfloat16}  # forward only: no master copy
    seen = []
    layer = trainer.model.model.language_model.layers[0].mlp
    handle = layer.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    trainer.train()
    handle.remove()
    assert torch.bfloat16 in seen  # computed under bf16 autocast
    trainer.save_model(str(tmp_path / "final"))
    before = load_file(str(tiny_model / "model.safetensors"))
    after = load_file(str(tmp_path / "final" / "model.safetensors"))
    changed = sum((before[k] != after[k]).sum().item() for k in before)
    total = sum(v.numel() for v in before.values())
    assert {v.dtype for v in after.values()} == {torch.float32}
    assert changed / total >= 0.5, changed / total


def test_resume_checkpoint_limit_and_live_logs(tiny_model, built_dataset, tmp_path):
    from transformers import TrainerCallback

    from numerical3d.cli import app
    from numerical3d.training.run import run_training

    class Live(TrainerCallback):
        steps: list[int] = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "ap/k" in logs:
                Live.steps.append(state.global_step)

    out = tmp_path / "run"
    cfg = _config(tiny_model, max_steps=2, validation={"every_steps": 0, "max_items": 4},
                  grpo={"save_strategy": "steps", "save_steps": 1, "save_total_limit": 1})
    trainer = build_trainer(cfg, str(built_dataset), out)
    trainer.add_callback(Live())
    trainer.train()
    assert Live.steps == [1, 2]  # a log per step while training, as report_to loggers receive them
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2"]  # the limit pruned checkpoint-1

    more = _config(tiny_model, max_steps=3, validation={"every_steps": 0, "max_items": 4},
                   grpo={"save_strategy": "no"})
    result = run_training(more, str(built_dataset), out, resume=True)
    ap_steps = [e["step"] for e in result.log_history if "ap/k" in e]
    assert ap_steps == [1, 2, 3]  # steps 1-2 restored from the checkpoint's state, step 3 trained now
    assert result.results.steps == 3 and result.results.t_conv == 3

    runner = CliRunner()
    res = runner.invoke(app, ["train", "--config", "qwen2.5-vl-3b", "--preset", "tiny-cpu", "--dataset",
                              str(built_dataset), "--model", str(tiny_model), "--output", str(tmp_path / "none"),
                              "--resume"])
    assert res.exit_code == 2 and "no checkpoint-* folder to resume from" in res.output
    if importlib.util.find_spec("tensorboard") is not None:
        return  # the message below is for a machine without it (this one has no logger package installed)
    res = runner.invoke(app, ["train", "--config", "qwen2.5-vl-3b", "--preset", "tiny-cpu", "--dataset",
                              str(built_dataset), "--output", str(tmp_path / "tb"), "--report-to", "tensorboard"])
    assert res.exit_code == 2 and "tensorboard not installed" in res.output and ".[tensorboard]" in res.output


def test_s0_sft_trains_on_canonical_completions(tiny_model, built_dataset, tmp_path):
    """`ablations/s0_sft` through the CLI: TRL's SFTTrainer on the items' canonical completions,
    fp32 master weights, a finite loss every logged step, every run-folder file but the AP plot."""
    import math

    from safetensors.torch import load_file

    from numerical3d.training.cli import app
    from numerical3d.training.data import prompt_dataset
    from numerical3d.training.rewards import as_spec

    rows, _ = prompt_dataset(str(built_dataset), load_config("ablations/s0_sft").data.model_copy(
        update={"max_items": 3, "max_frames": 2, "max_pixels": 3136}), completions=True)
    for row, item in zip(rows, rows.with_format(None)):
        assert set(row) == {"prompt", "images", "completion"} and len(row["images"]) == len(item["frames"][:2])
        text = row["completion"][0]["content"][0]["text"]
        assert row["completion"][0]["role"] == "assistant"
        assert text == verifiers.canonical_completion(as_spec(item["verifier"]))
        assert verifiers.verify(as_spec(item["verifier"]), text, 100.0).accuracy_reward == 1.0

    out = tmp_path / "s0"
    res = CliRunner().invoke(app, ["train", "--config", "ablations/s0_sft", "--preset", "tiny-cpu", "--dataset",
                                   str(built_dataset), "--model", str(tiny_model), "--output", str(out),
                                   "--max-steps", "3"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    history = json.loads((out / "log_history.json").read_text())
    losses = [e["loss"] for e in history if "loss" in e]
    assert losses and all(math.isfinite(x) and x > 0 for x in losses)
    assert [e["step"] for e in history if "loss" in e] == [1, 2, 3]  # validating at step 2 keeps its loss
    assert max(e["step"] for e in history) == 3 and not any(k.startswith("ap/") for e in history for k in e)
    before = load_file(str(tiny_model / "model.safetensors"))
    after = load_file(str(out / "final" / "model.safetensors"))
    assert {v.dtype for v in after.values()} == {torch.float32}  # fp32 master weights, bf16 only in autocast
    changed = sum((before[k] != after[k]).sum().item() for k in before)
    assert changed / sum(v.numel() for v in before.values()) >= 0.5
    config = json.loads((out / "train_config.json").read_text())
    assert config["trainer"] == "sft" and config["model"]["dtype"] == "bfloat16"
    results = json.loads((out / "results.json").read_text())
    assert results["steps"] == 3 and results["adv_var_mean"] is None and 0.0 <= results["accuracy"] <= 1.0
    assert (out / "final" / "config.json").exists() and (out / "data_report.json").exists()
    assert not (out / "diagnostics.png").exists()


def test_eval_vllm_backend_is_the_benchmarks_backend(tiny_model, built_dataset, tmp_path, monkeypatch):
    """`eval --backend vllm` generates through `VLLMBackend` (stood in for: vllm needs CUDA) with
    training's frames as images, and grades what it returns like the transformers path."""
    from numerical3d.training.benchmarks.backends import VLLMBackend
    from numerical3d.training.cli import app
    from numerical3d.training.data import load_items
    from numerical3d.training.rewards import as_spec

    from numerical3d.training.config import DataConfig

    specs = {r["id"]: as_spec(r["verifier"]) for r in load_items(str(built_dataset), DataConfig(split="validation"))}
    loaded = []

    class Engine:
        def generate(self, prompts):
            assert all(p.frames and p.frames[0].ndim == 3 and p.frames[0].size <= 3136 * 3 for p in prompts)
            return [verifiers.canonical_completion(specs[p.id]) for p in prompts]

    monkeypatch.setattr(VLLMBackend, "load", classmethod(lambda cls, path, **kw: loaded.append((path, kw)) or Engine()))
    out = tmp_path / "eval"
    res = CliRunner().invoke(app, ["eval", "--model", str(tiny_model), "--dataset", str(built_dataset), "--output",
                                   str(out), "--max-items", "6", "--max-new-tokens", "24", "--max-frames", "2",
                                   "--max-pixels", "3136", "--backend", "vllm", "--json"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert loaded == [(str(tiny_model), {"visual": "images", "max_new_tokens": 24, "max_images": 2})]
    report = json.loads((out / "report.json").read_text())
    assert sum(t["n"] for t in report["tasks"].values()) == 6
    assert all(t["reward"] == 1.0 and t["vsi"] == 1.0 and t["format_ok"] == 1.0 for t in report["tasks"].values())


def test_vsibench_during_training_gives_t_conv_and_keeps_the_policies(tiny_model, built_dataset, tmp_path):
    """VSI-Bench in its released layout answered by the live policy every 2 steps of a 4-step run:
    the same stratified subset each time, `bench/vsibench/*` logged at steps 2 and 4, T_conv taken
    from that curve, and (`keep_models: all`) the policies of those steps kept although `save_total_limit` 1 prunes the
    checkpoints; a kept policy, loaded from disk by `benchmark run vsibench`, answers as it did live."""
    from numerical3d.training.benchmark_subset import stratified_subset
    from numerical3d.training.benchmarks.vsibench import load_questions
    from numerical3d.training.run import run_training

    from .test_vsibench import CASES, write_benchmark

    bench = write_benchmark(tmp_path / "vsibench")
    section = {"data": str(bench), "subset": 10, "seed": 3, "frames": 2, "visual": "images", "max_pixels": 56 * 56,
               "max_new_tokens": 6, "batch_size": 4, "keep_models": "all"}
    cfg = tiny_config(tiny_model, max_steps=4, validation={"every_steps": 2, "max_items": 4, "benchmark": section},
                      grpo={"save_strategy": "steps", "save_steps": 1, "save_total_limit": 1})
    cfg.model.dtype = "float32"  # no autocast: the live greedy answers are comparable with an fp32 reload
    out = tmp_path / "run"
    result = run_training(cfg, str(built_dataset), out)

    logged = [e for e in result.log_history if "bench/vsibench/overall" in e]
    assert [e["step"] for e in logged] == [2, 4]
    for entry in logged:
        assert not any(k.startswith("ap/") for k in entry) and 0.0 <= entry["bench/vsibench/overall"] <= 100.0
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-4"]  # the limit pruned 1-3
    subset = stratified_subset(load_questions(bench / "test-00000-of-00001.parquet"), 10, 3)
    assert len({q.question_type for q in subset}) == 10  # every type and rel-direction level of the fixture
    for step, entry in zip((2, 4), logged):
        where = out / "validated" / f"step-{step}"
        assert (where / "model.safetensors").exists() and (where / "processor_config.json").exists()
        answers = [json.loads(x) for x in (where / "vsibench" / "predictions.jsonl").read_text().splitlines()]
        assert [a["id"] for a in answers] == [q.id for q in subset]  # the same questions every step
        scores = json.loads((where / "vsibench" / "results.json").read_text())
        assert scores["overall"] == entry["bench/vsibench/overall"] and scores["questions"] == 10
        assert scores["protocol"]["subset"] == 10 and scores["protocol"]["model"] == str(where)
    from safetensors.torch import load_file

    kept = [load_file(str(out / "validated" / f"step-{s}" / "model.safetensors")) for s in (2, 4)]
    assert any(not torch.equal(kept[0][k], kept[1][k]) for k in kept[0])  # each step's own policy
    points = [(e["step"], e["bench/vsibench/overall"]) for e in logged]
    best = max(v for _, v in points)
    results = json.loads((out / "results.json").read_text())
    assert results["t_conv_over"] == "vsibench"
    assert results["t_conv"] == min(s for s, v in points if v >= 0.95 * best) == result.results.benchmark["t_conv"]
    assert [p["step"] for p in results["benchmark"]["points"]] == [2, 4]

    # later evaluation: the kept step-2 policy through the command line, loaded from disk
    import subprocess
    import sys

    again = tmp_path / "again"
    run = subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "benchmark", "run",
                          "vsibench", "--data", str(bench), "--model", str(out / "validated" / "step-2"),
                          "--out", str(again), "--frames", "2", "--visual", "images", "--max-pixels", str(56 * 56),
                          "--prompt", "reasoning", "--max-new-tokens", "6", "--batch-size", "4"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    offline = {json.loads(x)["id"]: json.loads(x)["prediction"]
               for x in (again / "predictions.jsonl").read_text().splitlines()}
    assert len(offline) == len(CASES)
    live = out / "validated" / "step-2" / "vsibench" / "predictions.jsonl"
    assert {a["id"]: a["prediction"] for a in map(json.loads, live.read_text().splitlines())} == \
        {q.id: offline[q.id] for q in subset}
