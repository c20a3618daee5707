"""Fixtures for question synthesis: a small synthetic build (written once per session) and the real meta-info."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# the project's shared data sits beside the checkout (as in CI); absent on a user's machine
META = Path(__file__).resolve().parents[3] / "shared" / "data" / "vsibench_meta" / "scannetpp_meta_info_val.json"


@pytest.fixture(scope="session")
def synthetic_root(tmp_path_factory) -> Path:
    from numerical3d.sources.synthetic import write_synthetic_scenes

    root = tmp_path_factory.mktemp("q_synthetic")
    write_synthetic_scenes(root, 4, 7, n_frames=32, width=320, height=240, instance_masks=True)
    return root


@pytest.fixture(scope="session")
def synthetic_scenes(synthetic_root):
    from numerical3d.sources import load_scenes
    from numerical3d.sources.scene import Scene

    scenes = list(load_scenes("synthetic", synthetic_root))
    assert all(isinstance(s, Scene) for s in scenes), scenes
    return scenes


@pytest.fixture(scope="session")
def truths(synthetic_root) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(synthetic_root.glob("scans/*/*.truth.json"))}


@pytest.fixture(scope="session")
def synthetic_build(synthetic_scenes):
    """All items of the synthetic scenes with every subtask and both forms where offered."""
    from numerical3d.pipeline.questions import DropCounter, QuestionConfig, generate_items

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
    from numerical3d.sources import load_scenes
    from numerical3d.sources.scene import Scene

    return [s for s in load_scenes("vsi-meta", META) if isinstance(s, Scene)]


def _perturbed(spec: dict) -> dict:
    """A wrong answer of the same kind (the canonical completion of this spec must score less)."""
    s = dict(spec)
    kind = s["kind"]
    if kind == "numeric":
        s["answer"] = s["answer"] * 1.5
    elif kind == "count":
        s["answer"] = s["answer"] + 2
    elif kind == "choice":
        s["answer"] = "B" if s["answer"] == "A" else "A"
    elif kind == "direction":
        s["answer"] = next(c for c in s["classes"] if c != spec["answer"])
    elif kind == "order":
        s["answer"] = list(reversed(s["answer"]))
    elif kind == "relations":
        vocab = s.get("vocabulary", ["left-of", "right-of", "above", "below", "in-front-of", "behind", "near"])
        s["answer"] = [r for r in vocab if r not in spec["answer"]][:1] or spec["answer"][:-1]
    elif kind == "grounding":
        s["answer"] = [a + 0.5 for a in s["answer"]]
    return s


@pytest.fixture(scope="session")
def check_self():
    """Asserts an item verifies itself (error 0, reward 1) and a perturbed answer scores less."""
    from numerical3d.verifiers import canonical_completion, verify

    def check(item) -> None:
        spec = item.verifier
        res = verify(spec, canonical_completion(spec), k=100.0)
        assert res.error == 0 and res.reward == pytest.approx(1.0) and res.format_ok, (item.id, res)
        assert f"<answer>{item.answer}</answer>" in canonical_completion(spec)
        bad = verify(spec, canonical_completion(_perturbed(spec)), k=100.0)
        assert bad.reward < res.reward and bad.error > 0, (item.id, spec, bad)

    return check
