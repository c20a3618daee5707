"""Reader for ScanNet's `.sens` RGB-D stream (the documented binary layout, version 4).

Opening a stream reads the header and walks the frame records, reading each
frame's pose, timestamps and byte counts and seeking past its pixels, so a
5,000-frame stream is indexed without decoding anything; `color(i)` and
`depth(i)` then seek straight to frame i.

Layout (little-endian): uint32 version; uint64 n + n bytes sensor name; four
4x4 float32 matrices (intrinsic colour, extrinsic colour, intrinsic depth,
extrinsic depth); int32 colour compression; int32 depth compression; uint32
colour width, colour height, depth width, depth height; float32 depth shift;
uint64 frame count; per frame: 4x4 float32 camera-to-world, uint64 colour
timestamp, uint64 depth timestamp, uint64 colour bytes, uint64 depth bytes,
colour data, depth data.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from numerical3d.sources.io import clean_jpeg
from numerical3d.sources.scene import SceneError

COLOR_COMPRESSION = {-1: "unknown", 0: "raw", 1: "png", 2: "jpeg"}
DEPTH_COMPRESSION = {-1: "unknown", 0: "raw_ushort", 1: "zlib_ushort", 2: "occi_ushort"}
_FRAME_HEAD = struct.Struct("<16f4Q")  # pose, colour ts, depth ts, colour size, depth size


@dataclass(frozen=True)
class SensFrame:
    """Index entry of one frame: its pose and where its bytes are."""

    pose: np.ndarray  # 4x4 camera-to-world as stored (not axis aligned)
    color_timestamp: int  # microseconds
    depth_timestamp: int
    color_offset: int
    color_size: int
    depth_offset: int
    depth_size: int


class SensReader:
    """Random access to the frames of one `.sens` file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self._read_index()
        except FileNotFoundError as exc:
            raise SceneError(self.path, "file is missing") from exc
        except struct.error as exc:
            raise SceneError(self.path, f"truncated .sens stream: {exc}") from exc

    def _read_index(self) -> None:
        with self.path.open("rb") as f:
            size = self.path.stat().st_size

            def take(fmt: str):
                st = struct.Struct(fmt)
                return st.unpack(f.read(st.size))

            (self.version,) = take("<I")
            if self.version != 4:
                raise SceneError(self.path, f"unsupported .sens version {self.version} (expected 4)")
            (name_len,) = take("<Q")
            if name_len > 4096:
                raise SceneError(self.path, f"implausible sensor-name length {name_len}")
            self.sensor_name = f.read(name_len).decode("utf-8", errors="replace")
            mats = np.asarray(take("<64f"), dtype=np.float64).reshape(4, 4, 4)
            self.intrinsic_color, self.extrinsic_color, self.intrinsic_depth, self.extrinsic_depth = mats
            color_c, depth_c = take("<ii")
            self.color_compression = COLOR_COMPRESSION.get(color_c, f"invalid ({color_c})")
            self.depth_compression = DEPTH_COMPRESSION.get(depth_c, f"invalid ({depth_c})")
            self.color_width, self.color_height, self.depth_width, self.depth_height = take("<4I")
            (self.depth_shift,) = take("<f")
            (n_frames,) = take("<Q")
            frames: list[SensFrame] = []
            for i in range(n_frames):
                head = f.read(_FRAME_HEAD.size)
                if len(head) < _FRAME_HEAD.size:
                    raise SceneError(self.path, f"truncated at frame {i} of {n_frames}")
                vals = _FRAME_HEAD.unpack(head)
                pose = np.asarray(vals[:16], dtype=np.float64).reshape(4, 4)
                cts, dts, csize, dsize = vals[16:]
                coff = f.tell()
                doff = coff + csize
                if doff + dsize > size:
                    raise SceneError(self.path, f"truncated at frame {i} of {n_frames}: data runs past the end")
                frames.append(SensFrame(pose, int(cts), int(dts), coff, int(csize), doff, int(dsize)))
                f.seek(doff + dsize)
        self.frames = frames

    def __len__(self) -> int:
        return len(self.frames)

    def _bytes(self, offset: int, size: int) -> bytes:
        with self.path.open("rb") as f:
            f.seek(offset)
            data = f.read(size)
        if len(data) != size:
            raise SceneError(self.path, f"short read at byte {offset}")
        return data

    def color_bytes(self, index: int) -> bytes:
        """The stored colour data of frame `index` as it is (a JPEG when `color_compression` is jpeg)."""
        fr = self.frames[index]
        data = self._bytes(fr.color_offset, fr.color_size)
        return clean_jpeg(data, f"{self.path}#{index}") if self.color_compression == "jpeg" else data

    def color(self, index: int) -> np.ndarray:
        """RGB uint8 (H, W, 3) of frame `index`."""
        import cv2

        data = self.color_bytes(index)
        if self.color_compression in ("jpeg", "png"):
            img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
            if img is None:
                raise SceneError(f"{self.path}#{index}", "colour image cannot be decoded")
            return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        if self.color_compression == "raw":
            expected = self.color_width * self.color_height * 3
            if len(data) != expected:
                raise SceneError(f"{self.path}#{index}", f"raw colour has {len(data)} bytes, expected {expected}")
            return np.frombuffer(data, np.uint8).reshape(self.color_height, self.color_width, 3).copy()
        raise SceneError(self.path, f"unsupported colour compression {self.color_compression}")

    def depth(self, index: int) -> np.ndarray:
        """Depth in metres, float32 (h, w), 0 where unknown."""
        fr = self.frames[index]
        data = self._bytes(fr.depth_offset, fr.depth_size)
        if self.depth_compression == "zlib_ushort":
            try:
                data = zlib.decompress(data)
            except zlib.error as exc:
                raise SceneError(f"{self.path}#{index}", f"depth is not valid zlib: {exc}") from exc
        elif self.depth_compression != "raw_ushort":
            raise SceneError(self.path, f"unsupported depth compression {self.depth_compression}")
        expected = self.depth_width * self.depth_height * 2
        if len(data) != expected:
            raise SceneError(f"{self.path}#{index}", f"depth has {len(data)} bytes, expected {expected}")
        raw = np.frombuffer(data, dtype="<u2").reshape(self.depth_height, self.depth_width)
        return raw.astype(np.float32) / np.float32(self.depth_shift)


