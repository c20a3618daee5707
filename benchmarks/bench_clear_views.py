"""How many of a synthetic scene's objects some frame shows clearly enough for a person to name them.

The renderer is the truth here, not the pipeline's rule: an object has a clear view when one frame
shows its whole box inside the image (every corner, at least 0.3 m ahead), its box's shorter projected
side reaches the size a look at full-size frames asked for (`sources.naming`, px at 640x480; the table in
docs/questions.md, "What an item's frames show"), and at least `--unhidden` of the pixels it covers when
rendered alone are its own in the full render (the rest is behind something nearer), and, for a
category a person names only from before it (`sources.synthetic.FACED`), the camera stands before it (at
most about 75 degrees off the way it faces, in plan: a screen or a chair seen from behind is a panel).
`--no-fronts` drops that test, and `--walk-without-fronts` walks as generator 10 did, blind to fronts. An item can pass
an eye check only where each object it names has such a view, so the share bounds what a stricter
nameable rule can keep. Each object without one is counted by the furthest test it passed: never whole
in a frame, whole but small, or whole and big but hidden.

    python3 benchmarks/bench_clear_views.py [--seed 777] [--scenes 10] [--frames 48] [--no-fronts] [--walk-without-fronts]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from numerical3d.sources.naming import looked_at_side  # noqa: E402
from numerical3d.sources import synthetic  # noqa: E402
from numerical3d.sources.synthetic import FACED, generate_scene  # noqa: E402
from numerical3d.sources.synthetic_render import FACING_COS, FaceSet, Renderer  # noqa: E402

REASONS = ("never whole in a frame", "whole but small", "whole and big but hidden", "clear")
NEAR = 0.3  # m: a corner nearer than this is not in view


def _corners(box) -> np.ndarray:
    unit = np.array(list(itertools.product([-0.5, 0.5], repeat=3)))
    return (unit * box.extents) @ box.rotation.T + box.center


def before_it(obj, pose: np.ndarray) -> bool:
    """Whether the camera stands before an object of a faced category (always true for the others)."""
    if obj.label not in FACED:
        return True
    off = pose[:2, 3] - obj.center[:2]
    return float(np.dot(off, obj.rotation[:2, 1])) >= FACING_COS * float(np.linalg.norm(off))


def object_views(scene, unhidden: float, fronts: bool = True) -> list[tuple[str, str]]:
    """(label, reason) for every placed object of `scene` (REASONS' last: a clear view)."""
    faces = scene.faces.render_set()
    k, w, h = scene.intrinsics, scene.width, scene.height
    full = Renderer(faces, k, w, h)
    views = [full.render(pose).instance for pose in scene.poses]
    face_instance = faces.instance[faces.face]
    out = []
    for obj in scene.objects:
        corners = _corners(scene.boxes[obj.instance_id])
        alone, stage = None, 0
        for pose, instance in zip(scene.poses, views):
            cam = (corners - pose[:3, 3]) @ pose[:3, :3]
            if (cam[:, 2] < NEAR).any():
                continue
            uv = cam[:, :2] / cam[:, 2:3] * k[0, 0] + k[:2, 2]
            if uv.min() < 0 or (uv[:, 0] > w - 1).any() or (uv[:, 1] > h - 1).any():
                continue
            stage = max(stage, 1)
            side = float(min(uv.max(0) - uv.min(0))) * 640.0 / w
            if side < looked_at_side(obj.label) or (fronts and not before_it(obj, pose)):
                continue
            stage = max(stage, 2)
            seen = int((instance == obj.instance_id).sum())
            if not seen:
                continue
            if alone is None:
                own = face_instance == obj.instance_id
                alone = Renderer(FaceSet(faces.triangles[own], np.zeros(int(own.sum()), int), np.zeros((1, 3), np.uint8),
                                         np.array([obj.instance_id])), k, w, h)
            whole = int((alone.render(pose).instance == obj.instance_id).sum())
            if whole and seen / whole >= unhidden:
                stage = 3
                break
        out.append((obj.label, REASONS[stage]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=777)
    ap.add_argument("--scenes", type=int, default=10)
    ap.add_argument("--frames", type=int, default=48)
    ap.add_argument("--unhidden", type=float, default=0.7, help="share of its alone-render an object must show")
    ap.add_argument("--no-fronts", action="store_true", help="count views of faced categories from behind too")
    ap.add_argument("--walk-without-fronts", action="store_true", help="the walk of generator 10, blind to fronts")
    args = ap.parse_args()
    if args.walk_without_fronts:
        synthetic.FACED = frozenset()
    start = time.process_time()
    reasons: Counter[str] = Counter()
    per_label: dict[str, Counter[str]] = {}
    for index in range(args.scenes):
        scene = generate_scene(index, args.seed, n_frames=args.frames)
        for label, reason in object_views(scene, args.unhidden, fronts=not args.no_fronts):
            reasons[reason] += 1
            per_label.setdefault(label, Counter())[reason] += 1
    total = sum(reasons.values())
    print(f"seed {args.seed}, {args.scenes} scenes of {args.frames} frames: {reasons['clear']} of {total} objects "
          f"({reasons['clear'] / total:.0%}) have a clear view; {time.process_time() - start:.0f} CPU-s\n")
    print("| category | objects | clear | " + " | ".join(REASONS[:3]) + " |")
    print("|---|---:|---:|" + "---:|" * 3)
    for label, c in sorted(per_label.items(), key=lambda kv: -sum(kv[1].values())):
        print(f"| {label} | {sum(c.values())} | {c['clear']} | " + " | ".join(str(c[r]) for r in REASONS[:3]) + " |")
    print(f"| all | {total} | {reasons['clear']} | " + " | ".join(str(reasons[r]) for r in REASONS[:3]) + " |")


if __name__ == "__main__":
    main()
