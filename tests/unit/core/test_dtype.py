"""Data types and fill values (spec-notes §2, checklist items 12-25)."""

from __future__ import annotations

import base64
import math
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ml_dtypes
import msgspec
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rectizarr.core.dtype import DataType, LenientMetadataWarning, data_type_from_numpy, parse_data_type
from rectizarr.errors import MetadataError, UnsupportedError
from tests.strategies import bit_patterns

ML_NAMES = [
    "bfloat16",
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e4m3b11fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "float4_e2m1fn",
]
CORE_NAMES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
]
CONFIGURED: list[dict[str, Any]] = [
    {"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 1}},
    {"name": "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 10}},
    {"name": "numpy.datetime64", "configuration": {"unit": "generic", "scale_factor": 1}},
    {"name": "numpy.timedelta64", "configuration": {"unit": "ms", "scale_factor": 2147483647}},
    {"name": "fixed_length_utf32", "configuration": {"length_bytes": 20}},
    {"name": "fixed_length_utf32", "configuration": {"length_bytes": 4}},
]
ALL_JSON: list[Any] = [*CORE_NAMES, *ML_NAMES, "r8", "r16", "r24", "r128", "string", "bytes", *CONFIGURED]


@contextmanager
def strict() -> Iterator[None]:
    """Fail on any LenientMetadataWarning: the value must be canonical."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", LenientMetadataWarning)
        yield


def dt(value: Any) -> DataType:
    with strict():
        return parse_data_type(value)


def bits(arr: np.ndarray[Any, Any]) -> int:
    return int(arr.view(np.dtype(f"u{arr.dtype.itemsize}"))[()])


def fill(dtype: Any, value: Any) -> np.ndarray[Any, Any]:
    """Parse a canonical fill value (no warning allowed)."""
    with strict():
        return dt(dtype).parse_fill(value)


def lenient_fill(dtype: Any, value: Any) -> np.ndarray[Any, Any]:
    with pytest.warns(LenientMetadataWarning):
        return dt(dtype).parse_fill(value)


def json_round_trip(value: Any) -> Any:
    encoded = msgspec.json.encode(value)
    assert not _has_null(msgspec.json.decode(encoded))  # no value (NaN ...) became a JSON null
    return msgspec.json.decode(encoded)


def _has_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, dict):
        return any(_has_null(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_null(v) for v in value)
    return False


# --------------------------------------------------------------------------------- data types


@pytest.mark.parametrize("value", ALL_JSON, ids=str)
def test_data_type_json_round_trip(value: Any) -> None:
    t = dt(value)
    assert t.to_json() == value
    assert json_round_trip(t.to_json()) == value
    again = dt(json_round_trip(t.to_json()))
    assert again == t
    assert hash(again) == hash(t)
    assert t.numpy.isnative


@pytest.mark.parametrize(
    ("value", "numpy_dtype"),
    [
        ("bool", np.dtype(bool)),
        ("int8", np.dtype("i1")),
        ("uint64", np.dtype("u8")),
        ("float16", np.dtype("f2")),
        ("complex128", np.dtype("c16")),
        ("r8", np.dtype("V1")),
        ("r16", np.dtype("V2")),
        ("string", np.dtype(object)),
        ("bytes", np.dtype(object)),
        ("variable_length_bytes", np.dtype(object)),
        ("bfloat16", np.dtype(ml_dtypes.bfloat16)),
        ("float8_e4m3fn", np.dtype(ml_dtypes.float8_e4m3fn)),
        (CONFIGURED[0], np.dtype("M8[s]")),
        (CONFIGURED[1], np.dtype("M8[10ns]")),
        (CONFIGURED[2], np.dtype("M8")),
        (CONFIGURED[3], np.dtype("m8[2147483647ms]")),
        (CONFIGURED[4], np.dtype("U5")),
    ],
    ids=str,
)
def test_numpy_dtype(value: Any, numpy_dtype: np.dtype[Any]) -> None:
    assert dt(value).numpy == numpy_dtype


@pytest.mark.parametrize(
    ("value", "itemsize", "variable", "endian"),
    [
        ("bool", 1, False, False),
        ("int8", 1, False, False),
        ("uint16", 2, False, True),
        ("float16", 2, False, True),
        ("float64", 8, False, True),
        ("complex64", 8, False, True),
        ("r8", 1, False, False),
        ("r16", 2, False, False),
        ("string", None, True, False),
        ("bytes", None, True, False),
        ("bfloat16", 2, False, True),
        ("float8_e4m3", 1, False, False),
        (CONFIGURED[0], 8, False, True),
        (CONFIGURED[4], 20, False, True),
    ],
    ids=str,
)
def test_properties(value: Any, itemsize: int | None, variable: bool, endian: bool) -> None:
    t = dt(value)
    assert t.itemsize == itemsize
    assert t.variable_length is variable
    assert t.has_endianness is endian


def test_variable_length_bytes_alias_reads_as_bytes_and_writes_bytes() -> None:
    t = dt("variable_length_bytes")
    assert t == dt("bytes")
    assert t.to_json() == "bytes"
    assert dt({"name": "variable_length_bytes"}).to_json() == "bytes"


def test_microseconds_spellings_are_equal() -> None:
    mu = dt({"name": "numpy.datetime64", "configuration": {"unit": "μs", "scale_factor": 1}})
    us = dt({"name": "numpy.datetime64", "configuration": {"unit": "us", "scale_factor": 1}})
    assert mu == us
    assert hash(mu) == hash(us)
    assert mu.numpy == np.dtype("M8[us]")
    assert mu.to_json() == {"name": "numpy.datetime64", "configuration": {"unit": "us", "scale_factor": 1}}


def test_configuration_is_read_only() -> None:
    t = dt(CONFIGURED[0])
    assert t.configuration is not None
    with pytest.raises(TypeError):
        t.configuration["unit"] = "ms"  # type: ignore[index]
    assert {t, dt(CONFIGURED[0])} == {t}


@pytest.mark.parametrize(
    "value", [{"name": "string"}, {"name": "bytes", "configuration": {}}, {"name": "bfloat16"}]
)
def test_extension_object_form_accepted_silently(value: dict[str, Any]) -> None:
    assert dt(value).to_json() == value["name"]


@pytest.mark.parametrize("name", ["float32", "uint64", "bool", "complex64"])
def test_core_object_form_is_lenient(name: str) -> None:
    with pytest.warns(LenientMetadataWarning, match="plain string"):
        t = parse_data_type({"name": name})
    assert t.to_json() == name


@pytest.mark.parametrize(
    ("value", "path"),
    [
        (5, "$.data_type"),
        (None, "$.data_type"),
        (["float32"], "$.data_type"),
        ({"configuration": {}}, "$.data_type.name"),
        ({"name": 5}, "$.data_type.name"),
        ({"name": "string", "foo": 1}, "$.data_type"),
        ({"name": "float64", "must_understand": False}, "$.data_type.must_understand"),
        ({"name": "string", "configuration": []}, "$.data_type.configuration"),
        ({"name": "bytes", "configuration": {"x": 1}}, "$.data_type.configuration"),
        ("numpy.datetime64", "$.data_type"),
        ("fixed_length_utf32", "$.data_type"),
        ({"name": "numpy.datetime64", "configuration": {"unit": "s"}}, "$.data_type.configuration"),
        ({"name": "numpy.datetime64", "configuration": {"scale_factor": 1}}, "$.data_type.configuration"),
        (
            {"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 1, "x": 0}},
            "$.data_type.configuration",
        ),
        (
            {"name": "numpy.datetime64", "configuration": {"unit": "xs", "scale_factor": 1}},
            "$.data_type.configuration.unit",
        ),
        *[
            (
                {"name": "numpy.timedelta64", "configuration": {"unit": "s", "scale_factor": bad}},
                "$.data_type.configuration.scale_factor",
            )
            for bad in (0, -1, 2**31, 1.0, True, "1")
        ],
        *[
            (
                {"name": "fixed_length_utf32", "configuration": {"length_bytes": bad}},
                "$.data_type.configuration.length_bytes",
            )
            for bad in (0, 3, 6, -4, 20.0, "20", 2**31)
        ],
        ({"name": "fixed_length_utf32", "configuration": {}}, "$.data_type.configuration"),
        ("r0", "$.data_type"),
        ("r12", "$.data_type"),
        ("r016", "$.data_type"),
    ],
    ids=str,
)
def test_invalid_data_type(value: Any, path: str) -> None:
    with strict(), pytest.raises(MetadataError) as info:
        parse_data_type(value)
    assert type(info.value) is MetadataError
    assert info.value.path == path


@pytest.mark.parametrize("value", ["foo", "float128", "complex_float128", {"name": "int8x"}, "String"])
def test_unknown_data_type_is_unsupported(value: Any) -> None:
    with pytest.raises(UnsupportedError, match="unsupported data type"):
        parse_data_type(value)


def test_generic_unit_with_scale_is_unsupported() -> None:
    with pytest.raises(UnsupportedError, match="generic"):
        parse_data_type({"name": "numpy.datetime64", "configuration": {"unit": "generic", "scale_factor": 2}})


def test_missing_ml_dtypes_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)
    with pytest.raises(UnsupportedError, match=r"rectizarr\[ml\]") as info:
        parse_data_type("bfloat16", path="$.x")
    assert info.value.path == "$.x"
    assert dt("float32").numpy == np.dtype("f4")  # core types do not need it


# ----------------------------------------------------------------------- data_type_from_numpy


@pytest.mark.parametrize(
    ("given_dtype", "expected"),
    [
        ("f4", "float32"),
        (np.float32, "float32"),
        (float, "float64"),
        (">i2", "int16"),
        ("<u8", "uint64"),
        ("?", "bool"),
        (bool, "bool"),
        ("c8", "complex64"),
        (np.dtype(">c16"), "complex128"),
        ("float32", "float32"),
        ("bool", "bool"),
        ("int8", "int8"),
        ("U5", {"name": "fixed_length_utf32", "configuration": {"length_bytes": 20}}),
        (">U1", {"name": "fixed_length_utf32", "configuration": {"length_bytes": 4}}),
        ("str", "string"),
        (str, "string"),
        ("U", "string"),
        ("string", "string"),
        (object, "string"),
        (np.dtypes.StringDType(), "string"),
        (bytes, "bytes"),
        ("bytes", "bytes"),
        ("S", "bytes"),
        ("variable_length_bytes", "bytes"),
        ("M8[s]", {"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 1}}),
        (">M8[10us]", {"name": "numpy.datetime64", "configuration": {"unit": "us", "scale_factor": 10}}),
        ("M8", {"name": "numpy.datetime64", "configuration": {"unit": "generic", "scale_factor": 1}}),
        ("m8[3D]", {"name": "numpy.timedelta64", "configuration": {"unit": "D", "scale_factor": 3}}),
        ("V2", "r16"),
        ("V1", "r8"),
        ("r24", "r24"),
        (ml_dtypes.bfloat16, "bfloat16"),
        (np.dtype(ml_dtypes.float8_e5m2), "float8_e5m2"),
        (ml_dtypes.float4_e2m1fn, "float4_e2m1fn"),
        ("bfloat16", "bfloat16"),
    ],
    ids=str,
)
def test_data_type_from_numpy(given_dtype: Any, expected: Any) -> None:
    with strict():
        t = data_type_from_numpy(given_dtype)
    assert t.to_json() == expected
    assert t == dt(expected)
    assert t.numpy.isnative


@pytest.mark.parametrize(
    "given_dtype",
    ["f16", "V0", [("a", "i4", (2,)), ("b", "f8")], "(2,)i4", "numpy.datetime64", "foo", "r12"],
    ids=str,
)
def test_data_type_from_numpy_unsupported(given_dtype: Any) -> None:
    with pytest.raises(MetadataError) as info:
        data_type_from_numpy(given_dtype)
    assert isinstance(info.value, UnsupportedError) or given_dtype == "r12"


def test_data_type_from_numpy_names_the_type() -> None:
    with pytest.raises(UnsupportedError, match=r"\(2,\)"):
        data_type_from_numpy("(2,)i4")
    with pytest.raises(UnsupportedError, match=r"float128|longdouble"):
        data_type_from_numpy("f16")


# ------------------------------------------------------------------------------- float fills

CANONICAL_NAN = {
    "float16": 0x7E00,
    "float32": 0x7FC0_0000,
    "float64": 0x7FF8_0000_0000_0000,
    "bfloat16": 0x7FC0,
    "float8_e3m4": 0x78,
    "float8_e4m3": 0x7C,
    "float8_e4m3fn": 0x7F,
    "float8_e4m3fnuz": 0x80,
    "float8_e4m3b11fnuz": 0x80,
    "float8_e5m2": 0x7E,
    "float8_e5m2fnuz": 0x80,
    "float8_e8m0fnu": 0xFF,
}


@pytest.mark.parametrize(("name", "nan_bits"), CANONICAL_NAN.items())
def test_nan_bit_patterns(name: str, nan_bits: int) -> None:
    f = fill(name, "NaN")
    assert f.shape == ()
    assert f.dtype == dt(name).numpy
    assert bits(f) == nan_bits
    assert dt(name).fill_to_json(f) == "NaN"


@pytest.mark.parametrize(
    ("name", "value", "expected_bits"),
    [
        ("float32", "Infinity", 0x7F80_0000),
        ("float32", "-Infinity", 0xFF80_0000),
        ("float16", "Infinity", 0x7C00),
        ("float64", "-Infinity", 0xFFF0_0000_0000_0000),
        ("bfloat16", "Infinity", 0x7F80),
        ("float8_e5m2", "-Infinity", 0xFC),
        ("float32", -0.0, 0x8000_0000),
        ("float16", -0.0, 0x8000),
        ("float32", 0, 0),
        ("float32", 1, 0x3F80_0000),
        ("float32", 1e40, 0x7F80_0000),  # out of range rounds to +inf
        ("float32", -1e40, 0xFF80_0000),
        ("float16", 1e10, 0x7C00),
        ("float16", 65520.0, 0x7C00),  # halfway between max and 2**16: ties to even = inf
        ("float16", 65519.0, 0x7BFF),
        ("float64", 10**400, 0x7FF0_0000_0000_0000),  # huge JSON integer
        ("float64", -(10**400), 0xFFF0_0000_0000_0000),
        ("float32", 0.1, 0x3DCC_CCCD),
        ("float32", 1 + 2**-24, 0x3F80_0000),  # tie -> even mantissa (down)
        ("float32", 1 + 3 * 2**-24, 0x3F80_0002),  # tie -> even mantissa (up)
        ("float16", 2049, 0x6800),  # 2048 and 2050 are neighbours: tie to even 2048
        ("float16", 2051, 0x6802),  # tie to even 2052
        ("float32", "0x7fc00001", 0x7FC0_0001),
        ("float32", "0x7FC00001", 0x7FC0_0001),
        ("float32", "0X7fc00001", 0x7FC0_0001),
        ("float32", "0xffc00000", 0xFFC0_0000),
        ("float32", "0x3f800000", 0x3F80_0000),
        ("float16", "0x7e01", 0x7E01),
        ("float64", "0x7ff0000000000001", 0x7FF0_0000_0000_0001),
        ("bfloat16", "0x7fc1", 0x7FC1),
        ("float8_e4m3", "0x7d", 0x7D),
        ("float6_e2m3fn", 7.6, 0x1F),  # rounds down to the maximum 7.5
        ("float4_e2m1fn", 6.9, 0x07),
        ("float8_e8m0fnu", 1.0, 0x7F),
        ("float8_e4m3fn", 448, 0x7E),
    ],
    ids=str,
)
def test_float_fill(name: str, value: Any, expected_bits: int) -> None:
    assert bits(fill(name, value)) == expected_bits


@pytest.mark.parametrize(
    ("name", "value", "written"),
    [
        ("float32", "0x7fc00001", "0x7fc00001"),  # payload kept (zarr-python would write "NaN")
        ("float32", "0xFFC00000", "0xffc00000"),  # negative NaN is not the canonical NaN
        ("float16", "0xfe00", "0xfe00"),
        ("float64", "0x7ff0000000000001", "0x7ff0000000000001"),
        ("float64", "0x7FF8000000000000", "NaN"),
        ("bfloat16", "0xffc0", "0xffc0"),
        ("float8_e4m3", "0xff", "0xff"),
        ("float32", "0x3f800000", 1.0),
        ("float32", 0.1, 0.1),  # shortest decimal that reads back to the same float32
        ("float16", 0.1, 0.1),
        ("float32", -0.0, -0.0),
        ("float32", 1e40, "Infinity"),
        ("float32", "-Infinity", "-Infinity"),
        ("float64", 5e-324, 5e-324),
        ("float32", 3.4028234663852886e38, 3.4028235e38),
        ("bfloat16", 1, 1.0),
    ],
    ids=str,
)
def test_float_fill_to_json(name: str, value: Any, written: Any) -> None:
    t = dt(name)
    f = fill(name, value)
    out = t.fill_to_json(f)
    assert out == written
    assert type(out) is type(written)
    if isinstance(written, float):
        assert math.copysign(1, out) == math.copysign(1, written)
    assert bits(fill(name, json_round_trip(out))) == bits(f)


def test_float32_fill_written_with_float32_precision() -> None:
    assert msgspec.json.encode(dt("float32").fill_to_json(fill("float32", 0.1))) == b"0.1"
    assert msgspec.json.encode(dt("float32").fill_to_json(fill("float32", -0.0))) == b"-0.0"


def test_hex_width_is_the_dtype_width() -> None:
    """spec/tensorstore policy: "0x3f800000" on float64 is the bit pattern 0x000000003f800000."""
    t = dt("float64")
    with pytest.warns(LenientMetadataWarning, match="8 digits, not 16"):
        f = t.parse_fill("0x3f800000")
    assert bits(f) == 0x3F80_0000
    assert f[()] == pytest.approx(5.263544247e-315, rel=1e-9)
    out = t.fill_to_json(f)
    assert bits(fill("float64", json_round_trip(out))) == 0x3F80_0000


def test_hex_with_too_many_digits_that_fits_is_lenient() -> None:
    assert bits(lenient_fill("float32", "0x003f800000")) == 0x3F80_0000
    assert bits(lenient_fill("float16", "0x1")) == 1


def test_non_canonical_nan_on_float64_is_written_with_16_digits() -> None:
    t = dt("float64")
    f = np.array(0x7FF0_0000_0000_0002, dtype=np.uint64).view(np.float64)
    assert t.fill_to_json(f) == "0x7ff0000000000002"
    g = np.array(0xFFF8_0000_0000_0000, dtype=np.uint64).view(np.float64)
    assert t.fill_to_json(g) == "0xfff8000000000000"


def test_signalling_nan_float32_survives() -> None:
    t = dt("float32")
    snan = np.array(0x7F80_0001, dtype=np.uint32).view(np.float32)
    out = t.fill_to_json(snan)
    assert out == "0x7f800001"
    assert bits(t.parse_fill(json_round_trip(out))) == 0x7F80_0001


@pytest.mark.parametrize(
    ("name", "value", "expected_bits"),
    [
        ("float32", "nan", 0x7FC0_0000),
        ("float32", "NAN", 0x7FC0_0000),
        ("float32", "inf", 0x7F80_0000),
        ("float32", "+Infinity", 0x7F80_0000),
        ("float32", "infinity", 0x7F80_0000),
        ("float32", "-inf", 0xFF80_0000),
        ("float16", "0.5", 0x3800),
        ("float64", "1e3", 0x408F_4000_0000_0000),
        ("float64", "-2", 0xC000_0000_0000_0000),
        ("float32", float("nan"), 0x7FC0_0000),  # bare NaN token read by the json fallback
        ("float32", float("inf"), 0x7F80_0000),
        ("float16", float("-inf"), 0xFC00),
    ],
    ids=str,
)
def test_float_fill_lenient(name: str, value: Any, expected_bits: int) -> None:
    assert bits(lenient_fill(name, value)) == expected_bits


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("float32", None),
        ("float32", True),
        ("float32", [1.0]),
        ("float32", {}),
        ("float32", "foo"),
        ("float32", ""),
        ("float32", "NaNs"),
        ("float32", " 1"),
        ("float32", "1_0"),
        ("float32", "-nan"),
        ("float32", "0x"),
        ("float32", "0x12g4"),
        ("float32", "0x_7fc0"),
        ("float32", "x7fc00000"),
        ("float32", "0x1ffffffff"),  # does not fit 32 bits
        ("float16", "0x3f800000"),
        ("float8_e4m3", "0x100"),
        ("float4_e2m1fn", "NaN"),
        ("float6_e3m2fn", "Infinity"),
        ("float8_e4m3fn", "Infinity"),
        ("float8_e4m3fnuz", "-Infinity"),
        ("float8_e4m3fn", 1e10),  # out of range and no infinity
        ("float8_e4m3fn", 465),
        ("float6_e2m3fn", 7.75),  # ties away from the maximum
        ("float4_e2m1fn", 7.0),
        ("float4_e2m1fn", 10**400),
        ("float8_e8m0fnu", 0),  # no zero
        ("float8_e8m0fnu", -1.0),  # unsigned
    ],
    ids=str,
)
def test_float_fill_invalid(name: str, value: Any) -> None:
    with strict(), pytest.raises(MetadataError) as info:
        dt(name).parse_fill(value, path="$.fill_value")
    assert info.value.path == "$.fill_value"


def test_float_fill_lenient_on_type_without_nan_still_fails() -> None:
    with pytest.raises(MetadataError, match="no NaN"), warnings.catch_warnings():
        warnings.simplefilter("ignore", LenientMetadataWarning)
        dt("float4_e2m1fn").parse_fill("nan")


# --------------------------------------------------------------------------- integer and bool


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("uint64", 2**64 - 1),
        ("int64", -(2**63)),
        ("int64", 2**63 - 1),
        ("uint8", 255),
        ("int8", -128),
        ("int16", 0),
        ("uint32", 2**32 - 1),
    ],
)
def test_int_fill_exact(name: str, value: int) -> None:
    t = dt(name)
    f = fill(name, json_round_trip(value))
    assert f.dtype == t.numpy
    assert int(f[()]) == value
    out = t.fill_to_json(f)
    assert type(out) is int
    assert msgspec.json.encode(out) == str(value).encode()
    assert json_round_trip(out) == value


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("int64", 2**63),
        ("int64", -(2**63) - 1),
        ("uint64", 2**64),
        ("uint8", 256),
        ("uint8", -1),
        ("int8", -129),
        ("int32", 1.5),
        ("int32", "1"),
        ("int32", True),
        ("int32", None),
        ("int32", [1]),
        ("int32", float("inf")),
        ("int32", float("nan")),
        ("int32", "0x1"),
    ],
    ids=str,
)
def test_int_fill_invalid(name: str, value: Any) -> None:
    with strict(), pytest.raises(MetadataError) as info:
        dt(name).parse_fill(value)
    assert info.value.path == "$.fill_value"


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [("int32", 1.0, 1), ("int8", -3.0, -3), ("uint64", 1e19, 10**19), ("int32", 1e3, 1000)],
)
def test_int_fill_integral_float_is_lenient(name: str, value: float, expected: int) -> None:
    f = lenient_fill(name, value)
    assert int(f[()]) == expected
    assert dt(name).fill_to_json(f) == expected


def test_int_fill_integral_float_out_of_range_fails() -> None:
    with pytest.raises(MetadataError), warnings.catch_warnings():
        warnings.simplefilter("ignore", LenientMetadataWarning)
        dt("uint8").parse_fill(256.0)


def test_bool_fill() -> None:
    t = dt("bool")
    assert fill("bool", True).dtype == np.dtype(bool)
    assert fill("bool", True).item() is True
    assert fill("bool", False).item() is False
    assert t.fill_to_json(fill("bool", True)) is True
    assert t.fill_to_json(fill("bool", False)) is False
    assert fill("bool", True).tobytes() == b"\x01"
    assert fill("bool", False).tobytes() == b"\x00"


@pytest.mark.parametrize(("value", "expected"), [(0, False), (1, True)])
def test_bool_fill_int_is_lenient(value: int, expected: bool) -> None:
    f = lenient_fill("bool", value)
    assert bool(f[()]) is expected
    assert dt("bool").fill_to_json(f) is expected


@pytest.mark.parametrize("value", [2, -1, 0.0, 1.0, "true", "false", None, [True]], ids=str)
def test_bool_fill_invalid(value: Any) -> None:
    with strict(), pytest.raises(MetadataError):
        dt("bool").parse_fill(value)


# ----------------------------------------------------------------------------------- complex


@pytest.mark.parametrize(
    ("name", "value", "re_bits", "im_bits", "written"),
    [
        ("complex64", [1, "NaN"], 0x3F80_0000, 0x7FC0_0000, [1.0, "NaN"]),
        ("complex64", ["0x3f800000", "-Infinity"], 0x3F80_0000, 0xFF80_0000, [1.0, "-Infinity"]),
        ("complex64", ["0x7fc00001", -0.0], 0x7FC0_0001, 0x8000_0000, ["0x7fc00001", -0.0]),
        ("complex64", [0.1, 1e40], 0x3DCC_CCCD, 0x7F80_0000, [0.1, "Infinity"]),
        (
            "complex128",
            ["NaN", "0x7ff0000000000001"],
            0x7FF8 << 48,
            0x7FF0_0000_0000_0001,
            ["NaN", "0x7ff0000000000001"],
        ),
        ("complex128", [1, 2], 0x3FF0 << 48, 0x4000 << 48, [1.0, 2.0]),
    ],
    ids=str,
)
def test_complex_fill(name: str, value: Any, re_bits: int, im_bits: int, written: list[Any]) -> None:
    t = dt(name)
    f = fill(name, value)
    assert f.shape == ()
    assert f.dtype == t.numpy
    half = np.dtype(f"u{t.numpy.itemsize // 2}")
    assert [int(b) for b in f.reshape(1).view(half)] == [re_bits, im_bits]
    out = t.fill_to_json(f)
    assert out == written
    assert fill(name, json_round_trip(out)).tobytes() == f.tobytes()


@pytest.mark.parametrize(
    ("value", "path"),
    [
        (1, "$.fill_value"),
        (1.0, "$.fill_value"),
        ("NaN", "$.fill_value"),
        ([1], "$.fill_value"),
        ([1, 2, 3], "$.fill_value"),
        ({"re": 1, "im": 2}, "$.fill_value"),
        ([None, 1], "$.fill_value[0]"),
        ([1, "foo"], "$.fill_value[1]"),
        ([1, "0x1ffffffff"], "$.fill_value[1]"),  # hex at the component width
    ],
    ids=str,
)
def test_complex_fill_invalid(value: Any, path: str) -> None:
    with strict(), pytest.raises(MetadataError) as info:
        dt("complex64").parse_fill(value)
    assert info.value.path == path


# ------------------------------------------------------------------------------ time types

DT_S = CONFIGURED[0]
GENERIC = CONFIGURED[2]


@pytest.mark.parametrize("value", ["NaT", -(2**63)])
def test_datetime_nat(value: Any) -> None:
    t = dt(DT_S)
    f = fill(DT_S, value)
    assert f.dtype == np.dtype("M8[s]")
    assert np.isnat(f[()])
    assert int(f.view(np.int64)) == -(2**63)
    assert t.fill_to_json(f) == -(2**63)
    assert bits(t.default_fill()) == bits(f)


@pytest.mark.parametrize(
    ("config", "value", "expected"),
    [
        (DT_S, 0, np.datetime64(0, "s")),
        (DT_S, 86400, np.datetime64("1970-01-02T00:00:00", "s")),
        (DT_S, 2**63 - 1, np.datetime64(2**63 - 1, "s")),
        (CONFIGURED[1], 3, np.datetime64(30, "ns")),
        (CONFIGURED[3], -5, np.timedelta64(-5 * 2147483647, "ms")),
    ],
    ids=str,
)
def test_time_fill(config: dict[str, Any], value: int, expected: Any) -> None:
    t = dt(config)
    f = fill(config, value)
    assert f.dtype == t.numpy
    assert f[()] == expected
    assert t.fill_to_json(f) == value


def test_time_fill_integral_float_is_lenient() -> None:
    assert int(lenient_fill(DT_S, 5.0).view(np.int64)) == 5


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, "nat", "2020-01-01", 1.5, None, True, [0]], ids=str)
def test_time_fill_invalid(value: Any) -> None:
    with strict(), pytest.raises(MetadataError):
        dt(DT_S).parse_fill(value)


def test_generic_unit_only_supports_nat() -> None:
    t = dt(GENERIC)
    assert np.isnat(fill(GENERIC, "NaT")[()])
    assert t.fill_to_json(t.default_fill()) == -(2**63)
    with pytest.raises(UnsupportedError, match="generic"):
        t.parse_fill(5)


# ---------------------------------------------------------------------------- string / bytes


@pytest.mark.parametrize("value", ["foo", "", "ünï €", "a\x00b", "😀"])
def test_string_fill(value: str) -> None:
    t = dt("string")
    f = fill("string", value)
    assert f.dtype == np.dtype(object)
    assert f.shape == ()
    assert type(f.item()) is str
    assert f[()] == value
    assert t.fill_to_json(f) == value
    assert json_round_trip(t.fill_to_json(f)) == value


@pytest.mark.parametrize("value", [None, 1, b"foo", ["f"], True], ids=str)
def test_string_fill_invalid(value: Any) -> None:
    with strict(), pytest.raises(MetadataError):
        dt("string").parse_fill(value)


@pytest.mark.parametrize("name", ["bytes", "variable_length_bytes"])
@pytest.mark.parametrize(
    ("value", "expected"),
    [([1, 2, 3], b"\x01\x02\x03"), ("AQID", b"\x01\x02\x03"), ("QUI=", b"AB"), ([], b""), ("", b"")],
    ids=str,
)
def test_bytes_fill(name: str, value: Any, expected: bytes) -> None:
    t = dt(name)
    f = fill(name, value)
    assert f.dtype == np.dtype(object)
    assert type(f.item()) is bytes
    assert f[()] == expected
    assert t.fill_to_json(f) == base64.b64encode(expected).decode()  # base64: the form zarr-python reads
    assert fill(name, json_round_trip(t.fill_to_json(f)))[()] == expected


@pytest.mark.parametrize("value", [[256], [-1], [True], [1.0], "A", "AQID!", "AQ", None, 5, "ÿ"], ids=str)
def test_bytes_fill_invalid(value: Any) -> None:
    with strict(), pytest.raises(MetadataError):
        dt("bytes").parse_fill(value)


UTF32_20 = CONFIGURED[4]


@pytest.mark.parametrize("value", ["ab", "", "abcde", "ünï€😀"])
def test_fixed_length_utf32_fill(value: str) -> None:
    t = dt(UTF32_20)
    f = fill(UTF32_20, value)
    assert f.dtype == np.dtype("U5")
    assert f[()] == value
    assert f.tobytes() == value.encode(f"utf-32-{sys.byteorder[0]}e") + b"\0" * (20 - 4 * len(value))
    assert t.fill_to_json(f) == value


@pytest.mark.parametrize("value", ["abcdef", 5, None, b"ab", ["a"]], ids=str)
def test_fixed_length_utf32_fill_invalid(value: Any) -> None:
    with strict(), pytest.raises(MetadataError):
        dt(UTF32_20).parse_fill(value)


# ------------------------------------------------------------------------------------- raw r<N>


def test_r16_fill() -> None:
    t = dt("r16")
    f = fill("r16", [1, 2])
    assert f.dtype == np.dtype("V2")
    assert f.shape == ()
    assert f.tobytes() == b"\x01\x02"
    assert t.fill_to_json(f) == [1, 2]


def test_r16_base64_fill_is_lenient() -> None:
    f = lenient_fill("r16", "AQI=")
    assert f.tobytes() == b"\x01\x02"
    assert dt("r16").fill_to_json(f) == [1, 2]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("r16", [1]),
        ("r16", [1, 2, 3]),
        ("r16", [0] * 16),  # the spec text's "N entries" bug: one entry per byte
        ("r16", [256, 0]),
        ("r16", [True, 0]),
        ("r16", [1.0, 2]),
        ("r16", None),
        ("r16", 258),
        ("r8", "AQI="),  # two bytes for a one-byte type
        ("r16", "A"),
    ],
    ids=str,
)
def test_raw_fill_invalid(name: str, value: Any) -> None:
    with pytest.raises(MetadataError), warnings.catch_warnings():
        warnings.simplefilter("ignore", LenientMetadataWarning)
        dt(name).parse_fill(value)


# ------------------------------------------------------------------------ defaults and nulls


@pytest.mark.parametrize(
    ("value", "json_fill"),
    [
        ("bool", False),
        ("int8", 0),
        ("uint64", 0),
        ("float32", 0.0),
        ("float16", 0.0),
        ("bfloat16", 0.0),
        ("complex64", [0.0, 0.0]),
        ("complex128", [0.0, 0.0]),
        ("string", ""),
        ("bytes", ""),  # base64 of no bytes
        ("r24", [0, 0, 0]),
        (DT_S, -(2**63)),
        (UTF32_20, ""),
    ],
    ids=str,
)
def test_default_fill(value: Any, json_fill: Any) -> None:
    t = dt(value)
    f = t.default_fill()
    assert f.shape == ()
    assert f.dtype == t.numpy
    out = t.fill_to_json(f)
    assert out == json_fill
    assert type(out) is type(json_fill)
    if not t.variable_length:
        assert f.tobytes() == t.parse_fill(out).tobytes()
    if isinstance(out, float):
        assert math.copysign(1, out) == 1


def test_default_fill_variable_types_hold_python_objects() -> None:
    assert type(dt("string").default_fill().item()) is str
    assert type(dt("bytes").default_fill().item()) is bytes


@pytest.mark.parametrize("value", ALL_JSON, ids=str)
def test_null_fill_is_invalid_for_every_type(value: Any) -> None:
    with pytest.raises(MetadataError, match="null") as info:
        dt(value).parse_fill(None, path="$.x.fill_value")
    assert info.value.path == "$.x.fill_value"


# ------------------------------------------------------------------------------- numpy input


def test_numpy_scalar_of_the_dtype_is_taken_bit_exact() -> None:
    payload = np.array(0x7FC0_0001, dtype=np.uint32).view(np.float32)
    with strict():
        assert bits(dt("float32").parse_fill(payload)) == 0x7FC0_0001
        assert bits(dt("float32").parse_fill(payload[()])) == 0x7FC0_0001
        big = dt("float32").parse_fill(payload.astype(">f4"))
    assert big.dtype == np.dtype("f4")
    assert bits(big) == 0x7FC0_0001


def test_numpy_scalar_of_another_dtype_follows_the_json_rules() -> None:
    with strict():
        assert int(dt("uint8").parse_fill(np.int64(7))[()]) == 7
        assert dt("string").parse_fill(np.str_("x"))[()] == "x"
    with pytest.raises(MetadataError):
        dt("uint8").parse_fill(np.int64(300))
    with pytest.raises(MetadataError, match="scalar"):
        dt("uint8").parse_fill(np.zeros(2, dtype=np.uint8))


def test_fill_to_json_rejects_non_scalars() -> None:
    with pytest.raises(MetadataError, match="scalar"):
        dt("float32").fill_to_json(np.zeros(2, dtype=np.float32))


# ------------------------------------------------------------------------ property: bit-exact


def _fixed_cases() -> list[tuple[str, Any]]:
    names: list[Any] = [n for n in CORE_NAMES if n != "bool"] + ML_NAMES + ["r8", "r16", "r24", "r64"]
    return [(str(n), n) for n in names] + [
        ("datetime64[s]", CONFIGURED[0]),
        ("datetime64[10ns]", CONFIGURED[1]),
        ("timedelta64", CONFIGURED[3]),
    ]


@pytest.mark.parametrize(("label", "value"), _fixed_cases())
@given(data=st.data())
def test_random_bit_patterns_round_trip(label: str, value: Any, data: st.DataObject) -> None:
    t = dt(value)
    assert t.itemsize is not None
    f = data.draw(bit_patterns(t.numpy))
    out = t.fill_to_json(f)
    with strict():  # the writer's output is always canonical
        back = t.parse_fill(json_round_trip(out))
    assert back.dtype == t.numpy
    assert back.reshape(1).view(np.uint8).tolist() == f.reshape(1).view(np.uint8).tolist()


@given(value=st.booleans())
def test_bool_round_trip(value: bool) -> None:
    t = dt("bool")
    f = np.array(value)
    with strict():
        assert t.parse_fill(json_round_trip(t.fill_to_json(f))).tobytes() == f.tobytes()


@given(value=st.text(alphabet=st.characters(codec="utf-8"), max_size=5))
def test_fixed_length_utf32_round_trip(value: str) -> None:
    t = dt(UTF32_20)
    f = np.array(value, dtype=t.numpy)
    with strict():
        back = t.parse_fill(json_round_trip(t.fill_to_json(f)))
    assert back.tobytes() == f.tobytes()


@given(value=st.binary(max_size=20))
def test_bytes_round_trip(value: bytes) -> None:
    t = dt("bytes")
    with strict():
        back = t.parse_fill(json_round_trip(t.fill_to_json(t.parse_fill(list(value)))))
    assert back[()] == value


@given(value=st.floats(allow_nan=False, width=32))
def test_float32_values_round_trip_exactly(value: float) -> None:
    t = dt("float32")
    f = np.array(value, dtype=np.float32)
    out = t.fill_to_json(f)
    assert isinstance(out, float | str)
    with strict():
        assert bits(t.parse_fill(json_round_trip(out))) == bits(f)


def test_lenient_warning_is_the_public_class() -> None:
    from rectizarr import errors

    assert LenientMetadataWarning is errors.LenientMetadataWarning
    assert issubclass(LenientMetadataWarning, UserWarning)


def test_lenient_warning_points_at_the_caller() -> None:
    with pytest.warns(LenientMetadataWarning) as record:
        parse_data_type({"name": "int8"})
    assert record[0].filename == __file__
