"""The registry of benchmarks: every module of `numerical3d.training.benchmarks` holding a `BENCHMARK`,
then what the `numerical3d.benchmarks` entry point group names (a benchmark shipped in another
distribution), found the way every registry of the project finds its parts (`numerical3d.plugins`).

Adding a benchmark is adding one module; nothing else lists them. Modules whose name starts
with `_` are not looked at; the shared ones (`common`, `backends`, ...) hold no `BENCHMARK`.
"""

from __future__ import annotations

import functools

from numerical3d.plugins import Kind
from numerical3d.training.benchmarks.base import Benchmark
from numerical3d.training.benchmarks.core import BenchmarkError

REQUIRED = ("name", "title", "summary", "config", "load", "feed", "prompts", "grade", "results", "render")
KIND: Kind[Benchmark] = Kind("benchmark", "numerical3d.training.benchmarks", "BENCHMARK", "numerical3d.benchmarks",
                             lambda obj: all(hasattr(obj, a) for a in REQUIRED), lambda bench: bench.name,
                             BenchmarkError)


@functools.cache
def benchmarks() -> dict[str, Benchmark]:
    """{name: benchmark} of every benchmark found, sorted by name."""
    found = KIND.by_name()
    if "all" in found:
        raise BenchmarkError("the benchmark name 'all' is taken by `benchmark run all`")
    return dict(sorted(found.items()))


def get_benchmark(name: str) -> Benchmark:
    """The benchmark registered as `name`."""
    known = benchmarks()
    if name not in known:
        raise BenchmarkError(f"unknown benchmark {name!r}; choose one of {list(known)}")
    return known[name]
