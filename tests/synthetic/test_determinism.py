"""Same (n_scenes, seed, parameters) -> byte-identical files, whatever the process count; another seed
-> different scenes."""

from __future__ import annotations


def test_same_seed_gives_byte_identical_files(small_root, tmp_path, syn):
    from numerical3d.sources.synthetic import write_synthetic_scenes

    write_synthetic_scenes(tmp_path, 3, 11, instance_masks=True, **syn.SMALL)
    first, again = syn.tree_hashes(small_root), syn.tree_hashes(tmp_path)
    assert len(first) > 3 * (4 + 3 * 6)  # mesh, segs, aggregation, info + colour/depth/instance per frame
    assert first == again


def test_worker_processes_write_the_same_bytes(small_root, tmp_path, syn):
    from numerical3d.sources.synthetic import write_synthetic_scenes

    seen: list[str] = []
    ids = write_synthetic_scenes(tmp_path, 3, 11, workers=2, progress=seen.append, instance_masks=True, **syn.SMALL)
    assert ids == ["scene9000_00", "scene9001_00", "scene9002_00"] and sorted(seen) == ids
    assert syn.tree_hashes(tmp_path) == syn.tree_hashes(small_root)


def test_instance_masks_are_written_only_when_asked(small_root, tmp_path, syn):
    """Without masks (the default, what builds use) every other file is the same, byte for byte."""
    from numerical3d.sources.synthetic import write_synthetic_scenes

    write_synthetic_scenes(tmp_path, 3, 11, **syn.SMALL)
    plain, masked = syn.tree_hashes(tmp_path), syn.tree_hashes(small_root)
    assert not any("/instance/" in k for k in plain) and sum("/instance/" in k for k in masked) == 3 * 6
    assert plain == {k: v for k, v in masked.items() if "/instance/" not in k}


def test_another_seed_gives_other_scenes(small_root, tmp_path, syn):
    from numerical3d.sources.synthetic import write_synthetic_scenes

    write_synthetic_scenes(tmp_path, 1, 12, **syn.SMALL)
    other = syn.tree_hashes(tmp_path)
    base = syn.tree_hashes(small_root)
    for name in ("scene9000_00_vh_clean_2.ply", "scene9000_00.aggregation.json", "scene9000_00.truth.json",
                 "color/0.jpg", "depth/0.png", "pose/0.txt"):
        key = f"scans/scene9000_00/{name}"
        assert other[key] != base[key], key


def test_scene_ids_never_collide_with_scannet():
    from numerical3d.sources.synthetic import scene_id_for

    ids = [scene_id_for(i) for i in range(2500)]
    assert ids[0] == "scene9000_00" and ids[999] == "scene9999_00" and ids[1000] == "scene9000_01"
    assert len(set(ids)) == len(ids)
    assert all(9000 <= int(s[5:9]) <= 9999 for s in ids)  # ScanNet uses scene0000-scene0806
