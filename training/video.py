"""A question's frames as one Qwen2.5-VL video during GRPO training (`data.visual: video`).

TRL 1.16's GRPOTrainer carries images only: it tokenizes prompts with their image parts, and its
log-prob pass takes `pixel_values`/`image_grid_thw`. `VideoGRPOMixin` adds the video path beside
it. Rows carry `video` (the chosen frames) and `video_metadata`; the prompts are encoded by the
model's own processor (`encode_video_prompts`: chat template, Qwen's video processor, one
`<|video_pad|>` per merged patch, `second_per_grid_ts` from the metadata, `mm_token_type_ids` so
the rotary positions are Qwen's temporal ones), generation gets those tensors, and every
log-prob pass (old policy, reference, loss) gets each row's own video features. The per-row
features ride in the batch as a list (`video_clips`), so TRL's shuffle and split of a generation
batch keep them with their rows. Frames go in as TRL's images when `data.visual` is "images".
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from numerical3d.errors import Numerical3DError

VIDEO_FIELDS = ("pixel_values_videos", "video_grid_thw", "second_per_grid_ts")
VIDEO_TYPE = 2  # mm_token_type_ids of a video token (0 text, 1 image)


class VideoInputError(ValueError, Numerical3DError):
    """The processor or the run cannot take video input; the message says what to change."""


def check_video_processor(processor: Any, where: str) -> None:
    """Video input needs the model's video processor; Qwen's needs torchvision."""
    if getattr(processor, "video_processor", None) is None:
        raise VideoInputError(
            f"{where}: its processor has no video processor (Qwen's needs torchvision); install the torchvision "
            "build matching your torch, or use frames as images (data.visual: images / --visual images)")


@dataclass
class VideoClip:
    """One prompt's video features (no rows when the prompt has no video)."""

    pixel_values_videos: torch.Tensor  # (patches, channels x temporal patch x patch x patch)
    video_grid_thw: torch.Tensor  # (videos, 3): temporal, height and width patches
    second_per_grid_ts: torch.Tensor  # (videos,): seconds per temporal patch

    @staticmethod
    def batch(clips: list["VideoClip"], device: torch.device | str | None = None) -> dict[str, torch.Tensor]:
        """The model's video kwargs for `clips` in order (empty when none has a video)."""
        clips = [c for c in clips if c.video_grid_thw.numel()]
        if not clips:
            return {}
        return {name: torch.cat([getattr(c, name) for c in clips]).to(device) for name in VIDEO_FIELDS}


@dataclass
class EncodedVideoPrompts:
    input_ids: list[list[int]]  # unpadded, one per prompt
    mm_token_type_ids: list[list[int]]
    clips: list[VideoClip]

    def padded(self, pad_id: int) -> Any:
        """Left-padded model inputs for generation, with the video features (a `BatchFeature`)."""
        from transformers import BatchFeature

        width = max(len(ids) for ids in self.input_ids)

        def left(rows: list[list[int]], fill: int) -> torch.Tensor:
            return torch.tensor([[fill] * (width - len(r)) + r for r in rows])

        ones = [[1] * len(ids) for ids in self.input_ids]
        return BatchFeature({"input_ids": left(self.input_ids, pad_id), "attention_mask": left(ones, 0),
                             "mm_token_type_ids": left(self.mm_token_type_ids, 0), **VideoClip.batch(self.clips)})


def encode_video_prompts(processor: Any, conversations: list[list[dict[str, Any]]], videos: list[list[Any]],
                         metadata: list[dict[str, Any] | None], **chat_template_kwargs: Any) -> EncodedVideoPrompts:
    """Tokenize `conversations` whose user turn has a video part, with their frames as videos.

    `videos[i]` is the i-th prompt's frames (empty for a text-only prompt, whose conversation has
    no video part) and `metadata[i]` its `video_metadata`. The frames are already the sample, so
    the processor samples none (`do_sample_frames=False`), as `benchmark run vsibench` feeds them.
    """
    check_video_processor(processor, "video input")
    texts = [processor.apply_chat_template(c, add_generation_prompt=True, tokenize=False, **chat_template_kwargs)
             for c in conversations]
    with_video = [i for i, frames in enumerate(videos) if frames]
    kwargs: dict[str, Any] = {"text": texts, "padding": True, "return_tensors": "pt"}
    if with_video:
        kwargs.update(videos=[list(videos[i]) for i in with_video], video_metadata=[metadata[i] for i in with_video],
                      do_sample_frames=False)
    enc = processor(**kwargs)
    mask = enc["attention_mask"].bool()
    input_ids = [row[m].tolist() for row, m in zip(enc["input_ids"], mask)]
    types = processor.create_mm_token_type_ids(input_ids)
    clips = [_empty_clip(enc) for _ in conversations]
    if with_video:
        grids = enc["video_grid_thw"]
        rows = torch.split(enc["pixel_values_videos"], grids.prod(-1).tolist())
        seconds = torch.as_tensor(enc["second_per_grid_ts"], dtype=torch.float32)
        for j, i in enumerate(with_video):
            clips[i] = VideoClip(rows[j], grids[j : j + 1], seconds[j : j + 1])
    return EncodedVideoPrompts(input_ids, types, clips)


