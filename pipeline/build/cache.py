"""The per-scene cache: fingerprints of a scene's inputs, its key, and its result file.

A scene's result file is `<work>/scenes/<source>/<scene_id>/<key>.json`, with the frames its
items use in `<key>.frames/`, each already the JPEG the frames shard stores. The key is a hash of the scene's input files, the source's
options, the user's files its output depends on (label map, question templates), the per-scene
settings and the code version, so the result file is the completion marker: a rerun with the same key loads nothing. A new key drops the older results of that scene.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any, Literal

from numerical3d.pipeline.build.jobs import SceneJob
from numerical3d.pipeline.build.plan import SceneSettings, digest
from numerical3d.sources.ids import id_to_name
from numerical3d.sources.io import atomic_write_text

RESULT_SCHEMA = 5  # 2: drops as typed rows (pipeline.build.stats); 3: frames as the shard's JPEGs with size and hash;
# 4: each adapter drop with its file; 5: items carry frame indices and the bare question beside the prompt


def fingerprint(path: str | Path, mode: Literal["stat", "content"] = "stat") -> str:
    """Digest of every input file of a scene: relative path + size + mtime, or + sha256 of bytes.

    Only regular files are read (a named pipe is never opened). Inside a scene folder, links to
    folders are not followed (a link to the folder itself would loop) and an entry that cannot be
    read (a dangling or looping link, no permission) counts by its name only: it is the adapter's
    to drop the one frame it belongs to, not a reason to lose the scene. A scene path that cannot
    itself be read raises its OSError, naming it, and the scene is quarantined for it.
    """
    p = Path(path)
    h = hashlib.sha256()
    files = _regular_files(p) if p.is_dir() else [(p, st) for st in [p.stat()] if stat.S_ISREG(st.st_mode)]
    for f, st in files:
        rel = f.relative_to(p).as_posix() if p.is_dir() else f.name
        if st is None:
            h.update(f"{rel}\0unreadable\0".encode())
            continue
        h.update(f"{rel}\0{st.st_size}\0".encode())
        if mode == "stat":
            h.update(f"{st.st_mtime_ns}\0".encode())
        else:
            with open(f, "rb") as fh:
                h.update(hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()


def _regular_files(folder: Path) -> list[tuple[Path, os.stat_result | None]]:
    """The regular files under `folder` (file links followed, folder links not), sorted, with their
    stat; None for an entry that cannot be stat'ed."""
    out: list[tuple[Path, os.stat_result | None]] = []
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            f = Path(dirpath) / name
            try:
                st = f.stat()
            except FileNotFoundError:
                continue  # removed meanwhile, or a dangling link: nothing to read
            except OSError:
                out.append((f, None))
                continue
            if stat.S_ISREG(st.st_mode):
                out.append((f, st))
    return sorted(out, key=lambda pair: pair[0])


def scene_key(job: SceneJob, settings: SceneSettings) -> str:
    """The cache key of a job under the plan's scene settings (the settings value is the payload)."""
    labels = job.options.get("labels")
    templates = settings.questions.get("templates_dir")
    return digest(
        {
            "schema": RESULT_SCHEMA,
            "source": job.ref.source,
            "scene_id": job.ref.scene_id,
            "inputs": fingerprint(job.ref.path, settings.fingerprint),
            "options": job.options,
            "labels": fingerprint(labels, settings.fingerprint) if labels else None,
            # The user's templates word every question: an edit must miss, whatever the size and mtime.
            "templates": fingerprint(templates, "content") if templates else None,
            "settings": settings.model_dump(mode="json"),
        }
    )[:24]


def scene_dir(work: Path, job: SceneJob) -> Path:
    """`<work>/scenes/<source>/<scene>`, each id mapped to a name that stays inside its folder."""
    return work / "scenes" / id_to_name(job.ref.source) / id_to_name(job.ref.scene_id)


# What a scene's folder holds that the build wrote: `<key>.json`, `<key>.frames/` (keys are hex digests).
OWN_ENTRY = re.compile(r"[0-9a-f]{24}(\.json|\.frames)")


def frames_dir(result: str | Path) -> Path:
    """Where a result file's exported frames are."""
    return Path(result).with_suffix(".frames")


def read_result(path: str | Path) -> dict[str, Any]:
    """A per-scene result file (header + items)."""
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def write_result(folder: Path, key: str, payload: dict[str, Any]) -> Path:
    """Write `<key>.json` atomically, then drop stale results of older keys for this scene."""
    path = folder / f"{key}.json"
    atomic_write_text(path, json.dumps(payload, sort_keys=True, separators=(",", ":")) + "\n")
    drop_stale(folder, key)
    return path


def drop_stale(folder: Path, key: str) -> None:
    """Remove this scene's entries of other keys: only names the build gives its own (`OWN_ENTRY`),
    so nothing else in the folder is touched.

    Result files go first: a result is what makes its frames count, so a sweep killed midway
    leaves at most a frames folder without its result, which the next sweep of the scene (on
    its next build, cached or not) removes; never a result whose frames are half gone."""
    if not folder.is_dir():
        return
    stale = sorted((old for old in folder.iterdir() if not old.name.startswith(key) and OWN_ENTRY.fullmatch(old.name)),
                   key=lambda old: old.suffix != ".json")
    for old in stale:
        if old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)


def discard_partial(folder: Path, key: str) -> None:
    """Remove what a scene killed midway left under `key` (a half-exported frames folder, the temp
    file of its result), before the scene is built again: nothing half-written stays in the cache.

    A written result is whole, so its frames stay: a build killed after writing it (while it swept
    stale keys) leaves a complete cache entry. A work folder serves one build at a time (the
    output folder's build lock covers it)."""
    result = folder / f"{key}.json"
    if not result.is_file():
        shutil.rmtree(frames_dir(result), ignore_errors=True)
    if folder.is_dir():
        for tmp in folder.glob(f".{key}.json.*.tmp"):
            tmp.unlink(missing_ok=True)
