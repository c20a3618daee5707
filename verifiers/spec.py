"""Verifier specs: the small, versioned JSON record every dataset row carries.

A spec is a plain dict `{"kind": ..., "version": 1, "answer": ..., <params>}`.
`validate_spec` checks one and returns a normalised copy with every default
filled in; the helper constructors build compact specs (only the parameters
given) and validate them. The schema is documented in docs/verifiers.md.
"""

from __future__ import annotations

import math
import numbers
from functools import lru_cache
from typing import Any, Callable

from .parsing import UNITS, normalize_text
from .scores import nearest_classes
from .units import UNITS as UNIT_REGISTRY

from numerical3d.errors import Numerical3DError

__all__ = [
    "SPEC_VERSION",
    "KINDS",
    "NUMERIC_UNITS",
    "DEFAULT_RELATIONS",
    "DEFAULT_RELATION_GRAPH",
    "SpecError",
    "validate_spec",
    "numeric_spec",
    "count_spec",
    "choice_spec",
    "direction_spec",
    "order_spec",
    "relations_spec",
    "grounding_spec",
    "answer_text",
    "canonical_completion",
    "is_discrete",
]

SPEC_VERSION = 1
UNIT_TEXT = {u.name: u.answer for u in UNIT_REGISTRY.values()}  # unit -> as a canonical answer writes it
NUMERIC_UNITS = tuple(UNIT_TEXT)  # "" = a dimensionless number
DEFAULT_RELATIONS = ("left-of", "right-of", "above", "below", "in-front-of", "behind", "near")
# Mutually exclusive relations: horizontal ring, vertical pair, "near" one step from all.
DEFAULT_RELATION_GRAPH: dict[str, list[str]] = {
    "left-of": ["in-front-of", "behind", "near"],
    "right-of": ["in-front-of", "behind", "near"],
    "in-front-of": ["left-of", "right-of", "near"],
    "behind": ["left-of", "right-of", "near"],
    "above": ["near"],
    "below": ["near"],
    "near": ["left-of", "right-of", "in-front-of", "behind", "above", "below"],
}
DISCRETE_KINDS = ("count", "choice", "direction", "order", "relations")
CONTINUOUS_KINDS = ("numeric", "grounding")
KINDS = CONTINUOUS_KINDS + DISCRETE_KINDS


class SpecError(ValueError, Numerical3DError):
    """An invalid verifier spec; `field` names the offending field."""

    def __init__(self, field: str, problem: str):
        self.field = field
        self.problem = problem
        super().__init__(f"verifier spec field {field!r}: {problem}")


def is_discrete(kind: str) -> bool:
    return kind in DISCRETE_KINDS


# ------------------------------------------------------------------ checkers
def _float(spec: dict[str, Any], key: str, default: float | None = None, *, positive: bool = False,
           nonneg: bool = False) -> float:
    v = spec.get(key, default)
    if type(v) is float and math.isfinite(v) and not (positive and v <= 0) and not (nonneg and v < 0):
        return v  # the commonest value: the checks below would pass it unchanged
    if v is None:
        raise SpecError(key, "is required")
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or type(v).__name__ == "bool_":
        raise SpecError(key, f"must be a number, got {type(v).__name__}")
    v = float(v)
    if not math.isfinite(v):
        raise SpecError(key, f"must be finite, got {v}")
    if positive and v <= 0:
        raise SpecError(key, f"must be > 0, got {v}")
    if nonneg and v < 0:
        raise SpecError(key, f"must be >= 0, got {v}")
    return v


def _choice(spec: dict[str, Any], key: str, allowed: tuple[str, ...], default: str) -> str:
    v = spec.get(key, default)
    if v not in allowed:
        raise SpecError(key, f"must be one of {list(allowed)}, got {v!r}")
    return v


def _str_list(spec: dict[str, Any], key: str, *, min_len: int = 0, unique: bool = True,
              default: list[str] | None = None) -> list[str]:
    v = spec.get(key, default)
    if v is None:
        raise SpecError(key, "is required")
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) and x.strip() for x in v):
        raise SpecError(key, "must be a list of non-empty strings")
    if len(v) < min_len:
        raise SpecError(key, f"needs at least {min_len} entries, got {len(v)}")
    if unique and not _distinct_labels(tuple(v)):
        raise SpecError(key, f"entries must be distinct (ignoring case and -/_), got {list(v)}")
    return list(v)


