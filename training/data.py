"""Hand-off from the built dataset to TRL: conversational prompts with frames as images.

The dataset (a local folder in the Hub layout, or a Hub id) has a `default` config of questions
and a `frames` config holding each scene frame once (`frame_id`, `image`). A local folder is read
the way the Hub reads it: its configs, splits and files come from the `configs` of the dataset
card's YAML header (README.md), so training depends on the published layout, not on how the
pipeline happens to name its shards. TRL passes no video
tensors to a VLM during training, so each prompt gets its frames as a list of PIL images in an
`images` column, under a frame and pixel budget: at most `max_frames` frames sampled uniformly in
time, each resized (aspect kept) to at most `max_pixels`, and fewer pixels per frame when
`max_total_pixels` would be exceeded. Frames are decoded lazily per batch (`with_transform`), so
50k items never sit decoded in memory.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from training.config import DataConfig

KEEP = ("id", "subtask", "answer", "verifier", "source", "scene_id")  # columns that reach the reward functions


class DatasetError(ValueError):
    """The dataset cannot feed training; the message names the dataset and the problem."""


@dataclass(frozen=True)
class FrameBudget:
    max_frames: int = 8
    max_pixels: int = 448 * 448
    max_total_pixels: int = 8 * 448 * 448

    @classmethod
    def from_config(cls, cfg: DataConfig) -> "FrameBudget":
        return cls(cfg.max_frames, cfg.max_pixels, cfg.max_total_pixels)

    def pick(self, n: int) -> list[int]:
        """Indices of at most `max_frames` of n frames, evenly spread, first and last kept."""
        if n <= self.max_frames:
            return list(range(n))
        if self.max_frames == 1:
            return [n // 2]
        return sorted({round(i * (n - 1) / (self.max_frames - 1)) for i in range(self.max_frames)})

    def per_frame_pixels(self, n: int) -> int:
        return min(self.max_pixels, self.max_total_pixels // max(n, 1))

    def resize(self, image: Any, pixels: int) -> Any:
        """The image in RGB, scaled down (never up) to at most `pixels` pixels."""
        image = image.convert("RGB")
        w, h = image.size
        if w * h <= pixels:
            return image
        scale = math.sqrt(pixels / (w * h))
        return image.resize((max(1, int(w * scale)), max(1, int(h * scale))))


def card_configs(folder: Path) -> dict[str, dict[str, list[str]]]:
    """config name -> split -> data file patterns, from the `configs` of the card's YAML header."""
    card = folder / "README.md"
    try:
        text = card.read_text(encoding="utf-8")
    except OSError as exc:
        raise DatasetError(f"{folder}: no readable dataset card (README.md) to take the configs from: {exc}") from exc
    header = re.match(r"---\s*\n(.*?)\n---\s*(\n|$)", text, re.DOTALL)
    try:
        meta = yaml.safe_load(header.group(1)) if header else None
    except yaml.YAMLError as exc:
        raise DatasetError(f"{card}: the YAML header is not valid YAML: {exc}") from exc
    configs = meta.get("configs") if isinstance(meta, dict) else None
    if not isinstance(configs, list) or not configs:
        raise DatasetError(f"{card}: the YAML header declares no `configs` (config_name, data_files)")
    layout: dict[str, dict[str, list[str]]] = {}
    for entry in configs:
        files = entry.get("data_files") if isinstance(entry, dict) else None
        if not (isinstance(entry, dict) and "config_name" in entry and isinstance(files, list)
                and all(isinstance(f, dict) and "split" in f and "path" in f for f in files)):
            raise DatasetError(f"{card}: every entry of `configs` needs a config_name and data_files as a list of "
                               f"{{split, path}}, got {entry!r}")
        layout[entry["config_name"]] = {f["split"]: [f["path"]] if isinstance(f["path"], str) else list(f["path"])
                                        for f in files}
    return layout


