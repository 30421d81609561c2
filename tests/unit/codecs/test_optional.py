"""zarrs' ``optional`` data type and ``optional`` codec (zarr-extensions ``data-types/optional``,
``codecs/optional``): bytes made by hand from the spec, the registry's example arrays (bit-exact both ways),
round trips through masked arrays, selections, and malformed input."""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.build import build_pipeline
from rectizarr.core.codec_meta import codecs_to_json, parse_codecs
from rectizarr.core.dtype import data_type_from_numpy, parse_data_type
from rectizarr.errors import CodecError, MetadataError, UnsupportedError

U8 = {"name": "optional", "configuration": {"name": "uint8", "configuration": {}}}
NESTED = {"name": "optional", "configuration": U8}
BYTES_LE = {"name": "bytes", "configuration": {"endian": "little"}}
PACKBITS = {"name": "packbits"}
OPT_CODEC = {"name": "optional", "configuration": {"mask_codecs": [PACKBITS], "data_codecs": [BYTES_LE]}}
NESTED_CODEC = {"name": "optional", "configuration": {"mask_codecs": [PACKBITS], "data_codecs": [OPT_CODEC]}}


def _header(mask: bytes, data: bytes) -> bytes:
    return struct.pack("<QQ", len(mask), len(data)) + mask + data


# zarr-extensions codecs/optional/examples (commit 530c3b7), the chunks zarrs wrote, as the spec lays them out:
# u64 LE mask length, u64 LE data length, packbits mask (LSB first), the present values.
EXAMPLE = {
    "c/0/0": _header(b"\x09", b"\x00\x05"),  # [[0, N], [N, 5]]
    "c/0/1": _header(b"\x0b", b"\x02\x03\x07"),  # [[2, 3], [N, 7]]
    "c/1/0": _header(b"\x07", b"\x08\x09\x0c"),  # [[8, 9], [12, N]]
}
EXAMPLE_VALUES = np.ma.MaskedArray(
    [[0, 0, 2, 3], [0, 5, 0, 7], [8, 9, 0, 0], [12, 0, 0, 0]],
    mask=[[0, 1, 0, 0], [1, 0, 1, 0], [0, 0, 1, 1], [0, 1, 1, 1]],
    dtype=np.uint8,
)
NESTED_EXAMPLE = {  # fill value [null] (present, inner missing): chunk 1/0 is all fill and not stored
    "c/0/0": _header(b"\x0a", _header(b"\x02", b"\x05")),  # [[N, SN], [N, 5]]
    "c/0/1": _header(b"\x0b", _header(b"\x07", b"\x02\x03\x07")),  # [[2, 3], [N, 7]]
    "c/1/1": _header(b"\x00", b""),  # all N: no data bytes at all
}


def _doc(data_type: Any, codecs: list[Any], fill: Any) -> bytes:
    return json.dumps(
        {
            "zarr_format": 3,
            "node_type": "array",
            "shape": [4, 4],
            "data_type": data_type,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 2]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": fill,
            "codecs": codecs,
        }
    ).encode()


def _same(a: Any, b: np.ma.MaskedArray) -> bool:
    a = np.ma.asarray(a)
    mask = np.ma.getmaskarray(a)
    return bool(
        a.dtype == b.dtype
        and (mask == np.ma.getmaskarray(b)).all()
        and (np.ma.getdata(a)[~mask] == np.ma.getdata(b)[~mask]).all()
    )


def test_the_registry_example_reads_as_a_masked_array() -> None:
    store = rectizarr.MemoryStore({"zarr.json": _doc(U8, [OPT_CODEC], None), **EXAMPLE})
    a = rectizarr.open_array(store)
    got = a[...]
    assert isinstance(got, np.ma.MaskedArray)
    assert _same(got, EXAMPLE_VALUES)
    assert a.fill_value is np.ma.masked
    assert a[1, 1] == 5 and a[0, 1] is np.ma.masked  # a scalar, or numpy.ma.masked


