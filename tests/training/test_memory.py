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


# ------------------------------------------------------------------ terms added for a first launch
def test_colocated_vllm_holds_weights_and_kv_cache_at_its_max_model_length(sizes):
    """The colocate recipe's KV cache at its max model length fits its share on 80 GB cards; on 40 GB
    cards, or with the length unset (vLLM would take the model's 128,000 tokens), the launch is
    refused naming the setting that fixes it."""
    m = sizes["7b"]
    cfg = load_config("qwen2.5-vl-7b-vllm-colocate")
    kv_per_token = m.layers * 2 * m.kv_dim * 2  # keys and values of every layer, bf16
    result = plan(cfg, read_launch("zero3"), gpu_memory_gib=80, model=m)
    v = result.vllm
    assert v.max_model_length == 4096 and v.kv_gib == pytest.approx(4096 * kv_per_token / GiB)
    assert v.weights_gib == pytest.approx(2 * m.total / GiB) and v.starts and v.need_gib < v.share_gib == 24.0
    assert result.fits and "KV cache of one 4096-token sequence" in result.render()
    small = plan(cfg, read_launch("zero3"), gpu_memory_gib=40, model=m)
    assert not small.fits and "vLLM cannot start in its share: 12.0 GiB" in small.verdict()
    assert "grpo.vllm_gpu_memory_utilization: 0.47 or more" in small.verdict()
    unset = load_config("qwen2.5-vl-7b-vllm-colocate", {"grpo": {"vllm_max_model_length": None}})
    wide = plan(unset, read_launch("zero3"), gpu_memory_gib=80, model=m)
    assert wide.vllm.kv_gib == pytest.approx(128_000 * kv_per_token / GiB)  # ~6.8 GiB, as the issue measured
    assert not wide.fits and "grpo.vllm_max_model_length: 4096" in wide.verdict()


def test_deepspeed_buckets_are_deepspeeds_defaults_or_the_json_configs(tmp_path):
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    from numerical3d.training.memory import zero_buckets

    z2, z3 = DeepSpeedZeroConfig(stage=2), DeepSpeedZeroConfig(stage=3)
    assert zero_buckets(read_launch("zero2"))[0] == 2 * (z2.reduce_bucket_size + z2.allgather_bucket_size)
    assert z3.overlap_comm  # DeepSpeed double-buffers the reduce bucket under ZeRO-3
    assert zero_buckets(read_launch("zero3"))[0] == 2 * (2 * z3.reduce_bucket_size + z3.prefetch_bucket_size)
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"zero_optimization": {"stage": 2, "reduce_bucket_size": 1e8, "allgather_bucket_size": 2e8}}))
    acc = tmp_path / "acc.yaml"
    acc.write_text(f"distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  deepspeed_config_file: {ds}\n")
    assert zero_buckets(read_launch(acc))[0] == 2 * (1e8 + 2e8)


def test_logprob_head_is_trls_fused_tiles_not_full_logits(sizes):
    from numerical3d.training.memory import LOGPROB_TOKEN_TILE, LOGPROB_VOCAB_TILE, logprob_head

    m = sizes["7b"]
    tokens = 8 * 512
    head = logprob_head(m, tokens, head_trains=True)
    assert (LOGPROB_TOKEN_TILE, LOGPROB_VOCAB_TILE) == (4096, 32768)  # trl.kernels.chunked_logprob, trl.trainer.utils
    assert head == 4096 * 32768 * 4 + tokens * m.hidden * 4 + m.vocab * m.hidden * 4
    # the planner's former term, full logits at 8 bytes each (4.6 GiB), is gone; what remains is the
    # head's fp32 weight gradient (2.0 GiB, allocated by the fused backward) and tiles that do not
    # grow with the vocabulary times the tokens
    assert head < tokens * m.vocab * 8 and head - m.vocab * m.hidden * 4 < tokens * m.vocab * 2 / 2
    assert logprob_head(m, tokens, head_trains=False) == head - m.vocab * m.hidden * 4  # LoRA: the head is frozen


