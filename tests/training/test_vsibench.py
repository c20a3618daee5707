"""`numerical3d benchmark run vsibench` on benchmark folders written in VSI-Bench's released layout:
a parquet question table and one small mp4 per scene (written with OpenCV) at
`<dataset>/<scene_name>.mp4`.

Grading of fixed predictions equals a table computed by hand for every question type (junk
answers included); the tiny Qwen2.5-VL answers the benchmark end to end through the CLI, resumes
without recomputing, and bad inputs stop with a message naming the file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from numerical3d.training.benchmarks.common import PredictionLog, read_predictions
from numerical3d.training.benchmarks.core import Prompt
from numerical3d.training.benchmarks.video import frame_indices, sample_frames
from numerical3d.training.benchmarks.vsibench import load_questions, prompt_text

BENCHMARK = "vsibench"  # what the `invoke` fixture (conftest.py) runs

VIDEOS = {"scannet/scene0011_00": 20, "arkitscenes/41069025": 13, "scannetpp/0d2ee665be": 31}

# (question_type, ground_truth, options, prediction, score) -- the score worked out by hand:
# the first space-separated token, trailing '.' stripped; MRA over 0.50 ... 0.95 for numbers.
CASES = [
    ("object_counting", "3", None, "3", 1.0),
    ("object_counting", "3", None, "about three", 0.0),  # "about" is not a number
    ("object_abs_distance", "2.0", None, "2.5.", 0.6),  # 0.5 / 2 = 0.25 <= 1 - theta for theta 0.50 ... 0.75
    ("object_abs_distance", "2.0", None, "", 0.0),
    ("object_size_estimation", "50", None, "The answer is D", 0.0),
    ("object_size_estimation", "50", None, "57 cm", 0.8),  # 0.14 <= 1 - theta for theta 0.50 ... 0.85
    ("room_size_estimation", "20", None, "22.6", 0.8),  # 0.13: theta 0.50 ... 0.85
    ("object_rel_distance", "B", ["A. sofa", "B. chair", "C. lamp", "D. desk"], "B", 1.0),
    ("object_rel_distance", "B", ["A. sofa", "B. chair", "C. lamp", "D. desk"], "b. the chair", 1.0),
    ("object_rel_distance", "B", ["A. sofa", "B. chair", "C. lamp", "D. desk"], "The answer is D", 0.0),
    ("object_rel_direction_easy", "A", ["A. left", "B. right"], "A.", 1.0),
    ("object_rel_direction_medium", "C", ["A. left", "B. right", "C. back"], "2.5.", 0.0),
    ("object_rel_direction_medium", "C", ["A. left", "B. right", "C. back"], "C", 1.0),
    ("object_rel_direction_hard", "D", ["A. front-left", "B. front-right", "C. back-left", "D. back-right"], "", 0.0),
    ("route_planning", "A", ["A. Turn Left", "B. Turn Right"], "(A)", 0.0),
    ("route_planning", "A", ["A. Turn Left", "B. Turn Right"], "a", 1.0),
    ("obj_appearance_order", "C", ["A. x, y", "B. y, x", "C. x, z", "D. z, x"], "C", 1.0),
    ("obj_appearance_order", "A", ["A. x, y", "B. y, x", "C. x, z", "D. z, x"], None, 0.0),  # no prediction
]
# Per type by hand: counting (1 + 0) / 2, abs distance (0.6 + 0) / 2, size (0 + 0.8) / 2, room 0.8,
# rel distance 2 / 3, rel direction = mean(easy 1, medium 0.5, hard 0) = 0.5, route 0.5, order 0.5.
EXPECTED = {
    "object_counting": 50.0, "object_abs_distance": 30.0, "object_size_estimation": 40.0,
    "room_size_estimation": 80.0, "object_rel_distance": 200 / 3, "object_rel_direction": 50.0,
    "route_planning": 50.0, "obj_appearance_order": 50.0,
}


def write_video(path: Path, n_frames: int, fps: float = 24.0) -> None:
    """A small mp4 whose frame i is a flat grey of level 12 * (i % 21) (readable back after compression)."""
    import cv2

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (64, 48))
    assert writer.isOpened()
    for i in range(n_frames):
        writer.write(np.full((48, 64, 3), 12 * (i % 21), dtype=np.uint8))
    writer.release()


def write_benchmark(root: Path, cases=CASES, videos=VIDEOS, table_name="test-00000-of-00001.parquet") -> Path:
    """VSI-Bench's released layout: the question table and <dataset>/<scene_name>.mp4."""
    scenes = list(videos)
    rows = {c: [] for c in ("id", "dataset", "scene_name", "question_type", "question", "options", "ground_truth")}
    for i, (qtype, truth, options, _, _) in enumerate(cases):
        dataset, scene = scenes[i % len(scenes)].split("/")
        rows["id"].append(i)
        rows["dataset"].append(dataset)
        rows["scene_name"].append(scene)
        rows["question_type"].append(qtype)
        rows["question"].append(f"Question {i} about the {qtype.replace('_', ' ')} in this room?")
        rows["options"].append(options)
        rows["ground_truth"].append(truth)
    schema = pa.schema([("id", pa.int64()), ("dataset", pa.string()), ("scene_name", pa.string()),
                        ("question_type", pa.string()), ("question", pa.string()), ("options", pa.list_(pa.string())),
                        ("ground_truth", pa.string())])
    root.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(rows, schema=schema), root / table_name)
    for name, n in videos.items():
        write_video(root / f"{name}.mp4", n)
    return root


