"""Question generation: one module per subtask, the registry that finds them, the quality gates, and the driver.

Each subtask module defines `SUBTASK = Subtask(...)` (see `registry`): its generator
`generate(ctx) -> Iterator[Item]`, level, whether it needs frames, its config section and the rest.
"""

from __future__ import annotations

from numerical3d.pipeline.questions.common import Context, ProcessedScene, QuestionConfig, process_scene
from numerical3d.pipeline.questions.gates import DropCounter
from numerical3d.pipeline.questions.generate import generate_items, generate_scene
from numerical3d.pipeline.questions.registry import Subtask

__all__ = ["Context", "DropCounter", "ProcessedScene", "QuestionConfig", "Subtask", "generate_items", "generate_scene",
           "process_scene"]
