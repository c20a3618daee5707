"""Model backends for the benchmarks: transformers (any image-text-to-text checkpoint, on the GPU
with `device_map="auto"` when there is one) and vLLM (behind an import guard).

Both decode greedily (`do_sample=False` / temperature 0) for at most `max_new_tokens` tokens and
return the generated text as decoded, special tokens skipped and nothing stripped: the official
scorer takes the first space-separated token of exactly that. The visual input is one user turn
holding either the sampled frames as one video (`visual="video"`, how lmms-eval feeds
Qwen2.5-VL; transformers gets the video's frame rate and the sampled indices, so temporal
positions follow the video's time, while vLLM gets the frame array alone) or as separate images
(`visual="images"`), then the prompt text.

`BACKENDS` maps each `--backend` name to its class; a new backend is one class with a `load`
classmethod of the same keywords and one entry there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from numerical3d.training.benchmarks.core import BenchmarkError, Prompt, Visual


class Backend(Protocol):
    """A loaded model: greedy answers to prompts, in order."""

    def generate(self, prompts: list[Prompt]) -> list[str]: ...


class BackendClass(Protocol):
    """What `BACKENDS` holds: a backend class, loaded by name."""

    def load(self, model_path: str, *, visual: Visual, max_new_tokens: int, max_images: int) -> Backend: ...


def messages(prompt: Prompt, visual: Visual) -> list[dict[str, Any]]:
    """The chat: one user turn with the visual parts first, then the text."""
    from numerical3d.training.data import conversation

    return conversation(prompt.text, len(prompt.frames), visual=visual)


def _pil(frames: list[np.ndarray]) -> list[Any]:
    from PIL import Image

    return [Image.fromarray(f) for f in frames]


@dataclass
class TransformersBackend:
    """transformers generation, batched with left padding."""

    model: Any
    processor: Any
    visual: Visual
    max_new_tokens: int

    @classmethod
    def load(cls, model_path: str, *, visual: Visual, max_new_tokens: int, max_images: int,
             dtype: str = "auto") -> "TransformersBackend":
        """The model at `model_path`; `max_images` is vLLM's per-prompt limit, transformers has none."""
        import torch
        from transformers import AutoModelForImageTextToText

        from numerical3d.training.tiny import load_processor

        kwargs: dict[str, Any] = {"dtype": dtype}
        if torch.cuda.is_available():
            kwargs["device_map"] = "auto"
        try:
            model = AutoModelForImageTextToText.from_pretrained(model_path, **kwargs)
        except (OSError, ValueError) as exc:
            raise BenchmarkError(f"{model_path}: cannot load the model: {exc}") from exc
        model.eval()
        processor = load_processor(model_path)
        if visual == "video":
            from numerical3d.training.video import VideoInputError, check_video_processor

            try:
                check_video_processor(processor, model_path)
            except VideoInputError as exc:
                raise BenchmarkError(str(exc)) from exc
        return cls(model, processor, visual, max_new_tokens)

    def generate(self, prompts: list[Prompt]) -> list[str]:
        import torch

        tokenizer = self.processor.tokenizer
        tokenizer.padding_side = "left"
        texts = [self.processor.apply_chat_template(messages(p, self.visual), add_generation_prompt=True, tokenize=False)
                 for p in prompts]
        kwargs: dict[str, Any] = {"text": texts, "return_tensors": "pt", "padding": True}
        if self.visual == "images":
            kwargs["images"] = [_pil(p.frames) for p in prompts]
        else:
            kwargs["videos"] = [np.stack(p.frames) for p in prompts]
            kwargs["video_metadata"] = [p.video_metadata for p in prompts]
            kwargs["do_sample_frames"] = False  # the frames are already VSI-Bench's uniform sample
        enc = self.processor(**kwargs).to(self.model.device)
        with torch.inference_mode():
            ids = self.model.generate(**enc, max_new_tokens=self.max_new_tokens, do_sample=False, num_beams=1,
                                      pad_token_id=tokenizer.pad_token_id)
        return tokenizer.batch_decode(ids[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)


@dataclass
class VLLMBackend:
    """vLLM offline generation: the chat template from the model's processor, frames as
    multi-modal data (a (T, H, W, 3) array for a video, PIL images otherwise)."""

    llm: Any
    sampling: Any
    processor: Any
    visual: Visual

    @classmethod
    def load(cls, model_path: str, *, visual: Visual, max_new_tokens: int, max_images: int) -> "VLLMBackend":
        try:
            import vllm
        except ImportError as exc:
            raise BenchmarkError("--backend vllm needs the vllm package, which is not installed: `pip install vllm` "
                                 "on a CUDA machine, or use --backend transformers") from exc
        from numerical3d.training.tiny import load_processor

        limit = {"video": 1} if visual == "video" else {"image": max_images}
        llm = vllm.LLM(model=model_path, limit_mm_per_prompt=limit, seed=0)
        sampling = vllm.SamplingParams(temperature=0.0, max_tokens=max_new_tokens)
        return cls(llm, sampling, load_processor(model_path), visual)

    def generate(self, prompts: list[Prompt]) -> list[str]:
        requests = []
        for p in prompts:
            text = self.processor.apply_chat_template(messages(p, self.visual), add_generation_prompt=True, tokenize=False)
            data = {"video": np.stack(p.frames)} if self.visual == "video" else {"image": _pil(p.frames)}
            requests.append({"prompt": text, "multi_modal_data": data})
        outputs = self.llm.generate(requests, self.sampling, use_tqdm=False)
        return [o.outputs[0].text for o in outputs]


BACKENDS: dict[str, BackendClass] = {"transformers": TransformersBackend, "vllm": VLLMBackend}


def load_backend(name: str, model_path: str, *, visual: Visual, max_new_tokens: int, max_images: int) -> Backend:
    """The named backend with the model at `model_path` loaded."""
    if name not in BACKENDS:
        raise BenchmarkError(f"unknown backend {name!r}; choose one of {list(BACKENDS)}")
    return BACKENDS[name].load(model_path, visual=visual, max_new_tokens=max_new_tokens, max_images=max_images)
