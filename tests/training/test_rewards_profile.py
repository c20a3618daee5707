"""`reward.profile`: a training config's verifier profile reaches the rewards GRPO is given."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from numerical3d import verifiers
from numerical3d.training.config import CONFIG_DIR, ConfigError, config_from_dict, load_config
from numerical3d.training.rewards import Sharpness, reward_functions

ORDER = {"kind": "order", "version": 1, "answer": ["chair", "table", "lamp", "sofa"]}
DIRECTION = {"kind": "direction", "version": 1, "answer": "front",
             "classes": ["front", "right", "back", "left"]}
# One swapped pair among four labels (V = 5/6), a direction one bin off (adjacent credit), an exact hit.
COMPLETIONS = ["<think>x</think><answer>table, chair, lamp, sofa</answer>",
               "<think>x</think><answer>right</answer>",
               "<think>x</think><answer>chair, table, lamp, sofa</answer>"]
CELLS = [json.dumps(ORDER), DIRECTION, json.dumps(ORDER)]  # parquet holds JSON text; a dict is accepted too


def _config(tmp_path, profile: str | None):
    """A run config as a user writes it: the bundled paper run, with `reward.profile` when given."""
    path = tmp_path / f"run_{profile}.yaml"
    text = f"base: {CONFIG_DIR / 'qwen2.5-vl-3b.yaml'}\nname: profile-{profile}\n"
    if profile is not None:
        text += f"reward:\n  profile: {profile}\n"
    path.write_text(text)
    return path


def _accuracy(cfg) -> list[float]:
    """The accuracy reward of COMPLETIONS at the last step, as the trainer calls it."""
    funcs, _ = reward_functions(cfg.reward)
    state = SimpleNamespace(global_step=100, max_steps=100)
    return funcs[0](prompts=["q"] * 3, completions=COMPLETIONS, verifier=CELLS, trainer_state=state)


def test_the_profile_of_the_config_reaches_the_accuracy_reward(tmp_path):
    paper_cfg = load_config(_config(tmp_path, None))
    strict_cfg = load_config(_config(tmp_path, "strict"))
    assert paper_cfg.reward.profile == "paper" and load_config("qwen2.5-vl-7b").reward.profile == "paper"
    assert strict_cfg.reward.profile == "strict"
    paper, strict = _accuracy(paper_cfg), _accuracy(strict_cfg)
    specs = [ORDER, DIRECTION, ORDER]
    k = Sharpness.from_config(paper_cfg.reward)(100, 100)
    phi = paper_cfg.reward.phi_config()
    # paper: the specs as generated, exactly; strict: the profiled specs, exactly
    assert paper == [r.accuracy_reward for r in verifiers.verify_batch(specs, COMPLETIONS, k, phi_config=phi)]
    profiled = [verifiers.apply_profile(s, "strict") for s in specs]
    assert strict == [r.accuracy_reward for r in verifiers.verify_batch(profiled, COMPLETIONS, k, phi_config=phi)]
    assert strict[0] < paper[0] and strict[1] < paper[1]  # partial credit shrinks
    assert strict[2] == paper[2] == 1.0  # an exact answer keeps the full reward
    # The run folder's train_config.json is the config's JSON: it records the profile and reads back.
    saved = json.loads(strict_cfg.model_dump_json())
    assert saved["reward"]["profile"] == "strict"
    assert config_from_dict(saved).reward.profile == "strict"


def test_an_unknown_profile_is_one_line_naming_the_known_ones(tmp_path):
    bad = _config(tmp_path, "lenient")
    with pytest.raises(ConfigError) as err:
        load_config(bad)
    message = str(err.value)
    assert "\n" not in message and str(bad) in message and "'lenient'" in message
    assert message.endswith("known: " + ", ".join(verifiers.PROFILES))
    # the same through `numerical3d train --plan` (config checks, no model), in a subprocess
    run = subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "train", "--config",
                          str(bad), "--plan"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "reward.profile" in lines[0] and "known: paper, strict" in lines[0]


def test_reward_command_takes_the_profile(tmp_path):
    """`numerical3d reward --profile` scores as the training run with that profile does."""
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps({"verifier": s, "completion": c}) + "\n"
                           for s, c in zip([ORDER, DIRECTION, ORDER], COMPLETIONS)))

    def scores(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "reward", str(src),
                               "--k", "100", *args], capture_output=True, text=True, timeout=300)

    paper, strict, bad = scores(), scores("--profile", "strict"), scores("--profile", "lenient")
    assert paper.returncode == strict.returncode == 0, paper.stderr + strict.stderr
    r_paper = [json.loads(line)["accuracy_reward"] for line in paper.stdout.splitlines()]
    r_strict = [json.loads(line)["accuracy_reward"] for line in strict.stdout.splitlines()]
    specs = [ORDER, DIRECTION, ORDER]
    assert r_paper == [r.accuracy_reward for r in verifiers.verify_batch(specs, COMPLETIONS, 100.0)]
    profiled = [verifiers.apply_profile(s, "strict") for s in specs]
    assert r_strict == [r.accuracy_reward for r in verifiers.verify_batch(profiled, COMPLETIONS, 100.0)]
    assert r_strict[0] < r_paper[0] and r_strict[1] < r_paper[1] and r_strict[2] == r_paper[2] == 1.0
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: --profile 'lenient': unknown verifier profile; known: paper, strict"]
