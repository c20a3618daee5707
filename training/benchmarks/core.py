"""The few types every benchmark module and backend shares: the error a run stops with, a prompt
ready for a model, the prompt modes and the visual input modes.

A leaf module (it imports nothing of the project), so that the backends, the prediction handling
and the benchmarks can all depend on it without depending on each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from numerical3d.errors import Numerical3DError

PromptMode = Literal["official", "reasoning"]
Visual = Literal["video", "images"]
# Generation length: lmms-eval's 16 tokens for the official prompts; room to think for the reasoning one.
MAX_NEW_TOKENS: dict[str, int] = {"official": 16, "reasoning": 1024}


class BenchmarkError(ValueError, Numerical3DError):
    """A benchmark run that cannot go on; the message names the file and what is wrong."""


@dataclass
class Prompt:
    """One question ready for a model: the prompt text and its visual input."""

    id: Any  # the question's id as the benchmark table has it
    text: str
    frames: list[np.ndarray]  # RGB H x W x 3 uint8: a video's sampled frames, or still images
    # For video frames: {"total_num_frames", "fps", "frames_indices"} of the source video, which
    # transformers' video processors turn into the sampled frames' timestamps.
    video_metadata: dict[str, Any] | None = None
