"""Codecs of zarr-extensions: ``scale_offset`` and ``cast_value``.

Source of truth: zarr-python 3.4.2 (``zarr.codecs.ScaleOffset``, ``zarr.codecs.CastValue`` with the
``cast-value-rs`` backend) for bytes, and the specifications in github.com/zarr-developers/zarr-extensions
(``codecs/scale_offset/README.md``, ``codecs/cast_value/README.md``) for the metadata rules. Arrays written by
zarr-python are read by rectizarr bit for bit; arrays written by rectizarr have the same chunk bytes as
zarr-python's and read back in zarr-python.
"""

from __future__ import annotations

import json
import pathlib
import sys
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import rectizarr
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.build import build_pipeline
from rectizarr.core.codec_meta import codecs_to_json, parse_codecs
from rectizarr.errors import CodecError, LenientMetadataWarning, MetadataError, UnsupportedError

zarr = pytest.importorskip("zarr")  # (installed with the test extra; the module needs zarr >= 3.4)
from zarr.codecs.cast_value import CastValue  # noqa: E402
from zarr.codecs.scale_offset import ScaleOffset  # noqa: E402

LE = {"name": "bytes", "configuration": {"endian": "little"}}


def _chunks(root: pathlib.Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "zarr.json"
    }


def _codecs(root: pathlib.Path) -> list[Any]:
    codecs: list[Any] = json.loads((root / "zarr.json").read_text())["codecs"]
    return codecs


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def spec(shape: tuple[int, ...], dtype: Any, fill: Any = 0) -> ChunkSpec:
    dt = np.dtype(dtype)
    return ChunkSpec(shape, dt, np.array(fill, dtype=dt), "c/0")


def pipeline(codecs: list[Any], dtype: Any, shape: tuple[int, ...]) -> Any:
    return build_pipeline(parse_codecs(codecs), np.dtype(dtype), [np.array([s]) for s in shape])


# ---------------------------------------------------------------------------------- against zarr-python

