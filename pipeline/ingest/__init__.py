"""Question corpora with known answers, ingested as verifiable items (beside the generated ones).

`CORPORA` names each corpus a build plan may list under `corpora:`, with the licence note the dataset
card prints and whether the dataset publishes its pixels (none does: items keep references to the
corpus's own media). `read_corpus` streams a corpus's items and reports, whatever its layout.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numerical3d.pipeline.ingest.core import IngestReport
from numerical3d.pipeline.items import Item


@dataclass(frozen=True)
class Corpus:
    """One ingestible corpus: what a plan calls it and what the card says about it."""

    name: str
    title: str
    layout: str  # what PATH must be
    licence: str
    pixels_published: bool = False  # the dataset refers to the corpus's media; users fetch them from it
    media_option: str | None = None  # the option naming a folder every media reference must exist in


CORPORA: dict[str, Corpus] = {c.name: c for c in (
    Corpus("vsi590k", "VSI-590K", "the vsi_590k.jsonl file",
           "VSI-590K (Cambrian-S) annotations; see the release's licence. Its frames come from the origin "
           "datasets and are not published here."),
    Corpus("mindcube", "MindCube (training set)", "the release folder (raw/MindCube_train.jsonl, other_all_image/) "
           "or the question file",
           "MindCube training set (MLL-Lab); the authors' repository states MIT for its code and no separate data "
           "licence: check the dataset release's terms. Images are referenced, not published."),
    Corpus("vlm3r", "VLM-3R instruction data", "a merged_qa_*.json file or a folder of them",
           "VLM-3R instruction data (VITA-Group); the repository's README says MIT and its LICENSE file Apache-2.0, "
           "the data release states none of its own. Questions are about ScanNet / ScanNet++ / ARKitScenes scans, "
           "whose terms apply; videos are referenced, not published.", media_option="videos"),
    Corpus("sr91k", "SR-91k (SpaceR-151k)", "the SpaceR-151k.jsonl file",
           "SR-91k from SpaceR-151k: CC BY-NC 4.0 (non-commercial use only, attribution required). Videos are "
           "referenced, not published.", media_option="media_root"),
)}


def corpus_files(name: str, path: str | Path) -> list[Path]:
    """The files an ingest of corpus `name` at `path` reads; FileNotFoundError naming what is missing."""
    from numerical3d.pipeline.ingest import mindcube, vlm3r

    path = Path(path)
    if name == "vlm3r":
        return vlm3r.files(path)
    table = mindcube.release_root(path)[1] if name == "mindcube" else path
    if not table.is_file():
        raise FileNotFoundError(f"{table}: not found; {CORPORA[name].title} expects {CORPORA[name].layout}")
    return [table]


def read_corpus(name: str, path: str | Path, reports: list[IngestReport], **options: Any) -> Iterator[Item]:
    """Items of corpus `name` at `path`; each file's report is appended to `reports` as it is read."""
    from numerical3d.pipeline.ingest import mindcube, sr91k, vlm3r, vsi590k

    if name not in CORPORA:
        raise ValueError(f"unknown corpus {name!r}; known: {', '.join(CORPORA)}")
    if name == "vlm3r":
        yield from vlm3r.iter_ingest(path, reports, **options)
        return
    report = IngestReport(str(path))
    reports.append(report)
    module = {"vsi590k": vsi590k, "mindcube": mindcube, "sr91k": sr91k}[name]
    yield from module.iter_ingest(path, report, **options)
