"""zarr.json documents: spec-notes §9 items 1-11 plus must_understand, canonical output, round trips."""

from __future__ import annotations

import datetime
import json
import math
import warnings
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given

from rectizarr.core.metadata import ArrayMeta, GroupMeta, decode_node, encode_node, node_to_json
from rectizarr.errors import LenientMetadataWarning, MetadataError, UnsupportedError
from tests.strategies import attribute_dicts, dimension_names, dtypes_with_fills, examples


def doc(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [10, 8],
        "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [5, 4]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": "NaN",
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    }
    base.update(over)
    return {k: v for k, v in base.items() if v is not DROP}


DROP = object()


def dec(d: dict[str, Any] | bytes) -> Any:
    data = d if isinstance(d, bytes) else json.dumps(d).encode()
    return decode_node(data, "arr/zarr.json")


def test_tensorstore_minimal_document_opens_and_round_trips() -> None:
    d = doc(chunk_key_encoding={"name": "default"}, fill_value=0.0)
    meta = dec(d)
    assert isinstance(meta, ArrayMeta)
    assert meta.attributes == {} and meta.dimension_names is None
    assert meta.chunk_key_encoding.separator == "/"
    again = dec(encode_node(meta))
    assert node_to_json(again) == node_to_json(meta)


def test_zarr_python_style_document() -> None:
    meta = dec(doc(storage_transformers=[], attributes={"a": 1}, dimension_names=["y", None]))
    assert meta.attributes == {"a": 1}
    assert meta.dimension_names == ("y", None)
    out = node_to_json(meta)
    assert "storage_transformers" not in out
    assert out["dimension_names"] == ["y", None]


def test_non_empty_unknown_storage_transformers_fail() -> None:
    with pytest.raises(UnsupportedError, match=r"\$\.storage_transformers\[0\]"):
        dec(doc(storage_transformers=[{"name": "foo"}]))


def test_unknown_top_level_keys() -> None:
    with pytest.raises(UnsupportedError, match=r"\$\.foo"):
        dec(doc(foo=1))
    with pytest.raises(UnsupportedError):
        dec(doc(foo={"must_understand": "false"}))
    meta = dec(doc(foo={"must_understand": False, "x": 1}))
    assert meta.extra_fields == {"foo": {"must_understand": False, "x": 1}}
    assert node_to_json(meta)["foo"] == {"must_understand": False, "x": 1}
    g = dec({"zarr_format": 3, "node_type": "group", "bar": {"must_understand": False}})
    assert isinstance(g, GroupMeta) and "bar" in node_to_json(g)


@pytest.mark.parametrize(
    ("change", "exc", "where"),
    [
        ({"zarr_format": 2}, UnsupportedError, "$.zarr_format"),
        ({"zarr_format": 3.0}, UnsupportedError, "$.zarr_format"),
        ({"zarr_format": "3"}, UnsupportedError, "$.zarr_format"),
        ({"node_type": "Array"}, MetadataError, "$.node_type"),
        ({"codecs": DROP}, MetadataError, "codecs"),
        ({"codecs": []}, MetadataError, "$.codecs"),
        ({"shape": [4.0, 8]}, MetadataError, "$.shape[0]"),
        ({"shape": [True, 8]}, MetadataError, "$.shape[0]"),
        ({"shape": [-1, 8]}, MetadataError, "$.shape[0]"),
        ({"shape": "x"}, MetadataError, "$.shape"),
        ({"attributes": []}, MetadataError, "$.attributes"),
        ({"dimension_names": ["x"]}, MetadataError, "$.dimension_names"),
        ({"dimension_names": [1, 2]}, MetadataError, "$.dimension_names"),
        ({"fill_value": None}, MetadataError, "$.fill_value"),
        ({"data_type": "float99"}, UnsupportedError, "$.data_type"),
        (
            {"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [5]}}},
            MetadataError,
            "$.chunk_grid",
        ),
    ],
)
def test_clean_errors_with_paths(change: dict[str, Any], exc: type[Exception], where: str) -> None:
    with pytest.raises(exc) as info:
        dec(doc(**change))
    assert where in str(info.value)
    assert "arr/zarr.json" in str(info.value)


def test_array_document_with_group_node_type_is_a_group_error() -> None:
    with pytest.raises(UnsupportedError):
        dec(doc(node_type="group"))  # array keys are unknown to a group


@pytest.mark.parametrize(
    "codecs",
    [
        [{"name": "bytes", "configuration": {"endian": "little"}}] * 2,
        [
            {"name": "gzip", "configuration": {"level": 1}},
            {"name": "bytes", "configuration": {"endian": "little"}},
        ],
        [
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "transpose", "configuration": {"order": [1, 0]}},
        ],
        [{"name": "gzip", "configuration": {"level": 1}}],
    ],
)
def test_codec_order_violations_fail_at_open(codecs: list[Any]) -> None:
    import rectizarr

    store = rectizarr.MemoryStore()
    store.set("zarr.json", json.dumps(doc(codecs=codecs)).encode())
    with pytest.raises(MetadataError, match="codecs"):
        rectizarr.open_array(store)


