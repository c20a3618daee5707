"""What the benchmark runners share: prompts with their frames, the resumable predictions file,
the batched generation loop with its progress bar, and atomic writes.

`predictions.jsonl` is appended to (and flushed) after every batch, so a run that stops keeps
what it answered; a rerun reads it back and asks the model only for the questions that have no
line yet. A last line cut off by a crash is dropped and recomputed. At the end the file is
rewritten in the benchmark table's order, so the same run gives the same bytes however often it
was resumed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:
    from numerical3d.training.benchmarks.backends import Visual

PromptMode = Literal["official", "reasoning"]
PROMPTS = ("official", "reasoning")
BACKENDS = ("transformers", "vllm")
# Generation length: lmms-eval's 16 tokens for the official prompts; room to think for the reasoning one.
MAX_NEW_TOKENS = {"official": 16, "reasoning": 1024}


class BenchmarkError(ValueError):
    """A benchmark run that cannot go on; the message names the file and what is wrong."""


@dataclass
class Prompt:
    """One question ready for a model: the prompt text and its visual input."""

    id: Any  # the question's id as the benchmark table has it
    text: str
    frames: list[np.ndarray]  # RGB H x W x 3 uint8: a video's sampled frames, or still images
    # For video frames: {"total_num_frames", "fps", "frames_indices"} of the source video, which
    # transformers' video processors turn into the sampled frames' timestamps.
    video_metadata: dict[str, Any] | None = None


@dataclass
class RunOptions:
    """What every benchmark run has (the CLI's shared options): where the benchmark is, where the
    results go, and the model answering or the predictions file graded instead."""

    data: Path
    out: Path
    model: str | None = None
    predictions: Path | None = None
    backend: str = "transformers"
    prompt: PromptMode = "official"
    max_new_tokens: int | None = None  # None: the benchmark's own length for the prompt mode
    max_pixels: int | None = None  # per image or frame; None leaves the size to the model's processor
    batch_size: int = 8
    limit: int | None = None  # only the first N questions of the table (smoke runs)
    name: str | None = None  # label of the model in the table and plot

    def check(self) -> None:
        if (self.model is None) == (self.predictions is None):
            raise BenchmarkError("pass exactly one of --model PATH and --predictions FILE")
        if self.predictions is not None and not self.predictions.is_file():
            raise BenchmarkError(f"{self.predictions}: predictions file not found")
        if self.prompt not in PROMPTS:
            raise BenchmarkError(f"unknown prompt {self.prompt!r}; choose one of {list(PROMPTS)}")
        if self.backend not in BACKENDS:
            raise BenchmarkError(f"unknown backend {self.backend!r}; choose one of {list(BACKENDS)}")
        if self.batch_size < 1:
            raise BenchmarkError(f"--batch-size must be >= 1, got {self.batch_size}")

    def protocol(self, **setting: Any) -> dict[str, Any]:
        """What decides the predictions (a resumed run must match it; --limit and --batch-size
        do not): the prompt, the benchmark's `setting` (frames, ...), decoding, model. For a
        predictions file: the file and the prompt mode that reads it."""
        if self.predictions is not None:
            return {"prompt": self.prompt, "predictions": str(self.predictions)}
        return {"prompt": self.prompt, **setting, "decoding": "greedy",
                "max_new_tokens": self.max_new_tokens or MAX_NEW_TOKENS[self.prompt], "max_pixels": self.max_pixels,
                "backend": self.backend, "model": self.model}

    def first(self, items: list[Any]) -> list[Any]:
        """The questions this run covers: all, or the first --limit of them."""
        return items if self.limit is None else items[: self.limit]

    def label(self) -> str:
        if self.name:
            return self.name
        return self.predictions.stem if self.predictions is not None else Path(str(self.model)).name


def answer_text(prediction: str, mode: PromptMode) -> str:
    """What the official rule reads: the raw prediction, or (reasoning prompt) the answer inside
    its `<answer>` tags as the project's parser finds it, empty when there is none."""
    from numerical3d import verifiers

    if mode == "official":
        return prediction
    return verifiers.extract_answer(prediction) or ""


def key(question_id: Any) -> str:
    """Ids are matched as text, so a predictions file may write 7 or "7"."""
    return str(question_id)


def read_predictions(path: Path, *, partial_tail: bool = False) -> dict[str, str]:
    """`verifiers.vsibench.read_predictions`, its errors as BenchmarkError for the CLI."""
    from numerical3d.verifiers.vsibench import read_predictions as read

    try:
        return read(path, partial_tail=partial_tail)
    except ValueError as exc:
        raise BenchmarkError(str(exc)) from exc


class PredictionLog:
    """The run's predictions.jsonl: read back on start, appended to per batch."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.done: dict[str, str] = {}
        if self.path.exists():
            self.done = read_predictions(self.path, partial_tail=True)
            raw = self.path.read_bytes()
            if raw and not raw.endswith(b"\n"):  # a line cut off mid-write: drop it before appending
                with self.path.open("r+b") as fh:
                    fh.truncate(raw.rfind(b"\n") + 1)
        self._ids: dict[str, Any] = {}

    def append(self, prompts: Sequence[Prompt], predictions: Sequence[str]) -> None:
        lines = []
        for prompt, prediction in zip(prompts, predictions, strict=True):
            self.done[key(prompt.id)] = prediction
            lines.append(json.dumps({"id": prompt.id, "prediction": prediction}, ensure_ascii=False) + "\n")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write("".join(lines))
            fh.flush()
            os.fsync(fh.fileno())

    def finish(self, ids: Iterable[Any]) -> None:
        """Rewrite the file in table order (ids without a prediction are left out)."""
        write_text(self.path, _jsonl(ids, self.done))


def claim_out(out: Path, protocol: dict[str, Any]) -> None:
    """Record the protocol in `out/run.json`, refusing a folder that holds another run's
    predictions, so a resumed run never mixes two settings (nor a graded file with a model's)."""
    run_file = out / "run.json"
    if run_file.exists() and json.loads(run_file.read_text()) != protocol:
        raise BenchmarkError(f"{out}: holds predictions of a run with another protocol ({run_file}); "
                             "use a new --out or delete that folder")
    write_text(run_file, json.dumps(protocol, indent=1, sort_keys=True) + "\n")


def open_run(out: Path, protocol: dict[str, Any]) -> PredictionLog:
    """The predictions log of a model run in `out` (see `claim_out`)."""
    claim_out(out, protocol)
    return PredictionLog(out / "predictions.jsonl")


def _jsonl(ids: Iterable[Any], predictions: dict[str, str]) -> str:
    return "".join(json.dumps({"id": i, "prediction": predictions[key(i)]}, ensure_ascii=False) + "\n"
                   for i in ids if key(i) in predictions)


def file_predictions(opts: RunOptions, ids: list[Any], protocol: dict[str, Any]) -> dict[str, str]:
    """The --predictions file, copied to `out/predictions.jsonl` in table order."""
    assert opts.predictions is not None
    claim_out(opts.out, protocol)
    predictions = read_predictions(opts.predictions)
    write_text(opts.out / "predictions.jsonl", _jsonl(ids, predictions))
    return predictions


@dataclass
class Answers:
    """A run's predictions for its questions and the protocol that produced them."""

    protocol: dict[str, Any]
    predictions: dict[str, str]  # {id as text: raw output}
    missing: int  # questions without a prediction (they score 0)


def collect_predictions(opts: RunOptions, items: list[Any], prompts: Callable[[list[Any]], Iterator[Prompt]],
                        description: str, *, visual: Visual, max_images: int,
                        check: Callable[[list[Any]], None] | None = None) -> Answers:
    """The answers to `items` (objects with an `id`): the --predictions file's, or the model's
    (its backend loaded with `visual` input and at most `max_images` per prompt), asked only for
    what `out/predictions.jsonl` lacks; `check` sees the items to answer before the model is loaded."""
    protocol = opts.protocol()
    if opts.predictions is not None:
        predictions = file_predictions(opts, [it.id for it in items], protocol)
    else:
        log = open_run(opts.out, protocol)
        todo = [it for it in items if key(it.id) not in log.done]
        if todo:
            if check is not None:
                check(todo)
            from numerical3d.training.benchmarks.backends import load_backend

            backend = load_backend(opts.backend, str(opts.model), visual=visual,
                                   max_new_tokens=protocol["max_new_tokens"], max_images=max_images)
            generate_all(prompts(todo), len(todo), backend.generate, log, opts.batch_size, description)
        log.finish(it.id for it in items)
        predictions = log.done
    return Answers(protocol, predictions, sum(key(it.id) not in predictions for it in items))


def read_table(path: Path, columns: Sequence[str]) -> list[dict[str, Any]]:
    """The rows of a parquet question table, with the `columns` it must have (and any of the
    others that exist among them), as dicts."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise BenchmarkError(f"{path}: cannot read the parquet question table: {exc}") from exc
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise BenchmarkError(f"{path}: the question table lacks column(s) {missing} (has {table.column_names})")
    return table.select(list(columns)).to_pylist()


def generate_all(prompts: Iterator[Prompt], todo: int, generate: Callable[[list[Prompt]], list[str]],
                 log: PredictionLog, batch_size: int, description: str = "answering") -> None:
    """Answer `prompts` in batches of `batch_size`, logging every batch, under a progress bar (stderr)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True)) as progress:  # stdout stays for --json
        task = progress.add_task(description, total=todo)
        batch: list[Prompt] = []
        for prompt in prompts:
            batch.append(prompt)
            if len(batch) == batch_size:
                log.append(batch, generate(batch))
                progress.advance(task, len(batch))
                batch = []
        if batch:
            log.append(batch, generate(batch))
            progress.advance(task, len(batch))


def resize_frames(frames: list[np.ndarray], max_pixels: int | None) -> list[np.ndarray]:
    """Frames scaled down (never up, aspect kept) to at most `max_pixels` pixels each."""
    import cv2

    if max_pixels is None:
        return frames
    out = []
    for frame in frames:
        h, w = frame.shape[:2]
        if h * w <= max_pixels:
            out.append(frame)
            continue
        scale = (max_pixels / (h * w)) ** 0.5
        out.append(cv2.resize(frame, (max(1, int(w * scale)), max(1, int(h * scale))), interpolation=cv2.INTER_AREA))
    return out


def write_text(path: Path, text: str) -> None:
    """Write through a temporary sibling renamed into place (a crash never leaves half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
