"""The question config: everything that decides which questions a scene yields.

A build plan's `questions:` mapping is validated into `QuestionConfig`; each subtask's own
parameters are its section (`questions.<subtask>`), validated by the subtask's config model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ConfigDict, GetCoreSchemaHandler, ValidationError
from pydantic_core import CoreSchema, core_schema

from numerical3d.pipeline.questions.registry import registry
from numerical3d.pipeline.questions.registry import subtask as registered
from numerical3d.pipeline.settings import describe_errors

# Structural or catch-all labels that never make a sensible question subject.
DEFAULT_IGNORE = frozenset({"wall", "floor", "ceiling", "object", "otherstructure", "otherfurniture", "otherprop",
                            "remove", "unknown", "split", "structure", "window frame", "doorframe"})


@dataclass
class QuestionConfig:
    """Everything that decides which questions a scene yields.

    A build plan's `questions:` mapping is validated into it by pydantic (unknown keys fail). The
    parameters shared by subtasks are fields; each subtask's own parameters are its section, the
    plan key `questions.<subtask>` (see `Subtask.config`), read with `section(name)`.
    """

    __pydantic_config__ = ConfigDict(extra="forbid")

    subtasks: tuple[str, ...] = ()  # empty: all registered subtasks
    seed: int = 0
    scene_frames: int = 16  # frames attached to scene-level questions (showing their objects, spread over the video)
    frame_level_frames: int = 8  # frames examined per scene for frame-level questions
    # frames of a video that visibility is computed on for covers and onsets (a uniform sample of a longer
    # video, onsets refined between them): a scene's cost does not grow with its video's length
    stream_frames: int = 160
    max_per_subtask: int = 12  # items per subtask per scene (after the gates)
    forms: dict[str, str] = field(default_factory=dict)  # subtask -> open | mc | both; default: the subtask's
    n_options: int = 4
    distractor_gap: float = 0.20  # numeric multiple-choice options differ pairwise by >= 20%
    ignore_labels: frozenset[str] = DEFAULT_IGNORE
    min_visible_pixels: int = 100  # distinct pixels hit by visible points (a lower bound of the silhouette)
    # A named object counts as shown in a frame when a person could name it there (pipeline.questions.nameable):
    min_named_pixels: int = 20  # at least this many visible pixels (occlusion-aware), and
    min_named_area: int = 576  # its visible extent (2D box of its visible points, at 640x480) covers >= 24x24 px, and
    min_named_share: float = 0.5  # that extent is >= this share of its whole box's projected extent (legged: 0.6 of it)
    named_view_area: int = 38400  # (share waived from this extent on, 1/8 of the frame, for a bed, sofa or bookshelf)
    named_in_image: float = 0.95  # and >= this share of that projected extent lies inside the image (legged: 0.6 of it)
    named_max_hidden: float = 0.5  # and at most this share of its whole box's projected box shows something nearer
    named_side_scale: float = 0.8  # and its shorter side is >= this times its category's looked-at side (sources.naming)
    numeric_error: str | None = None  # verifier error form for numeric specs; None: the verifier default
    self_check: bool = True
    templates_dir: str | None = None
    sections: dict[str, Any] = field(default_factory=dict)  # subtask -> its SectionConfig (or a mapping of one)

    def __post_init__(self) -> None:
        if self.stream_frames < 2:
            raise ValueError(f"stream_frames must be at least 2 (a video's first and last frame), got {self.stream_frames}")
        if not 0.0 <= self.named_in_image <= 1.0:
            raise ValueError(f"named_in_image is a share of an object's projected extent, in [0, 1]; got {self.named_in_image}")
        if self.named_side_scale < 0.0:
            raise ValueError(f"named_side_scale scales the looked-at sides, >= 0; got {self.named_side_scale}")
        if not 0.0 <= self.named_max_hidden <= 1.0:
            raise ValueError(f"named_max_hidden is a share of an object's projected box, in [0, 1]; got {self.named_max_hidden}")
        if not 0.0 <= self.min_named_share <= 1.0:
            raise ValueError(f"min_named_share is a share of an object's projected extent, in [0, 1]; got {self.min_named_share}")
        self.sections = {name: _section(name, value) for name, value in sorted(self.sections.items())}

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        # A plan writes a subtask's section as `questions.<subtask>`; gather those keys into `sections`.
        return core_schema.no_info_before_validator_function(_gather_sections, handler(source))

    def section(self, subtask: str) -> Any:
        """The subtask's own parameters: its section, or the defaults of its config model."""
        found = self.sections.get(subtask)
        return found if found is not None else registered(subtask).config()

    def scene_cap(self, subtask: str) -> int:
        """Items a scene gives the subtask at most: `max_per_subtask` times its section's `scene_cap_scale`."""
        return max(1, round(self.max_per_subtask * self.section(subtask).scene_cap_scale)) if self.max_per_subtask else 0

    def form(self, subtask: str) -> tuple[str, ...]:
        f = self.forms.get(subtask) or registered(subtask).default_form
        if f not in ("open", "mc", "both"):
            raise ValueError(f"forms[{subtask!r}]: {f!r} is not one of open, mc, both")
        return ("open", "mc") if f == "both" else (f,)


def _section(name: str, value: Any) -> Any:
    """A subtask's section validated into its config model (an unknown subtask or key fails naming it)."""
    model = registered(name).config
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise ValueError(describe_errors(exc.errors(), model, prefix=f"questions.{name}.")) from None


def _gather_sections(data: Any) -> Any:
    """`questions:` as written in a plan -> QuestionConfig's fields; an old flat key fails naming its new place."""
    if not isinstance(data, dict):
        return data
    reg = registry()
    out = {k: v for k, v in data.items() if k not in reg}
    sections = dict(out.pop("sections", None) or {})
    sections.update({k: v for k, v in data.items() if k in reg})
    for key in out:
        moved = [f"questions.{s.name}.{s.config.RENAMED[key]}" for s in reg.values() if key in s.config.RENAMED]
        if moved:
            raise ValueError(f"questions.{key} is now {' / '.join(moved)}")
    if sections:
        out["sections"] = {name: _section(name, value) for name, value in sections.items()}
    return out