def test_the_registry_example_is_written_bit_exactly() -> None:
    data: dict[str, Any] = {}
    a = rectizarr.create_array(
        rectizarr.MemoryStore.in_dict(data),
        shape=(4, 4),
        chunks=(2, 2),
        dtype=U8,
        codecs=[OPT_CODEC],
        chunk_key_encoding={"name": "default", "separator": "/"},
    )
    a[...] = EXAMPLE_VALUES
    assert {k: v for k, v in data.items() if k.startswith("c/")} == EXAMPLE  # c/1/1 is all missing: fill
    doc = json.loads(data["zarr.json"])
    assert doc["data_type"] == U8 and doc["fill_value"] is None
    assert doc["codecs"][0]["name"] == "optional"


NESTED_ROWS = [[None, "SN", 2, 3], [None, 5, None, 7], ["SN", "SN", None, None], ["SN", "SN", None, None]]


def _nested_expected() -> np.ndarray:
    inner = np.dtype([("value", "u1"), ("valid", "?")])
    out = np.zeros((4, 4), dtype=[("value", inner), ("valid", "?")])
    for (i, j), v in np.ndenumerate(np.array(NESTED_ROWS, dtype=object)):
        if v is not None:
            out[i, j] = ((0, False), True) if v == "SN" else ((v, True), True)
    return out


def test_the_registry_nested_example_both_ways() -> None:
    chunks = dict(NESTED_EXAMPLE)
    store = rectizarr.MemoryStore({"zarr.json": _doc(NESTED, [NESTED_CODEC], [None]), **chunks})
    a = rectizarr.open_array(store)
    got = a[...]
    want = _nested_expected()
    assert got.dtype == want.dtype["value"]
    assert (~np.ma.getmaskarray(got)["valid"] == want["valid"]).all()
    assert (np.ma.getdata(got)[want["valid"]] == want["value"][want["valid"]]).all()
    data: dict[str, Any] = {}
    b = rectizarr.create_array(
        rectizarr.MemoryStore.in_dict(data),
        shape=(4, 4),
        chunks=(2, 2),
        dtype=NESTED,
        codecs=[NESTED_CODEC],
        fill_value=[None],
        chunk_key_encoding={"name": "default", "separator": "/"},
    )
    b[...] = got
    assert {k: v for k, v in data.items() if k.startswith("c/")} == chunks
    assert json.loads(data["zarr.json"])["fill_value"] == [None]


def test_hand_made_bytes_with_a_compressed_data_chain() -> None:
    """float32 big-endian values through gzip, the mask through packbits then crc32c: built from the spec."""
    import gzip

    codec = {
        "name": "optional",
        "configuration": {
            "mask_codecs": [PACKBITS, {"name": "crc32c"}],
            "data_codecs": [
                {"name": "bytes", "configuration": {"endian": "big"}},
                {"name": "gzip", "configuration": {"level": 5}},
            ],
        },
    }
    spec = ChunkSpec(
        (3, 3),
        parse_data_type({"name": "optional", "configuration": {"name": "float32"}}).numpy,
        np.zeros((), dtype=[("value", "f4"), ("valid", "?")]),
    )
    p = build_pipeline(parse_codecs([codec]), spec.dtype, [np.array([3]), np.array([3])])
    present = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 1]], dtype=bool)
    values = np.array([1.5, -2.0, 3.25, 4.0, 5.5], dtype=">f4")
    mask = bytes([0b1100_0101, 0b0000_0001])  # bits 0, 2, 6, 7, 8 (LSB first): the present elements
    from rectizarr.codecs.crc32c import crc32c

    mask_stored = mask + struct.pack("<I", crc32c(mask))
    stored = _header(mask_stored, gzip.compress(values.tobytes()))
    chunk = p.decode(stored, spec)
    assert (chunk["valid"] == present).all()
    assert (chunk["value"][present] == values.astype("f4")).all()
    assert (chunk["value"][~present] == 0).all()
    again = p.decode(p.encode(chunk, spec), spec)
    assert again.tobytes() == chunk.tobytes()


