"""The memory planner: parameter counts from the bundled architectures, DeepSpeed's formulas,
the bundled launch recipes, and the refusal of launches that cannot fit."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from numerical3d.training.config import load_config
from numerical3d.training.memory import (GiB, MODELS_DIR, Launch, LaunchRefused, model_size, plan, preflight,
                                         read_launch, visual_tokens, zero2_formula, zero2_model_states, zero3_formula)


def _hand_count(config: dict) -> tuple[int, int]:
    """(total, vision) parameters of a Qwen2.5-VL from its config.json, layer by layer."""
    h, inter, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    head = h // config["num_attention_heads"]
    kv = config["num_key_value_heads"] * head
    layer = (h * h + h) + 2 * (h * kv + kv) + h * h + 3 * h * inter + 2 * h  # q, k, v (biased), o, MLP, 2 norms
    text = v * h + config["num_hidden_layers"] * layer + h + (0 if config["tie_word_embeddings"] else v * h)
    vc = config["vision_config"]
    vh, vi = vc["hidden_size"], vc["intermediate_size"]
    patch = vc["in_chans"] * vc["temporal_patch_size"] * vc["patch_size"] ** 2 * vh  # Conv3d, no bias
    block = 2 * vh + (vh * 3 * vh + 3 * vh) + (vh * vh + vh) + 2 * (vh * vi + vi) + (vi * vh + vh)
    merged = vh * vc["spatial_merge_size"] ** 2
    merger = vh + (merged * merged + merged) + (merged * vc["out_hidden_size"] + vc["out_hidden_size"])
    vision = patch + vc["depth"] * block + merger
    return text + vision, vision


@pytest.fixture(scope="module")
def sizes():
    return {name: model_size(hub) for name, hub in (("7b", "Qwen/Qwen2.5-VL-7B-Instruct"),
                                                   ("3b", "Qwen/Qwen2.5-VL-3B-Instruct"))}


@pytest.mark.parametrize("name, billions", [("7b", 8.29), ("3b", 3.75)])
def test_parameter_counts_from_the_bundled_configs_match_a_hand_count(sizes, name, billions):
    config = json.loads((MODELS_DIR / f"qwen2.5-vl-{name}" / "config.json").read_text())
    total, vision = _hand_count(config)
    size = sizes[name]
    assert (size.total, size.vision) == (total, vision)  # the meta-device build agrees with the hand count
    assert round(size.total / 1e9, 2) == billions  # vision tower included; 3B's is 3,754,622,976
    assert size.largest_layer == config["vocab_size"] * config["hidden_size"]  # the embedding


def test_deepspeed_formulas_against_hand_arithmetic():
    p, largest = 8_292_166_656, 545_000_000
    host, gpu = zero2_formula(p, 8, 8, offload=False)
    assert gpu == 2 * p + int(18 * p / 8) and host == int(p * 4 * 8 * 1.5)  # bf16 weights, 18 bytes / 8 GPUs
    assert zero2_formula(p, 8, 8, offload=True)[1] == 2 * p
    host, gpu = zero3_formula(p, largest, 8, 8, False, False, True)
    assert gpu == 4 * largest + int(18 * p / 8) and host == int(largest * 4 * 8 * 1.5)


@pytest.mark.parametrize("offload", [False, True])
def test_our_transcription_equals_deepspeeds_estimator(offload):
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    p, largest = 3_754_622_976, 311_164_928
    assert zero2_formula(p, 8, 8, offload) == estimate_zero2_model_states_mem_needs(p, 8, 1, offload)
    assert zero2_model_states(p, 8, 8, offload) == zero2_formula(p, 8, 8, offload)
    for zero_init in (True, False):
        for offload_param in (True, False):
            args = (offload, offload_param and offload, zero_init)
            assert zero3_formula(p, largest, 8, 8, *args) == \
                tuple(int(x) for x in estimate_zero3_model_states_mem_needs(p, largest, 8, 1, *args)[:2])


@pytest.mark.parametrize("config, accelerate", [
    ("qwen2.5-vl-3b", "zero2"),
    ("qwen2.5-vl-7b", "zero3"),
    ("qwen2.5-vl-7b-vllm-colocate", "zero3"),
    ("qwen2.5-vl-7b-vllm-server", "zero3_4gpu"),
])
def test_bundled_recipes_fit_8_x_80_gb_at_16_prompts_per_step(sizes, config, accelerate):
    cfg = load_config(config)
    result = plan(cfg, read_launch(accelerate), gpu_memory_gib=80, model=sizes[config.split("-")[2][:2]])
    assert result.fits, result.render()
    assert result.prompts_per_step == 16
    # ZeRO-3 loads each process's shard (7B: ~24 GiB per node); ZeRO-2 (3B) loads the fp32 policy and
    # bf16 reference on every process's CPU: 168 GiB per node, within an 8-GPU node's RAM
    assert result.host_gib < (64 if result.launch.strategy == "zero3" else 256)
    names = [t.name for t in result.terms]
    assert any(n.startswith("reference model (bf16") for n in names)


def test_visual_tokens_and_sequence_of_the_paper_config():
    cfg = load_config("qwen2.5-vl-7b")
    assert visual_tokens(cfg) == 8 * 448 * 448 // (28 * 28)  # 8 frames x 256 merged tokens


def test_7b_on_zero2_is_refused_with_the_batch_fix_that_works(sizes):
    """On 64 GB cards the 7B's ZeRO-2 launch (about 72 GiB) is refused; the fix keeps 16 prompts a step."""
    cfg = load_config("qwen2.5-vl-7b")
    result = plan(cfg, read_launch("zero2"), gpu_memory_gib=64, model=sizes["7b"])
    assert not result.fits and result.biggest().name.startswith("activations")
    assert "per_device_train_batch_size: 4 with gradient_accumulation_steps: 4" in result.verdict()
    fixed = load_config("qwen2.5-vl-7b", {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 4})
    again = plan(fixed, read_launch("zero2"), gpu_memory_gib=64, model=sizes["7b"])
    assert again.fits and again.prompts_per_step == 16
    # ZeRO-2 keeps the fp32 policy and the bf16 reference on the CPU of every process while loading
    assert result.host_gib == pytest.approx(8 * 6 * sizes["7b"].total / GiB)


