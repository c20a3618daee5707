"""Tiny corpora in their released layouts, written by tests: MindCube's release folder, VLM-3R's merged QA
files and SpaceR-151k's jsonl (the fields each authors' code reads; docs/sources.md says which)."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np


def png(path: Path, seed: int) -> bytes:
    """A small seeded PNG at `path`; returns its bytes."""
    pixels = np.random.default_rng(seed).integers(0, 255, (12, 16, 3), dtype=np.uint8)
    ok, buf = cv2.imencode(".png", pixels)
    assert ok
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.tobytes())
    return buf.tobytes()


# ---- MindCube: raw/MindCube_train.jsonl + other_all_image/<setting>/<group>/<n>.png
MINDCUBE_ROWS = [
    ("around_group001_q1", "around", "Images 1 and 2 show the sofa from two sides. Standing where image 2 was taken, "
     "is the lamp to your left or your right? A. Left B. Right", "B"),
    ("among_group002_q3", "among", "Four views are taken from around the table. From the view of image 3, which "
     "object is behind the table? A. chair B. plant C. shelf D. door", "C"),
    ("rotation_group003_q2", "rotation", "The camera turns in place between the images. After turning 90 degrees "
     "to the left, what is in front of you? A. window B. bed C. desk", "A"),
    ("translation_linear_group004_q1", "translation", "The camera moves forward between image 1 and image 2. Which "
     "object gets closer? A. the stove B. the sink", "A"),
]


def mindcube_row(row_id: str, question: str, answer: str, images: list[str]) -> dict:
    return {"id": row_id, "category": ["spatial"], "type": "multiple_choice", "meta_info": [],
            "question": question, "images": images, "gt_answer": answer}


def write_mindcube(root: Path, extra: list[dict] | None = None, seed: int = 0) -> Path:
    """The release folder with one question per setting (two images each), plus `extra` rows."""
    rows = []
    for i, (row_id, setting, question, answer) in enumerate(MINDCUBE_ROWS):
        group = row_id.split("_q")[0].split("_")[-1]
        images = [f"other_all_image/{setting}/{group}/{n}.png" for n in (1, 2)]
        for n, ref in enumerate(images):
            png(root / ref, seed * 1000 + i * 10 + n)
        rows.append(mindcube_row(row_id, question, answer, images))
    table = root / "raw" / "MindCube_train.jsonl"
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text("".join(json.dumps(r) + "\n" for r in rows + (extra or [])))
    return root


# ---- VLM-3R: merged_qa_<dataset>_train.json, a JSON array of LLaVA-style rows
NA_POST = "Please answer the question using a single word or phrase."
MC_POST = "Answer with the option's letter from the given choices directly."


def vlm3r_row(qtype: str, question: str, answer: str, *, options: list[str] | None = None,
              scene: str = "scene0011_00", dataset: str = "scannet", row_id: int = 0) -> dict:
    """A row as the authors' formatter writes it: the prompt around the question, the letter or bare number."""
    parts = ["These are frames of a video.", question]
    if options:
        parts += ["Options:\n" + "\n".join(options), MC_POST]
    else:
        parts.append(NA_POST)
    return {"id": row_id, "data_source": dataset, "scene_name": scene, "question_type": qtype,
            "video": f"{dataset}/videos/{scene}.mp4",
            "conversations": [{"from": "human", "value": "<image>\n" + "\n".join(parts)},
                              {"from": "gpt", "value": answer}]}


def opts(*texts: str) -> list[str]:
    return [f"{chr(ord('A') + i)}. {t}" for i, t in enumerate(texts)]


