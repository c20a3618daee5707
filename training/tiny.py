"""A tiny Qwen2.5-VL for offline smoke tests and CPU benchmarks (nothing can be downloaded from the Hub in tests).

Nothing comes from the Hub: the model is built from a config (hidden 32, 2 layers; vision depth 2,
hidden 16, `out_hidden_size` equal to the text hidden size), the tokenizer is a byte-level BPE
trained here with `tokenizers` on the dataset's own text, and the whole bundle is saved to a
folder and loaded back, because TRL rebuilds the reference model from `_name_or_path` when
beta > 0. A short teacher-forced warm start on well-formed completions gives the random model a
policy whose samples vary in their answers, so GRPO groups have reward spread (as an SFT
checkpoint would) and a few RL steps move the parameters for a reason.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
# Structure tags of the answer format: ordinary (non-special) tokens so they survive decoding.
FORMAT_TOKENS = ["<think>", "</think>", "<answer>", "</answer>"]

# Qwen2.5-VL's chat template: images become <|vision_start|><|image_pad|><|vision_end|>, which the
# processor expands to one pad per merged patch.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass
class TinySpec:
    """Sizes of the tiny model; defaults: hidden 32, 2 layers, a 2-deep vision tower whose output matches the text hidden size."""

    vocab_size: int = 1000
    hidden_size: int = 32
    intermediate_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    num_kv_heads: int = 1
    vision_depth: int = 2
    vision_hidden: int = 16
    vision_heads: int = 2
    image_side: int = 56  # images are resized to at most side x side pixels (16 patches, 4 tokens)
    warmup_steps: int = 30
    warmup_lr: float = 1e-2
    seed: int = 0


def train_tokenizer(corpus: Iterable[str], vocab_size: int):
    """Byte-level BPE trained on `corpus`, wrapped as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        padding_side="left",
    )
    fast.add_tokens(FORMAT_TOKENS)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def image_only_processor(image_processor, tokenizer, chat_template: str | None = None):
    """A Qwen2.5-VL processor without a video processor.

    Qwen's video processor needs torchvision, and transformers refuses a `None` video processor;
    training sends frames as images, so this subclass simply has no video attribute.
    """
    from transformers import Qwen2_5_VLProcessor
    from transformers.processing_utils import ProcessorMixin

    class Qwen2_5_VLImageProcessorOnly(Qwen2_5_VLProcessor):
        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
            self.image_token = "<|image_pad|>"
            self.video_token = "<|video_pad|>"
            self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
            self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
            ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)

    return Qwen2_5_VLImageProcessorOnly(image_processor, tokenizer, chat_template=chat_template)


def _build_processor(tokenizer, image_side: int):
    """Qwen2.5-VL's processor at the tiny size: with Qwen's video processor where torchvision loads
    (so `data.visual: video` runs for real there), image-only elsewhere."""
    from transformers import Qwen2_5_VLProcessor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    size = {"shortest_edge": 28 * 28, "longest_edge": image_side * image_side}
    image_processor = Qwen2VLImageProcessorPil(size=size)
    try:
        from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor
    except (ImportError, RuntimeError):  # no torchvision, or a build whose ops do not load beside this torch
        return image_only_processor(image_processor, tokenizer, CHAT_TEMPLATE)
    return Qwen2_5_VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                               video_processor=Qwen2VLVideoProcessor(size=size), chat_template=CHAT_TEMPLATE)


def load_processor(path: str | os.PathLike):
    """Load a Qwen2.5-VL processor from `path`, tolerating a missing video processor.

    AutoProcessor needs torchvision for Qwen's video processor; frames sent as images need only
    the PIL image processor and the tokenizer, so without torchvision the processor has no video
    part (and `data.visual: video` stops with `training.video.VideoInputError`).
    """
    from transformers import AutoProcessor, AutoTokenizer
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from transformers.processing_utils import ProcessorMixin

    try:
        processor = AutoProcessor.from_pretrained(path, padding_side="left")
    except (ImportError, ValueError, OSError, TypeError, AttributeError):
        processor = None
    if not isinstance(processor, ProcessorMixin):
        tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
        image_processor = Qwen2VLImageProcessorPil.from_pretrained(path)
        processor = image_only_processor(image_processor, tokenizer, tokenizer.chat_template)
    processor.tokenizer.padding_side = "left"
    return processor


