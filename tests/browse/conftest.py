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
    write_synthetic_scenes(root, 3, 3, **SCENES)
    return root


def build(tree: Path, out: Path, **dataset: object) -> Path:
    """A plain (no Prefect) build of the tree with the demo mix, 120 items, and dataset overrides.

    Three small scenes seldom show every counted instance or four candidates nameably, so the site
    tests, which are about drawing every subtask, name objects by the looser rule of before
    (share 0.2, no per-category sides, no occlusion test, none of the box needed inside the image;
    pipeline/questions/nameable.py) in this in-process build."""
    from numerical3d.pipeline import build as b
    from numerical3d.pipeline.questions import nameable
    from numerical3d.plain_build import run_build

    # three scenes cannot spread a label's counts wide enough for the count cap, and the site is
    # shown with every subtask
    plan = b.BuildPlan.model_validate({
        "seed": 1, "sources": [{"name": "scannet", "root": str(tree)}], "dataset": "demo",
        "dataset_overrides": {"total": 120, "balance": {"max_count_guess": None}, **dataset}, "runner": {"kind": "threads", "max_workers": 2},
        "code_version": "browse-tests", "out": str(out), "work": str(out.parent / f"{out.name}.work"),
        "questions": {"min_named_share": 0.2, "named_in_image": 0.0},
    })
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(nameable, "MIN_SIDE", {})
        mp.setattr(nameable, "MEDIUM_SIDE", 0)
        mp.setattr(nameable, "hidden_share", lambda *args, **kwargs: 0.0)
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
                 media={"mode": "reference"})


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


CROWD = ["dresser", "lamp", "nightstand", "bookshelf", "trash can", "picture", "pillow", "chair", "tv stand",
         "laptop", "plant", "mirror", "desk", "monitor", "keyboard", "radiator"]


def crowded_scene():
    """Sixteen small objects 30-35 cm apart (their names far wider than that on the map), a bed, and
    a route from the dresser to the bed that turns seven times within a metre: labels that collide
    wherever they are printed at what they name."""
    import numpy as np

    from numerical3d.pipeline.items import Item
    from numerical3d.pipeline.scene_geometry import FloorOutline, ObjectBox, SceneGeometry
    from numerical3d.verifiers import spec as vs

    def box(iid, label, xy, extents=(0.4, 0.4, 0.8)):
        return ObjectBox(iid, label, (xy[0], xy[1], extents[2] / 2), extents, tuple(np.eye(3).reshape(-1)))

    objects = [box(k + 1, name, (1.0 + 0.35 * (k % 4), 1.0 + 0.3 * (k // 4))) for k, name in enumerate(CROWD)]
    objects.append(box(99, "bed", (3.5, 3.0), (2.0, 1.6, 0.5)))
    floor = FloorOutline(((0.0, 0.0), (4.5, 0.0), (4.5, 4.0), (0.0, 4.0)), 0.0, "floor_points")
    geo = SceneGeometry("synthetic", "crowd", objects, floor, [])
    line = [[0.5, 0.5], [0.7, 0.5], [0.7, 0.7], [0.9, 0.7], [0.9, 0.9], [1.1, 0.9], [1.1, 3.5], [4.0, 3.5]]
    turns = ["turn right", "turn left", "turn right", "turn left", "turn right", "turn left", "turn right"]
    start, goal, facing = objects[0], objects[-1], objects[5]
    options = [", ".join(turns), ", ".join(t.replace("left", "back") for t in turns)]
    item = Item(id="crowdroute", source="synthetic", scene_id="crowd", subtask="route_plan", question="Which turns?",
                prompt="Which turns?", answer="A", verifier=vs.choice_spec("A", options), frame_indices=[], options=options,
                provenance={"objects": [{"instance_id": o.instance_id, "label": o.label} for o in (start, goal, facing)],
                            "rule": {"min_turn_deg": 30.0, "turn_margin_deg": 10.0, "cell": 0.1},
                            "value": {"polyline": line, "turns": turns}, "split": "train"})
    return geo, item


@pytest.fixture(scope="session")
def crowded_site(tmp_path_factory) -> tuple[Path, str]:
    """The site of a one-item dataset on the crowded scene; returns the site and the item's id."""
    from numerical3d.pipeline.browse.site import build_site
    from numerical3d.pipeline.config import load_mix
    from numerical3d.pipeline.writer import write_dataset

    geo, item = crowded_scene()
    root = tmp_path_factory.mktemp("crowd")
    cfg = load_mix("demo")
    cfg.media.mode = "reference"
    cfg.splits = {"train": 1.0}
    write_dataset([item], None, root / "ds", cfg, seed=0, scenes={(geo.source, geo.scene_id): geo})
    build_site(root / "ds", root / "site")
    return root / "site", item.id


@pytest.fixture(scope="session")
def kit() -> SimpleNamespace:
    """The helpers above, for test modules (importlib mode gives tests no import path to conftest)."""
    return SimpleNamespace(SUBTASKS=SUBTASKS, build=build, crowded_scene=crowded_scene, CROWD=CROWD)
