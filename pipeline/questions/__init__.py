"""Question generation: one generator module per subtask, the quality gates, and the driver.

Each generator module exposes `SUBTASK`, `LEVEL` ("scene" or "frame"), `BOX_ONLY` (works from
boxes alone, e.g. the vsi-meta source) and `generate(ctx) -> Iterator[Item]`.
"""

from __future__ import annotations

from numerical3d.pipeline.questions.common import Context, ProcessedScene, QuestionConfig, process_scene
from numerical3d.pipeline.questions.gates import DropCounter
from numerical3d.pipeline.questions.generate import SUBTASKS, generate_items, generate_scene

__all__ = ["Context", "DropCounter", "ProcessedScene", "QuestionConfig", "SUBTASKS", "generate_items", "generate_scene",
           "process_scene"]