# (zarr-python filters, the same codecs as JSON for rectizarr, dtype, values, fill value)
PEER_CASES: list[tuple[str, list[Any], list[Any], str, np.ndarray, Any]] = [
    (
        "issue-37",
        [ScaleOffset(offset=10.0, scale=100.0)],
        [{"name": "scale_offset", "configuration": {"offset": 10.0, "scale": 100.0}}],
        "float32",
        np.linspace(-3, 25, 24, dtype="float32"),
        0.0,
    ),
    (
        "float64-nan-fill",
        [ScaleOffset(offset=0.5, scale=0.1)],
        [{"name": "scale_offset", "configuration": {"offset": 0.5, "scale": 0.1}}],
        "float64",
        np.array([np.nan, np.inf, -0.0, 1e300, 3.25, -7.0] * 4),
        "NaN",
    ),
    (
        "int16",
        [ScaleOffset(offset=-3, scale=2)],
        [{"name": "scale_offset", "configuration": {"offset": -3, "scale": 2}}],
        "int16",
        np.arange(-50, 50, 4, dtype="int16"),
        7,
    ),
    (
        "uint64-large",
        [ScaleOffset(offset=1, scale=3)],
        [{"name": "scale_offset", "configuration": {"offset": 1, "scale": 3}}],
        "uint64",
        np.array([1, 2, 2**62, 6_148_914_691_236_517_205] * 6, dtype="uint64"),
        1,
    ),
    (
        "quantise-uint8",
        [
            ScaleOffset(offset=10.0, scale=10.0),
            CastValue(data_type="uint8", rounding="towards-zero", out_of_range="clamp"),
        ],
        [
            {"name": "scale_offset", "configuration": {"offset": 10.0, "scale": 10.0}},
            {
                "name": "cast_value",
                "configuration": {"data_type": "uint8", "rounding": "towards-zero", "out_of_range": "clamp"},
            },
        ],
        "float64",
        np.linspace(0, 40, 24),
        0.0,
    ),
    (
        "wrap-int8",
        [CastValue(data_type="int8", out_of_range="wrap")],
        [{"name": "cast_value", "configuration": {"data_type": "int8", "out_of_range": "wrap"}}],
        "int32",
        np.arange(-300, 300, 25, dtype="int32"),
        0,
    ),
    (
        "nearest-away",
        [CastValue(data_type="int16", rounding="nearest-away")],
        [{"name": "cast_value", "configuration": {"data_type": "int16", "rounding": "nearest-away"}}],
        "float32",
        np.arange(-6, 6, 0.5, dtype="float32"),
        0.0,
    ),
    (
        "towards-negative",
        [CastValue(data_type="int16", rounding="towards-negative")],
        [{"name": "cast_value", "configuration": {"data_type": "int16", "rounding": "towards-negative"}}],
        "float32",
        np.arange(-6, 6, 0.5, dtype="float32"),
        0.0,
    ),
    (
        "towards-positive",
        [CastValue(data_type="uint32", rounding="towards-positive", out_of_range="clamp")],
        [
            {
                "name": "cast_value",
                "configuration": {
                    "data_type": "uint32",
                    "rounding": "towards-positive",
                    "out_of_range": "clamp",
                },
            }
        ],
        "float64",
        np.arange(-6, 6, 0.5),
        0.0,
    ),
    (
        "float16",
        [CastValue(data_type="float16")],
        [{"name": "cast_value", "configuration": {"data_type": "float16"}}],
        "float64",
        np.array([1 / 3, 65504.0, 1e-8, -2.5] * 6),
        0.0,
    ),
    (
        "scalar-map",
        [
            CastValue(
                data_type="uint8",
                out_of_range="clamp",
                scalar_map={"encode": [("NaN", 255)], "decode": [(255, "NaN")]},
            )
        ],
        [
            {
                "name": "cast_value",
                "configuration": {
                    "data_type": "uint8",
                    "out_of_range": "clamp",
                    "scalar_map": {"encode": [["NaN", 255]], "decode": [[255, "NaN"]]},
                },
            }
        ],
        "float32",
        np.array([np.nan, 1.0, 2.4, 254.0] * 6, dtype="float32"),
        "NaN",
    ),
]


@pytest.mark.parametrize(
    ("name", "zp_filters", "ours", "dtype", "values", "fill"), PEER_CASES, ids=[c[0] for c in PEER_CASES]
)
def test_zarr_python_writes_rectizarr_reads_bit_exact(
    tmp_path: pathlib.Path,
    name: str,
    zp_filters: list[Any],
    ours: list[Any],
    dtype: str,
    values: np.ndarray,
    fill: Any,
) -> None:
    fill_value = np.nan if fill == "NaN" else fill
    a = zarr.create_array(
        tmp_path / "zp",
        shape=(values.size + 3,),
        chunks=(5,),
        dtype=dtype,
        filters=zp_filters,
        compressors=None,
        fill_value=fill_value,
    )
    a[: values.size] = values
    expected = a[:]
    got = rectizarr.open_array(str(tmp_path / "zp"))[:]
    assert got.dtype == expected.dtype and _bits(got) == _bits(expected)
    # the tail past the values was never written: its chunk is absent in both, and reads as the fill value
    assert np.array_equal(got[values.size :], expected[values.size :], equal_nan=True)


@pytest.mark.parametrize(
    ("name", "zp_filters", "ours", "dtype", "values", "fill"), PEER_CASES, ids=[c[0] for c in PEER_CASES]
)
def test_rectizarr_writes_zarr_python_bytes(
    tmp_path: pathlib.Path,
    name: str,
    zp_filters: list[Any],
    ours: list[Any],
    dtype: str,
    values: np.ndarray,
    fill: Any,
) -> None:
    fill_value = np.nan if fill == "NaN" else fill
    a = zarr.create_array(
        tmp_path / "zp",
        shape=values.shape,
        chunks=(5,),
        dtype=dtype,
        filters=zp_filters,
        compressors=None,
        fill_value=fill_value,
    )
    a[:] = values
    r = rectizarr.create_array(
        str(tmp_path / "rz"),
        shape=values.shape,
        chunks=(5,),
        dtype=dtype,
        filters=ours,
        compressors=None,
        fill_value=fill_value,
    )
    r[:] = values
    assert _chunks(tmp_path / "rz") == _chunks(tmp_path / "zp")
    assert _codecs(tmp_path / "rz")[: len(ours)] == codecs_to_json(parse_codecs([*ours, LE]))[: len(ours)]
    back = zarr.open_array(tmp_path / "rz")[:]
    assert _bits(back) == _bits(a[:])


