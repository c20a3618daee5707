"""Released benchmarks, evaluated exactly as published: VSI-Bench (`vsibench`) and CV-Bench
(`cvbench`), each one module holding its `BENCHMARK` (see `base.Benchmark`), found by
`registry`; with the model backends, frame sampling and the paper's comparison rows they share.
`numerical3d benchmark run NAME` is the command line; docs/evaluation.md the protocol.
"""
