"""A plan mixing every ingested corpus (VSI-590K, MindCube, VLM-3R, SR-91k; tiny fixtures in their released layouts)
with scan sources, through the console script: `sources check`, `sources inspect` and `build`, whose card lists
each corpus with its licence and whether its pixels are published, and whose exclusions are counted per benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from corpus_rows import sr_row, write_mindcube, write_sr91k, write_vlm3r, SR_ROWS

from numerical3d.pipeline.build.plan import PlanError, resolve_plan

VSI590K = Path(__file__).resolve().parents[1] / "questions" / "data" / "vsi_590k_sample.jsonl"


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> Path:
    from numerical3d.sources.synthetic import write_synthetic_scenes

    root = tmp_path_factory.mktemp("corpora")
    write_synthetic_scenes(root / "scenes", 2, 7, n_frames=6, width=160, height=120)
    write_mindcube(root / "MindCube")
    write_vlm3r(root / "vlm3r")
    # one SR-91k question on a VSI-Bench evaluation scan, its video renamed
    write_sr91k(root / "SpaceR-151k" / "SpaceR-151k.jsonl",
                SR_ROWS + [sr_row("How many chairs are in this room?", "numerical", "3", video="SCENE0701_00_part.mp4")])
    (root / "vsi_590k.jsonl").write_text(VSI590K.read_text())
    return root


def _plan(root: Path, path: Path, **extra) -> Path:
    plan = {"seed": 3, "sources": [{"name": "scannet", "root": str(root / "scenes")}],
            "corpora": [{"name": "vsi590k", "path": "vsi_590k.jsonl", "share": 0.2},
                        {"name": "mindcube", "path": "MindCube", "share": 0.1},
                        {"name": "vlm3r", "path": "vlm3r", "share": 0.2},
                        {"name": "sr91k", "path": "SpaceR-151k/SpaceR-151k.jsonl", "share": 0.2}],
            "dataset": "demo", "dataset_overrides": {"total": 400},
            "runner": {"kind": "threads", "max_workers": 1}, "retry": {"retries": 0, "delay_s": 0.0, "backoff": 1.0},
            "code_version": "test", **extra}
    path.write_text(yaml.safe_dump(plan))
    return path


def test_build_mixes_corpora_and_scans_and_the_card_lists_their_licences(cli, corpora, tmp_path):
    plan = _plan(corpora, corpora / "plan.yaml")
    check = cli("sources", "check", plan, "--json")  # the VSI-590K fixture's five bad rows, by file and line
    assert check.returncode == 1
    problems = [json.loads(line) for line in check.stdout.splitlines()]
    assert [p["path"] for p in problems] == [f"{corpora / 'vsi_590k.jsonl'}:{n}" for n in range(15, 20)]
    res = cli("build", "--config", plan, "--engine", "plain", "--out", tmp_path / "out", "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout)
    per_source = summary["items_per_source_subtask"]
    assert {"scannet", "mindcube", "vlm3r", "sr91k", "vsi590k"} <= set(per_source)
    total = summary["selected"]
    for name, share in (("vsi590k", 0.2), ("mindcube", 0.1), ("vlm3r", 0.2), ("sr91k", 0.2)):
        assert sum(per_source[name].values()) <= share * total  # the share is the corpus's cap
    reports = {Path(r["path"]).name: r for r in summary["corpora"]}
    assert reports["vsi_590k.jsonl"]["unparseable"] and reports["vsi_590k.jsonl"]["unparseable"][0]["line"] == 15
    excluded = summary["sampling_report"]["excluded"]
    assert excluded["per_benchmark"]["vsibench"]["scene id (normalised)"] == 1  # the renamed SR-91k video
    assert excluded["per_benchmark"]["vsibench"]["scene id"] >= 1  # VSI-590K rows on evaluation scans
    assert excluded["per_source"]["sr91k"] == {"scenes": 1, "items": 1}

    card = (tmp_path / "out" / "README.md").read_text()
    for title in ("VSI-590K", "MindCube (training set)", "VLM-3R instruction data", "SR-91k (SpaceR-151k)"):
        assert title in card
    assert "CC BY-NC 4.0" in card and "| pixels published |" in card and "no (referenced)" in card
    assert "| vsibench | scene id (normalised) | 1 |" in card
    rows = pq.ParquetFile(next((tmp_path / "out" / "data").glob("train-*.parquet"))).read().to_pydict()
    assert {"mindcube", "vlm3r", "sr91k"} & set(rows["source"])
    site = cli("browse", tmp_path / "out", "--out", tmp_path / "site", "--json")  # corpus items get plain pages
    assert site.returncode == 0, site.stderr[-3000:]
    pages = [p.read_text() for p in (tmp_path / "site").rglob("*.html")]
    assert any("a question of an ingested corpus" in page for page in pages)


def test_sources_check_and_inspect_name_a_bad_row_by_file_and_line(cli, corpora, tmp_path):
    bad = tmp_path / "SpaceR-151k.jsonl"
    write_sr91k(bad, SR_ROWS[:2] + [sr_row("How many cups are there?", "numerical", "many")])
    plan = _plan(corpora, corpora / "plan-bad.yaml",
                 corpora=[{"name": "sr91k", "path": str(bad)}, {"name": "mindcube", "path": "MindCube"}])
    res = cli("sources", "check", plan, "--json")
    assert res.returncode == 1
    problems = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(p["source"], p["path"]) for p in problems] == [("sr91k", f"{bad}:3")]
    assert "not a number" in problems[0]["problem"]
    shown = cli("sources", "inspect", "sr91k", bad)
    assert shown.returncode == 0 and f"{bad}:3: answer 'many' is not a number" in " ".join(shown.stdout.split())
    assert "CC BY-NC 4.0" in shown.stdout
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps(sr_row("x", "OCR", "y")) + "\n")
    cli.user_error(cli("sources", "inspect", "sr91k", empty), "empty.jsonl", "SpaceR-151k.jsonl")


def test_plan_corpus_entries(corpora, tmp_path):
    plan = resolve_plan(None, _plan(corpora, corpora / "plan.yaml"), out=tmp_path / "o")
    assert plan.corpora[1].path == corpora / "MindCube"  # relative to the plan file
    caps = plan.dataset_config().source_caps
    assert (caps["mindcube"], caps["vlm3r"], caps["sr91k"], caps["vsi590k"]) == (0.1, 0.2, 0.2, 0.2)
    assert plan.missing_roots() == []
    gone = resolve_plan(None, _plan(corpora, tmp_path / "p.yaml", corpora=[{"name": "sr91k", "path": "nope.jsonl"}]),
                        out=tmp_path / "o")
    assert gone.missing_roots() == [f"corpora[0] (sr91k): path {tmp_path / 'nope.jsonl'} does not exist"]
    (tmp_path / "empty").mkdir()
    layout = resolve_plan(None, _plan(corpora, tmp_path / "l.yaml", corpora=[{"name": "mindcube", "path": "empty"},
                                                                           {"name": "vlm3r", "path": "empty"}]),
                          out=tmp_path / "o")
    problems = layout.missing_roots()
    assert len(problems) == 2 and "raw/MindCube_train.jsonl: not found" in problems[0]
    assert "no VLM-3R QA file (merged_qa_*.json)" in problems[1]
    for entry, message in (({"name": "mindcub", "path": "MindCube"}, "unknown corpus 'mindcub'"),
                           ({"name": "mindcube", "path": "MindCube", "share": 1.5}, "share"),
                           ({"name": "mindcube", "path": "MindCube", "media": "x"}, "takes no media folder")):
        with pytest.raises(PlanError, match=message):
            resolve_plan(None, _plan(corpora, tmp_path / "q.yaml", corpora=[entry]), out=tmp_path / "o")
    twice = [{"name": "vlm3r", "path": "vlm3r"}, {"name": "vlm3r", "path": "vlm3r"}]
    with pytest.raises(PlanError, match="corpus is listed twice"):
        resolve_plan(None, _plan(corpora, tmp_path / "r.yaml", corpora=twice), out=tmp_path / "o")


def test_previews_skip_corpus_items(cli, corpora, tmp_path):
    plan = _plan(corpora, corpora / "plan-preview.yaml",
                 dataset_overrides={"total": 400, "preview": {"enabled": True}, "media": {"mode": "embed"}},
                 corpora=[{"name": "mindcube", "path": "MindCube"}])
    res = cli("build", "--config", plan, "--engine", "plain", "--out", tmp_path / "out", "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    table = pq.read_table(next((tmp_path / "out" / "data").glob("train-*.parquet"))).to_pydict()
    previews = {src: [p is not None for s, p in zip(table["source"], table["preview"]) if s == src]
                for src in set(table["source"])}
    assert previews["scannet"] and all(previews["scannet"])
    assert "mindcube" in previews and not any(previews["mindcube"])


def test_paper_preset_names_every_input_and_reports_its_placeholder_paths(tmp_path):
    from numerical3d.pipeline.ingest import CORPORA

    plan = resolve_plan("paper", out=tmp_path / "o")
    assert {c.name for c in plan.corpora} == set(CORPORA)
    assert {s.name for s in plan.sources} == {"scannet", "scannetpp", "arkitscenes"}
    config = plan.dataset_config()
    assert config.total == 50_000 and all(config.source_caps[c] == 0.15 for c in CORPORA)
    missing = plan.missing_roots()
    if not Path("/data").exists():  # the placeholders are named, each with its field
        assert len(missing) == 7 and any(m.startswith("corpora[1] (mindcube): path /data/MindCube") for m in missing)
