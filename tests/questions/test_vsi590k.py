"""VSI-590K ingest on a fixture in the real row format; parsing helpers with hand and property cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.vsi590k import QUESTION_TYPES, RowError, ingest, parse_number, parse_options

FIXTURE = Path(__file__).parent / "data" / "vsi_590k_sample.jsonl"
DESIGN_TYPES = {"absolute_count", "relative_count", "absolute_size_object", "relative_size_object",
                "absolute_size_room", "absolute_distance_object", "relative_distance_object",
                "relative_distance_camera", "absolute_direction_object", "relative_direction_object",
                "relative_direction_camera", "appearance_order"}


def test_every_design_question_type_is_mapped():
    assert set(QUESTION_TYPES) == DESIGN_TYPES


def test_fixture_ingest(check_self):
    items, report = ingest(FIXTURE)
    assert report.rows == 20
    assert len(items) == 14 and report.dropped == 6
    assert report.unknown_types == {"route_plan": [14]}
    assert [line for line, _ in report.unparseable] == [15, 16, 17, 18, 19]
    reasons = dict(report.unparseable)
    assert "not a number" in reasons[15] and "option letters" in reasons[16]
    assert "neither 'video' nor 'image'" in reasons[17] and "invalid JSON" in reasons[18]
    assert "unknown unit" in reasons[19]
    assert set(report.by_type) == DESIGN_TYPES
    by_line = {it.provenance["line"]: it for it in items}
    assert by_line[1].verifier == {"kind": "count", "version": 1, "answer": 6}
    assert by_line[1].scene_id == "scene0101_00" and by_line[1].provenance["media"] == {"video": "scannet/scene0101_00.mp4"}
    assert by_line[2].verifier["answer"] == 152 and by_line[2].verifier["unit"] == "cm"
    assert by_line[3].verifier["unit"] == "m2" and by_line[3].verifier["answer"] == 23.4
    assert by_line[4].verifier["answer"] == 2.7 and by_line[4].verifier["unit"] == "m"
    assert by_line[5].verifier["answer"] == "B" and by_line[5].options == ["monitor", "heater", "telephone", "cup"]
    assert by_line[6].verifier["answer"] == "C" and by_line[6].subtask == "rel_direction"
    assert by_line[7].options[0] == "sofa, lamp, tv, table"
    assert by_line[8].verifier == {"kind": "direction", "version": 1, "answer": "left",
                                   "classes": ["front", "left", "back", "right"], "ring": True}
    assert by_line[8].provenance["media"] == {"image": "hypersim/ai_001_001/frame_0007.jpg"}
    assert by_line[10].verifier["options"] == ["yes", "no"] and by_line[10].verifier["answer"] == "A"
    assert by_line[12].verifier["answer"] == "3 o'clock" and len(by_line[12].verifier["classes"]) == 12
    assert by_line[13].verifier["answer"] == 45 and by_line[13].verifier["unit"] == "cm"
    assert by_line[20].verifier["answer"] == ["towel", "sink", "mirror"]
    for it in items:
        assert "<video>" not in it.question and "<image>" not in it.question
        assert "single word or phrase" not in it.question
        assert "<answer>...</answer>" in it.question
        check_self(it)
    assert len({it.id for it in items}) == len(items)


def test_missing_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        ingest(tmp_path / "nope.jsonl")


@pytest.mark.parametrize("text,default,expected", [
    ("1.5 meters", None, (1.5, "m")), ("87", "cm", (87.0, "cm")), ("2.3m", None, (2.3, "m")),
    ("12 square meters", None, (12.0, "m2")), ("30 cm.", None, (30.0, "cm")), ("4 m²", None, (4.0, "m2")),
    ("250 millimeters", None, (250.0, "mm"))])
def test_parse_number(text, default, expected):
    assert parse_number(text, default) == expected


def test_parse_number_errors():
    with pytest.raises(RowError, match="no unit"):
        parse_number("3", None)
    with pytest.raises(RowError, match="unknown unit"):
        parse_number("3 feet", "m")


@settings(max_examples=100, deadline=None)
@given(opts=st.lists(st.text(alphabet="abcdefghij ,-", min_size=1, max_size=12).map(str.strip).filter(bool),
                     min_size=2, max_size=6), stem=st.text(alphabet="abc xyz?", min_size=1, max_size=30))
def test_parse_options_roundtrip(opts, stem):
    text = stem + "\nOptions:\n" + "\n".join(f"{chr(65 + i)}. {o}" for i, o in enumerate(opts))
    got_stem, got = parse_options(text)
    assert got == opts and got_stem == stem.strip()


def test_row_json_written_in_real_format_roundtrips(tmp_path):
    row = {"video": "arkitscenes/1.mp4", "question_type": "absolute_count",
           "conversations": [{"from": "human", "value": "<video>\nHow many cups are here?"}, {"from": "gpt", "value": "3"}]}
    p = tmp_path / "vsi_590k.jsonl"
    p.write_text(json.dumps(row) + "\n\n" + json.dumps({**row, "question_type": "mystery"}) + "\n")
    items, report = ingest(p)
    assert [i.verifier["answer"] for i in items] == [3]
    assert report.unknown_types == {"mystery": [3]} and report.rows == 2