@lru_cache(maxsize=4096)
def _distinct_labels(labels: tuple[str, ...]) -> bool:
    """Distinct after `normalize_text`; cached because each item's spec is validated once per batch."""
    return len({normalize_text(x) for x in labels}) == len(labels)


def _gamma(spec: dict[str, Any], out: dict[str, Any]) -> None:
    if "gamma" in spec:
        out["gamma"] = _float(spec, "gamma", positive=True)


_COMMON = {"kind", "version", "answer"}


def _check_keys(spec: dict[str, Any], allowed: set[str]) -> None:
    if spec.keys() - _COMMON <= allowed:  # the common case, without a set union per key
        return
    for key in spec:
        if key not in allowed | _COMMON:
            raise SpecError(key, f"unknown field for kind {spec['kind']!r}; allowed: {sorted(allowed | _COMMON)}")


# ------------------------------------------------------------------- per kind
def _numeric(spec: dict[str, Any]) -> dict[str, Any]:
    _check_keys(spec, {"unit", "error", "scale", "e_max"})
    answer = _float(spec, "answer")
    unit = spec.get("unit")
    if unit not in NUMERIC_UNITS:
        raise SpecError("unit", f"must be one of {list(NUMERIC_UNITS)}, got {unit!r}")
    error = _choice(spec, "error", ("relative_squared", "squared", "angular"), "relative_squared")
    if (unit == "deg") != (error == "angular"):
        raise SpecError("error", f"'angular' goes with unit 'deg' and only with it (angles wrap around), got {error!r} "
                                 f"with unit {unit!r}")
    scale = _float(spec, "scale", 90.0 if error == "angular" else 1.0, positive=True)
    if error == "angular":
        default_emax = 4.0  # the error of an answer 180 degrees off at the default scale
    elif error == "relative_squared":
        if answer == 0:
            raise SpecError("answer", "must be non-zero when error is 'relative_squared'")
        default_emax = 4.0  # the error of an answer off by 200%
    else:
        y = abs(answer) * UNITS[unit][1] / scale
        default_emax = 4.0 * max(y, 1.0) ** 2
    e_max = _float(spec, "e_max", default_emax, positive=True)
    return {"kind": "numeric", "version": SPEC_VERSION, "answer": answer, "unit": unit, "error": error,
            "scale": scale, "e_max": e_max}


def _count(spec: dict[str, Any]) -> dict[str, Any]:
    _check_keys(spec, {"tau", "form", "c", "gamma"})
    a = spec.get("answer")
    if isinstance(a, bool) or not isinstance(a, numbers.Real) or not float(a).is_integer() or a < 0:
        raise SpecError("answer", f"must be a non-negative integer, got {a!r}")
    out = {"kind": "count", "version": SPEC_VERSION, "answer": int(a),
           "form": _choice(spec, "form", ("exp", "linear"), "exp"),
           "tau": _float(spec, "tau", 1.0, positive=True), "c": _float(spec, "c", 1.0, positive=True)}
    _gamma(spec, out)
    return out


def _choice_kind(spec: dict[str, Any]) -> dict[str, Any]:
    _check_keys(spec, {"options", "gamma"})
    options = _str_list(spec, "options", min_len=2)
    if len(options) > 26:
        raise SpecError("options", f"at most 26 options, got {len(options)}")
    letters = [chr(ord("A") + i) for i in range(len(options))]
    a = spec.get("answer")
    if not isinstance(a, str) or a.upper() not in letters:
        raise SpecError("answer", f"must be one of the option letters {letters}, got {a!r}")
    out = {"kind": "choice", "version": SPEC_VERSION, "answer": a.upper(), "options": options}
    _gamma(spec, out)
    return out