@pytest.mark.parametrize("dtype", ["int16", "float64", "bool", "complex64", "uint64"])
@pytest.mark.parametrize("fill", [None, "present"])
def test_round_trips_of_other_types_and_fills(dtype: str, fill: str | None) -> None:
    rng = np.random.default_rng(7)
    dt = {"name": "optional", "configuration": {"name": dtype}}
    fill_value = None if fill is None else np.zeros((), dtype=dtype)[()] + 1
    store = rectizarr.MemoryStore()
    a = rectizarr.create_array(store, shape=(7, 5), chunks=(3, 2), dtype=dt, fill_value=fill_value)
    values = np.ma.MaskedArray(
        (rng.standard_normal((7, 5)) * 100).astype(dtype), mask=rng.random((7, 5)) < 0.4
    )
    a[...] = values
    assert _same(a[...], values)
    assert _same(rectizarr.open_array(store)[...], values)
    unwritten = rectizarr.create_array(rectizarr.MemoryStore(), shape=(2,), dtype=dt, fill_value=fill_value)
    got = unwritten[...]
    if fill is None:
        assert np.ma.getmaskarray(got).all()
    else:
        assert not np.ma.getmaskarray(got).any() and (got == fill_value).all()


def test_default_codecs_are_zarrs_layout_and_compressed() -> None:
    data: dict[str, Any] = {}
    a = rectizarr.create_array(
        rectizarr.MemoryStore.in_dict(data),
        shape=(4,),
        chunks=(4,),
        dtype={"name": "optional", "configuration": {"name": "int32"}},
    )
    codecs = json.loads(data["zarr.json"])["codecs"]
    assert codecs[0]["name"] == "optional"
    assert codecs[0]["configuration"]["mask_codecs"][0]["name"] == "packbits"
    assert codecs[0]["configuration"]["data_codecs"] == [BYTES_LE]
    a[...] = np.ma.MaskedArray([1, 2, 3, 4], mask=[0, 1, 0, 1])
    assert a[...].tolist() == [1, None, 3, None]


def test_partial_writes_and_reads_through_selections() -> None:
    a = rectizarr.create_array(rectizarr.MemoryStore(), shape=(6, 6), chunks=(4, 4), dtype=U8)
    oracle = np.ma.masked_all((6, 6), dtype=np.uint8)
    a[1:5, 2] = np.arange(4, dtype=np.uint8)
    oracle[1:5, 2] = np.arange(4)
    a[0, :] = np.ma.MaskedArray(np.arange(6), mask=[1, 0, 1, 0, 1, 0])
    oracle[0, :] = np.ma.MaskedArray(np.arange(6), mask=[1, 0, 1, 0, 1, 0])
    a[3, 3] = 9
    oracle[3, 3] = 9
    a[1, 2] = np.ma.masked  # writing masked makes an element missing again
    oracle[1, 2] = np.ma.masked
    a.oindex[[5, 2], [0, 5]] = 7
    oracle[np.ix_([5, 2], [0, 5])] = 7
    assert _same(a[...], oracle)
    assert _same(a[1:4, 1:4], oracle[1:4, 1:4])
    assert _same(a.oindex[[0, 3], [1, 3]], oracle[np.ix_([0, 3], [1, 3])])
    assert _same(a.vindex[[0, 3, 5], [1, 3, 0]], oracle[[0, 3, 5], [1, 3, 0]])
    a[...] = np.ma.masked  # everything missing: every chunk equals the null fill and is deleted
    assert a.nchunks_initialized == 0


def test_sharded_optional_arrays() -> None:
    a = rectizarr.create_array(rectizarr.MemoryStore(), shape=(8,), chunks=(2,), shards=(4,), dtype=U8)
    values = np.ma.MaskedArray(np.arange(8, dtype=np.uint8), mask=[0, 0, 1, 1, 0, 1, 0, 1])
    a[...] = values
    assert _same(a[...], values)


def test_the_zarrs_experimental_name_is_read() -> None:
    metas = parse_codecs([{"name": "zarrs.optional", "configuration": OPT_CODEC["configuration"]}])
    assert codecs_to_json(metas)[0]["name"] == "optional"


def test_a_data_type_object_names_optional_in_create() -> None:
    assert data_type_from_numpy(U8).to_json() == U8
    assert data_type_from_numpy({"names": ["a"], "formats": ["u1"]}).name == "struct"  # NumPy's dict form


