"""Released benchmarks, evaluated exactly as published: VSI-Bench (`vsibench`) and CV-Bench
(`cvbench`), with the model backends, frame sampling and the paper's comparison rows they share.
`numerical3d benchmark vsibench|cvbench` is the command line; docs/evaluation.md the protocol.
"""
