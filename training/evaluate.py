"""Evaluation: generate answers with transformers (or vLLM, the benchmarks' backend), grade them per task.

Each answer is graded twice: by the item's own verifier (SNRA accuracy reward at a fixed k, the
discrete score V where there is one, format compliance) and by VSI-Bench's metric
(`verifiers.vsibench.item_score`, the scorer `numerical3d score` uses too: MRA for numeric and
counting answers and coordinates, exact match otherwise), so numbers can be set next to published
VSI-Bench results; `numerical3d benchmark run vsibench` runs the released benchmark itself.
`vsibench_questions` writes the items as a VSI-Bench-format question file (`id, dataset,
scene_name, question_type, question, options, ground_truth`), for tools that read that format.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from numerical3d import verifiers
from numerical3d.verifiers.vsibench import item_score

from numerical3d.training.benchmarks.common import BACKENDS
from numerical3d.training.config import DataConfig
from numerical3d.training.data import FrameBudget, FrameStore, checked_items, framed_prompt
from numerical3d.training.rewards import as_spec

# Our subtasks that VSI-Bench also has, under VSI-Bench's question_type names.
VSI_QUESTION_TYPES = {
    "object_count": "object_counting",
    "object_size": "object_size_estimation",
    "room_size": "room_size_estimation",
    "abs_distance": "object_abs_distance",
    "rel_distance": "object_rel_distance",
    "rel_direction": "object_rel_direction",
    "appearance_order": "obj_appearance_order",
    "route_plan": "route_planning",
}
DIRECTION_LEVELS = {2: "easy", 3: "medium", 4: "hard"}  # VSI-Bench's rel-direction levels by class count


def vsi_question_type(subtask: str, spec: dict[str, Any]) -> str:
    """VSI-Bench's question_type for a subtask (ours where VSI-Bench has no such task)."""
    qtype = VSI_QUESTION_TYPES.get(subtask, subtask)
    if subtask == "rel_direction" and spec["kind"] == "direction":
        level = DIRECTION_LEVELS.get(len(spec.get("classes", [])))
        qtype = f"{qtype}_{level}" if level else qtype
    return qtype


@dataclass
class TaskScores:
    n: int = 0
    vsi: float = 0.0  # mean VSI-Bench score (MRA / exact match)
    reward: float = 0.0  # mean SNRA accuracy reward at the evaluation k
    format_ok: float = 0.0  # fraction of well-formed completions
    parsed: float = 0.0  # fraction with a parseable answer