def test_issue_37_scale_offset_array_opens(tmp_path: pathlib.Path) -> None:
    """The array of issue #37 (zarr-python 3.4.2, float32, scale_offset offset 10 scale 100) read whole."""
    a = zarr.create_array(
        tmp_path / "a",
        shape=(4,),
        chunks=(4,),
        dtype="float32",
        filters=[ScaleOffset(offset=10.0, scale=100.0)],
        compressors=None,
    )
    a[:] = np.array([10.0, 10.5, 11.0, 9.0], dtype="float32")
    stored = np.frombuffer((tmp_path / "a" / "c" / "0").read_bytes(), "<f4")
    assert stored.tolist() == [0.0, 50.0, 100.0, -100.0]  # (x - 10) * 100, in float32
    assert rectizarr.open_array(str(tmp_path / "a"))[:].tolist() == [10.0, 10.5, 11.0, 9.0]


# ------------------------------------------------------------------------------------- metadata rules


def test_scale_offset_without_configuration_reads_with_defaults_and_writes_both() -> None:
    """zarr-python writes a bare ``"scale_offset"`` for offset 0, scale 1; the spec requires both keys."""
    with pytest.warns(LenientMetadataWarning, match="offset, scale"):
        metas = parse_codecs([{"name": "scale_offset"}, "bytes"])
    assert codecs_to_json(metas)[0] == {"name": "scale_offset", "configuration": {"offset": 0, "scale": 1}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parse_codecs([{"name": "scale_offset", "configuration": {"offset": 0, "scale": 1}}, "bytes"])


def test_cast_value_out_of_range_error_is_the_default() -> None:
    metas = parse_codecs(
        [{"name": "cast_value", "configuration": {"data_type": "int8", "out_of_range": "error"}}, "bytes"]
    )
    assert codecs_to_json(metas)[0] == {
        "name": "cast_value",
        "configuration": {"data_type": "int8", "rounding": "nearest-even"},
    }


@pytest.mark.parametrize(
    ("codec", "dtype", "error", "path", "message"),
    [
        (
            {"name": "scale_offset", "configuration": {"offset": 1, "scale": 2, "factor": 3}},
            "float32",
            MetadataError,
            "$.codecs[0].configuration.factor",
            "unknown field",
        ),
        (
            {"name": "scale_offset", "configuration": {"offset": [1], "scale": 2}},
            "float32",
            MetadataError,
            "$.codecs[0].configuration.offset",
            "",
        ),
        (
            {"name": "scale_offset", "configuration": {"offset": 1, "scale": 0}},
            "int32",
            MetadataError,
            "$.codecs[0].configuration.scale",
            "zero",
        ),
        (
            {"name": "scale_offset", "configuration": {"offset": 1, "scale": "0x00000000"}},
            "float32",
            MetadataError,
            "$.codecs[0].configuration.scale",
            "",
        ),
        (
            {"name": "scale_offset", "configuration": {"offset": 300, "scale": 1}},
            "uint8",
            MetadataError,
            "$.codecs[0].configuration.offset",
            "",
        ),
        (
            {"name": "scale_offset", "configuration": {"offset": 1, "scale": 2}},
            "bool",
            MetadataError,
            "$.codecs[0]",
            "integer and floating-point",
        ),
        ({"name": "cast_value"}, "float32", MetadataError, "$.codecs[0]", "configuration"),
        (
            {"name": "cast_value", "configuration": {}},
            "float32",
            MetadataError,
            "$.codecs[0].configuration.data_type",
            "data_type",
        ),
        (
            {"name": "cast_value", "configuration": {"data_type": "uint8", "rounding": "up"}},
            "float32",
            MetadataError,
            "$.codecs[0].configuration.rounding",
            "",
        ),
        (
            {"name": "cast_value", "configuration": {"data_type": "uint8", "out_of_range": "saturate"}},
            "float32",
            MetadataError,
            "$.codecs[0].configuration.out_of_range",
            "",
        ),
        (
            {"name": "cast_value", "configuration": {"data_type": "float32", "out_of_range": "wrap"}},
            "float64",
            MetadataError,
            "$.codecs[0].configuration.out_of_range",
            "integer",
        ),
        (
            {"name": "cast_value", "configuration": {"data_type": "string"}},
            "float64",
            MetadataError,
            "$.codecs[0].configuration.data_type",
            "integer and floating-point",
        ),
        (
            {"name": "cast_value", "configuration": {"data_type": "uint8"}},
            "complex64",
            MetadataError,
            "$.codecs[0]",
            "input is complex64",
        ),
        (
            {"name": "cast_value", "configuration": {"data_type": "bfloat16"}},
            "float32",
            UnsupportedError,
            "$.codecs[0].configuration.data_type",
            "cast-value-rs",
        ),
        (
            {
                "name": "cast_value",
                "configuration": {"data_type": "uint8", "scalar_map": {"encode": [["NaN", 300]]}},
            },
            "float32",
            MetadataError,
            "$.codecs[0].configuration.scalar_map.encode[0][1]",
            "",
        ),
        (
            {"name": "cast_value", "configuration": {"data_type": "uint8", "scalar_map": {"both": []}}},
            "float32",
            MetadataError,
            "$.codecs[0].configuration.scalar_map.both",
            "",
        ),
    ],
)
def test_bad_configurations_name_the_codec_and_path(
    codec: dict[str, Any], dtype: str, error: type[Exception], path: str, message: str
) -> None:
    with pytest.raises(error, match=message or None) as info:
        pipeline([codec, LE], dtype, (4,))
    assert isinstance(info.value, MetadataError) and info.value.path == path


def test_cast_value_without_its_backend_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cast_value_rs", None)  # the backend's import fails: not installed
    with pytest.raises(UnsupportedError, match=r"rectizarr\[cast-value\]") as info:
        pipeline([{"name": "cast_value", "configuration": {"data_type": "uint8"}}, LE], "float32", (4,))
    assert info.value.path == "$.codecs[0].name"


# ------------------------------------------------------------------------------------------ data errors


def test_integer_scale_offset_refuses_overflow_and_inexact_quotients() -> None:
    p = pipeline([{"name": "scale_offset", "configuration": {"offset": -100, "scale": 2}}, LE], "int8", (3,))
    with pytest.raises(CodecError, match="outside int8") as info:
        p.encode(np.array([0, 1, 2], dtype="int8"), spec((3,), "int8"))
    assert info.value.codec == "scale_offset"
    with pytest.raises(CodecError, match="not a multiple of scale 2"):
        p.decode(np.array([2, 3, 4], dtype="int8").tobytes(), spec((3,), "int8"))
    # decoding 100 / 2 - 100 = -50 fits; 126 / 2 - 100 = -37 fits; no error for valid data
    assert p.decode(np.array([100, 126, -2], dtype="int8").tobytes(), spec((3,), "int8")).tolist() == [
        -50,
        -37,
        -101,
    ]


def test_int64_extremes_are_exact() -> None:
    """Results that fit are exact even where an intermediate value would not fit the dtype."""
    p = pipeline([{"name": "scale_offset", "configuration": {"offset": 1, "scale": -1}}, LE], "int64", (2,))
    x = np.array([np.iinfo(np.int64).min + 2, np.iinfo(np.int64).max], dtype="int64")
    enc = p.encode(x, spec((2,), "int64"))
    assert np.frombuffer(enc, "<i8").tolist() == [-(int(x[0]) - 1), -(int(x[1]) - 1)]
    assert p.decode(enc, spec((2,), "int64")).tolist() == x.tolist()
    with pytest.raises(CodecError, match="outside int64"):
        p.encode(np.array([np.iinfo(np.int64).min], dtype="int64"), spec((1,), "int64"))


def test_cast_value_out_of_range_error_and_nan() -> None:
    p = pipeline([{"name": "cast_value", "configuration": {"data_type": "uint8"}}, LE], "float32", (2,))
    with pytest.raises(CodecError, match="out of range") as info:
        p.encode(np.array([1.0, 256.0], dtype="float32"), spec((2,), "float32"))
    assert info.value.codec == "cast_value" and info.value.key == "c/0"
    clamp = pipeline(
        [{"name": "cast_value", "configuration": {"data_type": "uint8", "out_of_range": "clamp"}}, LE],
        "float32",
        (2,),
    )
    with pytest.raises(CodecError, match="NaN"):
        clamp.encode(np.array([np.nan, 1.0], dtype="float32"), spec((2,), "float32"))


def test_cast_value_fill_that_cannot_be_cast_is_a_codec_error() -> None:
    p = pipeline([{"name": "cast_value", "configuration": {"data_type": "uint8"}}, LE], "float32", (2,))
    with pytest.raises(CodecError, match="cast_value"):
        p.encode(np.array([1.0, 2.0], dtype="float32"), spec((2,), "float32", fill=np.nan))


def test_decoded_chunk_of_the_wrong_size_is_refused() -> None:
    """The stored value must hold exactly the chunk's elements (never a size the data claims)."""
    p = pipeline([{"name": "cast_value", "configuration": {"data_type": "uint8"}}, LE], "float32", (4,))
    with pytest.raises(CodecError):
        p.decode(b"\x01\x02\x03", spec((4,), "float32"))
    with pytest.raises(CodecError):
        p.decode(b"\x01" * 4096, spec((4,), "float32"))


# ------------------------------------------------------------------------------------------- properties


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(st.sampled_from(["float32", "float64"]), st.integers(1, 20), elements={"allow_nan": True}),
    st.floats(-1e6, 1e6),
    st.floats(-1e3, 1e3).filter(lambda s: s != 0),
)
def test_float_scale_offset_matches_the_formula(values: np.ndarray, offset: float, scale: float) -> None:
    """Encoding is ``(x - offset) * scale`` and decoding ``x / scale + offset`` in the array's float type."""
    dt = values.dtype
    assume(dt.type(scale) != 0)  # (a scale below the type's smallest subnormal is zero: refused at open)
    p = pipeline(
        [{"name": "scale_offset", "configuration": {"offset": offset, "scale": scale}}, LE], dt, values.shape
    )
    off, sc = dt.type(offset), dt.type(scale)
    with np.errstate(all="ignore"):
        enc = p.encode(values, spec(values.shape, dt))
        assert enc == _bits((values - off) * sc)
        assert _bits(p.decode(enc, spec(values.shape, dt))) == _bits((np.frombuffer(enc, dt) / sc) + off)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["int8", "uint8", "int16", "uint32", "int64", "uint64"]), st.data())
