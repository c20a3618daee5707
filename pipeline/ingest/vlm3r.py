"""VLM-3R instruction data ingest: the released spatial QA over ScanNet, ScanNet++ and ARKitScenes.

Layout (the authors' training config and data scripts, VITA-Group/VLM-3R): one or more JSON files
`merged_qa_<dataset>_train.json`, each a JSON array (a JSON Lines file is read too) of LLaVA-style
rows `{id, data_source, scene_name, question_type, video, conversations: [{from: human, value},
{from: gpt, value}]}`. The human turn is "<image>\\nThese are frames of a video.\\n<question>\\n"
plus, for multiple choice, "Options:\\nA. ...", and the answer-format instruction; the gpt turn is
the option letter, or for the numeric types the bare ground truth, in the unit the question names
("measured in centimeters", "(in meters)", "(in square meters)"), which the item keeps.

Each question type maps to one of our subtasks as VSI-590K's do (`QUESTION_TYPES`). The camera
motion types of VLM-3R's temporal benchmark (`NOT_MAPPED`) measure the camera's own travel, which no
subtask of ours asks; they are counted under `unknown_types` with their lines, never lost silently.
Videos are not part of the release (users export them from their own scans): the reference is
kept as data, and a `videos` folder, when given, must hold each one (its bytes' digest then goes
into the provenance for decontamination).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from numerical3d.pipeline.ingest.core import (IngestReport, UnknownType, answer_spec, clean_question, conversation,
                                              ingest_rows, make_item, media_digests, media_path, parse_options,
                                              resolve_media)
from numerical3d.pipeline.items import Item, item_id
from numerical3d.pipeline.templating import Templates, templates

SOURCE = "vlm3r"
FILE_GLOB = "merged_qa_*.json"

# question_type -> (subtask, kind of an open-ended answer)
QUESTION_TYPES: dict[str, tuple[str, str]] = {
    "object_counting": ("object_count", "count"),
    "object_size_estimation": ("object_size", "numeric"),
    "room_size_estimation": ("room_size", "numeric"),
    "object_abs_distance": ("abs_distance", "numeric"),
    "object_rel_distance": ("rel_distance", "choice"),
    "object_rel_distance_v1": ("rel_distance", "choice"),
    "object_rel_distance_v2": ("rel_distance", "choice"),
    "object_rel_distance_v3": ("rel_distance", "choice"),
    "object_rel_direction_v1": ("rel_direction", "direction"),
    "object_rel_direction_v2": ("rel_direction", "direction"),
    "object_rel_direction_v3": ("rel_direction", "direction"),
    "obj_appearance_order": ("appearance_order", "order"),
    "route_planning": ("route_plan", "choice"),
    "camera_obj_abs_dist": ("camera_distance", "numeric"),
    "camera_obj_rel_dist_v1": ("camera_distance", "choice"),
    "camera_obj_rel_dist_v2": ("camera_distance", "choice"),
    "camera_obj_rel_dist_v3": ("camera_distance", "choice"),
    "obj_obj_relative_pos_lr": ("position_relation", "choice"),
    "obj_obj_relative_pos_ud": ("position_relation", "choice"),
    "obj_obj_relative_pos_nf": ("position_relation", "choice"),
}
NOT_MAPPED = ("camera_displacement", "camera_movement_direction", "camera_movement_direction_v1",
              "camera_movement_direction_v2", "camera_movement_direction_v3", "camera_obj_dist_change",
              "camera_obj_rel_dir")
# The unit a numeric type's bare answer is in when the question names none (the authors' templates
# always name it), and the dimension each numeric type's answer must have.
DEFAULT_UNIT = {"object_size_estimation": "cm", "room_size_estimation": "m2", "object_abs_distance": "m",
                "camera_obj_abs_dist": "m"}
DIMENSION = {"object_size_estimation": "length", "room_size_estimation": "area", "object_abs_distance": "length",
             "camera_obj_abs_dist": "length"}


def files(path: Path) -> list[Path]:
    """The QA files: the file itself, or every `merged_qa_*.json` under a folder, sorted."""
    if path.is_file():
        return [path]
    found = sorted(p for p in path.rglob(FILE_GLOB) if p.is_file())
    if not found:
        raise FileNotFoundError(f"{path}: no VLM-3R QA file ({FILE_GLOB}) found")
    return found


def row_to_item(row: dict[str, Any], line: int, tpl: Templates, videos: Path | None = None) -> Item:
    """One row as an item; raises RowError (unparseable) or UnknownType."""
    qtype = row.get("question_type")
    if qtype not in QUESTION_TYPES:
        raise UnknownType(qtype)
    subtask, kind = QUESTION_TYPES[qtype]
    human, gpt = conversation(row)
    video = str(media_path(row.get("video"), "video"))
    digests = media_digests(resolve_media(videos, video, "video"), "video") if videos is not None else {}
    scene = row.get("scene_name")
    scene_id = scene if isinstance(scene, str) and scene.strip() else Path(video).stem
    stem, options = parse_options(clean_question(human))
    spec, kind, options = answer_spec(gpt.strip(), stem, options, kind, default_unit=DEFAULT_UNIT.get(qtype),
                                      dimension=DIMENSION.get(qtype), what=qtype)
    origin = row.get("data_source")
    return make_item(
        id=item_id(SOURCE, scene_id, subtask, {"id": row.get("id"), "line": line, "question": human}), source=SOURCE,
        scene_id=scene_id, subtask=subtask, stem=stem, kind=kind, spec=spec, options=options, tpl=tpl,
        provenance={"media": {"video": video}, **digests, "question_type": qtype, "line": line,
                    "origin": origin if isinstance(origin, str) else None, "corpus_id": row.get("id"),
                    "original_question": human, "original_answer": gpt, "rule": {"name": "vlm3r_ground_truth"}})


def ingest(path: str | Path, tpl: Templates | None = None, videos: str | Path | None = None
           ) -> tuple[list[Item], list[IngestReport]]:
    """All items of VLM-3R's QA files (a file or a folder of them), and one report per file."""
    reports: list[IngestReport] = []
    items = list(iter_ingest(path, reports, tpl, videos))
    return items, reports


def iter_ingest(path: str | Path, reports: list[IngestReport], tpl: Templates | None = None,
                videos: str | Path | None = None) -> Iterator[Item]:
    """Stream the items of every QA file, appending each file's report to `reports`."""
    tpl = tpl or templates()
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: VLM-3R QA file or folder not found")
    folder = Path(videos) if videos is not None else None
    for file in files(path):
        reports.append(report := IngestReport(str(file)))
        yield from ingest_rows(file, report, lambda row, line: row_to_item(row, line, tpl, folder),
                               lambda row: row.get("question_type"))
