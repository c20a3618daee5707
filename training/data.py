"""Hand-off from the built dataset to TRL: conversational prompts with a question's frames.

The dataset (a local folder in the Hub layout, or a Hub id) has a `default` config of questions
and a `frames` config holding each scene frame once (`frame_id`, `image`). A local folder is opened
with `numerical3d.dataset.DatasetFolder`, the one reader of every command: it refuses a folder
without a committed manifest or of an unknown format version, and reads it the way the Hub does
(configs, splits and files from the `configs` of the card's YAML header), so training depends on
the published layout, not on how the pipeline happens to name its shards. A question's frames go in one of two ways (`data.visual`):
as images (a list of PIL images in an `images` column, TRL's own VLM path) or as one video (the
frames in a `video` column with `video_metadata`, fed by `training.video`). Either way they are
picked under a frame and pixel budget: at most `max_frames` frames sampled uniformly in time, each
resized (aspect kept) to at most `max_pixels`, and fewer pixels per frame when `max_total_pixels`
would be exceeded. Frames are decoded lazily per batch (`with_transform`), so 50k items never sit
decoded in memory.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from numerical3d.dataset import DatasetError, DatasetFolder
from numerical3d.training.config import DataConfig

KEEP = ("id", "subtask", "answer", "verifier", "source", "scene_id")  # columns that reach the reward functions


@dataclass(frozen=True)
class FrameBudget:
    max_frames: int = 8
    max_pixels: int | None = 448 * 448  # None: frames keep their stored size (the processor sizes them)
    max_total_pixels: int | None = 8 * 448 * 448

    @classmethod
    def from_config(cls, cfg: DataConfig) -> "FrameBudget":
        """The budget of `cfg`'s visual mode: `data.video`'s for a video, `data`'s own for images;
        no frames at all in a text-only run (`frameless: text`)."""
        frames = 0 if cfg.frameless == "text" else cfg.frames_per_prompt
        if cfg.visual == "video":
            return cls(frames, cfg.video.max_pixels, None)
        return cls(frames, cfg.max_pixels, cfg.max_total_pixels)

    def pick(self, n: int) -> list[int]:
        """Indices of at most `max_frames` of n frames, evenly spread, first and last kept."""
        if n <= self.max_frames:
            return list(range(n))
        if self.max_frames == 1:
            return [n // 2]
        return sorted({round(i * (n - 1) / (self.max_frames - 1)) for i in range(self.max_frames)})

    def per_frame_pixels(self, n: int) -> int | None:
        caps = [self.max_pixels, self.max_total_pixels // max(n, 1) if self.max_total_pixels else None]
        return min((c for c in caps if c), default=None)

    def resize(self, image: Any, pixels: int | None) -> Any:
        """The image in RGB, scaled down (never up) to at most `pixels` pixels (None: as stored)."""
        image = image.convert("RGB")
        w, h = image.size
        if pixels is None or w * h <= pixels:
            return image
        scale = math.sqrt(pixels / (w * h))
        return image.resize((max(1, int(w * scale)), max(1, int(h * scale))))


def _raw_json(features: Any) -> Any:
    """`features` with every JSON column (verifier, provenance) read as its raw text: `datasets`
    would parse those cells as rows are drawn, so one malformed cell would stop the whole run
    with a traceback naming neither the row nor the file; as text, each row is checked here
    (`checked_items`) and a bad one is skipped and reported."""
    import datasets

    return datasets.Features({k: datasets.Value("string") if type(v).__name__ == "Json" else v
                              for k, v in features.items()})


def _load(dataset: str, config: str, split: str):
    import datasets

    path = Path(dataset)
    try:
        if path.is_dir():
            folder = DatasetFolder(path)
            files = [str(f) for f in folder.files(config, split)]
            return datasets.load_dataset("parquet", data_files={split: files}, split=split,
                                         features=_raw_json(folder.features(config)))
        loaded = datasets.load_dataset(dataset, config, split=split)
        raw = _raw_json(loaded.features)
        return loaded if raw == loaded.features else loaded.cast(raw)
    except DatasetError:
        raise
    except Exception as exc:  # datasets raises many types; name the dataset and config
        raise DatasetError(f"{dataset}: cannot load config {config!r} split {split!r}: {exc}") from exc


def _filtered(dataset: str, cfg: DataConfig):
    """The question rows of `dataset` (`default` config), subtask-filtered and shuffled per `cfg`."""
    items = _load(dataset, "default", cfg.split)
    missing = {"id", "subtask", "question", "verifier", "frames"} - set(items.column_names)
    if missing:
        raise DatasetError(f"{dataset}: question rows lack column(s) {sorted(missing)}")
    if cfg.subtasks:
        wanted = set(cfg.subtasks)
        items = items.filter(lambda s: s in wanted, input_columns="subtask")
    return items.shuffle(seed=cfg.shuffle_seed)


def _take(items, dataset: str, cfg: DataConfig):
    if cfg.max_items is not None:
        items = items.select(range(min(cfg.max_items, len(items))))
    if len(items) == 0:
        raise DatasetError(f"{dataset}: no items left after filtering (split {cfg.split!r}, subtasks {cfg.subtasks})")
    return items


def load_items(dataset: str, cfg: DataConfig | None = None):
    """The question rows of `dataset` (`default` config), filtered and shuffled per `cfg`, unchecked:
    the JSON columns (`verifier`, `provenance`) as their raw text."""
    cfg = cfg or DataConfig()
    return _take(_filtered(dataset, cfg), dataset, cfg)


@dataclass
class DataReport:
    """What loading kept and what it left out, by item id: written to the run folder as data_report.json."""

    dataset: str
    split: str
    loaded: int  # rows after the subtask filter
    kept: int  # rows that train (after max_items)
    frameless_policy: str
    frameless: list[str] = field(default_factory=list)  # ids of items without frames
    bad: list[dict[str, str]] = field(default_factory=list)  # {id, file, reason}: rows that cannot be scored or shown

    def summary(self) -> str:
        dropped = f", {len(self.frameless)} frameless skipped" if self.frameless_policy == "skip" else \
            f", {len(self.frameless)} frameless (text-only run)"
        return f"{self.kept} of {self.loaded} items train; {len(self.bad)} bad row(s) skipped{dropped}"

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, path)
        return path


def _row_problem(row: dict[str, Any], store: "FrameStore | None") -> str | None:
    """Why a row cannot train (its verifier spec is invalid, a frame it names is absent), or None."""
    from numerical3d.verifiers import SpecError, validate_spec

    from numerical3d.training.rewards import as_spec

    try:
        validate_spec(as_spec(row["verifier"]))
    except (SpecError, ValueError) as exc:
        return f"verifier: {exc}"
    frames = row["frames"] or []
    if store is not None:
        absent = [f for f in frames if f not in store.index]
        if absent:
            return f"frames config has no frame(s) {absent[:3]}"
    return None


def checked_items(dataset: str, cfg: DataConfig, store: "FrameStore | None" = None):
    """`load_items` with every row validated first: rows with a bad verifier spec or missing frames
    are left out, and frameless items too unless `cfg.frameless` is "text" (a text-only run).
    Returns (items, DataReport)."""
    items = _filtered(dataset, cfg)
    keep: list[int] = []
    report = DataReport(str(dataset), cfg.split, len(items), 0, cfg.frameless)
    for i, row in enumerate(items.select_columns(["id", "verifier", "frames"])):
        problem = _row_problem(row, store)
        if problem is not None:
            report.bad.append({"id": row["id"], "file": "", "reason": problem})
            continue
        if not row["frames"] and cfg.frames_per_prompt > 0:
            report.frameless.append(row["id"])
            if cfg.frameless == "skip":
                continue
        keep.append(i)
    if report.bad:
        where = row_files(dataset, cfg.split)
        for bad in report.bad:
            bad["file"] = where.get(bad["id"], f"{dataset} (split {cfg.split})")
    if len(keep) < len(items):
        items = items.select(keep)
    items = _take(items, dataset, cfg)
    report.kept = len(items)
    return items, report


def row_files(dataset: str, split: str) -> dict[str, str]:
    """id -> the parquet file of a local dataset folder that holds that row (empty for a Hub id)."""
    if not Path(dataset).is_dir():
        return {}
    return {str(row["id"]): str(path) for _, path, row in DatasetFolder(dataset).file_rows("default", split, ["id"])}


def valid_spec(cell: Any) -> dict[str, Any] | None:
    """The verifier spec of a raw cell, or None when the cell is not a valid spec."""
    from numerical3d.verifiers import SpecError, validate_spec

    from numerical3d.training.rewards import as_spec

    try:
        spec = as_spec(cell)
        validate_spec(spec)
    except (SpecError, ValueError):
        return None
    return spec


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


def conversation(question: str, n_frames: int, system_prompt: str | None = None,
                 visual: str = "images") -> list[dict[str, Any]]:
    """One user turn: the frames (an image part each, or one video part), then the question text
    (after a system turn, if given)."""
    if visual == "video":
        content: list[dict[str, Any]] = [{"type": "video"}] if n_frames else []
    else:
        content = [{"type": "image"} for _ in range(n_frames)]
    content.append({"type": "text", "text": question})
    system = [{"role": "system", "content": [{"type": "text", "text": system_prompt}]}] if system_prompt else []
    return [*system, {"role": "user", "content": content}]


@dataclass
class FramedPrompt:
    """A question as the policy sees it: the turns, the chosen frames (PIL, RGB) and, for a video,
    the metadata Qwen's processor reads time from: `total_num_frames` (the item's frames), `fps`
    (those frames over `data.video.duration_s`) and `frames_indices` (the chosen ones), the form
    VSI-Bench's sampled videos carry."""

    turns: list[dict[str, Any]]
    frames: list[Any]
    video_metadata: dict[str, Any] | None = None


