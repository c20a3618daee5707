"""verify(spec, completion, k): parse the answer, measure its error, turn it into reward.

Continuous kinds (numeric, grounding) produce an error e directly; discrete
kinds produce a score V in [0, 1] mapped to e by Phi. Then r = op(k, e)
(SNRA by default) and R = (1 - lambda) r + lambda r_fmt with lambda = 0.1.

Several different answers in one output are scored as the worst of them; an
unparseable continuous answer gets e = e_max (parsed errors are clamped to
e_max too, so being unparseable never beats answering); an unparseable
discrete answer gets V = 0.
"""

from __future__ import annotations

import gc
import math
import re
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from .parsing import (
    ABSURD,
    UNITS,
    choice_candidates,
    direction_aliases,
    find_phrases,
    find_terms,
    numeric_candidates,
    parse_numbers,
    parse_quantities,
    relation_aliases,
    split_completion,
)
from .phi import DEFAULT_PHI, PhiConfig, phi
from .scores import (
    angle_difference,
    angular_score,
    count_score,
    direction_score,
    graph_score,
    jaccard_score,
    kendall_score,
    nearest_classes,
    pairwise_order_score,
)
from .snra import get_operator
from .spec import DISCRETE_KINDS, is_discrete, validate_spec

__all__ = ["VerifyResult", "verify", "verify_batch", "score_answer", "FORMAT_WEIGHT"]

FORMAT_WEIGHT = 0.1


