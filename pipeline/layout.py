"""Where things are in a built dataset folder (the Hugging Face Hub layout), in one place.

```
data/<split>-NNNNN-of-NNNNN-<tag>.parquet     questions (config `default`; tag: the file's sha256, 8 hex)
frames/<split>-NNNNN-of-NNNNN-<tag>.parquet   one row per frame the split's questions use (config `frames`)
scenes/<split>-NNNNN-of-NNNNN-<tag>.parquet   one row per scene: boxes, floor, cameras (config `scenes`)
README.md                               the dataset card (YAML header declares the configs)
plots/*.png                             the card's plots
manifest.json                           written last: config, code version, hash of every file
.build.lock                             only while a build runs: names the build (pipeline/build/lock.py)
```

The writers (shards, card, manifest) take these names from here; every reader opens the folder
through `numerical3d.dataset.DatasetFolder`, which owns the card and manifest names and the
format version.
"""

from __future__ import annotations

import re

from numerical3d.dataset import CARD, MANIFEST

DATA = "data"  # config `default`: one row per item
FRAMES = "frames"  # config `frames`: one row per scene frame
SCENES = "scenes"  # config `scenes`: one geometry record per scene (pipeline.scene_geometry)
LOCK = ".build.lock"  # held by the one build writing the folder
PLOTS = {"answers": "plots/answer_distributions.png", "snra": "plots/snra_schedule.png"}
BLIND_PLOT = "plots/blind_scores.png"  # only in builds whose mix prunes text-only shortcuts (`debias`)


def shard_name(split: str, index: int, count: int, tag: str) -> str:
    """`<split>-NNNNN-of-NNNNN-<tag>.parquet`: the final name of shard `index` of `count`, `tag` the
    first 8 hex digits of the file's sha256. A rebuild with other rows gets other names, so the card's
    list of files changes and `datasets.load_dataset(folder)` cannot serve the previous build's rows
    from its cache (it keys a local folder by its card, not by the files' bytes)."""
    return f"{split}-{index:05d}-of-{count:05d}-{tag}.parquet"


def shard_pattern(split: str | None = None) -> str:
    """Glob of the shards of one split (or of every split) inside a config's folder."""
    return f"{split}-*.parquet" if split else "*.parquet"


_SHARD_NAME = re.compile(r"(?P<split>.+)-\d{5}-of-\d{5}(-[0-9a-f]{8})?\.parquet")


def shard_split(name: str) -> str:
    """The split a shard file belongs to (`train-00000-of-00002-1a2b3c4d.parquet` -> `train`; the
    tag is optional, as in datasets built before it)."""
    m = _SHARD_NAME.fullmatch(name)
    return m.group("split") if m else name.rsplit("-", 3)[0]


# What a build owns inside its output folder (removed before a rebuild so no stale file survives);
# hidden `.*.tmp` files are writes that never completed.
OWNED_GLOBS = (MANIFEST, CARD, f"{DATA}/*.parquet", f"{DATA}/.*.tmp", f"{FRAMES}/*.parquet", f"{FRAMES}/.*.tmp",
               f"{SCENES}/*.parquet", f"{SCENES}/.*.tmp", "plots/*.png", "plots/.*.tmp", ".*.tmp")
