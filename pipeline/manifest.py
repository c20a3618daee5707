"""The dataset manifest: what was built, from what, by which code, and the hash of every file.

`manifest.json` is written last, after every shard, the card and the plots, so its presence
means the folder is complete; `publish` uploads exactly the files it lists (plus itself) and
checks what landed on the Hub against their sizes and hashes. Nothing time-dependent goes in,
so the same build gives the same manifest.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

MANIFEST_NAME = "manifest.json"
FORMAT_VERSION = 1


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


def code_version() -> dict[str, Any]:
    """Package version, and the git commit (with a dirty flag) when running from a checkout."""
    try:
        version = metadata.version("numerical3d")
    except metadata.PackageNotFoundError:
        version = "unknown"
    out: dict[str, Any] = {"package": "numerical3d", "version": version}
    repo = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no", "--", "pipeline", "sources", "verifiers", "templates"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
        out.update(git_commit=commit, git_dirty=bool(dirty))
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_text(text)
    os.replace(tmp, path)


def file_entries(root: Path, relpaths: list[str]) -> dict[str, dict[str, Any]]:
    """{relpath: {sha256, bytes}} for the given files, sorted by path."""
    return {
        rel: {"sha256": sha256_file(root / rel), "bytes": (root / rel).stat().st_size} for rel in sorted(relpaths)
    }


def write_manifest(root: Path, body: dict[str, Any], relpaths: list[str]) -> dict[str, Any]:
    """Write `manifest.json` with `body` plus the file hashes; returns the manifest."""
    manifest = {"format_version": FORMAT_VERSION, **body, "files": file_entries(root, relpaths)}
    atomic_write_text(root / MANIFEST_NAME, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def read_manifest(root: str | Path) -> dict[str, Any]:
    path = Path(root) / MANIFEST_NAME
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no manifest; the folder is not a finished dataset build") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(manifest.get("files"), dict):
        raise ValueError(f"{path}: manifest has no 'files' table")
    return manifest


def check_files(root: str | Path, manifest: dict[str, Any] | None = None) -> list[str]:
    """Problems with the local files against the manifest (missing, wrong size or hash); [] when clean."""
    root = Path(root)
    manifest = manifest or read_manifest(root)
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
