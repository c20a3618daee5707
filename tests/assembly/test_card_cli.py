"""The dataset card and plots; the `assemble` command end to end from an items JSONL."""

from __future__ import annotations

import json

import yaml


def test_card_has_the_required_sections(built):
    text = (built.dir / "README.md").read_text()
    header = yaml.safe_load(text.split("---\n")[1])
    assert [c["config_name"] for c in header["configs"]] == ["default", "frames"]
    assert {"split": "train", "path": "data/train-*.parquet"} in header["configs"][0]["data_files"]
    counts = built.manifest["counts"]["subtasks"]
    for name, n in counts.items():
        assert f"| `{name}` |" in text and f"| {n} |" in text
    for needle in ("## Source mix", "## Verifier specs", '"kind": "direction"', "SNRA", "AP-GRPO",
                   "## Licences", "may not be redistributed", "## Decontamination", "288 scenes",
                   "load_dataset(", "prompt_dataset(", "plots/answer_distributions.png", "plots/snra_schedule.png"):
        assert needle in text, needle
    for plot in ("plots/answer_distributions.png", "plots/snra_schedule.png"):
        assert (built.dir / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_card_reports_planted_exclusion(tmp_path, kit):
    from pipeline.sampling import sample
    from pipeline.shards import write_dataset

    cfg = kit.make_config(media={"mode": "reference"})
    sel, rep = sample(kit.make_candidates(kit.SCENES + [("arkitscenes", "41069025")]), cfg, seed=0)
    write_dataset(sel, None, tmp_path, cfg, report=rep)
    text = (tmp_path / "README.md").read_text()
    assert "| arkitscenes | 1 | 84 |" in text
    assert "numerical3d hydrate" in text  # reference mode tells users how to get the pixels
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["sampling"]["excluded"]["scene_ids"] == {"arkitscenes": ["41069025"]}


def test_cli_assemble_from_items_jsonl(tmp_path, kit):
    from typer.testing import CliRunner

    from pipeline.cli import app

    items = kit.make_candidates(kit.SCENES + [("scannet", "scene0025_01")], per_scene=3)
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(i.to_dict()) + "\n" for i in items))
    out = tmp_path / "ds"
    args = ["assemble", str(path), "--out", str(out), "--config", "demo", "--total", "40", "--media", "reference", "--seed", "3"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "scannet: 1 scenes" in res.output  # the exclusion is reported
    manifest = json.loads((out / "manifest.json").read_text())
    assert sum(manifest["counts"]["items"].values()) == 40 and manifest["seed"] == 3
    res = CliRunner().invoke(app, ["assemble", str(path), "--out", str(tmp_path / "e"), "--config", "demo"])
    assert res.exit_code != 0 and "--source-root" in res.output
