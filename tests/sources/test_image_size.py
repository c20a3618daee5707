"""`image_size` reads PNG and JPEG headers itself: the same sizes as PIL's on the kinds a source holds."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from PIL import Image

from numerical3d.sources.io import SceneError, image_size


def _write(path, kind: str) -> None:
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 255, size=(37, 53, 3), dtype=np.uint8)
    if kind == "png16":
        cv2.imwrite(str(path), rng.integers(0, 65535, size=(41, 29), dtype=np.uint16))
    elif kind == "png_rgb":
        cv2.imwrite(str(path), rgb)
    elif kind == "jpeg":
        cv2.imwrite(str(path), rgb)
    elif kind == "jpeg_gray":
        cv2.imwrite(str(path), rgb[:, :, 0])
    elif kind == "jpeg_progressive_exif":
        exif = Image.Exif()
        exif[0x010F] = "camera" * 200  # a long APP1 segment before the frame header
        Image.fromarray(rgb).save(path, "JPEG", progressive=True, exif=exif)
    elif kind == "bmp":
        cv2.imwrite(str(path), rgb)


@pytest.mark.parametrize("kind", ["png16", "png_rgb", "jpeg", "jpeg_gray", "jpeg_progressive_exif", "bmp"])
def test_image_size_equals_pil(tmp_path, kind):
    path = tmp_path / f"x.{'bmp' if kind == 'bmp' else 'png' if kind.startswith('png') else 'jpg'}"
    _write(path, kind)
    with Image.open(path) as im:
        assert image_size(path) == im.size


def test_a_file_that_is_no_image_is_still_refused(tmp_path):
    path = tmp_path / "x.jpg"
    path.write_bytes(b"\xff\xd8\xff\xe0 not really")
    with pytest.raises(SceneError, match="cannot read image header"):  # as PIL says, its header read
        image_size(path)