def _direction(spec: dict[str, Any]) -> dict[str, Any]:
    _check_keys(spec, {"classes", "ring", "adjacent_credit", "angle", "class_angles", "sigma", "gamma"})
    classes = _str_list(spec, "classes", min_len=2)
    a = spec.get("answer")
    if a not in classes:
        raise SpecError("answer", f"must be one of classes {classes}, got {a!r}")
    ring = spec.get("ring", len(classes) in (4, 8))
    if not isinstance(ring, bool):
        raise SpecError("ring", f"must be true or false, got {ring!r}")
    credit = _float(spec, "adjacent_credit", 0.5)
    if not 0.0 <= credit <= 1.0:
        raise SpecError("adjacent_credit", f"must be in [0, 1], got {credit}")
    out: dict[str, Any] = {"kind": "direction", "version": SPEC_VERSION, "answer": a, "classes": classes,
                           "ring": ring, "adjacent_credit": credit}
    if "angle" in spec:
        out["angle"] = _float(spec, "angle")
        if "class_angles" in spec:
            ca = spec["class_angles"]
            if not isinstance(ca, (list, tuple)) or len(ca) != len(classes):
                raise SpecError("class_angles", f"must be a list of {len(classes)} numbers (one per class)")
            out["class_angles"] = [_float({"class_angles": x}, "class_angles") for x in ca]
        elif ring:
            out["class_angles"] = [360.0 * i / len(classes) for i in range(len(classes))]
        else:
            raise SpecError("class_angles", "is required with 'angle' when the classes are not a ring")
        out["sigma"] = _float(spec, "sigma", 360.0 / len(classes), positive=True)
        if classes.index(a) not in nearest_classes(out["angle"], out["class_angles"]):
            raise SpecError("answer", f"{a!r} is not the class of angle {out['angle']} (the class whose centre is nearest)")
    else:
        for key in ("class_angles", "sigma"):
            if key in spec:
                raise SpecError(key, "only applies together with 'angle'")
    _gamma(spec, out)
    return out


def _order(spec: dict[str, Any]) -> dict[str, Any]:
    _check_keys(spec, {"form", "times", "beta", "gamma"})
    answer = _str_list(spec, "answer", min_len=2)
    form = _choice(spec, "form", ("kendall", "pairwise"), "kendall")
    out: dict[str, Any] = {"kind": "order", "version": SPEC_VERSION, "answer": answer, "form": form}
    if form == "pairwise":
        times = spec.get("times")
        if not isinstance(times, (list, tuple)) or len(times) != len(answer):
            raise SpecError("times", f"pairwise form needs one time per label ({len(answer)})")
        ts = [_float({"times": t}, "times") for t in times]
        if any(b < a for a, b in zip(ts, ts[1:])):
            raise SpecError("times", "must be non-decreasing in answer order")
        out["times"] = ts
        out["beta"] = _float(spec, "beta", 1.0, positive=True)
    elif "times" in spec or "beta" in spec:
        raise SpecError("times" if "times" in spec else "beta", "only applies to form 'pairwise'")
    _gamma(spec, out)
    return out


def _relations(spec: dict[str, Any]) -> dict[str, Any]:
    _check_keys(spec, {"vocabulary", "form", "graph", "gamma"})
    vocab = _str_list(spec, "vocabulary", min_len=1, default=list(DEFAULT_RELATIONS))
    answer = _str_list(spec, "answer")
    missing = [a for a in answer if a not in vocab]
    if missing:
        raise SpecError("answer", f"relations {missing} are not in the vocabulary {vocab}")
    form = _choice(spec, "form", ("jaccard", "graph"), "jaccard")
    out: dict[str, Any] = {"kind": "relations", "version": SPEC_VERSION, "answer": sorted(answer),
                           "vocabulary": vocab, "form": form}
    if form == "graph":
        if len(answer) != 1:
            raise SpecError("answer", "graph form needs exactly one (mutually exclusive) relation")
        graph = spec.get("graph", DEFAULT_RELATION_GRAPH if "vocabulary" not in spec else None)
        if not isinstance(graph, dict) or not all(
            k in vocab and isinstance(v, (list, tuple)) and all(x in vocab for x in v) for k, v in graph.items()
        ):
            raise SpecError("graph", "must map relations of the vocabulary to lists of neighbouring relations")
        out["graph"] = {k: list(v) for k, v in graph.items()}
    elif "graph" in spec:
        raise SpecError("graph", "only applies to form 'graph'")
    _gamma(spec, out)
    return out


