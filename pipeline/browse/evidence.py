"""What to draw for an item: shapes on the scene's top-down map and on its frames, plus facts.

The geometry an answer measures is rebuilt here from the scene record (`pipeline.scene_geometry`)
and the item's provenance, with the project's own functions, so that a dataset downloaded from
the Hub can be looked at without its scans:

- closed-form facts of the recorded boxes and cameras are recomputed (the closest points of two
  boxes, the camera-to-box segment, camera coordinates, bearings, relation gaps); each is also
  compared with the value the generator recorded, and a disagreement is listed as a warning;
- what the generator searched for is read from provenance instead (the route's polyline, the
  2D box of the visible pixels, first-appearance times), since recomputing it would need the
  scans (depth maps) or a second copy of the search.

The result (`pipeline.browse.shapes.Evidence`) is backend-neutral: `pipeline.browse.svg` draws
it for the site and `pipeline.browse.raster` for previews.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from numerical3d.pipeline.items import Item
from numerical3d.pipeline.questions.registry import registry
from numerical3d.pipeline.browse.shapes import (BOX_EDGES, Evidence, FrameView, Role, Shape, camera_on_map, layered, map_extent,
                                    project_point, project_segments, to_camera, xy)
from numerical3d.pipeline.scene_geometry import FrameCamera, ObjectBox, SceneGeometry

TOLERANCE = 1e-4  # recorded values are rounded to 4 decimals in some provenance fields



# --------------------------------------------------------------------------------------------
# Per-subtask evidence


class _Builder:
    """Shared state while building one item's evidence."""

    def __init__(self, item: Item, geo: SceneGeometry):
        self.item = item
        self.geo = geo
        self.prov = item.provenance
        self.value = self.prov.get("value")
        self.rule = self.prov.get("rule") or {}
        self.map: list[Shape] = []
        self.floor_z = geo.floor.z if geo.floor is not None else None
        self.facts: list[str] = []
        self.warnings: list[str] = []
        self.legend: dict[str, str] = {}
        self.frames = [FrameView(fid, i, self._camera(i)) for fid, i in zip(item.frames, item.frame_indices)]
        self.focus: list[tuple[ObjectBox, Role, str]] = []  # objects drawn on the frames (and choosing the key frame)
        self.segments3d: list[tuple[np.ndarray, np.ndarray, str]] = []  # measured segments drawn on the frames

    def _camera(self, index: int) -> FrameCamera | None:
        try:
            return self.geo.frame(index)
        except KeyError:
            return None

    def objects(self) -> list[ObjectBox]:
        """The provenance's objects, from the scene record (a missing one is a warning)."""
        out = []
        for ref in self.prov.get("objects") or []:
            try:
                out.append(self.geo.object(int(ref["instance_id"])))
            except KeyError as exc:
                self.warnings.append(str(exc).strip("'\""))
        return out

    def highlight(self, obj: ObjectBox, role: Role, label: str | None = None) -> None:
        """Draw an object on the map and on every frame in the given role."""
        text = label or obj.label
        self.map.append(Shape("polygon", obj.footprint, role, fill=True, width=2.5))
        self.map.append(Shape("text", [xy(obj.box.center)], role, text=text))
        self.focus.append((obj, role, text))

    def check(self, what: str, got: float, recorded: Any, tol: float = TOLERANCE) -> None:
        try:
            rec = float(recorded)
        except (TypeError, ValueError):
            self.warnings.append(f"{what}: no recorded value to compare with (provenance value {recorded!r})")
            return
        if not abs(got - rec) <= tol * max(1.0, abs(rec)):
            self.warnings.append(f"{what}: recomputed {got:.4f} from the scene record, the item recorded {rec:.4f}")

    def finish(self) -> Evidence:
        """Project the focus boxes and measured segments into every frame (all edges of a frame at
        once) and pick the key frame: the one whose view holds the most focus objects' centres, then
        shows them largest (each counted up to a quarter of the image, so that a box enveloping the
        camera does not win), earliest on ties."""
        n = len(self.focus)
        corners = np.array([obj.corners for obj, _, _ in self.focus]).reshape(n, 8, 3)
        starts = np.vstack([corners[:, BOX_EDGES[:, 0]].reshape(-1, 3)] + [p[None] for p, _, _ in self.segments3d])
        ends = np.vstack([corners[:, BOX_EDGES[:, 1]].reshape(-1, 3)] + [q[None] for _, q, _ in self.segments3d])
        tops = [obj.box.center + np.array([0.0, 0.0, obj.box.extents[2] / 2.0]) for obj, _, _ in self.focus]
        best: tuple[int, float, int] | None = None
        for k, view in enumerate(self.frames):
            cam = view.camera
            if cam is None:
                self.warnings.append(f"frame {view.frame_id}: no camera in the scene record")
                continue
            uv, keep = project_segments(starts, ends, cam) if len(starts) else (np.zeros((0, 2, 2)), np.zeros(0, bool))
            shapes: list[Shape] = []
            area, centred = 0.0, 0
            for i, (obj, role, text) in enumerate(self.focus):
                edges = uv[i * 12:(i + 1) * 12][keep[i * 12:(i + 1) * 12]]
                if not len(edges):
                    continue
                lo = np.clip(edges.reshape(-1, 2).min(0), 0, [cam.width, cam.height])
                hi = np.clip(edges.reshape(-1, 2).max(0), 0, [cam.width, cam.height])
                if not (hi > lo).all():  # the box is out of the picture
                    continue
                shapes.append(Shape("segments", [(float(u), float(v)) for u, v in edges.reshape(-1, 2)], role))
                at = project_point(tops[i], cam)
                if at is None or not (0 <= at[0] < cam.width and 8 <= at[1] < cam.height):
                    at = (float(lo[0] + hi[0]) / 2.0, float(lo[1] + hi[1]) / 2.0)  # the label inside the picture
                if text:
                    shapes.append(Shape("text", [at], role, text=text))
                centre = project_point(obj.box.center, cam)
                if centre is None or not (0 <= centre[0] < cam.width and 0 <= centre[1] < cam.height):
                    continue
                centred += 1
                area += min(float(np.prod(np.maximum(hi - lo, 0.0))), cam.width * cam.height / 4.0)
            for j, (_, _, text) in enumerate(self.segments3d):
                if keep[n * 12 + j]:
                    (a, b), (c, d) = uv[n * 12 + j]
                    shapes.append(Shape("arrow", [(float(a), float(b)), (float(c), float(d))], "measure", text=text, width=2.5))
            view.shapes[:0] = shapes
            if best is None or (centred, area) > best[:2]:
                best = (centred, area, k)
        if not self.focus and not self.segments3d:  # nothing to show on a frame (room_size): the map says it all
            best = None
        return Evidence(layered(self.map), self.frames, self.facts, self.warnings, None if best is None else best[2],
                        self.legend)


