"""Faults during a rebuild, through the command line: SIGKILL at each moment of a rebuild, Ctrl-C,
and a disk that fills up while the new dataset is written.

After each, the output folder holds one whole dataset, never a mix: the previous one, byte for
byte (sha256 and mtime of every file), or, once the swap has happened, the complete new one;
either loads with `datasets.load_dataset` and `DatasetFolder`. The next build removes what the
dead one left (its staging folder, a half-exported scene in the cache) and succeeds.

A fault is injected by Python run before the CLI in the build's process (`prelude`): it pauses
the build at one moment, and the test sends the signal there.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sigint import default_sigint

from numerical3d.dataset import DatasetFolder
from numerical3d.pipeline.build.output import staging_dir
from numerical3d.pipeline.layout import MANIFEST
from numerical3d.pipeline.manifest import check_files

from .test_output import CLI, cli, snapshot, tiny_plan  # noqa: F401 - tiny_plan is a fixture

# Marks the moment (a file the test waits for) and holds the build there until the signal comes.
PAUSE = """
import time
from pathlib import Path
def pause():
    Path({marker!r}).touch()
    time.sleep(300)
"""

# The scene stage: the second frame a scene exports is half written when the build dies.
IN_SCENES = PAUSE + """
from numerical3d.pipeline import frames
from numerical3d.sources.io import temp_beside
real_write = frames.atomic_write_bytes
written = []
def atomic_write_bytes(path, data):
    written.append(path)
    if len(written) == 2:
        temp_beside(path).write_bytes(data[: len(data) // 2])
        pause()
    real_write(path, data)
frames.atomic_write_bytes = atomic_write_bytes
"""

# Assembly: the first split's item shards are in the staging folder, nothing else yet.
IN_SHARDS = PAUSE + """
from numerical3d.pipeline.parquet import ShardSet
real_close = ShardSet.close
def close(self):
    paths = real_close(self)
    pause()
    return paths
ShardSet.close = close
"""

# Staging holds every shard and the card; the manifest is next.
BEFORE_MANIFEST = PAUSE + """
from numerical3d.pipeline import writer
real_manifest = writer.write_manifest
def write_manifest(*args, **kwargs):
    pause()
    return real_manifest(*args, **kwargs)
writer.write_manifest = write_manifest
"""

# The folders are exchanged; the previous dataset, now in the staging folder, is not removed yet.
AFTER_SWAP = PAUSE + """
from numerical3d.pipeline.build import output
real_exchange = output.exchange
def exchange(a, b):
    real_exchange(a, b)
    pause()
output.exchange = exchange
"""


def rebuild_until(prelude: str, plan: Path, out: Path, marker: Path, sig: int) -> tuple[int, str, float]:
    """Start a rebuild (seed 1) paused by `prelude`, send `sig` once it is paused; returns its exit
    code, stderr and the seconds it took to exit after the signal."""
    marker.unlink(missing_ok=True)
    cmd = [sys.executable, "-c", prelude.format(marker=str(marker)) + CLI, "build", "--engine", "plain",
           "--config", str(plan), "--out", str(out), "--seed", "1", "--json"]
    proc = subprocess.Popen(cmd, cwd=out.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    deadline = time.monotonic() + 240
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the rebuild ended before its pause: {proc.stderr.read()[-3000:]}")
        assert time.monotonic() < deadline, "the rebuild never reached its pause"
        time.sleep(0.05)
    sent = time.monotonic()
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    return proc.returncode, stderr, time.monotonic() - sent


def loads(out: Path) -> int:
    """The dataset in `out` as its users read it: its manifest clean, rows through `load_dataset`."""
    from datasets import load_dataset

    folder = DatasetFolder(out)
    assert check_files(out, folder.manifest) == []
    return load_dataset(str(out), split="train").num_rows


def shard_hashes(out: Path) -> dict[str, str]:
    return {f: hashlib.sha256((out / f).read_bytes()).hexdigest() for f in DatasetFolder(out).manifest["files"]}


def leftovers(*folders: Path) -> list[str]:
    """Temp files, and exported-frame folders without their result file, under `folders`."""
    found = []
    for folder in folders:
        found += [str(p) for p in folder.rglob("*.tmp")]
        found += [str(p) for p in folder.rglob("*.frames") if not p.with_suffix(".json").is_file()]
    return found


@pytest.mark.slow
def test_a_rebuild_killed_at_any_moment_leaves_one_whole_dataset(tiny_plan, tmp_path):
    out, work, marker = tmp_path / "ds", tmp_path / "ds.work", tmp_path / "paused"
    first = cli("build", "--engine", "plain", "--config", str(tiny_plan), "--out", str(out), "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    before, rows = snapshot(out), loads(out)
    staging = staging_dir(out)

    # Ctrl-C, then SIGKILL, while the scenes run: the dataset is untouched, a scene half cached.
    for sig in (signal.SIGINT, signal.SIGKILL):
        code, stderr, took = rebuild_until(IN_SCENES, tiny_plan, out, marker, sig)
        if sig == signal.SIGINT:
            assert code == 130 and took < 20, stderr[-3000:]
            assert "Traceback" not in stderr and [line for line in stderr.splitlines() if line.strip()] == [
                "interrupted: the previous dataset, if any, is untouched; run the same command again to resume "
                "(finished scenes are cached)"]
        else:
            assert code == -signal.SIGKILL
        assert snapshot(out) == before and loads(out) == rows and not staging.exists()
        half = leftovers(work)
        assert half and all("/scenes/scannet/" in p for p in half)

    # SIGKILL while the new shards are written, then between the card and the manifest.
    for prelude, staged in ((IN_SHARDS, "data"), (BEFORE_MANIFEST, "README.md")):
        code, stderr, _ = rebuild_until(prelude, tiny_plan, out, marker, signal.SIGKILL)
        assert code == -signal.SIGKILL, stderr[-3000:]
        assert (staging / staged).exists() and not (staging / MANIFEST).exists()  # the moment it died
        assert snapshot(out) == before and loads(out) == rows
        assert leftovers(work) == []  # the scene stage of this run removed the half-cached scene

    # SIGKILL right after the swap: the complete new dataset, the previous one in the staging folder.
    code, stderr, _ = rebuild_until(AFTER_SWAP, tiny_plan, out, marker, signal.SIGKILL)
    assert code == -signal.SIGKILL, stderr[-3000:]
    assert DatasetFolder(out).manifest["seed"] == 1 and loads(out) > 0
    assert DatasetFolder(staging).manifest["seed"] == 0
    swapped = shard_hashes(out)

    # The next build removes the staging folder and writes the same dataset again.
    again = cli("build", "--engine", "plain", "--config", str(tiny_plan), "--out", str(out), "--seed", "1",
                "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["scenes"] == {"cached": 3}
    assert not staging.exists() and leftovers(out, work) == [] and shard_hashes(out) == swapped


def mount_tmpfs(folder: Path, mib: int) -> str | None:
    """Mount a tmpfs of `mib` MiB on `folder`; None, or why this machine does not allow it (not
    root, or a container without CAP_SYS_ADMIN)."""
    try:
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(folder)],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if res.returncode == 0 else (res.stderr.strip() or f"mount exited {res.returncode}")


@pytest.fixture(scope="module")
def mount_refused(tmp_path_factory) -> str | None:
    """Why no tmpfs can be mounted here, or None when one can."""
    probe = tmp_path_factory.mktemp("probe")
    why = mount_tmpfs(probe, 1)
    if why is None:
        subprocess.run(["umount", str(probe)], check=True)
    return why


@pytest.fixture
def small_disk(tmp_path, mount_refused):
    """A folder on a tmpfs of its own, and a function that resizes it (KiB)."""
    if mount_refused:
        pytest.skip(f"cannot mount a tmpfs here ({mount_refused}); test_disk_full_injected runs instead")
    disk = tmp_path / "disk"
    disk.mkdir()
    assert mount_tmpfs(disk, 64) is None

    def resize(kib: int) -> None:
        subprocess.run(["mount", "-o", f"remount,size={kib}k", str(disk)], check=True)

    try:
        yield disk, resize
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def used_kib(folder: Path) -> int:
    st = os.statvfs(folder)
    return (st.f_blocks - st.f_bfree) * st.f_frsize // 1024


def assert_disk_full_leaves_previous(res: subprocess.CompletedProcess, out: Path, before: dict, rows: int) -> None:
    assert res.returncode == 1, res.stderr[-3000:]
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr and "No space left on device" in lines[0], lines
    assert snapshot(out) == before and loads(out) == rows
    assert not staging_dir(out).exists()  # its space is given back


@pytest.mark.slow
def test_a_rebuild_on_a_full_disk_leaves_the_previous_dataset(tiny_plan, tmp_path, small_disk):
    disk, resize = small_disk
    out, work = disk / "ds", tmp_path / "ds.work"  # only the dataset on the small disk
    first = cli("build", "--engine", "plain", "--config", str(tiny_plan), "--out", str(out), "--work", str(work),
                "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    before, rows = snapshot(out), loads(out)
    used = used_kib(disk)
    resize(used * 3 // 2)  # room for half a copy more: the new dataset cannot fit
    res = cli("build", "--engine", "plain", "--config", str(tiny_plan), "--out", str(out), "--work", str(work),
              "--seed", "1", "--json", cwd=tmp_path)
    assert_disk_full_leaves_previous(res, out, before, rows)
    assert f"error: {out}: No space left on device while writing the new dataset" in res.stderr
    assert used_kib(disk) <= used + 8
    # With room again, the same command builds.
    resize(64 * 1024)
    res = cli("build", "--engine", "plain", "--config", str(tiny_plan), "--out", str(out), "--work", str(work),
              "--seed", "1", "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert DatasetFolder(out).manifest["seed"] == 1 and loads(out) > 0


# Where no tmpfs can be mounted: the disk fills up at the second shard the rebuild writes.
FULL_AT_SECOND_SHARD = """
import errno, os
from numerical3d.pipeline.parquet import ShardSet
real_write = ShardSet.write
calls = []
def write(self, columns):
    calls.append(1)
    if len(calls) == 2:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.root / self.folder))
    real_write(self, columns)
