"""The shards' schemas, written with pyarrow alone, are the ones `datasets` itself writes.

Each feature tree is translated one node at a time into `datasets`' own classes, which then give
the arrow types and the `huggingface` metadata by their own code: the bytes must be equal, for
the dataset's four schemas and for random trees of the same vocabulary.
"""

from __future__ import annotations

import datasets
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numerical3d.pipeline.browse.preview import with_preview
from numerical3d.pipeline.hub_features import Image, Json, List, Value, arrow_schema, to_dict
from numerical3d.pipeline.scene_geometry import SCENE_FEATURES
from numerical3d.pipeline.shards import FRAME_FEATURES, ITEM_FEATURES


def as_datasets(feature):
    """The same feature in `datasets`' classes."""
    if isinstance(feature, Value):
        return datasets.Value(feature.dtype)
    if isinstance(feature, List):
        return datasets.List(as_datasets(feature.feature))
    if isinstance(feature, Image):
        return datasets.Image()
    if isinstance(feature, Json):
        return datasets.Json()
    return {name: as_datasets(f) for name, f in feature.items()}


def theirs(features) -> pa.Schema:
    return datasets.Features({name: as_datasets(f) for name, f in features.items()}).arrow_schema


@pytest.mark.parametrize("features", [ITEM_FEATURES, FRAME_FEATURES, SCENE_FEATURES, with_preview(ITEM_FEATURES)],
                         ids=["items", "frames", "scenes", "items-with-preview"])
def test_the_dataset_schemas_equal_datasets_own(features):
    ours = arrow_schema(features)
    assert ours.equals(theirs(features), check_metadata=True)
    assert ours.metadata == theirs(features).metadata  # the JSON text itself, byte for byte
    assert datasets.Features.from_arrow_schema(ours).to_dict() == to_dict(features)


names = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)
leaves = st.one_of(st.sampled_from(["string", "int32", "int64", "float64", "bool"]).map(Value),
                   st.just(Image()), st.just(Json()))
trees = st.recursive(leaves, lambda inner: st.one_of(inner.map(List), st.dictionaries(names, inner, min_size=1,
                                                                                         max_size=3)),
                     max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(names, trees, min_size=1, max_size=4))
def test_random_feature_trees_equal_datasets_own(features):
    assert arrow_schema(features).equals(theirs(features), check_metadata=True)


def test_an_unknown_dtype_is_refused_by_name():
    with pytest.raises(ValueError, match="'float16'"):
        Value("float16")