def test_short_hand_names_read_never_written() -> None:
    meta = dec(doc(data_type="uint8", fill_value=0, codecs=["bytes"], chunk_key_encoding="default"))
    out = node_to_json(meta)
    assert out["codecs"] == [{"name": "bytes"}]
    assert out["chunk_key_encoding"] == {"name": "default", "configuration": {"separator": "/"}}


def test_dimension_names_null_and_duplicates() -> None:
    with pytest.warns(LenientMetadataWarning):
        meta = dec(doc(dimension_names=None))
    assert meta.dimension_names is None
    assert "dimension_names" not in node_to_json(meta)
    assert dec(doc(dimension_names=["x", "x"])).dimension_names == ("x", "x")
    assert dec(doc(dimension_names=[None, None])).dimension_names == (None, None)


def test_bare_nan_tokens_in_attributes_are_readable() -> None:
    raw = json.dumps(doc(attributes={"x": float("nan"), "y": float("inf")}), allow_nan=True).encode()
    assert b"NaN" in raw
    with pytest.warns(LenientMetadataWarning):
        meta = dec(raw)
    assert math.isnan(meta.attributes["x"]) and meta.attributes["y"] == math.inf


def test_fill_values_never_encoded_as_null() -> None:
    for dtype, fill in [
        ("float32", "NaN"),
        ("float64", "Infinity"),
        ("float16", "-Infinity"),
        ("complex64", ["NaN", "Infinity"]),
        ("float32", "0x7fc00001"),
    ]:
        data = encode_node(dec(doc(data_type=dtype, fill_value=fill)))
        assert b"null" not in data
        assert json.loads(data)["fill_value"] == fill


def test_non_finite_attributes_are_not_lost() -> None:
    meta = dec(doc(attributes={}))
    import msgspec as ms

    with_nan = ms.structs.replace(meta, attributes={"nan": float("nan")})
    with pytest.warns(LenientMetadataWarning):
        data = encode_node(with_nan)
    with pytest.warns(LenientMetadataWarning):
        back = dec(data)
    assert math.isnan(back.attributes["nan"])


def test_non_ascii_attributes_escaped_or_raw() -> None:
    escaped = json.dumps(doc(attributes={"name": "café"}), ensure_ascii=True).encode()
    raw = json.dumps(doc(attributes={"name": "café"}), ensure_ascii=False).encode("utf-8")
    assert b"\\u00e9" in escaped and "é".encode() in raw
    assert dec(escaped).attributes == dec(raw).attributes == {"name": "café"}


def test_invalid_json_and_utf8() -> None:
    with pytest.raises(MetadataError):
        dec(b"{not json")
    with pytest.raises(MetadataError):
        dec(b'{"zarr_format": 3, "node_type": "group", "attributes": {"x": "\xff"}}')
    with pytest.raises(MetadataError):
        dec(b"[1, 2]")