@pytest.mark.parametrize(
    ("doc", "error", "message"),
    [
        ({"name": "optional"}, MetadataError, "optional needs a configuration"),
        ({"name": "optional", "configuration": {"name": "uint8", "x": 1}}, MetadataError, "unexpected key"),
        (
            {"name": "optional", "configuration": {"name": "uint8", "configuration": []}},
            MetadataError,
            "must be an object",
        ),
        ({"name": "optional", "configuration": {"name": "float128"}}, UnsupportedError, "float128"),
    ],
)
def test_malformed_optional_data_types(doc: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        parse_data_type(doc)


@pytest.mark.parametrize("fill", [42, [1, 2], "x", {"a": 1}])
def test_malformed_optional_fill_values(fill: Any) -> None:
    dt = parse_data_type(U8)
    with pytest.raises(MetadataError, match="null or a one-element list"):
        dt.parse_fill(fill, "$.fill_value")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"mask_codecs": [PACKBITS]}, "lacks 'data_codecs'"),
        ({"mask_codecs": [PACKBITS], "data_codecs": [BYTES_LE], "x": 1}, "unknown key 'x'"),
        ({"mask_codecs": [], "data_codecs": [BYTES_LE]}, "must not be empty"),
    ],
)
def test_malformed_optional_codecs(config: dict[str, Any], message: str) -> None:
    with pytest.raises(MetadataError, match=message):
        parse_codecs([{"name": "optional", "configuration": config}])


def test_the_optional_codec_needs_the_optional_data_type() -> None:
    with pytest.raises(MetadataError, match="optional data type only") as e:
        build_pipeline(parse_codecs([OPT_CODEC]), np.dtype("u1"), [np.array([4])])
    assert e.value.path == "$.codecs[0]"


@pytest.mark.parametrize(
    "stored",
    [
        b"\x01",  # shorter than the header
        _header(b"\x09", b"\x00\x05") + b"x",  # a byte past what the header claims
        _header(b"\x09", b"\x00"),  # one value for two present
        _header(b"\x09", b""),  # no data for two present
        struct.pack("<QQ", 2**63, 0) + b"\x09",  # a huge claimed length
    ],
)
def test_corrupt_chunks_are_codec_errors(stored: bytes) -> None:
    store = rectizarr.MemoryStore({"zarr.json": _doc(U8, [OPT_CODEC], None), "c/0/0": stored})
    with pytest.raises(CodecError):
        rectizarr.open_array(store)[...]


def test_out_is_refused_for_masked_values() -> None:
    a = rectizarr.create_array(rectizarr.MemoryStore(), shape=(2,), dtype=U8)
    with pytest.raises(rectizarr.SelectionError, match="out="):
        a.get_basic_selection(..., out=np.zeros(2, dtype=a.dtype))


def test_a_struct_with_the_same_fields_is_not_optional() -> None:
    struct_type = {
        "name": "struct",
        "configuration": {
            "fields": [{"name": "value", "data_type": "uint8"}, {"name": "valid", "data_type": "bool"}]
        },
    }
    a = rectizarr.create_array(rectizarr.MemoryStore(), shape=(2,), dtype=struct_type)
    a[...] = np.array([(3, True), (4, False)], dtype=a.dtype)
    assert not isinstance(a[...], np.ma.MaskedArray) and a[...].tolist() == [(3, True), (4, False)]
    with pytest.raises(MetadataError, match="optional data type only"):
        build_pipeline(parse_codecs([OPT_CODEC]), a.dtype, [np.array([2])])


def test_the_optional_data_type_needs_the_optional_codec() -> None:
    with pytest.raises(MetadataError, match="coded by the 'optional' codec, not 'bytes'"):
        rectizarr.create_array(rectizarr.MemoryStore(), shape=(2,), dtype=U8, codecs=[BYTES_LE])


@pytest.mark.parametrize(
    ("codecs", "path", "says"),
    [
        ([{"name": "optional", "configuration": {"mask_codecs": [PACKBITS]}}], ".data_codecs", "lacks"),
        (
            [
                {
                    "name": "optional",
                    "configuration": {
                        "mask_codecs": [{"name": "packbits", "configuration": {"padding_encoding": "zz"}}],
                        "data_codecs": [BYTES_LE],
                    },
                }
            ],
            ".mask_codecs[0].configuration.padding_encoding",
            "codec 'packbits'",
        ),
        ([BYTES_LE], "", "coded by the 'optional' codec"),
    ],
)
def test_validate_checks_the_optional_codec_against_its_schema(
    tmp_path: Any, codecs: list[Any], path: str, says: str
) -> None:
    doc = json.loads(_doc(U8, codecs, None))
    (tmp_path / "zarr.json").write_text(json.dumps(doc))
    errors = list(rectizarr.validate(str(tmp_path)).errors)
    assert len(errors) == 1
    assert errors[0].json_path == ("$.codecs[0].configuration" + path if path else "$.codecs")
    assert says in errors[0].message