def test_the_old_3b_ddp_recipe_is_refused_from_the_command_line(tmp_path):
    """The plain-DDP 3B launch the docs used to recommend: the planner names the term and the fix."""
    run = subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "train", "--config",
                          "qwen2.5-vl-3b", "--plan", "--accelerate-config", "multi_gpu", "--gpu-memory", "80"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    verdict = run.stdout.strip().splitlines()[-1]
    assert verdict.startswith("does not fit") and "optimizer states (AdamW, fp32)" in verdict and "zero2" in verdict
    assert "3.75B parameters" in run.stdout and "reference model (bf16)" in run.stdout
    bad = subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "train", "--config",
                          "qwen2.5-vl-3b", "--plan", "--accelerate-config", "zero9"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert bad.returncode == 2 and "zero9: no such accelerate config" in bad.stderr


def test_preflight_refuses_the_running_launch(monkeypatch, sizes):
    """At the start of training the plan of the launch in progress (accelerate's variables) is checked."""
    cfg = load_config("qwen2.5-vl-3b")
    for key in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_DEEPSPEED_ZERO_STAGE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    with pytest.raises(LaunchRefused, match=r"optimizer states .*zero2"):
        preflight(cfg, gpu_memory_gib=80, host_memory_gib=2048)
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "2")
    checked = preflight(cfg, gpu_memory_gib=80, host_memory_gib=2048)
    assert checked.fits and checked.launch.strategy == "zero2"
    with pytest.raises(LaunchRefused, match="host RAM"):  # 8 processes x fp32 policy + reference
        preflight(cfg, gpu_memory_gib=80, host_memory_gib=128)
    assert preflight(cfg.model_copy(update={"model": cfg.model.model_copy(update={"name_or_path": "org/unknown"})}),
                     gpu_memory_gib=80) is None  # nothing to build: no check
    with pytest.raises(LaunchRefused, match="model states, ZeRO-3 1/1.*offload"):  # 18 bytes per parameter on one GPU
        preflight(cfg, launch=Launch("test", "zero3", 1), gpu_memory_gib=80, host_memory_gib=2048)
    single = preflight(cfg, launch=Launch("test", "zero3", 1), gpu_memory_gib=139, host_memory_gib=2048)
    assert single.fits and single.prompts_per_step == 2  # one GPU: 8 x 2 / 8
