"""The AP-GRPO advantage on hand-computed groups, its ablations, and equivalence with TRL's GRPO."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from numerical3d.training.advantage import advantage_stats, ap_advantage, relative_advantage

# Group [1, 0, 0, 0]: mean 0.25, Bessel std sqrt((0.75^2 + 3 * 0.25^2) / 3) = 0.5.
TOTAL = torch.tensor([1.0, 0.0, 0.0, 0.0])
Z = [0.75 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001]
ACC = torch.tensor([1.0, 0.5, 0.5, 0.0])


def test_relative_term_hand_computed():
    adv, std = relative_advantage(TOTAL, 4)
    assert std.tolist() == pytest.approx([0.5] * 4)
    assert adv.tolist() == pytest.approx(Z, rel=1e-6)


@pytest.mark.parametrize(
    "alpha, expected",
    [
        (0.0, Z),
        (1.0, [Z[0], Z[1] * 0.5, Z[2] * 0.5, 0.0]),
        (2.0, [Z[0], Z[1] * 0.25, Z[2] * 0.25, 0.0]),
    ],
)
def test_alpha_without_clip(alpha, expected):
    adv = ap_advantage(TOTAL, ACC, 4, alpha=alpha, clip=None)
    assert adv.tolist() == pytest.approx(expected, rel=1e-6)


def test_clipping_caps_both_signs():
    adv = ap_advantage(TOTAL, ACC, 4, alpha=1.0, clip=1.0)
    assert adv.tolist() == pytest.approx([1.0, Z[1] * 0.5, Z[2] * 0.5, 0.0], rel=1e-6)
    # Negative side: one low outlier (z = -0.75 / 0.5001), accuracy 1 everywhere.
    low = ap_advantage(torch.tensor([0.0, 1.0, 1.0, 1.0]), torch.ones(4), 4, alpha=1.0, clip=1.0)
    assert low[0].item() == pytest.approx(-1.0)
    assert low[1:].tolist() == pytest.approx([0.25 / 0.5001] * 3, rel=1e-6)
    # The paper's c = 1.5 bites on larger groups: one success among 8 has z = 0.875 / 0.3536 = 2.47.
    eight = torch.tensor([1.0] + [0.0] * 7)
    assert ap_advantage(eight, eight, 8)[0].item() == pytest.approx(1.5)


def test_all_equal_group_gives_zero_and_counts_as_collapse():
    total = torch.tensor([0.3, 0.3, 0.3, 0.3, 1.0, 0.0, 0.6, 0.6])
    acc = torch.tensor([0.3, 0.3, 0.3, 0.3, 1.0, 0.0, 0.6, 0.6])
    adv = ap_advantage(total, acc, 4)
    assert adv[:4].tolist() == [0.0] * 4
    grpo = ap_advantage(total, acc, 4, alpha=0.0, clip=None, mode="grpo")
    stats = advantage_stats(adv, grpo, total, acc, 4)
    assert stats.collapse_frac == 0.5
    # Second group: AP keeps 1.0 and the 0.6s non-zero, the 0.0 sample (r = 0) loses its advantage.
    assert stats.nonzero_adv_frac == pytest.approx(3 / 8)
    assert stats.nonzero_adv_frac_grpo == pytest.approx(4 / 8)
    assert stats.near_miss_frac == pytest.approx(2 / 8)  # the two 0.6s: imperfect but >= 0.5


def test_identical_rewards_collapse_despite_float32_rounding():
    """8 equal rewards: TRL's float32 arithmetic leaves |A| above 1e-6, yet no sample is preferred."""
    r = torch.full((8,), 0.7)
    total = torch.cat([r, torch.tensor([1.0, 0.0, 0.5, 0.5, 0.2, 0.9, 0.3, 0.3])])
    acc = total.clone()
    grpo = ap_advantage(total, acc, 8, alpha=0.0, clip=None, mode="grpo")
    assert grpo[:8].abs().max() > 1e-6  # the rounding residue the old threshold counted as signal
    stats = advantage_stats(ap_advantage(total, acc, 8), grpo, total, acc, 8)
    assert stats.collapse_frac == 0.5
    assert stats.nonzero_adv_frac_grpo == 0.5


def test_all_zero_rewards():
    zeros = torch.zeros(8)
    for mode in ("ap", "grpo", "absolute"):
        assert ap_advantage(zeros, zeros, 4, mode=mode).tolist() == [0.0] * 8
    stats = advantage_stats(zeros, zeros, zeros, zeros, 4)
    assert stats.collapse_frac == 1.0 and stats.adv_var == 0.0 and stats.nonzero_adv_frac == 0.0


