"""SNRA, the tanh operator, sharpness schedules and Phi against hand-computed values."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from numerical3d import verifiers as V
from numerical3d.verifiers.phi import PhiConfig


def test_snra_at_zero_error_is_one():
    assert V.snra(1.0, 0.0) == 1.0
    assert V.snra(100.0, 0.0) == 1.0
    assert np.all(V.snra(5.0, np.zeros(3)) == 1.0)


def test_snra_hand_values():
    # 2 / (1 + e^1) = 0.537882842739...
    assert V.snra(1.0, 1.0) == pytest.approx(2 / (1 + math.e), rel=1e-15)
    assert V.snra(2.0, 0.5) == pytest.approx(0.5378828427399902, rel=1e-15)
    # r = 0.5 exactly where k e = ln 3
    assert V.snra(10.0, math.log(3) / 10) == pytest.approx(0.5, rel=1e-14)


def test_snra_huge_arguments_are_stable():
    e = np.array([0.0, 1e-3, 1.0, 1e6, 1e300, np.inf, np.nan, -1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = V.snra(100.0, e)
        assert V.snra(1e300, 1e300) == 0.0
        assert V.snra(100.0, math.inf) == 0.0
    assert np.all(np.isfinite(r)) and np.all((r >= 0) & (r <= 1))
    assert r[3] == 0.0 and r[4] == 0.0 and r[5] == 0.0
    assert r[6] == 0.0  # NaN error: no reward
    assert r[7] == 1.0  # negative error clamped to 0


def test_snra_torch_matches_numpy():
    e = np.array([0.0, 0.01, 0.3, 50.0, 1e30])
    rt = V.snra(torch.tensor(40.0), torch.tensor(e))
    assert isinstance(rt, torch.Tensor)
    np.testing.assert_allclose(rt.numpy(), V.snra(40.0, e), rtol=1e-12)
    assert not torch.isnan(V.snra(3.0, torch.tensor([float("nan")]))).any()


def test_tanh_operator_equals_one_minus_tanh():
    e = np.linspace(0, 2, 50)
    np.testing.assert_allclose(V.tanh_reward(3.0, e), 1 - np.tanh(3.0 * e), atol=1e-15)
    assert V.tanh_reward(1.0, 0.0) == 1.0
    assert V.tanh_reward(1e9, 1e9) == 0.0


def test_binary_operator():
    assert V.binary_reward(5.0, 0.0) == 1.0 and V.binary_reward(5.0, 1e-12) == 0.0


@given(st.floats(0.01, 1e4), st.floats(0, 1e6), st.floats(0, 1e6))
@settings(max_examples=200, deadline=None)
def test_snra_monotone_non_increasing(k, e1, e2):
    lo, hi = sorted((e1, e2))
    assert V.snra(k, lo) >= V.snra(k, hi)
    assert 0.0 <= V.snra(k, hi) <= 1.0


def test_sigmoid_schedule_midpoint_and_ends():
    assert V.sharpness(500, 1000) == pytest.approx((1.0 + 100.0) / 2)
    assert V.sharpness(50, 100, kmin=0.5, kmax=200) == pytest.approx(100.25)
    # k(0) = 1 + 99 sigmoid(-5)
    assert V.sharpness(0, 100) == pytest.approx(1 + 99 / (1 + math.exp(5)))
    ks = [V.sharpness(t, 100) for t in range(101)]
    assert all(a < b for a, b in zip(ks, ks[1:]))
    assert V.sharpness(10**6, 100) == V.sharpness(100, 100)  # progress is clipped


def test_linear_and_fixed_schedules():
    assert V.sharpness(0, 10, "linear") == 1.0
    assert V.sharpness(10, 10, "linear") == 100.0
    assert V.sharpness(5, 10, "linear", kmin=2, kmax=4) == 3.0
    assert V.sharpness(3, 10, "fixed") == 100.0
    assert V.sharpness(3, 10, "fixed", k=7.0) == 7.0


def test_schedules_from_configs_are_the_ablation_rows():
    rows = {
        "S3": {"name": "fixed", "k": 50.0},
        "S4": {"name": "linear", "kmin": 1.0, "kmax": 100.0},
        "S5": {"name": "sigmoid"},
    }
    ks = {name: V.make_schedule(cfg)(25, 100) for name, cfg in rows.items()}
    assert ks == pytest.approx({"S3": 50.0, "S4": 25.75, "S5": 1 + 99 / (1 + math.exp(2.5))})
    sched = V.make_schedule("linear")
    assert V.make_schedule(sched.to_config()) == sched


@pytest.mark.parametrize("bad", [{"name": "cosine"}, {"name": "sigmoid", "kmin": 0}, {"name": "fixed", "k": -1},
                                 {"name": "linear", "kmin": 5, "kmax": 1}, {"name": "sigmoid", "warmup": 3}])
def test_bad_schedule_configs(bad):
    with pytest.raises(ValueError):
        V.make_schedule(bad)


@pytest.mark.parametrize("eps_r", [1e-2, 1e-3])
@pytest.mark.parametrize("gamma", [1.0, 2.0])
def test_phi_failure_reaches_eps_r_at_kmax(eps_r, gamma):
    cfg = PhiConfig(eps_r=eps_r, gamma=gamma)
    assert V.snra(cfg.kmax, V.phi(0.0, cfg)) == pytest.approx(eps_r, rel=1e-9)
    assert cfg.e_star == pytest.approx(math.log(2 / eps_r - 1) / 100)
    assert cfg.eta() == pytest.approx(cfg.e_star / (-math.log(2 * cfg.eps)) ** gamma)


def test_phi_correct_is_zero_error_and_partial_in_between():
    assert V.phi(1.0) == 0.0
    e_half = V.phi(0.5)
    cfg = V.DEFAULT_PHI
    assert e_half == pytest.approx(cfg.eta() * -math.log(0.5 + cfg.eps))
    assert 0.0 < e_half < V.phi(0.0)
    vs = np.linspace(0, 1, 101)
    es = V.phi(vs)
    assert np.all(np.diff(es) <= 0) and es[-1] == 0.0
    assert V.phi(float("nan")) == V.phi(0.0)


def test_phi_config_validation():
    with pytest.raises(ValueError):
        PhiConfig(eps_r=1.5)
    with pytest.raises(ValueError):
        PhiConfig(gamma=0)
