"""AP-GRPO on TRL 1.16: GRPOTrainer with the absolute-preserving advantage.

TRL has no hook for advantages. `_calculate_rewards` returns the per-function rewards gathered
from all processes (so groups are whole); this subclass keeps that tensor, lets TRL run its whole
`_generate_and_score_completions` unchanged, then recomputes the advantages from the kept rewards
with `training.advantage.ap_advantage` and swaps this process's slice into the output. Everything
else (generation, reference model, loss, vLLM, DeepSpeed) is TRL's own, with
`training.video.VideoGRPOMixin` adding video prompts beside TRL's images.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from trl import GRPOTrainer

from numerical3d.training.advantage import advantage_stats, ap_advantage, grpo_nonzero_frac
from numerical3d.training.config import AdvantageConfig
from numerical3d.training.pins import check_trl
from numerical3d.training.rewards import Sharpness
from numerical3d.training.video import VideoGRPOMixin


class APGRPOTrainer(VideoGRPOMixin, GRPOTrainer):
    """GRPOTrainer whose advantage is clip(z(R) * r^alpha, -c, c) (or a configured ablation).

    `accuracy_func` names the reward function whose output is the accuracy reward r (the absolute
    term); `sharpness` gives k(t) for the `ap/k` log.
    """

    def __init__(
        self,
        *args: Any,
        advantage: AdvantageConfig | None = None,
        sharpness: Sharpness | None = None,
        accuracy_func: str = "accuracy",
        **kwargs: Any,
    ):
        check_trl()  # the overrides below and in VideoGRPOMixin follow one TRL minor version
        super().__init__(*args, **kwargs)
        self.advantage_config = advantage or AdvantageConfig()
        self.sharpness = sharpness or Sharpness()
        if accuracy_func not in self.reward_func_names:
            raise ValueError(f"no reward function named {accuracy_func!r} among {self.reward_func_names}")
        self._accuracy_index = self.reward_func_names.index(accuracy_func)
        if self.multi_objective_aggregation != "sum_then_normalize":
            raise ValueError("AP-GRPO needs multi_objective_aggregation='sum_then_normalize' (R is a weighted sum)")
        self._gathered_rewards: torch.Tensor | None = None
        self._gathered_binary: torch.Tensor | None = None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._gathered_rewards = rewards
        # S1's binary rewards of the same completions, gathered in the same order as TRL's rewards,
        # for the "standard GRPO on binary rewards" diagnostic.
        binary = getattr(self.reward_funcs[self._accuracy_index], "binary", None)
        self._gathered_binary = None
        if binary is not None:  # the same reward functions on every process: all gather or none
            from accelerate.utils import gather

            self._gathered_binary = gather(torch.tensor(binary, dtype=torch.float32, device=rewards.device))
        return rewards

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        output["advantages"] = self._ap_advantages(output["advantages"], len(inputs))
        return output

    def _ap_advantages(self, trl_advantages: torch.Tensor, local_size: int) -> torch.Tensor:
        """This process's AP advantages, from the rewards of the whole gathered batch; logs ap/*."""
        mode = "train" if self.model.training else "eval"
        group = self.num_generations if mode == "train" else self.num_generations_eval
        rewards = self._gathered_rewards
        self._gathered_rewards = None
        weights = self.reward_weights.to(rewards.device)
        total = (rewards * weights.unsqueeze(0)).nansum(dim=1)
        total[torch.isnan(rewards).all(dim=1)] = torch.nan
        accuracy = rewards[:, self._accuracy_index]
        cfg = self.advantage_config
        scale = self.scale_rewards
        advantages = ap_advantage(
            total, accuracy, group, alpha=cfg.alpha, clip=cfg.clip, mode=cfg.mode, scale_rewards=scale
        )
        grpo = ap_advantage(total, accuracy, group, alpha=0.0, clip=None, mode="grpo", scale_rewards=scale)
        stats = advantage_stats(advantages, grpo, total, accuracy, group, near_miss=cfg.near_miss, mode=cfg.mode)
        binary = getattr(self, "_gathered_binary", None)
        if binary is not None and binary.shape == accuracy.shape:  # R with S1's reward in place of r
            per_func = rewards.clone()
            per_func[:, self._accuracy_index] = binary
            binary_total = (per_func * weights.unsqueeze(0)).nansum(dim=1)
            binary_total[torch.isnan(rewards).all(dim=1)] = torch.nan
            stats = dataclasses.replace(stats, nonzero_adv_frac_binary_grpo=grpo_nonzero_frac(binary_total, group))
        metrics = self._metrics[mode]
        metrics["ap/k"].append(self.sharpness.at(self.state))
        for name, value in stats.as_metrics().items():
            metrics[name].append(value)
        # TRL logged its own advantages for the completions table; show the ones that train.
        logged = self._logs["advantages"]
        for _ in range(min(len(advantages), len(logged))):
            logged.pop()
        logged.extend(advantages.tolist())
        start = self.accelerator.process_index * local_size
        return advantages[start : start + local_size].to(trl_advantages.device)