def _single_frame(b: _Builder) -> tuple[FrameView, FrameCamera] | None:
    if len(b.frames) != 1 or b.frames[0].camera is None:
        b.warnings.append(f"expected one frame with a recorded camera, got {b.item.frames}")
        return None
    return b.frames[0], b.frames[0].camera


def _object_count(b: _Builder) -> None:
    objs = b.objects()
    for k, o in enumerate(objs, 1):
        b.highlight(o, "a", f"{o.label} {k}")
    label = objs[0].label if objs else "?"
    in_scene = sum(o.label == label for o in b.geo.objects)
    b.facts.append(f"{len(objs)} instances of '{label}' in provenance; {in_scene} in the scene record")
    b.legend["a"] = f"each '{label}' counted"
    b.check("instance count", float(in_scene), b.value, tol=0)


def _object_size(b: _Builder) -> None:
    objs = b.objects()
    if not objs:
        return
    o = objs[0]
    b.highlight(o, "a")
    box = o.box
    axis = int(np.argmax(box.extents))
    half = box.rotation[:, axis] * box.extents[axis] / 2.0
    p, q = box.center - half, box.center + half
    horizontal = abs(box.rotation[2, axis]) < 0.5
    if horizontal:
        b.map.append(Shape("arrow", [xy(p), xy(q)], "measure", text=f"{box.extents[axis] * 100:.1f} cm", width=2.5))
    b.facts.append(f"box sides {', '.join(f'{e * 100:.1f}' for e in box.extents)} cm; longest "
                   f"{box.extents[axis] * 100:.1f} cm ({'horizontal' if horizontal else 'vertical'})")
    b.legend.update(a="the object", measure="its longest side")
    b.check("longest side (cm)", float(box.extents[axis] * 100.0), b.value)
    b.segments3d.append((p, q, f"{box.extents[axis] * 100:.1f} cm"))


