"""What the benchmark runners share: the options every run has (`BenchmarkConfig`, the base of
each benchmark's config), the resumable predictions file, the batched generation loop with its
progress bar, and atomic writes.

`predictions.jsonl` is appended to (and flushed) after every batch, so a run that stops keeps
what it answered; a rerun reads it back and asks the model only for the questions that have no
line yet. A last line cut off by a crash is dropped and recomputed. At the end the file is
rewritten in the benchmark table's order, so the same run gives the same bytes however often it
was resumed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Optional

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from numerical3d.training.benchmarks.backends import BACKENDS, load_backend
from numerical3d.training.benchmarks.core import MAX_NEW_TOKENS, BenchmarkError, Prompt, PromptMode, Visual


def _known_backend(value: str) -> str:
    if value not in BACKENDS:
        raise ValueError(f"unknown backend {value!r}; choose one of {list(BACKENDS)}")
    return value


BackendName = Annotated[str, AfterValidator(_known_backend)]  # a key of BACKENDS


class BenchmarkConfig(BaseModel):
    """What every benchmark run has: where the benchmark is, where the results go, and the model
    answering or the predictions file graded instead. A benchmark's own config subclasses it; each
    field is a command-line option of `numerical3d benchmark run NAME` (`max_new_tokens` is
    `--max-new-tokens`), its description the option's help."""

    model_config = ConfigDict(extra="forbid")

    data: Path = Field(description="The benchmark as released (your own copy).")
    out: Path = Field(description="Output folder: results.json, predictions.jsonl and the plot.")
    model: Optional[str] = Field(None, description="Model folder (or Hub id) to answer the questions.")
    predictions: Optional[Path] = Field(None, description="JSONL of {id, prediction} to grade instead of a model.")
    backend: BackendName = Field("transformers", description=f"Model backend: {' | '.join(BACKENDS)}.")
    prompt: PromptMode = Field("official", description="official (the benchmark's own) | reasoning "
                                                       "(<think>/<answer> format).")
    max_new_tokens: Optional[int] = Field(None, ge=1, description="Generation length (default 16 official, "
                                                                  "1024 reasoning).")
    max_pixels: Optional[int] = Field(None, ge=1, description="Pixels per image or frame (default: the "
                                                              "processor's own limit).")
    batch_size: int = Field(8, ge=1, description="Questions per generate call.")
    limit: Optional[int] = Field(None, ge=1, description="Only the first N questions (smoke runs).")
    name: Optional[str] = Field(None, description="Label of the model in the table and plot.")

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> "BenchmarkConfig":
        """The config from option values, a bad value as one BenchmarkError naming the option."""
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                option = "--" + "-".join(str(p).replace("_", "-") for p in err["loc"]) if err["loc"] else ""
                message = err["msg"].removeprefix("Value error, ")
                problems.append(f"{option}: {message}" if option else message)
            raise BenchmarkError("; ".join(problems)) from None

    def check(self) -> None:
        """What the fields alone cannot say: one source of answers, and a predictions file that exists."""
        if (self.model is None) == (self.predictions is None):
            raise BenchmarkError("pass exactly one of --model PATH and --predictions FILE")
        if self.predictions is not None and not self.predictions.is_file():
            raise BenchmarkError(f"{self.predictions}: predictions file not found")

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


@dataclass(frozen=True)
class ModelInput:
    """How a benchmark feeds a model: the visual mode, the most images one prompt carries, and
    what else decides its prompts (recorded in the run's protocol, e.g. the frame count)."""

    visual: Visual
    max_images: int
    setting: dict[str, Any] = field(default_factory=dict)


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


def file_predictions(cfg: BenchmarkConfig, ids: list[Any], protocol: dict[str, Any]) -> dict[str, str]:
    """The --predictions file, copied to `out/predictions.jsonl` in table order."""
    assert cfg.predictions is not None
    claim_out(cfg.out, protocol)
    predictions = read_predictions(cfg.predictions)
    write_text(cfg.out / "predictions.jsonl", _jsonl(ids, predictions))
    return predictions


@dataclass
class Answers:
    """A run's predictions for its questions and the protocol that produced them."""

    protocol: dict[str, Any]
    predictions: dict[str, str]  # {id as text: raw output}
    missing: int  # questions without a prediction (they score 0)


def collect_predictions(cfg: BenchmarkConfig, items: list[Any], prompts: Callable[[list[Any]], Iterator[Prompt]],
                        description: str, feed: ModelInput,
                        check: Callable[[list[Any]], None] | None = None) -> Answers:
    """The answers to `items` (objects with an `id`): the --predictions file's, or the model's
    (its backend loaded as `feed` says), asked only for what `out/predictions.jsonl` lacks;
    `check` sees the items to answer before the model is loaded."""
    protocol = cfg.protocol(**feed.setting)
    if cfg.predictions is not None:
        predictions = file_predictions(cfg, [it.id for it in items], protocol)
    else:
        log = open_run(cfg.out, protocol)
        todo = [it for it in items if key(it.id) not in log.done]
        if todo:
            if check is not None:
                check(todo)
            backend = load_backend(cfg.backend, str(cfg.model), visual=feed.visual,
                                   max_new_tokens=protocol["max_new_tokens"], max_images=feed.max_images)
            generate_all(prompts(todo), len(todo), backend.generate, log, cfg.batch_size, description)
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
