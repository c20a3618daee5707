"""Labels on the site's drawings: none overlaps another, a moved one points at what it names.

Checked here on the text positions the SVG holds and the extents the placement assumes; the
browser test (`test_browser.py`) measures the same page with the fonts a browser really uses.
"""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET

from numerical3d.pipeline.browse.labels import ASCENT, DESCENT, HALO, Box, Label, place_labels, text_width
from numerical3d.pipeline.browse.site import item_path


def test_labels_at_one_point_are_spread_inside_the_drawing_with_leaders():
    names = ["dresser", "lamp", "nightstand", "trash can", "tv stand", "1. turn left (+90)", "2. turn right (-90)"]
    labels = [Label(n, (20.0, 30.0), (20.0, 30.0), 12.0) for n in names]
    placed = place_labels(labels, bounds=(300.0, 200.0), obstacles=[Box(15.0, 25.0, 25.0, 35.0)])
    for a, b in itertools.combinations(placed, 2):
        assert not a.box.overlaps(b.box), (a.label.text, b.label.text)
    for p in placed:
        assert p.box.x0 >= 0 and p.box.y0 >= 0 and p.box.x1 <= 300 and p.box.y1 <= 200
        assert not p.box.overlaps(Box(15.0, 25.0, 25.0, 35.0))  # the marker dot stays visible
        assert p.leader is not None and p.leader[0] == (20.0, 30.0)  # every one had to move: each points back
        assert p.box.nearest(*p.leader[1]) == p.leader[1]  # and the line ends on its box
    assert place_labels(labels, bounds=(300.0, 200.0)) == place_labels(labels, bounds=(300.0, 200.0))


def test_a_free_label_stays_where_it_is():
    (p,) = place_labels([Label("lamp", (50.0, 50.0), (50.0, 50.0), 11.0)], bounds=(100.0, 100.0))
    assert p.centre == (50.0, 50.0) and p.leader is None


def map_texts(page: str) -> list[tuple[str, Box, bool]]:
    """(text, box of its glyphs as the placement estimates them, whether it is a scene name) of every
    label on an item page's map."""
    svg = re.search(r'<div class="map">.*?(<svg viewBox.*?</svg>)', page, re.S).group(1)
    root = ET.fromstring(svg)
    out = []

    def walk(el, size: float | None, base: bool) -> None:
        size = float(el.get("font-size", size or 0)) or size
        base = base or el.get("class") == "base"
        if el.tag == "text":
            x, y, w = float(el.get("x")), float(el.get("y")), text_width(el.text, size)
            out.append((el.text, Box(x - w / 2, y - ASCENT * size, x + w / 2, y + DESCENT * size), base))
        for child in el:
            walk(child, size, base)

    walk(root, None, False)
    return out


def test_crowded_map_labels_do_not_overlap(crowded_site, kit):
    site, iid = crowded_site
    page = (site / item_path(iid)).read_text()
    texts = map_texts(page)
    for (ta, a, _), (tb, b, _) in itertools.combinations(texts, 2):
        halo = Box(a.x0 - HALO, a.y0 - HALO, a.x1 + HALO, a.y1 + HALO)  # white halos do not touch either
        assert not halo.overlaps(Box(b.x0 - HALO, b.y0 - HALO, b.x1 + HALO, b.y1 + HALO)), (ta, tb)
    shown = [t for t, _, _ in texts]
    for name in kit.CROWD:  # every object is named once on the map: by the item, or in the scene's names
        assert sum(t == name or t.endswith(f": {name}") for t in shown) == 1, name
    assert len([t for t in shown if re.match(r"\d\. turn (left|right) ", t)]) == 7  # each turn keeps its label
    assert page.count('class="leader"') >= 5  # the crowd cannot all sit on what they name
    names = {t for t, _, base in texts if base}
    assert names and names <= set(kit.CROWD) and "dresser" not in names  # the start is labelled by the item
    background = (site / "maps" / "synthetic" / "crowd.svg").read_text()
    assert "<text" not in background  # names live on the item's page, placed around its drawing