def _room_size(b: _Builder) -> None:
    floor = b.geo.floor
    if floor is None or len(floor.polygon) < 3:
        b.warnings.append("the scene record has no floor outline")
        return
    from shapely.geometry import Polygon

    poly = Polygon(floor.polygon)
    b.map.append(Shape("polygon", list(floor.polygon), "measure", fill=True, width=2.5))
    c = poly.representative_point()
    b.map.append(Shape("text", [(c.x, c.y)], "measure", text=f"{poly.area:.2f} m2"))
    b.facts.append(f"floor outline ({floor.method}): {len(floor.polygon)} vertices, area {poly.area:.2f} m2")
    b.legend["measure"] = "the floor outline whose area is the answer"
    if b.rule.get("name") == "floor_polygon_area":
        b.check("floor area (m2)", float(poly.area), b.value)


def _closest_segment(b: _Builder, a: ObjectBox, c: ObjectBox, role: Role = "measure", width: float = 2.5) -> float:
    from numerical3d.pipeline.geometry.closest import box_closest_points

    p, q, d = box_closest_points(a.box, c.box)
    b.map.append(Shape("arrow", [xy(p), xy(q)], role, text=f"{d:.2f} m", width=width))
    b.map.append(Shape("marker", [xy(p)], role))
    b.segments3d.append((p, q, f"{d:.2f} m"))
    return d


def _abs_distance(b: _Builder) -> None:
    objs = b.objects()
    if len(objs) != 2:
        b.warnings.append(f"expected two objects, got {len(objs)}")
        return
    b.highlight(objs[0], "a")
    b.highlight(objs[1], "b")
    d = _closest_segment(b, objs[0], objs[1])
    b.facts.append(f"closest points of the two boxes are {d:.4f} m apart (drawn in 3D and from above)")
    b.legend.update(a=objs[0].label, b=objs[1].label, measure="closest-point segment")
    b.check("box distance (m)", d, b.value)


def _frame_object(b: _Builder) -> tuple[FrameView, FrameCamera, ObjectBox] | None:
    """The one frame and object of a frame-level question: the object highlighted, and the camera
    with what it sees of the floor (to just beyond the object) on the map."""
    objs = b.objects()
    one = _single_frame(b)
    if not objs or one is None:
        return None
    view, cam = one
    o = objs[0]
    b.highlight(o, "a")
    b.map[:0] = camera_on_map(cam, b.floor_z, max(1.0, float(to_camera(o.box.center[None], cam)[0, 2]) + 0.5))
    b.legend.update(a=o.label, camera="camera of the frame and its view")
    return view, cam, o


def _camera_distance(b: _Builder) -> None:
    from numerical3d.pipeline.geometry.closest import closest_point_on_box

    found = _frame_object(b)
    if found is None:
        return
    _, cam, o = found
    centre = cam.T[:3, 3]
    q = closest_point_on_box(centre, o.box)
    d = float(np.linalg.norm(q - centre))
    b.map.append(Shape("arrow", [xy(centre), xy(q)], "measure", text=f"{d:.2f} m", width=2.5))
    b.segments3d.append((centre, q, f"{d:.2f} m"))
    b.facts.append(f"camera centre to the closest point of the box: {d:.4f} m")
    b.legend["measure"] = "camera-to-box segment"
    b.check("camera distance (m)", d, b.value)


def _grounding_3d(b: _Builder) -> None:
    found = _frame_object(b)
    if found is None:
        return
    view, cam, o = found
    centre = o.box.center
    xyz = to_camera(centre[None], cam)[0]
    b.map.append(Shape("marker", [xy(centre)], "measure", text="centre"))
    at = project_point(centre, cam)
    if at is not None:
        view.shapes.append(Shape("marker", [at], "measure", text=f"({xyz[0]:.2f}, {xyz[1]:.2f}, {xyz[2]:.2f}) m"))
    b.facts.append(f"box centre in camera axes (x right, y down, z forward): ({xyz[0]:.3f}, {xyz[1]:.3f}, {xyz[2]:.3f}) m")
    b.legend["measure"] = "the box centre"
    if isinstance(b.value, list) and len(b.value) == 3:
        for axis, got, rec in zip("xyz", xyz, b.value):
            b.check(f"camera {axis} (m)", float(got), rec)