def _warm_start(model, tokenizer, pairs: Sequence[tuple[str, str]], spec: TinySpec) -> None:
    """Teacher-forced steps on (question, completion) chats, loss on the completion only (text only)."""
    import torch

    torch.manual_seed(spec.seed)
    prompts = [
        tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False)
        for q, _ in pairs
    ]
    texts = [p + c + tokenizer.eos_token for p, (_, c) in zip(prompts, pairs)]
    enc = tokenizer(texts, return_tensors="pt", padding=True, padding_side="right")
    labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
    for row, prompt in enumerate(prompts):
        labels[row, : len(tokenizer(prompt)["input_ids"])] = -100
    optim = torch.optim.AdamW(model.parameters(), lr=spec.warmup_lr)
    model.train()
    for _ in range(spec.warmup_steps):
        loss = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels).loss
        loss.backward()
        optim.step()
        optim.zero_grad()
    model.eval()


def build_tiny_model(
    out_dir: str | os.PathLike,
    corpus: Iterable[str],
    warmup_texts: Sequence[tuple[str, str]] = (),
    spec: TinySpec | None = None,
) -> Path:
    """Build, warm-start and save a tiny Qwen2.5-VL with its processor; return the folder.

    `corpus` trains the tokenizer; `warmup_texts` are (question, completion) pairs rendered with the
    chat template for the warm start (empty: no warm start). The save goes to a temporary sibling
    folder renamed into place, so a crashed build never leaves a half-written model.
    """
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    spec = spec or TinySpec()
    out = Path(out_dir)
    texts = list(corpus) + FORMAT_TOKENS + [q for q, _ in warmup_texts] + [c for _, c in warmup_texts]
    tokenizer = train_tokenizer(texts, spec.vocab_size)
    head_dim = spec.hidden_size // spec.num_heads
    half = head_dim // 2
    mrope = [half - 2 * (half // 3), half // 3, half // 3]  # temporal, height, width; sums to head_dim/2
    config = Qwen2_5_VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": spec.hidden_size,
            "intermediate_size": spec.intermediate_size,
            "num_hidden_layers": spec.num_layers,
            "num_attention_heads": spec.num_heads,
            "num_key_value_heads": spec.num_kv_heads,
            "max_position_embeddings": 4096,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": mrope},
            "bos_token_id": tokenizer.convert_tokens_to_ids("<|endoftext|>"),
            "eos_token_id": tokenizer.eos_token_id,
            "pad_token_id": tokenizer.pad_token_id,
            "tie_word_embeddings": True,
        },
        vision_config={
            "depth": spec.vision_depth,
            "hidden_size": spec.vision_hidden,
            "intermediate_size": 2 * spec.vision_hidden,
            "num_heads": spec.vision_heads,
            "out_hidden_size": spec.hidden_size,
            "fullatt_block_indexes": [spec.vision_depth - 1],
            "window_size": 112,
        },
        image_token_id=tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tokenizer.convert_tokens_to_ids("<|vision_start|>"),
        vision_end_token_id=tokenizer.convert_tokens_to_ids("<|vision_end|>"),
        tie_word_embeddings=True,
    )
    torch.manual_seed(spec.seed)
    model = Qwen2_5_VLForConditionalGeneration(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = config.text_config.bos_token_id
    if warmup_texts and spec.warmup_steps:
        _warm_start(model, tokenizer, warmup_texts, spec)
    processor = _build_processor(tokenizer, spec.image_side)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out


def tiny_model_for(output: Path, dataset: str, split: str) -> Path:
    """The tiny model of `train --preset tiny-cpu`: tokenizer trained and warm start run on `dataset`'s questions."""
    from numerical3d import verifiers

    from numerical3d.training.config import DataConfig
    from numerical3d.training.data import load_items, valid_spec

    rows = list(load_items(dataset, DataConfig(split=split, max_items=64)))
    # A row with a bad verifier cell still gives its question to the tokenizer, and no warm-start
    # pair: training skips and reports that row, the model is built whatever the rows hold.
    specs = [valid_spec(r["verifier"]) for r in rows]
    pairs = [(r["question"], verifiers.canonical_completion(spec)) for r, spec in zip(rows, specs) if spec is not None]
    return build_tiny_model(output / "tiny-model", [r["question"] for r in rows], pairs)