@dataclass(slots=True)
class VerifyResult:
    """Outcome of verifying one completion against one spec."""

    kind: str
    parsed: Any  # the answer that was scored (the worst one when several were given); None if unparseable
    error: float  # e >= 0 fed to the reward operator
    score: float | None  # verifier score V for discrete kinds, else None
    format_ok: bool
    accuracy_reward: float  # r = op(k, e)
    reward: float  # R = (1 - lambda) r + lambda r_fmt
    ambiguous: bool = False  # the answer named several different candidates

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _as_text(completion: Any) -> str:
    """The answer text of a completion; anything that is not text (None, a number, a mapping, message
    parts without text) reads as the empty answer, which is unparseable: never an exception."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, bytes):
        return completion.decode("utf-8", errors="replace")
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        # TRL conversational completions: [{"role": "assistant", "content": ...}]
        content = completion[-1].get("content", "")
        if isinstance(content, list):  # multimodal content parts
            content = "".join(t for p in content if isinstance(p, dict) and isinstance(t := p.get("text"), str))
        return content if isinstance(content, str) else ""
    return ""


def _distinct(values: list[float]) -> list[float]:
    """Values that differ by more than a relative 1e-9 (1.5 m and 150 cm are one answer)."""
    if len(values) < 2:
        return values
    out: list[float] = []
    for v in values:
        if not any(abs(v - u) <= 1e-9 * max(abs(u), abs(v), 1e-12) for u in out):
            out.append(v)
    return out


# --------------------------------------------------------------- continuous
def _numeric(s: dict[str, Any], text: str | None) -> tuple[Any, float, bool]:
    cands = _distinct(numeric_candidates(text, s["unit"])) if text else []
    if not cands:
        return None, s["e_max"], False
    y = s["answer"]
    if s["error"] == "angular":  # the wrapped difference in degrees: 350 and -10 are one direction
        scale = s["scale"]
        worst, e = cands[0], (angle_difference(cands[0], y) / scale) ** 2
        for p in cands[1:]:
            ep = (angle_difference(p, y) / scale) ** 2
            if ep > e:
                worst, e = p, ep
    else:
        f = 1.0 / y if s["error"] == "relative_squared" else UNITS[s["unit"]][1] / s["scale"]
        worst, e = cands[0], ((cands[0] - y) * f) ** 2
        for p in cands[1:]:
            ep = ((p - y) * f) ** 2
            if ep > e:
                worst, e = p, ep
    return worst, min(e, s["e_max"]), len(cands) > 1


def _grounding(s: dict[str, Any], text: str | None) -> tuple[Any, float, bool]:
    dim = len(s["answer"])
    nums = parse_numbers(text) if text else []
    if not nums or len(nums) % dim:
        return None, s["e_max"], False
    groups = [nums[i : i + dim] for i in range(0, len(nums), dim)]
    groups = [g for j, g in enumerate(groups) if g not in groups[:j]]
    errs = [sum((p - y) ** 2 for p, y in zip(g, s["answer"])) / s["scale"] ** 2 for g in groups]
    i = max(range(len(errs)), key=errs.__getitem__)
    return groups[i], min(errs[i], s["e_max"]), len(groups) > 1


# ----------------------------------------------------------------- discrete
def _count(s: dict[str, Any], text: str | None) -> tuple[Any, float, bool]:
    cands = _distinct(parse_numbers(text)) if text else []
    if not cands:
        return None, 0.0, False
    scores = [count_score(p, s["answer"], s["form"], s["tau"], s["c"]) for p in cands]
    i = min(range(len(scores)), key=scores.__getitem__)
    p = cands[i]
    return (int(p) if float(p).is_integer() else p), scores[i], len(cands) > 1


def _choice(s: dict[str, Any], text: str | None) -> tuple[Any, float, bool]:
    cands = choice_candidates(text, tuple(s["options"])) if text else []
    if not cands:
        return None, 0.0, False
    wrong = [c for c in cands if c != s["answer"]]
    return (wrong[0] if wrong else cands[0]), (0.0 if wrong else 1.0), len(cands) > 1


def _direction(s: dict[str, Any], text: str | None) -> tuple[Any, float, bool]:
    """Every class named and, for a spec with `angle`, every angle given is an answer; the worst counts.

    Bare numbers are angles when any number in the answer is written in degrees ("between -45 and
    45 degrees", "30 degrees or -45"). A class named with an angle that lies in its bin is the same
    answer as the angle ("front-left (40 degrees)")."""
    if not text:
        return None, 0.0, False
    classes = s["classes"]
    found = list(dict.fromkeys(k for _, k in find_terms(text, direction_aliases(tuple(classes)))))
    if "angle" not in s:
        if not found:
            return None, 0.0, False
        gt = classes.index(s["answer"])
        scores = [direction_score(classes.index(c), gt, len(classes), s["ring"], s["adjacent_credit"]) for c in found]
        i = min(range(len(scores)), key=scores.__getitem__)
        return found[i], scores[i], len(found) > 1
    centres = s["class_angles"]
    quantities = parse_quantities(text)
    degs: list[float] = []
    if any(u == "deg" for _, u in quantities):
        degs = _distinct([v for v, u in quantities if u in (None, "deg") and math.isfinite(v) and abs(v) <= ABSURD])
    covered = {classes[i] for d in degs for i in nearest_classes(d, centres)}
    answers: list[Any] = [*degs, *(c for c in found if c not in covered)]
    if not answers:
        return None, 0.0, False
    scores = [angular_score(a if isinstance(a, float) else centres[classes.index(a)], s["angle"], s["sigma"])
              for a in answers]
    i = min(range(len(scores)), key=scores.__getitem__)
    return answers[i], scores[i], len(answers) > 1


def _order(s: dict[str, Any], text: str | None) -> tuple[Any, float, bool]:
    hits = find_phrases(text, tuple(s["answer"]), plural=True) if text else []
    if not hits:
        return None, 0.0, False
    labels = [k for _, k in hits]
    readings = [list(dict.fromkeys(labels)), list(dict.fromkeys(reversed(labels)))[::-1]]
    segment: list[str] = []
    for lab in [*labels, None]:  # a repeated label starts another order: "a, b, c or c, b, a" is two answers
        if lab in segment or lab is None:
            if len(segment) == len(s["answer"]):  # each complete order is read too
                readings.append(segment)
            segment = []
        segment.append(lab)
    readings = [r for j, r in enumerate(readings) if r not in readings[:j]]
    if s["form"] == "pairwise":
        scores = [pairwise_order_score(r, s["answer"], s["times"], s["beta"]) for r in readings]
    else:
        scores = [kendall_score(r, s["answer"]) for r in readings]
    i = min(range(len(scores)), key=scores.__getitem__)
    return readings[i], scores[i], len(readings) > 1


_NONE_RE = re.compile(r"\b(?:none|no\s+relations?|nothing)\b", re.I)
_ALTERNATIVES_RE = re.compile(r"\bor\b|/", re.I)


def _relations(s: dict[str, Any], text: str | None) -> tuple[Any, float, bool]:
    if not text:
        return None, 0.0, False
    vocab = s["vocabulary"]
    aliases = relation_aliases(tuple(vocab))
    if s["form"] == "jaccard":  # "left-of, near or behind": each alternative is a set; the worst counts
        sets = []
        for part in _ALTERNATIVES_RE.split(text):
            rels = sorted({k for _, k in find_terms(part, aliases, skip_negated=True)})
            if (rels or _NONE_RE.search(part)) and rels not in sets:
                sets.append(rels)
        if not sets:
            return None, 0.0, False
        scores = [jaccard_score(set(r), set(s["answer"])) for r in sets]
        i = min(range(len(scores)), key=scores.__getitem__)
        return sets[i], scores[i], len(sets) > 1
    found = sorted({k for _, k in find_terms(text, aliases, skip_negated=True)})
    if not found and not _NONE_RE.search(text):
        return None, 0.0, False
    if not found:
        return found, 0.0, False
    scores = [graph_score(f, s["answer"][0], s["graph"], vocab) for f in found]
    i = min(range(len(scores)), key=scores.__getitem__)
    return found[i], scores[i], len(found) > 1


_DISCRETE = frozenset(DISCRETE_KINDS)
_EVAL = {
    "numeric": _numeric,
    "grounding": _grounding,
    "count": _count,
    "choice": _choice,
    "direction": _direction,
    "order": _order,
    "relations": _relations,
}


def score_answer(
    spec: dict[str, Any], answer: str | None, phi_config: PhiConfig = DEFAULT_PHI, *, validated: bool = False
) -> tuple[Any, float, float | None, bool]:
    """(parsed, error e, score V or None, ambiguous) for an already extracted answer text."""
    s = spec if validated else validate_spec(spec)
    parsed, value, ambiguous = _EVAL[s["kind"]](s, answer)
    if is_discrete(s["kind"]):
        return parsed, float(phi(value, phi_config, s.get("gamma"))), float(value), ambiguous
    return parsed, float(value), None, ambiguous


def verify(
    spec: dict[str, Any],
    completion: Any,
    k: float,
    *,
    phi_config: PhiConfig = DEFAULT_PHI,
    operator: str = "snra",
    format_weight: float = FORMAT_WEIGHT,
) -> VerifyResult:
    """Verify one completion; never raises for any completion, raises SpecError for a bad spec."""
    return verify_batch([spec], [completion], k, phi_config=phi_config, operator=operator,
                        format_weight=format_weight)[0]


def verify_batch(
    specs: Sequence[dict[str, Any]],
    completions: Sequence[Any],
    k: float | Sequence[float],
    *,
    phi_config: PhiConfig = DEFAULT_PHI,
    operator: str = "snra",
    format_weight: float = FORMAT_WEIGHT,
) -> list[VerifyResult]:
    """verify for aligned lists; each distinct spec object is validated once and the
    reward operator runs once, vectorised, over the whole batch. k may be per item."""
    # A batch allocates only acyclic tuples, lists and results: the cyclic garbage collector would
    # walk the growing batch again and again for nothing (about a sixth of a large batch's time).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _verify_batch(specs, completions, k, phi_config, operator, format_weight)
    finally:
        if gc_was_enabled:
            gc.enable()


def _verify_batch(
    specs: Sequence[dict[str, Any]],
    completions: Sequence[Any],
    k: float | Sequence[float],
    phi_config: PhiConfig,
    operator: str,
    format_weight: float,
) -> list[VerifyResult]:
    if len(specs) != len(completions):
        raise ValueError(f"verify_batch: {len(specs)} specs but {len(completions)} completions")
    if not 0.0 <= format_weight <= 1.0:
        raise ValueError(f"format_weight must be in [0, 1], got {format_weight}")
    op = get_operator(operator)
    n = len(specs)
    # Per distinct spec object: the validated spec, its kind's scorer and Phi's gamma (None: continuous).
    prepared: dict[int, tuple[dict[str, Any], Any, str, bool, float | None]] = {}
    # A GRPO group repeats its spec and often its answer: each distinct (spec, answer text) is scored once.
    scored: dict[tuple[int, str | None], tuple[Any, float, float | None, bool]] = {}
    phi_of: dict[tuple[float, float | None], float] = {}  # discrete scores take few values: Phi once per value
    rows: list[tuple[str, Any, float | None, bool, bool]] = []
    errs: list[float] = []
    fmts: list[bool] = []
    add_row, add_err, add_fmt = rows.append, errs.append, fmts.append
    for spec, completion in zip(specs, completions):
        sid = id(spec)
        prep = prepared.get(sid)
        if prep is None:
            s = validate_spec(spec)
            kind = s["kind"]
            prep = prepared[sid] = (s, _EVAL[kind], kind, kind in _DISCRETE, s.get("gamma"))
        ok, answer = split_completion(completion if type(completion) is str else _as_text(completion))
        s, evaluate, kind, discrete, gamma = prep
        if discrete:  # few distinct answers per spec in a group: each is scored once
            key = (sid, answer)
            hit = scored.get(key)
            if hit is None:
                parsed, value, ambiguous = evaluate(s, answer)
                pkey = (value, gamma)
                e = phi_of.get(pkey)
                if e is None:
                    e = phi_of[pkey] = phi(value, phi_config, gamma)
                hit = scored[key] = (parsed, e, float(value), ambiguous)
            elif type(hit[0]) is list:  # a list answer (order, relations) is the row's own copy
                hit = (hit[0][:], hit[1], hit[2], hit[3])
            parsed, e, score, ambiguous = hit
            add_err(e)
            add_row((kind, parsed, score, ok, ambiguous))
        else:
            parsed, value, ambiguous = evaluate(s, answer)
            add_err(value)
            add_row((kind, parsed, None, ok, ambiguous))
        add_fmt(ok)
    errors = np.array(errs, dtype=np.float64)
    fmt = np.array(fmts, dtype=np.float64)
    ks = np.asarray(k, dtype=np.float64)
    if ks.ndim and ks.shape != (n,):
        raise ValueError(f"verify_batch: k has shape {ks.shape}, expected a scalar or ({n},)")
    if not (np.all(ks > 0) and np.all(np.isfinite(ks))):
        raise ValueError(f"verify_batch: k must be finite and > 0, got {k}")
    r = np.atleast_1d(op(ks, errors)) if n else np.empty(0)
    total = (1.0 - format_weight) * r + format_weight * fmt
    return [
        VerifyResult(kind, parsed, e, score, ok, ri, ti, amb)  # tolist() gives Python floats
        for (kind, parsed, score, ok, amb), e, ri, ti in zip(rows, errors.tolist(), r.tolist(), total.tolist())
    ]
