"""Fixtures for the assembly tests: candidate items with real verifier specs, and a frame provider."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from numerical3d.pipeline.config import Balance, DatasetMix, MediaOptions, ShardOptions
from numerical3d.pipeline.items import Item, item_id
from numerical3d.pipeline.questions.registry import registry

LETTERS = "ABCD"
SYMMETRIC = {n for n, s in registry().items() if s.symmetric}  # object order is not meaning
DIRECTIONS = ["front", "front-right", "right", "back-right", "back", "back-left", "left", "front-left"]


def make_spec(kind: str, answer, **params) -> dict:
    """A verifier spec; through `verifiers.spec` so the tests exercise real specs (contract 1)."""
    from numerical3d.verifiers import spec as vs

    builders = {
        "numeric": vs.numeric_spec,
        "count": vs.count_spec,
        "choice": vs.choice_spec,
        "direction": vs.direction_spec,
        "order": vs.order_spec,
        "relations": vs.relations_spec,
        "grounding": vs.grounding_spec,
    }
    return builders[kind](answer, **params)


def make_candidates(
    scenes: list[tuple[str, str]], per_scene: int = 6, seed: int = 0, paraphrases: int = 2
) -> list[Item]:
    """Candidate items for every scene: numeric, count, choice, direction and order subtasks,
    each question emitted in `paraphrases` wordings (same objects: duplicates by meaning)."""
    rng = np.random.default_rng(seed)
    items: list[Item] = []
    for source, scene in scenes:
        frames = [0, 5, 10]  # frame indices
        for q in range(per_scene):
            objs = [{"instance_id": q, "label": f"chair{q}"}, {"instance_id": q + 100, "label": f"table{q}"}]
            dist = float(np.round(rng.uniform(0.2, 6.0), 3))
            size = float(np.round(10 ** rng.uniform(0.5, 2.5), 1))
            count = int(rng.integers(2, 7))
            letter = LETTERS[int(rng.integers(0, 4))]
            direction = DIRECTIONS[int(rng.integers(0, 8))]
            options = [f"option {c}" for c in LETTERS]
            rows = [
                ("abs_distance", make_spec("numeric", dist, unit="m"), f"{dist}", None, frames),
                ("object_size", make_spec("numeric", size, unit="cm"), f"{size}", None, frames),
                ("object_count", make_spec("count", count), str(count), None, frames),
                ("rel_distance", make_spec("choice", letter, options=options), letter, options, frames),
                ("rel_direction", make_spec("direction", direction, classes=DIRECTIONS), direction, None, frames),
                ("appearance_order", make_spec("order", [o["label"] for o in objs]), ", ".join(o["label"] for o in objs), None, frames),
                ("camera_distance", make_spec("numeric", dist, unit="m"), f"{dist}", None, frames[q % 3 : q % 3 + 1]),
            ]
            for subtask, spec, answer, opts, fr in rows:
                for p in range(paraphrases):
                    items.append(
                        Item(
                            id=item_id(source, scene, subtask, {"q": q, "p": p}),
                            source=source,
                            scene_id=scene,
                            subtask=subtask,
                            question=(text := f"[{p}] {subtask} question {q} about {objs[0]['label']} and {objs[1]['label']}?"),
                            prompt=text,
                            answer=answer,
                            verifier=spec,
                            frame_indices=list(fr),
                            options=opts,
                            provenance={"objects": objs[::-1] if p and subtask in SYMMETRIC else objs,
                                        "rule": {"method": "test"}, "paraphrase": p},
                        )
                    )
    return items


SCENES = [("scannet", f"scene9{n:03d}_00") for n in range(6)] + [("arkitscenes", f"4{n:07d}") for n in range(3)]


def make_config(**kw) -> DatasetMix:
    base = dict(
        name="test-set",
        total=60,
        quotas={"abs_distance": 0.3, "object_size": 0.2, "object_count": 0.1, "rel_distance": 0.15,
                "rel_direction": 0.1, "appearance_order": 0.05, "camera_distance": 0.1},
        splits={"train": 0.7, "test": 0.3},
        shards=ShardOptions(rows_per_shard=16, frames_per_shard=4, row_group_size=8),
        media=MediaOptions(mode="embed", longest_side=32, jpeg_quality=80),
        # the kit's counts (2-6 for a label per question number) test quotas and shards; the count
        # cap has its own tests with counts shaped for it
        balance=Balance(max_count_guess=None),
    )
    base.update(kw)
    return DatasetMix(**base)


def fake_frame(fid: str) -> np.ndarray:
    """Deterministic RGB pixels for a frame id (48 x 64, a gradient keyed by the id)."""
    h = int.from_bytes(hashlib.sha256(fid.encode()).digest()[:4], "big")
    yy, xx = np.mgrid[0:48, 0:64]
    img = np.stack([(xx * 4 + h) % 256, (yy * 5 + h // 7) % 256, (xx + yy + h // 13) % 256], axis=-1)
    return img.astype(np.uint8)


def file_hashes(root: Path, sub: str) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((root / sub).glob("*.parquet"))}


@pytest.fixture(scope="session")
def kit() -> SimpleNamespace:
    """The helpers above, for test modules (importlib mode cannot import conftest by name)."""
    return SimpleNamespace(
        SCENES=SCENES, make_candidates=make_candidates, make_config=make_config, make_spec=make_spec,
        fake_frame=fake_frame, file_hashes=file_hashes,
    )


@pytest.fixture(scope="session")
def built(tmp_path_factory, kit) -> SimpleNamespace:
    """One embed-mode build shared by the read-only tests."""
    from numerical3d.pipeline.sampling import sample
    from numerical3d.pipeline.writer import write_dataset

    cfg = make_config()
    sel, rep = sample(make_candidates(SCENES), cfg, seed=0)
    out = tmp_path_factory.mktemp("built")
    manifest = write_dataset(sel, fake_frame, out, cfg, report=rep)
    return SimpleNamespace(dir=out, selection=sel, report=rep, manifest=manifest, config=cfg)
