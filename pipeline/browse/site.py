"""`numerical3d browse`: a static site of a built dataset that opens from file:// with no server.

Layout of SITE_DIR:

    index.html              counts, filters (subtask, source, split), pages of thumbnails
    warnings.html           the items whose answer disagrees with the recorded geometry, or looks odd
    index/meta.js           counts and the index's groups (one per subtask x source x split)
    index/<g>-<c>.js        the rows of group g, in chunks of `chunk` items, loaded per page
    items/<id[:2]>/<id>.html  one page per item: question, answer, verifier, provenance, frames with
                            the referenced objects drawn in, the top-down map with the measured geometry
    maps/<source>/<scene>.svg   each scene's floor and footprints (shared by its items' maps)
    frames/<source>/<scene>/<index>.jpg   the embedded frames, copied byte for byte
    thumbs/<id[:2]>/<id>.jpg  per item thumbnail (the dataset's `preview` when it has one)
    assets/site.css, assets/index.js

Browsers refuse fetch() on file:// pages, so the index's data are JavaScript files that call
back into the page (`N3D.chunk(...)`), added as <script> elements when a page needs them. The
index only ever loads the chunks of the page shown, so it stays fast for 50k items; item pages
are plain HTML with inline SVG and are read only when opened. A dataset without scene records
(no `scenes` config: what `numerical3d assemble` writes from an items file) gets the same site
without maps and drawings.
"""

from __future__ import annotations

import json
import time
from collections import Counter, OrderedDict, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from numerical3d.errors import Numerical3DError
from numerical3d.pipeline.browse.evidence import evidence
from numerical3d.pipeline.browse.preview import Previewer
from numerical3d.pipeline.browse.raster import NO_PIXELS, encode_jpeg
from numerical3d.pipeline.browse.shapes import Evidence, MapView, map_extent, scene_map
from numerical3d.pipeline.browse.style import STYLES, role_css
from numerical3d.pipeline.browse.svg import shapes_svg, svg_document
from numerical3d.pipeline.config import PreviewOptions
from numerical3d.dataset import DatasetError, DatasetFolder
from numerical3d.pipeline.scene_geometry import read_scenes
from numerical3d.dataset.outputs import OwnedFolder, claim_folder
from numerical3d.pipeline.ingest import CORPORA
from numerical3d.pipeline.items import Item, parse_frame_id
from numerical3d.pipeline.shards import item_from_row
from numerical3d.pipeline.templating import question_of
from numerical3d.sources.ids import id_to_name

TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "site"
MAP_PX = 560  # longest side of an item's map, in CSS pixels
THUMB = (256, 128)  # thumbnail composite (frame | map), pixels
THUMB_QUALITY = 80
FRAME_CACHE = 256  # decoded frames kept for thumbnails
NO_RECORDS = "nothing recomputed: the dataset has no scene records (boxes, floor, cameras)"
CORPUS_ITEM = "nothing recomputed: a question of an ingested corpus, checked against the corpus's own answer"


class BrowseError(ValueError, Numerical3DError):
    """The folder is not a dataset the site can be built from (names the folder and what is missing)."""


@dataclass
class SiteReport:
    """What was written and how long each stage took."""

    out: str
    items: int = 0
    scenes: int = 0
    frames: int = 0
    with_warnings: int = 0
    scene_records: bool = True  # False: the dataset has no scenes config, so no maps and no drawings
    subtasks: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def frame_path(source: str, scene_id: str, index: int) -> str:
    """Site-relative path of a frame's JPEG."""
    return f"frames/{id_to_name(source)}/{id_to_name(scene_id)}/{int(index)}.jpg"


def item_path(item_id: str) -> str:
    return f"items/{id_to_name(item_id[:2])}/{id_to_name(item_id)}.html"


def thumb_path(item_id: str) -> str:
    return f"thumbs/{id_to_name(item_id[:2])}/{id_to_name(item_id)}.jpg"


def map_path(source: str, scene_id: str) -> str:
    return f"maps/{id_to_name(source)}/{id_to_name(scene_id)}.svg"


# --------------------------------------------------------------------------------------------
# Reading the dataset


def _open_dataset(root: Path) -> tuple[DatasetFolder, bool]:
    """The dataset folder, and whether it has the scene records the maps and drawings need. A
    folder without a `scenes` config (`numerical3d assemble` writes items, not scenes) is browsed
    without them; one whose card declares scenes that are missing is refused."""
    try:
        folder = DatasetFolder(root)
        folder.files("default")
        if "scenes" not in folder.configs:
            return folder, False
        folder.files("scenes")
    except DatasetError as exc:
        raise BrowseError(str(exc)) from None
    return folder, True


