"""File I/O for every layer: robust readers for source files, and the one atomic write.

Each reader turns any failure (missing file, truncated PLY, invalid JSON, a
matrix of the wrong shape, non-finite numbers) into a `SceneError` that names
the file and the problem, so that an adapter can report one bad scene and go on.
Only regular files are read (`open_regular`, `check_regular`): a named pipe or a
device in place of a scene file would block the reader forever, and a symlink
loop or a file without read permission fails the same way on every try, so each
is the scene's data error, naming the file.

`worker_process_setup` is how every child process of a build starts (the scene processes, the
synthetic generator's pool): it lives here for the same reason.

`atomic_output` is the only way the project writes a file that others read (result
files, shards, the card, plots, the manifest, reports): it lives here, in the lowest
layer, because `sources` must not import `pipeline` and everything imports `sources`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import re
import secrets
import signal
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import plyfile

from numerical3d.errors import Numerical3DError
from numerical3d.sources.scene import SceneError


PR_SET_PDEATHSIG = 1  # Linux prctl option: a signal delivered when the parent dies


def worker_process_setup() -> None:
    """A build's child process: Ctrl-C is its parent's to handle (no traceback per child), and it
    is SIGKILLed when its parent dies (the parent may leave with `os._exit`, which runs no cleanup),
    so no orphan keeps working after the command has ended. Its BLAS and OpenMP pools get one thread:
    a build runs one such process per core, and a pool's threads spinning beside the others' cost
    more CPU than they save (grounding_2d's box took 2.4x the CPU time with OpenBLAS's default)."""
    from threadpoolctl import threadpool_limits

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threadpool_limits(limits=1)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent's own exit ends its pool instead
        pass


def _kind(mode: int) -> str:
    """What a non-regular file is, for the error message."""
    for test, name in ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


# Errors of a path itself (not of the disk): the same on every try, so the scene's data is to blame.
PATH_ERRNOS = frozenset({errno.ENOENT, errno.ELOOP, errno.EACCES, errno.EPERM, errno.ENAMETOOLONG, errno.ENOTDIR,
                         errno.EISDIR, errno.ENXIO, errno.ENODEV})


def path_error(path: str | Path, exc: OSError, missing: str = "file is missing") -> SceneError:
    """The SceneError of a path that cannot be opened: missing, a symlink loop, no permission."""
    if isinstance(exc, FileNotFoundError):
        return SceneError(path, missing)
    if exc.errno == errno.ELOOP:
        return SceneError(path, "symbolic link loop (too many levels of symbolic links)")
    return SceneError(path, f"cannot be opened: {exc.strerror or exc}")


def check_regular(path: str | Path, missing: str = "file is missing") -> Path:
    """`path`, after checking that it is a regular file (following links), for readers that open
    by name (plyfile, OpenCV, PIL); raises SceneError for a missing file, a pipe, a device, a
    folder, a symlink loop or a permission error. An I/O error of the disk (EIO) propagates."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) or exc.errno in PATH_ERRNOS:
            raise path_error(path, exc, missing) from exc
        raise
    if not stat.S_ISREG(mode):
        raise SceneError(path, f"is {_kind(mode)}, not a regular file")
    if not os.access(path, os.R_OK):
        raise SceneError(path, "cannot be opened: Permission denied")
    return path


