"""Per-scene stage on a real-size `.sens` stream: is its cost independent of the stream's length?

One synthetic ScanNet-sized scene (40 objects, ~150k mesh vertices) is written twice in ScanNet's
raw layout with a `.sens` stream (1296x968 JPEG colour, 640x480 zlib depth, 50 s of camera walk):
once with 1,500 frames (30 fps) and once with every 5th of them (300 frames, 6 fps), so both show
the same scene over the same time. The per-scene stage (load, questions, frame export, geometry
record; what `pipeline.build.scenes.process_scene` runs) is timed on each, alternated over rounds,
wall and CPU per part; the two runs' items are compared.

From the medians it fits cost(n) = a + b * n CPU seconds per scene over the stream's frame count n and
estimates a full real build on a 16-core machine (the `REAL` table: scene counts and stream lengths
of ScanNet, ScanNet++ and ARKitScenes). The stage is measured on ScanNet's reader only: ScanNet++
decodes its colour from an H.264 video and ARKitScenes reads PNGs, so their per-frame read costs
differ; the estimate applies the fitted model to their stream lengths.

    python3 benchmarks/bench_stream.py                      # 3 alternated rounds
    python3 benchmarks/bench_stream.py --rounds 1 --profile # one round, then a profile of the long stream
    python3 benchmarks/bench_stream.py --streams DIR --markdown docs/performance.md

Writing the streams renders 1,500 frames (a few minutes on 2 cores); `--streams DIR` keeps them for
the next run. `--markdown` writes the results and the estimate into the file after its results marker.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import io
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

LONG, EVERY = 1500, 5  # frames of the long stream; the short one keeps every 5th
FPS = 30
COLOR_SIZE, DEPTH_SIZE = (1296, 968), (640, 480)  # ScanNet's colour and depth sizes
CORES = 16
MARKER = "<!-- bench_stream.py results -->"

# source: (scenes, mean frames per scene, where the numbers come from)
REAL = {
    "scannet": (1513, 1650, "ScanNet v2: 2.5M frames over 1,513 scans at 30 Hz"),
    "scannetpp": (460, 7200, "ScanNet++ v1: 460 scenes; iPhone video at 60 fps, assumed 2 min each"),
    "arkitscenes": (5047, 1000, "ARKitScenes: 5,047 captures; 10 Hz lowres frames, assumed 100 s each"),
}


def write_streams(root: Path, seed: int) -> dict[int, Path]:
    """The scene at both stream lengths: {frames: scans root}."""
    import cv2

    from numerical3d.sources.sens import SensRecord, SensWriter
    from numerical3d.sources.synthetic import DEPTH_SHIFT, generate_scene, write_scene
    from numerical3d.sources.synthetic_render import Renderer, intrinsics_for

    scene = generate_scene(0, seed, n_frames=LONG, width=DEPTH_SIZE[0], height=DEPTH_SIZE[1], n_objects=40,
                           target_vertices=150_000)
    roots = {LONG: root / "long", LONG // EVERY: root / "short"}
    for scans in roots.values():  # mesh, segments, aggregation, axis alignment; no exported frames
        d = write_scene(scans, dataclasses.replace(scene, poses=scene.poses[:1], invalid=[]))
        for sub in ("color", "depth", "pose", "intrinsic"):
            shutil.rmtree(d / sub)
        (d / f"{scene.scene_id}.truth.json").unlink()
    k_depth = intrinsics_for(*DEPTH_SIZE)
    k_color = intrinsics_for(*COLOR_SIZE)
    raw_from_aligned = np.linalg.inv(scene.axis_alignment)
    renderer = Renderer(scene.faces.render_set(), k_depth, *DEPTH_SIZE)
    writers = {n: SensWriter(r / "scans" / scene.scene_id / f"{scene.scene_id}.sens", n, intrinsic_color=k_color,
                             color_size=COLOR_SIZE, intrinsic_depth=k_depth, depth_size=DEPTH_SIZE,
                             depth_shift=DEPTH_SHIFT) for n, r in roots.items()}
    try:
        for i, pose in enumerate(scene.poses):
            view = renderer.render(pose)
            rgb = cv2.resize(view.rgb[:, :, ::-1], COLOR_SIZE, interpolation=cv2.INTER_LINEAR)
            ok, jpg = cv2.imencode(".jpg", rgb, [cv2.IMWRITE_JPEG_QUALITY, 90])
            depth = np.clip(np.rint(view.depth * DEPTH_SHIFT), 0, 65535).astype(np.uint16)
            raw_pose = raw_from_aligned @ pose if i not in scene.invalid else np.full((4, 4), -np.inf)
            rec = SensRecord(raw_pose, i * 1_000_000 // FPS, jpg.tobytes(), depth)
            writers[LONG].add(rec)
            if i % EVERY == 0:
                writers[LONG // EVERY].add(rec)
    finally:
        for w in writers.values():
            w.close()
    return {n: r / "scans" for n, r in roots.items()}


def stage(scans: Path, work: Path) -> tuple[dict[str, tuple[float, float]], list]:
    """The per-scene stage on the one scene under `scans`: {part: (wall s, CPU s)} and its items."""
    from numerical3d.pipeline.build.plan import resolve_plan
    from numerical3d.pipeline.build.scenes import generate_items, load_scene
    from numerical3d.pipeline.frames import export_frames
    from numerical3d.pipeline.questions.common import ProcessedScene
    from numerical3d.pipeline.scene_geometry import scene_geometry
    from numerical3d.sources import make_source

    settings = resolve_plan("demo", out=work / "out").scene
    source = make_source("scannet", frames="sens")
    ref = source.list_scenes(scans)[0]
    parts: dict[str, tuple[float, float]] = {}
    clock = (time.perf_counter(), time.process_time())

    def lap(name: str) -> None:
        nonlocal clock
        now = (time.perf_counter(), time.process_time())
        parts[name] = (now[0] - clock[0], now[1] - clock[1])
        clock = now

    start = clock
    scene = load_scene(source, ref)
    lap("load")
    facts = ProcessedScene(scene, settings.question_config.ignore_labels)
    items, _ = generate_items(facts, settings)
    lap("questions")
    indices = sorted({i for it in items for i in it.frame_indices})
    export_frames(scene, indices, work / "frames", settings.longest_side, settings.jpeg_quality)
    lap("frames")
    scene_geometry(scene, indices, facts.floor_or_none())
    lap("geometry")
    parts["total"] = (clock[0] - start[0], clock[1] - start[1])
    return parts, items


def compare(a: list, b: list) -> str:
    """How alike two streams' items are: counts per subtask, and the scene-level questions with their
    answers (frame-level items are about frames of the video, whose indices differ between the streams)."""
    from collections import Counter

    from numerical3d.pipeline.questions.registry import registry

    counts = Counter(it.subtask for it in a) == Counter(it.subtask for it in b)
    scene = [sorted((it.subtask, it.question, it.answer) for it in items if registry()[it.subtask].level == "scene")
             for items in (a, b)]
    same = sum((Counter(scene[0]) & Counter(scene[1])).values())
    return (f"items per subtask {'the same' if counts else 'different'}; {same} of {len(scene[0])} scene-level "
            "questions with the same answer")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--profile", action="store_true", help="profile the long stream's stage after the rounds")
    ap.add_argument("--streams", type=Path, help="keep the written streams here and reuse them on the next run")
    ap.add_argument("--markdown", type=Path, help="write the results (markdown) into this file, replacing "
                                                   "what follows its results marker")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_stream-"))
    try:
        t = time.perf_counter()
        streams = args.streams or tmp / "streams"
        roots = {LONG: streams / "long" / "scans", LONG // EVERY: streams / "short" / "scans"}
        if not all(r.is_dir() for r in roots.values()):
            roots = write_streams(streams, args.seed)
        sizes = {n: sum(p.stat().st_size for p in r.rglob("*.sens")) / 1e6 for n, r in roots.items()}
        print(f"streams written in {time.perf_counter() - t:.0f} s: "
              + ", ".join(f"{n} frames {sizes[n]:.0f} MB" for n in sorted(roots)), flush=True)
        runs: dict[int, list[dict[str, tuple[float, float]]]] = {n: [] for n in roots}
        items: dict[int, list] = {}
        for r in range(args.rounds):
            for n in sorted(roots):
                work = tmp / f"work-{n}-{r}"
                parts, items[n] = stage(roots[n], work)
                shutil.rmtree(work)
                runs[n].append(parts)
                print(f"round {r + 1} {n:>5} frames: " + "  ".join(
                    f"{k} {w:.2f}/{c:.2f}" for k, (w, c) in parts.items()) + "  (wall/CPU s)", flush=True)
        text = report(runs, items, sizes)
        if args.markdown:
            doc = args.markdown.read_text() if args.markdown.exists() else ""
            head = doc.split(MARKER)[0] if MARKER in doc else doc
            args.markdown.write_text(head + MARKER + "\n\n" + text + "\n")
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            stage(roots[LONG], tmp / "work-profile")
            prof.disable()
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(30)
            print(out.getvalue())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(runs: dict[int, list[dict[str, tuple[float, float]]]], items: dict[int, list],
           sizes: dict[int, float]) -> str:
    """The results and the full-build estimate as markdown (printed; `--markdown` writes it to a file)."""
    short, long = sorted(runs)
    med = {n: {k: (statistics.median(r[k][0] for r in runs[n]), statistics.median(r[k][1] for r in runs[n]))
               for k in runs[n][0]} for n in runs}
    wall = med[long]["total"][0] / med[short]["total"][0]
    cpu = med[long]["total"][1] / med[short]["total"][1]
    out = [f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `python3 benchmarks/bench_stream.py "
           f"--rounds {len(runs[short])}`, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end; "
           f"median of {len(runs[short])} alternated rounds.", "",
           f"| part | {short} frames wall / CPU s | {long} frames wall / CPU s |", "|---|---|---|"]
    out += [f"| {k} | {med[short][k][0]:.2f} / {med[short][k][1]:.2f} | {med[long][k][0]:.2f} / {med[long][k][1]:.2f} |"
            for k in med[short]]
    out += ["", f"{long} vs {short} frames: **{wall:.2f}x wall**, {cpu:.2f}x CPU (goal: at most 1.3x wall). "
            f"Items: {len(items[short])} and {len(items[long])}; {compare(items[short], items[long])}.", ""]
    # cost(n) = a + b n, CPU seconds per scene, through the two measured lengths
    b = (med[long]["total"][1] - med[short]["total"][1]) / (long - short)
    a = med[short]["total"][1] - b * short
    out += [f"Full real build, estimated: per-scene CPU = {a:.2f} s + {1000 * b:.3f} ms x frames (the line through "
            f"the two medians), summed over every scene at its source's mean stream length and spread over "
            f"{CORES} cores (thousands of scenes of seconds each keep every core busy; assembly not counted).", "",
            "| source | scenes | mean frames | CPU-h | numbers from |", "|---|---|---|---|---|"]
    total = 0.0
    for name, (scenes, frames, why) in REAL.items():
        cpu_s = scenes * (a + b * frames)
        total += cpu_s
        out.append(f"| {name} | {scenes:,} | {frames:,} | {cpu_s / 3600:.2f} | {why} |")
    hours = total / CORES / 3600
    scannet_tb = sizes[long] / long * REAL["scannet"][1] * REAL["scannet"][0] / 1e6
    out += ["", f"Total **{total / 3600:.1f} CPU-h, {hours:.2f} h wall on {CORES} cores**. Reading every byte of "
            f"every ScanNet stream (an upper bound: the stage reads the frame index and the examined frames) is "
            f"{scannet_tb:.2f} TB at this scene's bytes per frame, {scannet_tb * 1e6 / (hours * 3600):.0f} MB/s "
            f"over that wall time."]
    text = "\n".join(out)
    print("\n" + text)
    return text


if __name__ == "__main__":
    main()
