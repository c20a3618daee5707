"""The site in a real headless browser (Debian's `chromium`, installed by .ci/run): it opens from
file://, the index lists and pages every subtask, and item pages show their drawings."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("chromium") is None,
                                                  reason="needs Debian's chromium (apt-get install chromium)")]

TILE = (1280, 1000)  # CSS pixels of one item page in the contact sheet
SCALE = 0.5


def chromium(*args: str, timeout: int = 180) -> str:
    cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           "--virtual-time-budget=20000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True).stdout


def screenshot(url: str, path: Path, width: int, height: int) -> np.ndarray:
    import cv2

    chromium(f"--window-size={width},{height}", f"--screenshot={path}", url)
    img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert img is not None and img.shape[:2] == (height, width)
    return img


def drawn(img: np.ndarray) -> int:
    """Pixels in the colours of the drawings (objects named by the question, measures, cameras, paths)."""
    from numerical3d.pipeline.browse.style import STYLES, bgr

    hits = np.zeros(img.shape[:2], bool)
    for role in ("a", "b", "c", "measure", "camera", "path", "rect", "other"):
        hits |= np.all(np.abs(img.astype(int) - np.array(bgr(STYLES[role].stroke))) <= 40, axis=2)
    return int(hits.sum())


def dom(url: str) -> str:
    return chromium("--dump-dom", url)


def test_index_lists_every_subtask_and_pages_through_them(site, kit, tmp_path):
    html = dom((site / "index.html").as_uri())
    for s in kit.SUBTASKS:
        assert f'<a href="#subtask={s}">{s}</a>' in html
        assert f'<option value="{s}">{s} (' in html  # the filter offers it
    assert html.count('class="card"') == 20 and re.search(r"items 1–20 of \d+ · page 1 of \d+", html)
    page2 = dom((site / "index.html").as_uri() + "#page=2")
    assert page2.count('class="card"') == 20 and "items 21–40" in page2
    assert set(re.findall(r'href="(items/[^"]+)"', page2)).isdisjoint(re.findall(r'href="(items/[^"]+)"', html))
    only = dom((site / "index.html").as_uri() + "#subtask=route_plan")
    badges = re.findall(r'<span class="badge">([a-z_0-9]+)</span>', only)
    assert badges and set(badges) == {"route_plan"}

    img = screenshot((site / "index.html").as_uri(), tmp_path / "index.png", 1400, 1600)
    assert img.std() > 20  # not blank
    assert drawn(img) > 2000  # the thumbnails carry the drawings


def test_item_pages_show_their_drawings(site, dataset, kit, tmp_path):
    from numerical3d.pipeline.browse.site import item_path
    from numerical3d.pipeline.shards import read_items

    # one page per subtask; for object_size the largest object's, doors aside (a cup's drawings, or a
    # door's wall-thin strip on the map, are too small to count at the sheet's scale)
    picked: dict[str, tuple[float, str]] = {}
    for it in read_items(dataset):
        big = it.subtask == "object_size" and it.provenance["objects"][0]["label"] != "door"
        key = -float(it.provenance["value"]) if big else 0.0
        if it.subtask not in picked or key < picked[it.subtask][0]:
            picked[it.subtask] = (key, item_path(it.id))
    first = {s: path for s, (_, path) in picked.items()}
    assert set(first) == kit.SUBTASKS
    subtasks = sorted(first)
    w, h = int(TILE[0] * SCALE), int(TILE[1] * SCALE)

    def sheet(name: str, suffix: str) -> np.ndarray:
        cells = "".join(f'<div class="c"><iframe src="{first[s]}{suffix}" width="{TILE[0]}" height="{TILE[1]}" '
                        f'scrolling="no"></iframe></div>' for s in subtasks)
        page = site / f"_{name}.html"  # beside index.html, so the pages' relative links resolve
        page.write_text(f"""<html><head><style>body{{margin:0}}.g{{display:grid;grid-template-columns:repeat(4,{w}px)}}
.c{{width:{w}px;height:{h}px;overflow:hidden}}.c iframe{{transform:scale({SCALE});transform-origin:0 0;border:0}}
</style></head><body><div class="g">{cells}</div></body></html>""")
        rows = (len(subtasks) + 3) // 4
        try:
            return screenshot(page.as_uri(), tmp_path / f"{name}.png", 4 * w, rows * h)
        finally:
            page.unlink()

    with_drawings, plain = sheet("drawn", ""), sheet("plain", "#plain")
    for k, s in enumerate(subtasks):
        r, c = divmod(k, 4)
        tile, bare = (x[r * h:(r + 1) * h, c * w:(c + 1) * w] for x in (with_drawings, plain))
        assert tile.std() > 20, f"{s}: blank page"
        changed = np.abs(tile.astype(int) - bare.astype(int)).max(axis=2) > 40  # what the drawings cover
        assert changed.sum() > 400, f"{s}: only {changed.sum()} pixels drawn"
        assert drawn(np.where(changed[..., None], tile, 0).astype(np.uint8)) > 50, f"{s}: drawings without their colours"


MEASURE = """<pre id="n3d-boxes"></pre><script>
function boxes() {  // every label on the map as the browser lays it out: [text, x0, y0, x1, y1, in the base group]
  return [...document.querySelectorAll(".map svg text")].map(function (t) {
    var r = t.getBoundingClientRect();
    return [t.textContent, r.left, r.top, r.right, r.bottom, !!t.closest("g.base")];
  }).filter(function (b) { return b[3] > b[1]; });
}
var drawn = boxes();
document.body.classList.add("plain");
document.getElementById("n3d-boxes").textContent = JSON.stringify({drawn: drawn, plain: boxes()});
document.body.classList.remove("plain");
</script>"""


def test_map_labels_do_not_overlap_in_the_browser(crowded_site, kit, tmp_path):
    """The crowded scene's page in chromium: the boxes of every label, as laid out with the browser's
    own fonts, overlap nowhere; with the drawings hidden the scene's names stay, the item's go."""
    import json
    from html import unescape

    from numerical3d.pipeline.browse.site import item_path

    site, iid = crowded_site
    page = site / item_path(iid)
    probe = page.with_name("_probe.html")  # beside the page, so its stylesheet resolves
    probe.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    out = dom(probe.as_uri())
    found = json.loads(unescape(re.search(r'<pre id="n3d-boxes">(.*?)</pre>', out, re.S).group(1)))
    drawn_, plain = found["drawn"], found["plain"]
    assert len(drawn_) >= len(kit.CROWD) + 7  # every name and the seven turns are laid out
    for a, b in itertools.combinations(drawn_, 2):
        assert not (a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]), (a, b)
    assert plain and all(b[5] for b in plain) and {b[0] for b in plain} == {b[0] for b in drawn_ if b[5]}
    img = screenshot(page.as_uri(), tmp_path / "crowd.png", 1280, 1000)
    assert drawn(img) > 2000