def check_folder(path: str | Path, what: str = "folder") -> Path:
    """`path`, after checking that it is a folder (a named pipe or a link to itself named like a
    scene is bad data, reported as such, not a scene without files)."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) or exc.errno in PATH_ERRNOS:
            raise path_error(path, exc, f"{what} is missing") from exc
        raise
    if not stat.S_ISDIR(mode):
        raise SceneError(path, f"is {'a file' if stat.S_ISREG(mode) else _kind(mode)}, not a {what}")
    return path


def open_regular(path: str | Path, missing: str = "file is missing") -> BinaryIO:
    """Open a regular file for binary reading; anything else raises SceneError without blocking.

    The open itself is non-blocking (a named pipe with no writer would wait forever), and the
    opened file is checked with fstat, so a file swapped after a check is caught as well.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) or exc.errno in PATH_ERRNOS:
            raise path_error(path, exc, missing) from exc
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise SceneError(path, f"is {_kind(mode)}, not a regular file")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def stray_entries(folder: str | Path) -> list[tuple[Path, str]]:
    """Entries of a scene folder no reader should open: links that dangle or loop, named pipes,
    devices, sockets, each with what it is (links to folders are not followed). A scene goes on
    without them; the adapter reports each as a drop."""
    out: list[tuple[Path, str]] = []
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            path = Path(dirpath) / name
            try:
                mode = os.stat(path).st_mode
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    out.append((path, "symbolic link loop"))
                elif isinstance(exc, FileNotFoundError) and os.path.islink(path):
                    out.append((path, "dangling symbolic link"))
                elif not isinstance(exc, FileNotFoundError):
                    out.append((path, f"cannot be read ({exc.strerror})"))
                continue
            if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
                out.append((path, f"{_kind(mode)}, not a regular file"))
    return sorted(out)


def present(path: str | Path) -> bool:
    """Whether anything is at `path`, even a broken link or a named pipe: an adapter asks this
    rather than `is_file()`, so that the reader then names what is wrong with it instead of
    calling it missing."""
    return os.path.lexists(path)


def read_text(path: str | Path, missing: str = "file is missing") -> str:
    """A regular text file's content (UTF-8); any failure to read it raises SceneError."""
    with open_regular(path, missing) as fh:
        data = fh.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SceneError(path, f"not UTF-8 text: {exc}") from exc


@dataclass
class PlyMesh:
    """The parts of a PLY mesh the adapters use: vertex positions, colours and the face count."""

    vertices: np.ndarray  # (N, 3) float64
    colors: np.ndarray | None  # (N, 3) uint8 when the file has red/green/blue
    n_faces: int


def read_ply(path: str | Path) -> PlyMesh:
    """Read a PLY mesh (ascii or binary) with plyfile.

    Faces are memory-mapped with `known_list_len` (50x faster than plyfile's generic
    list parser on a ScanNet-sized mesh; only vertices are used, so a mesh with other
    face sizes still gives the right vertices); if that fails the generic parser
    decides. Truncated or corrupt files raise `SceneError`.
    """
    path = check_regular(path, "mesh file is missing")
    try:
        with open_regular(path) as stream:
            header = plyfile.PlyData._parse_header(stream)
    except Exception as exc:  # plyfile raises several types for a bad header
        raise SceneError(path, f"invalid PLY header: {exc}") from exc
    known = {
        el.name: {p.name: 3 for p in el.properties if isinstance(p, plyfile.PlyListProperty)}
        for el in header.elements
        if el.name == "face"
    }
    data = None
    for mmap, attempt in (("c", known), (False, {})):
        try:
            data = plyfile.PlyData.read(str(path), mmap=mmap, known_list_len=attempt)
            break
        except Exception as exc:
            error = exc
    if data is None:
        raise SceneError(path, f"corrupt or truncated PLY: {error}")
    names = [el.name for el in data.elements]
    if "vertex" not in names:
        raise SceneError(path, "PLY has no vertex element")
    vertex = data["vertex"].data
    fields = vertex.dtype.names or ()
    if not {"x", "y", "z"} <= set(fields):
        raise SceneError(path, "PLY vertices lack x/y/z")
    xyz = np.column_stack([vertex["x"], vertex["y"], vertex["z"]]).astype(np.float64)
    if not np.isfinite(xyz).all():
        raise SceneError(path, f"{int((~np.isfinite(xyz).all(axis=1)).sum())} vertices have non-finite coordinates")
    colors = None
    if {"red", "green", "blue"} <= set(fields):
        colors = np.column_stack([vertex["red"], vertex["green"], vertex["blue"]]).astype(np.uint8)
    n_faces = data["face"].count if "face" in names else 0
    return PlyMesh(xyz, colors, int(n_faces))


