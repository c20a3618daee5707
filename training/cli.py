"""Training's commands: `train`, `eval`, `reward`, `plot-snra` and `benchmark run NAME|list`.

Mounted at the root of the `numerical3d` console script (`cli.py`, the module `numerical3d.cli`). This module imports
only `training` and `verifiers`; heavy imports (torch, TRL, matplotlib) happen inside the commands.
The one thing training cannot do alone, building the demo dataset behind `train --preset tiny-cpu`
without `--dataset`, is the pipeline's job: the root hands it over as `Stages` in the command
context.

Multi-GPU runs go through `accelerate launch` (see docs/training.md), e.g.
`accelerate launch --config_file zero3.yaml $(which numerical3d) train --config qwen2.5-vl-7b ...`;
`train --plan` checks such a launch's memory first (training/memory.py).
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import typer
from pydantic import BaseModel, Field

from numerical3d.configfile import deep_merge
from numerical3d.errors import Numerical3DError
from numerical3d.training.benchmarks.command import RunGroup
from numerical3d.options import option_parameters, with_options

app = typer.Typer(help="AP-GRPO training, evaluation and the reward functions from the shell.")

CONFIG_HELP = "YAML config file, or a bundled name: qwen2.5-vl-7b, qwen2.5-vl-3b, ablations/s1_grpo_binary, ..."


@dataclass(frozen=True)
class Stages:
    """What the console script's root gives training's commands: `demo_dataset(output)` builds the
    small synthetic dataset of `--preset tiny-cpu` and returns its folder."""

    demo_dataset: Callable[[Path], str]


class TrainOptions(BaseModel):
    """The options of `numerical3d train`, one per field (`options.py` makes them). `override`
    names the training config key an option sets when given (a flag left off, or a value left unset,
    sets nothing); `with` makes it set only beside the option named there."""

    config: Optional[str] = Field(None, description=CONFIG_HELP + " (default with --preset: its own)",
                                  json_schema_extra={"flags": ["--config", "-c"]})
    dataset: Optional[str] = Field(None, description="Built dataset: local folder or Hub id (overrides the config).")
    output: Path = Field(Path("runs/ap-grpo"), description="Run folder: checkpoints, final model, plots.",
                         json_schema_extra={"flags": ["--output", "-o"]})
    preset: Optional[str] = Field(None, description="tiny-cpu: a few AP-GRPO steps offline on a tiny model.")
    model: Optional[str] = Field(None, description="Model path or Hub id (overrides the config).")
    max_steps: Optional[int] = Field(None, description="Stop after this many optimizer steps.",
                                     json_schema_extra={"override": "max_steps"})
    use_vllm: bool = Field(False, description="Generate with vLLM (see docs/training.md).",
                           json_schema_extra={"flags": ["--use-vllm"], "override": "grpo.use_vllm"})
    vllm_mode: str = Field("colocate", description="vLLM mode: colocate | server.",
                           json_schema_extra={"override": "grpo.vllm_mode", "with": "use_vllm"})
    deepspeed: Optional[Path] = Field(None, description="DeepSpeed JSON config (ZeRO-2/3) for TRL.",
                                      json_schema_extra={"override": "grpo.deepspeed"})
    resume: bool = Field(False, description="Continue from the latest checkpoint-* in --output.",
                         json_schema_extra={"flags": ["--resume"]})
    report_to: Optional[str] = Field(None, description="Live loggers, comma-separated: tensorboard, wandb (or none).",
                                     json_schema_extra={"override": "grpo.report_to"})
    save_total_limit: Optional[int] = Field(None, description="Keep at most this many checkpoints.",
                                            json_schema_extra={"min": 1, "override": "grpo.save_total_limit"})
    visual: Optional[str] = Field(None, description="images | video: a question's frames as images or as one "
                                  "Qwen2.5-VL video (overrides data.visual; video needs torchvision).",
                                  json_schema_extra={"override": "data.visual"})
    plan_only: bool = Field(False, description="Print the memory plan of this config and launch, train nothing; "
                            "exit 0 if it fits, 1 if not.", json_schema_extra={"flags": ["--plan"]})
    accelerate_config: Optional[str] = Field(None, description="With --plan: the accelerate config (bundled name: "
                                             "zero2, zero3, ... or a path; default: the running launch, else the "
                                             "model's recipe).", json_schema_extra={"flags": ["--accelerate-config"]})
    gpus: Optional[int] = Field(None, description="With --plan: GPUs (overrides num_processes).",
                                json_schema_extra={"flags": ["--gpus"], "min": 1})
    gpu_memory: Optional[float] = Field(None, description="With --plan: GiB per GPU (default: this machine's GPU, "
                                        "else 80).", json_schema_extra={"flags": ["--gpu-memory"], "min": 1.0})
    host_memory: Optional[float] = Field(None, description="With --plan: host RAM per node in GiB (default: not "
                                         "checked without a GPU here).",
                                         json_schema_extra={"flags": ["--host-memory"], "min": 1.0})
    skip_plan: bool = Field(False, description="Launch even if the memory plan says it cannot fit (the plan is an "
                            "estimate).", json_schema_extra={"flags": ["--skip-plan"]})

    def overrides(self, convert: dict[str, Callable[[Any], Any]]) -> dict[str, Any]:
        """The nested config keys the given options set; `convert` turns a field's value into the key's."""
        out: dict[str, Any] = {}
        for name, field in type(self).model_fields.items():
            extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
            value, key, beside = getattr(self, name), extra.get("override"), extra.get("with")
            if key is None or value is None or value is False or (beside and not getattr(self, str(beside))):
                continue
            *parents, leaf = str(key).split(".")
            node = out
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = convert.get(name, lambda v: str(v) if isinstance(v, Path) else v)(value)
        return out


def train_command(ctx: typer.Context, **values: Any) -> None:
    """Train with AP-GRPO (or an ablation, or SFT: ablations/s0_sft) on a built Numerical3D dataset.

    On a GPU machine the memory plan (see --plan) is checked first and a launch that cannot fit is
    refused with the biggest term and the setting that fixes it."""
    opts = TrainOptions(**values)
    config, preset, output, model = opts.config, opts.preset, opts.output, opts.model
    from rich.console import Console
    from rich.markup import escape

    from numerical3d.training.config import PRESET_CONFIGS, PRESETS, load_config
    from numerical3d.training.memory import preflight
    from numerical3d.training.run import run_training
    from numerical3d.training.tiny import tiny_model_for

    console = Console(stderr=True, soft_wrap=True)  # paths in messages stay whole
    overrides: dict = {}
    if preset is not None:
        if preset not in PRESETS:
            raise typer.BadParameter(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
        overrides = json.loads(json.dumps(PRESETS[preset]))
        config = config or PRESET_CONFIGS[preset]
    if config is None:
        raise typer.BadParameter("give a config (a YAML file or a bundled name), or a --preset", param_hint="--config")
    overrides = deep_merge(overrides, opts.overrides({"report_to": _loggers}))
    if opts.plan_only:
        _plan(config, overrides, model, opts.accelerate_config, opts.gpus, opts.gpu_memory, opts.host_memory, console)
        return
    try:
        cfg = load_config(config, overrides)
        data = opts.dataset or cfg.data.dataset
        if data is None:
            if preset != "tiny-cpu":
                raise typer.BadParameter("no dataset: pass --dataset DIR|HUB_ID or set data.dataset in the config")
            if not isinstance(ctx.obj, Stages):
                raise typer.BadParameter("--preset tiny-cpu builds its dataset with the pipeline: run it as "
                                         "`numerical3d train`, or pass --dataset")
            console.print("building a small synthetic dataset with the pipeline ...")
            data = ctx.obj.demo_dataset(output)
        if model is not None:
            cfg.model.name_or_path = model
        elif preset == "tiny-cpu":
            console.print("building the tiny Qwen2.5-VL ...")
            cfg.model.name_or_path = str(tiny_model_for(output, data, cfg.data.split))
        if not opts.skip_plan:
            checked = preflight(cfg)
            if checked is not None and os.environ.get("LOCAL_RANK", "0") == "0":
                console.print(checked.render())
        result = run_training(cfg, data, output, resume=opts.resume)
    except Numerical3DError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    key = "ap/k" if result.diagnostics_png else "loss"  # an SFT run logs its loss, no ap/* metrics
    last = next((e for e in reversed(result.log_history) if key in e), {})
    console.print(f"model: {result.model_dir}" + (f"  diagnostics: {result.diagnostics_png}" if result.diagnostics_png
                                                   else ""))
    report = json.loads((result.output_dir / "data_report.json").read_text())
    console.print(f"data: {report['kept']} of {report['loaded']} items trained, {len(report['bad'])} bad row(s) and "
                  f"{len(report['frameless'])} frameless item(s) ({report['frameless_policy']}): "
                  f"{result.output_dir / 'data_report.json'}")
    for bad in report["bad"][:20]:
        console.print(f"  skipped row {bad['id']} of {bad.get('file', '?')}: {escape(bad['reason'])}", highlight=False)
    res = result.results
    bench = f", {res.t_conv_over} overall {res.benchmark['overall']}" if res.benchmark else ""
    console.print(f"results: accuracy {res.accuracy}{bench}, t_conv {res.t_conv} (on {res.t_conv_over}), "
                  f"adv_var_mean {res.adv_var_mean} ({result.output_dir / 'results.json'})")
    shown = sorted(k for k in last if k.startswith("ap/")) if result.diagnostics_png else ["loss"]
    console.print("last step: " + ", ".join(f"{k}={last[k]:.4g}" for k in shown if k in last))


app.command("train")(with_options(train_command, [
    inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
    *option_parameters(TrainOptions)], train_command.__doc__))


def _plan(config: str, overrides: dict, model: Optional[str], accelerate_config: Optional[str], gpus: Optional[int],
          gpu_memory: Optional[float], host_memory: Optional[float], console) -> None:
    """`train --plan`: print the memory plan; exit 0 when it fits, 1 when not, 2 on a bad input."""
    from numerical3d.training.config import load_config
    from numerical3d.training.memory import (gpu_memory_here, launch_from_environment, plan,
                                             read_launch, recommended_accelerate_config)

    try:
        cfg = load_config(config, overrides)
        if model is not None:
            cfg.model.name_or_path = model
        if accelerate_config is not None:
            launch = read_launch(accelerate_config, gpus)
        else:
            launch = launch_from_environment() or read_launch(recommended_accelerate_config(cfg, config), gpus)
        result = plan(cfg, launch, gpu_memory_gib=gpu_memory or gpu_memory_here() or 80.0,
                      host_memory_gib=host_memory)
    except Numerical3DError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    typer.echo(result.render())
    if not result.fits:
        raise typer.Exit(1)


LOGGER_EXTRAS = {"tensorboard": "tensorboard", "wandb": "wandb"}


def _loggers(value: str) -> list[str]:
    """`--report-to` names, checked against the loggers transformers can find installed."""
    from transformers.integrations import get_available_reporting_integrations

    names = [n.strip() for n in value.split(",") if n.strip()]
    if names == ["none"]:
        return names
    unknown = [n for n in names if n not in LOGGER_EXTRAS]
    if unknown:
        raise typer.BadParameter(f"--report-to: unknown logger(s) {unknown}; choose from {sorted(LOGGER_EXTRAS)} or none")
    available = get_available_reporting_integrations()
    missing = [n for n in names if n not in available]
    if missing:
        extras = ",".join(LOGGER_EXTRAS[n] for n in missing)
        raise typer.BadParameter(f"--report-to: {', '.join(missing)} not installed; pip install -e \".[{extras}]\"")
    return names


@app.command("eval")
def eval_command(
    model: str = typer.Option(..., help="Trained model folder (or Hub id)."),
    dataset: str = typer.Option(..., help="Built dataset: local folder or Hub id."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Report folder (default <model>/eval)."),
    split: str = typer.Option("validation", help="Dataset split to evaluate."),
    k: float = typer.Option(100.0, help="SNRA sharpness for the reward column (the schedule's kmax)."),
    max_items: Optional[int] = typer.Option(None, help="Evaluate only the first N items."),
    visual: str = typer.Option("images", help="images | video: the frames as images or as one video, as the model trained."),
    max_frames: Optional[int] = typer.Option(None, help="Frames per question (default: 8 images, 32 video frames)."),
    max_pixels: Optional[int] = typer.Option(None, help="Pixels per frame (default: 448 x 448 images; the processor's "
                                                        "own limit for video)."),
    max_new_tokens: Optional[int] = typer.Option(None, help="Generation length (default: training's, from the run's train_config.json, else 512)."),
    batch_size: int = typer.Option(8, help="Questions per generate call."),
    backend: str = typer.Option("transformers", help="transformers | vllm (pip install -e \".[train,vllm]\", CUDA)."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON instead of a table."),
    force: bool = typer.Option(False, "--force", help="Write the report into a folder holding files eval did not write (kept)."),
) -> None:
    """Answer the dataset's questions with a model; grade with the items' verifiers and VSI-Bench's MRA."""
    from rich.console import Console
    from rich.table import Table

    from numerical3d.dataset.outputs import OutputRefused, claim_folder

    from numerical3d.training.benchmarks.common import BACKENDS
    from numerical3d.training.config import DataConfig, VideoConfig
    from numerical3d.training.evaluate import evaluate

    if backend not in BACKENDS:
        raise typer.BadParameter(f"--backend: unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if visual not in ("images", "video"):
        raise typer.BadParameter(f"--visual: choose images or video, got {visual!r}")
    if visual == "video":
        video = VideoConfig(**{k: v for k, v in (("max_frames", max_frames), ("max_pixels", max_pixels)) if v})
        data = DataConfig(split=split, visual="video", video=video, max_items=max_items)
    else:
        frames, pixels = max_frames or 8, max_pixels or 448 * 448
        data = DataConfig(split=split, max_frames=frames, max_pixels=pixels, max_total_pixels=frames * pixels,
                          max_items=max_items)
    out = output or Path(model) / "eval"
    local = Path(model).expanduser().exists()
    try:  # the report folder: never inside the dataset, nobody else's files replaced
        owned = claim_folder(out, "eval", inputs=[dataset] if Path(dataset).expanduser().exists() else [], force=force)
    except OutputRefused as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(5)
    try:
        report = evaluate(model, dataset, out, data=data, k=k, max_new_tokens=max_new_tokens, batch_size=batch_size,
                          backend=backend)
        owned.adopt()
        owned.finish()
    except Numerical3DError as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    except OSError as exc:  # what transformers raises for a model it cannot find, locally or on the Hub
        if local:
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] --model {model}: no such model folder, and "
                                                   f"not a model the Hub gave ({first})", highlight=False)
        raise typer.Exit(2)
    if json_out:
        typer.echo(json.dumps(report.to_dict(), sort_keys=True))
        return
    table = Table(title=f"{model} on {dataset} ({split}), k = {k:g}")
    for col in ("task", "n", "VSI score", "SNRA reward", "format ok", "parsed"):
        table.add_column(col, justify="left" if col == "task" else "right")
    rows = [*report.tasks.items(), (f"overall ({report.overall_over.replace('_', ' ')})", report.overall)]
    if report.others.n:
        rows.append(("other subtasks (task mean)", report.others))
    for name, t in rows:
        table.add_row(name, str(t.n), f"{t.vsi:.3f}", f"{t.reward:.3f}", f"{t.format_ok:.3f}", f"{t.parsed:.3f}")
    Console().print(table)
    Console().print(f"report: {out / 'report.json'}  VSI-Bench questions: {out / 'vsibench_questions.jsonl'}")


