"""Frames between a scene job and assembly: the one resize, the per-scene export, the frame store.

A scene job saves the frames its items refer to, already at the dataset's size, as lossless
PNG next to its result file (`export_frames`); assembly reads only those (`FrameStore`) and
never loads a scene again. Shards then encode them as JPEG through the same `resize_longest`
(a no-op on frames that are already small enough), so a frame is resized once, one way.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import cv2
import numpy as np

from numerical3d.sources.io import atomic_write_bytes
from numerical3d.sources.scene import Scene, SceneError


def resize_longest(rgb: np.ndarray, longest_side: int) -> np.ndarray:
    """Downscale (never upscale) so that the longest side is at most `longest_side`."""
    h, w = rgb.shape[:2]
    scale = longest_side / max(h, w)
    if scale >= 1.0:
        return rgb
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)


def export_frames(scene: Scene, indices: list[int], folder: Path, longest_side: int) -> dict[str, str]:
    """Save frames as lossless PNG at the dataset's size; returns {index: file name}."""
    out: dict[str, str] = {}
    for index in indices:
        rgb = resize_longest(scene.frame(index).image(), longest_side)
        ok, buf = cv2.imencode(".png", np.ascontiguousarray(rgb[:, :, ::-1]), [cv2.IMWRITE_PNG_COMPRESSION, 3])
        if not ok:
            raise SceneError(scene.frame(index).image_ref, "cannot encode frame")
        atomic_write_bytes(folder / f"{index}.png", buf.tobytes())
        out[str(index)] = f"{index}.png"
    return out


class FrameStore:
    """Frame id -> RGB pixels of exported frames (a frame provider for `writer.write_dataset`)."""

    def __init__(self, paths: Mapping[str, Path]):
        self._paths = dict(paths)  # frame id -> its PNG

    def __contains__(self, fid: str) -> bool:
        return fid in self._paths

    def __len__(self) -> int:
        return len(self._paths)

    def __call__(self, fid: str) -> np.ndarray:
        path = self._paths.get(fid)
        if path is None:
            raise KeyError(f"frame {fid} was not exported by its scene")
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if bgr is None:
            raise OSError(f"{path}: cannot read the exported frame")
        return bgr[:, :, ::-1].copy()

