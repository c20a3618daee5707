"""Shapes as SVG for the site: inline overlays (styled by the page's CSS) and standalone files."""

from __future__ import annotations

from collections.abc import Callable
from html import escape

import numpy as np

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


def shapes_svg(shapes: list[Shape], tf: Transform, *, font: float, marker: float) -> str:
    """SVG elements for the shapes; `font` and `marker` in output units. (Over photographs the page
    gives the whole overlay a white halo with one CSS filter rather than a second copy of each line.)"""
    out: list[str] = []
    for sh in shapes:
        pts = tf(sh.points)
        cls = f"r-{sh.role}"
        if sh.kind == "segments":
            d = "".join(f"M{x0:.0f} {y0:.0f}L{x1:.0f} {y1:.0f}" for (x0, y0), (x1, y1) in zip(pts[::2], pts[1::2]))
            out.append(f'<path d="{d}" class="{cls}" stroke-width="{sh.width:g}"/>')
        elif sh.kind in ("polygon", "polyline", "arrow"):
            tag = "polygon" if sh.kind == "polygon" else "polyline"
            fill = " f" if sh.fill else ""
            out.append(f'<{tag} points="{_pts(pts)}" class="{cls}{fill}" stroke-width="{sh.width:g}"/>')
            if sh.kind == "arrow" and len(pts) == 2:
                head = arrow_head(pts[0], pts[1], marker * 3.0)
                if head is not None:
                    out.append(f'<polygon points="{_pts(head)}" class="h {cls}"/>')
            if sh.text and len(pts) >= 2:
                mx, my = np.mean(np.asarray(pts[:2]), axis=0)
                out.append(f'<text x="{mx:.0f}" y="{my - font * 0.4:.0f}" font-size="{font:.0f}" class="{cls}" '
                           f'text-anchor="middle">{escape(sh.text)}</text>')
        elif sh.kind == "marker":
            (x, y), = pts
            out.append(f'<circle cx="{x:.0f}" cy="{y:.0f}" r="{marker:.1f}" class="h {cls}"/>')
            if sh.text:
                out.append(f'<text x="{x + marker * 1.6:.0f}" y="{y - marker * 0.8:.0f}" font-size="{font:.0f}" '
                           f'class="{cls}">{escape(sh.text)}</text>')
        elif sh.kind == "text":
            (x, y), = pts
            out.append(f'<text x="{x:.0f}" y="{y:.0f}" font-size="{font:.0f}" class="{cls}" '
                       f'text-anchor="middle">{escape(sh.text)}</text>')
    return "".join(out)


def svg_document(width: float, height: float, body: str) -> str:
    """A standalone SVG file carrying its own styles (for <img> use, where page CSS does not reach)."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'width="{width:.0f}" height="{height:.0f}"><style>{role_css()}</style>{body}</svg>\n')
