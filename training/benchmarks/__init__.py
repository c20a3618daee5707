"""Released benchmarks, evaluated exactly as published: VSI-Bench (`vsibench`) and CV-Bench
(`cvbench`), each one module holding its `BENCHMARK` (see `base.Benchmark`), found by
`registry`; with the model backends, frame sampling and the paper's comparison rows they share.
`numerical3d benchmark run NAME` is the command line; docs/evaluation.md the protocol.

The package's path reaches every `numerical3d/training/benchmarks/` folder on `sys.path`, so a
benchmark module can also live outside the installed package (a plugin folder on PYTHONPATH).
"""

import pkgutil

__path__ = pkgutil.extend_path(__path__, __name__)