# --------------------------------------------------------------------------------------------
# Writing


class _FramePixels:
    """Frame id -> RGB pixels decoded from the site's copy, a bounded number kept."""

    def __init__(self, out: Path, available: dict[str, str]):
        self.out = out
        self.available = available
        self.cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def __call__(self, fid: str) -> np.ndarray | None:
        if fid not in self.available:
            return None
        if fid in self.cache:
            self.cache.move_to_end(fid)
            return self.cache[fid]
        path = self.out / self.available[fid]
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if bgr is None:
            raise BrowseError(f"{path}: cannot decode the frame copied from the dataset")
        rgb = bgr[:, :, ::-1]
        self.cache[fid] = rgb
        if len(self.cache) > FRAME_CACHE:
            self.cache.popitem(last=False)
        return rgb


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), undefined=StrictUndefined, autoescape=True,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["pretty"] = lambda x: json.dumps(x, indent=2, sort_keys=True, ensure_ascii=False)
    return env


def _write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")


def _copy_frames(folder: DatasetFolder, out: OwnedFolder) -> tuple[dict[str, str], dict[str, tuple[int, int]]]:
    """Copy every embedded frame's JPEG into the site; returns {id: site path} of the frames with
    pixels, and {id: (width, height)} of every frame. The frames config names a frame by its published
    id only."""
    available: dict[str, str] = {}
    sizes: dict[str, tuple[int, int]] = {}
    rows = folder.rows("frames", columns=["frame_id", "image", "width", "height"]) if "frames" in folder.configs else iter(())
    for _, row in rows:
        sizes[row["frame_id"]] = (int(row["width"] or 0), int(row["height"] or 0))
        image = row.get("image")
        if image and image.get("bytes"):
            try:
                path = frame_path(*parse_frame_id(row["frame_id"]))
            except ValueError as exc:
                raise BrowseError(f"{folder.root}: frames config: {exc}") from None
            _write(out.path(path), image["bytes"])
            available[row["frame_id"]] = path
    return available, sizes


def _bare_views(item: Item, available: dict[str, str], sizes: dict[str, tuple[int, int]], depth: int) -> list[dict[str, Any]]:
    """An item's frames as published, with nothing drawn (a dataset without scene records)."""
    views = []
    for fid, index in zip(item.frames, item.frame_indices):
        w, h = sizes.get(fid, (0, 0))
        if w > 0 and h > 0:
            views.append({"id": fid, "src": "../" * depth + available[fid] if fid in available else None, "width": w,
                          "height": h, "svg": "", "caption": f"frame {index}", "key": False})
    return views