def _load(dataset: str, config: str, split: str):
    import datasets

    path = Path(dataset)
    try:
        if path.is_dir():
            layout = card_configs(path)
            if config not in layout:
                raise DatasetError(f"{dataset}: the card declares no {config!r} config (it has {sorted(layout)})")
            if split not in layout[config]:
                raise DatasetError(f"{dataset}: the card's config {config!r} has no split {split!r} "
                                   f"(it has {sorted(layout[config])})")
            patterns = layout[config][split]
            files = sorted({str(f) for pattern in patterns for f in path.glob(pattern)})
            if not files:
                raise DatasetError(f"{dataset}: no {', '.join(patterns)} files (config {config!r}, split {split!r})")
            return datasets.load_dataset("parquet", data_files={split: files}, split=split)
        return datasets.load_dataset(dataset, config, split=split)
    except DatasetError:
        raise
    except Exception as exc:  # datasets raises many types; name the dataset and config
        raise DatasetError(f"{dataset}: cannot load config {config!r} split {split!r}: {exc}") from exc


def load_items(dataset: str, cfg: DataConfig | None = None):
    """The question rows of `dataset` (`default` config), filtered and shuffled per `cfg`."""
    cfg = cfg or DataConfig()
    items = _load(dataset, "default", cfg.split)
    missing = {"id", "subtask", "question", "verifier", "frames"} - set(items.column_names)
    if missing:
        raise DatasetError(f"{dataset}: question rows lack column(s) {sorted(missing)}")
    if cfg.subtasks:
        wanted = set(cfg.subtasks)
        items = items.filter(lambda s: s in wanted, input_columns="subtask")
    items = items.shuffle(seed=cfg.shuffle_seed)
    if cfg.max_items is not None:
        items = items.select(range(min(cfg.max_items, len(items))))
    if len(items) == 0:
        raise DatasetError(f"{dataset}: no items left after filtering (split {cfg.split!r}, subtasks {cfg.subtasks})")
    return items


class FrameStore:
    """Frame images by id, from the dataset's `frames` config."""

    def __init__(self, dataset: str, split: str):
        self.dataset = dataset
        self.frames = _load(dataset, "frames", split)
        if "frame_id" not in self.frames.column_names or "image" not in self.frames.column_names:
            raise DatasetError(f"{dataset}: frames config needs columns frame_id and image")
        self.index = {fid: i for i, fid in enumerate(self.frames["frame_id"])}

    def images(self, frame_ids: list[str]) -> list[Any]:
        missing = [f for f in frame_ids if f not in self.index]
        if missing:
            raise DatasetError(f"{self.dataset}: frames config has no frame(s) {missing[:3]}")
        images = self.frames[[self.index[f] for f in frame_ids]]["image"]
        if any(im is None for im in images):
            raise DatasetError(
                f"{self.dataset}: frames {frame_ids[:3]} carry no pixels (a --media reference build); hydrate it first"
            )
        return images


def conversation(question: str, n_images: int, system_prompt: str | None = None) -> list[dict[str, Any]]:
    """One user turn: the frames as image parts, then the question text (after a system turn, if given)."""
    content: list[dict[str, Any]] = [{"type": "image"} for _ in range(n_images)]
    content.append({"type": "text", "text": question})
    system = [{"role": "system", "content": [{"type": "text", "text": system_prompt}]}] if system_prompt else []
    return [*system, {"role": "user", "content": content}]


def prompt(question: str, frame_ids: list[str], store: FrameStore, budget: FrameBudget,
           system_prompt: str | None = None) -> tuple[list[dict[str, Any]], list[Any]]:
    """The conversation and images of one question: frames picked uniformly in time under the budget."""
    chosen = [frame_ids[i] for i in budget.pick(len(frame_ids))]
    pixels = budget.per_frame_pixels(len(chosen))
    images = [budget.resize(im, pixels) for im in store.images(chosen)] if chosen else []
    return conversation(question, len(chosen), system_prompt), images


def prompt_dataset(dataset: str, cfg: DataConfig | None = None):
    """TRL-ready rows: `prompt` (conversational), `images` (PIL list), and the columns the reward
    functions read (`verifier`, `subtask`, `answer`, `id`, `source`, `scene_id`).

    The result is the filtered question table with a lazy transform; frames are decoded when a
    batch is read.
    """
    cfg = cfg or DataConfig()
    items = load_items(dataset, cfg)
    store = FrameStore(dataset, cfg.split)
    budget = FrameBudget.from_config(cfg)

    def transform(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        pairs = [prompt(q, f, store, budget, cfg.system_prompt) for q, f in zip(batch["question"], batch["frames"])]
        return {"prompt": [p for p, _ in pairs], "images": [im for _, im in pairs], **{k: batch[k] for k in KEEP}}

    return items.with_transform(transform)
