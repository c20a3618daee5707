"""Scoring with the items' verifiers and MRA; TRL rows in one call; hydrating a reference build."""

from __future__ import annotations

import json

import numpy as np
import pytest

from numerical3d.pipeline.hydrate import HydrateError, hydrate
from numerical3d.pipeline.items import parse_frame_id
from numerical3d.pipeline.sampling import sample
from numerical3d.pipeline.score import score
from numerical3d.pipeline.writer import write_dataset
from numerical3d.training.config import DataConfig
from numerical3d.training.data import prompt_dataset
from numerical3d.verifiers.vsibench import grounding_mra, read_predictions


def items_of(built):
    return [i for i in built.selection]


def test_canonical_answers_score_perfectly(built):
    from numerical3d.verifiers import canonical_completion

    preds = {i.id: canonical_completion(i.verifier) for i in items_of(built)}
    rep = score(built.dir, preds, k=100.0)
    assert rep.missing == 0 and rep.items == len(preds)
    for name, s in rep.subtasks.items():
        assert s.value == 1.0 and s.parse_failure_rate == 0.0, name
        assert s.mean_reward == pytest.approx(1.0) and s.mean_total_reward == pytest.approx(1.0)
    assert rep.subtasks["abs_distance"].metric == "MRA" and rep.subtasks["rel_distance"].metric == "accuracy"


def test_mra_hand_computed_and_missing_and_unknown(built):
    item = next(i for i in items_of(built) if i.subtask == "abs_distance")
    y = item.verifier["answer"]
    preds = {item.id: f"<think>x</think><answer>{y * 1.125} m</answer>", "nope": "<answer>1</answer>"}
    rep = score(built.dir, preds, k=10.0, split=item.provenance["split"])
    s = rep.subtasks["abs_distance"]
    # relative error 0.125 passes the tolerances 0.5 ... 0.15 (8 of 10); the other items are missing
    assert s.value == pytest.approx(0.8 / s.n)
    assert s.missing == s.n - 1 and s.parse_failure_rate == pytest.approx((s.n - 1) / s.n)
    assert rep.unknown_ids == ["nope"]
    e = 0.125**2  # relative_squared error
    assert s.mean_reward == pytest.approx(2 / (1 + np.exp(10.0 * e)) / s.n, rel=1e-6)


def test_grounding_mra():
    assert grounding_mra([1.0, 0.0, 0.0], [1.0, 0.0, 0.0]) == 1.0
    assert grounding_mra([1.22, 0.0, 0.0], [1.0, 0.0, 0.0]) == pytest.approx(0.6)  # 0.22 <= 0.5 ... 0.25
    assert grounding_mra(None, [1.0, 2.0]) == 0.0


def test_prediction_file_errors_name_the_line(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_text('{"id": "a", "prediction": "1"}\n{"id": "a", "prediction": "2"}\n')
    with pytest.raises(ValueError, match="p.jsonl:2: duplicate"):
        read_predictions(p)
    p.write_text('{"id": "a"}\n')
    with pytest.raises(ValueError, match="p.jsonl:1"):
        read_predictions(p)


def test_cli_score_bad_predictions_file_is_one_line(tmp_path):
    from typer.testing import CliRunner

    from numerical3d.pipeline.cli import app

    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"id": "a", "prediction": "1"}\n{"id": "a"}\n')
    res = CliRunner().invoke(app, ["score", str(preds), "--dataset", str(tmp_path)])
    assert res.exit_code == 2 and "preds.jsonl:2: expected an object with 'id' and 'prediction'" in res.output


def test_cli_score_writes_json(built, tmp_path):
    from typer.testing import CliRunner

    from numerical3d.pipeline.cli import app
    from numerical3d.verifiers import canonical_completion

    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"id": i.id, "prediction": canonical_completion(i.verifier)}) + "\n"
                             for i in items_of(built)))
    res = CliRunner().invoke(app, ["score", str(preds), "--dataset", str(built.dir), "--k", "50"])
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "preds.scores.json").read_text())
    assert report["k"] == 50 and report["overall"]["metric_mean_over_subtasks"] == 1.0


