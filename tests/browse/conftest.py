"""Fixtures for the browse tests: small datasets built by the real pipeline from synthetic scenes.

Three synthetic scenes of 16 frames at 320x240 give items of all twelve subtasks; they are built
once per session in `embed` media mode (pixels), in `reference` mode (no pixels) and with the
optional preview column.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from numerical3d.pipeline.questions.registry import registry

SCENES = {"n_frames": 16, "width": 320, "height": 240}
SUBTASKS = set(registry())  # a build of the synthetic scenes yields items of every subtask


@pytest.fixture(scope="session")
def scenes_tree(tmp_path_factory) -> Path:
    from numerical3d.sources.synthetic import write_synthetic_scenes

    root = tmp_path_factory.mktemp("browse-scenes")
    write_synthetic_scenes(root, 3, 7, **SCENES)
    return root


def build(tree: Path, out: Path, **dataset: object) -> Path:
    """A plain (no Prefect) build of the tree with the demo mix, 120 items, and dataset overrides."""
    from numerical3d.pipeline import build as b
    from numerical3d.plain_build import run_build

    plan = b.BuildPlan.model_validate({
        "seed": 1, "sources": [{"name": "scannet", "root": str(tree)}], "dataset": "demo",
        "dataset_overrides": {"total": 120, **dataset}, "runner": {"kind": "threads", "max_workers": 2},
        "code_version": "browse-tests", "out": str(out), "work": str(out.parent / f"{out.name}.work"),
    })
    run_build(plan)
    return out


@pytest.fixture(scope="session")
def dataset(scenes_tree, tmp_path_factory) -> Path:
    """Embedded frames (the demo's media settings)."""
    return build(scenes_tree, tmp_path_factory.mktemp("embed") / "ds")


@pytest.fixture(scope="session")
def reference_dataset(scenes_tree, tmp_path_factory) -> Path:
    """The same scenes published by reference: no pixels."""
    return build(scenes_tree, tmp_path_factory.mktemp("reference") / "ds",
                 media={"mode": "reference", "longest_side": 320, "jpeg_quality": 85})


@pytest.fixture(scope="session")
def preview_dataset(scenes_tree, tmp_path_factory) -> Path:
    """The embed build with the optional preview column."""
    return build(scenes_tree, tmp_path_factory.mktemp("preview") / "ds", preview={"enabled": True, "width": 200, "height": 100})


@pytest.fixture(scope="session")
def site(dataset, tmp_path_factory) -> Path:
    from numerical3d.pipeline.browse.site import build_site

    out = tmp_path_factory.mktemp("site") / "site"
    build_site(dataset, out, page_size=20, chunk=7)
    return out


@pytest.fixture(scope="session")
def kit() -> SimpleNamespace:
    """The helpers above, for test modules (importlib mode gives tests no import path to conftest)."""
    return SimpleNamespace(SUBTASKS=SUBTASKS, build=build)