VLM3R_ROWS = [
    vlm3r_row("object_counting", "How many chairs are there in the room?", "4"),
    vlm3r_row("object_size_estimation", "How long is the longest side of the bed, measured in centimeters?", "203"),
    vlm3r_row("room_size_estimation", "How large is this room (in square meters)?", "21.7"),
    vlm3r_row("object_abs_distance", "How far apart are the closest points of the sofa and the tv (in meters)?",
              "2.4"),
    vlm3r_row("object_rel_distance_v1", "Which object is closest to the bed?",
              "B", options=opts("lamp", "desk", "door", "sink")),
    vlm3r_row("object_rel_direction_v1", "Standing by the bed and facing the door, which quadrant is the desk in?",
              "C", options=opts("front-left", "front-right", "back-left", "back-right")),
    vlm3r_row("object_rel_direction_v2", "Standing by the bed and facing the door, is the lamp to my left, right or "
              "back?", "A", options=opts("left", "right", "back")),
    vlm3r_row("object_rel_direction_v3", "Standing by the bed and facing the door, is the sofa left or right of the "
              "door?", "B", options=opts("left", "right")),
    vlm3r_row("obj_appearance_order", "In which order do these first appear: sofa, lamp, bed, tv?", "D",
              options=opts("sofa, lamp, bed, tv", "lamp, sofa, tv, bed", "bed, tv, lamp, sofa", "tv, bed, sofa, lamp")),
    vlm3r_row("route_planning", "Starting at the bed facing the door, fill in the turns to reach the sink.", "A",
              options=opts("turn left, turn right", "turn right, turn back")),
    vlm3r_row("camera_obj_abs_dist", "How far is the camera from the nearest point of the fridge in frame 12 "
              "(in meters)?", "1.3"),
    vlm3r_row("camera_obj_rel_dist_v2", "Which of these is closest to the camera in frame 5?", "C",
              options=opts("chair", "table", "tv")),
    vlm3r_row("obj_obj_relative_pos_lr", "In frame 8, is the lamp left or right of the bed?", "A",
              options=opts("Left", "Right")),
    vlm3r_row("obj_obj_relative_pos_ud", "In frame 8, is the shelf above or below the desk?", "A",
              options=opts("Up", "Down")),
    vlm3r_row("obj_obj_relative_pos_nf", "In frame 8, is the chair nearer or farther than the table?", "B",
              options=opts("Near", "Far")),
]


def write_vlm3r(folder: Path, rows: list[dict] | None = None, name: str = "merged_qa_scannet_train.json") -> Path:
    """One merged QA file (a JSON array, indented as the authors' formatter dumps it)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    rows = VLM3R_ROWS if rows is None else rows
    path.write_text(json.dumps([{**r, "id": i} for i, r in enumerate(rows)], indent=2))
    return path


# ---- SpaceR-151k: one jsonl; SR-91k rows have data_source "SR_dataset"
def sr_row(problem: str, problem_type: str, answer: str, *, options: list[str] | None = None,
           video: str = "scene0011_00.mp4", source: str = "SR_dataset", pid: int = 0) -> dict:
    return {"problem_id": pid, "problem": problem, "data_type": "video", "problem_type": problem_type,
            "options": options or [], "process": "", "solution": f"<answer>{answer}</answer>",
            "path": f"./SR-91k/{video}", "data_source": source}


SR_ROWS = [
    sr_row("How many pillows are in this room?", "numerical", "5"),
    sr_row("What is the longest dimension of the desk, measured in centimeters?", "numerical", "140"),
    sr_row("What is the size of this room (in square meters)?", "numerical", "18.5"),
    sr_row("What is the distance between the fridge and the sink (in meters)?", "numerical", "1.7"),
    sr_row("Which of these objects (bed, desk, door, lamp) is closest to the sofa?", "multiple choice", "A",
           options=opts("bed", "desk", "door", "lamp")),
    sr_row("If I am standing by the bed and facing the tv, is the lamp to my front-left, front-right, back-left, or "
           "back-right?", "multiple choice", "D", options=opts("front-left", "front-right", "back-left", "back-right")),
    sr_row("If I am standing by the bed and facing the tv, is the door to my left, right, or back?", "free-form",
           "back"),
    sr_row("What is the first-time appearance order of the following categories: tv, bed, lamp?", "free-form",
           "bed, lamp, tv"),
    sr_row("You are a robot beginning at the bed facing the door. How do you navigate to the sink?",
           "multiple choice", "B", options=opts("turn left", "turn right")),
    sr_row("How far is the closest point of the chair from the camera in the last frame (in meters)?",
           "regression", "0.9"),
]


def write_sr91k(path: Path, rows: list[dict] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = SR_ROWS if rows is None else rows
    path.write_text("".join(json.dumps({**r, "problem_id": i}) + "\n" for i, r in enumerate(rows)))
    return path