def _grounding_2d(b: _Builder) -> None:
    found = _frame_object(b)
    if found is None:
        return
    view, cam, o = found
    bbox = b.rule.get("bbox2d")
    if isinstance(bbox, list) and len(bbox) == 4:
        x0, y0, x1, y1 = (float(v) for v in bbox)
        view.shapes.append(Shape("polygon", [(x0, y0), (x1, y0), (x1, y1), (x0, y1)], "rect", width=2.5))
        u, v = (x0 + x1) / 2.0, (y0 + y1) / 2.0
        view.shapes.append(Shape("marker", [(u, v)], "rect", text=f"({u / cam.width:.3f}, {v / cam.height:.3f})"))
        b.facts.append(f"visible pixels' 2D box [{x0:.0f}, {y0:.0f}, {x1:.0f}, {y1:.0f}] in a {cam.width}x{cam.height} "
                       f"frame; normalized centre ({u / cam.width:.4f}, {v / cam.height:.4f})")
        if isinstance(b.value, list) and len(b.value) == 2:
            b.check("normalized x", u / cam.width, b.value[0])
            b.check("normalized y", v / cam.height, b.value[1])
    else:
        b.warnings.append("provenance has no rule.bbox2d")
    b.legend.update(a=f"{o.label} (projected 3D box)", rect="2D box of its visible pixels and its centre")


def _rel_distance(b: _Builder) -> None:
    from numerical3d.pipeline.geometry import box_distance

    objs = b.objects()
    if not objs:
        return
    ref = objs[0]
    b.highlight(ref, "a")
    values = b.value if isinstance(b.value, dict) else {}
    best = min(values, key=values.get) if values else None
    for lab in sorted(values):
        instances = [o for o in b.geo.objects if o.label == lab]
        if not instances:
            b.warnings.append(f"candidate '{lab}' has no instance in the scene record")
            continue
        dists = [box_distance(ref.box, o.box) for o in instances]
        near = instances[int(np.argmin(dists))]
        for o in instances:
            b.highlight(o, "b" if lab == best else "other", lab)
        d = _closest_segment(b, ref, near, "measure" if lab == best else "other", 3.0 if lab == best else 1.5)
        b.facts.append(f"{lab}: {len(instances)} instance(s), closest {d:.4f} m{' (the answer)' if lab == best else ''}")
        b.check(f"distance to {lab} (m)", d, values[lab])
    b.legend.update(a=f"reference: {ref.label}", b=f"answer: {best}", other="other candidates",
                    measure="closest-point segment to the answer")
    if best is not None and _chosen(b.item) != best:
        b.warnings.append(f"the answer '{_chosen(b.item)}' is not the closest candidate '{best}'")


def _three(b: _Builder, names: tuple[str, str, str]) -> list[ObjectBox] | None:
    """The three objects of a direction or route question, highlighted and labelled by their part."""
    objs = b.objects()
    if len(objs) != 3:
        b.warnings.append(f"expected {', '.join(names)} objects, got {len(objs)}")
        return None
    for obj, role, name in zip(objs, ("a", "b", "c"), names):
        b.highlight(obj, role, f"{name}: {obj.label}")
    return objs