def _resolve_k(k: Optional[float], step: Optional[int], total_steps: Optional[int], schedule: str,
               kmin: float, kmax: float) -> float:
    from numerical3d.verifiers import sharpness

    if k is not None:
        if step is not None or total_steps is not None:
            raise typer.BadParameter("give either --k or --step/--total-steps, not both")
        if not k > 0:
            raise typer.BadParameter(f"--k must be > 0, got {k}")
        return k
    if step is None or total_steps is None:
        raise typer.BadParameter("give --k, or both --step and --total-steps")
    try:
        return sharpness(step, total_steps, schedule=schedule, kmin=kmin, kmax=kmax)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


@app.command("reward")
def reward(
    input: str = typer.Argument("-", help="JSON lines {'verifier': spec, 'completion': '...'}; '-' reads stdin."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write JSON lines here instead of stdout."),
    k: Optional[float] = typer.Option(None, "--k", help="SNRA sharpness k."),
    step: Optional[int] = typer.Option(None, "--step", help="Training step t (k from the schedule)."),
    total_steps: Optional[int] = typer.Option(None, "--total-steps", help="Total steps T."),
    schedule: str = typer.Option("sigmoid", "--schedule", help="sigmoid | linear | fixed (fixed uses kmax)."),
    kmin: float = typer.Option(1.0, "--kmin"),
    kmax: float = typer.Option(100.0, "--kmax", help="The schedule's terminal sharpness; Phi is calibrated "
                                                      "at it, as training calibrates at reward.kmax."),
    operator: str = typer.Option("snra", "--operator", help="snra | tanh | binary."),
    profile: str = typer.Option("paper", "--profile", help="Verifier profile: paper (the specs as generated) "
                                                          "| strict (less partial credit), as reward.profile."),
) -> None:
    """Score completions with their verifiers: one JSON line out per line in, with
    error, score (discrete kinds, else null), format_ok, accuracy_reward (SNRA r) and reward (R).
    Discrete scores map to errors through Phi calibrated at --kmax (a complete failure gets
    reward 0.01 at k = kmax), so the rewards equal those of a training run with that reward.kmax.

    A spec without `version` is read as the current version. A line that cannot be scored gets
    `{"line", "input_error"}` in its place (and a message on stderr); the others are still scored,
    and the exit code is 2."""
    from numerical3d.verifiers import PROFILES, PhiConfig, apply_profile, verify_batch

    if profile not in PROFILES:
        typer.echo(f"error: --profile {profile!r}: unknown verifier profile; known: {', '.join(PROFILES)}", err=True)
        raise typer.Exit(2)
    kk = _resolve_k(k, step, total_steps, schedule, kmin, kmax)
    try:
        phi_config = PhiConfig(kmax=kmax)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--kmax") from None
    name = "<stdin>" if input == "-" else input
    try:
        stream = sys.stdin if input == "-" else open(input, encoding="utf-8")
    except OSError as exc:
        raise typer.BadParameter(f"{input}: {exc.strerror}") from None
    rows: list[dict] = []  # in input order: {"lineno", "id", "spec", "completion"} or {"lineno", "id", "bad"}
    with stream:
        for lineno, line in enumerate(stream, 1):
            if line.strip():
                rows.append(_reward_row(line, lineno))
    good = [r for r in rows if "bad" not in r]
    try:
        specs = [r["spec"] if profile == "paper" else apply_profile(r["spec"], profile) for r in good]
        results = iter(verify_batch(specs, [r["completion"] for r in good], kk,
                                    phi_config=phi_config, operator=operator))
    except ValueError as exc:  # an unknown --operator
        raise typer.BadParameter(str(exc), param_hint="--operator") from None
    lines = []
    for row in rows:
        if "bad" in row:
            typer.echo(f"{name}:{row['lineno']}: {row['bad']}", err=True)
            d = {"line": row["lineno"], "input_error": row["bad"]}
        else:
            res = next(results)
            d = {"error": res.error, "score": res.score, "format_ok": res.format_ok,
                 "accuracy_reward": res.accuracy_reward, "reward": res.reward, "parsed": res.parsed}
        if row["id"] is not None:
            d = {"id": row["id"], **d}
        lines.append(json.dumps(d, ensure_ascii=False))
    text = "\n".join(lines) + ("\n" if lines else "")
    if out is None:
        sys.stdout.write(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)
    if len(good) < len(rows):
        raise typer.Exit(2)  # every good line is scored; the exit code says some were not


def _reward_row(line: str, lineno: int) -> dict:
    """One input line of `reward`: its spec (without `version`: the current one) and completion,
    or why it cannot be scored (`bad`), so that one bad line costs only its own record."""
    from numerical3d.verifiers import SPEC_VERSION, SpecError, validate_spec

    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        return {"lineno": lineno, "id": None, "bad": f"not valid JSON ({exc.msg})"}
    if not isinstance(row, dict) or not isinstance(row.get("verifier"), dict) or "completion" not in row:
        return {"lineno": lineno, "id": row.get("id") if isinstance(row, dict) else None,
                "bad": "expected an object with 'verifier' (an object) and 'completion'"}
    spec = {"version": SPEC_VERSION, **row["verifier"]}
    try:
        validate_spec(spec)
    except SpecError as exc:
        return {"lineno": lineno, "id": row.get("id"), "bad": str(exc)}
    return {"lineno": lineno, "id": row.get("id"), "spec": spec, "completion": row["completion"]}


@app.command("plot-snra")
def plot_snra(
    out: Path = typer.Option(..., "--out", "-o", help="PNG to write."),
    schedule: str = typer.Option("sigmoid", "--schedule", help="sigmoid | linear | fixed."),
    kmin: float = typer.Option(1.0, "--kmin"),
    kmax: float = typer.Option(100.0, "--kmax"),
    s: float = typer.Option(10.0, "--s", help="Sigmoid steepness."),
    tau: float = typer.Option(0.5, "--tau", help="Sigmoid centre (fraction of training)."),
    e_max: float = typer.Option(0.5, "--e-max", help="Largest error on the x axis."),
    points: str = typer.Option("0,0.25,0.5,0.75,1", "--points", help="Training progress t/T of each curve."),
) -> None:
    """Draw SNRA reward-vs-error curves at several points of the sharpness schedule
    (like the paper's Figure 2), next to the schedule k(t) itself."""
    from numerical3d.verifiers.plot import plot_snra_curves

    try:
        fractions = [float(x) for x in points.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"--points must be comma-separated numbers, got {points!r}") from None
    try:
        plot_snra_curves(out, schedule=schedule, kmin=kmin, kmax=kmax, s=s, tau=tau, e_max=e_max,
                         fractions=fractions)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    typer.echo(f"wrote {out}")


benchmark_app = typer.Typer(help="Evaluate a model on a released benchmark exactly as published.", no_args_is_help=True)
app.add_typer(benchmark_app, name="benchmark")
benchmark_app.add_typer(typer.Typer(cls=RunGroup, no_args_is_help=True,
                                    help="Run one benchmark: `benchmark run NAME --help` lists its options."), name="run")


@benchmark_app.command("fingerprint")
def benchmark_fingerprint_command(
    name: str = typer.Argument(..., help="A benchmark of `benchmark list` (vsibench, vsibench-debiased, mindcube, ...)."),
    data: Path = typer.Option(..., "--data", help="The benchmark as released (your own copy), as for `benchmark run`."),
    out: Path = typer.Option(..., "--out", help="The fingerprint file to write (benchmark, kind, value; tab-separated)."),
    table: Optional[Path] = typer.Option(None, "--table", help="The question table, for benchmarks that take one."),
    subtasks: Optional[str] = typer.Option(None, "--subtasks", help="BLINK: comma-separated subtasks (default: all)."),
) -> None:
    """Write what a build must keep out of its training data: the benchmark's scans, image digests and
    question ids. List the file under `benchmark_fingerprints` in the dataset mix."""
    from numerical3d.training.benchmarks.fingerprint import fingerprint

    try:
        options = {k: v for k, v in (("table", table), ("subtasks", subtasks)) if v is not None}
        counts = fingerprint(name, data, out, **options)
    except (Numerical3DError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"wrote {out}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))


@benchmark_app.command("list")
def benchmark_list_command() -> None:
    """The registered benchmarks: the NAME of `benchmark run NAME`, and what each is."""
    from numerical3d.training.benchmarks.registry import benchmarks

    found = benchmarks()
    width = max(map(len, found), default=0)
    for name, bench in found.items():
        typer.echo(f"{name:<{width}}  {bench.title}: {bench.summary}")
