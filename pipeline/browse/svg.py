"""Shapes as SVG for the site: inline overlays (styled by the page's CSS) and standalone files."""

from __future__ import annotations

from collections.abc import Callable
from html import escape

import numpy as np

from numerical3d.pipeline.browse.labels import ASCENT, DESCENT, Box, Label, Placed, label_size, place_labels
from numerical3d.pipeline.browse.shapes import Shape
from numerical3d.pipeline.browse.style import role_css

Transform = Callable[[list[tuple[float, float]]], list[tuple[float, float]]]


def _pts(points: list[tuple[float, float]]) -> str:
    """Whole output pixels: finer positions change nothing visible and cost bytes on 50k pages."""
    return " ".join(f"{x:.0f},{y:.0f}" for x, y in points)


def arrow_head(p: tuple[float, float], q: tuple[float, float], size: float) -> list[tuple[float, float]] | None:
    """Triangle of an arrow head at q pointing from p (in output pixels); None for a zero-length arrow."""
    d = np.subtract(q, p)
    n = float(np.hypot(*d))
    if n < 1e-6:
        return None
    d /= n
    size = min(size, n * 0.6)
    perp = np.array([-d[1], d[0]])
    base = np.asarray(q) - d * size
    return [tuple(q), tuple(base + perp * size * 0.45), tuple(base - perp * size * 0.45)]


def _labels_svg(placed: list[Placed], cls: list[str], *, font_attr: bool) -> str:
    """Leader lines, then the texts on top of them."""
    out = [f'<path d="M{a[0]:.0f} {a[1]:.0f}L{b[0]:.0f} {b[1]:.0f}" class="leader"/>'
           for p in placed if p.leader is not None for a, b in [p.leader]]
    for p, c in zip(placed, cls):
        x, y = p.baseline
        size = f' font-size="{p.label.font:.0f}" text-anchor="middle"' if font_attr else ""
        out.append(f'<text x="{x:.0f}" y="{y:.0f}"{size} class="{c}">{escape(p.label.text)}</text>')
    return "".join(out)


def shapes_svg(shapes: list[Shape], tf: Transform, *, font: float, marker: float,
               bounds: tuple[float, float] | None = None, base: list[Shape] = (), base_font: float | None = None) -> str:
    """SVG elements for the shapes; `font` and `marker` in output units. (Over photographs the page
    gives the whole overlay a white halo with one CSS filter rather than a second copy of each line.)

    Labels (text shapes, and the texts of markers and arrows) are drawn last and placed so that none
    overlaps another or a marker, inside `bounds` (`pipeline.browse.labels`). `base` are text shapes
    of the background (the scene's object names, at `base_font`): placed after the shapes' own labels
    and written in a `<g class="base">` that the page keeps visible with the drawings hidden."""
    out: list[str] = []
    labels: list[Label] = []
    cls: list[str] = []
    dots: list[Box] = []
    lift = (ASCENT - DESCENT) * font / 2.0  # baseline -> middle of the text's box
    for sh in shapes:
        pts = tf(sh.points)
        cls_ = f"r-{sh.role}"
        if sh.kind == "segments":
            d = "".join(f"M{x0:.0f} {y0:.0f}L{x1:.0f} {y1:.0f}" for (x0, y0), (x1, y1) in zip(pts[::2], pts[1::2]))
            out.append(f'<path d="{d}" class="{cls_}" stroke-width="{sh.width:g}"/>')
        elif sh.kind in ("polygon", "polyline", "arrow"):
            tag = "polygon" if sh.kind == "polygon" else "polyline"
            fill = " f" if sh.fill else ""
            out.append(f'<{tag} points="{_pts(pts)}" class="{cls_}{fill}" stroke-width="{sh.width:g}"/>')
            if sh.kind == "arrow" and len(pts) == 2:
                head = arrow_head(pts[0], pts[1], marker * 3.0)
                if head is not None:
                    out.append(f'<polygon points="{_pts(head)}" class="h {cls_}"/>')
            if sh.text and len(pts) >= 2:
                mx, my = (float(v) for v in np.mean(np.asarray(pts[:2]), axis=0))
                labels.append(Label(sh.text, (mx, my), (mx, my - font * 0.4 - lift), font))
                cls.append(cls_)
        elif sh.kind == "marker":
            (x, y), = pts
            out.append(f'<circle cx="{x:.0f}" cy="{y:.0f}" r="{marker:.1f}" class="h {cls_}"/>')
            dots.append(Box(x - marker - 1.0, y - marker - 1.0, x + marker + 1.0, y + marker + 1.0))
            if sh.text:
                w, _ = label_size(sh.text, font)
                labels.append(Label(sh.text, (x, y), (x + marker + 1.0 + w / 2.0, y - marker * 0.8 - lift), font))
                cls.append(cls_)
        elif sh.kind == "text":
            (x, y), = pts
            labels.append(Label(sh.text, (x, y), (x, y), font))
            cls.append(cls_)
    bf = base_font or font
    base_labels = [Label(sh.text, p, p, bf) for sh in base for p in tf(sh.points)[:1] if sh.kind == "text"]
    placed = place_labels(labels + base_labels, bounds=bounds, obstacles=dots)
    out.append(_labels_svg(placed[:len(labels)], cls, font_attr=True))
    if base_labels:
        own = [f"r-{sh.role}" for sh in base if sh.kind == "text"]
        out.append(f'<g class="base" font-size="{bf:.0f}" text-anchor="middle">'
                   f'{_labels_svg(placed[len(labels):], own, font_attr=False)}</g>')
    return "".join(out)


def svg_document(width: float, height: float, body: str) -> str:
    """A standalone SVG file carrying its own styles (for <img> use, where page CSS does not reach)."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'width="{width:.0f}" height="{height:.0f}"><style>{role_css()}</style>{body}</svg>\n')