def test_adv_var_is_mean_group_population_variance():
    adv = torch.tensor([1.0, -1.0, 0.0, 0.0, 2.0, 2.0, 2.0, 2.0])
    stats = advantage_stats(adv, adv, torch.arange(8.0), torch.zeros(8), 4)
    assert stats.adv_var == pytest.approx((0.5 + 0.0) / 2)


def test_pure_absolute_is_clipped_r_power_alpha():
    acc = torch.tensor([1.0, 0.5, 0.25, 0.0])
    assert ap_advantage(TOTAL, acc, 4, mode="absolute", alpha=2.0).tolist() == [1.0, 0.25, 0.0625, 0.0]
    assert ap_advantage(TOTAL, acc, 4, mode="absolute", alpha=1.0, clip=0.3).tolist() == pytest.approx([0.3, 0.3, 0.25, 0.0])


def test_unscorable_rows_get_zero_and_leave_the_baseline():
    total = torch.tensor([1.0, 0.0, float("nan"), 0.0])
    adv = ap_advantage(total, torch.tensor([1.0, 0.0, float("nan"), 0.0]), 4, alpha=0.0, clip=None)
    mean, std = 1 / 3, math.sqrt(((2 / 3) ** 2 + 2 * (1 / 3) ** 2) / 2)
    assert adv.tolist() == pytest.approx([(1 - mean) / (std + 1e-4), -mean / (std + 1e-4), 0.0, -mean / (std + 1e-4)])


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match="groups of 3"):
        ap_advantage(torch.zeros(4), torch.zeros(4), 3)
    with pytest.raises(ValueError, match="accuracy shape"):
        ap_advantage(torch.zeros(4), torch.zeros(3), 2)
    with pytest.raises(ValueError, match="unknown advantage mode"):
        ap_advantage(torch.zeros(4), torch.zeros(4), 2, mode="pure")


def _trl_advantages(rewards_per_func: torch.Tensor, weights: torch.Tensor, g: int, scale: str) -> torch.Tensor:
    """TRL 1.16's sum_then_normalize advantage, transcribed line by line with TRL's own nanstd."""
    from trl.trainer.utils import nanstd

    unscorable = torch.isnan(rewards_per_func).all(dim=1)
    rewards = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
    rewards[unscorable] = torch.nan
    mean = torch.nanmean(rewards.view(-1, g), dim=1).repeat_interleave(g, dim=0)
    if scale in ("group", "none"):
        std = nanstd(rewards.view(-1, g), dim=1).repeat_interleave(g, dim=0)
    else:
        std = nanstd(rewards).expand_as(rewards)
    adv = rewards - mean
    if scale != "none":
        adv = adv / (std + 1e-4)
    return torch.nan_to_num(adv, nan=0.0)


reward_value = st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 1.0, float("nan")]))


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    g=st.sampled_from([2, 4, 8]),
    groups=st.integers(1, 4),
    lam=st.floats(0.0, 1.0),
    scale=st.sampled_from(["group", "batch", "none"]),
)
def test_alpha_zero_no_clip_equals_trl(data, g, groups, lam, scale):
    n = g * groups
    acc = torch.tensor(data.draw(st.lists(reward_value, min_size=n, max_size=n)), dtype=torch.float32)
    fmt = torch.tensor(data.draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=n, max_size=n)))
    fmt[torch.isnan(acc) & (torch.arange(n) % 3 == 0)] = torch.nan  # some rows unscorable by every function
    per_func = torch.stack([acc, fmt], dim=1)
    weights = torch.tensor([1.0 - lam, lam])
    expected = _trl_advantages(per_func, weights, g, scale)
    total = (per_func * weights).nansum(dim=1)
    total[torch.isnan(per_func).all(dim=1)] = torch.nan
    ours = ap_advantage(total, acc, g, alpha=0.0, clip=None, mode="ap", scale_rewards=scale)
    torch.testing.assert_close(ours, expected, rtol=0, atol=0, equal_nan=False)
    grpo = ap_advantage(total, acc, g, alpha=1.0, clip=None, mode="grpo", scale_rewards=scale)
    torch.testing.assert_close(grpo, expected, rtol=0, atol=0)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), alpha=st.sampled_from([0.0, 1.0, 2.0]), clip=st.floats(0.1, 3.0))
