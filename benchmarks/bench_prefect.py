"""Prefect's fixed cost per build: `numerical3d build --preset demo` with cached scenes, through the
command line, plain engine vs Prefect engine vs the command as typed, alternated in one run.

    python3 benchmarks/bench_prefect.py --rounds 3 [--commands plain,typed,configured,temporary]

Up to four commands per round, in turn: `plain`, `--engine plain`; `typed`, the command as typed
(no `--engine`) on an unconfigured machine (no PREFECT_API_URL, a fresh PREFECT_HOME: the plain
executor, with its one-line note); `configured`, `--engine prefect` against a real `prefect server
start` named by PREFECT_API_URL (the build starts no server); `temporary`, `--engine prefect` on an
unconfigured machine (the build starts Prefect's temporary server itself). Each command builds into its own folder, after
one warm-up build there, so every timed build finds its scenes cached (synthetic inputs and
result files) and does what a rerun does: enumerate, check the cache, assemble, card.
Medians per command and the difference to plain are printed, with the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CLI = [sys.executable, "-c", "from numerical3d.cli import main; main()"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(home: Path) -> tuple[subprocess.Popen, str]:
    """`prefect server start` on a free port with its own PREFECT_HOME; its API URL once it answers."""
    port = free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_UI_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError("prefect server start did not answer within 180 s")


def build(out: Path, engine: str | None, env: dict[str, str]) -> float:
    t = time.perf_counter()
    res = subprocess.run([*CLI, "build", "--preset", "demo", "--out", str(out), *(["--engine", engine] if engine else []),
                          "--json"], env=env, capture_output=True, text=True)
    took = time.perf_counter() - t
    if res.returncode != 0:
        raise RuntimeError(f"{engine} build into {out} failed ({res.returncode}):\n{res.stderr[-3000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--commands", default="plain,typed,configured,temporary",
                    help="which commands to alternate (plain first: the others are compared with it)")
    args = ap.parse_args()
    chosen = args.commands.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="bench-prefect-"))
    server, url = start_server(tmp / "server-home") if "configured" in chosen else (None, "")
    base = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    unconfigured = {**base, "PREFECT_HOME": str(tmp / "home")}
    every = {
        "plain": ("plain", "plain", base),
        "typed": ("as typed, no API configured (plain executor)", None, unconfigured),
        "configured": ("prefect, configured API (prefect server start)", "prefect", {**base, "PREFECT_API_URL": url}),
        "temporary": ("prefect, no API configured (temporary server)", "prefect", unconfigured),
    }
    commands = {every[key][0]: every[key][1:] for key in chosen}
    times: dict[str, list[float]] = {name: [] for name in commands}
    try:
        for i, (name, (engine, env)) in enumerate(commands.items()):
            build(tmp / f"out-{i}", engine, env)  # warm-up: generates or finds the scenes, caches results
        for r in range(args.rounds):
            order = list(commands.items()) if r % 2 == 0 else list(reversed(commands.items()))
            for name, (engine, env) in order:
                i = list(commands).index(name)
                times[name].append(build(tmp / f"out-{i}", engine, env))
                print(f"  round {r + 1}: {name}: {times[name][-1]:.1f} s", flush=True)
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    plain = statistics.median(times["plain"])
    load = os.getloadavg()
    print(f"demo build, cached scenes, median of {args.rounds} alternated rounds "
          f"(load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}, {os.cpu_count()} CPUs)")
    for name, values in times.items():
        med = statistics.median(values)
        extra = "" if name == "plain" else f"  ({med - plain:+.1f} s over plain)"
        print(f"  {name:<50} {med:6.1f} s{extra}   rounds: {', '.join(f'{v:.1f}' for v in values)}")


if __name__ == "__main__":
    main()