def test_lora_parameter_count_equals_peft_on_the_meta_model(sizes):
    pytest.importorskip("peft")
    import torch
    from peft import get_peft_model
    from transformers import AutoConfig, AutoModelForImageTextToText

    from numerical3d.training.config import LoraConfig
    from numerical3d.training.memory import lora_parameters, model_config_dir

    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(AutoConfig.from_pretrained(model_config_dir("qwen2.5-vl-3b")))
    adapted = get_peft_model(model, LoraConfig(r=16).peft_config())
    assert sum(p.numel() for p in adapted.parameters() if p.requires_grad) == lora_parameters(sizes["3b"], 16)


def test_validation_gathers_the_zero3_model_in_the_vllm_recipes_too(sizes):
    cfg = load_config("qwen2.5-vl-7b-vllm-server")
    result = plan(cfg, read_launch("zero3_4gpu"), gpu_memory_gib=80, model=sizes["7b"])
    validation = next(ph for ph in result.phases if ph.name == "validation")
    gather = next(t for t in validation.terms if "gathered ZeRO-3 weights" in t.name)
    assert gather.gib == pytest.approx(2 * sizes["7b"].total / GiB)  # 15.4 GiB, bf16
    assert not any(ph.name == "generation" for ph in result.phases)  # generation is on the server's GPUs
    off = plan(load_config("qwen2.5-vl-7b-vllm-server", {"validation": {"enabled": False}}), read_launch("zero3_4gpu"),
               gpu_memory_gib=80, model=sizes["7b"])
    assert [ph.name for ph in off.phases] == ["loss pass"]


@pytest.mark.parametrize("config, accelerate, gib", [
    ("qwen2.5-vl-7b", "zero3_offload", 40),  # 8 x 40 GB: the optimizer on the CPU
    ("qwen2.5-vl-3b", "zero3", 40),
    ("qwen2.5-vl-7b-lora-1gpu", "single_gpu", 40),  # one GPU: LoRA, frozen vision tower
    ("qwen2.5-vl-7b-2nodes", "zero3_2nodes", 80),  # 2 machines x 8 GPUs
])
def test_recipes_for_40_gb_cards_and_one_gpu_fit_at_16_prompts_per_step(sizes, config, accelerate, gib):
    cfg = load_config(config)
    result = plan(cfg, read_launch(accelerate), gpu_memory_gib=gib, model=sizes[config.split("-")[2][:2]])
    assert result.fits, result.render()
    assert result.prompts_per_step == 16


def test_docs_table_and_accelerate_comments_come_from_the_planner(tmp_path):
    """docs/training.md shows every bundled launch's plan on 80 GB and 40 GB cards, each figure split
    into its terms, and each accelerate file's "planned:" lines are the planner's."""
    import shutil
    from pathlib import Path

    from numerical3d.training.memory import ACCELERATE_DIR, recipes_table, write_planned_comments

    docs = Path(__file__).resolve().parents[2] / "docs" / "training.md"
    assert recipes_table() in docs.read_text(), "docs/training.md's planner table is stale: paste recipes_table()"
    copy = tmp_path / "accelerate"
    shutil.copytree(ACCELERATE_DIR, copy)
    write_planned_comments(copy)
    for path in sorted(ACCELERATE_DIR.glob("*.yaml")):
        assert (copy / path.name).read_text() == path.read_text(), \
            f"{path.name}: stale planned: lines; run training.memory.write_planned_comments()"


def test_a_bundled_config_launches_with_its_own_recipe():
    from numerical3d.training.memory import launch_recipe

    assert launch_recipe("qwen2.5-vl-7b-lora-1gpu").stem == "single_gpu"
    assert launch_recipe("qwen2.5-vl-7b-vllm-server").stem == "zero3_4gpu"
    assert launch_recipe("qwen2.5-vl-7b-2nodes").stem == "zero3_2nodes"
    assert launch_recipe("qwen2.5-vl-3b").stem == "zero2" and launch_recipe("ablations/tanh").stem == "zero3"  # by model
    assert launch_recipe("qwen2.5-vl-7b", "zero3_offload").stem == "zero3_offload"  # the one given wins
