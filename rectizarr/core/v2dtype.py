"""Zarr v2 data types (``.zarray`` ``dtype``) and fill values (``fill_value``) <-> numpy and the v3 model,
for :mod:`rectizarr.core.v2meta`: typestrs with their byte order, structured field lists, tensorstore's names
of the ml_dtypes types; fill values as zarr-python 2 writes them (null, ``"NaN"``/``"Infinity"``, ``[re, im]``,
base64 for bytes, raw and structured types). Values are held in native byte order."""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np

from rectizarr._util import is_int, json_path
from rectizarr.core.dtype import DataType, data_type_from_numpy, native_order, parse_data_type
from rectizarr.core.dtype_ext import MAX_ITEMSIZE, MAX_NESTING, ML_INTS, b64_fill
from rectizarr.core.fill import ML_FLOATS, json_int
from rectizarr.errors import MetadataError, UnsupportedError

_KINDS = "biufcMmSUVO"
_ML_NAMES = frozenset(ML_FLOATS | set(ML_INTS))


def is_ml_dtype(dt: np.dtype[Any]) -> bool:
    """Whether ``dt`` is an ml_dtypes type (bfloat16, float8, int4 ...)."""
    return dt.type.__module__.startswith("ml_dtypes")


# ---------------------------------------------------------------------------------------------- dtype


def parse_v2_dtype(value: Any, path: str = "$.dtype") -> np.dtype[Any]:
    """The numpy dtype a v2 ``dtype`` names (byte order kept): a typestr or a structured field list."""
    if isinstance(value, str) and value in _ML_NAMES:  # tensorstore's v2 names of the ml_dtypes types
        return parse_data_type(value, path).numpy
    if isinstance(value, str):
        try:
            dt = np.dtype(value)
        except (TypeError, ValueError) as exc:
            raise MetadataError(f"{value!r} is not a numpy dtype", path=path) from exc
        if dt.kind not in _KINDS or dt.fields is not None or (dt.itemsize == 0 and dt.kind != "O"):
            raise UnsupportedError(f"v2 dtype {value!r} is not supported", path=path)
        _check_size(dt.itemsize, path)
        return dt
    if not isinstance(value, list) or not value:
        raise MetadataError(f"dtype must be a string or a list of fields, got {value!r}", path=path)
    if path.count("[") > 2 * MAX_NESTING:  # two per level: [i][1]
        raise MetadataError(f"structured dtypes nested more than {MAX_NESTING} levels deep", path=path)
    fields: list[Any] = []
    size = 0  # numpy's sum of the field sizes wraps around past 2**31
    for i, field in enumerate(value):
        where = json_path(path, i)
        if not (isinstance(field, list) and len(field) in (2, 3) and isinstance(field[0], str)):
            raise MetadataError("a structured field is [name, dtype] or [name, dtype, shape]", path=where)
        sub = parse_v2_dtype(field[1], json_path(where, 1))
        if sub.kind == "O":
            raise UnsupportedError("object fields in structured dtypes", path=where)
        shape = field[2] if len(field) == 3 else []
        if not (isinstance(shape, list) and all(is_int(s) and s >= 0 for s in shape)):
            raise MetadataError("a field shape is a list of non-negative integers", path=json_path(where, 2))
        fields.append((field[0], sub, tuple(shape)) if len(field) == 3 else (field[0], sub))
        size += sub.itemsize * math.prod(shape)
    _check_size(size, path)
    try:
        return np.dtype(fields)
    except (TypeError, ValueError) as exc:
        raise MetadataError(f"invalid structured dtype: {exc}", path=path) from exc


def _check_size(itemsize: int, path: str) -> None:
    if itemsize > MAX_ITEMSIZE:
        raise UnsupportedError(
            f"{itemsize} bytes per element: rectizarr reads at most {MAX_ITEMSIZE}", path=path
        )