def ply_truncation(path: str | Path) -> str | None:
    """Why a binary PLY is shorter than its header promises (a truncated copy) or has a bad header, or None.

    Cheap (header, one row per element, the file size) so that `sources check` can run it on every
    mesh: list properties are taken at the length of their element's first row (triangles in every
    mesh the adapters read), so only a complete read can judge a file whose lists vary. ASCII files
    are not judged here.
    """
    path = Path(path)
    with open_regular(path) as fh:
        try:
            header = plyfile.PlyData._parse_header(fh)
        except (plyfile.PlyParseError, ValueError, KeyError) as exc:
            return f"invalid PLY header: {exc}"
        if header.text:
            return None
        order = "<" if header.byte_order in ("<", "=") else ">"
        offset = fh.tell()
        size = path.stat().st_size
        for el in header.elements:
            row = 0
            for prop in el.properties:
                if isinstance(prop, plyfile.PlyListProperty):
                    count_type = np.dtype(order + prop.len_dtype)
                    fh.seek(offset + row)
                    raw = fh.read(count_type.itemsize)
                    if len(raw) < count_type.itemsize:
                        return f"truncated: ends inside element '{el.name}' ({size} bytes)"
                    n = int(np.frombuffer(raw, count_type)[0])
                    row += count_type.itemsize + n * np.dtype(prop.val_dtype).itemsize
                else:
                    row += np.dtype(prop.val_dtype).itemsize
            offset += row * el.count
            if offset > size:
                return f"truncated: {size} bytes, its header promises {offset} (element '{el.name}', {el.count} rows)"
    return None


class DuplicateKey(ValueError, Numerical3DError):
    """A JSON object names one key twice (the parser would keep the last silently)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def _key_lines(text: str, key: str) -> list[int]:
    """The lines where `key` stands as an object key in a JSON text (for the error message)."""
    pattern = re.compile(re.escape(json.dumps(key)) + r"\s*:")
    return [text.count("\n", 0, m.start()) + 1 for m in pattern.finditer(text)]


def read_json(path: str | Path) -> Any:
    """Parse a JSON file; a missing file, invalid JSON or a key given twice in one object (a second
    scene under the same id would silently replace the first) raises `SceneError`."""
    path = Path(path)
    try:
        with open_regular(path) as f:
            data = f.read()
        return json.loads(data, object_pairs_hook=_unique_pairs)
    except DuplicateKey as exc:
        lines = _key_lines(data.decode("utf-8", "replace"), exc.key)
        where = f" (lines {', '.join(map(str, lines[:4]))})" if len(lines) >= 2 else ""
        raise SceneError(path, f"key {exc.key!r} appears twice in one object{where}; refusing to guess which "
                               "one is meant") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SceneError(path, f"invalid JSON: {exc}") from exc


def require(value: Any, kind: type | tuple[type, ...], path: str | Path, what: str) -> Any:
    """Check the type of a parsed JSON field, naming the file and field when it is wrong."""
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise SceneError(path, f"{what} must be {names}, got {type(value).__name__}")
    return value


def as_matrix(values: Any, shape: tuple[int, ...], path: str | Path, what: str, *, finite: bool = True) -> np.ndarray:
    """Convert parsed numbers to a float64 array of `shape`, or raise `SceneError`."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SceneError(path, f"{what} is not numeric: {exc}") from exc
    if arr.size != int(np.prod(shape)):
        raise SceneError(path, f"{what} has {arr.size} numbers, expected {int(np.prod(shape))}")
    arr = arr.reshape(shape)
    if finite and not np.isfinite(arr).all():
        raise SceneError(path, f"{what} has non-finite values")
    return arr


