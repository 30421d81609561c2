"""Fill values of the numeric data types (bool, integers, floats): JSON <-> 0-d arrays, bit-exact.

Helpers for :mod:`rectizarr.core.dtype`; the rules are in spec-notes §2.2-2.3. Float fill values are
handled as bit patterns (``view`` as an unsigned integer of the same width) and never pass through
a Python float when they are NaN, so payloads and signalling NaNs survive a read/write cycle."""

from __future__ import annotations

import math
import re
import sys
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from rectizarr._util import is_int, json_path
from rectizarr.errors import LenientMetadataWarning, MetadataError


def lenient(message: str, path: str) -> None:
    """Warn that a non-canonical metadata value at ``path`` was accepted.

    The warning is attributed to the first caller outside rectizarr."""
    level, frame = 1, sys._getframe(0)
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("rectizarr"):
        frame, level = frame.f_back, level + 1
    warnings.warn(f"{path}: {message}", LenientMetadataWarning, stacklevel=level)


@dataclass(frozen=True, slots=True)
class FloatSpec:
    """The special values of a floating-point data type."""

    nan_bits: int | None  # the bit pattern "NaN" stands for; None when the type has no NaN
    has_inf: bool


FLOAT_SPECS: dict[str, FloatSpec] = {
    "float16": FloatSpec(0x7E00, True),
    "float32": FloatSpec(0x7FC0_0000, True),
    "float64": FloatSpec(0x7FF8_0000_0000_0000, True),
    # ml_dtypes types; NaN constants from the zarr-extensions data type READMEs.
    "bfloat16": FloatSpec(0x7FC0, True),
    "float8_e3m4": FloatSpec(0x78, True),
    "float8_e4m3": FloatSpec(0x7C, True),
    "float8_e4m3fn": FloatSpec(0x7F, False),  # unregistered; written by tensorstore
    "float8_e4m3fnuz": FloatSpec(0x80, False),
    "float8_e4m3b11fnuz": FloatSpec(0x80, False),
    "float8_e5m2": FloatSpec(0x7E, True),
    "float8_e5m2fnuz": FloatSpec(0x80, False),
    "float8_e8m0fnu": FloatSpec(0xFF, False),
    "float6_e2m3fn": FloatSpec(None, False),
    "float6_e3m2fn": FloatSpec(None, False),
    "float4_e2m1fn": FloatSpec(None, False),
}
ML_FLOATS = frozenset(FLOAT_SPECS) - {"float16", "float32", "float64"}

_SPECIAL = ("NaN", "Infinity", "-Infinity")
_HEX = re.compile(r"0[xX]([0-9a-fA-F]+)")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_LENIENT_SPECIAL = {
    **dict.fromkeys(("nan", "+nan"), "NaN"),
    **dict.fromkeys(("inf", "+inf", "infinity", "+infinity"), "Infinity"),
    **dict.fromkeys(("-inf", "-infinity"), "-Infinity"),
}


def _uint(dtype: np.dtype[Any]) -> np.dtype[Any]:
    return np.dtype(f"u{dtype.itemsize}")


def _bits(arr: np.ndarray[Any, Any]) -> int:
    return int(arr.view(_uint(arr.dtype))[()])


