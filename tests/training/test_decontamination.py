"""Decontamination against every evaluation benchmark the project runs: each benchmark's release (written in its
layout by its own tests' writers) is fingerprinted by its own loader (`benchmark fingerprint`), and a build's
sampling then excludes the corpus items that share a scan, an image or a question with it -- under the same id,
under a renamed id, and as a re-encoded copy of an image under another file name -- counting them per benchmark
and reason; an unrelated item stays."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from corpus_rows import mindcube_row, vlm3r_row, write_mindcube, write_vlm3r

from numerical3d.dataset.fingerprint import read_fingerprints, scene_ids
from numerical3d.pipeline.config import Balance, DatasetMix
from numerical3d.pipeline.ingest import mindcube, vlm3r
from numerical3d.pipeline.sampling import sample
from numerical3d.training.benchmarks.fingerprint import fingerprint
from numerical3d.training.benchmarks.registry import get_benchmark

from .test_blink import write_blink
from .test_cvbench import write_cvbench
from .test_mindcube import write_mindcube as write_tinybench
from .test_mmsi import write_mmsi
from .test_vsibench import CASES, write_benchmark

# Scans absent from the bundled VSI-Bench list, so that only the benchmark's own fingerprints can exclude them.
SCANS = {"scannet/scene0706_00": 3, "scannetpp/1a2b3c4d5e": 3, "arkitscenes/40777060": 3}


def _config(files: list[Path]) -> DatasetMix:
    return DatasetMix(name="t", total=1000, quotas={s: 1.0 for s in (
        "object_count", "object_size", "room_size", "abs_distance", "rel_distance", "rel_direction",
        "appearance_order", "route_plan", "camera_distance", "position_relation")},
        balance=Balance(max_count_guess=None), benchmark_fingerprints=[str(f) for f in files])


def _first_image(name: str, data: Path, **options: str) -> bytes:
    """The raw bytes of the release's first image, read by the benchmark's own loader."""
    bench = get_benchmark(name)
    item = bench.load(bench.config.model_construct(data=data, **options)).items[0]
    if hasattr(item, "image_path"):
        return item.image if item.image is not None else (data / item.image_path).read_bytes()
    ref = item.images[0]
    return ref.data if ref.data is not None else (data / ref.path).read_bytes()


def _reencoded(raw: bytes) -> bytes:
    """The same pixels in another PNG encoding: other bytes, same picture."""
    pixels = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
    out = cv2.imencode(".png", pixels, [cv2.IMWRITE_PNG_COMPRESSION, 0])[1].tobytes()
    assert out != raw
    return out


@pytest.mark.parametrize("name", ["vsibench", "vsibench-debiased"])
def test_video_benchmarks_exclude_their_scans_under_any_name(tmp_path, name):
    table = "test_debiased.parquet" if name == "vsibench-debiased" else "test-00000-of-00001.parquet"
    release = write_benchmark(tmp_path / "release", cases=CASES[:6], videos=SCANS, table_name=table)
    counts = fingerprint(name, release, tmp_path / "fp.tsv")
    assert counts["questions"] == 6 and counts["scene"] == 3 and counts["video"] >= 1  # the three tiny videos may be equal
    videos = tmp_path / "videos"  # the user's exported videos; one is a byte copy of a benchmark video, renamed
    for scene in ("scene0706_00", "scene0650_00"):
        (videos / "scannet" / "videos").mkdir(parents=True, exist_ok=True)
        (videos / "scannet" / "videos" / f"{scene}.mp4").write_bytes(scene.encode())
    (videos / "scannet" / "videos" / "clip_a.mp4").write_bytes((release / "scannet" / "scene0706_00.mp4").read_bytes())
    rows = [
        vlm3r_row("object_counting", "How many chairs are there?", "3", scene="scene0706_00"),  # same id
        vlm3r_row("object_counting", "How many lamps are there?", "2", scene="clip-SCENE0706_00-b",
                  dataset="scannet_renamed"),  # renamed: the scan id inside another name
        vlm3r_row("object_counting", "How many beds are there?", "1", scene="arkit_40777060_copy"),
        vlm3r_row("object_counting", "How many sinks are there?", "2", scene="1a2b3c4d5e", dataset="scannetpp"),
        vlm3r_row("object_counting", "How many cups are there?", "4", scene="scene0650_00"),  # unrelated
        vlm3r_row("object_counting", "How many mugs are there?", "5", scene="clip_a"),  # the copied video
    ]
    items, _ = vlm3r.ingest(write_vlm3r(tmp_path / "qa", rows[:5]))
    (item,), _ = vlm3r.ingest(write_vlm3r(tmp_path / "qa2", rows[5:]), videos=videos)
    items.append(item)
    selection, report = sample(items, _config([tmp_path / "fp.tsv"]), seed=0)
    assert [it.scene_id for it in selection] == ["scene0650_00"]
    assert report.excluded["per_benchmark"] == {name: {"scene id": 2, "scene id (normalised)": 2, "video content": 1}}
    assert report.excluded["per_source"] == {"vlm3r": {"scenes": 5, "items": 5}}
    assert f"{name}: scene id 2, scene id (normalised) 2, video content 1" in report.render()


@pytest.mark.parametrize("name, write", [("mindcube", write_tinybench), ("mmsi", write_mmsi),
                                         ("cvbench", write_cvbench), ("blink", write_blink)])
def test_image_benchmarks_exclude_a_renamed_reencoded_copy_of_their_images(tmp_path, name, write):
    release = write(tmp_path / "release")
    options = {"subtasks": ",".join(sorted(p.name for p in release.iterdir() if p.is_dir()))} if name == "blink" else {}
    counts = fingerprint(name, release, tmp_path / "fp.tsv", **options)
    assert counts["image"] >= 1 and counts["id"] == counts["questions"]
    root = write_mindcube(tmp_path / "train")  # four clean questions with their own images
    copy = "other_all_image/among/g77/renamed_view.png"
    (root / copy).parent.mkdir(parents=True, exist_ok=True)
    (root / copy).write_bytes(_reencoded(_first_image(name, release, **options)))
    table = root / "raw" / "MindCube_train.jsonl"
    table.write_text(table.read_text() + json.dumps(mindcube_row("among_g77_q1", "Left? A. yes B. no", "A", [copy]))
                     + "\n")
    items, report = mindcube.ingest(root)
    assert len(items) == 5 and report.dropped == 0
    selection, sreport = sample(items, _config([tmp_path / "fp.tsv"]), seed=0)
    assert sorted(it.provenance["corpus_id"] for it in selection) == sorted(
        it.provenance["corpus_id"] for it in items if it.provenance["corpus_id"] != "among_g77_q1")
    assert sreport.excluded["per_benchmark"] == {name: {"image content": 1}}


def test_mindcube_tinybench_question_ids_are_excluded(tmp_path):
    release = write_tinybench(tmp_path / "release")
    fingerprint("mindcube", release, tmp_path / "fp.tsv")
    root = write_mindcube(tmp_path / "train")
    table = root / "raw" / "MindCube_train.jsonl"
    image = "other_all_image/around/group001/1.png"  # a training image: only the id is shared
    table.write_text(table.read_text() + json.dumps(mindcube_row("among_group001_q1", "Up? A. yes B. no", "B",
                                                                 [image])) + "\n")
    items, _ = mindcube.ingest(root)
    selection, report = sample(items, _config([tmp_path / "fp.tsv"]), seed=0)
    assert "among_group001_q1" not in {it.provenance["corpus_id"] for it in selection} and len(selection) == 4
    assert report.excluded["per_benchmark"] == {"mindcube": {"benchmark id": 1}}


def test_bundled_vsibench_scenes_are_excluded_under_a_renamed_id_without_any_fingerprint(tmp_path):
    rows = [vlm3r_row("object_counting", "How many chairs?", "3", scene="scannet_SCENE0701_00_v2"),
            vlm3r_row("object_counting", "How many chairs?", "3", scene="scene0701_00"),
            vlm3r_row("object_counting", "How many cups?", "4", scene="scene0650_00")]
    items, _ = vlm3r.ingest(write_vlm3r(tmp_path, rows))
    selection, report = sample(items, _config([]), seed=0)
    assert [it.scene_id for it in selection] == ["scene0650_00"]
    assert report.excluded["per_benchmark"] == {"vsibench": {"scene id": 1, "scene id (normalised)": 1}}


def test_scene_ids_reads_canonical_scan_ids_out_of_names():
    assert scene_ids("scannet/videos/SCENE0191_00-copy.mp4") == {"scene0191_00"}
    assert scene_ids("arkit_41069025.mp4") == {"41069025"}
    assert scene_ids("scannetpp/0d2ee665be/iphone") == {"0d2ee665be"}
    assert scene_ids("group693_q1") == set() and scene_ids("3fa2b1c4d5e6f7a8b9c0") == set()


def test_fingerprint_command_and_bad_files(cli, tmp_path):
    release = write_mmsi(tmp_path / "mmsi")
    res = cli("benchmark", "fingerprint", "mmsi", "--data", release, "--out", tmp_path / "fp.tsv")
    assert res.returncode == 0, res.stderr
    assert "wrote" in res.stdout and {k for _, k, _ in read_fingerprints(tmp_path / "fp.tsv")} == {"id", "image"}
    bad = cli("benchmark", "fingerprint", "mmsi", "--data", tmp_path / "nowhere", "--out", tmp_path / "x.tsv")
    cli.user_error(bad, "nowhere")
    broken = tmp_path / "broken.tsv"
    broken.write_text("benchmark\tkind\tvalue\nmmsi\tcolour\tred\n")
    with pytest.raises(ValueError, match=r"broken.tsv:2"):
        _config([broken])