def _grounding(spec: dict[str, Any]) -> dict[str, Any]:
    _check_keys(spec, {"scale", "e_max"})
    a = spec.get("answer")
    if not isinstance(a, (list, tuple)) or not 1 <= len(a) <= 4:
        raise SpecError("answer", f"must be a list of 1 to 4 coordinates, got {a!r}")
    coords = [_float({"answer": x}, "answer") for x in a]
    scale = _float(spec, "scale", 1.0, positive=True)
    norm2 = sum(c * c for c in coords) / scale**2
    e_max = _float(spec, "e_max", 4.0 * max(norm2, 1.0), positive=True)
    return {"kind": "grounding", "version": SPEC_VERSION, "answer": coords, "scale": scale, "e_max": e_max}


_VALIDATORS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "numeric": _numeric, "count": _count, "choice": _choice_kind, "direction": _direction,
    "order": _order, "relations": _relations, "grounding": _grounding,
}


def validate_spec(spec: Any) -> dict[str, Any]:
    """Check a spec and return a normalised copy with defaults filled; raises SpecError."""
    if not isinstance(spec, dict):
        raise SpecError("spec", f"must be a JSON object, got {type(spec).__name__}")
    kind = spec.get("kind")
    if kind not in _VALIDATORS:
        raise SpecError("kind", f"must be one of {list(KINDS)}, got {kind!r}")
    version = spec.get("version")
    if version != SPEC_VERSION or isinstance(version, bool):
        raise SpecError("version", f"must be {SPEC_VERSION}, got {version!r}")
    if "answer" not in spec:
        raise SpecError("answer", "is required")
    return _VALIDATORS[kind](spec)


# -------------------------------------------------------------- constructors
def _make(kind: str, answer: Any, **params: Any) -> dict[str, Any]:
    spec = {"kind": kind, "version": SPEC_VERSION, "answer": answer, **params}
    norm = validate_spec(spec)
    return {k: norm[k] for k in spec}  # compact: only what was given, in canonical types


def numeric_spec(answer: float, unit: str, **params: Any) -> dict[str, Any]:
    """Continuous answer in `unit` (one of NUMERIC_UNITS; "" for dimensionless, "deg" with error "angular")."""
    return _make("numeric", answer, unit=unit, **params)


def count_spec(answer: int, **params: Any) -> dict[str, Any]:
    return _make("count", answer, **params)


def choice_spec(answer: str, options: list[str], **params: Any) -> dict[str, Any]:
    return _make("choice", answer, options=list(options), **params)


def direction_spec(answer: str, classes: list[str], **params: Any) -> dict[str, Any]:
    return _make("direction", answer, classes=list(classes), **params)


def order_spec(answer: list[str], **params: Any) -> dict[str, Any]:
    return _make("order", list(answer), **params)


def relations_spec(answer: list[str], **params: Any) -> dict[str, Any]:
    return _make("relations", list(answer), **params)


def grounding_spec(answer: list[float], **params: Any) -> dict[str, Any]:
    return _make("grounding", [float(x) for x in answer], **params)


# ------------------------------------------------------------ canonical text
def _num(x: float) -> str:
    """Shortest text that reads back as exactly x."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


def answer_text(spec: dict[str, Any]) -> str:
    """The canonical answer as a model should write it (e.g. "1.5 m", "B", "chair, table")."""
    s = validate_spec(spec)
    kind = s["kind"]
    if kind == "numeric":
        unit = UNIT_TEXT[s["unit"]]
        return f"{_num(s['answer'])} {unit}".strip()
    if kind == "count":
        return str(s["answer"])
    if kind == "choice":
        return s["answer"]
    if kind == "direction":
        return f"{s['answer']} ({_num(s['angle'])} degrees)" if "angle" in s else s["answer"]
    if kind in ("order", "relations"):
        return ", ".join(s["answer"]) if s["answer"] else "none"
    return "(" + ", ".join(_num(c) for c in s["answer"]) + ")"


def canonical_completion(spec: dict[str, Any]) -> str:
    """A well-formed completion whose answer is the spec's canonical answer (reward 1)."""
    return f"<think>The answer follows from the scene geometry.</think><answer>{answer_text(spec)}</answer>"
