"""zarrs' codecs ``reshape``, ``zarrs.squeeze`` and ``packbits``.

No peer here runs them: zarrs' Python package works only inside zarr-python's codec pipeline, and
zarr-python 3.4.2 refuses these names while parsing the metadata, before zarrs sees it; tensorstore 0.1.86
does not register them. Source of truth: the specifications in github.com/zarr-developers/zarr-extensions
(``codecs/reshape/README.md``, ``codecs/packbits/README.md``) and, for ``zarrs.squeeze`` (no written
specification beyond zarrs' documentation: "collapses dimensions with a size of 1", configuration ``{}``) and
packbits' bit order within a byte (least significant first), zarrs 0.23's source. The expected bytes below
are worked out by hand from those rules.
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import rectizarr
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.build import build_pipeline
from rectizarr.core.codec_meta import codecs_to_json, parse_codecs
from rectizarr.core.dtype import parse_data_type
from rectizarr.errors import CodecError, MetadataError, UnsupportedError

LE = {"name": "bytes", "configuration": {"endian": "little"}}


def spec(shape: tuple[int, ...], dtype: Any) -> ChunkSpec:
    dt = np.dtype(dtype)
    return ChunkSpec(shape, dt, np.zeros((), dt), "c/0")


def pipeline(codecs: list[Any], dtype: Any, edges: list[list[int]]) -> Any:
    return build_pipeline(parse_codecs(codecs), np.dtype(dtype), [np.array(e) for e in edges])


_FILLS: dict[str, Any] = {"comp": [0, 0], "bool": False, "byte": []}


def write_array(
    root: pathlib.Path,
    dtype: str,
    shape: list[int],
    chunks: list[int],
    codecs: list[Any],
    values: dict[str, bytes],
) -> None:
    root.mkdir()
    (root / "zarr.json").write_text(
        json.dumps(
            {
                "zarr_format": 3,
                "node_type": "array",
                "shape": shape,
                "data_type": dtype,
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
                "chunk_key_encoding": {"name": "default"},
                "fill_value": _FILLS.get(dtype[:4], 0),
                "codecs": codecs,
            }
        )
    )
    for key, data in values.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)


# ------------------------------------------------------------------------------------------------ reshape


def test_reshape_spec_example_stores_the_c_order_bytes(tmp_path: pathlib.Path) -> None:
    """The spec's example ``[[0, 1], [2], 3]`` on 4-d chunks: ``ravel(B) == ravel(A)``, so the stored value
    is the chunk's bytes in C order."""
    codecs = [{"name": "reshape", "configuration": {"shape": [[0, 1], [2], 3]}}, LE]
    data = np.arange(4 * 5 * 6 * 3, dtype="<u2").reshape(4, 5, 6, 3)
    write_array(tmp_path / "a", "uint16", [4, 5, 6, 3], [4, 5, 6, 3], codecs, {"c/0/0/0/0": data.tobytes()})
    a = rectizarr.open_array(str(tmp_path / "a"))
    assert np.array_equal(a[:], data)
    p = pipeline(codecs, "uint16", [[4], [5], [6], [3]])
    assert p.resolve(spec((4, 5, 6, 3), "uint16")).shape == (20, 6, 3)
    out = rectizarr.create_array(
        str(tmp_path / "b"),
        shape=(4, 5, 6, 3),
        chunks=(4, 5, 6, 3),
        dtype="uint16",
        filters=codecs[:1],
        compressors=None,
    )
    out[:] = data
    assert (tmp_path / "b" / "c" / "0" / "0" / "0" / "0").read_bytes() == data.tobytes()
    assert json.loads((tmp_path / "b" / "zarr.json").read_text())["codecs"][0] == codecs[0]


@pytest.mark.parametrize(
    ("shape", "chunk", "out"),
    [
        ([-1], (3, 4), (12,)),
        ([2, -1], (4, 6), (2, 12)),
        ([[0], -1, 1], (3, 4, 5), (3, 20, 1)),
        ([[0, 1, 2]], (2, 3, 4), (24,)),
        ([[], [0], [1]], (2, 3), (1, 2, 3)),
    ],
)
def test_reshape_output_shapes(shape: list[Any], chunk: tuple[int, ...], out: tuple[int, ...]) -> None:
    p = pipeline([{"name": "reshape", "configuration": {"shape": shape}}, LE], "int8", [[c] for c in chunk])
    assert p.resolve(spec(chunk, "int8")).shape == out
    data = np.arange(np.prod(chunk), dtype="int8").reshape(chunk)
    assert p.encode(data, spec(chunk, "int8")) == data.tobytes()
    assert np.array_equal(p.decode(data.tobytes(), spec(chunk, "int8")), data)


