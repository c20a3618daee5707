"""What the corpus ingests share: reading rows, turning a ground truth into a verifier spec, media
references and the report of what was left out.

Every corpus (VSI-590K, MindCube, VLM-3R, SR-91k) is a file of question rows whose answers are
already known. An ingest turns each row into an `Item` with the verifier its answer calls for
(numbers keep the unit the question asks in, letters become choice specs with the options read
from the question, direction words a class ring, lists an order), keeps the row's media
reference in the provenance, and never stops on a bad row: `ingest_rows` records it by line
(and reason) in an `IngestReport` and goes on. Ids read from a file are data: a media reference
is joined to a folder only through `media_path`, which refuses absolute paths and `..`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

from numerical3d.errors import Numerical3DError
from numerical3d.pipeline.items import Item
from numerical3d.pipeline.templating import Templates

# "... in feet", "measured in inches", "(in meters)", "in square feet": the phrase after "in" names a unit.
_IN_UNIT = re.compile(r"\bin(?:to)?\s+((?:square|sq\.?)\s+[a-z]+|[a-z°]+(?:\s*(?:\^\s*2|²))?)", re.I)
_CLOCK_QUESTION = re.compile(r"o'?\s*clock|clock\s+(?:direction|position)", re.I)
NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(.*?)\s*\.?\s*$", re.I)
_OPTION = re.compile(r"^\s*\(?([A-J])[.):]\s*(.+?)\s*$")
_INLINE_OPTION = re.compile(r"(?:^|\s)\(?([A-J])[.)]\s+")
LETTER = re.compile(r"^\s*\(?([A-J])\)?(?:[.):]|\s|$)")
MEDIA_TOKEN = re.compile(r"<(?:image|video)>\s*", re.I)
TRAILING_INSTRUCTIONS = re.compile(
    r"\s*(Please answer the question using a single word or phrase\.?|"
    r"Answer with the option'?s letter from the given choices directly\.?|"
    r"Please respond with (?:only )?the (?:letter|number)[^.]*\.?|These are frames of a video\.?)\s*", re.I)
_CLOCK = re.compile(r"^(\d{1,2})\s*o'?\s*clock$", re.I)

RING4 = ["front", "left", "back", "right"]
RING8 = ["front", "front-left", "left", "back-left", "back", "back-right", "right", "front-right"]
QUADRANTS = ["front-left", "back-left", "back-right", "front-right"]
COMPASS8 = ["north", "north-west", "west", "south-west", "south", "south-east", "east", "north-east"]


class RowError(ValueError, Numerical3DError):
    """A row whose ground truth cannot be turned into a verifier spec."""


class UnknownType(KeyError, Numerical3DError):
    """A question type outside the corpus's mapping (or one it leaves out on purpose)."""


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
    options: list[str] = []
    stem: list[str] = []
    for line in question.splitlines():
        m = _OPTION.match(line)
        if m and m.group(1) == chr(ord("A") + len(options)):
            options.append(m.group(2))
        elif line.strip().lower().rstrip(":") == "options":
            continue
        else:
            stem.append(line)  # the question, or instructions after the options block
    return "\n".join(stem).strip(), options


def parse_inline_options(question: str) -> tuple[str, list[str]]:
    """Options written on one line after the stem ('... right side? A. Yes B. No'), as MindCube
    writes them: letters A, B, ... in sequence, each followed by '.' or ')'. Falls back to
    `parse_options` (one option a line) when that finds two or more."""
    stem, options = parse_options(question)
    if len(options) >= 2:
        return stem, options
    starts: list[re.Match[str]] = []
    for m in _INLINE_OPTION.finditer(question):
        if m.group(1) == chr(ord("A") + len(starts)):
            starts.append(m)
    if len(starts) < 2:
        return question.strip(), []
    ends = [m.start() for m in starts[1:]] + [len(question)]
    options = [question[m.end():end].strip() for m, end in zip(starts, ends)]
    return question[:starts[0].start()].strip(), options


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
    m = NUMBER.match(text)
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


def quantity(answer: str, question: str, default_unit: str | None, dimension: str, what: str) -> tuple[float, str]:
    """The answer as (value, unit) in the unit the question names (it governs a bare number), else in
    the answer's own unit, else in `default_unit`; checked against `dimension` ("length", "area")."""
    from numerical3d.verifiers.parsing import UNITS

    asked = question_unit(question)
    value, unit = parse_number(answer, asked or default_unit)
    for u in (asked, unit):
        if u is not None and UNITS[u][0] != dimension:
            raise RowError(f"{what} needs a {dimension}, but {'the question asks' if u == asked else 'the answer is'} in {u}")
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