def _bare_thumb(item: Item, pixels: _FramePixels) -> bytes:
    """A thumbnail without scene records: the item's first frame with pixels, or a grey card."""
    w, h = THUMB
    img = np.full((h, w, 3), NO_PIXELS, np.uint8)
    rgb = next((p for p in map(pixels, item.frames) if p is not None), None)
    if rgb is not None:
        s = min(w / rgb.shape[1], h / rgb.shape[0])
        fw, fh = max(1, int(round(rgb.shape[1] * s))), max(1, int(round(rgb.shape[0] * s)))
        x0, y0 = (w - fw) // 2, (h - fh) // 2
        img[y0:y0 + fh, x0:x0 + fw] = cv2.resize(np.ascontiguousarray(rgb), (fw, fh), interpolation=cv2.INTER_AREA)[:, :, ::-1]
    else:
        cv2.putText(img, "no scene record", (w // 2 - 58, h // 2 + 4), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (90, 90, 90), 1,
                    cv2.LINE_AA)
    return encode_jpeg(img, THUMB_QUALITY)


def _frame_views(ev: Evidence, available: dict[str, str], depth: int) -> list[dict[str, Any]]:
    up = "../" * depth
    views = []
    for k, view in enumerate(ev.frames):
        cam = view.camera
        if cam is None:
            continue
        font = max(12.0, cam.width / 32.0)
        svg = shapes_svg(view.shapes, lambda pts: pts, font=font, marker=cam.width / 110.0, bounds=(cam.width, cam.height))
        views.append({
            "id": view.frame_id,
            "src": up + available[view.frame_id] if view.frame_id in available else None,
            "width": cam.width,
            "height": cam.height,
            "svg": Markup(svg),
            "caption": f"frame {view.index} · t = {cam.timestamp:.2f} s",
            "key": k == ev.key_frame,
        })
    return views


def _map_svg(ev: Evidence, scene: dict[str, Any]) -> str:
    """The item's drawing over its scene's map, with every object named: the item's own labels first,
    then the names of the objects it does not label, none overlapping another."""
    own = {sh.points[0] for sh in ev.map if sh.kind == "text"}
    names = [sh for sh in scene["names"] if sh.points[0] not in own]
    return shapes_svg(ev.map, scene["view"], font=12.0, marker=4.0, bounds=(scene["width"], scene["height"]),
                      base=names, base_font=11.0)


SITE_FILES = ("index.html", "warnings.html", "index/meta.js", "assets/site.css", "assets/index.js")


def build_site(dataset: str | Path, out: str | Path, *, page_size: int = 50, chunk: int = 100,
               force: bool = False) -> SiteReport:
    """Write the static site of a dataset folder (see the module doc); returns what was written.

    The site folder is guarded as a build's output is (`dataset.outputs`): never the dataset nor
    inside it, a folder of someone else's files refused without `force` (and kept with it), and a
    rebuild removes only what the previous site wrote."""
    root = Path(dataset)
    owned = claim_folder(out, "browse", inputs=[root], force=force, writes=SITE_FILES)
    out = owned.root
    folder, geometry = _open_dataset(root)
    if page_size < 1 or chunk < 1:
        raise BrowseError(f"page size and chunk size must be >= 1, got {page_size} and {chunk}")
    report = SiteReport(out=str(out))
    t0 = time.perf_counter()
    owned.begin()
    env = _environment()

    scenes = read_scenes(folder) if geometry else {}
    available, sizes = _copy_frames(folder, owned)
    report.frames, report.scenes, report.scene_records = len(sizes), len(scenes), geometry
    report.seconds["read_scenes_and_frames"] = round(time.perf_counter() - t0, 3)

    # Pass 1: the index rows, grouped by subtask x source x split in dataset order.
    t1 = time.perf_counter()
    groups, order, sequence = _index_rows(folder)
    position = {iid: k for k, iid in enumerate(sequence)}
    report.items = len(sequence)
    report.seconds["index_pass"] = round(time.perf_counter() - t1, 3)

    # Pass 2: item pages and thumbnails.
    t2 = time.perf_counter()
    maps = _write_maps(scenes, owned)
    pixels = _FramePixels(out, available)
    thumbs = Previewer(PreviewOptions(enabled=True, width=THUMB[0], height=THUMB[1], jpeg_quality=THUMB_QUALITY),
                       scenes, pixels)
    page = env.get_template("item.html.j2")
    warned: list[dict[str, Any]] = []
    subtasks: Counter[str] = Counter()
    warn_count: Counter[str] = Counter()
    for split, row in folder.rows("default"):
        item = item_from_row(row)
        subtasks[item.subtask] += 1
        k = position[item.id]
        common = dict(item=item, split=split, up="../../", verifier=item.verifier, provenance=item.provenance,
                      pixels_published=bool(available),
                      prev=("../../" + item_path(sequence[k - 1])) if k > 0 else None,
                      next=("../../" + item_path(sequence[k + 1])) if k + 1 < len(sequence) else None)
        if not geometry or item.source in CORPORA:  # a corpus's scenes are its own videos or images
            _write_bare_item(owned, page, item, row, pixels, available, sizes, common)
            continue
        geo = scenes.get((item.source, item.scene_id))
        if geo is None:
            raise BrowseError(f"{root}: item {item.id} names scene {item.source}/{item.scene_id}, "
                              "which has no record in scenes/")
        ev = evidence(item, geo)
        if ev.warnings:
            warn_count[item.subtask] += 1
            warned.append({"id": item.id, "href": item_path(item.id), "subtask": item.subtask,
                           "scene": f"{item.source}/{item.scene_id}", "warnings": ev.warnings})
        _write(owned.path(thumb_path(item.id)), row["preview"]["bytes"] if row.get("preview") else thumbs(item, ev))
        m = maps[(item.source, item.scene_id)]
        _write(owned.path(item_path(item.id)), page.render(
            ev=ev, frames=_frame_views(ev, available, 2),
            map={"src": "../../" + map_path(item.source, item.scene_id), "width": m["width"], "height": m["height"],
                 "svg": Markup(_map_svg(ev, m))},
            legend=[(role, text, STYLES[role].stroke) for role, text in ev.legend.items()], **common))
    report.with_warnings = len(warned)
    report.subtasks = dict(sorted(subtasks.items()))
    report.seconds["item_pages"] = round(time.perf_counter() - t2, 3)

    # The index: counts, groups and chunks, the pages, the assets.
    t3 = time.perf_counter()
    _write_index(owned, env, folder.info.name or root.name, groups, order, page_size, chunk,
                 scenes=len(scenes), report=report, available=bool(available), warned=warned,
                 warn_count=warn_count, subtasks=subtasks, geometry=geometry)
    report.seconds["index"] = round(time.perf_counter() - t3, 3)
    owned.finish()
    report.seconds["total"] = round(time.perf_counter() - t0, 3)
    return report


def _index_rows(folder: DatasetFolder) -> tuple[dict[tuple[str, str, str], list[list[Any]]], list[tuple[str, str, str]], list[str]]:
    """The index rows grouped by subtask x source x split in dataset order, the groups' order and
    the item ids in that order (an item page's previous and next)."""
    groups: dict[tuple[str, str, str], list[list[Any]]] = defaultdict(list)
    for split, row in folder.rows("default", columns=["id", "source", "scene_id", "subtask", "question", "answer"]):
        groups[(row["subtask"], row["source"], split)].append(
            [row["id"], item_path(row["id"]), thumb_path(row["id"]), question_of(row["question"])[:240],
             row["answer"], row["scene_id"]])
    order = sorted(groups)
    sequence = [r[0] for key in order for r in groups[key]]
    return groups, order, sequence


def _write_maps(scenes: dict, owned: OwnedFolder) -> dict[tuple[str, str], dict[str, Any]]:
    """Each scene's top-down map (shapes without their names: an item's page places the names)."""
    maps: dict[tuple[str, str], dict[str, Any]] = {}
    for key, geo in sorted(scenes.items()):
        view = MapView(map_extent(geo), MAP_PX)
        w, h = view.size
        shapes = scene_map(geo)  # the names go on each item's page, placed around what the item draws
        body = shapes_svg([sh for sh in shapes if sh.kind != "text"], view, font=11.0, marker=3.0)
        _write(owned.path(map_path(*key)), svg_document(w, h, body))
        maps[key] = {"view": view, "width": w, "height": h, "names": [sh for sh in shapes if sh.kind == "text"]}
    return maps


def _write_index(owned: OwnedFolder, env: Environment, name: str, groups: dict[tuple[str, str, str], list[list[Any]]],
                 order: list[tuple[str, str, str]], page_size: int, chunk: int, *, scenes: int, report: SiteReport,
                 available: bool, warned: list[dict[str, Any]], warn_count: Counter, subtasks: Counter,
                 geometry: bool) -> None:
    """The index: counts, groups and chunks, the pages, the assets."""
    meta_groups = []
    for g, key in enumerate(order):
        rows = groups[key]
        for c in range(0, len(rows), chunk):
            _write(owned.path(f"index/{g}-{c // chunk}.js"),
                   f"N3D.chunk({json.dumps(f'{g}-{c // chunk}')},{json.dumps(rows[c:c + chunk], ensure_ascii=False)});\n")
        meta_groups.append([*key, len(rows)])
    counts = {
        "subtasks": dict(sorted(subtasks.items())),
        "sources": dict(sorted(Counter(k[1] for k in order for _ in groups[k]).items())),
        "splits": dict(sorted(Counter(k[2] for k in order for _ in groups[k]).items())),
    }
    total = sum(len(rows) for rows in groups.values())
    meta = {"name": name, "total": total, "page_size": page_size, "chunk": chunk,
            "groups": meta_groups, **counts}
    _write(owned.path("index/meta.js"), f"N3D.meta={json.dumps(meta, ensure_ascii=False, sort_keys=True)};\n")
    common = {"name": meta["name"], "total": total, "scenes": scenes, "frames": report.frames,
              "pixels_published": available, "warn_count": dict(warn_count), "scene_records": geometry, **counts}
    _write(owned.path("index.html"), env.get_template("index.html.j2").render(**common))
    _write(owned.path("warnings.html"), env.get_template("warnings.html.j2").render(warned=warned, **common))
    _write(owned.path("assets/site.css"), env.get_template("site.css.j2").render(roles=Markup(role_css())))
    _write(owned.path("assets/index.js"), env.get_template("index.js.j2").render())


def _write_bare_item(owned: OwnedFolder, page: Any, item: Item, row: dict[str, Any], pixels: _FramePixels,
                     available: dict[str, str], sizes: dict[str, tuple[int, int]], common: dict[str, Any]) -> None:
    """The page and thumbnail of an item with no scene record to draw (a corpus item, or a dataset
    built without the `scenes` config): its frames and a note saying why there is no map."""
    _write(owned.path(thumb_path(item.id)), row["preview"]["bytes"] if row.get("preview") else _bare_thumb(item, pixels))
    note = CORPUS_ITEM if item.source in CORPORA else NO_RECORDS
    _write(owned.path(item_path(item.id)), page.render(ev=Evidence([], [], [note], [], None), map=None, legend=[],
                                                       frames=_bare_views(item, available, sizes, 2), **common))
