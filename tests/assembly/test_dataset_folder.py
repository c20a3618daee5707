"""The one reader of a dataset folder: typed info, configs from the card, and what it refuses
(no committed manifest, an unknown format version), the same way in every command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from numerical3d.dataset import FORMAT_VERSION, DatasetError, DatasetFolder
from numerical3d.pipeline.hydrate import hydrate
from numerical3d.pipeline.publish import upload_plan
from numerical3d.pipeline.scene_geometry import read_scenes
from numerical3d.pipeline.shards import ITEM_FEATURES, read_items


def copy_with_version(src: Path, dst: Path, version) -> Path:
    shutil.copytree(src, dst)
    manifest = json.loads((dst / "manifest.json").read_text())
    manifest["format_version"] = version
    (dst / "manifest.json").write_text(json.dumps(manifest))
    return dst


def test_typed_info_configs_splits_files_and_rows(built):
    folder = DatasetFolder(built.dir)
    assert folder.info.format_version == FORMAT_VERSION == built.manifest["format_version"]
    assert (folder.info.name, folder.info.seed) == (built.config.name, built.manifest["seed"])
    assert folder.info.media_mode == built.config.media.mode and not folder.info.hydrated
    assert folder.info.counts == built.manifest["counts"]
    assert set(folder.configs) == {"default", "frames"}  # no scene records were given to this build
    splits = sorted(built.selection.splits)
    assert sorted(folder.splits("default")) == splits
    files = folder.files("default", "test")
    assert files and all(f.parent.name == "data" and f.name.startswith("test-") for f in files)
    assert set(folder.features("default")) == set(ITEM_FEATURES)
    ids = [row["id"] for _, row in folder.rows("default", "test", columns=["id", "no_such_column"])]
    assert ids == [i.id for i in built.selection.splits["test"]]
    assert sum(1 for _ in folder.rows("frames")) == sum(folder.info.counts["frames"].values())


def test_unknown_split_and_config_name_what_there_is(built):
    folder = DatasetFolder(built.dir)
    with pytest.raises(DatasetError, match=r"config 'default' has no split 'dev' \(it has \["):
        folder.files("default", "dev")
    with pytest.raises(DatasetError, match=r"declares no 'scenes' config \(it has \['default', 'frames'\]\)"):
        folder.files("scenes")


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 0, None, "1"])
def test_an_unknown_format_version_is_refused_naming_both_versions(built, tmp_path, version):
    folder = copy_with_version(built.dir, tmp_path / "ds", version)
    expected = rf"manifest.json: dataset format version {version!r}, but this code reads format version {FORMAT_VERSION}"
    for read in (DatasetFolder, lambda p: list(read_items(p)), read_scenes, upload_plan,
                 lambda p: hydrate(p, lambda fid: None)):
        with pytest.raises(DatasetError, match=expected.replace("(", r"\(").replace(")", r"\)")):
            read(folder)


def test_a_folder_without_a_committed_manifest_is_refused(built, tmp_path):
    folder = tmp_path / "ds"
    shutil.copytree(built.dir, folder)
    (folder / "manifest.json").unlink()  # what an interrupted build leaves: shards and card, no manifest
    with pytest.raises(DatasetError, match=f"{folder}: missing manifest.json"):
        DatasetFolder(folder)
    (folder / "manifest.json").write_text("{not json")
    with pytest.raises(DatasetError, match="manifest.json: not a readable JSON manifest"):
        DatasetFolder(folder)
    with pytest.raises(DatasetError, match="no such dataset folder"):
        DatasetFolder(tmp_path / "nowhere")


def test_every_command_refuses_an_unknown_version_in_one_line(built, cli, tmp_path):
    folder = copy_with_version(built.dir, tmp_path / "ds", 99)
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"id": "x", "prediction": "1"}) + "\n")
    both = ("format version 99", f"format version {FORMAT_VERSION}")
    runs = {"score": (cli("score", preds, "--dataset", folder), str(folder / "manifest.json")),
            "publish": (cli("publish", folder, "--repo-id", "org/name", "--dry-run"), "publish failed"),
            "browse": (cli("browse", folder, "--out", tmp_path / "site"), "format version")}
    for command, (res, name) in runs.items():
        text = cli.user_error(res, name, *both)
        assert res.returncode == {"score": 2, "publish": 1, "browse": 2}[command], (command, res.returncode)
        assert text.count("format version 99") == 1, (command, text)  # said once, on one line
        assert len([line for line in res.stderr.splitlines() if "format version" in line]) == 1, command
    assert not (tmp_path / "site").exists()  # browse wrote nothing
