"""A command's options generated from a pydantic model, the way TRL's TrlParser makes a parser from
its dataclasses: each field is one option, named `--field-name`, with the field's type, default and
description (the help). `json_schema_extra` may give `flags` (the option's names, when they differ
from the field's) and click's `min`.

`benchmark run NAME` builds its options from the benchmark's config (`benchmarks/command.py`) and
`train` from `TrainOptions` (`cli.py`), both through `option_parameters`.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import typer
from pydantic import BaseModel

TYPER_KEYS = ("min",)  # the keys of a field's json_schema_extra handed to typer.Option


def option_parameters(model: type[BaseModel]) -> list[inspect.Parameter]:
    """One keyword parameter per field of `model`, its default a `typer.Option` (required when the field is)."""
    params = []
    for name, field in model.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        flags = [str(f) for f in extra.get("flags", ())]  # type: ignore[union-attr]
        kwargs = {k: extra[k] for k in TYPER_KEYS if k in extra}
        default = ... if field.is_required() else field.default
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=field.annotation,
                                        default=typer.Option(default, *flags, help=field.description, **kwargs)))
    return params


def with_options(run: Callable[..., Any], params: list[inspect.Parameter], doc: str | None) -> Callable[..., Any]:
    """`run` with the signature typer reads its options from, and `doc` as the command's help."""
    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    run.__doc__ = doc
    return run
