"""Fixtures for the training tests: a small dataset built by the project's own pipeline, and a
tiny Qwen2.5-VL built from a config with a tokenizer trained locally on that dataset's text.

Both come from the helpers behind `numerical3d train --preset tiny-cpu` and are session-scoped:
the build (two synthetic scenes through the ScanNet adapter, question generation, sampling,
shards with embedded frames) and the model are made once per worker, so every test that uses them
carries the `TINY` xdist group and runs on one worker (`--dist loadgroup`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

TINY = pytest.mark.xdist_group("tiny-model")  # tests that need built_dataset or tiny_model


@pytest.fixture(scope="session")
def built_dataset(tmp_path_factory) -> Path:
    from numerical3d import tiny_dataset

    return Path(tiny_dataset(tmp_path_factory.mktemp("n3d")))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, built_dataset) -> Path:
    from training.tiny import tiny_model_for

    return tiny_model_for(tmp_path_factory.mktemp("tiny"), str(built_dataset), "train")