@dataclass(frozen=True)
class SensRecord:
    """One frame to write: camera-to-world pose, colour timestamp (microseconds), stored colour bytes
    (already encoded as the header's colour compression says) and depth as uint16 map units."""

    pose: np.ndarray
    timestamp: int
    color: bytes
    depth: np.ndarray



class SensWriter:
    """Writes a version-4 stream with JPEG colour and zlib depth, the layout `SensReader` reads (and
    ScanNet ships), one frame at a time, so that benchmarks and tests exercise real-size streams."""

    def __init__(self, path: str | Path, n_frames: int, *, intrinsic_color: np.ndarray, color_size: tuple[int, int],
                 intrinsic_depth: np.ndarray, depth_size: tuple[int, int], depth_shift: float = 1000.0,
                 sensor_name: str = "StructureSensor"):
        name = sensor_name.encode("utf-8")
        k_c, k_d = np.eye(4), np.eye(4)
        k_c[:3, :3], k_d[:3, :3] = intrinsic_color, intrinsic_depth
        self._left = n_frames
        self._f = Path(path).open("wb")
        self._f.write(struct.pack("<I", 4) + struct.pack("<Q", len(name)) + name)
        for m in (k_c, np.eye(4), k_d, np.eye(4)):
            self._f.write(struct.pack("<16f", *np.asarray(m, dtype=np.float32).ravel()))
        self._f.write(struct.pack("<ii", 2, 1) + struct.pack("<4I", *color_size, *depth_size))
        self._f.write(struct.pack("<f", depth_shift) + struct.pack("<Q", n_frames))

    def add(self, r: SensRecord) -> None:
        if self._left <= 0:
            raise ValueError("more frames than the stream's header announces")
        self._left -= 1
        depth = zlib.compress(np.asarray(r.depth, dtype="<u2").tobytes(), 1)
        self._f.write(_FRAME_HEAD.pack(*np.asarray(r.pose, dtype=np.float32).ravel(), r.timestamp, r.timestamp,
                                       len(r.color), len(depth)))
        self._f.write(r.color)
        self._f.write(depth)

    def close(self) -> None:
        self._f.close()
