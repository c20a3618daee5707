"""The registry of benchmarks, discovered from the package: every module on the package path of
`numerical3d.training.benchmarks` that holds a `BENCHMARK` registers it under `BENCHMARK.name`.

Adding a benchmark is adding one module; nothing else lists them. Modules whose name starts
with `_` are not looked at; the shared ones (`common`, `backends`, ...) hold no `BENCHMARK`.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from numerical3d.training.benchmarks.base import Benchmark
from numerical3d.training.benchmarks.core import BenchmarkError


@functools.cache
def benchmarks() -> dict[str, Benchmark]:
    """{name: benchmark} of every benchmark module found, sorted by name."""
    import numerical3d.training.benchmarks as package

    found: dict[str, Benchmark] = {}
    where: dict[str, str] = {}
    for module_name in sorted({m.name for m in pkgutil.iter_modules(package.__path__)}):
        if module_name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{module_name}")
        bench = getattr(module, "BENCHMARK", None)
        if bench is None:
            continue
        if bench.name == "all":
            raise BenchmarkError(f"{module.__file__}: the name 'all' is taken by `benchmark run all`")
        if bench.name in found:
            raise BenchmarkError(f"{module.__file__}: benchmark name {bench.name!r} is already taken by "
                                 f"{where[bench.name]}")
        found[bench.name] = bench
        where[bench.name] = str(module.__file__)
    return dict(sorted(found.items()))


def get_benchmark(name: str) -> Benchmark:
    """The benchmark registered as `name`."""
    known = benchmarks()
    if name not in known:
        raise BenchmarkError(f"unknown benchmark {name!r}; choose one of {list(known)}")
    return known[name]
