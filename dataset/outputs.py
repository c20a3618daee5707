"""The output guard of every command that writes besides `build` (site, score report, eval, ...).

The rules are `build`'s (`pipeline.build.output`, which raises the same `OutputRefused`): an output never lies inside a command's input
nor holds it; a folder holding files that no run of the command wrote is refused unless `force`,
and even then those files are never deleted nor overwritten; a command deletes only what it wrote
itself. What a folder command wrote is listed in `OUTPUT_MARKER`, written before the first file
(`complete: false`) and again at the end with every file (`complete: true`): a run killed midway
leaves a marker that still claims its files, so the next run may replace them.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from numerical3d.errors import EXIT_OUTPUT, Numerical3DError

OUTPUT_MARKER = ".numerical3d-output.json"


class OutputRefused(RuntimeError, Numerical3DError):
    """An output this command must not write (one line: the path and what is in the way)."""

    exit_code = EXIT_OUTPUT


def atomic_write_text(path: Path, text: str) -> None:
    """Readers see the old file or the whole new one (this package imports nothing of the project)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _resolved(path: str | Path) -> Path:
    return Path(path).expanduser().resolve()


def _overlaps(a: Path, b: Path) -> bool:
    return a == b or a.is_relative_to(b) or b.is_relative_to(a)


def refuse_inputs(out: str | Path, inputs: Sequence[str | Path], what: str = "--out") -> None:
    """Refuse an output that is an input, lies inside an input folder, or holds one."""
    target = _resolved(out)
    for given in inputs:
        source = _resolved(given)
        if _overlaps(target, source):
            raise OutputRefused(f"{out}: {what} would write into the input {given}; choose a folder outside it")


def check_file_out(out: str | Path, inputs: Sequence[str | Path], *, kind: str, force: bool = False) -> None:
    """A report file: not an input nor inside one, not a folder, and an existing file only when
    it is a report of the same kind (its JSON has `"report": kind`) or `force`."""
    refuse_inputs(out, inputs)
    path = Path(out).expanduser()
    if path.is_dir():
        raise OutputRefused(f"{out}: is a folder; give a file path for the report")
    if path.exists() and not force and not _is_report(path, kind):
        raise OutputRefused(f"{out}: exists and is not a {kind} report this command wrote; choose another path "
                            "or pass --force to replace it")


def _is_report(path: Path, kind: str) -> bool:
    try:
        with open(path, "rb") as fh:
            doc = json.loads(fh.read(64 << 20))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("report") == kind


def _files(folder: Path) -> list[str]:
    """Every file and symlink under `folder`, relative, sorted."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        base = Path(dirpath)
        out += [(base / n).relative_to(folder).as_posix() for n in filenames]
        out += [(base / n).relative_to(folder).as_posix() for n in dirnames if (base / n).is_symlink()]
    return sorted(out)


@dataclass
class OwnedFolder:
    """An output folder a command may write: what it wrote before, what it must keep, what it writes now."""

    root: Path
    command: str
    kept: frozenset[str]  # files that are not the command's (kept with --force): never touched
    previous: list[str]  # files an earlier run wrote: replaced by this run
    written: set[str] = field(default_factory=set)

    def _marker(self, complete: bool) -> None:
        files = sorted(self.written) if complete else sorted(set(self.previous) | self.written)
        atomic_write_text(self.root / OUTPUT_MARKER, json.dumps(
            {"command": self.command, "complete": complete, "files": files, "kept": sorted(self.kept)}, indent=1) + "\n")

    def begin(self) -> None:
        """Claim the folder (marker first), then remove what the previous run wrote."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._marker(complete=False)
        for rel in self.previous:
            (self.root / rel).unlink(missing_ok=True)
        for dirpath, _dirs, _files in sorted(os.walk(self.root), key=lambda t: -len(t[0])):
            if dirpath != str(self.root):
                try:
                    os.rmdir(dirpath)  # only folders left empty; a kept file keeps its folder
                except OSError:
                    pass

    def path(self, rel: str) -> Path:
        """Where to write `rel` (relative, '/'-separated); refuses a kept file and any escape."""
        target = (self.root / rel)
        if not _resolved(target).is_relative_to(_resolved(self.root)):
            raise OutputRefused(f"{target}: outside the output folder {self.root}")
        if rel in self.kept:
            raise OutputRefused(f"{target}: would be overwritten by {self.command} but was not written by it; "
                                "move it away first")
        self.written.add(rel)
        return target

    def adopt(self) -> None:
        """Record every file now in the folder but the kept ones as this command's: for a command
        that writes through a library of its own (an evaluation's report files), called after it."""
        self.written |= {f for f in _files(self.root) if f not in self.kept and f != OUTPUT_MARKER}

    def finish(self) -> None:
        self._marker(complete=True)


def claim_folder(out: str | Path, command: str, *, inputs: Iterable[str | Path] = (), force: bool = False,
                 writes: Iterable[str] = ()) -> OwnedFolder:
    """Check `out` for `command` and return it owned (call `begin` before writing, `finish` after).

    `writes`: the files the command will write whatever the data (index pages): a foreign file
    of that name is refused before any work, rather than midway.
    """
    refuse_inputs(out, list(inputs))
    root = Path(out).expanduser()
    if root.exists() and not root.is_dir():
        raise OutputRefused(f"{out}: is a file, not a folder; choose another --out")
    previous: list[str] = []
    kept_before: set[str] = set()
    ours: set[str] = {OUTPUT_MARKER}
    present = _files(root) if root.is_dir() else []
    marker = root / OUTPUT_MARKER
    if marker.is_file():
        try:
            doc = json.loads(marker.read_text(encoding="utf-8"))
            if doc.get("command") != command:
                raise OutputRefused(f"{out}: holds the output of `{doc.get('command')}`, not of `{command}`; "
                                    "choose another folder")
            kept_before = set(doc.get("kept", []))
            previous = [f for f in doc.get("files", []) if f in present]
            if not doc.get("complete", False):  # a killed run: all but the kept files are its own
                previous = [f for f in present if f not in kept_before and f != OUTPUT_MARKER]
        except (ValueError, AttributeError, TypeError):
            raise OutputRefused(f"{marker}: unreadable; remove it or choose another folder") from None
        ours |= set(previous)
    known = {f for f in present if f in kept_before}  # accepted with --force before: still kept, not asked again
    foreign = [f for f in present if f not in ours and f not in known]
    if foreign and not force:
        listed = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise OutputRefused(f"{out}: holds files that {command} did not write ({listed}); choose a new or empty "
                            "folder, or pass --force to write beside them (they are kept)")
    clash = sorted((set(foreign) | known) & set(writes))
    if clash:
        raise OutputRefused(f"{out}: {', '.join(clash[:3])} would be overwritten by {command} but was not written "
                            "by it; move it away first")
    return OwnedFolder(root, command, frozenset(foreign) | known, previous)
