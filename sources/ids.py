"""Ids from files are data, never paths: the one map from an id to a file name.

Scene ids, frame ids and item ids come from files the project does not control (a meta-info
JSON, a dataset's rows), and any of them may read `../../x`, `/home/user`, `..` or be empty. Every
writer and reader that puts an id into a path goes through `id_to_name`, which gives one path
component that stays inside its folder:

- an id of letters, digits, `_`, `-` and `.` (not starting with `.`), at most `MAX_PLAIN`
  characters, is its own name, so the caches and sites of ordinary ids keep their paths;
- anything else is percent-encoded byte by byte (UTF-8), `%` included, so `..` becomes `%2E.`,
  `/` becomes `%2F` and the empty id `%`; two different ids never share a name;
- an encoding longer than `MAX_PLAIN` becomes `%~` and the id's sha256 (the name limit of most
  file systems is 255 bytes), again a name no other id can have.
"""

from __future__ import annotations

import hashlib
import re

MAX_PLAIN = 120  # characters; longer ids are hashed (the name stays well under 255 bytes)
_PLAIN = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
_KEEP = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def id_to_name(value: str) -> str:
    """A file name for `value` that names no other id and never leaves its folder."""
    value = str(value)
    if len(value) <= MAX_PLAIN and _PLAIN.fullmatch(value):
        return value
    if value == "":
        return "%"
    parts = []
    for i, ch in enumerate(value):
        if ch in _KEEP and not (i == 0 and ch == "."):
            parts.append(ch)
        else:
            parts.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
    name = "".join(parts)
    if len(name) > MAX_PLAIN:
        return "%~" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return name