def test_integer_scale_offset_round_trips_or_refuses(dtype: str, data: st.DataObject) -> None:
    dt = np.dtype(dtype)
    info = np.iinfo(dt)
    values = data.draw(hnp.arrays(dt, st.integers(1, 12)))
    offset = data.draw(st.integers(int(info.min), int(info.max)))
    scale = data.draw(st.integers(max(int(info.min), -5), min(int(info.max), 5)).filter(lambda s: s != 0))
    p = pipeline(
        [{"name": "scale_offset", "configuration": {"offset": offset, "scale": scale}}, LE], dt, values.shape
    )
    exact = [(int(x) - offset) * scale for x in values.tolist()]
    if all(info.min <= e <= info.max for e in exact):
        enc = p.encode(values, spec(values.shape, dt))
        assert np.frombuffer(enc, dt).tolist() == exact
        assert p.decode(enc, spec(values.shape, dt)).tolist() == values.tolist()
    else:
        with pytest.raises(CodecError, match="outside"):
            p.encode(values, spec(values.shape, dt))


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays("float64", st.integers(1, 16), elements=st.floats(-1e4, 1e4)),
    st.sampled_from(["nearest-even", "towards-zero", "towards-positive", "towards-negative", "nearest-away"]),
    st.sampled_from(["int16", "int32", "float32"]),
)
def test_cast_value_round_trips_within_rounding(values: np.ndarray, rounding: str, target: str) -> None:
    p = pipeline(
        [{"name": "cast_value", "configuration": {"data_type": target, "rounding": rounding}}, LE],
        "float64",
        values.shape,
    )
    enc = p.encode(values, spec(values.shape, "float64"))
    back = p.decode(enc, spec(values.shape, "float64"))
    tol = 1.0 if target.startswith("int") else 1e-3
    assert back.dtype == np.float64 and np.all(np.abs(back - values) <= tol)


