"""VSI-590K ingest: turn `vsi_590k.jsonl` rows into verifiable items.

Row format: `{"video" | "image": ..., "conversations": [{"from": "human", "value": q},
{"from": "gpt", "value": a}], "question_type": ...}`; the human turn starts with `<image>` or
`<video>` (either, for image and video rows alike). Each question type maps to one of our
subtasks; the ground truth is parsed (numbers with units, option letters with the options read
from the question text, orders, direction classes) into a verifier spec; the media reference is
kept in the provenance. The unit a question names ("in feet", "measured in inches", "(in meters)",
"in square feet") governs a bare-number answer ("6.8" asked in feet is 6.8 ft), and the item keeps
that unit. Numeric `absolute_direction_object` answers are clock hours when the question is about
clock directions, else angles in degrees (an angular numeric spec). Unknown question types and
rejected rows are counted per question type with their line numbers and reasons, never lost silently.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from numerical3d.pipeline.items import Item, item_id
from numerical3d.pipeline.templating import Templates, templates

SOURCE = "vsi590k"

# question_type -> (subtask, kind of an open-ended answer)
QUESTION_TYPES: dict[str, tuple[str, str]] = {
    "absolute_count": ("object_count", "count"),
    "relative_count": ("object_count", "choice"),
    "absolute_size_object": ("object_size", "numeric"),
    "relative_size_object": ("object_size", "choice"),
    "absolute_size_room": ("room_size", "numeric"),
    "absolute_distance_object": ("abs_distance", "numeric"),
    "relative_distance_object": ("rel_distance", "choice"),
    "relative_distance_camera": ("camera_distance", "choice"),
    "absolute_direction_object": ("rel_direction", "direction"),
    "relative_direction_object": ("rel_direction", "direction"),
    "relative_direction_camera": ("rel_direction", "direction"),
    "appearance_order": ("appearance_order", "order"),
}
# Default unit per numeric question type, used only when neither the question nor the answer names one
# (VSI conventions), and the dimension each type's answer must have.
DEFAULT_UNIT = {"absolute_size_object": "cm", "absolute_size_room": "m2", "absolute_distance_object": "m"}
DIMENSION = {"absolute_size_object": "length", "absolute_size_room": "area", "absolute_distance_object": "length"}
# "... in feet", "measured in inches", "(in meters)", "in square feet": the phrase after "in" names a unit.
_IN_UNIT = re.compile(r"\bin(?:to)?\s+((?:square|sq\.?)\s+[a-z]+|[a-z°]+(?:\s*(?:\^\s*2|²))?)", re.I)
_CLOCK_QUESTION = re.compile(r"o'?\s*clock|clock\s+(?:direction|position)", re.I)
_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(.*?)\s*\.?\s*$", re.I)
_OPTION = re.compile(r"^\s*\(?([A-J])[.):]\s*(.+?)\s*$")
_LETTER = re.compile(r"^\s*\(?([A-J])\)?(?:[.):]|\s|$)")
_MEDIA_TOKEN = re.compile(r"<(?:image|video)>\s*", re.I)
_TRAILING_INSTRUCTIONS = re.compile(
    r"\s*(Please answer the question using a single word or phrase\.?|"
    r"Answer with the option'?s letter from the given choices directly\.?|"
    r"Please respond with (?:only )?the (?:letter|number)[^.]*\.?|These are frames of a video\.?)\s*", re.I)
_CLOCK = re.compile(r"^(\d{1,2})\s*o'?\s*clock$", re.I)

RING4 = ["front", "left", "back", "right"]
RING8 = ["front", "front-left", "left", "back-left", "back", "back-right", "right", "front-right"]
QUADRANTS = ["front-left", "back-left", "back-right", "front-right"]
COMPASS8 = ["north", "north-west", "west", "south-west", "south", "south-east", "east", "north-east"]


class RowError(ValueError):
    """A row whose ground truth cannot be turned into a verifier spec."""


class UnknownType(KeyError):
    """A question_type outside QUESTION_TYPES."""


@dataclass
class IngestReport:
    """What an ingest kept and what it left out (with line numbers), overall and per question type."""

    path: str
    rows: int = 0
    kept: Counter = field(default_factory=Counter)  # subtask -> items
    by_type: Counter = field(default_factory=Counter)  # question_type -> items
    unknown_types: dict[str, list[int]] = field(default_factory=dict)  # question_type -> line numbers
    unparseable: list[tuple[int, str]] = field(default_factory=list)  # (line, reason)
    rejected: dict[str, list[int]] = field(default_factory=dict)  # question_type -> lines in `unparseable`

    @property
    def dropped(self) -> int:
        return sum(len(v) for v in self.unknown_types.values()) + len(self.unparseable)

    def per_type(self) -> dict[str, dict[str, Any]]:
        """question_type -> accepted, rejected and the rejected rows' (line, reason); unreadable rows
        (invalid JSON, no question_type) are under "(unreadable)"."""
        reasons = dict(self.unparseable)
        out: dict[str, dict[str, Any]] = {}
        for qtype in sorted(set(self.by_type) | set(self.rejected)):
            lines = self.rejected.get(qtype, [])
            out[qtype] = {"accepted": self.by_type.get(qtype, 0), "rejected": len(lines),
                          "rejections": [{"line": n, "reason": reasons[n]} for n in lines]}
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "rows": self.rows, "kept": dict(self.kept), "by_type": dict(self.by_type),
                "unknown_types": self.unknown_types,
                "unparseable": [{"line": n, "reason": r} for n, r in self.unparseable],
                "per_type": self.per_type()}


def parse_options(question: str) -> tuple[str, list[str]]:
    """Split 'stem ... Options:\\nA. x\\nB. y' (or lines 'A. x' without the header) into (stem, options)."""
    lines = question.splitlines()
    options: list[str] = []
    stem: list[str] = []
    for line in lines:
        m = _OPTION.match(line)
        if m and m.group(1) == chr(ord("A") + len(options)):
            options.append(m.group(2))
        elif line.strip().lower().rstrip(":") == "options":
            continue
        elif options:
            stem.append(line)  # instructions after the options block
        else:
            stem.append(line)
    return "\n".join(stem).strip(), options


def unit_of(phrase: str) -> str | None:
    """The canonical unit (verifiers.parsing.UNITS) a phrase such as "square feet" names, or None."""
    from numerical3d.verifiers.parsing import parse_quantities

    found = parse_quantities("1 " + phrase.strip())
    return found[0][1] if len(found) == 1 else None


def question_unit(question: str) -> str | None:
    """The unit the question asks its answer in ("in feet" -> ft), or None; two different units are an error."""
    units = {u for m in _IN_UNIT.finditer(question) if (u := unit_of(m.group(1))) is not None}
    if len(units) > 1:
        raise RowError(f"question names several units {sorted(units)}")
    return units.pop() if units else None


def parse_number(text: str, default_unit: str | None) -> tuple[float, str]:
    """'1.5 meters' -> (1.5, 'm'); a bare number is in `default_unit` (the question's unit, else the type's)."""
    m = _NUMBER.match(text)
    if m is None:
        raise RowError(f"answer {text!r} is not a number")
    value, rest = float(m.group(1)), m.group(2).strip().rstrip(".")
    if not rest:
        if default_unit is None:
            raise RowError(f"answer {text!r} has no unit and the question type has no default")
        return value, default_unit
    unit = unit_of(rest)
    if not unit:
        raise RowError(f"answer {text!r} has an unknown unit {rest!r}")
    return value, unit


def quantity(answer: str, question: str, qtype: str) -> tuple[float, str]:
    """The answer as (value, unit) in the unit the question names (it governs a bare number), else in
    the answer's own unit, else in the type's default; checked against the type's dimension."""
    from numerical3d.verifiers.parsing import UNITS

    asked = question_unit(question)
    value, unit = parse_number(answer, asked or DEFAULT_UNIT.get(qtype))
    want = DIMENSION[qtype]
    for u in (asked, unit):
        if u is not None and UNITS[u][0] != want:
            raise RowError(f"{qtype} needs a {want}, but {'the question asks' if u == asked else 'the answer is'} in {u}")
    if asked is not None and unit != asked:
        value, unit = value * UNITS[unit][1] / UNITS[asked][1], asked
    return value, unit


