"""Build presets for `numerical3d build --preset NAME` (YAML build plans, see docs/orchestration.md)."""