def letter_of(answer: str, options: list[str]) -> str:
    """The option letter an answer names: 'B', '(B)', 'B. chair', or the option's own text."""
    m = LETTER.match(answer)
    letter = m.group(1) if m else next((chr(ord("A") + i) for i, o in enumerate(options)
                                        if o.strip().lower() == answer.lower().rstrip(".")), None)
    if letter is None or ord(letter) - ord("A") >= len(options):
        raise RowError(f"answer {answer!r} is not one of the {len(options)} option letters")
    return letter


def answer_spec(answer: str, stem: str, options: list[str], kind: str, *, default_unit: str | None = None,
                dimension: str | None = None, what: str = "") -> tuple[dict[str, Any], str, list[str]]:
    """The verifier spec a known answer calls for: (spec, kind, options).

    With options the answer is a letter (choice); otherwise `kind` says how to read it: "count"
    (a whole number), "numeric" (a quantity in the unit the question asks, else the answer's, else
    `default_unit`), "direction" (a class word, or a number: clock hour or angle), "order" (a list)
    or "choice" without options (yes / no). `what` names the question type in errors.
    """
    from numerical3d.verifiers.spec import SpecError, choice_spec, count_spec, direction_spec, numeric_spec, order_spec

    try:
        if options:
            return choice_spec(letter_of(answer, options), options), "choice", options
        if kind == "count":
            value, _ = parse_number(answer, "")
            if not value.is_integer():
                raise RowError(f"count answer {answer!r} is not a whole number")
            return count_spec(int(value)), kind, options
        if kind == "numeric":
            if dimension is None:
                raise RowError(f"{what} has no dimension for a numeric answer")
            return numeric_spec(*quantity(answer, stem, default_unit, dimension, what)), kind, options
        if kind == "direction" and (bare := NUMBER.match(answer)) is not None and not bare.group(2):
            spec, kind = numeric_direction(float(bare.group(1)), stem)
            return spec, kind, options
        if kind == "direction":
            cls = answer.lower().rstrip(".")
            return direction_spec(cls, direction_classes(cls), ring=True), kind, options
        if kind == "order":
            labels = [s.strip() for s in re.split(r",|\n|;|->", answer.rstrip(".")) if s.strip()]
            return order_spec(labels), kind, options
        if answer.lower().rstrip(".") in ("yes", "no"):
            return choice_spec("A" if answer.lower().startswith("yes") else "B", ["yes", "no"]), "choice", ["yes", "no"]
        raise RowError(f"{what} without options needs a yes/no answer, got {answer!r}")
    except SpecError as exc:
        raise RowError(str(exc)) from exc


def make_item(*, id: str, source: str, scene_id: str, subtask: str, stem: str, kind: str, spec: dict[str, Any],
              options: list[str], tpl: Templates, provenance: dict[str, Any]) -> Item:
    """The item of a converted row: the prompt the project's template words and the canonical answer."""
    from numerical3d.verifiers.spec import canonical_completion

    prompt = tpl.prompt(stem, kind, options=options or None, unit=spec.get("unit"), classes=spec.get("classes"))
    completion = canonical_completion(spec)
    answer = re.search(r"<answer>(.*?)</answer>", completion, re.S).group(1).strip()
    return Item(id=id, source=source, scene_id=scene_id, subtask=subtask, question=stem, prompt=prompt, answer=answer,
                verifier=spec, options=options or None, provenance=provenance)


def conversation(row: dict[str, Any]) -> tuple[str, str]:
    """The (human, gpt) turns of a LLaVA-style row (`conversations: [{from, value}, ...]`)."""
    conv = row.get("conversations")
    if not isinstance(conv, list) or len(conv) < 2:
        raise RowError("conversations must hold a human turn and a gpt turn")
    human = next((t.get("value") for t in conv if isinstance(t, dict) and t.get("from") == "human"), None)
    gpt = next((t.get("value") for t in conv if isinstance(t, dict) and t.get("from") == "gpt"), None)
    if not isinstance(human, str) or not isinstance(gpt, str) or not gpt.strip():
        raise RowError("missing human question or gpt answer")
    return human, gpt


