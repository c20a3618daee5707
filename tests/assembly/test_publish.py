"""Publishing with only the Hub client replaced (a fake HfApi), and the dry run."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from huggingface_hub.hf_api import RepoFile

from numerical3d.pipeline.manifest import git_blob_sha1
from numerical3d.pipeline.publish import PublishError, publish, upload_plan


class FakeHfApi:
    """Records calls and keeps uploaded files in memory, answering list_repo_tree like the Hub."""

    def __init__(self, corrupt: str | None = None):
        self.calls: list[tuple[str, dict]] = []
        self.files: dict[str, bytes] = {".gitattributes": b"*.parquet filter=lfs\n"}
        self.corrupt = corrupt

    def create_repo(self, repo_id, **kw):
        self.calls.append(("create_repo", {"repo_id": repo_id, **kw}))
        return f"https://huggingface.co/datasets/{repo_id}"

    def create_branch(self, repo_id, **kw):
        self.calls.append(("create_branch", {"repo_id": repo_id, **kw}))

    def upload_large_folder(self, *, repo_id, folder_path, allow_patterns, **kw):
        self.calls.append(("upload_large_folder", {"repo_id": repo_id, "allow_patterns": list(allow_patterns), **kw}))
        for rel in allow_patterns:
            data = (Path(folder_path) / rel).read_bytes()
            self.files[rel] = data + b"x" if rel == self.corrupt else data

    def list_repo_tree(self, repo_id, *, repo_type, revision, recursive):
        assert repo_type == "dataset" and recursive
        out = []
        for path, data in sorted(self.files.items()):
            oid = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            lfs = None
            if path.endswith((".parquet", ".png")):
                lfs = {"size": len(data), "oid": hashlib.sha256(data).hexdigest(), "pointerSize": 130}
            out.append(RepoFile(path=path, size=len(data), oid=oid, lfs=lfs))
        return out


def expected_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_dry_run_lists_exactly_the_files(built):
    result = publish(built.dir, "org/name", dry_run=True, api=object())  # the api is never touched
    assert result.files == expected_files(built.dir)
    assert result.bytes == sum((built.dir / f).stat().st_size for f in result.files)


def test_publish_uploads_manifest_files_and_verifies(built):
    api = FakeHfApi()
    result = publish(built.dir, "org/name", private=True, revision="v1", api=api)
    assert result.ok and result.extra == [".gitattributes"]
    names = [c[0] for c in api.calls]
    assert names == ["create_repo", "create_branch", "upload_large_folder"]
    assert api.calls[0][1] == {"repo_id": "org/name", "repo_type": "dataset", "private": True, "exist_ok": True}
    upload = api.calls[2][1]
    assert upload["allow_patterns"] == expected_files(built.dir) and upload["revision"] == "v1"
    assert set(api.files) - {".gitattributes"} == set(result.files)


def test_publish_detects_what_landed_wrong(built):
    api = FakeHfApi(corrupt="README.md")
    result = publish(built.dir, "org/name", api=api)
    assert result.mismatched == ["README.md"] and not result.ok


def test_local_corruption_stops_before_upload(built, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(built.dir, copy)
    shard = sorted((copy / "data").glob("*.parquet"))[0]
    shard.write_bytes(shard.read_bytes()[:-3])
    api = FakeHfApi()
    with pytest.raises(PublishError, match=shard.name):
        publish(copy, "org/name", api=api)
    assert api.calls == []


def test_no_token_is_a_clear_error(built, monkeypatch, tmp_path):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(PublishError, match="HF_TOKEN"):
        publish(built.dir, "org/name")


def test_git_blob_id_matches_git(tmp_path):
    p = tmp_path / "f.txt"
    p.write_bytes(b"hello\n")
    assert git_blob_sha1(p) == "ce013625030ba8dba906f756967f9e9ca394464a"  # `git hash-object`


def test_cli_dry_run_prints_the_files_and_never_the_token(built, monkeypatch):
    from typer.testing import CliRunner

    from numerical3d.pipeline.cli import app

    secret = "hf_SECRETTOKENabcdef123456"
    monkeypatch.setenv("HF_TOKEN", secret)
    res = CliRunner().invoke(app, ["publish", str(built.dir), "--repo-id", "org/name", "--dry-run"])
    assert res.exit_code == 0, res.output
    listed = [line for line in res.output.splitlines() if line and not line.startswith("dry run")]
    assert listed == upload_plan(built.dir)[0]
    assert secret not in res.output
