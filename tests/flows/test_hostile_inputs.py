"""Inputs a malicious or careless source file can carry, and a newcomer's mistakes, through the CLI.

Each test reproduces one finding of the hostile-inputs audit on the real on-disk formats (the
VSI-Bench meta-info file in `shared/data`, a demo build's folder) and fails on the code before it:
ids used as paths, duplicate keys, absurd boxes, unguarded outputs, stale reads after a rebuild.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from numerical3d.sources.ids import id_to_name

CLI = "from numerical3d.cli import main; main()"
META = Path(__file__).resolve().parents[3] / "shared" / "data" / "vsibench_meta" / "scannetpp_meta_info_val.json"

pytestmark = pytest.mark.skipif(not META.is_file(), reason="shared/data/vsibench_meta is not beside the checkout")


def cli(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def plan_file(tmp_path: Path, meta: Path) -> Path:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "seed": 0, "sources": [{"name": "vsi-meta", "root": str(meta)}], "dataset": "demo",
        "dataset_overrides": {"total": 40, "media": {"mode": "reference"}},
        "runner": {"kind": "threads", "max_workers": 2}, "retry": {"retries": 0, "delay_s": 0.0, "backoff": 1.0},
        "code_version": "test"}))
    return plan


def real_scenes(n: int) -> list[dict]:
    doc = json.loads(META.read_text())
    return [doc[k] for k in sorted(doc)[:n]]


def test_id_to_name_keeps_plain_ids_and_never_leaves_its_folder(tmp_path):
    assert id_to_name("scene0001_00") == "scene0001_00" and id_to_name("7b6477cb95") == "7b6477cb95"
    hostile = ["", ".", "..", "../../x", "/abs/folder", "a/b", "a\\b", "x\x00y", "\n", "%2F", "~", "é", "a" * 300,
               ".hidden", "con", "a..b"]
    names = [id_to_name(h) for h in hostile]
    assert len(set(names)) == len(hostile)  # no two ids share a name
    for name in names:
        assert name and "/" not in name and "\x00" not in name and name not in (".", "..") and len(name) <= 130
        assert (tmp_path / name).resolve().parent == tmp_path.resolve()


@pytest.mark.slow
def test_hostile_scene_ids_write_nothing_outside_the_work_folder_and_delete_nothing(tmp_path):
    victim = tmp_path / "victim"  # a user's folder an absolute scene id names
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep.txt").write_text("mine too")
    good, a, b, c, d = real_scenes(5)
    meta = tmp_path / "meta" / "scenes.json"
    meta.parent.mkdir()
    ids = {"good": good, str(victim): a, "../../../x": b, "..": c, "": d}
    meta.write_text(json.dumps(ids))
    plan = plan_file(tmp_path, meta)
    before = tree(tmp_path)
    work = tmp_path / "ds.work"
    run = cli("build", "--config", str(plan), "--out", str(tmp_path / "ds"), "--engine", "plain",
              "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    reasons = {r["scene_id"]: r["reason"] for r in summary["quarantine"]}
    assert reasons == {"": f"{meta}: scene id '' is empty or holds control characters"}
    assert summary["scenes"] == {"done": 4, "quarantined": 1}
    after = tree(tmp_path)
    for rel, data in before.items():  # nothing the build did not write was changed or removed
        assert after[rel] == data, rel
    written = {rel for rel in after if rel not in before}
    assert not [rel for rel in written if not rel.startswith(("ds/", "ds.work/"))]
    cached = {p.name for p in (work / "scenes" / "vsi-meta").iterdir()}
    assert cached == {id_to_name(i) for i in ids}


@pytest.mark.slow
def test_duplicate_scene_keys_and_absurd_boxes_are_bad_data_not_bugs(tmp_path):
    one, two = real_scenes(2)
    label = next(iter(two["object_bbox"]))
    two["object_bbox"][label][0]["centroid"] = [1e308, 0.0, 0.0]
    meta = tmp_path / "meta"
    meta.mkdir()
    scene = json.dumps(one, indent=1)
    (meta / "dup.json").write_text('{\n"same":\n' + scene + ',\n"same":\n' + scene + "\n}\n")
    (meta / "far.json").write_text(json.dumps({"far": two}))
    run = cli("build", "--config", str(plan_file(tmp_path, meta)), "--out", str(tmp_path / "ds"), "--engine", "plain",
              "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr  # not 1: neither is a bug of the code
    summary = json.loads(run.stdout)
    reasons = {r["scene_id"]: r["reason"] for r in summary["quarantine"]}
    assert reasons == {"dup": f"{meta / 'dup.json'}: key 'same' appears twice in one object (lines 2, {scene.count(chr(10)) + 4}); "
                              "refusing to guess which one is meant"}
    report = json.loads((tmp_path / "ds.work" / "build_report.json").read_text())
    assert summary["scenes"] == {"done": 1, "quarantined": 1}
    assert not any(r.get("bug") for r in summary["quarantine"]) and report


# What these tests check (guards, ids, what is read back) does not depend on the dataset's content:
# their demo builds generate one subtask of twelve (a third of the scene work) and select 60 items
# (a fifth of the demo's, so each site they draw is quick).
SMALL_DEMO = {"dataset_overrides": {"total": 60}, "questions": {"subtasks": ["camera_distance"]}}


def small_demo(folder: Path, **dataset: object) -> Path:
    """`SMALL_DEMO` as a plan file in `folder` (for `--preset demo --config`), `dataset` merged into its
    dataset overrides."""
    plan = folder / "small-demo.yaml"
    plan.write_text(yaml.safe_dump({**SMALL_DEMO, "dataset_overrides": {**SMALL_DEMO["dataset_overrides"], **dataset}}))
    return plan


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """A small demo build (plain engine), read-only for the tests below: copy before changing. Its
    work folder is the scene cache of every small demo build with seed 0 (`with_scene_cache`)."""
    root = tmp_path_factory.mktemp("demo")
    run = cli("build", "--preset", "demo", "--config", str(small_demo(root)), "--engine", "plain",
              "--out", str(root / "ds"), cwd=root)
    assert run.returncode == 0, run.stderr
    return root / "ds"


def with_scene_cache(demo: Path, work: Path) -> None:
    """A copy of the demo build's per-scene results as `work`: a small demo build with that work
    folder only assembles (its scene stage is not what the test checks)."""
    shutil.copytree(demo.parent / f"{demo.name}.work" / "scenes", work / "scenes")


@pytest.mark.slow
def test_browse_never_writes_into_its_dataset_nor_over_a_users_files(demo, tmp_path):
    ds = tmp_path / "ds"
    shutil.copytree(demo, ds)
    before = tree(ds)
    into = cli("browse", str(ds), "--out", str(ds), cwd=tmp_path)
    assert into.returncode == 5 and "would write into the input" in into.stderr, into.stderr
    inside = cli("browse", str(ds), "--out", str(ds / "site"), cwd=tmp_path)
    assert inside.returncode == 5 and tree(ds) == before

    user = tmp_path / "user"
    (user / "frames").mkdir(parents=True)
    (user / "index.html").write_text("<p>my page</p>")
    (user / "frames" / "holiday.jpg").write_bytes(b"\xff\xd8 my photo")
    mine = tree(user)
    refused = cli("browse", str(ds), "--out", str(user), cwd=tmp_path)
    assert refused.returncode == 5 and "did not write" in refused.stderr and tree(user) == mine
    clash = cli("browse", str(ds), "--out", str(user), "--force", cwd=tmp_path)
    assert clash.returncode == 5 and "index.html" in clash.stderr and tree(user) == mine
    (user / "index.html").unlink()
    forced = cli("browse", str(ds), "--out", str(user), "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert (user / "frames" / "holiday.jpg").read_bytes() == mine["frames/holiday.jpg"]
    again = cli("browse", str(ds), "--out", str(user), cwd=tmp_path)  # a rebuild replaces only its own files
    assert again.returncode == 0, again.stderr
    assert (user / "frames" / "holiday.jpg").read_bytes() == mine["frames/holiday.jpg"]


@pytest.mark.slow
def test_a_crafted_frame_id_cannot_make_browse_write_outside_its_folder(demo, tmp_path):
    ds = tmp_path / "deep" / "er" / "ds"
    shutil.copytree(demo, ds)
    manifest = json.loads((ds / "manifest.json").read_text())
    shard = ds / manifest["splits"]["frames"]["train"][0]
    table = pq.read_table(shard)
    ids = table["frame_id"].to_pylist()
    ids[0] = "../../999"
    pq.write_table(table.set_column(table.schema.get_field_index("frame_id"), "frame_id",
                                    __import__("pyarrow").array(ids)), shard)
    outside = sorted(p for p in tmp_path.rglob("*") if not p.is_relative_to(ds))
    run = cli("browse", str(ds), "--out", str(tmp_path / "deep" / "site"), cwd=tmp_path)
    assert run.returncode in (0, 2), run.stderr
    new = sorted(p for p in tmp_path.rglob("*") if not p.is_relative_to(ds) and p not in outside)
    assert all(p.is_relative_to(tmp_path / "deep" / "site") for p in new), new[:5]


@pytest.mark.slow
def test_score_never_replaces_its_predictions_nor_a_foreign_file(demo, tmp_path):
    ids = [row["id"] for row in pq.read_table(next((demo / "data").glob("validation-*.parquet"))).to_pylist()]
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps({"id": i, "prediction": "2"}) + "\n" for i in ids))
    text = preds.read_text()
    same = cli("score", str(preds), "--dataset", str(demo), "--out", str(preds), cwd=tmp_path)
    assert same.returncode == 5 and preds.read_text() == text, same.stderr
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": true}')
    foreign = cli("score", str(preds), "--dataset", str(demo), "--out", str(notes), cwd=tmp_path)
    assert foreign.returncode == 5 and notes.read_text() == '{"mine": true}'
    ok = cli("score", str(preds), "--dataset", str(demo), "--out", str(tmp_path / "r.json"), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    again = cli("score", str(preds), "--dataset", str(demo), "--out", str(tmp_path / "r.json"), cwd=tmp_path)
    assert again.returncode == 0 and json.loads((tmp_path / "r.json").read_text())["report"] == "score"


@pytest.mark.slow
def test_build_refuses_a_site_in_its_own_folder_and_zero_workers_before_any_work(tmp_path):
    out = tmp_path / "ds"
    site = cli("build", "--preset", "demo", "--engine", "plain", "--out", str(out), "--site", str(out), cwd=tmp_path)
    assert site.returncode == 5 and "would write into the input" in site.stderr, site.stderr
    assert not out.exists() and not (tmp_path / "ds.work").exists()
    zero = cli("build", "--preset", "demo", "--engine", "plain", "--out", str(out), "--workers", "0", cwd=tmp_path)
    assert zero.returncode == 2 and "--workers" in zero.stderr and not out.exists()


@pytest.mark.slow
def test_a_locked_folder_is_refused_before_prefect_starts(tmp_path):
    from numerical3d.pipeline.build.lock import build_lock

    out = tmp_path / "ds"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    with build_lock(out):
        run = subprocess.run([sys.executable, "-c", CLI, "build", "--engine", "prefect", "--preset", "demo", "--out", str(out)],
                             cwd=tmp_path,
                             capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 3, run.stderr
    assert "temporary Prefect server" not in run.stderr  # refused before the server was started


@pytest.mark.slow
def test_out_dot_builds_in_the_current_folder_and_keeps_it(demo, tmp_path):
    here = tmp_path / "here"
    here.mkdir()
    with_scene_cache(demo, tmp_path / "here.work")
    plan = small_demo(tmp_path)
    inode = here.stat().st_ino
    for _ in range(2):  # the second build replaces the first one's dataset in the same folder
        run = cli("build", "--preset", "demo", "--config", str(plan), "--engine", "plain", "--out", ".", cwd=here)
        assert run.returncode == 0, run.stderr
        assert here.stat().st_ino == inode  # the shell's folder was never swapped away
        assert (here / "manifest.json").is_file() and (tmp_path / "here.work" / "build_report.json").is_file()
    manifest = json.loads((here / "manifest.json").read_text())
    assert sorted(p.relative_to(here).as_posix() for p in (here / "data").iterdir()) == sorted(
        f for f in manifest["files"] if f.startswith("data/"))


@pytest.mark.slow
def test_a_rebuild_is_what_load_dataset_reads(demo, tmp_path):
    from datasets import load_dataset

    out = tmp_path / "ds"
    with_scene_cache(demo, tmp_path / "ds.work")  # seed 0's scenes: only seed 5's are built
    plan = small_demo(tmp_path)
    ids = []
    for seed in ("0", "5"):  # one shard each: without the content tag in its name, both would be train-00000-of-00001
        run = cli("build", "--preset", "demo", "--config", str(plan), "--engine", "plain", "--seed", seed, "--out", str(out),
                  cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        on_disk = sorted(r["id"] for f in sorted((out / "data").glob("train-*.parquet")) for r in pq.read_table(f, columns=["id"]).to_pylist())
        loaded = sorted(load_dataset(str(out), cache_dir=str(tmp_path / "hf"))["train"]["id"])
        assert loaded == on_disk
        ids.append(loaded)
    assert ids[0] != ids[1]


@pytest.mark.slow
def test_a_crafted_frame_id_cannot_make_hydrate_read_or_write_outside(tmp_path):
    import pyarrow as pa

    plan = small_demo(tmp_path, media={"mode": "reference"})
    ds = tmp_path / "ds"
    run = cli("build", "--preset", "demo", "--config", str(plan), "--engine", "plain", "--out", str(ds), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    manifest = json.loads((ds / "manifest.json").read_text())
    shard = ds / manifest["splits"]["frames"]["train"][0]
    table = pq.read_table(shard)
    ids = table["frame_id"].to_pylist()
    source = ids[0].split("/")[0]
    ids[0] = f"{source}/../../../evil/3"
    pq.write_table(table.set_column(table.schema.get_field_index("frame_id"), "frame_id", pa.array(ids)), shard)
    result = next((tmp_path / "ds.work" / "scenes").rglob("*.json"))
    root = Path(json.loads(result.read_text())["path"]).parent.parent  # <root>/scans/<scene>
    before = {p for p in tmp_path.rglob("*")}
    res = cli("hydrate", str(ds), "--source-root", f"{source}={root}", cwd=tmp_path)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert len([line for line in res.stderr.splitlines() if line.strip()]) == 1
    assert {p for p in tmp_path.rglob("*")} - before <= {p for p in tmp_path.rglob("*") if p.is_relative_to(ds)}


@pytest.mark.slow
def test_labels_with_markup_are_text_in_the_card(tmp_path):
    from markdown_it import MarkdownIt

    payload = "`<img src=x onerror=alert(1)>"
    scenes = {}
    for k, scene in enumerate(real_scenes(3)):
        scene["object_bbox"] = {f"{label}{payload}": boxes for label, boxes in scene["object_bbox"].items()}
        scene["object_counts"] = {f"{label}{payload}": n for label, n in scene["object_counts"].items()}
        scenes[f"s{k}"] = scene
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps(scenes))
    run = cli("build", "--config", str(plan_file(tmp_path, meta)), "--out", str(tmp_path / "ds"), "--engine", "plain",
              cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    card = (tmp_path / "ds" / "README.md").read_text()
    assert "onerror" in card  # the labels reached the card's examples
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(card)
    assert "onerror=" not in html.replace("&lt;img src=x onerror=alert(1)&gt;", "")  # never inside a tag
    assert "&lt;img src=x onerror=alert(1)&gt;" in html