@dataclass
class EvalReport:
    model: str
    dataset: str
    split: str
    k: float
    tasks: dict[str, TaskScores] = field(default_factory=dict)
    overall: TaskScores = field(default_factory=TaskScores)  # task mean over VSI-Bench's question types
    overall_over: str = "vsibench_tasks"  # or "all_tasks" when no VSI-Bench type is present
    others: TaskScores = field(default_factory=TaskScores)  # task mean over the subtasks VSI-Bench lacks

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def grade(rows: Iterable[dict[str, Any]], completions: list[str], k: float) -> tuple[dict[str, TaskScores], list[dict]]:
    """Per-task means and per-item records for `completions` of the item `rows`."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0.0])
    records = []
    for row, completion in zip(rows, completions, strict=True):
        spec = as_spec(row["verifier"])
        result = verifiers.verify(spec, completion, k)
        score = item_score(spec, result)
        s = sums[row["subtask"]]
        values = (1.0, score, result.accuracy_reward, float(result.format_ok), float(result.parsed is not None))
        for i, v in enumerate(values):
            s[i] += v
        # `prediction`: the key `numerical3d score` and the benchmarks read, so eval's file scores as is.
        records.append({"id": row["id"], "subtask": row["subtask"], "prediction": completion, "vsi_score": score,
                        **result.to_dict()})
    tasks = {t: TaskScores(int(s[0]), *(v / s[0] for v in s[1:])) for t, s in sorted(sums.items())}
    return tasks, records


def vsi_overall(tasks: dict[str, TaskScores]) -> tuple[TaskScores, str]:
    """The task mean over the subtasks VSI-Bench has (its "overall"), and what it covers:
    "vsibench_tasks", or "all_tasks" when none of them is present."""
    vsi = {t: s for t, s in tasks.items() if t in VSI_QUESTION_TYPES}
    return (_overall(vsi), "vsibench_tasks") if vsi else (_overall(tasks), "all_tasks")


def _overall(tasks: dict[str, TaskScores]) -> TaskScores:
    """Task-averaged scores (VSI-Bench averages over tasks, not items)."""
    if not tasks:
        return TaskScores()
    m = len(tasks)
    return TaskScores(
        n=sum(t.n for t in tasks.values()),
        vsi=sum(t.vsi for t in tasks.values()) / m,
        reward=sum(t.reward for t in tasks.values()) / m,
        format_ok=sum(t.format_ok for t in tasks.values()) / m,
        parsed=sum(t.parsed for t in tasks.values()) / m,
    )


def generate(model: Any, processor: Any, rows: list[dict[str, Any]], store: FrameStore, data: DataConfig,
             max_new_tokens: int, batch_size: int) -> list[str]:
    """Greedy answers for `rows`, batched, with the prompts training builds under `data` (the
    frames as images, or as one video with `data.visual: video`, under its budget)."""
    import torch

    from numerical3d.training.video import encode_video_prompts

    budget = FrameBudget.from_config(data)
    out: list[str] = []
    tokenizer = processor.tokenizer
    tokenizer.padding_side = "left"
    for start in range(0, len(rows), batch_size):
        prompts = [framed_prompt(row, store, data, budget) for row in rows[start : start + batch_size]]
        if data.visual == "video":
            encoded = encode_video_prompts(processor, [p.turns for p in prompts], [p.frames for p in prompts],
                                           [p.video_metadata for p in prompts])
            enc = encoded.padded(tokenizer.pad_token_id)
        else:
            texts = [processor.apply_chat_template(p.turns, add_generation_prompt=True, tokenize=False)
                     for p in prompts]
            kwargs: dict[str, Any] = {"text": texts, "return_tensors": "pt", "padding": True}
            if any(p.frames for p in prompts):
                kwargs["images"] = [p.frames for p in prompts]
            enc = processor(**kwargs)
        enc = enc.to(model.device)
        with torch.inference_mode():
            ids = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id)
        out.extend(tokenizer.batch_decode(ids[:, enc["input_ids"].shape[1]:], skip_special_tokens=True))
    return out


def vllm_generate(backend: Any, rows: list[dict[str, Any]], store: FrameStore, data: DataConfig,
                  batch_size: int) -> list[str]:
    """Greedy answers from a `training.benchmarks.backends.VLLMBackend` (loaded with `data.visual`),
    with the frames training would pick for each question."""
    import numpy as np

    from numerical3d.training.benchmarks.common import Prompt

    budget = FrameBudget.from_config(data)
    out: list[str] = []
    for start in range(0, len(rows), batch_size):
        prompts = []
        for row in rows[start : start + batch_size]:
            framed = framed_prompt(row, store, data, budget)
            prompts.append(Prompt(row["id"], row["question"], [np.asarray(im) for im in framed.frames],
                                  video_metadata=framed.video_metadata))
        out.extend(backend.generate(prompts))
    return out


def evaluate(model_path: str, dataset: str, output_dir: str | os.PathLike, *, data: DataConfig | None = None,
             k: float = 100.0, max_new_tokens: int | None = None, batch_size: int = 8,
             backend: str = "transformers") -> EvalReport:
    """Generate and grade answers for `dataset`; write report.json, predictions.jsonl and
    vsibench_questions.jsonl under `output_dir`; return the report.

    `backend` "transformers": the model goes on the GPU in bf16 when there is one. "vllm": the
    benchmarks' vLLM backend, loaded first so a missing vllm fails before any data is read
    (`BenchmarkError`). `max_new_tokens` None is training's generation length: the run's
    `max_completion_length` (train_config.json beside the model folder), else the config default.
    """
    import torch
    from transformers import AutoModelForImageTextToText

    from numerical3d.training.config import TrainConfig

    from numerical3d.training.tiny import load_processor

    data = data or DataConfig(split="validation")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "vllm" and data.system_prompt:
        raise ValueError("the vllm backend sends no system turn; evaluate with backend='transformers'")
    if max_new_tokens is None:
        run_config = Path(model_path).parent / "train_config.json"
        cfg = TrainConfig.model_validate_json(run_config.read_text()) if run_config.is_file() else TrainConfig()
        max_new_tokens = cfg.max_completion_length
    if backend == "vllm":
        from numerical3d.training.benchmarks.backends import VLLMBackend

        engine = VLLMBackend.load(model_path, visual=data.visual, max_new_tokens=max_new_tokens,
                                  max_images=data.frames_per_prompt)
    store = FrameStore(dataset, data.split)
    items, _ = checked_items(dataset, data, store)
    rows = list(items)
    if backend == "vllm":
        completions = vllm_generate(engine, rows, store, data, batch_size)
    else:
        cuda = torch.cuda.is_available()
        model = AutoModelForImageTextToText.from_pretrained(model_path, dtype=torch.bfloat16 if cuda else torch.float32,
                                                            device_map="auto" if cuda else None)
        model.eval()
        processor = load_processor(model_path)
        completions = generate(model, processor, rows, store, data, max_new_tokens, batch_size)
    tasks, records = grade(rows, completions, k)
    overall, over = vsi_overall(tasks)
    others = _overall({t: v for t, v in tasks.items() if t not in VSI_QUESTION_TYPES}) if over == "vsibench_tasks" \
        else TaskScores()
    report = EvalReport(model=str(model_path), dataset=str(dataset), split=data.split, k=k, tasks=tasks,
                        overall=overall, overall_over=over, others=others)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "report.json", json.dumps(report.to_dict(), indent=1))
    _write(out / "predictions.jsonl", "".join(json.dumps(r, default=str) + "\n" for r in records))
    _write(out / "vsibench_questions.jsonl", "".join(json.dumps(q) + "\n" for q in vsibench_questions(rows)))
    return report


def vsibench_questions(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items as VSI-Bench question rows; multiple choice options carry VSI's "A. text" labels."""
    out = []
    for i, row in enumerate(rows):
        spec = as_spec(row["verifier"])
        options = row.get("options")
        if options:
            letters = "ABCDEFGHIJ"
            options = [f"{letters[j]}. {text}" for j, text in enumerate(options)]
        answer = spec["answer"]
        out.append({
            "id": i,
            "item_id": row["id"],
            "dataset": row.get("source"),
            "scene_name": row.get("scene_id"),
            "question_type": vsi_question_type(row["subtask"], spec),
            "question": row["question"],
            "options": options,
            "ground_truth": answer if isinstance(answer, (str, int, float)) else json.dumps(answer),
        })
    return out


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