# ------------------------------------------------------------------- numcodecs.fixedscaleoffset (legacy)


def test_numcodecs_fixedscaleoffset_bit_exact_with_zarr_python(tmp_path: pathlib.Path) -> None:
    """``numcodecs.fixedscaleoffset`` (the legacy form zarr-extensions' scale_offset README describes, which
    zarrs also reads) both ways with zarr-python 3.4.2's ``FixedScaleOffset``; zarrs' Python pipeline refuses
    it here (UnsupportedMetadataError), so zarr-python is the peer."""
    from zarr.codecs.numcodecs import FixedScaleOffset

    data = np.linspace(0, 25, 23)
    config = {"offset": 10, "scale": 10, "dtype": "<f8", "astype": "<u1"}
    a = zarr.create_array(
        tmp_path / "zp",
        shape=data.shape,
        chunks=(5,),
        dtype="float64",
        filters=[FixedScaleOffset(**config)],
        compressors=None,
    )
    a[:] = data
    ours = [{"name": "numcodecs.fixedscaleoffset", "configuration": config}]
    assert _codecs(tmp_path / "zp")[0] == ours[0]
    got = rectizarr.open_array(str(tmp_path / "zp"))[:]
    assert _bits(got) == _bits(a[:])
    r = rectizarr.create_array(
        str(tmp_path / "rz"), shape=data.shape, chunks=(5,), dtype="float64", filters=ours, compressors=None
    )
    r[:] = data
    assert _chunks(tmp_path / "rz") == _chunks(tmp_path / "zp")
    assert _bits(zarr.open_array(tmp_path / "rz")[:]) == _bits(a[:])