def _empty_clip(enc: Any) -> VideoClip:
    width = enc["pixel_values_videos"].shape[-1] if "pixel_values_videos" in enc else 0
    return VideoClip(torch.zeros(0, width), torch.zeros(0, 3, dtype=torch.long), torch.zeros(0))


class VideoGRPOMixin:
    """GRPOTrainer with video prompts: put it before `GRPOTrainer` in the bases.

    A generation batch whose rows carry `video` frames is encoded by `encode_video_prompts`;
    the rest is TRL's own path, unchanged.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._batch_videos: list[tuple[list[Any], dict[str, Any] | None]] | None = None
        self._batch_clips: list[VideoClip] | None = None  # the rows of the log-prob pass under way
        video_token = getattr(self.model.config, "video_token_id", None)
        if video_token is not None and getattr(self, "generation_config", None) is not None:
            # A sampled video token would mismatch the video features, as TRL guards the image token.
            suppress = list(self.generation_config.suppress_tokens or [])
            self.generation_config.suppress_tokens = suppress + [video_token]
            self.generation_kwargs["suppress_tokens"] = self.generation_config.suppress_tokens

    def _generate_and_score_completions(self, inputs):
        if not inputs or "video" not in inputs[0]:
            return super()._generate_and_score_completions(inputs)
        if self.use_vllm or self.tools:
            raise VideoInputError("video prompts are generated with transformers and without tools; turn off "
                                  "use_vllm/tools or use frames as images")
        self._batch_videos = [(x["video"] or [], x.get("video_metadata")) for x in inputs]
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._batch_videos = None
        output["video_clips"] = self._batch_clips
        self._batch_clips = None
        return output

    def _tokenize_prompts(self, prompts: list):
        if self._batch_videos is None:
            return super()._tokenize_prompts(prompts)
        if len(prompts) != len(self._batch_videos):
            raise RuntimeError(f"{len(prompts)} prompts for {len(self._batch_videos)} rows with video")
        encoded = encode_video_prompts(self.processing_class, prompts, [v for v, _ in self._batch_videos],
                                       [m for _, m in self._batch_videos], chat_template=self.chat_template,
                                       **self.chat_template_kwargs)
        self._batch_clips = encoded.clips
        fields: dict[str, Any] = {**VideoClip.batch(encoded.clips), "mm_token_type_ids": encoded.mm_token_type_ids}
        return encoded.input_ids, None, fields

    def _compute_loss(self, model, inputs):
        self._batch_clips = inputs.get("video_clips")
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._batch_clips = None

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           compute_entropy=False, compute_aux_loss=False, **multimodal):
        """TRL's pass, chunk by chunk, with each chunk's rows' video features and video token types."""
        clips = self._batch_clips
        if clips is None:
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
                **multimodal)
        images = sorted(k for k, v in multimodal.items() if v is not None)
        if images:
            raise RuntimeError(f"a video batch also carries image inputs {images}")
        if len(clips) != input_ids.size(0):
            raise RuntimeError(f"{len(clips)} video clips for {input_ids.size(0)} sequences")
        prompt_ids = input_ids[:, : input_ids.size(1) - logits_to_keep]
        types = torch.zeros_like(input_ids)
        types[:, : prompt_ids.size(1)] = (prompt_ids == self.model.config.video_token_id).long() * VIDEO_TYPE
        size = batch_size or input_ids.size(0)
        logps, entropies, aux = [], [], []
        for start in range(0, input_ids.size(0), size):
            end = min(start + size, input_ids.size(0))
            forward = partial(model, **VideoClip.batch(clips[start:end], input_ids.device))
            lp, ent, a = super()._get_per_token_logps_and_entropies(
                forward, input_ids[start:end], attention_mask[start:end], logits_to_keep, end - start,
                compute_entropy, compute_aux_loss, mm_token_type_ids=types[start:end])
            logps.append(lp)
            entropies.append(ent)
            aux.append(a)
        return (torch.cat(logps), torch.cat(entropies) if compute_entropy else None,
                torch.stack(aux).mean() if compute_aux_loss else None)
