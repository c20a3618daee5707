"""A stand-in for transformers' Qwen2VLVideoProcessor, for machines where torchvision cannot load.

Qwen's video processor imports torchvision, and the torchvision wheels on PyPI are CUDA builds
that do not load beside the CPU torch these tests install (`torchvision::nms does not exist`).
The stand-in keeps the processor's contract, which is all the training code relies on: frames
resized together by Qwen's `smart_resize` to multiples of 28 (here with the PIL image processor's
own resize and CLIP normalisation), an odd frame count padded with the last frame, patches of 2
frames x 14 x 14 laid out in merge order, `video_grid_thw` per video, and `video_metadata` back so
Qwen2_5_VLProcessor derives `second_per_grid_ts` from the sampled fps. Pixel values can differ
from torchvision's resize in the last digits; `test_stand_in_matches_qwen_video_processor`
compares the two wherever torchvision works.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from transformers.feature_extraction_utils import BatchFeature
from transformers.image_utils import PILImageResampling, SizeDict
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.video_utils import VideoMetadata


class QwenVideoProcessorStandIn:
    patch_size = 14
    temporal_patch_size = 2
    merge_size = 2

    def __init__(self, longest_edge: int = 56 * 56, shortest_edge: int = 28 * 28):
        self.size = SizeDict(longest_edge=longest_edge, shortest_edge=shortest_edge)
        self.frames = Qwen2VLImageProcessorPil(size={"shortest_edge": shortest_edge, "longest_edge": longest_edge})
        self.calls: list[dict[str, Any]] = []

    def __call__(self, videos: list[list[Any]], video_metadata: list[Any] | None = None, return_metadata: bool = False,
                 **kwargs: Any) -> BatchFeature:
        self.calls.append({"videos": len(videos), "do_sample_frames": kwargs.get("do_sample_frames")})
        patches, grids, metadata = [], [], []
        for i, video in enumerate(videos):
            frames = np.stack([self._frame(f) for f in video])
            if len(frames) % self.temporal_patch_size:
                frames = np.concatenate([frames, frames[-1:]])
            t, c, h, w = frames.shape
            gt, gh, gw = t // 2, h // 14, w // 14
            x = frames.reshape(gt, 2, c, gh // 2, 2, 14, gw // 2, 2, 14).transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
            patches.append(x.reshape(gt * gh * gw, c * 2 * 14 * 14))
            grids.append([gt, gh, gw])
            meta = video_metadata[i] if video_metadata else {"total_num_frames": len(video), "fps": 24.0}
            metadata.append(meta if isinstance(meta, VideoMetadata) else VideoMetadata(**meta))
        data: dict[str, Any] = {"pixel_values_videos": torch.tensor(np.concatenate(patches), dtype=torch.float32),
                                "video_grid_thw": torch.tensor(grids)}
        if return_metadata:
            data["video_metadata"] = metadata
        return BatchFeature(data)

    def _frame(self, frame: Any) -> np.ndarray:
        rgb = np.asarray(frame.convert("RGB") if hasattr(frame, "convert") else frame, dtype=np.uint8)
        chw = rgb.transpose(2, 0, 1)
        chw = self.frames.resize(chw, size=self.size, resample=PILImageResampling.BICUBIC, factor=28)
        chw = self.frames.rescale(chw, 1 / 255)
        return self.frames.normalize(chw, self.frames.image_mean, self.frames.image_std)


def with_stand_in(processor: Any, **kwargs: Any) -> Any:
    """`processor` with the stand-in as its video processor."""
    processor.video_processor = QwenVideoProcessorStandIn(**kwargs)
    return processor


def torchvision_works() -> bool:
    try:
        from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor  # noqa: F401
    except Exception:  # ImportError, or torchvision's RuntimeError when its ops do not load
        return False
    return True
