"""Where the site's labels go: no two overlap, none leaves its drawing, a moved one keeps a leader line.

Labels are placed greedily in priority order (an item's own labels before the scene's object
names): each takes its natural spot if free, else the first free spot around its anchor at
growing distances. A spot is free when its box overlaps no label placed before it and no marker
dot. The box of a text is estimated from DejaVu Sans's advance widths and line metrics (the widest
of the common sans-serif fonts, and the browsers' default on Debian), plus the white halo every
label carries, so the text on screen never overflows its box. Pure arithmetic: the same labels give
the same places, so the site stays byte for byte reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# DejaVu Sans advance widths of ASCII 32..126, in thousandths of an em; anything else counts 1 em.
_WIDTHS = (
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337, 636, 636, 636, 636, 636, 636,
    636, 636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698, 770, 632, 575, 775, 752, 295, 295, 656,
    557, 863, 748, 787, 603, 787, 695, 635, 611, 732, 684, 989, 685, 611, 685, 390, 337, 390, 838, 500, 500, 613,
    635, 550, 635, 615, 352, 635, 634, 278, 278, 579, 278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818,
    592, 592, 525, 636, 337, 636, 838,
)
ASCENT, DESCENT = 0.93, 0.24  # em above and below the baseline (DejaVu Sans: 1901 and 483 of 2048)
HALO = 1.5  # px of white stroke around every glyph (the CSS stroke-width 3px, half outside)
GAP = 1.0  # px between two labels' halos
RINGS = 10  # distances tried around an anchor before giving up on a free spot
# Directions tried at each distance: above, below, right, left, then the diagonals and half-diagonals.
DIRECTIONS = ((0.0, -1.0), (0.0, 1.0), (1.0, 0.0), (-1.0, 0.0), (1.0, -1.0), (-1.0, -1.0), (1.0, 1.0), (-1.0, 1.0),
              (0.5, -1.0), (-0.5, -1.0), (0.5, 1.0), (-0.5, 1.0))


def text_width(text: str, font: float) -> float:
    """Advance width of `text` at `font` px (no halo)."""
    return font * sum(_WIDTHS[ord(c) - 32] if 32 <= ord(c) < 127 else 1000 for c in text) / 1000.0


@dataclass(frozen=True)
class Box:
    x0: float
    y0: float
    x1: float
    y1: float

    def overlaps(self, other: Box) -> bool:
        return self.x0 < other.x1 and other.x0 < self.x1 and self.y0 < other.y1 and other.y0 < self.y1

    def nearest(self, x: float, y: float) -> tuple[float, float]:
        """The point of the box closest to (x, y)."""
        return min(max(x, self.x0), self.x1), min(max(y, self.y0), self.y1)


@dataclass(frozen=True)
class Label:
    """A text to place: what it names (`anchor`) and where it sits when nothing is in the way
    (`centre`, the middle of its box), both in output pixels."""

    text: str
    anchor: tuple[float, float]
    centre: tuple[float, float]
    font: float


@dataclass(frozen=True)
class Placed:
    label: Label
    centre: tuple[float, float]
    box: Box  # the text with its halo and gap
    leader: tuple[tuple[float, float], tuple[float, float]] | None  # anchor -> box edge, when the label moved

    @property
    def baseline(self) -> tuple[float, float]:
        """Where an SVG <text text-anchor="middle"> goes so that its box is centred on `centre`."""
        f = self.label.font
        return self.centre[0], self.centre[1] + (ASCENT - DESCENT) * f / 2.0


def label_size(text: str, font: float) -> tuple[float, float]:
    """Width and height of a label's box: the text, its halo and the gap to the next label."""
    pad = 2.0 * (HALO + GAP / 2.0)
    return text_width(text, font) + pad, (ASCENT + DESCENT) * font + pad


def _box(cx: float, cy: float, w: float, h: float) -> Box:
    return Box(cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0)


def _spots(label: Label, w: float, h: float, step: float) -> np.ndarray:
    """Candidate centres (n, 2): the natural one, then around the anchor at growing distances."""
    d = step * (0.5 + np.arange(RINGS, dtype=np.float64))[:, None]
    u = np.asarray(DIRECTIONS)
    around = np.stack([label.anchor[0] + u[None, :, 0] * (w / 2.0 + d), label.anchor[1] + u[None, :, 1] * (h / 2.0 + d)], -1)
    return np.vstack([np.asarray([label.centre], dtype=np.float64), around.reshape(-1, 2)])


def _inside(centres: np.ndarray, w: float, h: float, bounds: tuple[float, float] | None) -> np.ndarray:
    """The centres moved just enough for the box to lie in the drawing (when it fits at all)."""
    if bounds is None:
        return centres
    out = centres.copy()
    bw, bh = bounds
    if w <= bw:
        out[:, 0] = np.clip(out[:, 0], w / 2.0, bw - w / 2.0)
    if h <= bh:
        out[:, 1] = np.clip(out[:, 1], h / 2.0, bh - h / 2.0)
    return out


def _inside_point(cx: float, cy: float, w: float, h: float, bounds: tuple[float, float] | None) -> tuple[float, float]:
    """`_inside` for one centre, without numpy's per-call cost (most labels are placed at once)."""
    if bounds is not None:
        bw, bh = bounds
        if w <= bw:
            cx = min(max(cx, w / 2.0), bw - w / 2.0)
        if h <= bh:
            cy = min(max(cy, h / 2.0), bh - h / 2.0)
    return float(cx), float(cy)


def place_labels(labels: list[Label], *, bounds: tuple[float, float] | None = None,
                 obstacles: list[Box] = ()) -> list[Placed]:
    """Place `labels` in order (earlier ones have priority); see the module doc. A label with no free
    spot takes the least crowded one tried."""
    placed: list[Placed] = []
    boxes = list(obstacles)
    for label in labels:
        w, h = label_size(label.text, label.font)
        cx, cy = _inside_point(*label.centre, w, h, bounds)
        box = _box(cx, cy, w, h)
        if any(box.overlaps(b) for b in boxes):  # taken: search around the anchor, all spots at once
            centres = _inside(_spots(label, w, h, (ASCENT + DESCENT) * label.font * 0.75), w, h, bounds)
            taken = np.asarray([(b.x0, b.y0, b.x1, b.y1) for b in boxes], dtype=np.float64)
            lo, hi = centres - (w / 2.0, h / 2.0), centres + (w / 2.0, h / 2.0)
            ox = np.minimum(hi[:, None, 0], taken[None, :, 2]) - np.maximum(lo[:, None, 0], taken[None, :, 0])
            oy = np.minimum(hi[:, None, 1], taken[None, :, 3]) - np.maximum(lo[:, None, 1], taken[None, :, 1])
            crowd = (np.clip(ox, 0.0, None) * np.clip(oy, 0.0, None)).sum(axis=1)  # area under earlier labels
            free = np.flatnonzero(crowd == 0.0)
            k = int(free[0]) if len(free) else int(np.argmin(crowd))  # the first free spot, else the least crowded
            cx, cy = float(centres[k, 0]), float(centres[k, 1])
            box = _box(cx, cy, w, h)
        leader = None
        if (cx, cy) != label.centre:
            tip = box.nearest(*label.anchor)
            if abs(tip[0] - label.anchor[0]) + abs(tip[1] - label.anchor[1]) > 2.0:
                leader = (label.anchor, tip)
        placed.append(Placed(label, (cx, cy), box, leader))
        boxes.append(box)
    return placed