def v2_dtype_to_json(dt: np.dtype[Any]) -> Any:
    """The v2 ``dtype`` JSON of a numpy dtype (typestr, or nested field lists for structured types)."""
    if is_ml_dtype(dt):
        return dt.name
    if dt.fields is None:
        if dt.subdtype is not None:
            raise UnsupportedError(f"a subarray dtype {dt} as an array dtype")
        return dt.str
    out: list[Any] = []
    for name in dt.names or ():
        sub = dt.fields[name][0]
        if sub.subdtype is not None:
            base, shape = sub.subdtype
            out.append([name, v2_dtype_to_json(base), list(shape)])
        else:
            out.append([name, v2_dtype_to_json(sub)])
    return out


def data_type_of(declared: np.dtype[Any], filters: list[dict[str, Any]]) -> DataType:
    if declared.kind == "O":
        ids = {f.get("id") for f in filters}
        if "vlen-utf8" in ids:
            return data_type_from_numpy("string")
        if "vlen-bytes" in ids:
            return data_type_from_numpy("bytes")
        return DataType("object", None, np.dtype(object))
    native = native_order(declared)
    try:
        return data_type_from_numpy(native)
    except UnsupportedError:
        return DataType(f"v2:{declared.str}", None, native)


# ----------------------------------------------------------------------------------------- fill values


def parse_v2_fill(
    value: Any, declared: np.dtype[Any], dtype: DataType, path: str = "$.fill_value"
) -> np.ndarray:
    """A v2 ``fill_value`` as a 0-d array of ``dtype.numpy`` (null: the type's default fill)."""
    if value is None:
        return dtype.default_fill()
    kind = declared.kind
    if kind == "O":
        out = np.empty((), dtype=object)
        wanted = {"string": str, "bytes": bytes}.get(dtype.name)
        out[()] = value if wanted is None or isinstance(value, wanted) else dtype.default_fill()[()]
        return out
    if kind in "Mm":  # (any unit: zarr-python 2 writes integers for generic datetimes too)
        n = -(2**63) if value == "NaT" else json_int(value, path)
        if not -(2**63) <= n < 2**63:
            raise MetadataError(f"{n} is out of the int64 range of {declared}", path=path)
        return np.array(n, dtype=np.int64).view(dtype.numpy)
    if kind in "biufcU" or is_ml_dtype(declared):  # as in v3 (of the same type; longdouble has none)
        if dtype.name.startswith("v2:"):
            raise UnsupportedError(f"fill values of {declared}", path=path)
        return dtype.parse_fill(value, path)
    # S, V and structured: base64 of the bytes (zarr-python 2 writes 0 for "no fill")
    raw = (
        bytes(declared.itemsize)
        if value == 0 and not isinstance(value, bool)
        else b64_fill(value, declared.itemsize, False, path)
    )
    return np.frombuffer(raw, dtype=declared).reshape(()).astype(dtype.numpy)


def v2_fill_to_json(fill: np.ndarray, declared: np.dtype[Any]) -> Any:
    """The v2 ``fill_value`` JSON of a 0-d fill (as zarr-python 2 writes it)."""
    kind, value = declared.kind, np.asarray(fill)[()]
    if is_ml_dtype(declared) or kind in "biuMmU":  # as in v3
        return data_type_from_numpy(declared).fill_to_json(fill)
    if kind == "O":
        if isinstance(value, str):
            return str(value)  # np.str_ too: JSON knows only the plain type
        return value if isinstance(value, int | float | bool) or value is None else None
    if kind == "f":
        return _float_json(np.asarray(fill))
    if kind == "c":
        arr = np.asarray(fill)
        return [_float_json(np.asarray(arr.real)), _float_json(np.asarray(arr.imag))]
    return base64.b64encode(np.asarray(fill).astype(declared).tobytes()).decode("ascii")


def _float_json(arr: np.ndarray) -> Any:
    x = float(arr[()])
    return "NaN" if x != x else {math.inf: "Infinity", -math.inf: "-Infinity"}.get(x, x)
