"""VSI-590K ingest on a fixture in the real row format; parsing helpers with hand and property cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numerical3d.pipeline.ingest.vsi590k import QUESTION_TYPES, RowError, ingest, parse_number, parse_options

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
        assert "<video>" not in it.prompt and "<image>" not in it.prompt
        assert "single word or phrase" not in it.prompt
        assert "<answer>...</answer>" in it.prompt and it.prompt.startswith(it.question)
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
        parse_number("3 furlongs", "m")
    assert parse_number("3 feet", "m") == (3.0, "ft")  # feet became a known unit (VSI-590K asks in feet)


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


# ---- rows as the real vsi_590k.jsonl writes them: the unit named in the question, bare-number answers,
# `<image>` as well as `<video>` openings for image and video rows, numeric absolute directions.
def _row(qtype: str, question: str, answer: str, media: str = "video", token: str = "<image>") -> dict:
    ref = "scannet/scene0191_00.mp4" if media == "video" else "hypersim/ai_001_001/frame_0007.jpg"
    return {media: ref, "question_type": qtype, "conversations": [
        {"from": "human", "value": f"{token}\nThese are frames of a video.\n{question}\n"
                                   "Please answer the question using a single word or phrase."},
        {"from": "gpt", "value": answer}]}


REAL_ROWS = [
    _row("absolute_size_object", "What is the length of the longest dimension (length, width, or height) of the "
         "bed, measured in feet?", "6.8"),
    _row("absolute_size_object", "What is the height of the lamp, measured in inches?", "27", media="image"),
    _row("absolute_distance_object", "Measuring from the closest point of each object, what is the distance between "
         "the sofa and the tv in centimeters?", "240.0", token="<video>"),
    _row("absolute_distance_object", "What is the distance between the door and the window (in meters)?", "2.7",
         media="image", token="<video>"),
    _row("absolute_size_room", "What is the size of this room in square feet?", "161.5"),
    _row("absolute_direction_object", "If I am standing by the sofa and facing the tv, what is the angle of the "
         "lamp relative to me?", "-119"),
    _row("absolute_direction_object", "Standing at the bed facing the window, at what clock direction is the door?",
         "3"),
    _row("absolute_size_object", "How long is the table in square feet?", "12"),
    _row("absolute_distance_object", "How far is the desk from the bed in feet?", "2 furlongs"),
]
TRUE_SI = {1: 6.8 * 0.3048, 2: 27 * 0.0254, 3: 2.4, 4: 2.7, 5: 161.5 * 0.09290304}


@pytest.fixture()
def real_rows_report(tmp_path):
    p = tmp_path / "vsi_590k.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in REAL_ROWS))
    items, report = ingest(p)
    return {it.provenance["line"]: it for it in items}, report


def test_the_unit_the_question_names_governs_a_bare_answer(real_rows_report, check_self):
    from numerical3d.verifiers.parsing import UNITS

    items, _ = real_rows_report
    assert [(items[n].verifier["answer"], items[n].verifier["unit"]) for n in (1, 2, 3, 4, 5)] == [
        (6.8, "ft"), (27.0, "in"), (240.0, "cm"), (2.7, "m"), (161.5, "ft2")]
    for n, si in TRUE_SI.items():
        spec = items[n].verifier
        assert spec["answer"] * UNITS[spec["unit"]][1] == pytest.approx(si)
        check_self(items[n])
    assert "feet" in items[1].prompt and "inches" in items[2].prompt and "square feet" in items[5].prompt
    assert items[2].provenance["media"] == {"image": "hypersim/ai_001_001/frame_0007.jpg"}
    assert all("<image>" not in it.prompt and "<video>" not in it.prompt for it in items.values())


def test_numeric_absolute_directions_are_angles_or_clock_hours(real_rows_report):
    from numerical3d.verifiers.verify import verify

    items, _ = real_rows_report
    angle = items[6].verifier
    assert angle == {"kind": "numeric", "version": 1, "answer": -119.0, "unit": "deg", "error": "angular"}
    assert items[6].subtask == "rel_direction" and "degrees" in items[6].prompt
    for same in ("241", "-119 degrees", "241°"):  # one direction, written on either range
        assert verify(angle, f"<think>t</think><answer>{same}</answer>", 100).reward == pytest.approx(1.0)
    assert verify(angle, "<think>t</think><answer>119</answer>", 100).reward < 0.2
    assert items[7].verifier["kind"] == "direction" and items[7].verifier["answer"] == "3 o'clock"


def test_report_per_question_type_with_reasons_and_lines(real_rows_report):
    items, report = real_rows_report
    per = report.per_type()
    assert per["absolute_size_object"]["accepted"] == 2 and per["absolute_size_object"]["rejected"] == 1
    (size_rejection,) = per["absolute_size_object"]["rejections"]
    assert size_rejection["line"] == 8 and "needs a length" in size_rejection["reason"] and "ft2" in size_rejection["reason"]
    assert per["absolute_distance_object"] == {"accepted": 2, "rejected": 1, "rejections": [
        {"line": 9, "reason": "answer '2 furlongs' has an unknown unit 'furlongs'"}]}
    assert per["absolute_direction_object"]["accepted"] == 2 and per["absolute_size_room"]["accepted"] == 1
    assert report.to_dict()["per_type"] == per


LENGTH_WORDS = {"ft": "feet", "in": "inches", "cm": "centimeters", "m": "meters", "mm": "millimeters"}
AREA_WORDS = {"m2": "square meters", "ft2": "square feet"}
PHRASES = ["What is the length of the longest dimension of the {obj}, measured in {unit}?",
           "What is the distance between the {obj} and the door in {unit}?",
           "How far is the {obj} from the door (in {unit})?"]


def _written(value: float, unit: str) -> str:
    from numerical3d.verifiers.spec import UNIT_TEXT

    return f"{value!r} {UNIT_TEXT[unit]}"


@settings(max_examples=60, deadline=None)
@given(value=st.decimals(min_value="0.1", max_value="900", places=1).map(float),
       area=st.booleans(), data=st.data(), token=st.sampled_from(["<image>", "<video>"]),
       media=st.sampled_from(["image", "video"]))
def test_true_value_in_any_unit_gets_full_reward_and_a_wrong_unit_reading_a_low_one(
        tmp_path_factory, value, area, data, token, media):
    from numerical3d.verifiers.parsing import UNITS
    from numerical3d.verifiers.verify import verify

    words = AREA_WORDS if area else LENGTH_WORDS
    asked = data.draw(st.sampled_from(sorted(words)))
    if area:
        qtype, question = "absolute_size_room", f"What is the size of this room in {words[asked]}?"
    else:
        qtype = data.draw(st.sampled_from(["absolute_size_object", "absolute_distance_object"]))
        question = data.draw(st.sampled_from(PHRASES)).format(obj="sofa", unit=words[asked])
    p = tmp_path_factory.mktemp("rows") / "vsi_590k.jsonl"
    p.write_text(json.dumps(_row(qtype, question, f"{value}", media=media, token=token)) + "\n")
    (item,), _ = ingest(p)
    spec = item.verifier
    assert (spec["answer"], spec["unit"]) == (value, asked)
    for unit in words:  # the true value, converted to every unit the parser knows for this dimension
        true = value * UNITS[asked][1] / UNITS[unit][1]
        r = verify(spec, f"<think>t</think><answer>{_written(true, unit)}</answer>", 100)
        assert r.reward > 0.99, (unit, true)
        if unit != asked:  # the same number read in another unit (6.8 ft taken as 6.8 cm)
            wrong = verify(spec, f"<think>t</think><answer>{_written(value, unit)}</answer>", 100)
            assert wrong.accuracy_reward < 0.05, (unit, value)
    assert verify(spec, f"<think>t</think><answer>{value}</answer>", 100).reward == pytest.approx(1.0)