def write_predictions_file(path: Path, cases=CASES, wrap=lambda p: p) -> Path:
    path.write_text("".join(json.dumps({"id": i, "prediction": wrap(c[3])}) + "\n"
                            for i, c in enumerate(cases) if c[3] is not None))
    return path


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    return write_benchmark(tmp_path_factory.mktemp("vsibench"))


# ------------------------------------------------------------------------------ grading
def test_grading_fixed_predictions_equals_the_hand_table(invoke, bench, tmp_path):
    preds = write_predictions_file(tmp_path / "fixed.jsonl")
    res = invoke("--data", bench, "--predictions", preds, "--out", tmp_path / "out")
    assert res.exit_code == 0, res.output
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    for qtype, value in EXPECTED.items():
        assert results[qtype] == pytest.approx(value), qtype
    assert results["overall"] == pytest.approx(sum(EXPECTED.values()) / 8)
    assert results["questions"] == len(CASES) and results["missing_predictions"] == 1
    assert results["missing_types"] == [] and results["protocol"]["prompt"] == "official"
    # each question's score as computed by hand
    from numerical3d.verifiers.vsibench import question_score

    for qtype, truth, _, prediction, score in CASES:
        assert question_score(qtype, prediction or "", truth) == score
    lines = [json.loads(x) for x in (tmp_path / "out" / "predictions.jsonl").read_text().splitlines()]
    assert [x["id"] for x in lines] == [i for i, c in enumerate(CASES) if c[3] is not None]
    assert (tmp_path / "out" / "vsibench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Rel. Dir." in res.output and "SmoothOp-7B" in res.output and "52.1" in res.output


def test_console_script_grades_a_predictions_file(bench, tmp_path):
    """`numerical3d benchmark run vsibench` in a subprocess, as a user types it."""
    preds = write_predictions_file(tmp_path / "fixed.jsonl")
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-c", "from numerical3d.cli import main; main()", "benchmark", "run",
                          "vsibench", "--data", str(bench), "--predictions", str(preds), "--out", str(out),
                          "--name", "fixed"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    results = json.loads((out / "results.json").read_text())
    assert {t: results[t] for t in EXPECTED} == pytest.approx(EXPECTED)
    assert results["overall"] == pytest.approx(sum(EXPECTED.values()) / 8) and results["model"] == "fixed"
    assert results["benchmark"] == "VSI-Bench" and results["unknown_prediction_ids"] == []
    assert "VSI-Bench: fixed" in res.stdout and "Rel. Dir." in res.stdout and f"{out / 'vsibench.png'}" in res.stdout


def test_reasoning_prompt_reads_the_answer_tags(invoke, bench, tmp_path):
    preds = write_predictions_file(tmp_path / "tagged.jsonl", wrap=lambda p: f"<think>Look at the room.</think><answer>{p}</answer>")
    res = invoke("--data", bench, "--predictions", preds, "--out", tmp_path / "r", "--prompt", "reasoning", "--json")
    assert res.exit_code == 0, res.output
    results = json.loads(res.stdout)
    for qtype, value in EXPECTED.items():
        assert results[qtype] == pytest.approx(value), qtype
    # the same tagged outputs under the official rule: the first token is "<think>Look", never a match
    res = invoke("--data", bench, "--predictions", preds, "--out", tmp_path / "o", "--json")
    assert json.loads(res.stdout)["overall"] == 0.0


def test_prompts_follow_the_lmms_eval_layout(bench):
    questions = load_questions(bench / "test-00000-of-00001.parquet")
    count, choice = questions[0], questions[7]
    assert prompt_text(count, "official") == (
        "These are frames of a video.\n" + count.question + "\nPlease answer the question using a single word or phrase.")
    assert prompt_text(choice, "official") == (
        "These are frames of a video.\n" + choice.question
        + "\nOptions:\nA. sofa\nB. chair\nC. lamp\nD. desk\nAnswer with the option's letter from the given choices directly.")
    reasoning = prompt_text(choice, "reasoning")
    assert reasoning.startswith("These are frames of a video.\n" + choice.question + "\nOptions:\nA. sofa")
    assert reasoning.endswith("inside <answer>...</answer>.") and "<think>...</think>" in reasoning


def test_frame_sampling_is_uniform_linspace(bench):
    assert frame_indices(20, 8) == [0, 2, 5, 8, 10, 13, 16, 19]  # np.linspace(0, 19, 8, dtype=int)
    assert frame_indices(5, 8) == [0, 1, 2, 3, 4]
    sampled = sample_frames(bench / "scannet" / "scene0011_00.mp4", 8)
    assert sampled.total == 20 and sampled.fps == 24.0 and sampled.indices == [0, 2, 5, 8, 10, 13, 16, 19]
    assert sampled.metadata() == {"total_num_frames": 20, "fps": 24.0, "frames_indices": sampled.indices}
    levels = [round(float(f.mean()) / 12) for f in sampled.frames]  # frame i is grey 12 * i
    assert levels == [0, 2, 5, 8, 10, 13, 16, 19]
    assert sampled.frames[0].shape == (48, 64, 3) and sampled.frames[0].dtype == np.uint8


def test_prediction_log_drops_a_cut_off_last_line(tmp_path):
    path = tmp_path / "predictions.jsonl"
    path.write_text('{"id": 0, "prediction": "3"}\n{"id": 1, "prediction": "A"}\n{"id": 2, "predi')
    log = PredictionLog(path)
    assert log.done == {"0": "3", "1": "A"}
    assert path.read_text() == '{"id": 0, "prediction": "3"}\n{"id": 1, "prediction": "A"}\n'
    log.append([Prompt(2, "q", [])], ["B"])
    log.finish([2, 1, 0])
    assert [json.loads(x)["id"] for x in path.read_text().splitlines()] == [2, 1, 0]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda rows: rows.pop("options"), "lacks column(s) ['options']"),
        (lambda rows: rows["question_type"].__setitem__(0, "object_rel_direction"), "unknown question_type"),
        (lambda rows: rows["ground_truth"].__setitem__(0, "0"), "must be a non-zero number"),
        (lambda rows: rows["ground_truth"].__setitem__(0, "three"), "must be a non-zero number"),
        (lambda rows: rows["options"].__setitem__(7, None), "needs options"),
        (lambda rows: rows["id"].__setitem__(1, 0), "duplicate id"),
    ],
)
def test_bad_tables_name_the_file_and_row(invoke, tmp_path, mutate, message):
    root = write_benchmark(tmp_path / "b", videos={"scannet/scene0011_00": 3, "arkitscenes/41069025": 3,
                                                   "scannetpp/0d2ee665be": 3})
    table = root / "test-00000-of-00001.parquet"
    rows = pq.read_table(table).to_pydict()
    mutate(rows)
    pq.write_table(pa.table(rows), table)
    preds = write_predictions_file(tmp_path / "p.jsonl")
    res = invoke("--data", root, "--predictions", preds, "--out", tmp_path / "out")
    assert res.exit_code == 2
    assert message in res.output and "test-00000-of-00001.parquet" in res.output


