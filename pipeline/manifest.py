"""The dataset manifest: what was built, from what, by which code, and the hash of every file.

`manifest.json` is written last, after every shard, the card and the plots, so its presence
means the folder is complete; `publish` uploads exactly the files it lists (plus itself) and
checks what landed on the Hub against their sizes and hashes. Nothing time-dependent goes in,
so the same build gives the same manifest.

The code version lives here too, once: `content_hash` (a hash of the code and templates that
decide a scene's items) keys the build's per-scene cache and is the `content` of the
manifest's `code_version`, next to the package version and the git commit when there is one.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from numerical3d.dataset import FORMAT_VERSION
from numerical3d.pipeline.layout import MANIFEST
from numerical3d.pipeline.questions.registry import registry
from numerical3d.sources import registry as source_registry
from numerical3d.sources.io import atomic_write_text

REPO_ROOT = Path(__file__).resolve().parent.parent
CODE_DIRS = ("sources", "pipeline", "verifiers", "templates")  # what decides a scene's items (not the CLI)
# Inside them, what cannot change a scene's items: the commands, and the browsable site (so a
# site-only edit keeps every per-scene cache).
HASH_EXCLUDED = ("pipeline/cli", "pipeline/browse", "templates/site")
CODE_SUFFIXES = (".py", ".j2", ".yaml", ".yml", ".tsv", ".json")


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def git_blob_sha1(path: str | Path) -> str:
    """The git object id of a file (what the Hub reports for files not stored in LFS)."""
    data = Path(path).read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@lru_cache(maxsize=1)
def content_hash() -> str:
    """Hash of the code and templates that decide a scene's items (not the CLI, the site or flows.py),
    subtasks and sources registered from outside this package included."""
    h = hashlib.sha256()
    for d in CODE_DIRS:
        for path in sorted((REPO_ROOT / d).rglob("*")):
            rel = path.relative_to(REPO_ROOT)
            if path.suffix in CODE_SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
                if any(rel.is_relative_to(x) for x in HASH_EXCLUDED):
                    continue
                h.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
    for name, path in _external_files():
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _external_files() -> list[tuple[str, Path]]:
    """(key, file) of the code and templates of subtasks and sources registered from outside this
    package: editing them changes the scenes' items as much as editing ours does. Keys name the subtask
    or source, not where it is installed, so the hash does not depend on the install location."""
    parts = [(f"subtask {sub.name}", sub.generate.__module__, sub.templates) for sub in registry().values()]
    parts += [(f"source {name}", cls.__module__, None) for name, cls in source_registry().items()]
    out: list[tuple[str, Path]] = []
    for key, module_name, templates in parts:
        module = Path(inspect.getfile(sys.modules[module_name])).resolve()
        if module.is_relative_to(REPO_ROOT):
            continue
        roots = [module.parent if module.name == "__init__.py" else module]
        roots += [Path(templates).resolve()] if templates is not None else []
        for root in roots:
            files = [root] if root.is_file() else sorted(root.rglob("*"))
            out += [(f"{key}/{root.name}/{p.relative_to(root) if p != root else ''}", p) for p in files
                    if p.is_file() and p.suffix in CODE_SUFFIXES and "__pycache__" not in p.parts]
    return out


def code_version(content: str | None = None) -> dict[str, Any]:
    """The content hash (the build's, when it pinned one), the package version, and the git
    commit with a dirty flag when running from a checkout."""
    try:
        version = metadata.version("numerical3d")
    except metadata.PackageNotFoundError:
        version = "unknown"
    out: dict[str, Any] = {"package": "numerical3d", "version": version, "content": content or content_hash()}
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no", "--", *CODE_DIRS],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
        out.update(git_commit=commit, git_dirty=bool(dirty))
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def file_entries(root: Path, relpaths: list[str]) -> dict[str, dict[str, Any]]:
    """{relpath: {sha256, bytes}} for the given files, sorted by path."""
    return {
        rel: {"sha256": sha256_file(root / rel), "bytes": (root / rel).stat().st_size} for rel in sorted(relpaths)
    }


def write_manifest(root: Path, body: dict[str, Any], relpaths: list[str]) -> dict[str, Any]:
    """Write `manifest.json` with `body` plus the file hashes; returns the manifest."""
    manifest = {"format_version": FORMAT_VERSION, **body, "files": file_entries(root, relpaths)}
    atomic_write_text(root / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def check_files(root: str | Path, manifest: dict[str, Any]) -> list[str]:
    """Problems with the local files against the manifest (missing, wrong size or hash); [] when clean."""
    root = Path(root)
    problems = []
    for rel, entry in manifest["files"].items():
        path = root / rel
        if not path.is_file():
            problems.append(f"{rel}: missing")
        elif path.stat().st_size != entry["bytes"]:
            problems.append(f"{rel}: {path.stat().st_size} bytes, manifest says {entry['bytes']}")
        elif sha256_file(path) != entry["sha256"]:
            problems.append(f"{rel}: sha256 differs from the manifest")
    return problems
