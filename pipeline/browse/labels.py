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

    def overlap_area(self, other: Box) -> float:
        return max(0.0, min(self.x1, other.x1) - max(self.x0, other.x0)) * max(0.0, min(self.y1, other.y1) - max(self.y0, other.y0))

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


def _inside(cx: float, cy: float, w: float, h: float, bounds: tuple[float, float] | None) -> tuple[float, float]:
    """The centre moved just enough for the box to lie in the drawing (when it fits at all)."""
    if bounds is None:
        return cx, cy
    bw, bh = bounds
    if w <= bw:
        cx = min(max(cx, w / 2.0), bw - w / 2.0)
    if h <= bh:
        cy = min(max(cy, h / 2.0), bh - h / 2.0)
    return cx, cy


def _spots(label: Label, w: float, h: float, step: float):
    """Candidate centres: the natural one, then around the anchor at growing distances."""
    yield label.centre
    ax, ay = label.anchor
    for ring in range(RINGS):
        d = step * (0.5 + ring)
        for ux, uy in DIRECTIONS:
            yield ax + ux * (w / 2.0 + d), ay + uy * (h / 2.0 + d)


def place_labels(labels: list[Label], *, bounds: tuple[float, float] | None = None,
                 obstacles: list[Box] = ()) -> list[Placed]:
    """Place `labels` in order (earlier ones have priority); see the module doc. A label with no free
    spot takes the least crowded one tried."""
    placed: list[Placed] = []
    taken = list(obstacles)
    for label in labels:
        w, h = label_size(label.text, label.font)
        step = (ASCENT + DESCENT) * label.font * 0.75
        best: tuple[float, Box, tuple[float, float]] | None = None
        for k, spot in enumerate(_spots(label, w, h, step)):
            cx, cy = _inside(*spot, w, h, bounds)
            box = _box(cx, cy, w, h)
            crowd = sum(box.overlap_area(t) for t in taken)
            if best is None or crowd < best[0]:
                best = (crowd, box, (cx, cy))
            if crowd == 0.0:
                break
        _, box, centre = best
        leader = None
        if centre != label.centre:
            tip = box.nearest(*label.anchor)
            if abs(tip[0] - label.anchor[0]) + abs(tip[1] - label.anchor[1]) > 2.0:
                leader = (label.anchor, tip)
        placed.append(Placed(label, centre, box, leader))
        taken.append(box)
    return placed