def test_group_with_consolidated_metadata() -> None:
    g = dec(
        {
            "zarr_format": 3,
            "node_type": "group",
            "attributes": {"a": 1},
            "consolidated_metadata": {
                "kind": "inline",
                "must_understand": False,
                "metadata": {
                    "sub": {
                        "zarr_format": 3,
                        "node_type": "group",
                        "attributes": {},
                        "consolidated_metadata": {"kind": "inline", "must_understand": False, "metadata": {}},
                    },
                    "sub/arr": doc(),
                },
            },
        }
    )
    assert isinstance(g, GroupMeta)
    assert g.consolidated_metadata is not None and set(g.consolidated_metadata["metadata"]) == {
        "sub",
        "sub/arr",
    }


def test_canonical_output_shape() -> None:
    meta = dec(
        doc(
            data_type="uint8", fill_value=0, codecs=[{"name": "bytes", "configuration": {"endian": "little"}}]
        )
    )
    out = node_to_json(meta)
    assert list(out)[:2] == ["zarr_format", "node_type"]
    assert out["codecs"] == [{"name": "bytes"}]  # 1-byte type: no configuration
    assert out["chunk_grid"] == {"name": "regular", "configuration": {"chunk_shape": [5, 4]}}


def test_million_edge_document_decodes_vectorised() -> None:
    n = 1_000_000
    edges = np.random.default_rng(0).integers(1, 5, n)
    d = doc(
        shape=[int(edges.sum()), 8],
        chunk_grid={
            "name": "rectilinear",
            "configuration": {"kind": "inline", "chunk_shapes": [[int(e) for e in edges], 4]},
        },
    )
    data = msgspec.json.encode(d)
    meta = dec(data)
    assert meta.chunk_grid.grid_shape == (n, 2)
    assert meta.chunk_grid.dims[0].offset(n - 1) == int(edges[:-1].sum())
    again = encode_node(meta)
    assert dec(again).chunk_grid.grid_shape == (n, 2)


@given(attrs=attribute_dicts, names=dimension_names(2), dtype_fill=dtypes_with_fills())
@examples(1.6)
def test_encode_decode_identity(
    attrs: dict[str, Any], names: list[str | None] | None, dtype_fill: tuple[str, Any]
) -> None:
    dtype, fill = dtype_fill
    d = doc(attributes=attrs, data_type=dtype, fill_value=fill)
    if names is not None:
        d["dimension_names"] = names
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        meta = dec(d)
        again = dec(encode_node(meta))
    assert node_to_json(again) == node_to_json(meta)
    assert node_to_json(meta)["fill_value"] == fill  # canonical fills are written back as they came
    assert again.attributes == attrs


@pytest.mark.parametrize(
    "value",
    [
        b"abc",
        datetime.date(2020, 1, 2),
        {1, 2},
        np.float32(1.5),
        np.arange(2),
        [1, {"x": b"1"}],
        {"a": {3: 1}},
    ],
)
def test_attributes_that_are_not_json_values_are_refused_not_rewritten(value: Any) -> None:
    """msgspec would store bytes as base64 text and a date as an ISO string; zarr-python refuses them."""
    import rectizarr

    with pytest.raises(MetadataError, match=r"\$\.attributes\.b"):
        rectizarr.create_array(None, shape=(1,), dtype="i1", attributes={"b": value})
    a = rectizarr.create_array(None, shape=(1,), dtype="i1", attributes={"kept": 1})
    with pytest.raises(MetadataError, match=r"\$\.attributes\.b"):
        a.attrs["b"] = value
    assert rectizarr.open_array(a.store, mode="r").attrs.asdict() == {"kept": 1}


def test_attribute_values_of_plain_type_subclasses_are_stored_as_the_plain_type() -> None:
    import enum

    import rectizarr

    class Level(enum.IntEnum):
        HIGH = 3

    a = rectizarr.create_array(
        None,
        shape=(1,),
        dtype="i1",
        attributes={"f": np.float64(2.5), "s": np.str_("x"), "e": Level.HIGH, "t": (1, [2])},
    )
    assert a.attrs.asdict() == {"f": 2.5, "s": "x", "e": 3, "t": (1, [2])}
    assert type(a.attrs.asdict()["f"]) is float
    assert rectizarr.open_array(a.store, mode="r").attrs.asdict() == {
        "f": 2.5,
        "s": "x",
        "e": 3,
        "t": [1, [2]],
    }
