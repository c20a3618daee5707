"""Benchmark: one training step with the AP advantage vs TRL's own GRPO, on the same setup.

Builds the small synthetic dataset with the pipeline and the tiny Qwen2.5-VL (as
`numerical3d train --preset tiny-cpu` does), then trains the same config with TRL's GRPOTrainer and
with APGRPOTrainer, interleaving runs to share machine noise, and reports the median step time.
It also times the AP advantage hook alone (recompute + diagnostics) on gathered batches of the
sizes a real run sees, which is the whole of the added work per generation.

    python3 benchmarks/bench_training.py [--steps 6] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch


def _trainers(cfg, dataset: str, out: Path):
    from trl import GRPOTrainer

    from numerical3d.training.run import build_trainer
    from numerical3d.training.trainer import APGRPOTrainer

    class PlainGRPO(GRPOTrainer):
        """TRL's trainer, accepting (and ignoring) the AP keyword arguments of build_trainer."""

        def __init__(self, *args, advantage=None, sharpness=None, **kwargs):
            super().__init__(*args, **kwargs)

    return {
        "trl-grpo": lambda i: build_trainer(cfg, dataset, out / f"grpo{i}", trainer_cls=PlainGRPO),
        "ap-grpo": lambda i: build_trainer(cfg, dataset, out / f"ap{i}", trainer_cls=APGRPOTrainer),
    }


def step_times(make, steps: int) -> list[float]:
    trainer = make()
    trainer.train()
    times = [e["step_time"] for e in trainer.state.log_history if "step_time" in e]
    return times[1:]  # the first step pays one-off warm-up


def hook_time(n_completions: int, group: int, repeats: int = 200) -> float:
    """Seconds for the AP hook's arithmetic on one gathered batch (2 reward functions)."""
    from numerical3d.training.advantage import advantage_stats, ap_advantage

    gen = torch.Generator().manual_seed(0)
    rewards = torch.rand(n_completions, 2, generator=gen)
    weights = torch.tensor([0.9, 0.1])
    t0 = time.perf_counter()
    for _ in range(repeats):
        total = (rewards * weights).nansum(dim=1)
        acc = rewards[:, 0]
        adv = ap_advantage(total, acc, group)
        grpo = ap_advantage(total, acc, group, alpha=0.0, clip=None, mode="grpo")
        advantage_stats(adv, grpo, total, acc, group)
    return (time.perf_counter() - t0) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()

    from numerical3d.cli import tiny_dataset
    from numerical3d.training.config import PRESETS, config_from_dict
    from numerical3d.training.tiny import tiny_model_for

    torch.set_num_threads(max(1, torch.get_num_threads()))
    work = Path(tempfile.mkdtemp(prefix="bench-training-"))
    t0 = time.perf_counter()
    dataset = tiny_dataset(work)
    model = str(tiny_model_for(work, dataset, "train"))
    setup = time.perf_counter() - t0
    preset = json.loads(json.dumps(PRESETS["tiny-cpu"]))
    preset["model"]["name_or_path"] = model
    preset["max_steps"] = args.steps
    # Fixed-length completions: both trainers then do identical generation and loss work per step.
    preset["grpo"].update(generation_kwargs={"min_new_tokens": preset["max_completion_length"]}, disable_tqdm=True,
                          log_level="error")
    cfg = config_from_dict(preset)
    makers = _trainers(cfg, dataset, work)
    times: dict[str, list[float]] = {name: [] for name in makers}
    for i in range(args.repeats):
        for name, make in makers.items():
            times[name] += step_times(lambda: make(i), args.steps)
    med = {name: statistics.median(v) for name, v in times.items()}
    overhead = med["ap-grpo"] / med["trl-grpo"] - 1.0

    print(f"setup (pipeline build + tiny model): {setup:.1f} s; torch threads {torch.get_num_threads()}")
    print(f"tiny Qwen2.5-VL, G={cfg.num_generations}, {cfg.per_device_train_batch_size} completions/step, "
          f"max_completion_length={cfg.max_completion_length}, {args.repeats} x {args.steps - 1} timed steps each")
    print()
    print(f"{'trainer':<10} {'median step s':>14} {'mean step s':>12} {'steps':>6}")
    for name, v in times.items():
        print(f"{name:<10} {med[name]:>14.4f} {statistics.mean(v):>12.4f} {len(v):>6}")
    print(f"end-to-end step overhead of AP-GRPO: {100 * overhead:+.2f} % (noise-limited)")
    print()
    print(f"{'gathered completions':>20} {'G':>3} {'AP hook ms':>11} {'% of tiny CPU step':>19}")
    for n, g in ((4, 4), (128, 8), (1024, 8), (8192, 8)):
        h = hook_time(n, g)
        print(f"{n:>20} {g:>3} {1e3 * h:>11.3f} {100 * h / med['trl-grpo']:>19.3f}")


if __name__ == "__main__":
    main()