def direction_classes(answer: str) -> list[str]:
    """The class ring an open-ended direction answer belongs to."""
    a = answer.lower()
    for ring in (RING4, QUADRANTS, RING8, COMPASS8):
        if a in ring:
            return ring
    if _CLOCK.match(a):
        return [f"{h} o'clock" for h in (12, *range(11, 0, -1))]  # counter-clockwise ring from ahead
    raise RowError(f"direction answer {answer!r} is not a known class")


def numeric_direction(value: float, question: str) -> tuple[dict[str, Any], str]:
    """A direction answered by a bare number (VSI-590K's absolute_direction_object rows).

    A question about clock directions takes an hour 1-12 as that clock class; otherwise the number
    is an angle in degrees, verified on the circle (350 and -10 are one answer), so neither the
    sign convention nor the range (-180..180 or 0..360) has to be guessed.
    """
    from numerical3d.verifiers.spec import direction_spec, numeric_spec

    if _CLOCK_QUESTION.search(question):
        if not value.is_integer() or not 1 <= value <= 12:
            raise RowError(f"clock direction answer {value:g} is not an hour 1-12")
        cls = f"{int(value)} o'clock"
        return direction_spec(cls, direction_classes(cls), ring=True), "direction"
    return numeric_spec(value, "deg", error="angular"), "numeric"


def _media(row: dict[str, Any]) -> dict[str, Any]:
    media = {k: row[k] for k in ("video", "image") if k in row}
    if not media:
        raise RowError("row has neither 'video' nor 'image'")
    return media


def _scene_id(media: dict[str, Any]) -> str:
    ref = media.get("video", media.get("image"))
    ref = ref[0] if isinstance(ref, list) and ref else ref
    if not isinstance(ref, str) or not ref:
        raise RowError("media reference is not a path")
    return Path(ref).stem