def test_ap_bounded_and_sign_preserving(data, alpha, clip):
    n = 8
    acc = torch.tensor(data.draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n)))
    total = 0.9 * acc + 0.1 * torch.tensor(data.draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=n, max_size=n)))
    ap = ap_advantage(total, acc, 4, alpha=alpha, clip=clip)
    z = ap_advantage(total, acc, 4, alpha=0.0, clip=None)
    assert bool((ap.abs() <= clip + 1e-6).all())
    assert bool((ap * z >= 0).all())  # the absolute term never flips the relative ranking's sign
    assert bool((ap.abs() <= z.abs() + 1e-6).all())  # r^alpha <= 1 only shrinks


def test_absolute_mode_diagnostics_count_its_own_advantages():
    """Absolute advantages r^alpha have no group baseline: identical rewards are not a collapse there."""
    total = torch.tensor([0.9, 0.9, 0.9, 0.9, 0.0, 0.0, 0.0, 0.0, 1.0, 0.5, 0.0, 0.5])
    acc = total.clone()
    adv = ap_advantage(total, acc, 4, mode="absolute")
    grpo = ap_advantage(total, acc, 4, alpha=0.0, clip=None, mode="grpo")
    stats = advantage_stats(adv, grpo, total, acc, 4, mode="absolute")
    assert adv.tolist() == pytest.approx(total.tolist())
    assert stats.collapse_frac == pytest.approx(1 / 3)  # only the all-zero group has no signal
    assert stats.nonzero_adv_frac == pytest.approx(7 / 12)  # 4 + 0 + 3 non-zero samples
    assert stats.nonzero_adv_frac_grpo == pytest.approx(2 / 12)  # plain GRPO: the mixed group, off its mean
    assert stats.adv_mean == pytest.approx(total.mean().item())
    # The same advantages read with the relative rule would claim two collapsed groups.
    relative = advantage_stats(adv, grpo, total, acc, 4, mode="ap")
    assert relative.collapse_frac == pytest.approx(2 / 3)


def test_mean_advantage_is_logged_and_nonzero_for_ap():
    """GRPO's advantages sum to ~0 per group; AP's r^alpha reweighting does not, and that is logged."""
    acc = torch.tensor([1.0, 0.5, 0.5, 0.0])
    grpo = ap_advantage(TOTAL, acc, 4, alpha=0.0, clip=None, mode="grpo")
    ap = ap_advantage(TOTAL, acc, 4)
    assert advantage_stats(grpo, grpo, TOTAL, acc, 4, mode="grpo").adv_mean == pytest.approx(0.0, abs=1e-6)
    stats = advantage_stats(ap, grpo, TOTAL, acc, 4)
    assert stats.adv_mean == pytest.approx((1.5 * 0 + Z[0] + 0.5 * Z[1] + 0.5 * Z[2]) / 4, rel=1e-5)
    assert stats.adv_mean > 0.1
    assert set(stats.as_metrics()) >= {"ap/adv_mean", "ap/collapse_frac"}


def test_alpha_0_config_computes_s1s_advantages():
    """The paper's alpha = 0 row and S1 are one run: same rewards, same advantages."""
    from numerical3d.training.config import load_config

    a0, s1 = load_config("ablations/alpha_0").advantage, load_config("ablations/s1_grpo_binary").advantage
    gen = torch.Generator().manual_seed(0)
    acc = (torch.rand(32, generator=gen) > 0.5).float()  # binary rewards
    total = 0.9 * acc + 0.1 * (torch.rand(32, generator=gen) > 0.3).float()
    ours = ap_advantage(total, acc, 8, alpha=a0.alpha, clip=a0.clip, mode=a0.mode)
    theirs = ap_advantage(total, acc, 8, alpha=s1.alpha, clip=s1.clip, mode=s1.mode)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
    assert ours.abs().max() > 1.5  # unclipped, as standard GRPO


def test_standard_grpo_on_binary_rewards_discards_near_misses():
    """The diagnostic behind the paper's near-miss claim: near misses all score 0 under S1's binary
    reward, so standard GRPO gives their group no advantage, while SNRA's graded rewards keep it."""
    from numerical3d.training.advantage import grpo_nonzero_frac

    snra = torch.tensor([0.9, 0.8, 0.7, 0.6, 1.0, 0.2, 0.2, 0.2])
    binary = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    assert grpo_nonzero_frac(snra, 4) == 1.0
    assert grpo_nonzero_frac(binary, 4) == 0.5  # the first group has collapsed
    with_nan = torch.tensor([1.0, 0.0, float("nan"), 0.0])
    assert grpo_nonzero_frac(with_nan, 4) == 0.75  # the unscorable row gets 0
    stats = advantage_stats(snra, snra, snra, snra, 4)
    assert "ap/nonzero_adv_frac_binary_grpo" not in stats.as_metrics()  # logged only when the trainer has it