def read_matrix_txt(path: str | Path, shape: tuple[int, ...], *, finite: bool = True) -> np.ndarray:
    """Read whitespace-separated numbers (ScanNet pose / intrinsic files) into `shape`."""
    path = Path(path)
    text = read_text(path)
    try:
        values = [float(tok) for tok in text.split()]
    except ValueError as exc:
        raise SceneError(path, f"not a list of numbers: {exc}") from exc
    return as_matrix(values, shape, path, "matrix", finite=finite)


def read_key_values(path: str | Path) -> dict[str, str]:
    """Read a `key = value` file (ScanNet's `<scene>.txt`)."""
    path = Path(path)
    lines = read_text(path).splitlines()
    out: dict[str, str] = {}
    for line in lines:
        if "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def valid_pose(pose: np.ndarray) -> str | None:
    """Why a 4x4 camera-to-world pose is unusable, or None when it is fine.

    ScanNet marks lost tracking with `-inf` poses; a rotation block far from
    orthonormal (singular or scaled) is equally unusable.
    """
    if pose.shape != (4, 4):
        return f"pose has shape {pose.shape}"
    if not np.isfinite(pose).all():
        return "non-finite pose"
    rot = pose[:3, :3]
    det = float(np.linalg.det(rot))
    if abs(det) < 1e-6:
        return "singular pose"
    if not np.allclose(rot.T @ rot, np.eye(3), atol=1e-3) or det < 0:
        return "pose rotation is not a rotation"
    if not np.allclose(pose[3], [0.0, 0.0, 0.0, 1.0], atol=1e-6):
        return "pose last row is not [0, 0, 0, 1]"
    return None


def valid_poses(poses: np.ndarray) -> list[str | None]:
    """`valid_pose` of each pose of a stack (n, 4, 4), checked together: a stream's thousands of poses
    cost one vectorised pass, and only the unusable ones are looked at one by one (for the reason)."""
    poses = np.asarray(poses, dtype=np.float64).reshape(-1, 4, 4)
    finite = np.isfinite(poses).all(axis=(1, 2))
    rot = np.where(finite[:, None, None], poses[:, :3, :3], np.eye(3))
    det = np.linalg.det(rot)
    orthonormal = np.isclose(np.matmul(rot.transpose(0, 2, 1), rot), np.eye(3), atol=1e-3).all(axis=(1, 2))
    last_row = np.isclose(poses[:, 3], [0.0, 0.0, 0.0, 1.0], atol=1e-6).all(axis=1)
    ok = finite & (np.abs(det) >= 1e-6) & (det >= 0) & orthonormal & last_row
    return [None if good else valid_pose(pose) for good, pose in zip(ok, poses)]


def read_image_rgb(path: str | Path) -> np.ndarray:
    """Decode an image file to RGB uint8 (H, W, 3) with OpenCV; a JPEG from its bytes up to the end
    marker, and a truncated JPEG or PNG is refused (OpenCV would fill the missing rows with grey)."""
    import cv2

    if Path(path).suffix.lower() in (".jpg", ".jpeg"):
        img = cv2.imdecode(np.frombuffer(read_jpeg(path), np.uint8), cv2.IMREAD_COLOR)
    else:
        if problem := image_problem(check_regular(path, "image is missing")):
            raise SceneError(path, problem)
        img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if img is None:
        raise SceneError(path, "image is missing or cannot be decoded")
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


def read_depth_png(path: str | Path, scale: float = 1000.0) -> np.ndarray:
    """Decode a uint16 depth PNG (millimetres by default) to float32 metres; 0 = unknown."""
    import cv2

    if problem := png_problem(check_regular(path, "depth map is missing")):
        raise SceneError(path, problem)
    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise SceneError(path, "depth map is missing or cannot be decoded")
    if img.ndim != 2 or img.dtype != np.uint16:
        raise SceneError(path, f"depth map must be single-channel uint16, got {img.dtype} {img.shape}")
    return img.astype(np.float32) / np.float32(scale)


