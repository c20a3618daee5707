"""The static site: its files, its index data, its item pages, and its errors."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from html import unescape

import pytest
from typer.testing import CliRunner

from numerical3d.dataset.outputs import OUTPUT_MARKER
from numerical3d.pipeline.browse.site import BrowseError, build_site, frame_path, item_path, thumb_path
from numerical3d.pipeline.shards import read_items


def test_index_data_list_every_item_once_in_groups(site, dataset, kit):
    items = list(read_items(dataset))
    meta = json.loads(re.sub(r"^N3D\.meta=|;\s*$", "", (site / "index/meta.js").read_text()))
    assert meta["total"] == len(items) and set(meta["subtasks"]) == kit.SUBTASKS
    assert meta["page_size"] == 20 and meta["chunk"] == 7
    rows = []
    for g, (subtask, source, split, n) in enumerate(meta["groups"]):
        got = []
        for c in range((n + 6) // 7):
            text = (site / f"index/{g}-{c}.js").read_text()
            name, chunk = json.loads("[" + text[len("N3D.chunk("):text.rindex(")")] + "]")
            assert name == f"{g}-{c}" and len(chunk) <= 7
            got += chunk
        assert len(got) == n and not (site / f"index/{g}-{(n + 6) // 7}.js").exists()
        rows += [(subtask, source, split, r) for r in got]
    by_id = {it.id: it for it in items}
    assert sorted(r[3][0] for r in rows) == sorted(by_id)
    for subtask, source, split, (iid, href, thumb, question, answer, scene) in rows:
        it = by_id[iid]
        assert (it.subtask, it.source, it.scene_id, it.answer, it.provenance["split"]) == (subtask, source, scene, answer, split)
        assert href == item_path(iid) and (site / href).is_file() and (site / thumb).is_file()
        assert question and "<answer>" not in question  # the question, not the prompt's format instructions


def test_item_pages_show_question_answer_spec_provenance_and_drawings(site, dataset):
    pages = {}
    for it in read_items(dataset):
        pages.setdefault(it.subtask, it)
    for subtask, it in pages.items():
        html = (site / item_path(it.id)).read_text()
        text = unescape(html)
        assert f'<p class="answer">{it.answer}</p>' in text and f'"kind": "{it.verifier["kind"]}"' in text
        assert "Provenance" in html and "Top-down map" in html
        assert html.count("<figure") == len(it.frames)
        assert 'class="r-a f"' in html or subtask == "room_size"  # the referenced object on the map
        for index in it.frame_indices:
            path = frame_path(it.source, it.scene_id, index)
            assert f"../../{path}" in html and (site / path).is_file()
        assert re.search(r'<path d="M[-\d]', html) or subtask == "room_size", subtask  # projected boxes on frames


def test_navigation_follows_the_index_order(site):
    meta = json.loads(re.sub(r"^N3D\.meta=|;\s*$", "", (site / "index/meta.js").read_text()))
    first = json.loads("[" + (site / "index/0-0.js").read_text()[len("N3D.chunk("):-3] + "]")[1]
    a, b = first[0], first[1]
    assert f'href="../../{b[1]}" id="next"' in (site / a[1]).read_text()
    assert f'href="../../{a[1]}" id="prev"' in (site / b[1]).read_text()
    assert meta["groups"][0][0] == min(meta["subtasks"])


def test_index_page_counts_every_subtask_without_scripts(site, kit):
    html = (site / "index.html").read_text()
    for s in kit.SUBTASKS:
        assert f'<a href="#subtask={s}">{s}</a>' in html
    assert '<script src="index/meta.js">' in html and "fetch(" not in (site / "assets/index.js").read_text()


def test_reference_dataset_gets_maps_and_drawings_without_pixels(reference_dataset, tmp_path):
    report = build_site(reference_dataset, tmp_path / "site")
    assert report.items and not list((tmp_path / "site" / "frames").rglob("*.jpg"))
    it = next(i for i in read_items(reference_dataset) if i.subtask == "camera_distance")
    html = (tmp_path / "site" / item_path(it.id)).read_text()
    assert "pixels not published" in html and "<img src=\"../../frames" not in html
    assert 'class="r-camera f"' in html and re.search(r'<path d="M[-\d]', html)


def test_thumbnails_are_the_previews_when_the_dataset_has_them(preview_dataset, tmp_path):
    import pyarrow.parquet as pq

    ds = preview_dataset
    report = build_site(ds, tmp_path / "site")
    table = pq.read_table(sorted((ds / "data").glob("*.parquet"))[0], columns=["id", "preview"])
    iid, preview = table["id"][0].as_py(), table["preview"][0].as_py()
    assert (tmp_path / "site" / thumb_path(iid)).read_bytes() == preview["bytes"]
    assert report.items == sum(1 for _ in read_items(ds))


def test_rebuilding_a_site_leaves_no_stale_page(dataset, tmp_path):
    out = tmp_path / "site"
    build_site(dataset, out)
    stale = out / "items" / "zz" / "stale.html"  # a page an earlier site of this folder wrote
    stale.parent.mkdir(parents=True)
    stale.write_text("old")
    marker = json.loads((out / OUTPUT_MARKER).read_text())
    (out / OUTPUT_MARKER).write_text(json.dumps({**marker, "files": [*marker["files"], "items/zz/stale.html"]}))
    first = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file() and p not in (stale, out / OUTPUT_MARKER)}
    build_site(dataset, out)
    assert not stale.exists()
    again = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file() and p != out / OUTPUT_MARKER}
    assert again == first  # same dataset, same site, byte for byte


def test_folders_that_are_not_browsable_fail_clearly(dataset, tmp_path):
    with pytest.raises(BrowseError, match="no such dataset folder"):
        build_site(tmp_path / "nope", tmp_path / "site")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BrowseError, match="missing manifest.json"):
        build_site(tmp_path / "empty", tmp_path / "site")
    old = tmp_path / "old"
    shutil.copytree(dataset, old, ignore=shutil.ignore_patterns("scenes"))
    with pytest.raises(BrowseError, match="scenes"):  # the card declares scene records that are gone
        build_site(old, tmp_path / "site")


def test_cli_writes_the_site_and_reports_errors(dataset, tmp_path, kit):
    from numerical3d.pipeline.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["browse", str(dataset), "--out", str(tmp_path / "site"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["items"] == sum(1 for _ in read_items(dataset)) and set(report["subtasks"]) == kit.SUBTASKS
    assert (tmp_path / "site" / "index.html").is_file()
    result = runner.invoke(app, ["browse", str(tmp_path / "missing"), "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "no such dataset folder" in " ".join(result.output.split())


@pytest.mark.slow
def test_what_assemble_writes_is_browsable(dataset, tmp_path):
    """`assemble` writes questions without scene records: `browse` takes the folder (through the
    command line) and writes every item's page with its question, answer and spec, no map."""
    items = list(read_items(dataset))
    jsonl = tmp_path / "items.jsonl"
    jsonl.write_text("".join(json.dumps(it.to_dict()) + "\n" for it in items))
    ds, site = tmp_path / "ds", tmp_path / "site"
    run = [sys.executable, "-c", "from numerical3d.cli import main; main()"]
    done = subprocess.run([*run, "assemble", str(jsonl), "--out", str(ds), "--config", "demo", "--total", "30",
                           "--media", "reference"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert not (ds / "scenes").exists()
    done = subprocess.run([*run, "browse", str(ds), "--out", str(site), "--json"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assembled = list(read_items(ds))
    assert report["items"] == len(assembled) == 30 and report["scene_records"] is False
    for it in assembled:
        page = (site / item_path(it.id)).read_text()
        assert html.escape(it.answer, quote=False) in page and "No map: the dataset has no scene records" in page
        assert (site / thumb_path(it.id)).read_bytes()[:2] == b"\xff\xd8"
    assert "no scene records" in (site / "index.html").read_text()