@pytest.mark.parametrize(
    ("data_type", "fill", "path"),
    [
        ({"name": "optional", "configuration": {"name": "uint8", "x": 1}}, None, "$.data_type.configuration"),
        (U8, 3, "$.fill_value"),
        (U8, [300], "$.fill_value[0]"),
    ],
)
def test_validate_checks_the_optional_data_type_and_fill(
    tmp_path: Any, data_type: Any, fill: Any, path: str
) -> None:
    (tmp_path / "zarr.json").write_bytes(_doc(data_type, [OPT_CODEC], fill))
    errors = list(rectizarr.validate(str(tmp_path)).errors)
    assert [e.json_path for e in errors] == [path]


@pytest.mark.parametrize("store", [rectizarr.MemoryStore, "local"])
def test_append_takes_masked_values(store: Any, tmp_path: Any) -> None:
    s = rectizarr.LocalStore(str(tmp_path)) if store == "local" else store()
    a = rectizarr.create_array(s, shape=(2,), chunks=(3,), dtype=U8)
    a[...] = np.ma.MaskedArray([1, 2], mask=[0, 1])
    a.append(np.ma.MaskedArray([3, 4, 5], mask=[1, 0, 0]))
    a.append(np.array([6], dtype=np.uint8))
    assert a[...].tolist() == [1, None, None, 4, 5, 6]


def test_optional_strings_from_hand_made_bytes_and_back() -> None:
    """An optional string: the mask packed, the present strings through vlen-utf8 (u32 count, then u32 length
    and UTF-8 bytes each), as the spec composes the two."""
    dtype = {"name": "optional", "configuration": {"name": "string"}}
    codec = {
        "name": "optional",
        "configuration": {"mask_codecs": [PACKBITS], "data_codecs": [{"name": "vlen-utf8"}]},
    }
    present = ["ab", "", "\u00e9"]
    utf8 = struct.pack("<I", 3) + b"".join(struct.pack("<I", len(x.encode())) + x.encode() for x in present)
    stored = _header(bytes([0b1101]), utf8)  # [ab, N, "", é]
    doc = json.loads(_doc(dtype, [codec], None))
    doc["shape"], doc["chunk_grid"]["configuration"]["chunk_shape"] = [4], [4]
    data: dict[str, Any] = {"zarr.json": json.dumps(doc).encode(), "c/0": stored}
    a = rectizarr.open_array(rectizarr.MemoryStore.in_dict(data))
    assert a[...].tolist() == ["ab", None, "", "\u00e9"]
    a[...] = a[...]
    assert data["c/0"] == stored
    a[1] = "x"
    a[0] = np.ma.masked
    assert a[...].tolist() == [None, "x", "", "\u00e9"]


@pytest.mark.parametrize(("inner", "fill", "value"), [("string", [""], "s"), ("bytes", None, b"\x00b")])
def test_optional_variable_length_round_trips(inner: str, fill: Any, value: Any) -> None:
    store = rectizarr.MemoryStore()
    dtype = {"name": "optional", "configuration": {"name": inner}}
    a = rectizarr.create_array(store, shape=(5,), chunks=(2,), dtype=dtype, fill_value=fill)
    a[1] = value
    a[3] = np.ma.masked
    back = rectizarr.open_array(store)
    want_fill = None if fill is None else fill[0]
    assert back[...].tolist() == [want_fill, value, want_fill, None, want_fill]
    a[...] = np.ma.masked if fill is None else fill[0]
    assert a.nchunks_initialized == 0  # every chunk equals the fill value again


def test_values_that_do_not_fit_behave_as_for_plain_arrays() -> None:
    dtype = {"name": "optional", "configuration": {"name": "int8"}}
    a = rectizarr.create_array(rectizarr.MemoryStore(), shape=(2,), dtype=dtype)
    with pytest.raises(rectizarr.CastError, match="300"):
        a[0] = 300  # a Python int past the type, as for an int8 array
    assert a[...].mask.all()
    with pytest.raises(ValueError, match="invalid literal"):
        a[0] = "x"
    a[...] = np.array([1.5, -2.5])  # arrays cast as NumPy casts them
    assert a[...].tolist() == [1, -2]
