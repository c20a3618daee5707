"""One palette for every drawing: the site's SVG and the previews' raster share these colours."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Style:
    stroke: str  # "#rrggbb"
    fill: str
    fill_opacity: float


STYLES: dict[str, Style] = {
    "floor": Style("#9c8f78", "#f4efe4", 1.0),
    "object": Style("#8d939b", "#dfe3e8", 0.9),
    "structure": Style("#b3b3b3", "#d4d4d4", 0.6),
    "a": Style("#d62728", "#d62728", 0.35),  # first object of a question (standing, start, reference)
    "b": Style("#1f77b4", "#1f77b4", 0.35),  # second (facing, goal, the answer)
    "c": Style("#2ca02c", "#2ca02c", 0.35),  # third (target, facing object of a route)
    "other": Style("#ff7f0e", "#ff7f0e", 0.25),  # the rest (candidates, sectors)
    "measure": Style("#9c27b0", "#9c27b0", 0.18),  # what the answer measures
    "camera": Style("#00a0b4", "#00c8e0", 0.18),
    "path": Style("#a0522d", "#a0522d", 0.0),
    "turn": Style("#111111", "#ffffff", 1.0),
    "rect": Style("#ffd400", "#ffd400", 0.0),  # 2D boxes on frames
}


def bgr(hex_colour: str) -> tuple[int, int, int]:
    """"#rrggbb" as OpenCV's (b, g, r)."""
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return b, g, r


def role_css() -> str:
    """CSS rules `.r-<role>` for SVG shapes (strokes, fills, and text with a white halo)."""
    lines = []
    for role, st in STYLES.items():
        lines.append(f".r-{role}{{stroke:{st.stroke};fill:none}}")
        lines.append(f".r-{role}.f{{fill:{st.fill};fill-opacity:{st.fill_opacity}}}")
        lines.append(f"text.r-{role}{{fill:{st.stroke};stroke:#fff;stroke-width:3px;paint-order:stroke;"
                     "stroke-opacity:.85;font-family:sans-serif}")
        lines.append(f".h.r-{role}{{fill:{st.stroke};stroke:none}}")
    lines.append(".leader{stroke:#555;stroke-width:.8px;fill:none}")  # from a moved label to what it names
    lines.append("path,polyline,polygon{vector-effect:non-scaling-stroke;stroke-linejoin:round;stroke-linecap:round}")
    return "\n".join(lines)
