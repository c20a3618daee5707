"""Uniform frame sampling from a benchmark video with OpenCV.

The indices are VSI-Bench's (lmms-eval's video models and its multi-image task):
`np.linspace(0, total - 1, min(n, total), dtype=int)`, i.e. the first and the last frame and
floor-rounded steps between them. Frames are read by decoding the stream in order (`grab` every
frame, `retrieve` only the wanted ones), which is exact where seeking in a compressed stream is
not; a container whose frame count over-reports is re-sampled with the count actually decoded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from numerical3d.errors import Numerical3DError


class VideoError(ValueError, Numerical3DError):
    """A video that cannot be read; the message names the file."""


@dataclass
class SampledVideo:
    frames: list[np.ndarray]  # RGB H x W x 3 uint8
    indices: list[int]  # which frames of the video they are
    total: int  # frames in the video
    fps: float | None  # the video's frame rate (None when the container does not say)

    def metadata(self) -> dict[str, Any]:
        """transformers' VideoMetadata fields, from which it derives the frames' timestamps."""
        return {"total_num_frames": self.total, "fps": self.fps, "frames_indices": self.indices}


def frame_indices(total: int, n: int) -> list[int]:
    """Indices of `n` frames spread uniformly over `total` (all of them when total <= n)."""
    if total <= 0:
        return []
    return np.linspace(0, total - 1, min(n, total), dtype=int).tolist()


def _read(cap, wanted: list[int]) -> tuple[list[np.ndarray], int]:
    """(RGB frames at `wanted`, number of frames decoded before stopping)."""
    import cv2

    frames: list[np.ndarray] = []
    targets = iter(wanted)
    target = next(targets, None)
    index = 0
    while target is not None and cap.grab():
        if index == target:
            ok, bgr = cap.retrieve()
            if not ok:
                break
            frames.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
            target = next(targets, None)
        index += 1
    return frames, index


def sample_frames(path: str | Path, n: int) -> SampledVideo:
    """`n` RGB frames sampled uniformly from the video at `path`."""
    import cv2

    if n < 1:
        raise ValueError(f"frames must be >= 1, got {n}")
    path = Path(path)
    if not path.is_file():
        raise VideoError(f"{path}: video not found")

    def open_video():
        cap = cv2.VideoCapture(str(path))
        if not cap.isOpened():
            raise VideoError(f"{path}: OpenCV cannot open this video")
        return cap

    cap = open_video()
    try:
        total = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
        fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
        if total <= 0:  # no count in the container: decode once to count
            while cap.grab():
                total += 1
            cap.release()
            cap = open_video()
        wanted = frame_indices(total, n)
        frames, decoded = _read(cap, wanted)
    finally:
        cap.release()
    if len(frames) < len(wanted):
        if decoded == 0:
            raise VideoError(f"{path}: no frame could be decoded")
        total = decoded
        cap = open_video()
        try:
            wanted = frame_indices(total, n)
            frames, _ = _read(cap, wanted)
        finally:
            cap.release()
        if len(frames) < len(wanted):
            raise VideoError(f"{path}: decoding stopped before frame {wanted[len(frames)]} of {total}")
    return SampledVideo(frames, wanted, total, fps if np.isfinite(fps) and fps > 0 else None)
