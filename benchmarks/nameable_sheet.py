"""A contact sheet of random scene-level items, to check by eye that a person can name what they ask about.

For each item drawn (seeded), the question and, per named object, the carried frame where the pipeline's
rule names it with the largest visible extent (`Context.nameable`; else the carried frame the renderer's
masks, `<scene>.truth.json`, show most of it in), with the object's annotated box drawn thin so the
checker knows which instance is meant. The checker then asks of each tile: is this recognisably a <label>?

    python benchmarks/nameable_sheet.py DATASET_DIR SCANS_DIR docs/img/nameable_contact_sheet.jpg --n 24 --seed 33
    python benchmarks/nameable_sheet.py DATASET_DIR SCANS_DIR sheet.jpg --tile 640 480 --per-row 2 --items-dir items/
        # frames at the size a model gets them (the mix's longest_side), one PNG an item to look at
"""

from __future__ import annotations

import argparse
import glob
import json
import textwrap
from pathlib import Path

import cv2
import numpy as np
import pyarrow.parquet as pq

from numerical3d.pipeline.geometry.visibility import project_points
from numerical3d.pipeline.questions import QuestionConfig
from numerical3d.pipeline.questions.common import Context
from numerical3d.sources import load_scenes

TILE = (224, 168)  # default width, height of one frame on the sheet
EDGES = [(a, b) for a in range(8) for b in range(a + 1, 8) if bin(a ^ b).count("1") == 1]
SCENE_LEVEL = {"abs_distance", "appearance_order", "object_count", "object_size", "rel_direction", "rel_distance",
               "route_plan"}


def pick_items(dataset: Path, n: int, seed: int) -> list[dict]:
    rows = []
    for path in sorted(glob.glob(str(dataset / "data" / "*.parquet"))):
        rows += [r for r in pq.read_table(path, columns=["id", "scene_id", "subtask", "question", "provenance"]).to_pylist()
                 if r["subtask"] in SCENE_LEVEL]
    rows.sort(key=lambda r: r["id"])
    return [rows[i] for i in sorted(np.random.default_rng(seed).choice(len(rows), size=min(n, len(rows)), replace=False))]


def tile(scene, frame_index: int, obj, caption: str, size: tuple[int, int]) -> np.ndarray:
    frame = next(f for f in scene.frames if f.index == frame_index)
    img = cv2.cvtColor(np.ascontiguousarray(frame.image()), cv2.COLOR_RGB2BGR)
    uv, _, _ = project_points(obj.box.corners(), frame.intrinsics, frame.pose, frame.width, frame.height)
    z = (np.asarray(obj.box.corners()) - frame.pose[:3, 3]) @ np.asarray(frame.pose)[:3, :3]
    for a, b in EDGES:
        if z[a, 2] > 0.05 and z[b, 2] > 0.05:
            cv2.line(img, tuple(int(v) for v in uv[a]), tuple(int(v) for v in uv[b]), (0, 255, 255), 1, cv2.LINE_AA)
    img = cv2.resize(img, size, interpolation=cv2.INTER_AREA)
    cv2.rectangle(img, (0, size[1] - 16), (size[0], size[1]), (0, 0, 0), -1)
    cv2.putText(img, caption, (3, size[1] - 4), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (255, 255, 255), 1, cv2.LINE_AA)
    return img


def item_row(k: int, row: dict, ctx: Context, truth: dict, size: tuple[int, int], per_row: int = 4) -> np.ndarray:
    prov = json.loads(row["provenance"]) if isinstance(row["provenance"], str) else row["provenance"]
    scene = ctx.scene
    by_id = {o.instance_id: o for o in scene.objects}
    tiles = []
    for o in prov["objects"]:
        iid = o["instance_id"]
        named = [f for f in prov["frame_indices"] if iid in ctx.nameable(f)]
        if named:
            best = max(named, key=lambda f: _extent(ctx.visibility(ctx.frame_by_index[f])[iid].bbox2d))
        else:
            best = max(prov["frame_indices"], key=lambda f: truth.get(f, {}).get(str(iid), 0))
        tiles.append(tile(scene, best, by_id[o["instance_id"]], f"{o['label']} (frame {best})", size))
    text = f"{k}. [{row['subtask']}] " + row["question"].replace("\n", " ").split(" First think")[0]
    lines = textwrap.wrap(text, 150)[:2]
    width = per_row * size[0]
    head = np.full((16 * len(lines) + 4, width, 3), 255, np.uint8)
    for i, line in enumerate(lines):
        cv2.putText(head, line, (4, 14 + 16 * i), cv2.FONT_HERSHEY_SIMPLEX, 0.42, (0, 0, 0), 1, cv2.LINE_AA)
    strips = []
    for start in range(0, len(tiles), per_row):  # every named object, in rows
        strip = np.full((size[1], width, 3), 255, np.uint8)
        for i, t in enumerate(tiles[start:start + per_row]):
            strip[:, i * size[0]:(i + 1) * size[0]] = t
        strips.append(strip)
    return np.vstack([head, *strips, np.full((6, width, 3), 255, np.uint8)])


def _extent(box: tuple[int, int, int, int]) -> int:
    return (box[2] - box[0]) * (box[3] - box[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", type=Path)
    ap.add_argument("scans", type=Path, help="the synthetic scenes' scans/ folder")
    ap.add_argument("out", type=Path)
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--seed", type=int, default=33)
    ap.add_argument("--quality", type=int, default=70)
    ap.add_argument("--tile", type=int, nargs=2, default=TILE, metavar=("W", "H"), help="size of one frame")
    ap.add_argument("--per-row", type=int, default=4, help="frames side by side")
    ap.add_argument("--items-dir", type=Path, help="also write each item as its own PNG here")
    args = ap.parse_args()
    items = pick_items(args.dataset, args.n, args.seed)
    wanted = sorted({r["scene_id"] for r in items})
    contexts = {s.scene_id: Context(s, QuestionConfig()) for s in load_scenes("synthetic", args.scans, scene_ids=wanted)}
    rows = []
    for k, row in enumerate(items, 1):
        truth = json.loads((args.scans / row["scene_id"] / f"{row['scene_id']}.truth.json").read_text())
        masks = {f["index"]: f["visible"] for f in truth["frames"]}
        rows.append(item_row(k, row, contexts[row["scene_id"]], masks, tuple(args.tile), args.per_row))
        if args.items_dir:
            args.items_dir.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(args.items_dir / f"item_{k:02d}.png"), rows[-1])
        print(k, row["id"], row["subtask"], row["question"].replace("\n", " ")[:160])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(args.out), np.vstack(rows), [cv2.IMWRITE_JPEG_QUALITY, args.quality])


if __name__ == "__main__":
    main()