def test_usage_errors(invoke, bench, tmp_path):
    res = invoke("--data", bench, "--out", tmp_path / "o")
    assert res.exit_code == 2 and "exactly one of --model PATH and --predictions FILE" in res.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 0, "prediction": "3"}\nnot json\n')
    res = invoke("--data", bench, "--predictions", bad, "--out", tmp_path / "o")
    assert res.exit_code == 2 and "bad.jsonl:2: not valid JSON" in res.output
    res = invoke("--data", tmp_path / "nowhere", "--predictions", bad, "--out", tmp_path / "o")
    assert res.exit_code == 2 and "not a folder" in res.output
    (tmp_path / "two").mkdir()
    for name in ("a.parquet", "b.parquet"):
        (tmp_path / "two" / name).write_bytes(b"")
    res = invoke("--data", tmp_path / "two", "--predictions", bad, "--out", tmp_path / "o")
    assert res.exit_code == 2 and "a.parquet, b.parquet; pass --table" in res.output


def test_a_graded_file_is_never_taken_for_model_answers(invoke, bench, tmp_path):
    preds = write_predictions_file(tmp_path / "fixed.jsonl")
    assert invoke("--data", bench, "--predictions", preds, "--out", tmp_path / "o").exit_code == 0
    res = invoke("--data", bench, "--model", tmp_path / "no-model", "--out", tmp_path / "o")
    assert res.exit_code == 2 and "holds predictions of a run with another protocol" in res.output
    assert invoke("--data", bench, "--predictions", preds, "--out", tmp_path / "o", "--limit", "3").exit_code == 0


