"""Fixtures for the training tests: a small dataset built by the project's own pipeline, and a
tiny Qwen2.5-VL built from a config with a tokenizer trained locally on that dataset's text.

Both come from the helpers behind `numerical3d train --preset tiny-cpu` and are session-scoped:
the build (two synthetic scenes through the ScanNet adapter, question generation, sampling,
shards with embedded frames) and the model are made once per worker, so every test that uses them
carries the `TINY` xdist group and runs on one worker (`--dist loadgroup`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

TINY = pytest.mark.xdist_group("tiny-model")  # tests that need built_dataset or tiny_model


def tiny_config(model: Path, **over: Any):
    """The `tiny-cpu` preset on `model`, without weight decay (parameters move only through
    gradients) or loggers; each of `over` replaces a field or is merged into a section."""
    from numerical3d.training.config import PRESETS, config_from_dict

    base = json.loads(json.dumps(PRESETS["tiny-cpu"]))
    base.setdefault("model", {})["name_or_path"] = str(model)
    base["weight_decay"] = 0.0
    base["grpo"]["report_to"] = "none"
    for key, value in over.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    return config_from_dict(base)


@pytest.fixture(scope="session")
def built_dataset(tmp_path_factory) -> Path:
    from numerical3d.cli import tiny_dataset

    return Path(tiny_dataset(tmp_path_factory.mktemp("n3d")))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, built_dataset) -> Path:
    from numerical3d.training.tiny import tiny_model_for

    return tiny_model_for(tmp_path_factory.mktemp("tiny"), str(built_dataset), "train")


@pytest.fixture
def invoke(request):
    """`benchmark run <BENCHMARK> ARGS...` through training's command group, in-process, for a test
    module that names its benchmark in a module-level BENCHMARK."""
    from typer.testing import CliRunner

    from numerical3d.training.cli import app

    name = request.module.BENCHMARK
    return lambda *args: CliRunner().invoke(app, ["benchmark", "run", name, *map(str, args)])
