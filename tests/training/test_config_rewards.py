"""Configs (paper values, ablations, GRPOConfig mapping, errors) and the TRL reward functions."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
from numerical3d import verifiers
from hypothesis import given, settings
from hypothesis import strategies as st

from numerical3d.training.config import ConfigError, bundled_configs, load_config
from numerical3d.training.rewards import AccuracyReward, FormatReward, Sharpness, as_spec, completion_text, reward_functions

ABLATIONS = {
    "ablations/s1_grpo_binary": ("binary", "sigmoid", "grpo"),
    "ablations/s2_grpo_snra_fixed": ("snra", "fixed", "grpo"),
    "ablations/s3_apgrpo_fixed": ("snra", "fixed", "ap"),
    "ablations/s3_apgrpo_fixed_noclip": ("snra", "fixed", "ap"),
    "ablations/s4_apgrpo_linear": ("snra", "linear", "ap"),
    "ablations/s5_apgrpo_sigmoid": ("snra", "sigmoid", "ap"),
    "ablations/pure_absolute": ("snra", "sigmoid", "absolute"),
    "ablations/tanh": ("tanh", "sigmoid", "ap"),
}


@pytest.mark.parametrize("name", ["qwen2.5-vl-3b", "qwen2.5-vl-7b"])
def test_paper_runs(name, tmp_path):
    cfg = load_config(name)
    assert cfg.model.name_or_path == f"Qwen/Qwen2.5-VL-{name[-2:].upper()}-Instruct"
    assert (cfg.num_generations, cfg.learning_rate, cfg.weight_decay, cfg.beta) == (8, 1e-6, 0.01, 0.02)
    assert (cfg.num_train_epochs, cfg.loss_type) == (1, "grpo")
    assert (cfg.reward.kmin, cfg.reward.kmax, cfg.reward.s, cfg.reward.tau) == (1.0, 100.0, 10.0, 0.5)
    assert (cfg.reward.format_weight, cfg.advantage.alpha, cfg.advantage.clip) == (0.1, 1.0, 1.5)
    args = cfg.to_grpo_config(tmp_path)
    assert (args.loss_type, args.beta, args.num_generations, args.learning_rate) == ("grpo", 0.02, 8, 1e-6)
    assert args.reward_weights == pytest.approx([0.9, 0.1])
    assert args.scale_rewards == "group" and args.weight_decay == 0.01


def test_every_ablation_is_bundled_and_differs_only_where_it_should():
    names = set(bundled_configs())
    for name, (operator, schedule, mode) in ABLATIONS.items():
        cfg = load_config(name)
        assert (cfg.reward.operator, cfg.reward.schedule, cfg.advantage.mode) == (operator, schedule, mode)
        assert cfg.learning_rate == 1e-6 and cfg.beta == 0.02  # inherited from the paper run
    for a in (0, 1, 2):
        assert load_config(f"ablations/alpha_{a}").advantage.alpha == a
    # The paper's alpha = 0 row (54.4) is S1's binary run; the SNRA sweep inside AP-GRPO is its own file.
    alpha0, s1 = load_config("ablations/alpha_0"), load_config("ablations/s1_grpo_binary")
    assert alpha0.reward == s1.reward and alpha0.reward.operator == "binary"
    assert (alpha0.advantage.mode, alpha0.advantage.alpha, alpha0.advantage.clip) == ("ap", 0.0, None)
    snra0 = load_config("ablations/alpha_0_snra")
    assert snra0.model_dump(exclude={"name", "advantage"}) == load_config("ablations/alpha_1").model_dump(
        exclude={"name", "advantage"}) and (snra0.advantage.alpha, snra0.advantage.clip) == (0.0, 1.5)
    # S2 -> S3 changes the absolute term and the clip; the control changes the absolute term only.
    s2, s3 = load_config("ablations/s2_grpo_snra_fixed"), load_config("ablations/s3_apgrpo_fixed")
    ctl = load_config("ablations/s3_apgrpo_fixed_noclip")
    assert ctl.model_dump(exclude={"name", "advantage"}) == s2.model_dump(exclude={"name", "advantage"})
    assert (s2.advantage.mode, s2.advantage.clip) == ("grpo", None)
    assert (ctl.advantage.mode, ctl.advantage.clip) == ("ap", None)
    assert ctl.advantage.model_copy(update={"clip": 1.5}) == s3.advantage
    for k in (0.1, 0.5, 1, 2, 5):
        assert load_config(f"ablations/kmin_{k}").reward.kmin == k
    for k in (25, 50, 100, 200, 400):
        assert load_config(f"ablations/kmax_{k}").reward.kmax == k
    for n in (10, 20, 50):  # Table 5: standard GRPO (= S1, TRL's advantage) and AP-GRPO per data scale
        grpo, ap = load_config(f"ablations/data_{n}k_grpo"), load_config(f"ablations/data_{n}k_apgrpo")
        assert grpo.data.max_items == ap.data.max_items == n * 1000
        assert (grpo.reward.operator, grpo.advantage.mode, grpo.advantage.clip) == ("binary", "grpo", None)
        assert (ap.reward.operator, ap.advantage.mode, ap.advantage.clip) == ("snra", "ap", 1.5)
    for name in ("ablations/s1_grpo_binary", "ablations/s2_grpo_snra_fixed"):
        assert load_config(name).advantage.clip is None  # the paper's standard GRPO has no clip
    s0 = load_config("ablations/s0_sft")  # Table 3's SFT baseline: the paper run's model, data and optimizer
    assert s0.trainer == "sft" and all(load_config(n).trainer == "grpo" for n in names - {"ablations/s0_sft"})
    assert (s0.model, s0.data, s0.learning_rate) == (load_config("qwen2.5-vl-7b").model,
                                                      load_config("qwen2.5-vl-7b").data, 1e-6)
    args = s0.to_sft_config("/tmp/s0")
    assert (args.completion_only_loss, args.max_length, args.bf16, args.remove_unused_columns) == (True, None, True, False)
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps * 8 == 16  # the paper's 16 prompts/step
    video, paper = load_config("qwen2.5-vl-7b-video"), load_config("qwen2.5-vl-7b")
    assert paper.data.visual == "images" and video.data.visual == "video"  # the recipe keeps images
    assert (video.data.video.max_frames, video.data.video.max_pixels) == (32, None)  # benchmark run vsibench's
    assert video.model_dump(exclude={"name", "data"}) == paper.model_dump(exclude={"name", "data"})
    for launch in ("qwen2.5-vl-7b-vllm-colocate", "qwen2.5-vl-7b-vllm-server"):  # the recipe, generating with vLLM
        variant = load_config(launch)
        assert variant.grpo["use_vllm"] is True
        assert variant.model_dump(exclude={"name", "grpo", "gradient_accumulation_steps"}) == \
            paper.model_dump(exclude={"name", "grpo", "gradient_accumulation_steps"})
    lora = load_config("qwen2.5-vl-7b-lora-1gpu")  # one GPU: the recipe with adapters, 16 prompts per step
    assert lora.model.lora is not None and lora.model.freeze_vision and not paper.model.freeze_vision
    assert lora.per_device_train_batch_size * lora.gradient_accumulation_steps == 8 * 16
    assert lora.model_dump(exclude={"name", "model", "grpo", "learning_rate", "per_device_train_batch_size",
                                    "gradient_accumulation_steps"}) == \
        paper.model_dump(exclude={"name", "model", "grpo", "learning_rate", "per_device_train_batch_size",
                                  "gradient_accumulation_steps"})
    two_nodes = load_config("qwen2.5-vl-7b-2nodes")  # 16 GPUs: one accumulation step keeps 16 prompts
    assert two_nodes.model_dump(exclude={"name", "gradient_accumulation_steps"}) == \
        paper.model_dump(exclude={"name", "gradient_accumulation_steps"})
    assert 16 * two_nodes.per_device_train_batch_size * two_nodes.gradient_accumulation_steps == 8 * 16
    # 2 paper runs + the video, two vLLM, the one-GPU LoRA and the two-machine variants + S0..S5, the
    # S2/S3 control, pure absolute, tanh, alpha x3 (+ the SNRA alpha 0), kmin x5, kmax x5, data scale x6
    assert len(names) == 36


@pytest.mark.parametrize(
    "text, problem",
    [
        ("base: missing.yaml\n", "missing.yaml"),
        ("reward:\n  opertor: snra\n", "bad.yaml: reward: unknown field 'opertor'; did you mean 'operator'\\?"),
        ("learnin_rate: 1.0e-5\n", "bad.yaml: unknown field 'learnin_rate'; did you mean 'learning_rate'\\?"),
        ("advantage:\n  mode: relative\n", "advantage.mode"),
    ],
)
def test_bad_config_file_names_file_and_field(tmp_path, text, problem):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(ConfigError, match=problem):
        load_config(bad)


def test_unknown_grpo_field_is_named_when_mapped_onto_grpoconfig(tmp_path):
    cfg_file = tmp_path / "bad.yaml"
    cfg_file.write_text("grpo:\n  not_a_field: 1\n")
    cfg = load_config(cfg_file)
    with pytest.raises(ConfigError, match="not_a_field"):
        cfg.to_grpo_config(tmp_path)


def test_missing_and_circular_configs(tmp_path):
    with pytest.raises(ConfigError, match="no such config"):
        load_config(tmp_path / "nope.yaml")
    loop = tmp_path / "loop.yaml"
    loop.write_text("base: loop.yaml\n")
    with pytest.raises(ConfigError, match="circular"):
        load_config(loop)


def test_base_chain_and_overrides(tmp_path):
    child = tmp_path / "child.yaml"
    child.write_text(f"base: {load_config.__globals__['CONFIG_DIR'] / 'qwen2.5-vl-3b.yaml'}\nreward:\n  kmax: 50\n")
    cfg = load_config(child, {"advantage": {"alpha": 2.0}})
    assert cfg.model.name_or_path.endswith("3B-Instruct") and cfg.reward.kmax == 50 and cfg.reward.kmin == 1.0
    assert cfg.advantage.alpha == 2.0 and cfg.advantage.clip == 1.5


def _state(step, max_steps):
    return SimpleNamespace(global_step=step, max_steps=max_steps)


def test_sharpness_reads_trainer_state():
    k = Sharpness()
    assert k.at(_state(0, 100)) == pytest.approx(1 + 99 / (1 + math.exp(5)))
    assert k.at(_state(50, 100)) == pytest.approx(50.5)
    assert k.at(_state(100, 100)) == pytest.approx(1 + 99 / (1 + math.exp(-5)))
    assert Sharpness(verifiers.LinearSchedule()).at(_state(25, 100)) == pytest.approx(1 + 99 * 0.25)
    assert Sharpness(verifiers.FixedSchedule()).at(_state(3, 10)) == 100.0
    assert Sharpness(verifiers.FixedSchedule(7.0)).at(_state(3, 10)) == 7.0


def test_schedule_is_built_from_the_config():
    cfg = load_config("qwen2.5-vl-7b").reward
    assert Sharpness.from_config(cfg).schedule == verifiers.SigmoidSchedule(1.0, 100.0, 10.0, 0.5)
    assert Sharpness.from_config(load_config("ablations/s4_apgrpo_linear").reward).schedule == \
        verifiers.LinearSchedule(1.0, 100.0)
    fixed = load_config("ablations/s3_apgrpo_fixed").reward
    assert Sharpness.from_config(fixed).schedule == verifiers.FixedSchedule(fixed.k_fixed or fixed.kmax)
    assert Sharpness.from_config(fixed.model_copy(update={"k_fixed": 7.0})).schedule == verifiers.FixedSchedule(7.0)


def test_reward_keeps_one_schedule_across_batches(monkeypatch):
    """The schedule object is made once per reward function, never per batch."""
    made = []
    real = verifiers.SigmoidSchedule.__post_init__
    monkeypatch.setattr(verifiers.SigmoidSchedule, "__post_init__", lambda self: (made.append(self), real(self)))
    fn = AccuracyReward(load_config("qwen2.5-vl-7b").reward)
    for step in range(5):
        _call(fn, ["<answer>2.0</answer>"], [NUMERIC], step=step, max_steps=5)
    assert len(made) == 1 and fn.sharpness.schedule is made[0]


NUMERIC = {"kind": "numeric", "version": 1, "answer": 2.0, "unit": "m", "error": "relative_squared"}
CHOICE = {"kind": "choice", "version": 1, "answer": "B", "options": ["chair", "table", "sofa"]}


def _call(fn, completions, specs, step=0, max_steps=10):
    logged = {}
    out = fn(prompts=["q"] * len(completions), completions=completions, verifier=specs,
             trainer_state=_state(step, max_steps), log_metric=lambda n, v: logged.__setitem__(n, v))
    return out, logged


def test_accuracy_reward_is_snra_of_the_verifier_error():
    cfg = load_config("qwen2.5-vl-7b").reward
    fn = AccuracyReward(cfg)
    completions = ["<think>x</think><answer>2.0</answer>", "<think>x</think><answer>2.5</answer>", "no answer"]
    rewards, logged = _call(fn, completions, [NUMERIC] * 3, step=5, max_steps=10)
    k = 50.5
    e = verifiers.verify(NUMERIC, completions[1], k).error
    assert e == pytest.approx(0.25 ** 2)  # relative squared error of 2.5 vs 2.0
    assert rewards[0] == 1.0
    assert rewards[1] == pytest.approx(2 / (1 + math.exp(k * e)))
    assert rewards[2] == pytest.approx(verifiers.verify(NUMERIC, completions[2], k).accuracy_reward)
    assert logged["ap/snra_mean"] == pytest.approx(sum(rewards) / 3)


@pytest.mark.parametrize("config", ["qwen2.5-vl-7b", "ablations/tanh"])
def test_accuracy_reward_is_verify_batchs_r(config, monkeypatch):
    """The reward is the r that verify_batch returned for the configured operator, not a recomputation."""
    cfg = load_config(config).reward
    completions = ["<think>x</think><answer>2.0</answer>", "<answer>2.5 m</answer>", "<answer>C</answer>", "junk"]
    specs = [NUMERIC, NUMERIC, CHOICE, CHOICE]
    k = Sharpness.from_config(cfg)(3, 10)
    expected = [r.accuracy_reward for r in verifiers.verify_batch(specs, completions, k, operator=cfg.operator)]
    snra = [r.accuracy_reward for r in verifiers.verify_batch(specs, completions, k)]
    if cfg.operator == "snra":  # the SNRA operator must not run a second time, for the reward or its log
        monkeypatch.setattr(verifiers, "snra", lambda *a: pytest.fail("SNRA recomputed"))
    rewards, logged = _call(AccuracyReward(cfg), completions, specs, step=3, max_steps=10)
    assert rewards == expected
    assert logged["ap/snra_mean"] == pytest.approx(sum(snra) / 4)


def test_tanh_and_binary_operators():
    tanh_cfg = load_config("ablations/tanh").reward
    c = ["<think>x</think><answer>2.2</answer>"]
    (r,), _ = _call(AccuracyReward(tanh_cfg), c, [NUMERIC], step=0, max_steps=1)
    k = Sharpness.from_config(tanh_cfg)(0, 1)
    assert r == pytest.approx(1 - math.tanh(k * 0.1 ** 2))
    binary = AccuracyReward(load_config("ablations/s1_grpo_binary").reward)
    answers = ["2.05", "2.2", "1.96", "junk"]  # within 5 %: 2.05 and 1.96
    rewards, logged = _call(binary, [f"<answer>{a}</answer>" for a in answers], [NUMERIC] * 4)
    assert rewards == [1.0, 0.0, 1.0, 0.0]
    assert 0 < logged["ap/snra_mean"] < 1  # the SNRA curve is still logged for comparison
    rewards, _ = _call(binary, ["<answer>B</answer>", "<answer>C</answer>"], [CHOICE, CHOICE])
    assert rewards == [1.0, 0.0]


def test_verifier_column_as_json_text_and_conversational_completions():
    fn = AccuracyReward(load_config("qwen2.5-vl-7b").reward)
    conv = [[{"role": "assistant", "content": "<think>t</think><answer>B</answer>"}],
            [{"role": "assistant", "content": [{"type": "text", "text": "<answer>A</answer>"}]}]]
    rewards, _ = _call(fn, conv, [json.dumps(CHOICE), CHOICE])
    assert rewards[0] == 1.0 and rewards[1] < 1.0
    assert FormatReward()(completions=conv) == [1.0, 0.0]
    with pytest.raises(ValueError, match="not JSON"):
        as_spec("{kind")
    with pytest.raises(ValueError, match="'kind'"):
        as_spec({"answer": 1})


def test_reward_weights_are_one_minus_lambda_and_lambda():
    funcs, weights = reward_functions(load_config("qwen2.5-vl-7b").reward)
    assert [f.__name__ for f in funcs] == ["accuracy", "format"] and weights == pytest.approx([0.9, 0.1])


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_rewards_in_range_for_any_text(text):
    fn = AccuracyReward(load_config("qwen2.5-vl-7b").reward)
    rewards, _ = _call(fn, [text, text], [NUMERIC, CHOICE])
    assert all(0.0 <= r <= 1.0 for r in rewards)
    assert FormatReward()(completions=[text])[0] in (0.0, 1.0)
    assert completion_text([{"role": "assistant", "content": text}]) == text


def test_vsi_grading_and_question_types():
    from numerical3d.training.evaluate import grade, vsi_question_type, vsibench_questions

    count = {"kind": "count", "version": 1, "answer": 4}
    rows = [
        {"id": "a", "subtask": "object_count", "verifier": count, "question": "How many?", "source": "synthetic",
         "scene_id": "scene9001_00", "options": None},
        {"id": "b", "subtask": "rel_distance", "verifier": CHOICE, "question": "Which?", "source": "synthetic",
         "scene_id": "scene9001_00", "options": ["chair", "table", "sofa"]},
        {"id": "c", "subtask": "rel_distance", "verifier": CHOICE, "question": "Which?", "source": "synthetic",
         "scene_id": "scene9001_00", "options": ["chair", "table", "sofa"]},
    ]
    tasks, records = grade(rows, ["<think>t</think><answer>5</answer>", "<answer>B</answer>", "<answer>C</answer>"], 100.0)
    # MRA of 5 vs 4: |5-4|/4 = 0.25 <= 1 - theta for theta in 0.50..0.75 (6 of 10 thresholds).
    assert tasks["object_count"].vsi == pytest.approx(0.6)
    assert tasks["rel_distance"].vsi == 0.5 and tasks["rel_distance"].n == 2
    assert tasks["object_count"].format_ok == 1.0 and tasks["rel_distance"].format_ok == 0.0
    assert [r["vsi_score"] for r in records] == pytest.approx([0.6, 1.0, 0.0])
    questions = vsibench_questions(rows)
    assert questions[0]["question_type"] == "object_counting" and questions[0]["ground_truth"] == 4
    assert questions[1]["options"] == ["A. chair", "B. table", "C. sofa"] and questions[1]["ground_truth"] == "B"
    direction = {"kind": "direction", "version": 1, "answer": "left", "classes": ["left", "back", "right"]}
    assert vsi_question_type("rel_direction", direction) == "object_rel_direction_medium"
    assert vsi_question_type("grounding_3d", {"kind": "grounding"}) == "grounding_3d"


ANGLE = {"kind": "numeric", "version": 1, "answer": 350.0, "unit": "deg", "error": "angular"}


@pytest.mark.parametrize("truth, answer, correct", [
    (350.0, "-10", 1.0),    # the same direction written the other way round
    (2.0, "1", 1.0),        # 1 degree off: 50 % relative error, but within the angle tolerance
    (359.0, "3 degrees", 1.0),  # 4 degrees across the wrap
    (0.0, "-4.5", 1.0),
    (90.0, "100", 0.0),     # 10 degrees off
    (10.0, "190", 0.0),     # opposite
])
def test_binary_reward_on_angles_uses_the_wrapped_difference(truth, answer, correct):
    cfg = load_config("ablations/s1_grpo_binary").reward
    assert cfg.binary_angle_tol == 5.0
    spec = {**ANGLE, "answer": truth}
    (r,), _ = _call(AccuracyReward(cfg), [f"<think>t</think><answer>{answer}</answer>"], [spec])
    assert r == correct
    # The verifier's own error is wrapped too: it agrees on which answers are close.
    d = verifiers.scores.angle_difference(float(answer.split()[0]), truth)
    assert verifiers.verify(spec, f"<answer>{answer}</answer>", 100.0).error == pytest.approx((d / 90.0) ** 2)


def test_binary_reward_on_grounding_and_direction_angles():
    cfg = load_config("ablations/s1_grpo_binary").reward
    fn = AccuracyReward(cfg)
    xyz = {"kind": "grounding", "version": 1, "answer": [1.0, -0.5, 2.0]}  # norm 2.29 m: 5 % is 0.115 m
    answers = ["(1.0, -0.5, 2.0)", "(1.05, -0.45, 2.05)", "(1.1, -0.4, 2.1)", "no numbers"]
    rewards, _ = _call(fn, [f"<answer>{a}</answer>" for a in answers], [xyz] * 4)
    assert rewards == [1.0, 1.0, 0.0, 0.0]  # 0.087 m and 0.17 m off
    classes = ["front", "front-right", "right", "back-right", "back", "back-left", "left", "front-left"]
    spec = {"kind": "direction", "version": 1, "answer": "front-left", "classes": classes, "angle": 310.0}
    answers = ["front-left", "-40 degrees", "310 degrees", "front", "280 degrees"]
    rewards, _ = _call(fn, [f"<answer>{a}</answer>" for a in answers], [spec] * 5)
    assert rewards == [1.0, 1.0, 1.0, 0.0, 0.0]
    # The SNRA run gives the class answer partial credit only (its centre is 5 degrees off the truth).
    snra, _ = _call(AccuracyReward(load_config("qwen2.5-vl-7b").reward), ["<answer>front-left</answer>"], [spec])
    assert 0 < snra[0] < 1


@pytest.mark.parametrize("kmax", [25.0, 400.0, 100.0])
def test_phi_is_calibrated_at_the_runs_kmax(kmax):
    """A complete failure (V = 0) gets the 0.01 target reward at the end of the run's own schedule."""
    cfg = load_config(f"ablations/kmax_{kmax:g}").reward
    assert cfg.kmax == kmax and cfg.phi.kmax is None and cfg.calibration_k() == kmax
    fn = AccuracyReward(cfg)
    wrong = ["<think>t</think><answer>A</answer>"]  # V = 0 for a choice item whose answer is B
    (at_kmax,), _ = _call(fn, wrong, [CHOICE], step=10, max_steps=10)
    end_k = fn.sharpness(10, 10)  # the sigmoid reaches kmin + 0.9933 (kmax - kmin) at t = T
    assert at_kmax == pytest.approx(2 / (1 + 199 ** (end_k / kmax)))
    assert at_kmax == pytest.approx(0.01, rel=0.06)
    # exactly eps_r at kmax itself
    e = verifiers.verify(CHOICE, wrong[0], kmax, phi_config=cfg.phi_config()).error
    assert verifiers.snra(kmax, e) == pytest.approx(0.01)
    # a fixed calibration (the verifiers' default, k 100) is still available, and differs off k_max = 100
    fixed = cfg.model_copy(update={"phi": cfg.phi.model_copy(update={"kmax": 100.0})})
    (r,), _ = _call(AccuracyReward(fixed), wrong, [CHOICE], step=10, max_steps=10)
    assert (r == pytest.approx(at_kmax)) == (kmax == 100.0)