def test_missing_video_and_missing_vllm(invoke, bench, tmp_path):
    root = write_benchmark(tmp_path / "b", videos={"scannet/scene0011_00": 3, "arkitscenes/41069025": 3,
                                                   "scannetpp/0d2ee665be": 3})
    (root / "arkitscenes" / "41069025.mp4").unlink()
    res = invoke("--data", root, "--model", tmp_path / "no-model", "--out", tmp_path / "o")
    assert res.exit_code == 2 and "1 video(s) missing: arkitscenes/41069025.mp4" in res.output
    if _has_vllm():
        pytest.skip("vllm is installed here")
    res = invoke("--data", bench, "--model", tmp_path / "no-model", "--out", tmp_path / "v", "--backend", "vllm")
    assert res.exit_code == 2 and "--backend vllm needs the vllm package" in res.output


def _has_vllm() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


# ------------------------------------------------------------------------------ the tiny model
@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory, bench) -> Path:
    """A tiny Qwen2.5-VL built from a config, its tokenizer trained on the benchmark's prompts."""
    from numerical3d.training.tiny import build_tiny_model

    questions = load_questions(bench / "test-00000-of-00001.parquet")
    corpus = [prompt_text(q, mode) for q in questions for mode in ("official", "reasoning")]
    return build_tiny_model(tmp_path_factory.mktemp("tiny-vsi") / "model", corpus)


