"""A corpus question about a scan goes to the split of that scan's own questions (and corpora naming one scan agree),
so one scan never feeds both training and validation."""

from __future__ import annotations

import numpy as np

from numerical3d.pipeline.splits import align_corpus_splits, assign_splits


def test_corpus_scenes_follow_the_scan_split():
    keys = [("scannet", f"scene{i:04d}_00") for i in range(40)]
    corpus = [("vlm3r", f"scene{i:04d}_00") for i in range(40)] + [("sr91k", f"clip_SCENE{i:04d}_00") for i in range(40)]
    corpus += [("sr91k", "scene0100_00"), ("vsi590k", "scannet/scene0100_00"), ("mindcube", "among-group1")]
    split_of = assign_splits(keys + corpus, {"train": 0.5, "validation": 0.5}, np.random.default_rng(0))
    scans = {k: split_of[k] for k in keys}
    moved = align_corpus_splits(split_of, ["vlm3r", "sr91k", "vsi590k", "mindcube"])
    assert moved > 0 and {k: split_of[k] for k in keys} == scans  # the scans' own splits never move
    for i in range(40):
        scan = split_of[("scannet", f"scene{i:04d}_00")]
        assert split_of[("vlm3r", f"scene{i:04d}_00")] == scan == split_of[("sr91k", f"clip_SCENE{i:04d}_00")]
    assert split_of[("sr91k", "scene0100_00")] == split_of[("vsi590k", "scannet/scene0100_00")]  # no scan: they agree
    assert align_corpus_splits(split_of, ["vlm3r", "sr91k", "vsi590k", "mindcube"]) == 0
