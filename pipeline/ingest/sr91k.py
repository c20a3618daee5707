"""SR-91k ingest: SpaceR's spatial QA, released inside SpaceR-151k.

Layout (SpaceR's training script, OuyangKun10/SpaceR `SG-RLVR.py`, reads these fields): one
`SpaceR-151k.jsonl` (a JSON array is read too) whose rows are `{problem_id, problem, data_type
("video" | "image"), problem_type ("multiple choice" | "numerical" | "regression" | "OCR" |
"free-form"), options (["A. ...", ...] for multiple choice), solution ("<answer>X</answer>"), path
(the video or image), data_source}`. SR-91k is the rows whose `data_source` is `SR_dataset`; the
other rows of SpaceR-151k come from other corpora and are counted under `unknown_types` as
`(data_source <name>)`, never ingested.

The rows carry no spatial question type, so the subtask is read from the question's wording
(`classify`, the phrasing of the VSI-style templates SR-91k was generated from); a question no rule
recognises is counted as `(unclassified)` with its line. The answer is parsed with the rules the
other corpora use: a letter with the options, a number in the unit the question names (else the
subtask's VSI unit), a direction word, an order; free text without such a reading is rejected with
its reason. The source video's canonical scene id is the item's scene, for the split and for
decontamination (SpaceR lists VSI-Bench's videos as excluded; the build checks again).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from numerical3d.pipeline.ingest.core import (IngestReport, RowError, UnknownType, answer_spec, ingest_rows, make_item,
                                              media_digests, media_path, resolve_media)
from numerical3d.pipeline.items import Item, item_id
from numerical3d.pipeline.templating import Templates, templates

SOURCE = "sr91k"
SR_DATA_SOURCE = "SR_dataset"
PROBLEM_TYPES = ("multiple choice", "numerical", "regression", "free-form")  # "OCR" has no spatial reading
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.S | re.I)

# (subtask, how an open answer is read, default unit, dimension); the first matching rule wins.
RULES: list[tuple[re.Pattern[str], tuple[str, str, str | None, str | None]]] = [
    (re.compile(r"appearance order", re.I), ("appearance_order", "order", None, None)),
    (re.compile(r"\bnavigate\b|\broute\b|robot beginning", re.I), ("route_plan", "choice", None, None)),
    (re.compile(r"\bhow many\b", re.I), ("object_count", "count", None, None)),
    (re.compile(r"standing by .* facing|\bfacing\b.*\b(left|right|back)\b", re.I | re.S),
     ("rel_direction", "direction", None, None)),
    (re.compile(r"size of (?:this|the) room|room size|area of (?:this|the) room", re.I),
     ("room_size", "numeric", "m2", "area")),
    (re.compile(r"longest dimension|\b(?:length|height|width) of the\b|how (?:long|tall|wide|big) is", re.I),
     ("object_size", "numeric", "cm", "length")),
    (re.compile(r"closest to the camera|(?:camera|viewer)\b.*\b(?:distance|how far)|(?:distance|how far)\b.*\b(?:camera|viewer)",
                re.I | re.S),
     ("camera_distance", "numeric", "m", "length")),
    (re.compile(r"which of (?:these|the following) objects.*\b(?:closest|nearest|farthest|furthest)\b", re.I | re.S),
     ("rel_distance", "choice", None, None)),
    (re.compile(r"distance between|how far", re.I), ("abs_distance", "numeric", "m", "length")),
]


def classify(problem: str) -> tuple[str, str, str | None, str | None]:
    """(subtask, answer kind, default unit, dimension) the question's wording calls for."""
    for pattern, rule in RULES:
        if pattern.search(problem):
            return rule
    raise UnknownType("(unclassified)")


def solution_text(solution: Any) -> str:
    """The answer inside `<answer>...</answer>` (the whole text when it has no tags)."""
    if not isinstance(solution, str) or not solution.strip():
        raise RowError("row has no solution")
    m = _ANSWER.search(solution)
    text = (m.group(1) if m else solution).strip()
    if not text:
        raise RowError(f"solution {solution!r} holds an empty answer")
    return text


def options_of(row: dict[str, Any]) -> list[str]:
    """The options without their letters ("A. sofa" -> "sofa"), checked to run A, B, C, ..."""
    raw = row.get("options")
    if not isinstance(raw, list) or len(raw) < 2:
        raise RowError("multiple choice row without at least two options")
    out = []
    for i, opt in enumerate(raw):
        m = re.match(r"^\s*\(?([A-J])[.):]\s*(.+?)\s*$", str(opt), re.S)
        if m is None or m.group(1) != chr(ord("A") + i):
            raise RowError(f"option {i + 1} {opt!r} is not '{chr(ord('A') + i)}. ...'")
        out.append(m.group(2))
    return out


def row_to_item(row: dict[str, Any], line: int, tpl: Templates, media_root: Path | None = None) -> Item:
    """One SR-91k row as an item; raises RowError (unparseable) or UnknownType (not SR-91k / unclassified)."""
    origin = row.get("data_source")
    if origin != SR_DATA_SOURCE:
        raise UnknownType(f"(data_source {origin})")
    ptype = row.get("problem_type")
    if ptype not in PROBLEM_TYPES:
        raise UnknownType(f"(problem_type {ptype})")
    problem = row.get("problem")
    if not isinstance(problem, str) or not problem.strip():
        raise RowError("row has no problem")
    stem = problem.strip()
    subtask, kind, unit, dimension = classify(stem)
    media = str(media_path(row.get("path"), "path"))
    data_type = row.get("data_type") if row.get("data_type") in ("video", "image") else "video"
    digests = media_digests(resolve_media(media_root, media, "path"), data_type) if media_root is not None else {}
    options = options_of(row) if ptype == "multiple choice" else []
    if ptype in ("numerical", "regression") and kind != "count":
        if dimension is None:
            raise RowError(f"a numerical answer to a {subtask} question has no reading")
        kind = "numeric"
    spec, kind, options = answer_spec(solution_text(row.get("solution")), stem, options, kind, default_unit=unit,
                                      dimension=dimension, what=f"{subtask} ({ptype})")
    scene_id = Path(media).stem
    return make_item(
        id=item_id(SOURCE, scene_id, subtask, {"id": row.get("problem_id"), "line": line, "question": problem}),
        source=SOURCE, scene_id=scene_id, subtask=subtask, stem=stem, kind=kind, spec=spec, options=options, tpl=tpl,
        provenance={"media": {data_type: media}, **digests,
                    "question_type": f"{subtask} ({ptype})", "problem_type": ptype, "line": line,
                    "corpus_id": row.get("problem_id"), "original_question": problem,
                    "original_answer": row.get("solution"), "rule": {"name": "sr91k_ground_truth"}})


def ingest(path: str | Path, tpl: Templates | None = None, media_root: str | Path | None = None
           ) -> tuple[list[Item], IngestReport]:
    """All SR-91k items of a SpaceR-151k file, and the report of what was left out."""
    items = list(iter_ingest(path, report := IngestReport(str(path)), tpl, media_root))
    return items, report


def iter_ingest(path: str | Path, report: IngestReport, tpl: Templates | None = None,
                media_root: str | Path | None = None) -> Iterator[Item]:
    """Stream the items, filling `report` as it goes."""
    tpl = tpl or templates()
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: SpaceR-151k file not found")
    root = Path(media_root) if media_root is not None else None
    yield from ingest_rows(path, report, lambda row, line: row_to_item(row, line, tpl, root),
                           lambda row: row.get("problem_type"))