@pytest.mark.parametrize(
    ("shape", "chunk", "message"),
    [
        ([-1, -1], (4,), "at most one"),
        ([0, -1], (4,), "positive or -1"),
        ([[1], [0]], (2, 3), "increase strictly"),
        ([[0, 0]], (2, 3), "increase strictly"),
        ([5], (4,), "gives"),
        ([-1, 3], (4,), "cannot hold"),
        ([[2]], (4, 4), "input axis 2"),
        ([[1], 2], (2, 3), "does not line up"),
    ],
)
def test_reshape_invalid(shape: list[Any], chunk: tuple[int, ...], message: str) -> None:
    with pytest.raises(MetadataError, match=message) as info:
        pipeline([{"name": "reshape", "configuration": {"shape": shape}}, LE], "int8", [[c] for c in chunk])
    assert info.value.path is not None and info.value.path.startswith("$.codecs[0]")


def test_reshape_bad_json_names_the_path() -> None:
    with pytest.raises(MetadataError) as info:
        parse_codecs([{"name": "reshape", "configuration": {"shape": [-2]}}, LE])
    assert info.value.path == "$.codecs[0].configuration.shape[0]"
    with pytest.raises(MetadataError, match="unknown field") as info:
        parse_codecs([{"name": "reshape", "configuration": {"shape": [1], "order": "C"}}, LE])
    assert info.value.path == "$.codecs[0].configuration.order"


def test_reshape_rectilinear_chunks_checked_at_open() -> None:
    """``[[0, 1]]`` follows every chunk shape; a fixed length fits only some and is refused at open."""
    p = pipeline([{"name": "reshape", "configuration": {"shape": [[0, 1]]}}, LE], "int8", [[2, 3], [4, 5]])
    assert p.resolve(spec((3, 5), "int8")).shape == (15,)
    with pytest.raises(MetadataError, match="gives"):
        pipeline([{"name": "reshape", "configuration": {"shape": [8]}}, LE], "int8", [[2, 3], [4]])


def test_reshape_decode_checks_the_element_count() -> None:
    p = pipeline([{"name": "reshape", "configuration": {"shape": [-1]}}, LE], "int8", [[2], [2]])
    with pytest.raises(CodecError):
        p.decode(b"\x00" * 5, spec((2, 2), "int8"))


@settings(max_examples=50, deadline=None)
@given(hnp.arrays("int16", hnp.array_shapes(min_dims=1, max_dims=4, max_side=4)))
def test_reshape_flatten_round_trips(data: np.ndarray) -> None:
    p = pipeline(
        [{"name": "reshape", "configuration": {"shape": [-1]}}, LE], "int16", [[s] for s in data.shape]
    )
    enc = p.encode(data, spec(data.shape, "int16"))
    assert enc == data.astype("<i2").tobytes()
    assert np.array_equal(p.decode(enc, spec(data.shape, "int16")), data)


# ------------------------------------------------------------------------------------------------ squeeze


@pytest.mark.parametrize("name", ["zarrs.squeeze", "squeeze"])
def test_squeeze_drops_axes_of_length_one(tmp_path: pathlib.Path, name: str) -> None:
    codecs = [
        {"name": name, "configuration": {}},
        {"name": "transpose", "configuration": {"order": [1, 0]}},
        LE,
    ]
    data = np.arange(12, dtype="<i4").reshape(1, 3, 1, 4)
    # squeezed to (3, 4), then transposed: the stored bytes are the (4, 3) transpose in C order
    stored = data.reshape(3, 4).T.copy().tobytes()
    write_array(tmp_path / "a", "int32", [1, 3, 1, 4], [1, 3, 1, 4], codecs, {"c/0/0/0/0": stored})
    assert np.array_equal(rectizarr.open_array(str(tmp_path / "a"))[:], data)
    assert codecs_to_json(parse_codecs(codecs))[0] == {"name": "zarrs.squeeze", "configuration": {}}


def test_squeeze_mixed_lengths_on_a_rectilinear_axis_are_refused() -> None:
    with pytest.raises(MetadataError, match="dimensions"):
        pipeline(["squeeze", LE], "int8", [[1, 2], [3]])
    p = pipeline(["squeeze", LE], "int8", [[1], [2, 3]])
    assert p.resolve(spec((1, 3), "int8")).shape == (3,)


# ----------------------------------------------------------------------------------------------- packbits


