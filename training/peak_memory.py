"""This run's own peak GPU memory, logged with every log line (`gpu/peak_allocated_mib`,
`gpu/peak_reserved_mib`): torch's allocator counts what this process held, where nvidia-smi
counts every process on the card (another job, vLLM's share) and samples between peaks."""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

MIB = 1 << 20


class PeakMemory(TrainerCallback):
    """Adds the process's peak CUDA memory since the start to the log entry just written."""

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        import torch

        if not torch.cuda.is_available() or not state.log_history:
            return
        state.log_history[-1].update({
            "gpu/peak_allocated_mib": round(torch.cuda.max_memory_allocated() / MIB, 1),
            "gpu/peak_reserved_mib": round(torch.cuda.max_memory_reserved() / MIB, 1),
        })