def test_trl_rows_in_one_call(built):
    train, report = prompt_dataset(str(built.dir), DataConfig(split="train", max_frames=2,
                                                              system_prompt="Answer in <answer> tags."))
    assert report.bad == [] and report.kept == report.loaded
    row = next(r for r in train if len(r["images"]) == 2)
    item = next(i for i in built.selection.splits["train"] if i.id == row["id"])
    assert row["verifier"] == item.verifier and row["answer"] == item.answer and row["scene_id"] == item.scene_id
    assert row["prompt"][0]["role"] == "system"
    user = row["prompt"][1]
    assert user["role"] == "user" and [c["type"] for c in user["content"]] == ["image", "image", "text"]
    assert user["content"][-1]["text"] == item.prompt
    assert len(row["images"]) == 2 and row["images"][0].size == (32, 24)


def test_hydrate_rebuilds_exactly_the_embedded_frames(tmp_path, kit):
    items = kit.make_candidates(kit.SCENES)
    embed_cfg = kit.make_config()
    ref_cfg = kit.make_config(media={"mode": "reference", "longest_side": 32, "jpeg_quality": 80})
    sel, rep = sample(items, embed_cfg, seed=0)
    embedded = write_dataset(sel, kit.fake_frame, tmp_path / "embed", embed_cfg, report=rep)
    write_dataset(sel, kit.fake_frame, tmp_path / "ref", ref_cfg, report=rep)
    with pytest.raises(ValueError, match="no pixels"):
        list(prompt_dataset(str(tmp_path / "ref"), DataConfig(split="train"))[0])

    def wrong(fid: str) -> np.ndarray:
        return 255 - kit.fake_frame(fid)

    with pytest.raises(HydrateError, match="differ from the published pixels"):
        hydrate(tmp_path / "ref", wrong)
    result = hydrate(tmp_path / "ref", kit.fake_frame)
    assert result.mismatched == [] and result.checked == result.frames > 0
    from numerical3d.dataset import DatasetFolder
    from numerical3d.pipeline.manifest import check_files

    manifest = DatasetFolder(tmp_path / "ref").manifest
    assert check_files(tmp_path / "ref", manifest) == [] and manifest["media"]["hydrated"]
    frames_of = lambda m: {k: v["sha256"] for k, v in m["files"].items() if k.startswith("frames/")}  # noqa: E731
    assert frames_of(manifest) == frames_of(embedded)
    assert any(len(row["images"]) > 0 for row in prompt_dataset(str(tmp_path / "ref"), DataConfig(split="train"))[0])
    with pytest.raises(HydrateError, match="already embedded"):
        hydrate(tmp_path / "ref", kit.fake_frame)


def test_hydrate_names_the_manifest_and_field_of_a_config_it_cannot_read(tmp_path, kit):
    import json

    cfg = kit.make_config(media={"mode": "reference", "longest_side": 32, "jpeg_quality": 80})
    sel, rep = sample(kit.make_candidates(kit.SCENES), cfg, seed=0)
    write_dataset(sel, kit.fake_frame, tmp_path / "ref", cfg, report=rep)
    path = tmp_path / "ref" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["config"]["media"]["longest_side"] = "big"  # edited by hand
    path.write_text(json.dumps(manifest))
    with pytest.raises(HydrateError, match=r"manifest\.json: config: media\.longest_side = 'big'"):
        hydrate(tmp_path / "ref", kit.fake_frame)


def test_parse_frame_id():
    assert parse_frame_id("scannet/scene0000_00/12") == ("scannet", "scene0000_00", 12)
    with pytest.raises(ValueError, match="not '<source>"):
        parse_frame_id("bad")
