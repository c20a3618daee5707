"""A source added from outside the project: a throwaway distribution whose `numerical3d.sources` entry
point names its module (holding `SOURCES`). No project file is edited: on the path, it is listed by
`sources list` and in the commands' help, read by `sources inspect` and turned into items by `questions`."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

from distribution import console, write_distribution

NAME = "toy-boxes"
MODULE = '''"""toy-boxes: one <scene>.json per scene, {"room_size": m2, "boxes": [[label, cx, cy, cz, sx, sy, sz]]}."""

import importlib
import json
from pathlib import Path

import numpy as np

from numerical3d.sources.base import SceneRef, Source
from numerical3d.sources.scene import OrientedBox, Scene, SceneObject


class ToyBoxes(Source):
    name = "toy-boxes"
    description = "one <scene>.json of labelled axis-aligned boxes per scene"
    label_map = "vsi-meta"
    licence = "Toy boxes of a test."
    has_frames = False

    def _list(self, root: Path) -> list[SceneRef]:
        return [SceneRef(self.name, p.stem, str(p), str(root)) for p in sorted(root.glob("*.json"))]

    def load(self, ref: SceneRef) -> Scene:
        doc = json.loads(Path(ref.path).read_text())
        objects = []
        for label, *numbers in doc["boxes"]:
            box = OrientedBox(np.array(numbers[:3], float), np.array(numbers[3:], float), np.eye(3))
            objects.append(SceneObject(len(objects), self.labels.resolve(label).label, label, box))
        return Scene(ref.scene_id, self.name, objects, room_size=doc["room_size"])


SOURCES = (ToyBoxes,)
'''


def cli(*args: str | Path, plugin: Path | None = None) -> subprocess.CompletedProcess:
    return console(*args, installed=plugin, columns=300)


def test_a_plugin_source_is_listed_inspected_and_generates_items(tmp_path):
    plugin = write_distribution(tmp_path / "plugin", "n3d_toy_boxes", MODULE,
                                {"numerical3d.sources": {NAME: "n3d_toy_boxes"}})
    root = tmp_path / "scenes"
    root.mkdir()
    boxes = [["chair", 0.0, 0.0, 0.45, 0.5, 0.5, 0.9], ["table", 2.0, 0.0, 0.4, 1.2, 0.8, 0.8],
             ["bed", 0.0, 3.0, 0.3, 2.0, 1.6, 0.6], ["sofa", 3.0, 3.0, 0.4, 2.0, 0.9, 0.8]]
    (root / "room1.json").write_text(json.dumps({"room_size": 20.0, "boxes": boxes}))

    assert NAME not in cli("sources", "list").stdout
    listed = cli("sources", "list", plugin=plugin)
    assert listed.returncode == 0, listed.stderr
    assert NAME in listed.stdout and "one <scene>.json of labelled axis-aligned boxes per scene" in listed.stdout
    for command in (("questions", "--help"), ("sources", "inspect", "--help")):
        assert NAME in cli(*command, plugin=plugin).stdout

    inspected = cli("sources", "inspect", NAME, root, "--json", plugin=plugin)
    assert inspected.returncode == 0, inspected.stderr
    (scene,) = [json.loads(line) for line in inspected.stdout.splitlines()]
    assert scene["scene_id"] == "room1" and scene["room_size"] == 20.0 and len(scene["objects"]) == 4

    out = tmp_path / "items.jsonl"
    made = cli("questions", NAME, root, "--out", out, "--subtasks", "object_size,room_size", plugin=plugin)
    assert made.returncode == 0, made.stderr
    items = [json.loads(line) for line in out.read_text().splitlines()]
    assert {it["subtask"] for it in items} == {"object_size", "room_size"}
    assert all(it["source"] == NAME for it in items)
    room = next(it for it in items if it["subtask"] == "room_size" and it["verifier"]["kind"] == "numeric")
    assert room["verifier"]["answer"] == 20.0


def test_a_plugin_source_is_part_of_the_code_version(tmp_path, monkeypatch):
    """The scene cache is keyed by the code version: editing a plugin source's code must re-run scenes."""
    from numerical3d.pipeline.manifest import content_hash
    from numerical3d.sources import registry

    plugin = write_distribution(tmp_path / "plugin", "n3d_toy_boxes", MODULE,
                                {"numerical3d.sources": {NAME: "n3d_toy_boxes"}})
    content_hash.cache_clear()
    plain = content_hash()
    monkeypatch.syspath_prepend(str(plugin))
    importlib.invalidate_caches()
    registry.cache_clear()
    content_hash.cache_clear()
    try:
        assert NAME in registry()
        installed = content_hash()
        code = plugin / "n3d_toy_boxes" / "__init__.py"
        code.write_text(code.read_text().replace("Toy boxes of a test.", "Toy boxes of another test."))
        content_hash.cache_clear()
        assert len({plain, installed, content_hash()}) == 3
    finally:
        monkeypatch.undo()
        sys.modules.pop("n3d_toy_boxes", None)
        registry.cache_clear()
        content_hash.cache_clear()
