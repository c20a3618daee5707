"""Column features in the Hub's vocabulary, turned into arrow schemas with pyarrow alone.

A shard's schema carries its `datasets` features in the `huggingface` metadata key, which is how
`load_dataset` knows that a struct of bytes is an image and a string column is JSON. Importing
`datasets` to write that costs about 1.7 CPU-s in every process that writes shards (every build
and `assemble`), so the few feature types the dataset uses are written out here with the same
names and the same serialisation; `tests/assembly/test_hub_features.py` checks each schema
against `datasets.Features(...).arrow_schema`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

_DTYPES = {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(), "float64": pa.float64(),
           "bool": pa.bool_()}


@dataclass(frozen=True)
class Value:
    """A scalar column (`datasets.Value`)."""

    dtype: str

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            raise ValueError(f"unsupported dtype {self.dtype!r}; one of {sorted(_DTYPES)}")


@dataclass(frozen=True)
class List:
    """A variable-length list of one feature (`datasets.List`)."""

    feature: Feature


@dataclass(frozen=True)
class Image:
    """An image stored as its encoded bytes (`datasets.Image`, decoded by the reader)."""


@dataclass(frozen=True)
class Json:
    """Any JSON value, stored as text in arrow's JSON extension type (`datasets.Json`)."""


Feature = Value | List | Image | Json | dict  # a dict is a struct of named features
Features = dict[str, Feature]


def arrow_type(feature: Feature) -> pa.DataType:
    if isinstance(feature, Value):
        return _DTYPES[feature.dtype]
    if isinstance(feature, List):
        return pa.list_(arrow_type(feature.feature))
    if isinstance(feature, Image):
        return pa.struct({"bytes": pa.binary(), "path": pa.string()})
    if isinstance(feature, Json):
        return pa.json_(pa.string())
    if isinstance(feature, dict):
        return pa.struct({name: arrow_type(f) for name, f in feature.items()})
    raise TypeError(f"not a feature: {feature!r}")


def to_dict(feature: Feature) -> dict[str, Any]:
    """The feature as `datasets.Features.to_dict` writes it (key order included)."""
    if isinstance(feature, Value):
        return {"dtype": feature.dtype, "_type": "Value"}
    if isinstance(feature, List):
        return {"feature": to_dict(feature.feature), "_type": "List"}
    if isinstance(feature, (Image, Json)):
        return {"_type": type(feature).__name__}
    if isinstance(feature, dict):
        return {name: to_dict(f) for name, f in feature.items()}
    raise TypeError(f"not a feature: {feature!r}")


def arrow_schema(features: Features) -> pa.Schema:
    """The schema with the `huggingface` features metadata `load_dataset` reads back."""
    meta = {"info": {"features": to_dict(features)}}
    return pa.schema([(name, arrow_type(f)) for name, f in features.items()]).with_metadata(
        {"huggingface": json.dumps(meta)})