def _from_bits(bits: int, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    return np.array(bits, dtype=_uint(dtype)).view(dtype)


def _cast(x: float, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """Round a Python float to ``dtype`` (round half to even; overflow follows the type)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.array(x, dtype=dtype)


# --------------------------------------------------------------------------------------------- ints


def json_int(value: Any, path: str) -> int:
    """A JSON integer; an integral float such as ``1.0`` is accepted with a warning."""
    if is_int(value):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        lenient(f"integer written as the float {value!r}; write {int(value)}", path)
        return int(value)
    raise MetadataError(f"expected a JSON integer, got {value!r}", path=path)


def parse_int(
    value: Any, dtype: np.dtype[Any], path: str, bounds: tuple[int, int] | None = None
) -> np.ndarray[Any, Any]:
    """Fill value of an integer type (``bounds``: its range where NumPy knows none, ml_dtypes' int4);
    exact over the full int64/uint64 range."""
    n = json_int(value, path)
    lo, hi = bounds or (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
    if not lo <= n <= hi:
        raise MetadataError(f"{n} is out of range for {dtype} [{lo}, {hi}]", path=path)
    return np.array(n, dtype=dtype)


def parse_bool(value: Any, path: str) -> np.ndarray[Any, Any]:
    """Fill value of ``bool``: ``true``/``false``; ``0``/``1`` accepted with a warning."""
    if isinstance(value, bool):
        return np.array(value)
    if is_int(value) and value in (0, 1):
        lenient(f"bool written as the integer {value}; write {str(bool(value)).lower()}", path)
        return np.array(bool(value))
    raise MetadataError(f"expected true or false, got {value!r}", path=path)


# ------------------------------------------------------------------------------------------- floats


def parse_float(value: Any, dtype: np.dtype[Any], spec: FloatSpec, path: str) -> np.ndarray[Any, Any]:
    """Fill value of a floating-point type as a 0-d array of ``dtype``."""
    if isinstance(value, str):
        return _parse_float_string(value, dtype, spec, path)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MetadataError(
            f"expected a number, 'NaN', 'Infinity', '-Infinity' or a '0x' hex string, got {value!r}",
            path=path,
        )
    if isinstance(value, float) and not math.isfinite(value):
        word = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        lenient(f"bare JSON {value!r} is not valid JSON; write the string {word!r}", path)
        return _special(word, dtype, spec, path)
    try:
        x = float(value)
    except OverflowError:  # a huge JSON integer
        x = math.inf if value > 0 else -math.inf
    return _from_number(x, dtype, spec, path)


def parse_complex(
    value: Any, dtype: np.dtype[Any], part: np.dtype[Any], spec: FloatSpec, name: str, path: str
) -> np.ndarray[Any, Any]:
    """A ``[real, imag]`` fill value of the complex type ``name`` (``dtype``), each a float of ``part``."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise MetadataError(f"{name} fill value must be a [real, imag] pair, got {value!r}", path=path)
    re_, im = (parse_float(v, part, spec, json_path(path, i)) for i, v in enumerate(value))
    return np.frombuffer(re_.tobytes() + im.tobytes(), dtype=dtype).reshape(()).copy()


def _parse_float_string(s: str, dtype: np.dtype[Any], spec: FloatSpec, path: str) -> np.ndarray[Any, Any]:
    if s in _SPECIAL:
        return _special(s, dtype, spec, path)
    m = _HEX.fullmatch(s)
    if m:
        return _from_hex(m.group(1), dtype, path)
    word = _LENIENT_SPECIAL.get(s.lower())
    if word is not None:
        lenient(f"non-canonical spelling {s!r}; write {word!r}", path)
        return _special(word, dtype, spec, path)
    if _NUMBER.fullmatch(s):
        lenient(f"number written as the string {s!r}; write a JSON number", path)
        return _from_number(float(s), dtype, spec, path)
    raise MetadataError(
        f"invalid {dtype} fill value {s!r}: expected 'NaN', 'Infinity', '-Infinity' or '0x' + hex digits",
        path=path,
    )


def _special(word: str, dtype: np.dtype[Any], spec: FloatSpec, path: str) -> np.ndarray[Any, Any]:
    if word == "NaN":
        if spec.nan_bits is None:
            raise MetadataError(f"{dtype} has no NaN", path=path)
        return _from_bits(spec.nan_bits, dtype)
    if not spec.has_inf:
        raise MetadataError(f"{dtype} has no infinity", path=path)
    return _cast(math.inf if word == "Infinity" else -math.inf, dtype)


def _from_hex(digits: str, dtype: np.dtype[Any], path: str) -> np.ndarray[Any, Any]:
    """The hex digits are the bit pattern read as an unsigned integer of the dtype's width."""
    bits = int(digits, 16)
    width = 2 * dtype.itemsize
    if bits >> (8 * dtype.itemsize):
        raise MetadataError(
            f"hex fill value '0x{digits}' does not fit the {8 * dtype.itemsize}-bit type {dtype}", path=path
        )
    if len(digits) != width:
        lenient(
            f"hex fill value '0x{digits}' has {len(digits)} digits, not {width}; read as the {dtype} bit "
            f"pattern 0x{bits:0{width}x} (zarr-python infers the width from the digit count)",
            path,
        )
    return _from_bits(bits, dtype)


def _from_number(x: float, dtype: np.dtype[Any], spec: FloatSpec, path: str) -> np.ndarray[Any, Any]:
    """Round a finite or infinite number to ``dtype``; types without infinities reject overflow."""
    out = _cast(x, dtype)
    if not spec.has_inf:
        if not math.isfinite(x):
            raise MetadataError(f"{dtype} has no infinity", path=path)
        if not np.isfinite(out) or not _below_overflow(x, dtype):
            raise MetadataError(f"{x!r} is not representable in {dtype}", path=path)
    return out


def _below_overflow(x: float, dtype: np.dtype[Any]) -> bool:
    """Whether ``x`` rounds (half to even) to a finite value of a type without infinities."""
    import ml_dtypes  # only the ml_dtypes types lack infinities

    top = np.array(ml_dtypes.finfo(dtype).max, dtype=dtype)  # type: ignore[no-untyped-call]
    top_bits = _bits(top)
    below = float(_from_bits(top_bits - 1, dtype)[()])
    midpoint = float(top[()]) + (float(top[()]) - below) / 2
    return abs(x) < midpoint or (abs(x) == midpoint and top_bits % 2 == 0)


def float_to_json(fill: np.ndarray[Any, Any], spec: FloatSpec) -> str | float:
    """Canonical JSON form of a 0-d float array; parsing it back gives the same bits.

    ``"NaN"`` for the canonical NaN, hex for any other NaN (and any pattern that no number
    reproduces), ``"Infinity"``/``"-Infinity"``, else the shortest decimal that reads back exactly."""
    dtype = fill.dtype
    bits = _bits(fill)
    if bits == spec.nan_bits:
        return "NaN"
    hex_form = f"0x{bits:0{2 * dtype.itemsize}x}"
    x = fill[()]
    if np.isnan(x):
        return hex_form
    candidates: list[tuple[str | float, float]]
    if np.isinf(x):
        candidates = [("Infinity", math.inf)] if x > 0 else [("-Infinity", -math.inf)]
    else:
        exact = float(x)  # exact: every supported float type widens losslessly to float64
        try:
            short = float(str(x))
        except ValueError:
            short = exact
        candidates = [(short, short), (exact, exact)]
    for json_value, number in candidates:
        if _bits(_cast(number, dtype)) == bits:
            return json_value
    return hex_form


def complex_to_json(fill: np.ndarray[Any, Any], part: np.dtype[Any], spec: FloatSpec) -> list[str | float]:
    """The ``[real, imag]`` JSON of a 0-d complex fill value (what :func:`parse_complex` reads back)."""
    parts = np.frombuffer(fill.tobytes(), dtype=part)
    return [float_to_json(parts[0:1].reshape(()), spec), float_to_json(parts[1:2].reshape(()), spec)]
