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

from pathlib import Path
from typing import Any, Iterator

from numerical3d.pipeline.ingest.core import (IngestReport, RowError, UnknownType, answer_spec, clean_question,
                                              conversation, ingest_rows, make_item, parse_number, parse_options)
from numerical3d.pipeline.items import Item, item_id
from numerical3d.pipeline.templating import Templates, templates

__all__ = ["DEFAULT_UNIT", "DIMENSION", "QUESTION_TYPES", "IngestReport", "RowError", "UnknownType", "ingest",
           "iter_ingest", "parse_number", "parse_options", "row_to_item"]

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
    qtype = row.get("question_type")
    if qtype not in QUESTION_TYPES:
        raise UnknownType(qtype)
    subtask, kind = QUESTION_TYPES[qtype]
    human, gpt = conversation(row)
    media = _media(row)
    stem, options = parse_options(clean_question(human))
    spec, kind, options = answer_spec(gpt.strip(), stem, options, kind, default_unit=DEFAULT_UNIT.get(qtype),
                                      dimension=DIMENSION.get(qtype), what=qtype)
    scene_id = _scene_id(media)
    return make_item(
        id=item_id(SOURCE, scene_id, subtask, {"line": line, "question": human}), source=SOURCE, scene_id=scene_id,
        subtask=subtask, stem=stem, kind=kind, spec=spec, options=options, tpl=tpl,
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
    yield from ingest_rows(path, report, lambda row, line: row_to_item(row, line, tpl), lambda row: row.get("question_type"))