def test_phi_calibration_follows_a_fixed_schedule_and_the_paper_run_matches_the_verifiers_default():
    paper = load_config("qwen2.5-vl-7b").reward
    assert paper.phi_config() == verifiers.DEFAULT_PHI  # training rewards == `numerical3d reward`'s
    s3 = load_config("ablations/s3_apgrpo_fixed").reward
    assert s3.calibration_k() == 100.0
    assert s3.model_copy(update={"k_fixed": 30.0}).calibration_k() == 30.0
    with pytest.raises(ConfigError, match="reward.phi.eps_r"):
        load_config("qwen2.5-vl-7b", {"reward": {"phi": {"eps_r": 2.0}}})


def test_open_trl_defaults_are_explicit_in_the_paper_config(tmp_path):
    """Every GRPOConfig setting the paper leaves open is written in the paper YAML and reaches TRL."""
    import yaml

    from numerical3d.training.config import CONFIG_DIR, OPEN_GRPO_FIELDS, OPEN_OPTIMIZER_FIELDS

    raw = yaml.safe_load((CONFIG_DIR / "qwen2.5-vl-7b.yaml").read_text())
    fields = OPEN_GRPO_FIELDS + OPEN_OPTIMIZER_FIELDS
    assert {"use_bias_correction_kl", "epsilon", "num_iterations", "max_grad_norm", "top_p", "top_k"} <= set(fields)
    assert [f for f in fields if f not in raw] == []
    cfg = load_config("qwen2.5-vl-3b")
    args = cfg.to_grpo_config(tmp_path)
    for f in fields:
        assert getattr(args, f) == raw[f] == getattr(cfg, f), f
    assert args.use_bias_correction_kl is False  # TRL 1.16's default is True: ours is the original GRPO's k3
    sft = load_config("ablations/s0_sft").to_sft_config(tmp_path)  # the optimizer choices reach SFT too
    assert all(getattr(sft, f) == raw[f] for f in OPEN_OPTIMIZER_FIELDS)


