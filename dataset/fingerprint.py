"""Benchmark fingerprints: what decontamination compares a training item with, computed the same way
by the benchmark readers (`training`, which write the file) and by the build (`pipeline`, which reads
it), so the definition lives here, beside the folder reader both use.

A fingerprint file is a tab-separated table with the header `benchmark  kind  value`, one line per
thing an evaluation benchmark holds: `scene` (a canonical scan id: ScanNet `sceneXXXX_XX`, ScanNet++
ten hex digits, ARKitScenes eight digits), `image` (`image_digest` of an image's pixels, so the same
picture under another file name or container is one value), `id` (a question id in the benchmark's
own namespace, `<benchmark>/<id>`, for corpora drawn from the same pool, such as MindCube's) or `video`
(`file_digest` of a video file: a copy under another name is the same video).
"""

from __future__ import annotations

import csv
import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

from numerical3d.errors import Numerical3DError

KINDS = ("scene", "image", "video", "id")
HEADER = ("benchmark", "kind", "value")
_SCANNET = re.compile(r"scene\d{4}_\d{2}", re.I)
_SCANNETPP = re.compile(r"(?<![0-9a-f])[0-9a-f]{10}(?![0-9a-f])", re.I)
_ARKIT = re.compile(r"(?<!\d)\d{8}(?!\d)")


class FingerprintError(ValueError, Numerical3DError):
    """A fingerprint file that cannot be read; the message names the file and the line."""


def image_digest(raw: bytes) -> str | None:
    """sha256 of the decoded pixels (3-channel, with the image's size), or None when the bytes are no
    image: a PNG re-saved under another name, or converted to another lossless format, keeps it."""
    import cv2
    import numpy as np

    pixels = cv2.imdecode(np.frombuffer(raw, dtype=np.uint8), cv2.IMREAD_COLOR)
    if pixels is None:
        return None
    h = hashlib.sha256(f"{pixels.shape[0]}x{pixels.shape[1]}:".encode())
    h.update(np.ascontiguousarray(pixels).tobytes())
    return h.hexdigest()


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, read in chunks (a video: a renamed copy is the same video)."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def scene_ids(text: str) -> set[str]:
    """The canonical scan ids a name holds ("scannet/videos/scene0191_00.mp4", "SCENE0191_00-copy",
    "arkit_41069025"): renamed files and prefixed ids still name their scan."""
    text = str(text)
    found = {m.group(0).lower() for m in _SCANNET.finditer(text)}
    found |= {m.group(0).lower() for m in _SCANNETPP.finditer(text)}
    found |= {m.group(0) for m in _ARKIT.finditer(text)}
    return found


def write_fingerprints(path: Path, rows: Iterable[tuple[str, str, str]]) -> int:
    """Write (benchmark, kind, value) rows, sorted and without repeats; returns how many."""
    unique = sorted(set(rows))
    for bench, kind, value in unique:
        if kind not in KINDS or not bench or not value or any("\t" in s or "\n" in s for s in (bench, value)):
            raise FingerprintError(f"{path}: bad fingerprint row {(bench, kind, value)!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
        writer.writerow(HEADER)
        writer.writerows(unique)
    return len(unique)


def read_fingerprints(path: str | Path) -> list[tuple[str, str, str]]:
    """The (benchmark, kind, value) rows of a fingerprint file."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh, delimiter="\t"))
    except (OSError, UnicodeDecodeError) as exc:
        raise FingerprintError(f"{path}: cannot read fingerprint file: {exc}") from None
    if not rows or tuple(c.strip() for c in rows[0]) != HEADER:
        raise FingerprintError(f"{path}: expected the header line 'benchmark<TAB>kind<TAB>value'")
    out = []
    for n, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != 3 or row[1] not in KINDS or not row[0] or not row[2]:
            raise FingerprintError(f"{path}:{n}: expected 'benchmark<TAB>{'|'.join(KINDS)}<TAB>value', got {row!r}")
        out.append((row[0], row[1], row[2]))
    return out
