"""How the pipeline's configuration files are read: a YAML mapping (`read_yaml_mapping`), layered
with `deep_merge` (both from `numerical3d.configfile`, shared with training), then validated by a
pydantic model whose unknown keys are errors naming the field; `describe_errors` words a failed
validation as one line, a typo'd key with the nearest known one.

Build plans (`pipeline.build.plan`), dataset mixes (`pipeline.config`) and the question
config inside a plan all go this way; the presets of both kinds live in `pipeline/presets/`
(`plans/` and `mixes/`).
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from numerical3d.configfile import ConfigError, deep_merge, read_yaml_mapping

PRESETS_DIR = Path(__file__).resolve().parent / "presets"
__all__ = ["ConfigError", "PRESETS_DIR", "deep_merge", "describe_errors", "presets", "read_yaml_mapping"]


def presets(kind: str) -> list[str]:
    """Names of the bundled presets of one kind (`plans` or `mixes`)."""
    return sorted(p.stem for p in (PRESETS_DIR / kind).glob("*.yaml"))


# Pydantic's error types of a key the model does not have (a model's extra key, a dataclass's argument).
_UNKNOWN = ("extra_forbidden", "unexpected_keyword_argument")


def describe_errors(errors: Iterable[Mapping[str, Any]], model: type, known: Mapping[str, Iterable[str]] | None = None,
                    prefix: str = "") -> str:
    """Pydantic's errors of validating `model` as one line: each problem with its dotted key, and an
    unknown key with the nearest known one ("unknown key 'synthetic.n_scnes'; did you mean
    'synthetic.n_scenes'?"), so that a typo reads as a typo and not as pages of pydantic text.

    `known` lists the keys of a mapping the model does not describe itself (a `dict` field checked
    by a validator), by its dotted key; `prefix` is put before every key (where the caller took
    the values from).
    """
    errors, known = list(errors), known or {}
    suggested = {loc: _nearest(model, loc, known)
                 for loc in sorted({tuple(map(str, e["loc"])) for e in errors if e["type"] in _UNKNOWN})}
    problems: list[str] = []
    for e in errors:
        loc = tuple(map(str, e["loc"]))
        key = prefix + ".".join(loc)
        if loc in suggested:
            parent = prefix + "".join(f"{p}." for p in loc[:-1])
            hint = (f"; did you mean '{parent}{suggested[loc]}'?" if suggested[loc] else
                    f"; the keys there are: {', '.join(_known_keys(model, loc[:-1], known)) or 'none'}")
            problems.append(f"unknown key '{key}'{hint}")
        elif e["type"] == "missing":
            if loc[:-1] in {u[:-1] for u, near in suggested.items() if near == loc[-1]}:
                continue  # the typo above is why it is missing
            problems.append(f"{key}: required, but not given")
        elif e["type"] == "value_error":  # the project's validators word their own message
            msg = str(e["msg"]).removeprefix("Value error, ")
            problems.append(msg if not loc or key in msg else f"{key}: {msg}")
        else:
            value = repr(e.get("input"))
            problems.append(f"{key} = {value if len(value) <= 60 else value[:57] + '...'}: {e['msg']}")
    return "; ".join(problems)



def _fields(tp: Any) -> dict[str, Any]:
    """Field name -> annotation of a pydantic model or a dataclass (else nothing)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return {name: f.annotation for name, f in tp.model_fields.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return {f.name: hints.get(f.name) for f in dataclasses.fields(tp)}
    return {}


def _unwrap(tp: Any) -> list[Any]:
    """The model types an annotation may hold (through Optional, unions, lists and dicts)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType, list, tuple, dict, typing.Annotated):
        return [t for arg in typing.get_args(tp) for t in _unwrap(arg)]
    return [tp] if _fields(tp) else []


def _nearest(model: type, loc: tuple[str, ...], known: Mapping[str, Iterable[str]]) -> str | None:
    """The known key nearest to the unknown one at `loc`: beside it, else one level down
    (`n_scnes` at the top of a plan is `synthetic.n_scenes`), as a path relative to its parent."""
    keys = _known_keys(model, loc[:-1], known)
    if close := difflib.get_close_matches(loc[-1], keys, n=1, cutoff=0.6):
        return close[0]
    below = [f"{k}.{sub}" for k in keys for sub in _known_keys(model, (*loc[:-1], k), known)]
    close = difflib.get_close_matches(loc[-1], [b.rsplit(".", 1)[1] for b in below], n=1, cutoff=0.75)
    return next((b for b in below if close and b.endswith(f".{close[0]}")), None)


def _known_keys(model: type, parent: tuple[str, ...], known: Mapping[str, Iterable[str]]) -> list[str]:
    """The keys a mapping at `parent` (a dotted path into `model`) may hold."""
    if ".".join(parent) in known:
        return sorted(known[".".join(parent)])
    types_ = [model]
    for part in parent:
        if part.isdigit():  # a list index: same types
            continue
        types_ = [t for tp in types_ for t in _unwrap(_fields(tp).get(part))]
    return sorted({k for tp in types_ for k in _fields(tp)})