def test_sharded_scale_offset_cast_value_both_ways(tmp_path: pathlib.Path) -> None:
    """Inside shards (inner chunks partly unwritten: they read as the fill value), zarr-python's bytes."""
    filters = [ScaleOffset(offset=10.0, scale=10.0), CastValue(data_type="uint8", out_of_range="clamp")]
    ours = [
        {"name": "scale_offset", "configuration": {"offset": 10.0, "scale": 10.0}},
        {"name": "cast_value", "configuration": {"data_type": "uint8", "out_of_range": "clamp"}},
    ]
    data = np.linspace(0, 30, 12)
    a = zarr.create_array(
        tmp_path / "zp",
        shape=(40,),
        chunks=(4,),
        shards=(20,),
        dtype="float64",
        filters=filters,
        compressors=None,
        fill_value=12.5,
    )
    a[:12] = data
    r = rectizarr.create_array(
        str(tmp_path / "rz"),
        shape=(40,),
        chunks=(4,),
        shards=(20,),
        dtype="float64",
        filters=ours,
        compressors=None,
        fill_value=12.5,
    )
    r[:12] = data
    assert _bits(rectizarr.open_array(str(tmp_path / "zp"))[:]) == _bits(a[:])
    assert _bits(zarr.open_array(tmp_path / "rz")[:]) == _bits(a[:])
    assert _chunks(tmp_path / "rz") == _chunks(tmp_path / "zp")
