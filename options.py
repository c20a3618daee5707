"""Command options generated from a pydantic model, the way TRL's TrlParser makes a parser from its
dataclasses: each field is one keyword-only typer option, named `--field-name`, with the field's
type, its default (required when the field is) and its description as the help. `json_schema_extra`
may give `flags` (the option's names, when they differ from the field's) and click's `min` (checked
as the option is read; a field's own bounds are checked by the model, with its message).

`build` (`BuildOptions`), `train` (`TrainOptions`) and `benchmark run NAME` (the benchmark's config)
all build their options here, so a new field is a new option with nothing else to edit.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)
TYPER_KEYS = ("min",)  # the keys of a field's json_schema_extra handed to typer.Option


def option_parameters(model: type[BaseModel]) -> list[inspect.Parameter]:
    """One keyword parameter per field of `model`, its default a `typer.Option`."""
    params = []
    for name, field in model.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        flags = [str(f) for f in extra.get("flags", ())]  # type: ignore[union-attr]
        kwargs: dict[str, Any] = {k: extra[k] for k in TYPER_KEYS if k in extra}
        default = ... if field.is_required() else field.get_default(call_default_factory=True)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=field.annotation,
                                        default=typer.Option(default, *flags, help=field.description, **kwargs)))
    return params


def with_options(run: Callable[..., Any], params: list[inspect.Parameter], doc: str | None) -> Callable[..., Any]:
    """`run` with the signature typer reads its options from, and `doc` as the command's help."""
    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    run.__doc__ = doc
    return run


def model_command(model: type[M], run: Callable[[M], None], doc: str | None) -> Callable[..., None]:
    """A function for `app.command(...)` whose options are `model`'s fields; it calls `run` with
    the options as one validated `model`."""

    def command(**values: Any) -> None:
        run(model(**values))

    return with_options(command, option_parameters(model), doc)
