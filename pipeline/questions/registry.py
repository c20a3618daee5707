"""The subtask registry: one `Subtask` per question type, everything the rest of the project asks of it.

A question type is one module that defines `SUBTASK = Subtask(...)` (its generator, level, config
section, ...) plus its template `questions/<name>.j2`. The registry finds the modules of this
package, and what the `numerical3d.subtasks` entry point group names (a question type shipped in
another distribution, or a folder on `sys.path` with a `*.dist-info/entry_points.txt`), the way
every registry of the project does (`numerical3d.plugins`). Generation, sampling, the plan's
`questions:` keys, the site and the CLI all read it from here.

Subtasks run in `order` (then name): a scene's items, and so the shards, depend on that order, so a
new subtask takes an order after the existing ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field

from numerical3d.errors import Numerical3DError
from numerical3d.plugins import Kind
from numerical3d.verifiers.vsibench import OFFICIAL_TYPES

Form = Literal["open", "mc", "both"]
Level = Literal["scene", "frame"]
ENTRY_POINTS = "numerical3d.subtasks"  # entry point group of subtasks from other distributions
PACKAGE = "numerical3d.pipeline.questions"


class SubtaskError(ValueError, Numerical3DError):
    """A subtask is defined badly or twice, or a name is not a registered subtask."""


class SectionConfig(BaseModel):
    """Base of a subtask's own parameters (the plan key `questions.<subtask>`); unknown keys fail.

    `RENAMED` maps the flat `questions:` key a parameter had before it moved into its section to the
    parameter's name, so that an old plan fails with the key to write instead.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    RENAMED: ClassVar[dict[str, str]] = {}

    # items a scene gives this subtask, in multiples of the shared `max_per_subtask` (at least one): a
    # subtask whose candidates the sampler thins by a rule over the whole set (object_count's count cap)
    # needs more per scene, or the scene's cap decides first which of them survive; one that makes many
    # times what a large build's quota asks of a scene may make fewer (`synthetic-50k`)
    scene_cap_scale: float = Field(1.0, gt=0)


@dataclass(frozen=True)
class Subtask:
    """One question type."""

    name: str
    order: int  # generation order within a scene (lower first); part of what makes the shards byte-stable
    level: Level  # "scene": about the whole scan; "frame": about what one frame shows
    needs_frames: bool  # False: works from boxes alone (e.g. the vsi-meta source, which has no frames)
    generate: Callable[[Any], Iterator[Any]]  # Context -> Items, in a seeded order
    config: type[SectionConfig] = SectionConfig  # its own parameters, under `questions.<name>` in a plan
    default_form: Form = "open"  # answer form unless `questions.forms` says otherwise
    symmetric: bool = False  # items about the same objects in any order mean the same (sampling dedups them)
    evidence: Callable[[Any], None] | None = None  # draws an item on the site, for a subtask from another
    # distribution (the bundled ones are drawn by `pipeline/browse/evidence.py`'s DRAWINGS); None: objects highlighted
    vsibench: str | None = None  # VSI-Bench's question_type for this subtask, when VSI-Bench has it
    templates: Path | None = None  # a folder holding `questions/<name>.j2`; None: the bundled templates
    max_per_scene: int | None = None  # distinct items a scene can give at most (sampling lowers a quota past it)

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise SubtaskError(f"subtask name {self.name!r} is not an identifier")
        if self.level not in ("scene", "frame"):
            raise SubtaskError(f"subtask {self.name}: level {self.level!r} is not scene or frame")
        if self.default_form not in ("open", "mc", "both"):
            raise SubtaskError(f"subtask {self.name}: default_form {self.default_form!r} is not open, mc or both")
        if self.max_per_scene is not None and self.max_per_scene < 1:
            raise SubtaskError(f"subtask {self.name}: max_per_scene {self.max_per_scene} is not a positive integer")
        if self.vsibench is not None and self.vsibench not in OFFICIAL_TYPES:
            raise SubtaskError(f"subtask {self.name}: {self.vsibench!r} is not a VSI-Bench question type "
                               f"({', '.join(OFFICIAL_TYPES)})")

    @property
    def template(self) -> str:
        """The template's name on the template search path."""
        return f"questions/{self.name}.j2"


KIND: Kind[Subtask] = Kind("subtask", PACKAGE, "SUBTASK", ENTRY_POINTS, lambda obj: isinstance(obj, Subtask),
                          lambda sub: sub.name, SubtaskError)


@lru_cache(maxsize=1)
def registry() -> dict[str, Subtask]:
    """Every subtask by name, in generation order (found once per process)."""
    ordered = sorted(KIND.by_name().values(), key=lambda s: (s.order, s.name))
    orders = [s.order for s in ordered]
    if len(set(orders)) != len(orders):
        same = sorted({s.name for s in ordered if orders.count(s.order) > 1})
        raise SubtaskError(f"subtasks {', '.join(same)} share an order; give each its own")
    return {s.name: s for s in ordered}


def names() -> tuple[str, ...]:
    """Every subtask name, in generation order."""
    return tuple(registry())


def subtask(name: str) -> Subtask:
    """The subtask called `name`; an unknown name fails listing the known ones."""
    reg = registry()
    if name not in reg:
        raise SubtaskError(f"unknown subtask {name!r}; known: {', '.join(reg)}")
    return reg[name]


def template_dirs() -> tuple[str, ...]:
    """The template folders of subtasks that bring their own (searched after the bundled ones)."""
    return tuple(dict.fromkeys(str(s.templates) for s in registry().values() if s.templates is not None))