@pytest.mark.parametrize(
    ("config", "dtype", "values", "stored"),
    [
        # bits LSB first: 1,0,1,1,0,0,0,1 -> 0b10001101; then 1,1 and six zero bits of padding
        ({"padding_encoding": "first_byte"}, "bool", [1, 0, 1, 1, 0, 0, 0, 1, 1, 1], "068d03"),
        ({"padding_encoding": "last_byte"}, "bool", [1, 0, 1, 1, 0, 0, 0, 1, 1, 1], "8d0306"),
        ({}, "bool", [1, 0, 1, 1, 0, 0, 0, 1, 1, 1], "8d03"),
        # int4: two's complement nibbles, element 0 in the low nibble
        ({}, "int4", [1, -2, 3, -8, 7], "e18307"),
        ({"padding_encoding": "none"}, "uint2", [3, 0, 1, 2, 1], "9301"),
        # bits 2..5 of int16s: 4 -> 1, -8 -> 0xe (its bits 2..5), sign-extended back
        ({"first_bit": 2, "last_bit": 5}, "int16", [4, -8, 8, -32], "e182"),
        # whole little-endian representation, as the bytes codec
        ({}, "float32", [1.0, -2.0], "0000803f000000c0"),
        ({"last_bit": 11}, "uint16", [0xFFF, 0x123], "ff3f12"),
        ({"first_bit": 16, "last_bit": 31}, "complex64", [1 + 2j], "803f0040"),
    ],
)
def test_packbits_vectors(
    tmp_path: pathlib.Path, config: dict[str, Any], dtype: str, values: list[Any], stored: str
) -> None:
    codecs = [{"name": "packbits", "configuration": config}]
    np_dtype = parse_data_type(dtype).numpy
    data = np.array(values).astype(np_dtype)
    p = pipeline(codecs, np_dtype, [[len(values)]])
    s = spec((len(values),), np_dtype)
    assert bytes(p.encode(data, s)).hex() == stored
    assert p.encoded_size(s) == len(stored) // 2
    write_array(tmp_path / "a", dtype, [len(values)], [len(values)], codecs, {"c/0": bytes.fromhex(stored)})
    got = rectizarr.open_array(str(tmp_path / "a"))[:]
    assert got.dtype == data.dtype and got.tobytes() == data.tobytes()


def test_packbits_low_bits_only_decode_as_the_spec_says() -> None:
    """Bits below ``first_bit`` read as 0; above ``last_bit``, copies of the sign bit (signed) or 0."""
    p = pipeline([{"name": "packbits", "configuration": {"first_bit": 1, "last_bit": 3}}], "int32", [[3]])
    s = spec((3,), "int32")
    assert p.decode(p.encode(np.array([7, 9, -3], "int32"), s), s).tolist() == [6, -8, -4]
    p = pipeline([{"name": "packbits", "configuration": {"last_bit": 9}}], "float64", [[1]])
    assert p.decode(p.encode(np.array([1.5]), spec((1,), "float64")), spec((1,), "float64")).tolist() == [0.0]


@pytest.mark.parametrize(
    ("codec", "dtype", "path", "message"),
    [
        (
            {"name": "packbits", "configuration": {"first_bit": 5, "last_bit": 2}},
            "int16",
            "$.codecs[0].configuration.last_bit",
            "below first_bit",
        ),
        ({"name": "packbits", "configuration": {"last_bit": 8}}, "uint8", "$.codecs[0]", "past the 8 bits"),
        ({"name": "packbits", "configuration": {"first_bit": 4}}, "int4", "$.codecs[0]", "past the 4 bits"),
        (
            {"name": "packbits", "configuration": {"padding_encoding": "start_byte"}},
            "bool",
            "$.codecs[0].configuration.padding_encoding",
            "",
        ),
        (
            {"name": "packbits", "configuration": {"first_bit": -1}},
            "bool",
            "$.codecs[0].configuration.first_bit",
            "",
        ),
        ({"name": "packbits", "configuration": {"bits": 3}}, "bool", "$.codecs[0].configuration.bits", ""),
    ],
)
def test_packbits_bad_configurations(codec: dict[str, Any], dtype: str, path: str, message: str) -> None:
    with pytest.raises(MetadataError, match=message or None) as info:
        pipeline([codec], dtype, [[4]])
    assert info.value.path == path


def test_packbits_refuses_data_types_it_cannot_code() -> None:
    with pytest.raises(MetadataError, match="packbits does not code data type") as info:
        build_pipeline(parse_codecs([{"name": "packbits"}]), np.dtype(object), [np.array([4])])
    assert info.value.path == "$.codecs[0]"


def test_packbits_refuses_a_value_of_another_size_or_padding() -> None:
    p = pipeline([{"name": "packbits", "configuration": {"padding_encoding": "first_byte"}}], "bool", [[10]])
    s = spec((10,), "bool")
    with pytest.raises(CodecError, match="takes 3"):
        p.decode(b"\x06\x8d", s)
    with pytest.raises(CodecError, match="takes 3"):
        p.decode(b"\x06" * (1 << 20), s)  # never a size the value claims: the chunk's is checked first
    with pytest.raises(CodecError, match="padding byte says 5"):
        p.decode(b"\x05\x8d\x03", s)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["int8", "uint16", "int32", "uint64", "int64"]), st.data())