# Bounds of a camera frame: a source file beyond them is bad data, refused before it is read whole.
MAX_FRAME_PIXELS = 64_000_000  # declared width x height (an 8K x 8K frame)
MAX_JPEG_BYTES = 64 << 20  # a clean JPEG of MAX_FRAME_PIXELS stays far below this
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})  # markers without a length (TEM, RST0-7)
_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


def jpeg_end(data: bytes | memoryview) -> int | None:
    """The offset just past a JPEG's end-of-image marker, walking its segments and scans (so an
    0xFFD9 inside entropy-coded data is never taken for the end); None when the bytes stop first.
    Raises ValueError for bytes that are not a JPEG or declare a frame beyond MAX_FRAME_PIXELS."""
    data = bytes(data)
    if data[:2] != b"\xff\xd8":
        raise ValueError("not a JPEG (no start-of-image marker)")
    pos, n = 2, len(data)
    while True:
        while pos < n and data[pos] != 0xFF:  # between segments only fill bytes may stand; be lenient
            pos += 1
        while pos < n and data[pos] == 0xFF:
            pos += 1
        if pos >= n:
            return None
        marker = data[pos]
        pos += 1
        if marker == 0xD9:
            return pos
        if marker in _STANDALONE:
            continue
        if pos + 2 > n:
            return None
        length = int.from_bytes(data[pos:pos + 2], "big")
        if length < 2:
            raise ValueError(f"corrupt JPEG segment length {length} at byte {pos}")
        if marker in _SOF and pos + 7 <= n:
            height, width = int.from_bytes(data[pos + 3:pos + 5], "big"), int.from_bytes(data[pos + 5:pos + 7], "big")
            if width * height > MAX_FRAME_PIXELS:
                raise ValueError(f"declares {width}x{height} pixels, above the bound of {MAX_FRAME_PIXELS:,}")
        pos += length
        if marker == 0xDA:  # entropy-coded data up to the next marker that is neither stuffing nor RSTn
            while True:
                pos = data.find(b"\xff", pos)
                if pos < 0 or pos + 1 >= n:
                    return None
                following = data[pos + 1]
                if following == 0x00 or 0xD0 <= following <= 0xD7 or following == 0xFF:
                    pos += 1 if following == 0xFF else 2
                    continue
                break


def clean_jpeg(data: bytes, where: str | Path) -> bytes:
    """A JPEG's bytes up to its end marker (whatever follows it dropped); a truncated, foreign or
    oversized one raises SceneError naming `where`."""
    try:
        end = jpeg_end(data)
    except ValueError as exc:
        raise SceneError(where, str(exc)) from None
    if end is None:
        raise SceneError(where, f"truncated JPEG ({len(data)} bytes, no end-of-image marker)")
    return data[:end] if end < len(data) else data


def read_jpeg(path: str | Path) -> bytes:
    """A JPEG file's image bytes, read only as far as its end marker (a gigabyte of trailing bytes
    is never read into memory); at most MAX_JPEG_BYTES."""
    path = Path(path)
    with open_regular(path, "image is missing") as fh:
        data = b""
        chunk = 1 << 20
        while True:
            more = fh.read(chunk)
            data += more
            try:
                end = jpeg_end(data)
            except ValueError as exc:
                raise SceneError(path, str(exc)) from None
            if end is not None:
                return data[:end]
            if not more:
                raise SceneError(path, f"truncated JPEG ({len(data)} bytes, no end-of-image marker)")
            if len(data) >= MAX_JPEG_BYTES:
                raise SceneError(path, f"no end-of-image marker in its first {MAX_JPEG_BYTES >> 20} MiB")
            chunk = min(chunk * 2, MAX_JPEG_BYTES - len(data))


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_problem(path: str | Path) -> str | None:
    """Why a PNG file is incomplete (its chunks stop before IEND) or not a PNG, or None: a walk over
    the chunk headers, no pixel decoded, so a truncated depth map drops its frame up front."""
    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if fh.read(8) != _PNG_SIGNATURE:
            return "not a PNG file"
        pos = 8
        while True:
            head = fh.read(8)
            if len(head) < 8:
                return f"truncated PNG ({size} bytes, ends before its IEND chunk)"
            length, kind = int.from_bytes(head[:4], "big"), head[4:]
            pos += 12 + length
            if pos > size:
                return f"truncated PNG ({size} bytes, chunk {kind!r} needs {pos})"
            if kind == b"IEND":
                return None
            fh.seek(pos)


