"""Fixtures for question synthesis: a small synthetic build (written once per session) and the real meta-info."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

META = Path(__file__).resolve().parents[3] / "shared" / "data" / "vsibench_meta" / "scannetpp_meta_info_val.json"
if not META.exists():
    META = Path("/work/shared/data/vsibench_meta/scannetpp_meta_info_val.json")


@pytest.fixture(scope="session")
def synthetic_root(tmp_path_factory) -> Path:
    from sources.synthetic import write_synthetic_scenes

    root = tmp_path_factory.mktemp("q_synthetic")
    write_synthetic_scenes(root, 2, 7, n_frames=32, width=320, height=240)
    return root


@pytest.fixture(scope="session")
def synthetic_scenes(synthetic_root):
    from sources import load_scenes
    from sources.scene import Scene

    scenes = list(load_scenes("synthetic", synthetic_root))
    assert all(isinstance(s, Scene) for s in scenes), scenes
    return scenes


@pytest.fixture(scope="session")
def truths(synthetic_root) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(synthetic_root.glob("scans/*/*.truth.json"))}


@pytest.fixture(scope="session")
def synthetic_build(synthetic_scenes):
    """All items of the synthetic scenes with every subtask and both forms where offered."""
    from pipeline.questions import DropCounter, QuestionConfig, generate_items

    config = QuestionConfig(forms={"object_size": "both", "abs_distance": "both", "room_size": "both",
                                   "camera_distance": "both", "rel_distance": "mc", "rel_direction": "both",
                                   "appearance_order": "both", "route_plan": "mc"})
    drops = DropCounter()
    items = list(generate_items(synthetic_scenes, config, drops))
    return items, drops, config


@pytest.fixture(scope="session")
def meta_scenes():
    if not META.exists():
        pytest.skip(f"real VSI-Bench meta-info not present at {META}")
    from sources import load_scenes
    from sources.scene import Scene

    return [s for s in load_scenes("vsi-meta", META) if isinstance(s, Scene)]
