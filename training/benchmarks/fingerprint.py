"""`numerical3d benchmark fingerprint NAME --data DIR --out FILE`: what a build must keep out of its
training data, read from a benchmark's release by the benchmark's own loader.

Each question gives its scan (`scene`: the canonical ids in VSI-Bench's `scene_name`; `video`: the
digest of its video file, when the release holds it), its images
(`image`: the pixel digest of every image, embedded or on disk, so a copy under another name still
matches) and its id (`id`, as `<benchmark>/<id>`, for corpora drawn from the same pool). The rows go to
a fingerprint file (`numerical3d.dataset.fingerprint`) that a dataset mix lists under
`benchmark_fingerprints`.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from numerical3d.dataset.fingerprint import file_digest, image_digest, scene_ids, write_fingerprints
from numerical3d.training.benchmarks.core import BenchmarkError
from numerical3d.training.benchmarks.registry import get_benchmark


def _image_bytes(data: bytes | None, path: str | None, root: Path, item_id: Any) -> bytes:
    if data is not None:
        return data
    file = root / str(path)
    if not file.is_file():
        raise BenchmarkError(f"{file}: image of question {item_id!r} not found")
    return file.read_bytes()


@lru_cache(maxsize=4096)
def _video_digest(path: Path) -> str:
    return file_digest(path)  # many questions share one video: each file is read once


def item_fingerprints(name: str, item: Any, root: Path) -> Iterator[tuple[str, str, str]]:
    """(benchmark, kind, value) of one loaded question, whatever the benchmark's item type."""
    yield name, "id", f"{name}/{item.id}"
    if getattr(item, "scene_name", None):
        for scene in scene_ids(item.scene_name) | {str(item.scene_name)}:
            yield name, "scene", scene
        video = root / item.video
        if video.is_file():  # VSI-Bench's videos: a byte copy under another name is caught too
            yield name, "video", _video_digest(video)
    refs = [(r.data, r.path) for r in getattr(item, "images", ())]
    if hasattr(item, "image_path"):  # CV-Bench: one image a question
        refs.append((item.image, item.image_path))
    for data, path in refs:
        digest = image_digest(_image_bytes(data, path, root, item.id))
        if digest is None:
            raise BenchmarkError(f"{root}: an image of question {item.id!r} cannot be decoded")
        yield name, "image", digest


def fingerprint(name: str, data: Path, out: Path, **options: Any) -> dict[str, int]:
    """Write the fingerprints of benchmark `name` (released at `data`) to `out`; counts per kind."""
    bench = get_benchmark(name)
    cfg = bench.config.model_construct(data=data, **options)  # only the release's location is read
    items = bench.load(cfg).items
    rows = {row for item in items for row in item_fingerprints(name, item, data)}
    write_fingerprints(out, rows)
    counts: dict[str, int] = {"questions": len(items)}
    for _, kind, _ in rows:
        counts[kind] = counts.get(kind, 0) + 1
    return counts