def prompt(question: str, frame_ids: list[str], store: FrameStore, budget: FrameBudget,
           system_prompt: str | None = None, visual: str = "images", duration_s: float = 60.0) -> FramedPrompt:
    """One question's prompt: frames picked uniformly in time under the budget, as images or one video."""
    picked = budget.pick(len(frame_ids))
    chosen = [frame_ids[i] for i in picked]
    pixels = budget.per_frame_pixels(len(chosen))
    frames = [budget.resize(im, pixels) for im in store.images(chosen)] if chosen else []
    metadata = None
    if visual == "video" and frames:
        metadata = {"total_num_frames": len(frame_ids), "fps": len(frame_ids) / duration_s, "frames_indices": picked}
    return FramedPrompt(conversation(question, len(chosen), system_prompt, visual), frames, metadata)


def framed_prompt(row: dict[str, Any], store: FrameStore, cfg: DataConfig, budget: FrameBudget) -> FramedPrompt:
    """`prompt` for a question row under `cfg` (its visual mode, system prompt and video timing)."""
    return prompt(row["question"], row["frames"], store, budget, cfg.system_prompt, cfg.visual, cfg.video.duration_s)


def canonical_turn(verifier: Any) -> list[dict[str, Any]]:
    """The assistant turn answering with the item's canonical completion (`<think>..</think><answer>..</answer>`)."""
    from numerical3d.verifiers import canonical_completion

    from numerical3d.training.rewards import as_spec

    return [{"role": "assistant", "content": [{"type": "text", "text": canonical_completion(as_spec(verifier))}]}]