def clean_question(text: str) -> str:
    """A released prompt without its media tokens and the benchmark's answer-format instructions."""
    return TRAILING_INSTRUCTIONS.sub(" ", MEDIA_TOKEN.sub("", text)).strip()


def media_path(ref: Any, what: str = "media reference") -> PurePosixPath:
    """A media reference from a row as a relative path, checked before it is joined to any folder:
    absolute paths, drive letters, `..` and empty parts are refused (a file's ids are data)."""
    if not isinstance(ref, str) or not ref.strip():
        raise RowError(f"{what} {ref!r} is not a path")
    text = ref.strip().replace("\\", "/")
    if text.startswith("./"):
        text = text[2:]
    path = PurePosixPath(text)
    if path.is_absolute() or re.match(r"^[A-Za-z]:", text) or any(p in ("..", "") for p in text.split("/")):
        raise RowError(f"{what} {ref!r} is not a path inside the release")
    return path


def resolve_media(root: Path, ref: Any, what: str = "media reference") -> Path:
    """The file a checked relative reference names under `root`; a missing file is a row error."""
    path = root / media_path(ref, what)
    if not path.is_file():
        raise RowError(f"{what} {ref!r} not found under {root}")
    return path


def media_digests(path: Path, kind: str) -> dict[str, list[str]]:
    """The provenance digests of a resolved media file, for decontamination: `image_digests` (pixels)
    for an image, `video_digests` (bytes) for a video; a file is read once however many rows name it."""
    stat = path.stat()
    return _media_digests(str(path), kind, stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=65536)
def _media_digests(path: str, kind: str, size: int, mtime_ns: int) -> dict[str, list[str]]:
    from numerical3d.dataset.fingerprint import file_digest, image_digest

    if kind == "image":
        digest = image_digest(Path(path).read_bytes())
        if digest is None:
            raise RowError(f"image {path} cannot be decoded")
        return {"image_digests": [digest]}
    return {"video_digests": [file_digest(Path(path))]}


def _json_array_rows(text: str) -> Iterator[tuple[int, Any]]:
    """(line, element) of a JSON array read element by element, so each row keeps its line number;
    a malformed element ends the file (nothing after it can be located) as one error."""
    decoder = json.JSONDecoder()
    pos = text.index("[") + 1
    line, counted = 1, 0  # newlines before `counted`, kept up to date (one count over the whole file)
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        line += text.count("\n", counted, pos)
        counted = pos
        if pos >= len(text):
            yield line, RowError("invalid JSON: the array is not closed")
            return
        if text[pos] == "]":
            return
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            yield line, RowError(f"invalid JSON: {exc.msg} (the rest of the file is not read)")
            return
        yield line, value


def read_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """(line, row) of a JSON Lines file, or of a file holding one JSON array (VLM-3R's merged QA);
    an unreadable row is a `RowError` in place of the row."""
    with path.open(encoding="utf-8") as f:
        head = f.read(4096)
        f.seek(0)
        if head.lstrip().startswith("["):
            yield from _json_array_rows(f.read())
            return
        for line_no, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                yield line_no, json.loads(raw)
            except json.JSONDecodeError as exc:
                yield line_no, RowError(f"invalid JSON: {exc.msg}")


def ingest_rows(path: Path, report: IngestReport, convert: Callable[[dict[str, Any], int], Item],
                type_of: Callable[[dict[str, Any]], Any]) -> Iterator[Item]:
    """Items of every row `convert` accepts; every other row is in `report` with its line: unknown
    question types by type, rejected rows with their reason under their type (`type_of(row)`)."""
    for line_no, row in read_rows(path):
        report.rows += 1
        try:
            if isinstance(row, RowError):
                raise row
            if not isinstance(row, dict):
                raise RowError("row is not a JSON object")
            item = convert(row, line_no)
        except RowError as exc:
            report.unparseable.append((line_no, str(exc)))
            qtype = type_of(row) if isinstance(row, dict) else None
            report.rejected.setdefault(qtype if isinstance(qtype, str) else "(unreadable)", []).append(line_no)
            continue
        except UnknownType as exc:
            report.unknown_types.setdefault(str(exc.args[0]), []).append(line_no)
            continue
        report.kept[item.subtask] += 1
        report.by_type[item.provenance["question_type"]] += 1
        yield item
