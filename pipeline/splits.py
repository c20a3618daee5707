"""Benchmark hygiene and splits: both decided per scene, never per item.

The VSI-Bench evaluation scenes (`pipeline/data/vsibench_eval_scenes.tsv`, the project's own copy
of the 288 ids, so a build on any machine can exclude them) never enter any split. A scene is
matched by its id whatever source produced it, because the `vsi-meta` source carries the ids of
ScanNet / ScanNet++ / ARKitScenes scenes; the ids of the three datasets have disjoint forms.

Ingested corpora name their scenes, videos and images in their own ways, so an item is also matched
on what it holds, against the listed scenes and the benchmark fingerprints of the mix
(`benchmark_fingerprints`, files `numerical3d benchmark fingerprint` writes from each evaluation
benchmark's release): the canonical scan ids in its scene id and media references ("scene0025_01"
inside "scannet/videos/SCENE0025_01_v2.mp4"), the pixel digests of its images, the byte digests of
its videos, and the benchmark question ids it carries. Each exclusion is counted per benchmark and reason.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from numerical3d.dataset.fingerprint import read_fingerprints, scene_ids

EVAL_SCENES_FILE = Path(__file__).parent / "data" / "vsibench_eval_scenes.tsv"


def load_scene_list(path: str | Path = EVAL_SCENES_FILE) -> dict[str, str]:
    """Read a `source<TAB>scene_id` list (with header) into {scene_id: source}."""
    path = Path(path)
    try:
        with path.open(newline="") as fh:
            rows = list(csv.reader(fh, delimiter="\t"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read scene list: {exc}") from exc
    if not rows or [c.strip() for c in rows[0][:2]] != ["source", "scene_id"]:
        raise ValueError(f"{path}: expected a header line 'source<TAB>scene_id'")
    out: dict[str, str] = {}
    for n, row in enumerate(rows[1:], start=2):
        if not row or not "".join(row).strip():
            continue
        if len(row) < 2 or not row[1].strip():
            raise ValueError(f"{path}:{n}: expected 'source<TAB>scene_id', got {row!r}")
        out[row[1].strip()] = row[0].strip()
    return out


VSIBENCH = "vsibench"  # the benchmark the bundled scene list comes from
EXTRA = "exclude_scenes_file"  # what the mix's own scene list counts under
REASONS = ("scene id", "scene id (normalised)", "image content", "video content", "benchmark id")


@dataclass
class Exclusions:
    """The scenes and benchmark contents kept out of every split, and a tally of what was kept out."""

    scenes: dict[str, str]  # scene_id -> source of the list it came from
    fingerprints: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (kind, value) -> benchmarks
    extra: frozenset[str] = frozenset()  # the scenes of the mix's own list (`exclude_scenes_file`)
    excluded_items: dict[str, int] = field(default_factory=dict)  # item source -> items dropped
    _seen: dict[str, set[str]] = field(default_factory=dict)  # item source -> scene ids dropped
    _reasons: Counter = field(default_factory=Counter)  # (benchmark, reason) -> items

    def __post_init__(self) -> None:
        for scene in self.scenes:  # the listed scenes are fingerprints of VSI-Bench (or of the extra list)
            for canonical in scene_ids(scene) | {scene}:
                self.fingerprints.setdefault(("scene", canonical), set()).add(EXTRA if scene in self.extra else VSIBENCH)

    @classmethod
    def vsibench(cls, extra_file: str | Path | None = None, fingerprint_files: Iterable[str | Path] = ()) -> "Exclusions":
        scenes = load_scene_list(EVAL_SCENES_FILE)
        extra = load_scene_list(extra_file) if extra_file is not None else {}
        scenes.update(extra)
        found: dict[tuple[str, str], set[str]] = {}
        for path in fingerprint_files:
            for bench, kind, value in read_fingerprints(path):
                found.setdefault((kind, value), set()).add(bench)
        return cls(scenes, found, frozenset(extra))

    def _count(self, source: str, scene_id: str, matches: set[str], reason: str) -> bool:
        self.excluded_items[source] = self.excluded_items.get(source, 0) + 1
        self._seen.setdefault(source, set()).add(scene_id)
        for bench in sorted(matches):
            self._reasons[(bench, reason)] += 1
        return True

    def excludes(self, source: str, scene_id: str) -> bool:
        """True (and counted) when the scene is an evaluation scene."""
        if scene_id not in self.scenes:
            return False
        return self._count(source, scene_id, self.fingerprints.get(("scene", scene_id), {VSIBENCH}), "scene id")

    def excludes_item(self, source: str, scene_id: str, provenance: dict[str, Any]) -> bool:
        """True (and counted under its first reason) when an item shares a scene, video, image or
        question with an evaluation benchmark, by id or by content."""
        if self.excludes(source, scene_id):
            return True
        if ("scene", scene_id) in self.fingerprints:
            return self._count(source, scene_id, self.fingerprints[("scene", scene_id)], "scene id")
        media = provenance.get("media")
        refs = [scene_id] + [str(v) for v in _flat(media.values() if isinstance(media, dict) else [])]
        checks = (("scene", {c for ref in refs for c in scene_ids(ref)}, "scene id (normalised)"),
                  ("image", set(map(str, provenance.get("image_digests") or ())), "image content"),
                  ("video", set(map(str, provenance.get("video_digests") or ())), "video content"),
                  ("id", set(map(str, provenance.get("benchmark_ids") or ())), "benchmark id"))
        for kind, values, reason in checks:
            matches = {b for v in values for b in self.fingerprints.get((kind, v), ())}
            if matches:
                return self._count(source, scene_id, matches, reason)
        return False

    def report(self) -> dict:
        """Per item source: scenes and items excluded, and the listed scene ids that were found; per
        benchmark: items excluded by each reason (an item matching several benchmarks counts in each)."""
        per_benchmark: dict[str, dict[str, int]] = {}
        for (bench, reason), n in sorted(self._reasons.items(), key=lambda kv: (kv[0][0], REASONS.index(kv[0][1]))):
            per_benchmark.setdefault(bench, {})[reason] = n
        return {
            "listed_scenes": len(self.scenes),
            "fingerprints": dict(sorted(Counter(k for k, _ in self.fingerprints).items())),
            "per_source": {
                src: {"scenes": len(self._seen[src]), "items": self.excluded_items[src]}
                for src in sorted(self._seen)
            },
            "per_benchmark": per_benchmark,
            "scene_ids": {src: sorted(ids) for src, ids in sorted(self._seen.items())},
        }


def _flat(values: Iterable[Any]) -> Iterable[Any]:
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from v
        elif v is not None:
            yield v


def assign_splits(
    scenes: Iterable[tuple[str, str]], shares: dict[str, float], rng: np.random.Generator
) -> dict[tuple[str, str], str]:
    """Assign each (source, scene_id) to one split, with scene counts proportional to `shares`.

    Scenes are sorted (so input order does not matter), shuffled by `rng`, then cut by
    largest-remainder counts; every split with a share gets at least one scene when
    there are enough scenes.
    """
    ordered = sorted(set(scenes))
    keys = [ordered[i] for i in rng.permutation(len(ordered))]
    names = sorted(shares)
    counts = _largest_remainder(len(keys), [shares[n] for n in names])
    if len(keys) >= len(names):
        for i, c in enumerate(counts):  # take one from the largest split for an empty one
            if c == 0:
                j = max(range(len(counts)), key=lambda j: counts[j])
                counts[j] -= 1
                counts[i] = 1
    out: dict[tuple[str, str], str] = {}
    start = 0
    for name, c in zip(names, counts):
        for key in keys[start : start + c]:
            out[key] = name
        start += c
    return out


def align_corpus_splits(split_of: dict[tuple[str, str], str], corpora: Iterable[str]) -> int:
    """Put each corpus scene that holds a scan id into the split of that scan, so that one scan never
    feeds two splits: the split of a scan source's scene with that id when there is one, else of the
    first (sorted) corpus scene naming it. Scan sources' own scenes keep their splits. Returns how many
    corpus scenes moved."""
    corpora = set(corpora)
    scan_split = {sid: split for (src, sid), split in sorted(split_of.items()) if src not in corpora}
    first: dict[str, str] = {}
    moved = 0
    for key in sorted(k for k in split_of if k[0] in corpora):
        ids = sorted(scene_ids(key[1]))
        if len(ids) != 1:  # no scan id, or several: nothing to align with
            continue
        target = scan_split.get(ids[0]) or first.setdefault(ids[0], split_of[key])
        if split_of[key] != target:
            split_of[key] = target
            moved += 1
    return moved


def _largest_remainder(total: int, weights: list[float]) -> list[int]:
    """Integer counts summing to `total`, proportional to `weights` (Hamilton's method)."""
    s = sum(weights)
    exact = [total * w / s for w in weights]
    counts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    return counts