def prompt_dataset(dataset: str, cfg: DataConfig | None = None, *, completions: bool = False):
    """TRL-ready rows: `prompt` (conversational), the frames (`images`, a PIL list; or, with
    `data.visual: video`, `video` and `video_metadata`), and the columns the reward functions read
    (`verifier`, `subtask`, `answer`, `id`, `source`, `scene_id`); with `completions`, SFT rows
    instead: `prompt`, `images` and the canonical answer as `completion`.

    The result is the filtered question table with a lazy transform; frames are decoded when a
    batch is read.
    Rows that would crash the run when drawn (bad verifier spec, missing frames) are left out and
    reported; returns (dataset, DataReport).
    """
    from numerical3d.training.rewards import as_spec

    cfg = cfg or DataConfig()
    store = FrameStore(dataset, cfg.split)
    items, report = checked_items(dataset, cfg, store)
    budget = FrameBudget.from_config(cfg)

    def transform(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        rows = [dict(zip(batch, values)) for values in zip(*batch.values())]
        prompts = [framed_prompt(row, store, cfg, budget) for row in rows]
        out: dict[str, list[Any]] = {"prompt": [p.turns for p in prompts]}
        if cfg.visual == "video":
            out.update(video=[p.frames for p in prompts], video_metadata=[p.video_metadata for p in prompts])
        else:
            out["images"] = [p.frames for p in prompts]
        if completions:
            return {**out, "completion": [canonical_turn(v) for v in batch["verifier"]]}
        # Checked rows only reach here, so each verifier cell parses: the reward functions get the spec dict.
        return {**out, **{k: batch[k] for k in KEEP}, "verifier": [as_spec(v) for v in batch["verifier"]]}

    return items.with_transform(transform), report
