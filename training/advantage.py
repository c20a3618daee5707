"""The AP-GRPO advantage and its diagnostics, as pure functions on tensors.

Paper eq. (apgrpo): A'_i = clip(z(R)_i * r_i^alpha, -c, c), where z(R) is the group-normalised
total reward R = (1 - lambda) r + lambda r_fmt and r the SNRA accuracy reward. The relative term is
computed exactly as TRL 1.16's GRPOTrainer does (nan-aware mean, Bessel-corrected std, epsilon
1e-4 added to the std, unscorable NaN rows get advantage 0), so that alpha = 0 without clipping
reproduces TRL's own advantages bit for bit and the ablations differ only in the absolute term.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

Mode = Literal["ap", "grpo", "absolute"]
ScaleRewards = Literal["group", "batch", "none"]
TRL_EPS = 1e-4  # the epsilon TRL adds to the std


def _nanstd(x: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Bessel-corrected std ignoring NaNs (same arithmetic as trl.trainer.utils.nanstd)."""
    mean = torch.nanmean(x, dim=dim, keepdim=True)
    var = torch.nanmean((x - mean) ** 2, dim=dim, keepdim=True)
    count = torch.sum(~torch.isnan(x), dim=dim, keepdim=True)
    correction = torch.where(count > 1, count / (count - 1), torch.full_like(var, float("nan")))
    std = torch.sqrt(var * correction)
    return std.squeeze(dim) if dim is not None else std.reshape(())


def relative_advantage(
    total: torch.Tensor, num_generations: int, scale_rewards: ScaleRewards = "group"
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO's relative term (R - mean_g R) / (std R + eps); returns (advantage, std per sample).

    `total` is flat, `num_generations` consecutive samples per prompt (TRL's layout). NaN rows
    (unscorable) are left out of the group statistics and come back as NaN.
    """
    if total.dim() != 1 or total.numel() % num_generations:
        raise ValueError(f"rewards of shape {tuple(total.shape)} do not split into groups of {num_generations}")
    grouped = total.view(-1, num_generations)
    mean = torch.nanmean(grouped, dim=1).repeat_interleave(num_generations)
    if scale_rewards == "batch":
        std = (_nanstd(total) if total.numel() > 1 else torch.zeros(())).expand_as(total)
    elif num_generations > 1:
        std = _nanstd(grouped, dim=1).repeat_interleave(num_generations)
    else:
        std = torch.zeros_like(total)
    adv = total - mean
    if scale_rewards != "none":
        adv = adv / (std + TRL_EPS)
    return adv, std


def ap_advantage(
    total: torch.Tensor,
    accuracy: torch.Tensor,
    num_generations: int,
    *,
    alpha: float = 1.0,
    clip: float | None = 1.5,
    mode: Mode = "ap",
    scale_rewards: ScaleRewards = "group",
) -> torch.Tensor:
    """Advantages for one gathered batch (flat, groups of `num_generations` consecutive samples).

    mode "ap": clip(z(R) * r^alpha); "grpo": clip(z(R)) (TRL's); "absolute": clip(r^alpha), the
    paper's "pure absolute scalar" ablation (no relative term). `clip=None` disables clipping.
    NaN accuracy (a row no accuracy function scored) counts as r = 0; unscorable rows get 0.
    """
    if accuracy.shape != total.shape:
        raise ValueError(f"accuracy shape {tuple(accuracy.shape)} != total shape {tuple(total.shape)}")
    absolute = torch.nan_to_num(accuracy, nan=0.0).clamp(0.0, 1.0) ** alpha
    if mode == "absolute":
        adv = torch.where(torch.isnan(total), torch.zeros_like(total), absolute)
    else:
        adv, _ = relative_advantage(total, num_generations, scale_rewards)
        if mode == "ap":
            adv = adv * absolute
        elif mode != "grpo":
            raise ValueError(f"unknown advantage mode {mode!r}; choose ap, grpo or absolute")
    adv = torch.nan_to_num(adv, nan=0.0)
    if clip is not None:
        adv = adv.clamp(-clip, clip)
    return adv


@dataclass(frozen=True)
class AdvantageStats:
    """The per-step training diagnostics logged under `ap/...`."""

    adv_var: float  # mean over groups of the population variance of the advantages (paper's Adv. Var.)
    adv_mean: float  # mean advantage over the batch: 0 for GRPO's, not for AP's (r^alpha reweights) or absolute's
    collapse_frac: float  # fraction of groups with no learning signal in the trained advantage
    near_miss_frac: float  # fraction of samples with accuracy in [near_miss, 1): imperfect but close
    nonzero_adv_frac: float  # fraction of samples with a non-zero advantage (the trained one)
    nonzero_adv_frac_grpo: float  # same under plain GRPO's relative advantage on the same rewards
    nonzero_adv_frac_binary_grpo: float | None = None  # same under standard GRPO on S1's binary rewards

    def as_metrics(self, prefix: str = "ap/") -> dict[str, float]:
        return {f"{prefix}{k}": float(v) for k, v in self.__dict__.items() if v is not None}


def grpo_nonzero_frac(total: torch.Tensor, num_generations: int) -> float:
    """Fraction of samples plain GRPO (TRL's z-score of `total`) gives a non-zero advantage: those
    of groups whose rewards are not all identical, off their group's mean (unscorable rows excluded)."""
    adv = ap_advantage(total, torch.zeros_like(total), num_generations, alpha=0.0, clip=None, mode="grpo")
    rewards = total.view(-1, num_generations)
    identical = (rewards == rewards[:, :1]).all(dim=1) | torch.isnan(rewards).all(dim=1)
    live = (~identical).repeat_interleave(num_generations)
    return ((adv != 0) & live).float().mean().item()


def advantage_stats(
    advantages: torch.Tensor,
    grpo_advantages: torch.Tensor,
    total: torch.Tensor,
    accuracy: torch.Tensor,
    num_generations: int,
    *,
    near_miss: float = 0.5,
    mode: Mode = "ap",
) -> AdvantageStats:
    """Diagnostics of one gathered batch, for the advantage `mode` that produced `advantages`.

    With a relative term (modes "ap", "grpo") a group has collapsed when its total rewards R are
    identical (float32 rounding leaves |A| up to ~6e-4 there, so a threshold on |A| undercounts) or
    when every advantage is exactly 0 (AP with r = 0 throughout); samples of collapsed groups never
    count as having a non-zero advantage. The "absolute" mode has no group baseline: each sample's
    advantage is its own r^alpha, so a group has collapsed only when every advantage is 0. The plain
    GRPO figure is always the relative rule's.
    """
    groups = advantages.view(-1, num_generations)
    rewards = total.view(-1, num_generations)
    identical = (rewards == rewards[:, :1]).all(dim=1) | torch.isnan(rewards).all(dim=1)
    live = (~identical).repeat_interleave(num_generations)
    nonzero = advantages != 0
    if mode != "absolute":
        nonzero = nonzero & live
    acc = accuracy[~torch.isnan(accuracy)]
    near = ((acc >= near_miss) & (acc < 1.0)).float()
    return AdvantageStats(
        adv_var=groups.var(dim=1, unbiased=False).mean().item(),
        adv_mean=advantages.mean().item(),
        collapse_frac=(~nonzero.view(-1, num_generations).any(dim=1)).float().mean().item(),
        near_miss_frac=near.mean().item() if near.numel() else 0.0,
        nonzero_adv_frac=nonzero.float().mean().item(),
        nonzero_adv_frac_grpo=((grpo_advantages != 0) & live).float().mean().item(),
    )
