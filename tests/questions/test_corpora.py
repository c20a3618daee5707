"""MindCube, VLM-3R and SR-91k ingests on rows written in each corpus's released layout (tests/support/corpus_rows.py):
every question type converted with the verifier its answer calls for, units kept and scored, bad rows reported by
file and line and never fatal, media references checked before they touch a path."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from corpus_rows import (MINDCUBE_ROWS, SR_ROWS, VLM3R_ROWS, mindcube_row, opts, png, sr_row, vlm3r_row, write_mindcube,
                         write_sr91k, write_vlm3r)

from numerical3d.pipeline.ingest import CORPORA, mindcube, read_corpus, sr91k, vlm3r
from numerical3d.pipeline.questions.registry import registry


def _reward(spec: dict, text: str) -> float:
    from numerical3d.verifiers.verify import verify

    return verify(spec, f"<think>t</think><answer>{text}</answer>", 100).accuracy_reward


# ---- MindCube
def test_mindcube_every_setting_is_a_choice_item_with_its_setting(tmp_path, check_self):
    items, report = mindcube.ingest(write_mindcube(tmp_path / "MindCube"))
    assert report.dropped == 0 and report.rows == len(MINDCUBE_ROWS)
    assert sorted(it.provenance["setting"] for it in items) == ["among", "around", "rotation", "translation"]
    assert set(report.by_type) == {"among", "around", "rotation", "translation"}
    for it, (row_id, setting, question, answer) in zip(items, MINDCUBE_ROWS):
        assert it.verifier["kind"] == "choice" and it.verifier["answer"] == answer
        assert it.subtask == "rel_direction" and it.provenance["corpus_id"] == row_id
        assert it.provenance["benchmark_ids"] == [f"mindcube/{row_id}"]
        assert len(it.provenance["image_digests"]) == 2 and it.question and "A." not in it.question
        check_self(it)
    assert items[1].options == ["chair", "plant", "shelf", "door"]
    assert items[0].scene_id == "around-group001"


def test_mindcube_bad_rows_are_reported_by_line_and_never_fatal(tmp_path):
    root = tmp_path / "MindCube"
    png(root / "other_all_image" / "among" / "g9" / "1.png", 7)
    good = ["other_all_image/among/g9/1.png"]
    extra = [
        mindcube_row("among_g9_q1", "Which is left? A. x B. y", "C", good),          # 5: letter beyond the options
        mindcube_row("among_g9_q2", "Which is left? A. x B. y", "A", ["other_all_image/among/g9/2.png"]),  # 6: missing
        mindcube_row("among_g9_q3", "Which is left? A. x B. y", "A", ["/etc/passwd"]),  # 7: absolute
        mindcube_row("among_g9_q4", "Which is left? A. x B. y", "A", ["../../secret.png"]),  # 8: escapes the release
        mindcube_row("among_g9_q5", "Which is left?", "A", good),                    # 9: no options
        # 10: an absolute path from the authors' machine is cut at other_all_image/, as their code does
        mindcube_row("among_g9_q6", "Which is left? A. x B. y", "B", ["D:\\data\\MindCube\\other_all_image\\among\\g9\\1.png"]),
    ]
    write_mindcube(root, extra)
    table = root / "raw" / "MindCube_train.jsonl"
    table.write_text(table.read_text() + "{not json\n")                              # 11
    items, report = mindcube.ingest(table)
    reasons = dict(report.unparseable)
    assert sorted(reasons) == [5, 6, 7, 8, 9, 11]
    assert "option letters" in reasons[5] and "not found" in reasons[6]
    assert "not a path inside the release" in reasons[7] and "not a path inside the release" in reasons[8]
    assert "no options" in reasons[9] and "invalid JSON" in reasons[11]
    assert report.rejected["among"] == [5, 6, 7, 8, 9] and report.rejected["(unreadable)"] == [11]
    assert [it.provenance["line"] for it in items] == [1, 2, 3, 4, 10]
    assert items[-1].provenance["media"]["images"] == ["other_all_image/among/g9/1.png"]


def test_mindcube_missing_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="MindCube_train.jsonl"):
        mindcube.ingest(tmp_path)


# ---- VLM-3R
def _every_type_rows() -> list[dict]:
    """One row per mapped question type: the fixture row of its family, under each released name."""
    by_family = {r["question_type"].rsplit("_v", 1)[0]: r for r in VLM3R_ROWS}
    rows = []
    for qtype in vlm3r.QUESTION_TYPES:
        base = next(r for r in VLM3R_ROWS if r["question_type"] == qtype) if any(
            r["question_type"] == qtype for r in VLM3R_ROWS) else by_family[qtype.rsplit("_v", 1)[0]]
        rows.append({**base, "question_type": qtype})
    return rows


def test_vlm3r_every_question_type_converted(tmp_path, check_self):
    rows = _every_type_rows()
    items, (report,) = vlm3r.ingest(write_vlm3r(tmp_path, rows))
    assert report.dropped == 0 and set(report.by_type) == set(vlm3r.QUESTION_TYPES)
    for it in items:
        subtask, kind = vlm3r.QUESTION_TYPES[it.provenance["question_type"]]
        assert it.subtask == subtask and it.subtask in registry()
        assert it.verifier["kind"] == ("choice" if it.options else kind)
        assert it.provenance["media"] == {"video": "scannet/videos/scene0011_00.mp4"}
        assert "These are frames" not in it.question and "Answer with" not in it.question
        check_self(it)
    by_type = {it.provenance["question_type"]: it.verifier for it in items}
    assert (by_type["object_size_estimation"]["answer"], by_type["object_size_estimation"]["unit"]) == (203, "cm")
    assert (by_type["room_size_estimation"]["answer"], by_type["room_size_estimation"]["unit"]) == (21.7, "m2")
    assert by_type["camera_obj_abs_dist"]["unit"] == "m" and by_type["object_counting"]["answer"] == 4


def test_vlm3r_bad_rows_are_reported_by_line_of_the_json_array(tmp_path):
    rows = [VLM3R_ROWS[0], {**VLM3R_ROWS[1], "conversations": [{"from": "human", "value": "<image>\nHow long?"},
                                                                {"from": "gpt", "value": "very"}]},
            {**VLM3R_ROWS[0], "question_type": "camera_displacement"}, {**VLM3R_ROWS[0], "video": "../../etc/x.mp4"},
            VLM3R_ROWS[2]]
    path = write_vlm3r(tmp_path, rows)
    starts = [n for n, line in enumerate(path.read_text().splitlines(), start=1) if line == "  {"]
    items, (report,) = vlm3r.ingest(tmp_path)
    assert [it.provenance["line"] for it in items] == [starts[0], starts[4]]
    reasons = dict(report.unparseable)
    assert sorted(reasons) == [starts[1], starts[3]] and "not a number" in reasons[starts[1]]
    assert "not a path inside the release" in reasons[starts[3]]
    assert report.unknown_types == {"camera_displacement": [starts[2]]}
    assert report.path == str(path)


def test_vlm3r_a_broken_array_is_one_error_naming_its_line(tmp_path):
    path = tmp_path / "merged_qa_scannetpp_train.json"
    path.write_text(json.dumps([VLM3R_ROWS[0]], indent=2)[:-2] + ",\n  {\"id\": 1,, }\n]")
    items, (report,) = vlm3r.ingest(path)
    assert len(items) == 1 and len(report.unparseable) == 1
    line, reason = report.unparseable[0]
    assert path.read_text().splitlines()[line - 1].strip().startswith("{\"id\": 1") and "invalid JSON" in reason


def test_vlm3r_videos_folder_checks_each_reference(tmp_path):
    write_vlm3r(tmp_path / "qa", VLM3R_ROWS[:2])
    (tmp_path / "vids" / "scannet" / "videos").mkdir(parents=True)
    (tmp_path / "vids" / "scannet" / "videos" / "scene0011_00.mp4").write_bytes(b"")
    items, _ = vlm3r.ingest(tmp_path / "qa", videos=tmp_path / "vids")
    assert len(items) == 2
    items, (report,) = vlm3r.ingest(tmp_path / "qa", videos=tmp_path)
    assert not items and all("not found" in r for _, r in report.unparseable)


# ---- SR-91k
def test_sr91k_problem_types_and_subtasks(tmp_path, check_self):
    rows = SR_ROWS + [sr_row("Read the sign.", "OCR", "EXIT"), sr_row("Why is the sky blue?", "free-form", "light",
                                                                     source="Video-R1"),
                      sr_row("Describe the mood of the room.", "free-form", "calm")]
    items, report = sr91k.ingest(write_sr91k(tmp_path / "SpaceR-151k.jsonl", rows))
    n = len(SR_ROWS)
    assert len(items) == n and report.unparseable == []
    assert report.unknown_types == {"(problem_type OCR)": [n + 1], "(data_source Video-R1)": [n + 2],
                                    "(unclassified)": [n + 3]}
    assert {it.subtask for it in items} == {"object_count", "object_size", "room_size", "abs_distance", "rel_distance",
                                            "rel_direction", "appearance_order", "route_plan", "camera_distance"}
    assert {it.provenance["problem_type"] for it in items} == {"numerical", "multiple choice", "free-form", "regression"}
    for it in items:
        assert it.scene_id == "scene0011_00" and it.provenance["media"] == {"video": "SR-91k/scene0011_00.mp4"}
        check_self(it)
    kinds = {it.provenance["original_question"][:20]: it.verifier["kind"] for it in items}
    assert sorted(set(kinds.values())) == ["choice", "count", "direction", "numeric", "order"]


def test_sr91k_bad_rows(tmp_path):
    rows = [sr_row("What is the size of this room (in square meters)?", "numerical", "big"),
            sr_row("Which of these objects (a, b) is closest to the bed?", "multiple choice", "A", options=["x", "y"]),
            {**sr_row("How many cups are there?", "numerical", "3"), "path": "/abs/scene0001_00.mp4"},
            sr_row("How many cups are there?", "numerical", "2.5")]
    items, report = sr91k.ingest(write_sr91k(tmp_path / "s.jsonl", rows))
    reasons = dict(report.unparseable)
    assert not items and sorted(reasons) == [1, 2, 3, 4]
    assert "not a number" in reasons[1] and "is not 'A. ...'" in reasons[2]
    assert "not a path inside the release" in reasons[3] and "whole number" in reasons[4]


# ---- units: the true answer in any unit scores high, the same number read in another unit low
@pytest.mark.parametrize("corpus, make, true, misread", [
    ("vlm3r", lambda: vlm3r_row("object_size_estimation", "Longest side of the bed, measured in centimeters?", "203"),
     ["2.03 m", "203 cm", "79.92 inches"], ["203 mm", "203 inches", "203 m"]),
    ("vlm3r", lambda: vlm3r_row("object_abs_distance", "Distance between the sofa and the tv (in meters)?", "2.4"),
     ["240 cm", "7.874 feet"], ["2.4 feet", "2.4 cm"]),
    ("vlm3r", lambda: vlm3r_row("room_size_estimation", "Size of this room (in square meters)?", "21.7"),
     ["233.58 square feet", "21.7 m2"], ["21.7 square feet"]),
    ("sr91k", lambda: sr_row("What is the longest dimension of the desk, measured in inches?", "numerical", "55"),
     ["139.7 cm", "4.583 feet"], ["55 cm", "55 feet"]),
    ("sr91k", lambda: sr_row("What is the size of this room (in square feet)?", "numerical", "200"),
     ["18.58 m2"], ["200 m2"]),
])
def test_numeric_answers_keep_their_units(tmp_path, corpus, make, true, misread):
    row = make()
    if corpus == "vlm3r":
        (item,), _ = vlm3r.ingest(write_vlm3r(tmp_path, [row]))
    else:
        (item,), _ = sr91k.ingest(write_sr91k(tmp_path / "s.jsonl", [row]))
    for text in true:
        assert _reward(item.verifier, text) >= 0.97, (text, item.verifier)
    for text in misread:
        assert _reward(item.verifier, text) <= 0.5, (text, item.verifier)


def test_read_corpus_serves_every_corpus(tmp_path):
    write_mindcube(tmp_path / "mc")
    write_vlm3r(tmp_path / "v")
    write_sr91k(tmp_path / "s.jsonl")
    (tmp_path / "vsi.jsonl").write_text(json.dumps({"video": "scannet/scene0001_00.mp4", "question_type": "absolute_count",
                                                    "conversations": [{"from": "human", "value": "<video>\nHow many?"},
                                                                      {"from": "gpt", "value": "2"}]}) + "\n")
    paths = {"mindcube": tmp_path / "mc", "vlm3r": tmp_path / "v", "sr91k": tmp_path / "s.jsonl",
             "vsi590k": tmp_path / "vsi.jsonl"}
    assert set(paths) == set(CORPORA)
    for name, path in paths.items():
        reports: list = []
        items = list(read_corpus(name, path, reports))
        assert items and {it.source for it in items} == {name} and reports and reports[0].rows
    with pytest.raises(ValueError, match="unknown corpus 'nope'"):
        list(read_corpus("nope", tmp_path, []))
    assert "CC BY-NC" in CORPORA["sr91k"].licence and not any(c.pixels_published for c in CORPORA.values())


def test_options_letters_survive_the_prompt(tmp_path):
    (item,), _ = vlm3r.ingest(write_vlm3r(tmp_path, [vlm3r_row("obj_obj_relative_pos_nf", "Near or far?", "B",
                                                                options=opts("Near", "Far"))]))
    assert item.options == ["Near", "Far"] and "A. Near" in item.prompt


def test_questions_command_ingests_each_corpus(cli, tmp_path):
    write_vlm3r(tmp_path / "v", VLM3R_ROWS + [{**VLM3R_ROWS[0], "question_type": "camera_displacement"}])
    res = cli("questions", "vlm3r", tmp_path / "v", "--out", tmp_path / "v.jsonl")
    assert res.returncode == 0, res.stderr
    assert len((tmp_path / "v.jsonl").read_text().splitlines()) == len(VLM3R_ROWS)
    assert "unknown question_type 'camera_displacement'" in " ".join(res.stdout.split())
    write_sr91k(tmp_path / "s.jsonl", SR_ROWS[:3] + [sr_row("How many cups are there?", "numerical", "many")])
    res = cli("questions", "sr91k", tmp_path / "s.jsonl", "--out", tmp_path / "s.out.jsonl", "-s", "object_count")
    assert res.returncode == 0, res.stderr
    assert [json.loads(x)["subtask"] for x in (tmp_path / "s.out.jsonl").read_text().splitlines()] == ["object_count"]
    assert "line 4: answer 'many' is not a number" in " ".join(res.stdout.split())
    res = cli("questions", "mindcube", tmp_path, "--out", tmp_path / "m.jsonl")
    cli.user_error(res, "MindCube_train.jsonl")


# ---- the core's readers, on generated inputs
_words = st.text(alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyz -"), min_size=1, max_size=12).map(str.strip).filter(bool)


@settings(max_examples=60, deadline=None)
@given(stem=_words, options=st.lists(_words, min_size=2, max_size=5))
def test_inline_options_roundtrip(stem, options):
    from numerical3d.pipeline.ingest.core import parse_inline_options

    text = f"{stem}? " + " ".join(f"{chr(ord('A') + i)}. {o}" for i, o in enumerate(options))
    assert parse_inline_options(text) == (f"{stem}?", options)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 6), indent=st.sampled_from([None, 1, 2, 4]), bad=st.booleans())
def test_json_array_rows_keep_their_line_numbers(tmp_path_factory, n, indent, bad):
    from numerical3d.pipeline.ingest.core import RowError, read_rows

    rows = [{"id": i, "text": "x\ny" * i} for i in range(n)]
    text = json.dumps(rows, indent=indent)
    if bad:  # a broken last element: one error at its line, the rows before it read
        text = text[: text.rindex("}")] + ",,}]"
    path = tmp_path_factory.mktemp("arr") / "merged_qa_x_train.json"
    path.write_text(text)
    got = list(read_rows(path))
    lines = text.splitlines()
    for line, row in got:
        if isinstance(row, RowError):
            assert bad and "invalid JSON" in str(row)
        else:
            assert lines[line - 1].lstrip(" [").startswith("{"), (line, lines)
    assert [r["id"] for _, r in got if not isinstance(r, RowError)] == list(range(n - 1 if bad else n))
