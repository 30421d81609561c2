"""Zarr data types <-> numpy dtypes, and fill values JSON <-> 0-d arrays, bit-exact both ways.

Supported (spec-notes §2): the core types ``bool``, ``int8``..``uint64``, ``float16/32/64``,
``complex64/128`` and ``r<N>``; the extensions ``string``, ``bytes`` (zarr-python's
``variable_length_bytes`` is read as ``bytes``), ``numpy.datetime64``, ``numpy.timedelta64``,
``fixed_length_utf32``, and ``bfloat16`` plus the float8/float6/float4 family through the optional
``ml_dtypes`` package (``pip install 'rectizarr[ml]'``). Any other name raises
:class:`~rectizarr.errors.UnsupportedError`: data types can never be ``must_understand: false``.

A fill value is always a 0-d numpy array of :attr:`DataType.numpy` (an object array holding a
``str``/``bytes`` for the variable-length types). Non-canonical forms that other implementations
write are read with a :class:`LenientMetadataWarning`; the writer emits only canonical JSON, never a
float NaN or infinity (so ``msgspec.json.encode`` cannot turn one into ``null``)."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from rectizarr._util import is_int, json_path
from rectizarr.core import dtype_ext as ext
from rectizarr.core.dtype_values import as_strings, check_unit_cast
from rectizarr.core.fill import (
    FLOAT_SPECS,
    ML_FLOATS,
    complex_to_json,
    float_to_json,
    json_int,
    lenient,
    parse_bool,
    parse_complex,
    parse_float,
    parse_int,
)
from rectizarr.errors import LenientMetadataWarning, MetadataError, UnsupportedError

__all__ = ["LenientMetadataWarning", "as_strings", "check_unit_cast"]  # re-exported

_CORE = frozenset(  # numpy's names of these types are the same
    "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64 complex64 complex128".split()
)
INTEGER_NAMES = frozenset(name for name in _CORE if "int" in name)  # int8 ... uint64
_COMPLEX_PART = {"complex64": "float32", "complex128": "float64"}
_VARIABLE = frozenset({"string", "bytes"})
_ALIASES = {
    "variable_length_bytes": "bytes",  # zarr-python's unregistered name
    # the zarr-extensions registry's own spellings of types read under zarr-python's names
    "datetime64": "numpy.datetime64",
    "timedelta64": "numpy.timedelta64",
}
# Registry spellings sized in bits ({"length_bits": n}): the type read, and the bits per unit of it
# (a UCS4 code point is 32 bits). Read only: zarr-python, zarrs and tensorstore write the names on the right.
_LENGTH_BITS = {
    "fixed-length-ucs4": ("fixed_length_utf32", 32),
    "fixed-length-bytes": ("raw_bytes", 8),
    "fixed-length-ascii": ("null_terminated_bytes", 8),
}
_TIME = {"numpy.datetime64": "M8", "numpy.timedelta64": "m8"}
_TIME_UNITS = frozenset(
    {"Y", "M", "W", "D", "h", "m", "s", "ms", "us", "μs", "ns", "ps", "fs", "as", "generic"}
)
_UTF32 = "fixed_length_utf32"
_MAX_ITEMSIZE = ext.MAX_ITEMSIZE  # per element (also of utf32); a fill value of the type is built at open
_RAW = re.compile(r"r([0-9]+)")
_INT64_MIN = -(2**63)
# no configuration
_EXT_PLAIN = ext.EXT_NAMES - {"struct", "structured", "null_terminated_bytes", "raw_bytes", "optional"}


def _object_scalar(value: str | bytes) -> np.ndarray[Any, Any]:
    out = np.empty((), dtype=object)
    out[()] = value
    return out


@dataclass(frozen=True, slots=True)
class DataType:
    """A Zarr data type and the native-byte-order numpy dtype that holds its values.

    Build one with :func:`parse_data_type` (from ``zarr.json``) or :func:`data_type_from_numpy`."""

    name: str  # the Zarr name, e.g. "float32", "string", "numpy.datetime64", "r16", "bfloat16"
    configuration: Mapping[str, Any] | None  # None when the type takes no configuration
    numpy: np.dtype[Any]

    def __hash__(self) -> int:
        config = None if self.configuration is None else repr(sorted(self.configuration.items()))
        return hash((self.name, config, self.numpy))

    @property
    def variable_length(self) -> bool:
        """True for ``string`` and ``bytes`` (numpy object dtype)."""
        return self.name in _VARIABLE

    @property
    def itemsize(self) -> int | None:
        """Bytes per element; None for the variable-length types."""
        return None if self.variable_length else self.numpy.itemsize

    @property
    def has_endianness(self) -> bool:
        """Whether the ``bytes`` codec needs ``endian`` (multi-byte numeric, time and utf32 types)."""
        if self.name in ext.EXT_NAMES:
            return ext.ext_has_endianness(self.name, self.numpy)
        return not self.variable_length and self.numpy.itemsize > 1 and _RAW.fullmatch(self.name) is None

    def to_json(self) -> str | dict[str, Any]:
        """Canonical ``data_type`` JSON: a bare name, or ``{"name", "configuration"}``."""
        if self.configuration is None:
            return self.name
        return {"name": self.name, "configuration": dict(self.configuration)}

    def default_fill(self) -> np.ndarray[Any, Any]:
        """The fill value recorded when the user gives none: zero bits, ``""``, ``b""`` or NaT."""
        if self.name == "string":
            return _object_scalar("")
        if self.name == "bytes":
            return _object_scalar(b"")
        if self.name in _TIME:
            return np.array(_INT64_MIN, dtype=np.int64).view(self.numpy)
        return np.zeros((), dtype=self.numpy)

    # ----------------------------------------------------------------------------------- reading

    def parse_fill(self, value: Any, path: str = "$.fill_value") -> np.ndarray[Any, Any]:
        """The ``fill_value`` JSON as a 0-d array of :attr:`numpy`, bit-exact.

        A 0-d numpy value of this dtype (any byte order) is taken as is; other numpy scalars go
        through their Python value. Raises :class:`MetadataError` (with ``path``) for invalid forms."""
        if value is None and self.name != "optional":  # (optional: null is a missing value)
            raise MetadataError(f"fill_value must not be null for {self.name}", path=path)
        if isinstance(value, np.ndarray | np.generic):
            arr = np.asarray(value)
            if arr.shape != ():
                raise MetadataError(f"fill value must be a scalar, got shape {arr.shape}", path=path)
            if not self.variable_length and arr.dtype.newbyteorder("=") == self.numpy:
                return arr.astype(self.numpy)
            value = arr.item()
        name = self.name
        if name in ext.EXT_NAMES:
            return ext.ext_parse_fill(name, self.configuration, self.numpy, value, path, parse_data_type)
        if name == "bool":
            return parse_bool(value, path)
        if name in FLOAT_SPECS:
            return parse_float(value, self.numpy, FLOAT_SPECS[name], path)
        if name in _COMPLEX_PART:
            part = _COMPLEX_PART[name]
            return parse_complex(value, self.numpy, np.dtype(part), FLOAT_SPECS[part], name, path)
        if name in _CORE:
            return parse_int(value, self.numpy, path)
        if name in _TIME:
            return self._parse_time(value, path)
        if name in ("string", _UTF32) and not isinstance(value, str):
            raise MetadataError(f"expected a JSON string, got {value!r}", path=path)
        if name == "string":
            return _object_scalar(value)
        if name == "bytes":
            return _object_scalar(_parse_byte_list(value, None, path, base64_ok=True))
        if name == _UTF32:
            return self._parse_utf32(value, path)
        raw = _parse_byte_list(value, self.numpy.itemsize, path, base64_ok=False)
        return np.frombuffer(raw, dtype=self.numpy).reshape(()).copy()

    def _parse_time(self, value: Any, path: str) -> np.ndarray[Any, Any]:
        if value == "NaT":
            n = _INT64_MIN
        elif isinstance(value, str):
            raise MetadataError(f"expected an integer or 'NaT', got {value!r}", path=path)
        else:
            n = json_int(value, path)
            if not _INT64_MIN <= n < 2**63:
                raise MetadataError(f"{n} is out of the int64 range of {self.name}", path=path)
            if n != _INT64_MIN and np.datetime_data(self.numpy)[0] == "generic":
                raise UnsupportedError(
                    f"{self.name} with unit 'generic' only supports the fill value 'NaT', got {n}", path=path
                )
        return np.array(n, dtype=np.int64).view(self.numpy)

    def _parse_utf32(self, value: str, path: str) -> np.ndarray[Any, Any]:
        chars = self.numpy.itemsize // 4
        if len(value) > chars:
            raise MetadataError(
                f"fill value {value!r} has {len(value)} code points; {self.name} holds at most {chars}",
                path=path,
            )
        return np.array(value, dtype=self.numpy)

    # ----------------------------------------------------------------------------------- writing

    def fill_to_json(self, fill: np.ndarray[Any, Any]) -> Any:
        """Canonical ``fill_value`` JSON for a 0-d array; :meth:`parse_fill` reads back the same bits."""
        arr = np.asarray(fill)
        if arr.shape != ():
            raise MetadataError(f"fill value must be a scalar, got shape {arr.shape}")
        if arr.dtype != self.numpy:
            arr = arr.astype(self.numpy)
        name = self.name
        value = arr[()]
        if name in ext.EXT_NAMES:
            return ext.ext_fill_to_json(name, self.configuration, arr, parse_data_type)
        if name == "bool":
            return bool(value)
        if name in FLOAT_SPECS:
            return float_to_json(arr, FLOAT_SPECS[name])
        if name in _COMPLEX_PART:
            part = _COMPLEX_PART[name]
            return complex_to_json(arr, np.dtype(part), FLOAT_SPECS[part])
        if name in _CORE:
            return int(value)
        if name in _TIME:
            return int(arr.view(np.int64)[()])
        if name == "string" or name == _UTF32:
            if not isinstance(value, str):
                raise MetadataError(f"{name} fill value must be a str, got {value!r}")
            return str(value)
        if name == "bytes":
            if not isinstance(value, bytes):
                raise MetadataError(f"bytes fill value must be bytes, got {value!r}")
            # Both forms are valid; zarr-python reads only base64, so write that.
            return base64.b64encode(value).decode("ascii")
        return list(arr.tobytes())


def _parse_byte_list(value: Any, size: int | None, path: str, *, base64_ok: bool) -> bytes:
    """A list of ints 0..255, or base64 (canonical for ``bytes``, lenient for ``r<N>``)."""
    if isinstance(value, str):
        try:
            out = base64.b64decode(value, validate=True)
        except ValueError as e:  # binascii.Error, or non-ASCII text
            raise MetadataError(f"invalid base64 fill value {value!r}: {e}", path=path) from e
        if not base64_ok:
            lenient(f"base64 fill value {value!r}; write a list of {size} byte values", path)
    elif isinstance(value, list) and all(is_int(b) and 0 <= b <= 255 for b in value):
        out = bytes(value)
    else:
        raise MetadataError(
            f"expected a list of integers 0..255 or a base64 string, got {value!r}", path=path
        )
    if size is not None and len(out) != size:
        raise MetadataError(f"fill value has {len(out)} bytes, the data type has {size}", path=path)
    return out


# ---------------------------------------------------------------------------------- construction


def parse_data_type(value: Any, path: str = "$.data_type") -> DataType:
    """The ``data_type`` of a ``zarr.json``: a bare name or ``{"name", "configuration"}``."""
    if isinstance(value, str):
        return _from_name(value, None, path)
    if not isinstance(value, Mapping):
        raise MetadataError(f"data_type must be a string or an object, got {value!r}", path=path)
    extra = sorted(set(value) - {"name", "configuration", "must_understand"})
    if extra:
        raise MetadataError(f"unexpected key(s) {extra} in data_type", path=path)
    name = value.get("name")
    if not isinstance(name, str):
        raise MetadataError(f"data_type 'name' must be a string, got {name!r}", path=json_path(path, "name"))
    if value.get("must_understand", True) is not True:
        raise MetadataError(
            "data types must always be understood; 'must_understand' may only be true",
            path=json_path(path, "must_understand"),
        )
    config = value.get("configuration")
    if "configuration" in value and not isinstance(config, Mapping):
        raise MetadataError(
            f"'configuration' must be an object, got {config!r}", path=json_path(path, "configuration")
        )
    if name in _CORE:
        lenient(f"core data type written as an object; write the plain string {name!r}", path)
    return _from_name(name, config, path)


def _from_name(name: str, config: Mapping[str, Any] | None, path: str) -> DataType:
    if name in _LENGTH_BITS:
        name, config = _from_length_bits(name, config, path)
    if name in ("datetime64", "timedelta64"):  # the registry's spelling: {"unit"} alone, or no configuration
        config = {"unit": "generic", "scale_factor": 1} if config is None else {"scale_factor": 1, **config}
    name = _ALIASES.get(name, name)
    if name in _TIME:
        return _time_type(name, config, path)
    if name == _UTF32:
        return _utf32_type(config, path)
    known = name in _CORE or name in _VARIABLE or name in ML_FLOATS or _RAW.fullmatch(name) is not None
    if config and known:
        raise MetadataError(
            f"data type {name!r} takes no configuration", path=json_path(path, "configuration")
        )
    if name in _CORE:
        return DataType(name, None, np.dtype(name))
    if name in _VARIABLE:
        return DataType(name, None, np.dtype(object))
    if name in ML_FLOATS:
        return DataType(name, None, ext.ml_dtype(name, path))
    m = _RAW.fullmatch(name)
    if m:
        digits = m.group(1)
        if len(digits) > 11 or int(digits) // 8 > _MAX_ITEMSIZE:  # no int() of thousands of digits
            raise MetadataError(
                f"raw data type {name[:24]!r}: more than {_MAX_ITEMSIZE} bytes per element", path=path
            )
        bits = int(digits)
        if bits == 0 or bits % 8 or digits != str(bits):
            raise MetadataError(
                f"raw data type {name!r}: the bit count must be a positive multiple of 8", path=path
            )
        return DataType(name, None, np.dtype(f"V{bits // 8}"))
    if name in ext.EXT_NAMES:
        ext_config, np_dtype = ext.ext_from_name(name, config, path, parse_data_type)
        return DataType("struct" if name == "structured" else name, ext_config, np_dtype)
    raise UnsupportedError(
        f"unsupported data type {name!r} ({_registered(name)}data types cannot be skipped)", path=path
    )


_ELSEWHERE = frozenset({"binary_fixed_point"})  # registered data types (zarr-extensions) not read here
_FIXED_POINT = re.compile(r"N[0-9]{1,2}f[0-9]{1,2}")


def _registered(name: str) -> str:
    if _FIXED_POINT.fullmatch(name):
        return "a fixed-point type registered in zarr-extensions; "
    return "registered in zarr-extensions; " if name in _ELSEWHERE else ""


def _from_length_bits(name: str, config: Mapping[str, Any] | None, path: str) -> tuple[str, dict[str, Any]]:
    """A registry spelling ``{"name": "fixed-length-bytes", "configuration": {"length_bits": 24}}`` as the
    type and configuration it describes (``raw_bytes`` with ``length_bytes`` 3)."""
    target, unit = _LENGTH_BITS[name]
    bits = _checked_config(config, name, ("length_bits",), path)["length_bits"]
    if not is_int(bits) or bits <= 0 or bits % unit:
        raise MetadataError(
            f"{name}: length_bits must be a positive multiple of {unit}, got {bits!r}",
            path=json_path(path, "configuration", "length_bits"),
        )
    return target, {"length_bytes": int(bits) // 8}


def _checked_config(
    config: Mapping[str, Any] | None, name: str, keys: tuple[str, ...], path: str
) -> Mapping[str, Any]:
    """``config`` after checking that it has exactly ``keys``."""
    where = json_path(path, "configuration")
    if config is None:
        raise MetadataError(f"data type {name!r} requires a configuration with {list(keys)}", path=path)
    missing = [k for k in keys if k not in config]
    if missing:
        raise MetadataError(f"{name} configuration is missing {missing}", path=where)
    extra = sorted(set(config) - set(keys))
    if extra:
        raise MetadataError(f"unexpected key(s) {extra} in the {name} configuration", path=where)
    return config


def _time_type(name: str, config: Mapping[str, Any] | None, path: str) -> DataType:
    config = _checked_config(config, name, ("unit", "scale_factor"), path)
    where = json_path(path, "configuration")
    unit, scale = config["unit"], config["scale_factor"]
    if not isinstance(unit, str) or unit not in _TIME_UNITS:
        raise MetadataError(
            f"unit must be one of {sorted(_TIME_UNITS)}, got {unit!r}", path=json_path(where, "unit")
        )
    if not is_int(scale) or not 1 <= scale <= 2**31 - 1:
        raise MetadataError(
            f"scale_factor must be an integer in [1, 2147483647], got {scale!r}",
            path=json_path(where, "scale_factor"),
        )
    unit = "us" if unit == "μs" else unit
    if unit == "generic":
        if scale != 1:
            raise UnsupportedError(f"{name} with unit 'generic' and scale_factor {scale}", path=where)
        np_dtype = np.dtype(_TIME[name])
    else:
        np_dtype = np.dtype(f"{_TIME[name]}[{int(scale)}{unit}]")
    return DataType(name, MappingProxyType({"unit": unit, "scale_factor": int(scale)}), np_dtype)


def _utf32_type(config: Mapping[str, Any] | None, path: str) -> DataType:
    config = _checked_config(config, _UTF32, ("length_bytes",), path)
    where = json_path(path, "configuration")
    length = config["length_bytes"]
    if not is_int(length) or not 4 <= length <= _MAX_ITEMSIZE or length % 4:
        raise MetadataError(
            f"length_bytes must be a multiple of 4 in [4, {_MAX_ITEMSIZE}], got {length!r}",
            path=json_path(where, "length_bytes"),
        )
    return DataType(_UTF32, MappingProxyType({"length_bytes": int(length)}), np.dtype(f"U{length // 4}"))


def native_order(dt: np.dtype[Any]) -> np.dtype[Any]:
    """``dt`` in native byte order, every field (offsets kept) and sub-array too."""
    if dt.fields is None and dt.subdtype is None:
        return dt.newbyteorder("=") if dt.byteorder in "<>" else dt
    if dt.subdtype is not None:
        return np.dtype((native_order(dt.subdtype[0]), dt.subdtype[1]))
    fields: Any = dt.fields or {}
    spec: Any = {
        "names": list(fields),
        "formats": [native_order(fields[n][0]) for n in fields],
        "offsets": [fields[n][1] for n in fields],
        "itemsize": dt.itemsize,
    }
    out: np.dtype[Any] = np.dtype(spec)
    return out


def data_type_from_numpy(dtype: npt.DTypeLike | str | Mapping[str, Any]) -> DataType:
    """The Zarr data type for a numpy dtype (byte order dropped) or a configuration-less Zarr name.

    ``"U5"`` -> ``fixed_length_utf32`` (20 bytes); ``str``/``"U"``/object/StringDType -> ``string``;
    ``bytes``/``"S"`` -> ``bytes``; ``"M8[s]"`` -> ``numpy.datetime64``; ``"V2"`` -> ``r16``;
    ml_dtypes types by name; a Zarr ``data_type`` object (``{"name": "optional", "configuration": {"name":
    "uint8"}}``) as :func:`parse_data_type` reads it. Anything else raises :class:`UnsupportedError`."""
    if isinstance(dtype, Mapping) and "name" in dtype:  # (not NumPy's {"names": [...], "formats": [...]})
        return parse_data_type(dtype)
    if isinstance(dtype, str) and (
        _ALIASES.get(dtype, dtype) in _CORE | _VARIABLE | ML_FLOATS | _EXT_PLAIN or _RAW.fullmatch(dtype)
    ):
        return _from_name(dtype, None, "$.data_type")
    try:
        dt: np.dtype[Any] = np.dtype(dtype)  # type: ignore[arg-type]  # (a Mapping: NumPy's dict form)
    except (TypeError, ValueError) as e:
        raise UnsupportedError(f"cannot map {dtype!r} to a Zarr data type") from e
    if dt.name in ML_FLOATS and dt.type.__module__.startswith("ml_dtypes"):
        return DataType(dt.name, None, dt.newbyteorder("="))
    found = ext.ext_from_numpy(dt, data_type_from_numpy)  # S<n>, structured, ml_dtypes integers
    if found is not None:
        return DataType(found[0], found[1], native_order(dt))
    if dt.subdtype is not None:
        raise UnsupportedError(f"subarray numpy dtype {dt} has no Zarr data type")
    kind, size = dt.kind, dt.itemsize
    if kind in "biufc":
        if dt.name in _CORE:
            return _from_name(dt.name, None, "$.data_type")
    elif kind in "OT" or (kind == "U" and size == 0):
        return _from_name("string", None, "$.data_type")
    elif kind == "S" and size == 0:
        return _from_name("bytes", None, "$.data_type")
    elif kind == "U":
        return _utf32_type({"length_bytes": size}, "$.data_type")
    elif kind == "V" and size > 0:
        return _from_name(f"r{8 * size}", None, "$.data_type")
    elif kind in "Mm":
        unit, scale = np.datetime_data(dt)
        name = "numpy.datetime64" if kind == "M" else "numpy.timedelta64"
        return _time_type(name, {"unit": unit, "scale_factor": scale}, "$.data_type")
    raise UnsupportedError(f"numpy dtype {dt} has no supported Zarr data type")
