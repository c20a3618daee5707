"""Frames from source to shard in one step: the one resize, the one JPEG encode, the frame store.

A scene job turns each frame its items refer to into the JPEG the shard will hold
(`encode_source_frame`): the source's own JPEG bytes, untouched, when the frame is already
small enough, else one resize and one encode at the dataset's quality. It saves those bytes
next to its result file (`export_frames`) with their size and pixel hash, and assembly copies
them into the frames shards as they are (`FrameStore`): no lossless intermediate, no pixel is
decoded after the scene stage. Hydration goes through the same `encode_source_frame`, so a
hydrated frame is byte for byte the one an `embed` build publishes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from numerical3d.sources.io import atomic_write_bytes
from numerical3d.sources.scene import Frame, Scene, SceneError


@dataclass(frozen=True)
class EncodedFrame:
    """A frame as the shard stores it: JPEG bytes, their size, and the hash a hydration is checked by."""

    data: bytes
    width: int
    height: int
    pixel_sha256: str  # sha256 of the decoded JPEG (BGR, as OpenCV decodes it): what a user gets back

    def meta(self) -> dict[str, Any]:
        return {"width": self.width, "height": self.height, "pixel_sha256": self.pixel_sha256}


def resize_longest(rgb: np.ndarray, longest_side: int) -> np.ndarray:
    """Downscale (never upscale) so that the longest side is at most `longest_side`."""
    h, w = rgb.shape[:2]
    scale = longest_side / max(h, w)
    if scale >= 1.0:
        return rgb
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)


def _pixel_hash(bgr: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(bgr).tobytes()).hexdigest()


def encode_pixels(rgb: np.ndarray, longest_side: int, quality: int, frame: str = "frame") -> EncodedFrame:
    """RGB pixels resized (never upscaled) and encoded once as JPEG; deterministic for the same pixels."""
    rgb = np.asarray(rgb)
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"{frame}: frame provider must return RGB uint8 (H, W, 3), got {rgb.dtype} {rgb.shape}")
    small = np.ascontiguousarray(resize_longest(rgb, longest_side))
    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(small, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError(f"{frame}: JPEG encoding failed")
    data = buf.tobytes()
    # The hash is of the decoded JPEG, what a user gets back, so hydration can be checked exactly.
    decoded = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    return EncodedFrame(data, int(small.shape[1]), int(small.shape[0]), _pixel_hash(decoded))


def passthrough(data: bytes, width: int, height: int) -> EncodedFrame | None:
    """The source's JPEG as the shard's, when it decodes to three channels at the frame's size."""
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    if img is None or img.ndim != 3 or img.shape[2] != 3 or img.shape[:2] != (height, width):
        return None
    return EncodedFrame(data, width, height, _pixel_hash(img))


def encode_source_frame(frame: Frame, longest_side: int, quality: int) -> EncodedFrame:
    """The shard's JPEG of a source frame: its own bytes when no resize is needed, else one encode."""
    if frame.load_jpeg is not None and max(frame.width, frame.height) <= longest_side:
        kept = passthrough(frame.load_jpeg(), frame.width, frame.height)
        if kept is not None:
            return kept
    try:
        return encode_pixels(frame.image(), longest_side, quality, frame.image_ref)
    except ValueError as exc:
        raise SceneError(frame.image_ref, str(exc)) from exc


def export_frames(scene: Scene, indices: list[int], folder: Path, longest_side: int, quality: int) -> dict[str, dict[str, Any]]:
    """Save the shard's JPEG of each frame; returns {index: {file, width, height, pixel_sha256}}."""
    out: dict[str, dict[str, Any]] = {}
    for index in indices:
        enc = encode_source_frame(scene.frame(index), longest_side, quality)
        atomic_write_bytes(folder / f"{index}.jpg", enc.data)
        out[str(index)] = {"file": f"{index}.jpg", **enc.meta()}
    return out


class FrameStore:
    """Frame id -> `EncodedFrame` of exported frames (a frame provider for `writer.write_dataset`).

    Reads bytes only: the size and hash were recorded when the scene job encoded the frame.
    """

    def __init__(self, frames: Mapping[str, tuple[Path, Mapping[str, Any]]]):
        self._frames = dict(frames)  # frame id -> (its JPEG, {width, height, pixel_sha256})

    def __contains__(self, fid: str) -> bool:
        return fid in self._frames

    def __len__(self) -> int:
        return len(self._frames)

    def __call__(self, fid: str) -> EncodedFrame:
        entry = self._frames.get(fid)
        if entry is None:
            raise KeyError(f"frame {fid} was not exported by its scene")
        path, meta = entry
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise OSError(f"{path}: cannot read the exported frame ({exc})") from exc
        return EncodedFrame(data, int(meta["width"]), int(meta["height"]), str(meta["pixel_sha256"]))


def frame_pixels(frame: np.ndarray | EncodedFrame) -> np.ndarray:
    """RGB pixels of what a frame provider returned (decodes an `EncodedFrame`; previews need pixels)."""
    if isinstance(frame, EncodedFrame):
        bgr = cv2.imdecode(np.frombuffer(frame.data, np.uint8), cv2.IMREAD_COLOR)
        return bgr[:, :, ::-1].copy()
    return frame
