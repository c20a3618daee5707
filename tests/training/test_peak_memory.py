"""The run's own peak GPU memory reaches the log history (what gpu_smoke.sh reports), and nothing
is added without CUDA."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from numerical3d.training.peak_memory import PeakMemory


def test_peak_memory_is_added_to_the_last_log_entry_only_with_cuda(monkeypatch):
    state = SimpleNamespace(log_history=[{"loss": 1.0, "step": 1}])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    PeakMemory().on_log(None, state, None, logs={"loss": 1.0})
    assert state.log_history == [{"loss": 1.0, "step": 1}]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: 3 * (1 << 30))
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda: 3.5 * (1 << 30))
    state.log_history.append({"loss": 0.5, "step": 2})
    PeakMemory().on_log(None, state, None, logs={"loss": 0.5})
    assert state.log_history[0] == {"loss": 1.0, "step": 1}
    assert state.log_history[1] == {"loss": 0.5, "step": 2, "gpu/peak_allocated_mib": 3072.0, "gpu/peak_reserved_mib": 3584.0}