def test_packbits_round_trips_the_kept_bits(dtype: str, data: st.DataObject) -> None:
    dt = np.dtype(dtype)
    nbits = dt.itemsize * 8
    first = data.draw(st.integers(0, nbits - 1))
    last = data.draw(st.integers(first, nbits - 1))
    values = data.draw(hnp.arrays(dt, st.integers(1, 40)))
    pad = data.draw(st.sampled_from(["none", "first_byte", "last_byte"]))
    p = pipeline(
        [
            {
                "name": "packbits",
                "configuration": {"padding_encoding": pad, "first_bit": first, "last_bit": last},
            }
        ],
        dt,
        [[values.size]],
    )
    s = spec(values.shape, dt)
    enc = p.encode(values, s)
    kept = last - first + 1
    assert len(enc) == -(-values.size * kept // 8) + (pad != "none")
    back = p.decode(enc, s)
    mask = ((1 << kept) - 1) << first
    for x, y in zip(values.tolist(), back.tolist(), strict=True):
        assert (x ^ y) & mask == 0 and y & ((1 << first) - 1) == 0
        if dt.kind == "i" and last < nbits - 1:
            sign = (x >> last) & 1
            assert (y < 0) == bool(sign)


def test_packbits_large_chunk_round_trips_in_blocks() -> None:
    values = np.random.default_rng(1).integers(-(2**40), 2**40, 100_003)
    p = pipeline([{"name": "packbits", "configuration": {"last_bit": 41}}], "int64", [[values.size]])
    s = spec(values.shape, "int64")
    assert np.array_equal(p.decode(p.encode(values, s), s), values)


def test_packbits_int4_all_values() -> None:
    values = np.arange(-8, 8).astype(ml_dtypes.int4)
    p = pipeline([{"name": "packbits"}], values.dtype, [[16]])
    s = spec((16,), values.dtype)
    enc = p.encode(values, s)
    assert bytes(enc) == bytes(
        (lo & 15) | ((hi & 15) << 4) for lo, hi in zip(range(-8, 8, 2), range(-7, 8, 2), strict=True)
    )
    assert p.decode(enc, s).tobytes() == values.tobytes()


# ----------------------------------------------------------------------------------------------- bitround

BITROUND_SAMPLE_UINT8 = [
    (0, 0),
    (1, 1),
    (10, 10),
    (11, 12),
    (100, 96),
    (123, 128),
    (200, 192),
    (208, 192),
    (209, 224),
    (255, 224),
]
BITROUND_SAMPLE_FLOAT32 = [
    (0.0, 0.0),
    (0.1, 0.1015625),
    (1.2, 1.25),
    (12.3, 12.0),
    (123.4, 120.0),
    (1234.5, 1280.0),
    (np.inf, np.inf),
    (-np.inf, -np.inf),
]


@pytest.mark.parametrize(
    ("dtype", "pairs"), [("uint8", BITROUND_SAMPLE_UINT8), ("float32", BITROUND_SAMPLE_FLOAT32)]
)
def test_bitround_matches_the_zarr_extensions_sample_data(
    tmp_path: pathlib.Path, dtype: str, pairs: list[tuple[float, float]]
) -> None:
    """zarr-extensions ``codecs/bitround/sample_data/README.md`` (written by zarrs, keepbits 3): the table's
    original and rounded values, written by rectizarr and read back."""
    codecs = [{"name": "bitround", "configuration": {"keepbits": 3}}, LE]
    original = np.array([p[0] for p in pairs], dtype=dtype)
    rounded = np.array([p[1] for p in pairs], dtype=dtype)
    a = rectizarr.create_array(
        str(tmp_path / "a"),
        shape=original.shape,
        chunks=original.shape,
        dtype=dtype,
        filters=codecs[:1],
        compressors=None,
    )
    a[:] = original
    assert (tmp_path / "a" / "c" / "0").read_bytes() == rounded.astype(f"<{rounded.dtype.str[1:]}").tobytes()
    assert np.array_equal(a[:], rounded)
    assert json.loads((tmp_path / "a" / "zarr.json").read_text())["codecs"][0] == codecs[0]


def test_bitround_nan_keeps_its_bits() -> None:
    p = pipeline([{"name": "bitround", "configuration": {"keepbits": 3}}, LE], "float32", [[2]])
    nan = np.array([0x7FC00000, 0xFFFFFFFF], dtype="<u4").view("float32")
    # the quiet NaN is unchanged; the all-ones NaN saturates instead of carrying into +0.0
    assert np.frombuffer(p.encode(nan, spec((2,), "float32")), "<u4").tolist() == [0x7FC00000, 0xFFF00000]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["float32", "float64"]), st.data())
