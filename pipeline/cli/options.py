"""Command options generated from a pydantic model: one field, one option.

Each field becomes a keyword-only typer option: its flags (the field's `flags` in
`json_schema_extra`, else `--field-name`), its type, its default, its `ge` as the smallest value
allowed, and its description as the help. The command then receives the model, validated, instead
of one parameter per option; `numerical3d benchmark run NAME` builds its options the same way.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def option_parameters(model: type[BaseModel]) -> list[inspect.Parameter]:
    """The fields of `model` as the parameters of a typer command."""
    params = []
    for name, field in model.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        flags = [str(f) for f in extra.get("flags", [])]  # type: ignore[union-attr]
        smallest = next((m.ge for m in field.metadata if getattr(m, "ge", None) is not None), None)
        option = typer.Option(field.get_default(call_default_factory=True), *flags, help=field.description,
                              min=smallest)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=field.annotation,
                                        default=option))
    return params


def model_command(model: type[M], run: Callable[[M], None], doc: str | None) -> Callable[..., None]:
    """A function for `app.command(...)` whose options are `model`'s fields; it calls `run` with
    the options as one `model`. `doc` is the command's help."""

    def command(**values: Any) -> None:
        run(model(**values))

    command.__signature__ = inspect.Signature(option_parameters(model))  # type: ignore[attr-defined]
    command.__doc__ = doc
    return command
