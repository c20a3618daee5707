"""The output folder of a build: checked before any work, written whole, swapped in at once.

A build never writes into the dataset folder it replaces. Assembly writes the new dataset,
manifest last, into a staging folder beside it (`<parent>/.<name>.staging`, same file system),
and `commit` exchanges the two folders with one atomic rename (`renameat2(RENAME_EXCHANGE)`),
then removes the previous dataset. Until that rename the previous dataset is readable and
untouched; a build killed at any moment leaves it as it was, plus a staging folder that the
next build of the same folder removes (`clean_stale`, under the build lock).

The folder belongs to the user first: `check_out` refuses an existing file, and a folder holding
files that no build wrote (a previous build's manifest lists what it wrote) unless `force`.
Even then those files are never deleted or overwritten: `commit` carries them into the new
dataset folder, and a file whose name the build would write is refused by name. An output that is
one of the build's inputs (a source root, a corpus file or media folder), lies inside one or holds one
is refused whatever `force` says, as every other command that writes refuses it (`dataset.outputs`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from numerical3d.dataset.outputs import OutputRefused, refuse_inputs  # one refusal for every command that writes
from numerical3d.pipeline.layout import CARD, DATA, FRAMES, LOCK, MANIFEST, SCENES
from numerical3d.sources.io import atomic_write_text

# Files of the staged dataset that the build did not write: moved back into the dataset folder by
# `clean_stale` if the build dies before the swap.
CARRIED = ".build-carried.json"
_SHARD = re.compile(rf"({DATA}|{FRAMES}|{SCENES})/[^/]+-\d{{5}}-of-\d{{5}}(-[0-9a-f]{{8}})?\.parquet")
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def staging_dir(out: Path) -> Path:
    """Where the next dataset of `out` is written before the swap (beside it: one file system)."""
    out = Path(out).expanduser().resolve()
    return out.parent / f".{out.name}.staging"


def build_writes(rel: str) -> bool:
    """Whether a build may write the file at `rel` (relative to the dataset folder)."""
    return rel in (CARD, MANIFEST) or rel.startswith("plots/") or bool(_SHARD.fullmatch(rel))


def _files(folder: Path) -> list[str]:
    """Every file (and symlink) under `folder`, relative, sorted; folders themselves do not count."""
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        base = Path(dirpath)
        out += [str((base / n).relative_to(folder)) for n in filenames]
        out += [str((base / n).relative_to(folder)) for n in dirnames if (base / n).is_symlink()]
    return sorted(out)


def foreign_files(out: Path) -> list[str]:
    """Files in `out` that no build wrote: all but the lock, unless its manifest lists them."""
    owned = {LOCK, CARRIED}
    path = out / MANIFEST
    if path.is_file():
        try:
            owned |= {MANIFEST, *json.loads(path.read_text())["files"]}
        except (ValueError, KeyError, TypeError, OSError):
            pass  # unreadable: not a build's manifest, so everything else is the user's
    return [f for f in _files(out) if f not in owned]


def check_out(out: Path, force: bool = False, inputs: Sequence[Path] = ()) -> None:
    """Refuse, with one line, an output folder this build must not write (see the module doc): among
    them one that is an input of the build (a source root, a corpus file or media folder), lies
    inside one or holds one, even with `force`."""
    refuse_inputs(out, inputs)
    out = Path(out).expanduser()
    if out.is_symlink() and not out.exists():
        raise OutputRefused(f"{out}: a broken symbolic link, not a dataset folder; choose another --out")
    if out.exists() and not out.is_dir():
        raise OutputRefused(f"{out}: is a file, not a dataset folder; choose another --out")
    if out.is_dir():
        foreign = foreign_files(out)
        listed = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        if foreign and not force:
            raise OutputRefused(f"{out}: holds files that no build wrote ({listed}); choose a new or empty "
                                "folder, or pass --force to build beside them (they are kept)")
        clash = [f for f in foreign if build_writes(f)]
        if clash:
            raise OutputRefused(f"{out}: {', '.join(clash[:3])} would be overwritten by the build but was not "
                                "written by one; move it away first")
    ancestor = out.resolve()
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputRefused(f"{out}: {ancestor} is a file, so the folder cannot be created")
    if out.resolve().parent == out.resolve():
        raise OutputRefused(f"{out}: the file system root cannot be a dataset folder (a build swaps the folder)")
    if not os.access(ancestor, os.W_OK | os.X_OK) or _read_only(ancestor):
        raise OutputRefused(f"{out}: cannot write in {ancestor} (permission denied or read-only file system)")


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def clean_stale(out: Path) -> None:
    """Remove the staging folder a killed build left (the caller holds `out`'s build lock).

    Files the dying build had carried over from the dataset folder go back there first.
    """
    out = Path(out).expanduser().resolve()
    staging = staging_dir(out)
    with contextlib.suppress(FileNotFoundError):
        (out / CARRIED).unlink()
    if not staging.exists() and not staging.is_symlink():
        return
    journal = staging / CARRIED
    if journal.is_file():
        for rel in json.loads(journal.read_text()):
            src, dst = staging / rel, out / rel
            if (src.exists() or src.is_symlink()) and not (dst.exists() or dst.is_symlink()):
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.rename(src, dst)
    if staging.is_dir() and not staging.is_symlink():
        shutil.rmtree(staging)
    else:
        staging.unlink()


def fresh_staging(out: Path) -> Path:
    """An empty staging folder for `out` (any stale one removed first)."""
    clean_stale(out)
    staging = staging_dir(out)
    staging.mkdir(parents=True)
    return staging


def exchange(a: Path, b: Path) -> None:
    """Swap two folders in one atomic rename; where the kernel or file system cannot, with three
    renames (then, for a moment, `b` does not exist)."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(code, os.strerror(code), str(a), None, str(b))
    aside = a.with_name(a.name + ".old")
    os.rename(b, aside)
    os.rename(a, b)
    os.rename(aside, a)


def commit(staging: Path, out: Path) -> None:
    """Make the complete dataset in `staging` the folder `out`, carrying over the files no build
    wrote, then remove the previous dataset. The caller holds `out`'s build lock."""
    out = Path(out).expanduser().resolve()
    if not out.is_dir():
        os.rename(staging, out)
        _fsync_dir(out.parent)
        return
    if _holds_cwd(out):
        _commit_entries(staging, out)
        return
    foreign = foreign_files(out)
    if clash := [f for f in foreign if (staging / f).exists()]:
        raise OutputRefused(f"{out}: {', '.join(clash[:3])} would be overwritten by the build but was not "
                            "written by one; move it away first")
    if foreign:
        atomic_write_text(staging / CARRIED, json.dumps(foreign) + "\n")
        for rel in foreign:
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            os.rename(out / rel, staging / rel)
    if (out / LOCK).exists():  # the same inode, so the lock this build holds stays on `out`
        os.link(out / LOCK, staging / LOCK)
    try:
        exchange(staging, out)
    except BaseException:
        clean_stale(out)  # the carried files go back, the staging folder goes
        raise
    _fsync_dir(out.parent)
    with contextlib.suppress(FileNotFoundError):
        (out / CARRIED).unlink()
    shutil.rmtree(staging)


def _holds_cwd(out: Path) -> bool:
    """Whether this process works inside `out` (`--out .`): swapping the folder itself would leave
    the shell that started the build in a deleted folder."""
    try:
        cwd = Path.cwd().resolve()
    except OSError:
        return False
    return cwd == out or cwd.is_relative_to(out)


def _commit_entries(staging: Path, out: Path) -> None:
    """`commit` for a folder that must stay the same folder: each top-level entry the build wrote
    is swapped in by its own atomic rename, the manifest last (so the folder holds the previous
    dataset's manifest until every shard of the new one is in place), then what the previous
    dataset had and the new one lacks is removed. The user's files never move."""
    entries = sorted((e for e in os.listdir(staging) if e not in (LOCK, CARRIED)), key=lambda e: (e == MANIFEST, e))
    for name in entries:
        src, dst = staging / name, out / name
        if dst.exists() or dst.is_symlink():
            exchange(src, dst)
        else:
            os.rename(src, dst)
    _fsync_dir(out)
    new = set(json.loads((out / MANIFEST).read_text())["files"]) | {MANIFEST}
    for name in os.listdir(staging):  # the previous dataset's entries, now in staging
        if name in (LOCK, CARRIED):
            continue
        path = staging / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    for rel in _files(out):  # files of the previous dataset that the new one does not have
        if build_writes(rel) and rel not in new:
            (out / rel).unlink()
    shutil.rmtree(staging)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