def test_bitround_equals_numcodecs_on_finite_floats(dtype: str, data: st.DataObject) -> None:
    """numcodecs' BitRound (what ``numcodecs.bitround`` means) agrees wherever no carry leaves the type."""
    import numcodecs

    mantissa = 23 if dtype == "float32" else 52
    keep = data.draw(st.integers(1, mantissa))
    values = data.draw(
        hnp.arrays(dtype, st.integers(1, 30), elements={"allow_nan": False, "allow_infinity": False})
    )
    p = pipeline([{"name": "bitround", "configuration": {"keepbits": keep}}, LE], dtype, [[values.size]])
    ours = p.encode(values, spec(values.shape, dtype))
    theirs = np.asarray(numcodecs.BitRound(keep).encode(values)).reshape(
        -1
    )  # (their unsigned view of the bits)
    assert ours == theirs.view(values.dtype).astype(f"<{values.dtype.str[1:]}").tobytes()


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["uint8", "uint16", "uint32", "uint64"]), st.integers(1, 8), st.data())
def test_bitround_integers_keep_bits_from_the_top_set_bit(dtype: str, keep: int, data: st.DataObject) -> None:
    dt = np.dtype(dtype)
    values = data.draw(hnp.arrays(dt, st.integers(1, 30)))
    p = pipeline([{"name": "bitround", "configuration": {"keepbits": keep}}, LE], dt, [[values.size]])
    out = np.frombuffer(p.encode(values, spec(values.shape, dt)), dt.newbyteorder("<"))
    top = (1 << (dt.itemsize * 8)) - 1
    for x, y in zip(values.tolist(), out.tolist(), strict=True):
        drop = max(x.bit_length() - keep, 0)
        if not drop:
            assert y == x
            continue
        q, r = divmod(x, 1 << drop)
        half = 1 << (drop - 1)
        q += r > half or (r == half and q & 1)  # nearest, ties to even
        expected = min(q << drop, top)  # a carry out of the type saturates, then the low bits clear
        assert y == expected & ~((1 << drop) - 1) & top


@pytest.mark.parametrize(
    ("codec", "dtype", "path", "message"),
    [
        (
            {"name": "bitround", "configuration": {"keepbits": 0}},
            "float32",
            "$.codecs[0].configuration.keepbits",
            "at least 1",
        ),
        (
            {"name": "bitround", "configuration": {}},
            "float32",
            "$.codecs[0].configuration.keepbits",
            "keepbits",
        ),
        (
            {"name": "bitround", "configuration": {"keepbits": 3}},
            "bool",
            "$.codecs[0]",
            "bitround does not code",
        ),
        ({"name": "bitround"}, "float32", "$.codecs[0]", "configuration"),
    ],
)
def test_bitround_bad_configurations(codec: dict[str, Any], dtype: str, path: str, message: str) -> None:
    with pytest.raises(MetadataError, match=message) as info:
        pipeline([codec, LE], dtype, [[4]])
    assert info.value.path == path


# ---------------------------------------------------------------------------------------------------- zfp
# Source of truth: zarr-extensions codecs/zfp/README.md (no header; promotion rules) and the zfp library
# itself (through zfpy): a stream written with zfp's header is the header's 96 bits followed by exactly the
# header-less stream.

zfpy = pytest.importorskip("zfpy")  # (the zfp extra, in the test extra)


def _zfp(config: dict[str, Any], dtype: Any, shape: tuple[int, ...]) -> tuple[Any, ChunkSpec]:
    return pipeline([{"name": "zfp", "configuration": config}], dtype, [[s] for s in shape]), spec(
        shape, dtype
    )


@pytest.mark.parametrize(
    "config",
    [
        {"mode": "reversible"},
        {"mode": "fixed_rate", "rate": 12},
        {"mode": "fixed_precision", "precision": 14},
        {"mode": "fixed_accuracy", "tolerance": 0.01},
    ],
)
def test_zfp_stream_is_zfps_stream_without_its_header(config: dict[str, Any]) -> None:
    data = (np.random.default_rng(3).standard_normal((4, 6, 5)) * 50).astype("float32")
    p, s = _zfp(config, "float32", data.shape)
    ours = bytes(p.encode(data, s))
    kwargs = {k: v for k, v in config.items() if k != "mode"}  # (a 3-d chunk: zarrs' fixed rate is zfpy's)
    with_header = zfpy.compress_numpy(data, write_header=True, **kwargs)
    tail = np.unpackbits(np.frombuffer(with_header, np.uint8), bitorder="little")[96:]
    mine = np.unpackbits(np.frombuffer(ours, np.uint8), bitorder="little")
    n = min(tail.size, mine.size)
    assert np.array_equal(tail[:n], mine[:n]) and not tail[n:].any() and not mine[n:].any()
    assert np.array_equal(p.decode(ours, s), zfpy.decompress_numpy(with_header))


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["int8", "uint8", "int16", "uint16", "int32", "int64", "float32", "float64"]), st.data()
)
def test_zfp_reversible_round_trips_exactly(dtype: str, data: st.DataObject) -> None:
    values = data.draw(
        hnp.arrays(
            dtype,
            hnp.array_shapes(min_dims=0, max_dims=4, max_side=5),
            elements={"allow_nan": False} if dtype.startswith("float") else None,
        )
    )
    p, s = _zfp({"mode": "reversible"}, dtype, values.shape)
    enc = p.encode(values, s)
    assert len(enc) <= p.array_bytes.encoded_bound(s)
    assert p.decode(enc, s).tobytes() == values.tobytes()


