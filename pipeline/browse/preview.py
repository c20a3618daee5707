"""The optional `preview` column: one composite image per item for the Hub's dataset viewer.

The viewer shows an `Image` column as a thumbnail next to each row, so a reader sees the
evidence (the key frame with the referenced objects drawn in, the top-down map with the geometry
the answer measures) beside the question. It is off by default (`preview.enabled`), and then the
question shards are byte for byte those of a build without it. In `media: reference` builds the
preview carries no pixels (the frame is a grey canvas with the drawings), since the frames may
not be redistributed.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
from numerical3d.pipeline.browse.evidence import evidence
from numerical3d.pipeline.browse.raster import SceneCanvas, composite, encode_jpeg
from numerical3d.pipeline.browse.shapes import Evidence
from numerical3d.pipeline.config import DatasetMix, PreviewOptions
from numerical3d.pipeline.frames import frame_pixels
from numerical3d.pipeline.hub_features import Features, Image
from numerical3d.pipeline.ingest import CORPORA
from numerical3d.pipeline.items import Item
from numerical3d.pipeline.scene_geometry import SceneGeometry


class Previewer:
    """Item -> preview JPEG, from the scenes' geometry records and (embedded media only) the frames."""

    def __init__(self, options: PreviewOptions, scenes: Mapping[tuple[str, str], SceneGeometry],
                 frames=None):
        self.options = options
        self.scenes = scenes
        # frame id -> the shard's JPEG (`EncodedFrame`, decoded here: the preview shows what a user
        # gets) or RGB (or None for a frame without pixels); or None: no pixels at all
        self.frames = frames
        self._canvases: dict[tuple[str, str, bool], SceneCanvas] = {}  # per scene and layout, a ~100 kB image

    def geometry(self, item: Item) -> SceneGeometry:
        geo = self.scenes.get((item.source, item.scene_id))
        if geo is None:
            raise ValueError(f"item {item.id}: no geometry record for scene {item.source}/{item.scene_id}")
        return geo

    def image(self, item: Item, ev: Evidence | None = None) -> np.ndarray:
        """The composite as BGR pixels (`ev`: the item's evidence, when already built)."""
        geo = self.geometry(item)
        ev = ev if ev is not None else evidence(item, geo)
        pixels = None
        if ev.key_frame is not None and self.frames is not None:
            pixels = frame_pixels(self.frames(ev.frames[ev.key_frame].frame_id))
        w, h = self.options.width, self.options.height
        full = ev.key_frame is None
        key = (item.source, item.scene_id, full)
        if key not in self._canvases:
            self._canvases[key] = SceneCanvas(geo, w if full else w - w // 2, h)
        return composite(ev, self._canvases[key], pixels, w, h)

    def __call__(self, item: Item, ev: Evidence | None = None) -> bytes:
        return encode_jpeg(self.image(item, ev), self.options.jpeg_quality)

    def column(self, items: list[Item]) -> pa.Array:
        """One preview per item; none for an ingested corpus's items (no scene geometry to draw)."""
        return pa.array([None if it.source in CORPORA else {"bytes": self(it), "path": None} for it in items],
                        pa.struct([("bytes", pa.binary()), ("path", pa.string())]))


def previewer(config: DatasetMix, scenes: Mapping[tuple[str, str], SceneGeometry] | None,
              frames=None) -> Previewer | None:
    """The build's previewer, or None when previews are off."""
    if not config.preview.enabled:
        return None
    if scenes is None:
        raise ValueError("preview.enabled needs the scenes' geometry records (made by the per-scene stage of "
                         "`numerical3d build`)")
    return Previewer(config.preview, scenes, frames if config.media.mode == "embed" else None)


def with_preview(features: Features) -> Features:
    """The question features plus the `preview` image column."""
    return {**features, "preview": Image()}