def _rel_direction(b: _Builder) -> None:
    from numerical3d.pipeline.questions.rel_direction import LEVELS, bearing, classify

    objs = _three(b, ("standing", "facing", "target"))
    if objs is None:
        return
    a, f, c = objs
    pa, pf, pc = a.box.center, f.box.center, c.box.center
    level = str(b.rule.get("level", ""))
    heading = np.arctan2(*(pf - pa)[:2][::-1])
    radius = max(float(np.linalg.norm((pf - pa)[:2])), float(np.linalg.norm((pc - pa)[:2]))) * 1.1
    for edge_deg in b.rule.get("edges_deg", []):  # sector edges (where the class changes) around the standing point
        ang = heading + np.radians(float(edge_deg))
        b.map.append(Shape("polyline", [xy(pa), xy(pa[:2] + radius * np.array([np.cos(ang), np.sin(ang)]))],
                           "other", width=1.0))
    x0, y0, x1, y1 = map_extent(b.geo, margin=0.0)
    sectors = LEVELS.get(level, [])
    if len(sectors) > 1 and sectors[-1][2] == sectors[0][2]:  # a class across 0 degrees is one sector
        sectors = [(sectors[-1][0] - 360.0, sectors[0][1], sectors[0][2])] + sectors[1:-1]
    for lo, hi, name in sectors:  # class names, kept inside the map
        mid = heading + np.radians((lo + hi) / 2.0)
        at = pa[:2] + 0.6 * radius * np.array([np.cos(mid), np.sin(mid)])
        b.map.append(Shape("text", [(float(np.clip(at[0], x0 + 0.3, x1 - 0.3)), float(np.clip(at[1], y0 + 0.15, y1 - 0.15)))],
                           "other", text=name))
    b.map.append(Shape("arrow", [xy(pa), xy(pf)], "b", text="facing", width=2.5))
    b.map.append(Shape("arrow", [xy(pa), xy(pc)], "c", width=2.5))
    angle = bearing(pa, pf, pc)
    cls = classify(angle, level) if level in LEVELS else "?"
    b.facts.append(f"bearing of the target from the facing direction: {angle:.1f} degrees "
                   f"(counter-clockwise = left); level {level}: {cls}")
    b.legend.update(a="standing", b="facing", c="target", other=f"{level} sectors")
    b.check("bearing (deg)", angle, b.value)
    answer = _chosen(b.item)
    if answer is not None and answer != cls:
        b.warnings.append(f"recomputed class {cls}, the answer is {answer}")
    if level in LEVELS:  # "standing at" a big object: does the class depend on where along its edge one stands?
        seen = sorted({classify(bearing(np.array([*xy, 0.0]), pf, pc), level) for xy in a.footprint})
        if seen != [cls]:
            b.warnings.append(f"standing at the corners of the {a.label}'s footprint gives {', '.join(seen)}: the answer "
                              f"({cls}, from its centre) depends on where by it one stands")


def _route_plan(b: _Builder) -> None:
    from numerical3d.pipeline.questions.route_plan import bends, classify_turn

    objs = _three(b, ("start", "goal", "facing"))
    if objs is None:
        return
    start, goal, facing = objs
    value = b.value if isinstance(b.value, dict) else {}
    line = np.asarray(value.get("polyline") or [], dtype=np.float64)
    if len(line) < 2:
        b.warnings.append("provenance has no route polyline")
        return
    b.map.append(Shape("arrow", [xy(line[0]), xy(facing.box.center)], "c", text="initial facing", width=1.5))
    for p, q in zip(line[:-1], line[1:]):
        b.map.append(Shape("arrow", [xy(p), xy(q)], "path", width=3.0))
    turns: list[str] = []
    # bends closer than the rule's min_leg along the walk are one turn (a shortest path rounds a corner in steps);
    # an item whose rule names no min_leg was read bend by bend
    for k, _, angle in bends(line, facing.box.center[:2] - line[0], float(b.rule.get("min_leg", 0.0))):
        turn, _ = classify_turn(angle, float(b.rule.get("min_turn_deg", 30.0)), float(b.rule.get("turn_margin_deg", 10.0)))
        if turn is not None:
            turns.append(turn)
            b.map.append(Shape("marker", [xy(line[k])], "turn", text=f"{len(turns)}. {turn} ({angle:+.0f})"))
    length = float(np.linalg.norm(np.diff(line, axis=0), axis=1).sum())
    b.facts.append(f"path of {len(line) - 1} straight legs, {length:.2f} m; turns: {', '.join(turns) or 'none'}")
    b.legend.update(a="start", b="goal", c="facing object", path="shortest path", turn="turns")
    if turns != list(value.get("turns", [])):
        b.warnings.append(f"turns recomputed from the polyline {turns} differ from the recorded {value.get('turns')}")
    if _chosen(b.item) != ", ".join(turns):
        b.warnings.append(f"the answer '{_chosen(b.item)}' is not the recomputed turns '{', '.join(turns)}'")
    shortest = float(b.rule.get("min_route_length", 1.0))
    if length < shortest:
        b.warnings.append(f"the walk is only {length:.2f} m (under {shortest:.2f} m): start and goal are next to each "
                          "other, so the first centimetres decide the turn")


