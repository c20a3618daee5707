"""TRL reward functions: SNRA accuracy from each row's verifier spec, binary accuracy, format.

TRL calls a reward function with the prompts, the completions, every dataset column as a keyword
(so the `verifier` column arrives as one spec per completion, a dict or its JSON text) and
`trainer_state`, from which the sharpness k(t) is read: t = global_step, T = max_steps. Every
function returns one float per completion; the trainer combines them with weights
(1 - lambda, lambda) into R (TRL's `reward_weights`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numerical3d import verifiers
from numerical3d.verifiers.schedules import Schedule
from numerical3d.verifiers.scores import angle_difference, nearest_classes

from numerical3d.training.config import RewardConfig


def completion_text(completion: Any) -> str:
    """The text of one completion: a plain string, or TRL's conversational list of messages.

    Anything else (None, bytes that are not UTF-8, a number, a mapping, content without text) has no
    text a verifier could read: it is the empty answer, unparseable, scored as such, never an error."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, bytes):
        return completion.decode("utf-8", errors="replace")
    if isinstance(completion, list):
        parts = []
        for message in completion:
            content = message.get("content", "") if isinstance(message, dict) else message
            if isinstance(content, list):
                parts.extend(t for c in content if isinstance(c, dict) and isinstance(t := c.get("text"), str))
            elif isinstance(content, str):
                parts.append(content)
        return "".join(parts)
    return ""


def as_spec(value: Any) -> dict[str, Any]:
    """A verifier spec from a dataset cell (a dict, or its JSON text as stored in parquet)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"verifier column holds text that is not JSON: {value[:80]!r}") from exc
    if not isinstance(value, dict) or "kind" not in value:
        raise ValueError(f"verifier column must hold a spec dict with a 'kind', got {value!r:.80}")
    return value


@dataclass(frozen=True)
class Sharpness:
    """k(t) from the trainer's progress: the configured schedule, built once per run and shared by
    the accuracy reward (which trains with it) and the trainer (which logs it as `ap/k`)."""

    schedule: Schedule = field(default_factory=verifiers.SigmoidSchedule)

    @classmethod
    def from_config(cls, cfg: RewardConfig) -> "Sharpness":
        return cls(verifiers.make_schedule(cfg.schedule_config()))

    def __call__(self, step: float, total: float) -> float:
        return self.schedule(step, total)

    def at(self, trainer_state: Any | None) -> float:
        """k for a `transformers.TrainerState` (t = global_step, T = max_steps); k(0) without one."""
        if trainer_state is None:
            return self(0, 1)
        return self(trainer_state.global_step, max(int(trainer_state.max_steps or 0), 1))


def _binary_correct(spec: dict[str, Any], result: Any, cfg: RewardConfig) -> float:
    """S1's 0-1 reward: the answer is right, within a tolerance for numbers, angles and coordinates.

    Angles use the verifiers' own wrapped difference (350 and -10 degrees are one answer); a
    direction item with a true angle counts the answer's class (an angle falls in the class whose
    centre is nearest), since a class name is as exact as such an answer gets; other discrete kinds
    need the full verifier score V = 1."""
    if result.parsed is None:
        return 0.0
    kind = spec["kind"]
    if kind == "numeric":
        answer, parsed = float(spec["answer"]), float(result.parsed)
        if spec.get("error") == "angular":
            return 1.0 if angle_difference(parsed, answer) <= cfg.binary_angle_tol else 0.0
        return 1.0 if abs(parsed - answer) <= cfg.binary_rel_tol * abs(answer) else 0.0
    if kind == "grounding":
        y = np.asarray(spec["answer"], dtype=np.float64)
        norm = float(np.linalg.norm(y)) or 1.0  # a zero answer vector: absolute error
        rel = float(np.linalg.norm(np.asarray(result.parsed, dtype=np.float64) - y)) / norm
        return 1.0 if rel <= cfg.binary_grounding_tol else 0.0
    if kind == "direction" and "angle" in spec:
        s = verifiers.validate_spec(spec)
        truth = s["classes"].index(s["answer"])
        if isinstance(result.parsed, str):
            return 1.0 if result.parsed == s["answer"] else 0.0
        return 1.0 if nearest_classes(float(result.parsed), s["class_angles"]) == {truth} else 0.0
    return 1.0 if result.score is not None and result.score >= 1.0 - 1e-9 else 0.0


class AccuracyReward:
    """Accuracy reward r of each completion: SNRA (or tanh, or binary) of the verifier error.

    Each spec is scored under the run's verifier profile (`reward.profile`: "paper" keeps the specs
    as generated, "strict" pays a guess less; see `verifiers.profiles`).
    Also logs the mean SNRA reward at the current k as `ap/snra_mean`, whatever operator trains,
    so runs with different operators can be compared on one curve, and keeps S1's binary reward
    of the last batch in `binary` (the trainer gathers it for the plain-GRPO diagnostics).
    """

    __name__ = "accuracy"

    def __init__(self, cfg: RewardConfig, sharpness: Sharpness | None = None):
        self.cfg = cfg
        self.sharpness = sharpness or Sharpness.from_config(cfg)
        self.phi = cfg.phi_config()  # eta calibrated at the run's own terminal sharpness
        # binary's reward is S1's tolerance rule below, not an operator of the verifier error
        self.operator = "snra" if cfg.operator == "binary" else cfg.operator
        self.binary: list[float] = []  # S1's reward of the last batch, whatever operator trains
        self.profile = cfg.profile

    def specs(self, verifier: Sequence[Any]) -> list[dict[str, Any]]:
        """Each row's spec under the run's profile. Rows of one cell (a group's completions share
        their prompt's) share one spec object, so it is decoded, profiled and validated once."""
        cache: dict[Any, dict[str, Any]] = {}
        out = []
        for v in verifier:
            key = v if isinstance(v, str) else id(v)
            spec = cache.get(key)
            if spec is None:
                spec = as_spec(v)
                if self.profile != "paper":  # "paper" is the spec as generated
                    spec = verifiers.apply_profile(spec, self.profile)
                cache[key] = spec
            out.append(spec)
        return out

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        verifier: Sequence[Any],
        trainer_state: Any | None = None,
        log_metric: Any | None = None,
        **_: Any,
    ) -> list[float]:
        k = self.sharpness.at(trainer_state)
        specs = self.specs(verifier)
        texts = [completion_text(c) for c in completions]
        results = verifiers.verify_batch(specs, texts, k, operator=self.operator, phi_config=self.phi)
        r = [res.accuracy_reward for res in results]
        if log_metric is not None:
            snra = r if self.operator == "snra" else verifiers.snra(k, np.array([res.error for res in results]))
            log_metric("ap/snra_mean", float(np.mean(snra)))
        self.binary = [_binary_correct(s, res, self.cfg) for s, res in zip(specs, results)]
        return list(self.binary) if self.cfg.operator == "binary" else r


class FormatReward:
    """r_fmt in {0, 1}: the completion is `<think>...</think><answer>...</answer>`."""

    __name__ = "format"

    def __call__(self, completions: Sequence[Any], **_: Any) -> list[float]:
        return [float(verifiers.format_reward(completion_text(c))) for c in completions]


def reward_functions(cfg: RewardConfig, sharpness: Sharpness | None = None) -> tuple[list[Any], list[float]]:
    """The (accuracy, format) reward functions and their weights (1 - lambda, lambda)."""
    return [AccuracyReward(cfg, sharpness), FormatReward()], [1.0 - cfg.format_weight, cfg.format_weight]
