"""The site in a real headless browser (Debian's `chromium`, installed by .ci/run): it opens from
file://, the index lists and pages every subtask, and item pages show their drawings."""

from __future__ import annotations

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

    first: dict[str, str] = {}
    for it in read_items(dataset):
        first.setdefault(it.subtask, item_path(it.id))
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
