"""Numerical3D: verifiable 3D spatial questions from indoor scans, and the AP-GRPO training stage.

The distribution installs one import package, `numerical3d`; the repository keeps the user's
layout at its top level (`sources/`, `pipeline/`, `templates/`, `verifiers/`, `training/`,
`flows.py`), each a subpackage or module of it: `numerical3d.pipeline`, `numerical3d.verifiers`, ...
Nothing is imported here, so `import numerical3d.verifiers` loads only the verifiers.
"""