def test_zfp_fixed_accuracy_keeps_the_tolerance(tmp_path: pathlib.Path) -> None:
    data = np.linspace(-10, 10, 4 * 8 * 8).reshape(4, 8, 8)
    codecs = [{"name": "zfp", "configuration": {"mode": "fixed_accuracy", "tolerance": 0.001}}]
    a = rectizarr.create_array(
        str(tmp_path / "a"),
        shape=data.shape,
        chunks=(4, 4, 8),
        dtype="float64",
        serializer=codecs[0],
        compressors=None,
    )
    a[:] = data
    assert np.abs(a[:] - data).max() <= 0.001
    assert json.loads((tmp_path / "a" / "zarr.json").read_text())["codecs"] == codecs


def test_zfp_promotes_small_integers_by_the_spec() -> None:
    """int16 -> int32 << 15; uint8 -> (x - 128) << 23 (the spec's zfp_promote_* rules), then demoted back."""
    for dtype, values, promoted in [
        ("int16", [-2, 7], np.array([-2, 7], "int32") << 15),
        ("uint8", [0, 255], (np.array([0, 255], "int32") - 128) << 23),
    ]:
        p, s = _zfp({"mode": "reversible"}, dtype, (2,))
        assert bytes(p.encode(np.array(values, dtype), s)) == zfpy.compress_numpy(
            promoted, write_header=False
        )