@pytest.mark.slow
@pytest.mark.xdist_group("tiny-model")
def test_tiny_model_end_to_end_and_resume(invoke, bench, tiny_vlm, tmp_path, monkeypatch):
    from numerical3d.training.benchmarks.backends import TransformersBackend

    calls: list[int] = []
    generate = TransformersBackend.generate

    def counting(self, prompts):
        calls.append(len(prompts))
        assert all(len(p.frames) == 4 and len(p.video_metadata["frames_indices"]) == 4 for p in prompts)
        return generate(self, prompts)

    monkeypatch.setattr(TransformersBackend, "generate", counting)
    out = tmp_path / "run"
    args = ["--data", bench, "--model", tiny_vlm, "--out", out, "--frames", "4", "--visual", "images",
            "--batch-size", "5", "--max-new-tokens", "6", "--name", "tiny"]
    res = invoke(*args)
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert sum(calls) == len(CASES) and max(calls) <= 5
    results = json.loads((out / "results.json").read_text())
    assert set(EXPECTED) <= set(results) and 0.0 <= results["overall"] <= 100.0
    assert results["model"] == "tiny" and results["missing_predictions"] == 0
    assert results["protocol"]["frames"] == 4 and results["protocol"]["max_new_tokens"] == 6
    first = (out / "predictions.jsonl").read_text()
    rows = [json.loads(x) for x in first.splitlines()]
    assert [r["id"] for r in rows] == list(range(len(CASES))) and all(isinstance(r["prediction"], str) for r in rows)
    # regrading the written predictions gives the same results
    res = invoke("--data", bench, "--predictions", out / "predictions.jsonl", "--out", tmp_path / "regrade", "--json")
    regraded = json.loads(res.stdout)
    assert {k: regraded[k] for k in ["overall", *EXPECTED]} == {k: results[k] for k in ["overall", *EXPECTED]}

    # resume: drop two answers and cut the last line in half; only those three are asked again
    lines = first.splitlines(keepends=True)
    (out / "predictions.jsonl").write_text("".join(lines[2:-1]) + lines[-1][:9])
    calls.clear()
    res = invoke(*args)
    assert res.exit_code == 0, res.output
    assert sum(calls) == 3
    again = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert [r["id"] for r in again] == list(range(len(CASES)))
    assert again[2:-1] == rows[2:-1]
    # a different protocol must not be mixed into the same folder
    res = invoke(*[a if a != "4" else "2" for a in args])
    assert res.exit_code == 2 and "another protocol" in res.output


def test_read_predictions_matches_ids_as_text(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": 7, "prediction": null}\n{"id": "8", "prediction": 3}\n')
    assert read_predictions(path) == {"7": "", "8": "3"}


@pytest.mark.slow
@pytest.mark.xdist_group("tiny-model")
def test_video_input_needs_a_video_processor(invoke, bench, tiny_vlm, tmp_path):
    res = invoke("--data", bench, "--model", tiny_vlm, "--out", tmp_path / "v", "--frames", "4", "--visual", "video")
    assert res.exit_code == 2 and "has no video processor" in res.output and "--visual images" in res.output


@pytest.mark.slow
@pytest.mark.xdist_group("tiny-model")
def test_tiny_model_answers_from_one_video(invoke, bench, tiny_vlm, tmp_path):
    """The lmms-eval path: the frames go in as one video with the source's frame rate and indices
    (Qwen's video processor needs torchvision, so this runs only where it is installed)."""
    pytest.importorskip("torchvision")
    import shutil

    from transformers import AutoTokenizer, Qwen2_5_VLProcessor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    from numerical3d.training.tiny import CHAT_TEMPLATE

    model = tmp_path / "model"
    shutil.copytree(tiny_vlm, model)
    processor = Qwen2_5_VLProcessor(Qwen2VLImageProcessorPil(size={"shortest_edge": 784, "longest_edge": 3136}),
                                    AutoTokenizer.from_pretrained(model),
                                    video_processor=Qwen2VLVideoProcessor(size={"shortest_edge": 784, "longest_edge": 12544}),
                                    chat_template=CHAT_TEMPLATE)
    processor.save_pretrained(model)
    res = invoke("--data", bench, "--model", model, "--out", tmp_path / "v", "--frames", "8", "--visual", "video",
                 "--batch-size", "4", "--max-new-tokens", "4")
    assert res.exit_code == 0, res.output
    assert len((tmp_path / "v" / "predictions.jsonl").read_text().splitlines()) == len(CASES)
