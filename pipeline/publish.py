"""Publish a finished dataset folder to the Hugging Face Hub, and check what landed.

Only the files the manifest lists, plus the manifest itself, are uploaded; `dry_run` returns
exactly that list without touching the network. The token comes from the environment
(`HF_TOKEN`) or the login cache (`hf auth login`) through huggingface_hub and is never
printed or logged. The upload is huggingface_hub's resumable large-folder upload
(`HfApi.upload_large_folder` where the client has it; from huggingface_hub 1.x on,
`upload_folder` is itself the resumable, batched large-folder upload). After the upload the
repository tree is listed and every file is checked against the manifest: LFS files by
sha256, small files by their git blob id, all by size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numerical3d.errors import Numerical3DError
from numerical3d.pipeline.layout import MANIFEST
from numerical3d.dataset import DatasetFolder
from numerical3d.pipeline.manifest import check_files, git_blob_sha1, sha256_file


class PublishError(RuntimeError, Numerical3DError):
    """Publishing cannot start or what landed differs from the manifest."""


@dataclass
class PublishResult:
    repo_id: str
    revision: str | None
    files: list[str]  # what was (or, in a dry run, would be) uploaded
    bytes: int
    dry_run: bool
    missing: list[str] = field(default_factory=list)  # in the manifest, not on the Hub
    mismatched: list[str] = field(default_factory=list)  # on the Hub with another size or hash
    extra: list[str] = field(default_factory=list)  # on the Hub, not ours (e.g. .gitattributes)
    url: str | None = None

    @property
    def ok(self) -> bool:
        return not self.missing and not self.mismatched


def upload_plan(folder: str | Path) -> tuple[list[str], int, dict[str, Any]]:
    """(files to upload, total bytes, manifest), after checking the local files against the manifest."""
    root = Path(folder)
    manifest = DatasetFolder(root).manifest
    problems = check_files(root, manifest)
    if problems:
        raise PublishError(f"{root}: local files differ from the manifest: " + "; ".join(problems[:10]))
    files = sorted([*manifest["files"], MANIFEST])
    return files, sum((root / f).stat().st_size for f in files), manifest


def resolve_token(token: str | None = None) -> str | None:
    """The token from the argument, the environment or the login cache (never printed)."""
    if token:
        return token
    from huggingface_hub import get_token

    return get_token()


def _remote_files(api: Any, repo_id: str, revision: str | None) -> dict[str, Any]:
    from huggingface_hub.hf_api import RepoFile

    entries = api.list_repo_tree(repo_id, repo_type="dataset", revision=revision, recursive=True)
    return {e.path: e for e in entries if isinstance(e, RepoFile) or hasattr(e, "blob_id")}


def verify_remote(api: Any, repo_id: str, revision: str | None, root: Path, files: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(missing, mismatched, extra) for the repository against the local, manifest-checked files."""
    remote = _remote_files(api, repo_id, revision)
    missing, mismatched = [], []
    for rel in files:
        entry = remote.get(rel)
        if entry is None:
            missing.append(rel)
            continue
        path = root / rel
        if entry.size != path.stat().st_size:
            mismatched.append(rel)
        elif getattr(entry, "lfs", None) is not None:
            if entry.lfs.sha256 != sha256_file(path):
                mismatched.append(rel)
        elif entry.blob_id != git_blob_sha1(path):
            mismatched.append(rel)
    extra = sorted(set(remote) - set(files))
    return missing, mismatched, extra


def publish(
    folder: str | Path,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    dry_run: bool = False,
    token: str | None = None,
    api: Any = None,
    allow_partial: bool = False,
) -> PublishResult:
    """Create the dataset repo (if needed), upload the manifest's files, verify what landed.

    A partial build (scenes that failed after their retries, listed in the manifest) is refused
    unless `allow_partial`. `api` replaces the `huggingface_hub.HfApi` client (tests inject a fake one).
    """
    root = Path(folder)
    files, total, manifest = upload_plan(root)
    failed = [f"{q['source']}/{q['scene_id']}" for q in manifest.get("quarantine", []) if q.get("status") == "failed"]
    if failed and not allow_partial:
        raise PublishError(f"{root}: a partial build, {len(failed)} scene(s) failed after their retries "
                           f"({', '.join(failed[:5])}); rebuild to retry them, or pass --allow-partial")
    result = PublishResult(repo_id=repo_id, revision=revision, files=files, bytes=total, dry_run=dry_run)
    if dry_run:
        return result
    if api is None:
        from huggingface_hub import HfApi

        tok = resolve_token(token)
        if not tok:
            raise PublishError("no Hugging Face token: set HF_TOKEN or run `hf auth login`")
        api = HfApi(token=tok)
    from httpx2 import TransportError  # huggingface_hub's HTTP client
    from huggingface_hub import constants
    from huggingface_hub.errors import OfflineModeIsEnabled

    try:
        return _upload_and_verify(api, result, root, private)
    except OfflineModeIsEnabled as exc:
        raise PublishError(f"cannot publish {root} to {repo_id} offline: HF_HUB_OFFLINE is set; unset it") from exc
    except (OSError, TransportError) as exc:  # no network, DNS failure, endpoint refusing connections
        raise PublishError(f"cannot reach the Hub ({constants.ENDPOINT}) to publish {root} to {repo_id}: "
                           f"{type(exc).__name__}: {exc}") from exc


def _upload_and_verify(api: Any, result: PublishResult, root: Path, private: bool) -> PublishResult:
    """Create the repo (and branch), upload the files, verify what landed: every network call."""
    repo_id, revision, files = result.repo_id, result.revision, result.files
    repo = api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    result.url = str(repo) if repo is not None else None
    if revision is not None:
        api.create_branch(repo_id, branch=revision, repo_type="dataset", exist_ok=True)
    upload = getattr(api, "upload_large_folder", None)
    if upload is not None:
        upload(repo_id=repo_id, folder_path=str(root), repo_type="dataset", revision=revision,
               private=private, allow_patterns=files)
    else:
        api.upload_folder(repo_id=repo_id, folder_path=str(root), repo_type="dataset", revision=revision,
                          allow_patterns=files, commit_message=f"Upload {root.name} (numerical3d publish)")
    result.missing, result.mismatched, result.extra = verify_remote(api, repo_id, revision, root, files)
    return result
