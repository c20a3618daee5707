"""Shapes drawn with OpenCV: the item's composite (key frame + top-down map) as one small image.

It is the dataset's optional `preview` column (what the Hub's viewer shows next to a question)
and the site's index thumbnails. Drawing is deterministic (fixed sizes, no fonts from the
system, OpenCV's Hershey font), so the same item gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable

import cv2
import numpy as np

from numerical3d.pipeline.browse.shapes import Evidence, MapView, Shape, map_extent, scene_map
from numerical3d.pipeline.browse.style import STYLES, bgr
from numerical3d.pipeline.browse.svg import arrow_head
from numerical3d.pipeline.scene_geometry import SceneGeometry

Transform = Callable[[list[tuple[float, float]]], list[tuple[float, float]]]
SHIFT = 4  # sub-pixel bits for OpenCV's drawing calls
BACKGROUND = (248, 248, 248)
NO_PIXELS = (200, 200, 200)


def _int(points: list[tuple[float, float]]) -> np.ndarray:
    return np.round(np.asarray(points, dtype=np.float64) * (1 << SHIFT)).astype(np.int32).reshape(-1, 1, 2)


def _text(img: np.ndarray, text: str, at: tuple[float, float], colour: tuple[int, int, int], scale: float,
          centred: bool = False) -> None:
    font = cv2.FONT_HERSHEY_SIMPLEX
    (w, _), _ = cv2.getTextSize(text, font, scale, 1)
    x, y = at
    org = (int(round(x - w / 2 if centred else x)), int(round(y)))
    cv2.putText(img, text, org, font, scale, (255, 255, 255), 3, cv2.LINE_AA)
    cv2.putText(img, text, org, font, scale, colour, 1, cv2.LINE_AA)


def draw(img: np.ndarray, shapes: list[Shape], tf: Transform, *, font_scale: float, marker: float,
         halo: bool = False) -> None:
    """Draw the shapes into `img` (BGR, in place)."""
    for sh in shapes:
        st = STYLES[sh.role]
        stroke = bgr(st.stroke)
        pts = tf(sh.points)
        width = max(1, int(round(sh.width * 0.75)))
        if sh.kind == "segments":
            pairs = [_int(pts[k:k + 2]) for k in range(0, len(pts) - 1, 2)]
            if halo:
                cv2.polylines(img, pairs, False, (255, 255, 255), width + 2, cv2.LINE_AA, SHIFT)
            cv2.polylines(img, pairs, False, stroke, width, cv2.LINE_AA, SHIFT)
        elif sh.kind in ("polygon", "polyline", "arrow"):
            closed = sh.kind == "polygon"
            if sh.fill and closed and st.fill_opacity > 0:
                layer = img.copy()
                cv2.fillPoly(layer, [_int(pts)], bgr(st.fill), cv2.LINE_AA, SHIFT)
                cv2.addWeighted(layer, st.fill_opacity, img, 1.0 - st.fill_opacity, 0.0, dst=img)
            if halo:
                cv2.polylines(img, [_int(pts)], closed, (255, 255, 255), width + 2, cv2.LINE_AA, SHIFT)
            cv2.polylines(img, [_int(pts)], closed, stroke, width, cv2.LINE_AA, SHIFT)
            if sh.kind == "arrow" and len(pts) == 2:
                head = arrow_head(pts[0], pts[1], marker * 3.0)
                if head is not None:
                    cv2.fillPoly(img, [_int(head)], stroke, cv2.LINE_AA, SHIFT)
            if sh.text and len(pts) >= 2:
                mx, my = np.mean(np.asarray(pts[:2]), axis=0)
                _text(img, sh.text, (mx, my - 3), stroke, font_scale, centred=True)
        elif sh.kind == "marker":
            (x, y), = pts
            cv2.circle(img, (int(round(x * (1 << SHIFT))), int(round(y * (1 << SHIFT)))), int(round(marker * (1 << SHIFT))),
                       stroke, -1, cv2.LINE_AA, SHIFT)
            if sh.text:
                _text(img, sh.text, (x + marker * 1.6, y - marker * 0.8), stroke, font_scale)
        elif sh.kind == "text":
            (x, y), = pts
            _text(img, sh.text, (x, y), stroke, font_scale, centred=True)


def _fit(src_w: float, src_h: float, box_w: int, box_h: int) -> tuple[float, float, float]:
    """Scale and offsets that fit a src_w x src_h picture centred in a box."""
    s = min(box_w / src_w, box_h / src_h)
    return s, (box_w - src_w * s) / 2.0, (box_h - src_h * s) / 2.0


def frame_panel(ev: Evidence, pixels: np.ndarray | None, width: int, height: int) -> np.ndarray:
    """The key frame (or a grey canvas of its shape when no pixels are published) with its drawings."""
    panel = np.full((height, width, 3), BACKGROUND, np.uint8)
    view = ev.frames[ev.key_frame]
    cam = view.camera
    s, ox, oy = _fit(cam.width, cam.height, width, height)
    w, h = max(1, int(round(cam.width * s))), max(1, int(round(cam.height * s)))
    x0, y0 = int(round(ox)), int(round(oy))
    if pixels is not None:
        rgb = cv2.resize(np.ascontiguousarray(pixels), (w, h), interpolation=cv2.INTER_AREA)
        panel[y0:y0 + h, x0:x0 + w] = rgb[:, :, ::-1]
    else:
        panel[y0:y0 + h, x0:x0 + w] = NO_PIXELS
        _text(panel, "pixels not published", (x0 + w / 2, y0 + h / 2), (90, 90, 90), 0.4, centred=True)
    sx, sy = w / cam.width, h / cam.height
    draw(panel, view.shapes, lambda pts: [(x0 + u * sx, y0 + v * sy) for u, v in pts],
         font_scale=0.35, marker=3.0, halo=True)
    return panel


class SceneCanvas:
    """One scene's map at one panel size: the floor and footprints drawn once, items drawn on copies."""

    def __init__(self, geo: SceneGeometry, width: int, height: int):
        self.geo = geo
        extent = map_extent(geo)
        s, ox, oy = _fit(extent[2] - extent[0], extent[3] - extent[1], width - 4, height - 4)
        view = MapView(extent, s * max(extent[2] - extent[0], extent[3] - extent[1]))
        self.tf: Transform = lambda pts: [(2 + ox + x, 2 + oy + y) for x, y in view(pts)]
        self.background = np.full((height, width, 3), BACKGROUND, np.uint8)
        draw(self.background, [sh for sh in scene_map(geo) if sh.kind != "text"], self.tf, font_scale=0.3, marker=2.5)

    def map_panel(self, ev: Evidence) -> np.ndarray:
        """Top-down map: floor and footprints, then the item's geometry."""
        panel = self.background.copy()
        draw(panel, ev.map, self.tf, font_scale=0.33, marker=3.0)
        return panel


def composite(ev: Evidence, canvas: SceneCanvas, pixels: np.ndarray | None, width: int, height: int) -> np.ndarray:
    """Key frame on the left and map on the right (`canvas` sized width - width // 2), or the map
    alone (`canvas` of the full size) for items without frames."""
    if ev.key_frame is None:
        return canvas.map_panel(ev)
    half = width // 2
    img = np.hstack([frame_panel(ev, pixels, half, height), canvas.map_panel(ev)])
    cv2.line(img, (half, 0), (half, height - 1), (255, 255, 255), 2)
    return img


def encode_jpeg(img: np.ndarray, quality: int) -> bytes:
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError("JPEG encoding of a preview failed")
    return buf.tobytes()