def _position_relation(b: _Builder) -> None:
    from numerical3d.pipeline.geometry import box_distance
    from numerical3d.pipeline.questions.position_relation import relation_gaps
    from numerical3d.sources.scene import SceneObject

    objs = b.objects()
    one = _single_frame(b)
    if len(objs) != 2 or one is None:
        return
    _, cam = one
    a, c = objs
    b.highlight(a, "a", f"A: {a.label}")
    b.highlight(c, "b", f"B: {c.label}")
    b.map[:0] = camera_on_map(cam, b.floor_z, 2.5)
    d = box_distance(a.box, c.box)
    near = float(b.rule.get("near_threshold", 1.0))
    gaps = relation_gaps(SceneObject(a.instance_id, a.label, a.label, a.box),
                         SceneObject(c.instance_id, c.label, c.label, c.box), cam.T, d, near)
    held = [r for r, g in gaps.items() if g > 0]
    b.facts.append("gaps (m, positive = holds): " + ", ".join(f"{r} {g:+.3f}" for r, g in gaps.items()))
    b.facts.append(f"relations of A to B: {', '.join(held) or 'none'}")
    if "near" in gaps:
        _closest_segment(b, a, c, "measure", 1.5)
    b.legend.update(a="A", b="B", camera="camera of the frame and its view", measure="closest points (near)")
    recorded = b.value if isinstance(b.value, dict) else {}
    for r, g in gaps.items():
        if r in recorded:
            b.check(f"gap {r} (m)", float(g), recorded[r])


def _appearance_order(b: _Builder) -> None:
    objs = b.objects()
    times = b.value if isinstance(b.value, dict) else {}
    order = sorted(times, key=times.get)
    roles: list[Role] = ["a", "b", "c", "other"]
    for o in objs:
        rank = order.index(o.label) if o.label in order else 3
        b.highlight(o, roles[min(rank, 3)], f"{rank + 1}. {o.label}")
    for k, lab in enumerate(order):
        b.facts.append(f"{k + 1}. {lab}: first firmly visible at {times[lab]:.2f} s")
    b.legend.update({roles[min(k, 3)]: f"{k + 1}. {lab}" for k, lab in enumerate(order)})
    answer = _chosen(b.item)
    if isinstance(answer, str):
        answer = [s.strip() for s in answer.split(",")]
    if answer is not None and list(answer) != order:
        b.warnings.append(f"the answer's order {answer} differs from the recorded times' order {order}")


def _chosen(item: Item) -> Any:
    """The answer in the question's own terms: the chosen option's text for multiple choice."""
    spec = item.verifier
    if spec.get("kind") != "choice":
        return spec.get("answer")
    letter = str(spec.get("answer"))
    options = item.options or spec.get("options") or []
    k = ord(letter) - ord("A") if len(letter) == 1 else -1
    return options[k] if 0 <= k < len(options) else None


def _generic(b: _Builder) -> None:
    for o in b.objects():
        b.highlight(o, "a")
    b.legend["a"] = "objects named in provenance"


# The drawing of each bundled subtask, by name: the subtask registry cannot name functions of the site
# (a higher layer), so the site keeps its own. A subtask from another distribution brings its own
# as `Subtask.evidence`.
DRAWINGS: dict[str, Callable[[_Builder], None]] = {
    "object_count": _object_count,
    "object_size": _object_size,
    "room_size": _room_size,
    "abs_distance": _abs_distance,
    "camera_distance": _camera_distance,
    "grounding_3d": _grounding_3d,
    "grounding_2d": _grounding_2d,
    "rel_distance": _rel_distance,
    "rel_direction": _rel_direction,
    "appearance_order": _appearance_order,
    "route_plan": _route_plan,
    "position_relation": _position_relation,
}


def evidence(item: Item, geo: SceneGeometry) -> Evidence:
    """The drawings and facts of one item: its subtask's drawing (`DRAWINGS`, or the subtask's own
    `evidence`); a subtask without one, or unknown, highlights its objects."""
    b = _Builder(item, geo)
    sub = registry().get(item.subtask)
    draw = DRAWINGS.get(item.subtask) or (sub.evidence if sub is not None else None)
    (draw or _generic)(b)
    return b.finish()