def jpeg_problem(path: str | Path) -> str | None:
    """Why a JPEG file cannot be used (truncated, not a JPEG, oversized), or None. Cheap for a clean
    file (its last two bytes are the end marker); anything else is walked to its end marker."""
    with open_regular(path, "image is missing") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size >= 4:
            fh.seek(size - 2)
            if fh.read(2) == b"\xff\xd9":
                return None
    try:
        read_jpeg(path)
    except SceneError as exc:
        return exc.problem
    return None


def image_problem(path: str | Path) -> str | None:
    """`jpeg_problem` or `png_problem` by the file's suffix; other formats are judged when decoded."""
    suffix = Path(path).suffix.lower()
    if suffix in (".jpg", ".jpeg"):
        return jpeg_problem(path)
    if suffix == ".png":
        return png_problem(path)
    return None


def _header_size(head: bytes) -> tuple[int, int] | None:
    """(width, height) read straight from a PNG's IHDR or a JPEG's first start-of-frame segment within
    `head` (the file's first bytes), else None. A scene reads two headers per frame, and PIL's
    `Image.open` costs about fifty times this walk."""
    if head[:8] == _PNG_SIGNATURE and head[12:16] == b"IHDR":
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    if head[:2] != b"\xff\xd8":
        return None
    pos = 2
    while pos + 9 <= len(head) and head[pos] == 0xFF:
        marker = head[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in _SOF:
            return int.from_bytes(head[pos + 7:pos + 9], "big"), int.from_bytes(head[pos + 5:pos + 7], "big")
        pos += 2 + int.from_bytes(head[pos + 2:pos + 4], "big")
    return None


def image_size(path: str | Path) -> tuple[int, int]:
    """(width, height) from the image header only: PNG and JPEG headers read directly
    (`_header_size`), anything else (or a header not found in the first 64 KiB) by PIL."""
    from PIL import Image, UnidentifiedImageError

    with open_regular(path, "image is missing") as fh:
        size = _header_size(fh.read(1 << 16))
        if size is not None and min(size) > 0:
            return size
        fh.seek(0)
        try:
            with Image.open(fh) as im:
                return int(im.size[0]), int(im.size[1])
        except UnidentifiedImageError as exc:
            empty = os.fstat(fh.fileno()).st_size == 0
            raise SceneError(path, "empty image file" if empty else "not an image (corrupt or unknown format)") from exc
        except OSError as exc:
            raise SceneError(path, f"cannot read image header: {exc}") from exc


def temp_beside(path: str | Path) -> Path:
    """A new, empty, uniquely named hidden file in `path`'s folder (the folder is created).

    Same folder, so that the final rename never crosses a file system; unique, so that two
    writers of the same target never share a temp file; created with the permissions any new
    file gets (umask), since it becomes the published file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue


def commit(tmp: str | Path, path: str | Path) -> None:
    """Make a finished temp file `path`: fsync its bytes, rename it, fsync the folder's entry."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    folder = os.open(Path(path).parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


@contextlib.contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """Yield a temp path to write `path` through; readers see the old file or the whole new one.

    On success the temp file is committed (fsync, rename, fsync of the folder); on any failure
    it is removed and the old file, if any, is left as it was.
    """
    tmp = temp_beside(path)
    try:
        yield tmp
        commit(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename is None and exc.errno is not None:  # a failed write names no file (a full disk): name it
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_output(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())
