"""What a first GPU launch depends on, checked on the CPU: the vLLM settings a vLLM run writes out,
the wait for a vLLM server's /health, the attention choice, LoRA with a frozen vision tower on the
tiny model, and validation's keep-best-and-last policy saving."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from numerical3d.training.config import (VLLM_CHOICES, VLLM_COLOCATE_CHOICES, VLLM_SERVER_CHOICES, CONFIG_DIR,
                                         ConfigError, LoraConfig, load_config)
from numerical3d.training.vllm_server import ServerNotReady, server_url, wait_for_health

from .conftest import TINY, tiny_config

VLLM_RECIPES = {"qwen2.5-vl-7b-vllm-colocate": VLLM_COLOCATE_CHOICES, "qwen2.5-vl-7b-vllm-server": VLLM_SERVER_CHOICES}


@pytest.mark.parametrize("name, mode_choices", VLLM_RECIPES.items())
def test_vllm_recipes_write_out_every_open_vllm_setting(name, mode_choices):
    """Each vLLM knob TRL 1.16 leaves open is in the recipe file itself, with the context length."""
    import yaml

    written = yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text())["grpo"]
    for key in [*VLLM_CHOICES, *mode_choices, "vllm_max_model_length"]:
        assert key in written, f"{name}.yaml does not write out grpo.{key}"
    cfg = load_config(name)
    assert written["vllm_max_model_length"] >= cfg.max_sequence_tokens()
    args = cfg.to_grpo_config("/tmp/out")
    assert args.vllm_importance_sampling_correction is True and args.vllm_importance_sampling_mode == "sequence_mask"
    assert args.vllm_max_model_length == written["vllm_max_model_length"]


def test_use_vllm_on_any_config_gets_the_choices_and_a_context_length():
    cfg = load_config("qwen2.5-vl-3b", {"grpo": {"use_vllm": True}})
    # 8 frames x 256 tokens + 160 text + 512 completion = 2,720, with 512 spare, rounded up to 1,024s
    assert cfg.max_sequence_tokens() == 2720 and cfg.grpo["vllm_max_model_length"] == 4096
    assert {k: cfg.grpo[k] for k in VLLM_CHOICES} == VLLM_CHOICES
    assert cfg.grpo["vllm_gpu_memory_utilization"] == 0.3 and cfg.grpo["vllm_enable_sleep_mode"] is True
    server = load_config("qwen2.5-vl-3b", {"grpo": {"use_vllm": True, "vllm_mode": "server"}})
    assert server.grpo["vllm_server_timeout"] == 1800.0 and "vllm_gpu_memory_utilization" not in server.grpo
    own = load_config("qwen2.5-vl-3b", {"grpo": {"use_vllm": True, "vllm_importance_sampling_correction": False}})
    assert own.grpo["vllm_importance_sampling_correction"] is False  # a config's own value wins
    assert "vllm_max_model_length" not in load_config("qwen2.5-vl-3b").grpo  # nothing added without vLLM
    with pytest.raises(ConfigError, match=r"vllm_max_model_length = 2048 is shorter .*\(2208 \+ 512 = 2720\)"):
        load_config("qwen2.5-vl-3b", {"grpo": {"use_vllm": True, "vllm_max_model_length": 2048}})


class _Health(BaseHTTPRequestHandler):
    """/health answers 503 until `ready_after` requests have been made, then 200."""

    ready_after = 3
    calls = 0

    def do_GET(self):  # noqa: N802 (http.server's name)
        type(self).calls += 1
        ok = self.path == "/health" and type(self).calls > type(self).ready_after
        self.send_response(200 if ok else 503)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def health_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_wait_for_health_waits_until_the_server_is_up(health_server):
    _Health.calls = 0
    said: list[str] = []
    waited = wait_for_health(health_server, timeout_s=20, interval_s=0.05, say=said.append)
    assert _Health.calls == 4 and waited < 20  # three 503s, then 200
    assert said == [f"waiting for the vLLM server at {health_server}/health (up to 20 s) ..."]
    _Health.calls = 10
    said.clear()
    wait_for_health(health_server, timeout_s=20, interval_s=0.05, say=said.append)
    assert said == []  # up at once: nothing said


def test_wait_for_health_names_the_url_when_nothing_answers(health_server):
    _Health.calls, _Health.ready_after = 0, 10**9
    try:
        with pytest.raises(ServerNotReady, match=r"/health: the vLLM server did not become healthy in 0.3 s "
                                                 r"\(last: HTTP 503\).*vllm_server_timeout"):
            wait_for_health(health_server, timeout_s=0.3, interval_s=0.05)
    finally:
        _Health.ready_after = 3
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(ServerNotReady, match=f"{closed}/health"):
        wait_for_health(closed, timeout_s=0.2, interval_s=0.05)


def test_server_url_follows_trls_settings():
    assert server_url({}) == "http://0.0.0.0:8000"
    assert server_url({"vllm_server_host": "10.0.0.2", "vllm_server_port": 8001}) == "http://10.0.0.2:8001"
    assert server_url({"vllm_server_base_url": "http://gen:9000/"}) == "http://gen:9000"


def test_attention_is_flash_where_installed_else_sdpa_said_once(monkeypatch, capsys):
    import importlib.util

    from numerical3d.training import run

    monkeypatch.setattr(run, "_attention_said", False)
    assert run.attention("eager") == "eager"
    assert run.attention(None) == ("flash_attention_2" if importlib.util.find_spec("flash_attn")
                                   and torch.cuda.is_available() else "sdpa")
    assert capsys.readouterr().out == "attention: eager (model.attn_implementation)\n"  # once per run
    monkeypatch.setattr(run, "_attention_said", False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "flash_attn" else object())
    assert run.attention(None) == "sdpa"
    assert capsys.readouterr().out == "attention: sdpa (flash-attn not installed)\n"


def test_lora_and_freeze_vision_are_grpo_options():
    cfg = load_config("qwen2.5-vl-3b", {"model": {"lora": {"r": 8}, "freeze_vision": True}})
    lora = cfg.model.lora.peft_config()
    assert (lora.r, lora.lora_alpha) == (8, 32)
    assert "language_model" in lora.target_modules  # the vision tower's projections share the short names
    with pytest.raises(ConfigError, match="model.lora / model.freeze_vision are for trainer: grpo"):
        load_config("ablations/s0_sft", {"model": {"freeze_vision": True}})


@pytest.mark.slow
@TINY
def test_lora_with_a_frozen_vision_tower_trains_only_the_adapters(tiny_model, built_dataset, tmp_path, monkeypatch):
    """Two AP-GRPO steps of the tiny model with LoRA and `freeze_vision`: every parameter that moves
    is a LoRA adapter of the language model, the base and the vision tower stay bit for bit, the KL
    reference is the base with adapters off (no second model), and `final/` holds the adapter."""
    from numerical3d.training.run import build_trainer

    from numerical3d.training import rewards

    # Rewards with spread whatever the untrained model writes: with LoRA's B at zero the policy equals
    # the reference, so only a non-zero advantage can move anything (what moves is what this checks).
    monkeypatch.setattr(rewards.AccuracyReward, "__call__",
                        lambda self, prompts, completions, verifier, **kw: [float(i % 2) for i in range(len(completions))])
    cfg = tiny_config(tiny_model, max_steps=2, validation={"enabled": False})
    cfg.model.freeze_vision = True
    cfg.model.lora = LoraConfig(r=4, alpha=8)
    trainer = build_trainer(cfg, str(built_dataset), tmp_path / "run")
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    # q, k, v, o, gate, up, down of each of the 2 text layers, A and B
    assert len(trainable) == 2 * 7 * 2 and all(".lora_" in n and "language_model" in n for n in trainable)
    assert trainer.ref_model is None
    trainer.train()
    after = dict(trainer.model.named_parameters())
    changed = {n for n in before if not torch.equal(before[n], after[n].detach())}
    assert changed and changed <= set(trainable)
    assert any(".lora_B." in n for n in changed)  # B starts at zero: the adapter's output moved
    assert all(torch.equal(before[n], after[n].detach()) for n in before if ".visual." in n)
    trainer.save_model(str(tmp_path / "final"))
    assert json.loads((tmp_path / "final" / "adapter_config.json").read_text())["r"] == 4


@pytest.mark.slow
@TINY
def test_freeze_vision_in_full_fine_tuning_leaves_the_tower_out(tiny_model, built_dataset, tmp_path):
    from numerical3d.training.run import build_trainer

    cfg = tiny_config(tiny_model, max_steps=1, validation={"enabled": False})
    cfg.model.freeze_vision = True
    trainer = build_trainer(cfg, str(built_dataset), tmp_path / "run")
    grads = {n: p.requires_grad for n, p in trainer.model.named_parameters()}
    assert not any(g for n, g in grads.items() if ".visual." in n)
    assert all(g for n, g in grads.items() if ".visual." not in n)  # the language model trains whole


@pytest.mark.slow
@TINY
def test_validation_keeps_the_best_and_the_last_policy(tiny_model, built_dataset, tmp_path, capsys):
    """A benchmark answered at steps 1, 2 and 3: the default keeps the policies of the best step and
    of the last one, removes the other's weights but not its results, and says the disk at start."""
    from numerical3d.training.run import run_training

    from .test_vsibench import write_benchmark

    bench = write_benchmark(tmp_path / "vsibench")
    section = {"data": str(bench), "subset": 4, "seed": 0, "frames": 2, "visual": "images", "max_pixels": 56 * 56,
               "max_new_tokens": 4, "batch_size": 4}
    cfg = tiny_config(tiny_model, max_steps=3, validation={"every_steps": 1, "max_items": 2, "benchmark": section})
    out = tmp_path / "run"
    result = run_training(cfg, str(built_dataset), out)
    scores = {e["step"]: e["bench/vsibench/overall"] for e in result.log_history if "bench/vsibench/overall" in e}
    assert sorted(scores) == [1, 2, 3]
    best = max(sorted(scores), key=lambda s: scores[s])
    kept = {s for s in scores if (out / "validated" / f"step-{s}" / "model.safetensors").exists()}
    assert kept == {best, 3}
    for step in scores:
        where = out / "validated" / f"step-{step}"
        assert (where / "vsibench" / "results.json").exists()  # every step's results stay
        if step not in kept:
            assert [p.name for p in where.iterdir()] == ["vsibench"]
    size = (out / "validated" / "step-3" / "model.safetensors").stat().st_size / 1e9
    note = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("validation.benchmark"))
    assert "keeps the best and the last policy" in note and str(out / "validated") in note
    per_policy = float(note.split(" x ")[1].split(" GB")[0])
    assert per_policy == pytest.approx(size, rel=0.05, abs=0.01)  # the weights; the rest is small files


@pytest.mark.slow
@TINY
def test_server_recipe_stops_with_one_line_when_no_server_answers(tiny_model, built_dataset, tmp_path):
    """`numerical3d train` on the server recipe waits for /health before loading the policy, and
    names the URL when nothing answers within grpo.vllm_server_timeout."""
    import socket
    import subprocess
    import sys

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "server.yaml"
    config.write_text(f"base: {CONFIG_DIR / 'qwen2.5-vl-7b-vllm-server.yaml'}\n"
                      f"grpo:\n  vllm_server_port: {port}\n  vllm_server_timeout: 2\n")
    run = subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "train", "--config",
                          str(config), "--dataset", str(built_dataset), "--model", str(tiny_model), "--output",
                          str(tmp_path / "run")], capture_output=True, text=True, timeout=600)
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    assert f"waiting for the vLLM server at http://127.0.0.1:{port}/health (up to 2 s)" in run.stdout
    error = " ".join(run.stderr.split())
    assert f"error: http://127.0.0.1:{port}/health: the vLLM server did not become healthy in 2 s" in error
