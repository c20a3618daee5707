"""MindCube training set ingest: `MindCube_train.jsonl` and its images, as the authors release them.

Layout (the release unpacked as the authors' download script does): a folder with the question
files in `raw/` (`MindCube_train.jsonl`; `MindCube_tinybench.jsonl` is the benchmark and is never
ingested) and the images under `other_all_image/`. One JSON object a line: `id` (the setting is in
the name: around, rotation, translation, among), `question` (the options inline, "... A. Above
B. Under"), `images` (paths relative to the release folder) and `gt_answer` (a letter). Every row
is multiple choice, so every item gets a `choice` verifier; the setting is kept in the provenance
(and is the item's question type in the report). The questions ask where things are from another
viewpoint ("standing where image 2 was taken, what is to your left"), so their subtask is
`rel_direction`. Questions sharing an image folder are one scene (they share a split). Each image
must exist under the release folder; its pixel digest goes into the provenance for decontamination.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from numerical3d.pipeline.ingest.core import (IngestReport, RowError, answer_spec, ingest_rows, make_item, media_digests,
                                              media_path, parse_inline_options, resolve_media)
from numerical3d.pipeline.items import Item, item_id
from numerical3d.pipeline.templating import Templates, templates

SOURCE = "mindcube"
TRAIN_FILE = Path("raw") / "MindCube_train.jsonl"
IMAGE_FOLDER = "other_all_image"
SETTINGS = ("around", "rotation", "translation", "among")  # looked for in the id, in this order
SUBTASK = "rel_direction"


def setting(row_id: str) -> str:
    """The setting the authors read from an id: the first of SETTINGS it contains ("linear" is
    their other word for translation), else "other"."""
    name = row_id.lower()
    found = next((s for s in SETTINGS if s in name), None)
    return found or ("translation" if "linear" in name else "other")


def image_ref(value: Any) -> str:
    """An image path relative to the release; an absolute path from the authors' machines is cut at
    `other_all_image/`, as their inference code does, and then checked like any other."""
    if isinstance(value, str) and f"{IMAGE_FOLDER}/" in value.replace("\\", "/"):
        tail = value.replace("\\", "/").split(f"{IMAGE_FOLDER}/", 1)[1]
        value = f"{IMAGE_FOLDER}/{tail}"
    return str(media_path(value, "image"))


def release_root(path: Path) -> tuple[Path, Path]:
    """(release folder, question file) from either of them."""
    if path.is_dir():
        return path, path / TRAIN_FILE
    return (path.parent.parent if path.parent.name == "raw" else path.parent), path


def row_to_item(row: dict[str, Any], line: int, root: Path, tpl: Templates) -> Item:
    """One MindCube row as a choice item; raises RowError."""
    row_id, question, answer = row.get("id"), row.get("question"), row.get("gt_answer")
    if not isinstance(row_id, str) or not row_id:
        raise RowError("row has no id")
    if not isinstance(question, str) or not question.strip():
        raise RowError("row has no question")
    if not isinstance(answer, str) or not answer.strip():
        raise RowError("row has no gt_answer")
    images = row.get("images")
    if not isinstance(images, list) or not images:
        raise RowError("row has no images")
    refs = [image_ref(v) for v in images]
    digests = [d for ref in refs for d in media_digests(resolve_media(root, ref, "image"), "image")["image_digests"]]
    stem, options = parse_inline_options(question)
    if len(options) < 2:
        raise RowError("question has no options 'A. ... B. ...'")
    spec, kind, options = answer_spec(answer.strip(), stem, options, "choice", what="MindCube")
    scene_id = "-".join(Path(refs[0]).parent.parts[1:] or Path(refs[0]).parent.parts) or row_id
    group = setting(row_id)
    return make_item(
        id=item_id(SOURCE, scene_id, SUBTASK, {"id": row_id, "question": question}), source=SOURCE,
        scene_id=scene_id, subtask=SUBTASK, stem=stem, kind=kind, spec=spec, options=options, tpl=tpl,
        provenance={"media": {"images": refs}, "image_digests": digests, "benchmark_ids": [f"mindcube/{row_id}"],
                    "question_type": group, "setting": group, "corpus_id": row_id, "line": line,
                    "original_question": question, "original_answer": answer,
                    **{k: row[k] for k in ("category", "type", "meta_info") if k in row},
                    "rule": {"name": "mindcube_ground_truth"}})


def ingest(path: str | Path, tpl: Templates | None = None) -> tuple[list[Item], IngestReport]:
    """All items of MindCube's training set (the release folder or its question file), and the report."""
    items = list(iter_ingest(path, report := IngestReport(str(path)), tpl))
    return items, report


def iter_ingest(path: str | Path, report: IngestReport, tpl: Templates | None = None) -> Iterator[Item]:
    """Stream the items, filling `report` (rows left out by line and reason) as it goes."""
    tpl = tpl or templates()
    root, table = release_root(Path(path))
    if not table.is_file():
        raise FileNotFoundError(f"{table}: MindCube question file not found (the release has {TRAIN_FILE.as_posix()})")
    report.path = str(table)
    yield from ingest_rows(table, report, lambda row, line: row_to_item(row, line, root, tpl),
                           lambda row: setting(row["id"]) if isinstance(row.get("id"), str) else None)