def test_trl_pin_matches_pyproject_and_is_checked():
    import tomllib
    from pathlib import Path

    from packaging.requirements import Requirement

    from numerical3d.training.pins import TRL_SUPPORTED, UnsupportedTRLError, check_trl

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    (req,) = [Requirement(r) for r in pyproject["project"]["optional-dependencies"]["train"]
              if Requirement(r).name == "trl"]
    assert req.specifier == TRL_SUPPORTED
    assert check_trl() == __import__("trl").__version__  # the installed one is supported
    for bad in ("1.17.0", "1.15.2", "2.0.0"):
        with pytest.raises(UnsupportedTRLError, match=r"trl<1.17,>=1.16|trl>=1.16,<1.17"):
            check_trl(bad)
    assert check_trl("1.16.3") == "1.16.3"


def test_trainer_refuses_an_unsupported_trl_before_building(monkeypatch):
    from numerical3d.training import pins
    from numerical3d.training.trainer import APGRPOTrainer

    monkeypatch.setattr(pins.metadata, "version", lambda name: "1.17.0")
    with pytest.raises(pins.UnsupportedTRLError, match=r"TRL 1.17.0 is installed.*trl"):
        APGRPOTrainer(model="never-loaded")


def test_base_may_name_a_bundled_config(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("base: qwen2.5-vl-3b\nlearning_rate: 2.0e-6\n")
    config, bundled = load_config(mine), load_config("qwen2.5-vl-3b")
    assert config.learning_rate == 2.0e-6 and config.model == bundled.model
    mine.write_text("base: qwen2.5-vl-3bb\n")
    with pytest.raises(ConfigError, match="neither a file beside it .* nor a bundled config .*qwen2.5-vl-3b"):
        load_config(mine)
