"""`numerical3d reward` and `numerical3d plot-snra`: the verifier core from the shell."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from pipeline.cli import app


def _resolve_k(k: Optional[float], step: Optional[int], total_steps: Optional[int], schedule: str,
               kmin: float, kmax: float) -> float:
    from verifiers import sharpness

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
    kmax: float = typer.Option(100.0, "--kmax"),
    operator: str = typer.Option("snra", "--operator", help="snra | tanh | binary."),
) -> None:
    """Score completions with their verifiers: one JSON line out per line in, with
    error, score (discrete kinds, else null), format_ok, accuracy_reward (SNRA r) and reward (R)."""
    from verifiers import SpecError, verify_batch

    kk = _resolve_k(k, step, total_steps, schedule, kmin, kmax)
    name = "<stdin>" if input == "-" else input
    try:
        stream = sys.stdin if input == "-" else open(input, encoding="utf-8")
    except OSError as exc:
        raise typer.BadParameter(f"{input}: {exc.strerror}") from None
    specs, completions, ids, linenos = [], [], [], []
    with stream:
        for lineno, line in enumerate(stream, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                typer.echo(f"{name}:{lineno}: not valid JSON ({exc.msg})", err=True)
                raise typer.Exit(2) from None
            if not isinstance(row, dict) or "verifier" not in row or "completion" not in row:
                typer.echo(f"{name}:{lineno}: expected an object with 'verifier' and 'completion'", err=True)
                raise typer.Exit(2)
            specs.append(row["verifier"])
            completions.append(row["completion"])
            ids.append(row.get("id"))
            linenos.append(lineno)
    try:
        results = verify_batch(specs, completions, kk, operator=operator)
    except SpecError as exc:
        # find the line for the message; verify_batch validates in order
        from verifiers import validate_spec

        for lineno, spec in zip(linenos, specs):
            try:
                validate_spec(spec)
            except SpecError:
                typer.echo(f"{name}:{lineno}: {exc}", err=True)
                break
        raise typer.Exit(2) from None
    except ValueError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
    lines = []
    for rid, res in zip(ids, results):
        d = {"error": res.error, "score": res.score, "format_ok": res.format_ok,
             "accuracy_reward": res.accuracy_reward, "reward": res.reward, "parsed": res.parsed}
        if rid is not None:
            d = {"id": rid, **d}
        lines.append(json.dumps(d, ensure_ascii=False))
    text = "\n".join(lines) + ("\n" if lines else "")
    if out is None:
        sys.stdout.write(text)
    else:
        from sources.io import atomic_write_text

        atomic_write_text(out, text)


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
    from verifiers.plot import plot_snra_curves

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