ShardSet.write = write
"""


@pytest.mark.slow
def test_disk_full_injected(tiny_plan, tmp_path, mount_refused):
    if mount_refused is None:
        pytest.skip("a tmpfs can be mounted here: test_a_rebuild_on_a_full_disk_leaves_the_previous_dataset fills a real one")
    out = tmp_path / "ds"
    first = cli("build", "--engine", "plain", "--config", str(tiny_plan), "--out", str(out), "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    before, rows = snapshot(out), loads(out)
    res = cli("build", "--engine", "plain", "--config", str(tiny_plan), "--out", str(out), "--seed", "1", "--json",
              cwd=tmp_path, prelude=FULL_AT_SECOND_SHARD)
    assert_disk_full_leaves_previous(res, out, before, rows)


def test_synthetic_generation_removes_a_killed_generators_half_folder(tmp_path):
    from numerical3d.pipeline.build import SyntheticSpec, prepare_synthetic

    spec = SyntheticSpec(n_scenes=1, n_frames=2, width=32, height=24, root=tmp_path / "cache" / "scenes")
    half = tmp_path / "cache" / ".scenes.k1ll3d"  # what mkdtemp left when its build was SIGKILLed
    (half / "scans" / "scene9000_00").mkdir(parents=True)
    (half / "scans" / "scene9000_00" / "mesh.ply").write_bytes(b"ply\n")
    root = prepare_synthetic(spec)
    assert (root / "COMPLETE.json").is_file() and not half.exists()
    assert sorted(p.name for p in root.parent.iterdir()) == [".scenes.lock", "scenes"]