def row_to_item(row: dict[str, Any], line: int, tpl: Templates) -> Item:
    """One row as an item; raises RowError (unparseable) or UnknownType."""
    from numerical3d.verifiers.spec import (SpecError, canonical_completion, choice_spec, count_spec, direction_spec,
                                numeric_spec, order_spec)

    qtype = row.get("question_type")
    if qtype not in QUESTION_TYPES:
        raise UnknownType(qtype)
    subtask, kind = QUESTION_TYPES[qtype]
    conv = row.get("conversations")
    if not isinstance(conv, list) or len(conv) < 2:
        raise RowError("conversations must hold a human turn and a gpt turn")
    human = next((t.get("value") for t in conv if isinstance(t, dict) and t.get("from") == "human"), None)
    gpt = next((t.get("value") for t in conv if isinstance(t, dict) and t.get("from") == "gpt"), None)
    if not isinstance(human, str) or not isinstance(gpt, str) or not gpt.strip():
        raise RowError("missing human question or gpt answer")
    media = _media(row)
    question = _TRAILING_INSTRUCTIONS.sub(" ", _MEDIA_TOKEN.sub("", human)).strip()
    stem, options = parse_options(question)
    answer = gpt.strip()
    try:
        if options:
            m = _LETTER.match(answer)
            letter = m.group(1) if m else next((chr(ord("A") + i) for i, o in enumerate(options)
                                                if o.strip().lower() == answer.lower().rstrip(".")), None)
            if letter is None or ord(letter) - ord("A") >= len(options):
                raise RowError(f"answer {answer!r} is not one of the {len(options)} option letters")
            spec, kind = choice_spec(letter, options), "choice"
        elif kind == "count":
            value, _ = parse_number(answer, "")
            if not value.is_integer():
                raise RowError(f"count answer {answer!r} is not a whole number")
            spec = count_spec(int(value))
        elif kind == "numeric":
            spec = numeric_spec(*quantity(answer, stem, qtype))
        elif kind == "direction" and (bare := _NUMBER.match(answer)) is not None and not bare.group(2):
            spec, kind = numeric_direction(float(bare.group(1)), stem)
        elif kind == "direction":
            cls = answer.lower().rstrip(".")
            spec = direction_spec(cls, direction_classes(cls), ring=True)
        elif kind == "order":
            labels = [s.strip() for s in re.split(r",|\n|;|->", answer.rstrip(".")) if s.strip()]
            spec = order_spec(labels)
        elif answer.lower().rstrip(".") in ("yes", "no"):
            spec, kind, options = choice_spec("A" if answer.lower().startswith("yes") else "B", ["yes", "no"]), \
                "choice", ["yes", "no"]
        else:
            raise RowError(f"{qtype} without options needs a yes/no answer, got {answer!r}")
    except SpecError as exc:
        raise RowError(str(exc)) from exc
    prompt = tpl.prompt(stem, kind, options=options or None, unit=spec.get("unit"), classes=spec.get("classes"))
    completion = canonical_completion(spec)
    scene_id = _scene_id(media)
    return Item(
        id=item_id(SOURCE, scene_id, subtask, {"line": line, "question": human}),
        source=SOURCE, scene_id=scene_id, subtask=subtask, question=stem, prompt=prompt,
        answer=re.search(r"<answer>(.*?)</answer>", completion, re.S).group(1).strip(), verifier=spec,
        options=options or None,
        provenance={"media": media, "question_type": qtype, "line": line, "original_question": human,
                    "original_answer": gpt, "rule": {"name": "vsi590k_ground_truth"}})


def ingest(path: str | Path, tpl: Templates | None = None) -> tuple[list[Item], IngestReport]:
    """All items of a VSI-590K jsonl file, and the report of what was left out."""
    items = list(iter_ingest(path, report := IngestReport(str(path)), tpl))
    return items, report


def iter_ingest(path: str | Path, report: IngestReport, tpl: Templates | None = None) -> Iterator[Item]:
    """Stream items of a VSI-590K jsonl file, filling `report` as it goes."""
    tpl = tpl or templates()
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: VSI-590K file not found")
    with path.open(encoding="utf-8") as f:
        for line_no, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            report.rows += 1
            row = None
            try:
                row = json.loads(raw)
                if not isinstance(row, dict):
                    raise RowError("row is not a JSON object")
                item = row_to_item(row, line_no, tpl)
            except (json.JSONDecodeError, RowError) as exc:
                reason = f"invalid JSON: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else str(exc)
                report.unparseable.append((line_no, reason))
                qtype = row.get("question_type") if isinstance(row, dict) else None
                report.rejected.setdefault(qtype if isinstance(qtype, str) else "(unreadable)", []).append(line_no)
                continue
            except UnknownType as exc:
                report.unknown_types.setdefault(str(exc.args[0]), []).append(line_no)
                continue
            report.kept[item.subtask] += 1
            report.by_type[item.provenance["question_type"]] += 1
            yield item
