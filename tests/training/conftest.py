"""Fixtures for the training tests: a small dataset built by the project's own pipeline, and a
tiny Qwen2.5-VL built from a config with a tokenizer trained locally on that dataset's text.

Both come from the helpers behind `numerical3d train --preset tiny-cpu` and are session-scoped:
the build (two synthetic scenes through the ScanNet adapter, question generation, sampling,
shards with embedded frames) and the model are made once.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def built_dataset(tmp_path_factory) -> Path:
    from pipeline.cli.train import _tiny_dataset

    return Path(_tiny_dataset(tmp_path_factory.mktemp("n3d")))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, built_dataset) -> Path:
    from pipeline.cli.train import _tiny_model

    return Path(_tiny_model(tmp_path_factory.mktemp("tiny"), str(built_dataset), "train"))