@pytest.mark.parametrize("shape", [(64,), (8, 8), (4, 4, 4), (2, 4, 4, 4)])
def test_zfp_fixed_rate_sets_bits_per_block_as_zarrs_does(shape: tuple[int, ...]) -> None:
    """zarrs calls zfp_stream_set_rate(rate, type, 3, 0) for every chunk: 64 * rate bits a block of 4^d values,
    i.e. zfpy's rate times 4^(3 - d)."""
    data = np.linspace(-1, 1, int(np.prod(shape))).reshape(shape)
    p, s = _zfp({"mode": "fixed_rate", "rate": 2}, "float64", shape)
    enc = bytes(p.encode(data, s))
    assert enc == zfpy.compress_numpy(data, rate=2 * 4.0 ** (3 - len(shape)), write_header=False)
    blocks = int(np.prod([-(-n // 4) for n in shape]))
    assert len(enc) == -(-blocks * 64 * 2 // 64) * 8  # 128 bits a block, in whole 64-bit words
    assert np.abs(p.decode(enc, s) - data).max() < 0.5


def test_zfp_unsigned_32_and_64_bit_clamp_as_zarrs_does() -> None:
    """zarrs 0.23 (its promote_before_zfp_encoding) stores uint32/uint64 as int32/int64, clamping larger values."""
    for dtype, big in [("uint32", 2**32 - 1), ("uint64", 2**64 - 1)]:
        p, s = _zfp({"mode": "reversible"}, dtype, (3,))
        signed = np.iinfo(f"int{dtype[4:]}").max
        enc = p.encode(np.array([0, 7, big], dtype), s)
        assert bytes(enc) == zfpy.compress_numpy(
            np.array([0, 7, signed], f"int{dtype[4:]}"), write_header=False
        )
        assert p.decode(enc, s).tolist() == [0, 7, signed]


@pytest.mark.parametrize(
    ("config", "dtype", "shape", "error", "path", "message"),
    [
        (
            {"mode": "fixed_rate"},
            "float32",
            (4,),
            MetadataError,
            "$.codecs[0].configuration.rate",
            "needs 'rate'",
        ),
        (
            {"mode": "reversible", "rate": 3},
            "float32",
            (4,),
            MetadataError,
            "$.codecs[0].configuration.rate",
            "does not take",
        ),
        ({"mode": "lossy"}, "float32", (4,), MetadataError, "$.codecs[0].configuration.mode", ""),
        (
            {"mode": "fixed_accuracy", "tolerance": -1},
            "float32",
            (4,),
            MetadataError,
            "$.codecs[0].configuration.tolerance",
            "",
        ),
        (
            {"mode": "expert", "minbits": 65, "maxbits": 64, "maxprec": 32, "minexp": -100},
            "float32",
            (4,),
            MetadataError,
            "$.codecs[0].configuration",
            "minbits <= maxbits",
        ),
        ({"mode": "reversible"}, "complex64", (4,), MetadataError, "$.codecs[0]", "zfp does not code"),
        (
            {"mode": "fixed_accuracy", "tolerance": 1},
            "int32",
            (4,),
            MetadataError,
            "$.codecs[0]",
            "floating-point",
        ),
        (
            {"mode": "reversible"},
            "float32",
            (1, 2, 1, 2, 1),
            MetadataError,
            "$.codecs[0]",
            "1 to 4 dimensions",
        ),
    ],
)
def test_zfp_bad_configurations(
    config: dict[str, Any],
    dtype: str,
    shape: tuple[int, ...],
    error: type[Exception],
    path: str,
    message: str,
) -> None:
    with pytest.raises(error, match=message or None) as info:
        _zfp(config, dtype, shape)
    assert isinstance(info.value, MetadataError) and info.value.path == path


def test_zfp_without_zfpy_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "zfpy", None)  # its import fails: not installed
    with pytest.raises(UnsupportedError, match=r"rectizarr\[zfp\]"):
        _zfp({"mode": "reversible"}, "float32", (4,))


def test_zfp_corrupt_or_oversized_values_are_codec_errors() -> None:
    p, s = _zfp({"mode": "reversible"}, "float64", (8, 8))
    with pytest.raises(CodecError, match="more than a zfp stream"):
        p.decode(b"\xff" * (1 << 20), s)  # refused before zfp sees it
    enc = bytes(p.encode(np.arange(64.0).reshape(8, 8), s))
    out = p.decode(enc[: len(enc) // 2], s)  # truncated: zfp reads zeros past the end, never past the buffer
    assert out.shape == (8, 8) and out.dtype == np.float64


@pytest.mark.parametrize(("old", "new"), [("zarrs.zfp", "zfp"), ("zarrs.bitround", "bitround")])
def test_zarrs_experimental_names_read_and_written_under_the_registered_name(old: str, new: str) -> None:
    config = {"mode": "reversible"} if new == "zfp" else {"keepbits": 5}
    assert codecs_to_json(parse_codecs([{"name": old, "configuration": config}]))[0] == {
        "name": new,
        "configuration": config,
    }


def test_new_codecs_in_shards_with_partial_reads_and_writes(tmp_path: pathlib.Path) -> None:
    """The engine's paths (shards, partial reads, read-modify-write, unwritten chunks as the fill value)
    with packbits, reshape, bitround, squeeze and zfp in the chain."""
    x = (np.arange(1000) % 16 - 8).astype(ml_dtypes.int4).reshape(10, 100)
    a = rectizarr.create_array(
        str(tmp_path / "a"),
        shape=x.shape,
        chunks=(5, 10),
        shards=(10, 50),
        dtype=x.dtype,
        serializer={"name": "packbits", "configuration": {"padding_encoding": "first_byte"}},
        compressors=[{"name": "zstd", "configuration": {"level": 3}}],
    )
    a[:] = x
    back = rectizarr.open_array(str(tmp_path / "a"))
    assert back[:].tobytes() == x.tobytes() and back[3:7, 11:93].tobytes() == x[3:7, 11:93].tobytes()

    y = np.random.default_rng(0).standard_normal((8, 6, 4)).astype("float32")
    b = rectizarr.create_array(
        str(tmp_path / "b"),
        shape=y.shape,
        chunks=(2, 3, 4),
        shards=(4, 6, 4),
        dtype="float32",
        filters=[
            {"name": "reshape", "configuration": {"shape": [[0, 1], -1]}},
            {"name": "bitround", "configuration": {"keepbits": 10}},
        ],
        serializer={"name": "zfp", "configuration": {"mode": "fixed_accuracy", "tolerance": 1e-3}},
        compressors=None,
    )
    b[:] = y
    b[1:3, 2:5, 1] = 7.0
    y[1:3, 2:5, 1] = 7.0
    assert (
        np.abs(rectizarr.open_array(str(tmp_path / "b"))[:] - y).max() <= 2e-3
    )  # tolerance + 10-bit mantissa

    c = rectizarr.create_array(
        str(tmp_path / "c"),
        shape=(1, 30, 1),
        chunks=(1, 7, 1),
        dtype="int16",
        filters=["squeeze"],
        serializer={"name": "zfp", "configuration": {"mode": "reversible"}},
        compressors=None,
        fill_value=-3,
    )
    c[0, 3:20, 0] = np.arange(17)
    expected = np.full(30, -3, dtype="int16")
    expected[3:20] = np.arange(17)
    assert rectizarr.open_array(str(tmp_path / "c"))[0, :, 0].tolist() == expected.tolist()


@settings(max_examples=50, deadline=None)
@given(hnp.arrays("uint8", hnp.array_shapes(min_dims=1, max_dims=5, min_side=1, max_side=3)))
def test_squeeze_and_reshape_by_axis_groups_round_trip(data: np.ndarray) -> None:
    """Squeeze then the remaining axes joined in pairs: the stored bytes stay the chunk's C order."""
    kept = [s for s in data.shape if s != 1]
    groups = [list(range(i, min(i + 2, len(kept)))) for i in range(0, len(kept), 2)]
    codecs = ["squeeze", {"name": "reshape", "configuration": {"shape": groups or [-1]}}, "bytes"]
    p = pipeline(codecs, "uint8", [[s] for s in data.shape])
    s = spec(data.shape, "uint8")
    enc = p.encode(data, s)
    assert enc == data.tobytes()
    assert np.array_equal(p.decode(enc, s), data)


@settings(max_examples=50, deadline=None)
@given(
    st.sampled_from(["bool", "int4", "uint2", "float4_e2m1fn"]),
    st.integers(1, 50),
    st.sampled_from(["none", "first_byte", "last_byte"]),
    st.data(),
)
def test_packbits_sub_byte_types_round_trip(name: str, n: int, pad: str, data: st.DataObject) -> None:
    dt = parse_data_type(name).numpy
    bits = {"bool": 1, "int4": 4, "uint2": 2, "float4_e2m1fn": 4}[name]
    raw = np.array(
        data.draw(st.lists(st.integers(0, (1 << bits) - 1), min_size=n, max_size=n)), dtype=np.uint8
    )
    values = raw.view(dt) if name != "bool" else raw.astype(bool)
    p = pipeline([{"name": "packbits", "configuration": {"padding_encoding": pad}}], dt, [[n]])
    s = spec((n,), dt)
    enc = p.encode(values, s)
    assert len(enc) == -(-n * bits // 8) + (pad != "none")
    assert p.decode(enc, s).tobytes() == values.tobytes()


# --------------------------------------------------------------------------------------------- vlen-array
# Source of truth: zarrs 0.23's documentation of vlen-array / zarrs.vlen_v2 ("the same as vlen-utf8,
# vlen-array, vlen-bytes from Zarr V2, decoupled from the data type"): the layout of zarr-python's vlen-utf8
# chunks, which are the peer bytes here.


def test_vlen_array_on_strings_stores_zarr_pythons_vlen_utf8_bytes(tmp_path: pathlib.Path) -> None:
    zarr = pytest.importorskip("zarr")
    values = np.array(["a", "", "h\u00e9llo", "zarr", "\u2603"] * 3, dtype=object)
    z = zarr.create_array(tmp_path / "zp", shape=values.shape, chunks=(4,), dtype=str, compressors=None)
    z[:] = values
    r = rectizarr.create_array(
        str(tmp_path / "rz"),
        shape=values.shape,
        chunks=(4,),
        dtype="string",
        serializer={"name": "vlen-array", "configuration": {}},
        compressors=None,
    )
    r[:] = values
    for key in sorted(p.name for p in (tmp_path / "zp" / "c").iterdir()):
        assert (tmp_path / "rz" / "c" / key).read_bytes() == (tmp_path / "zp" / "c" / key).read_bytes()
    assert rectizarr.open_array(str(tmp_path / "rz"))[:].tolist() == values.tolist()
    assert json.loads((tmp_path / "rz" / "zarr.json").read_text())["codecs"][0] == {
        "name": "vlen-array",
        "configuration": {},
    }


def test_vlen_array_on_bytes_and_its_zarrs_vlen_v2_alias(tmp_path: pathlib.Path) -> None:
    values = np.array([b"x", b"", b"\xff\x00"], dtype=object)
    codecs = [{"name": "zarrs.vlen_v2"}]
    stored = {
        "c/0": b"\x02\x00\x00\x00" + b"\x01\x00\x00\x00x" + b"\x00\x00\x00\x00",
        "c/1": b"\x02\x00\x00\x00" + b"\x02\x00\x00\x00\xff\x00" + b"\x00\x00\x00\x00",
    }  # (edge chunk: 2)
    write_array(tmp_path / "a", "bytes", [3], [2], codecs, stored)
    assert rectizarr.open_array(str(tmp_path / "a"))[:].tolist() == values.tolist()
    p = pipeline(codecs, object, [[2]])
    assert (
        p.encode(values[:2], ChunkSpec((2,), np.dtype(object), np.array(b"", dtype=object))) == stored["c/0"]
    )
    assert codecs_to_json(parse_codecs(codecs)) == [{"name": "vlen-array", "configuration": {}}]


def test_vlen_array_errors() -> None:
    with pytest.raises(MetadataError, match="variable-length") as info:
        pipeline([{"name": "vlen-array"}], "int32", [[4]])
    assert info.value.path == "$.codecs[0]"
    with pytest.raises(MetadataError, match="unknown field") as info:
        parse_codecs([{"name": "vlen-array", "configuration": {"dtype": "<i4"}}])
    assert info.value.path == "$.codecs[0].configuration.dtype"
    p = pipeline([{"name": "vlen-array"}], object, [[2]])
    s = ChunkSpec((2,), np.dtype(object), np.array("", dtype=object), "c/0")
    with pytest.raises(CodecError, match="holds 1000 elements") as err:
        p.decode(
            b"\xe8\x03\x00\x00", s
        )  # the count is checked against the chunk before anything is allocated
    assert err.value.codec == "vlen-array"
    with pytest.raises(CodecError, match="invalid UTF-8"):
        p.decode(b"\x02\x00\x00\x00" + b"\x01\x00\x00\x00\xff" + b"\x00\x00\x00\x00", s)
