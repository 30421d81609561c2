"""The data types other implementations write beyond the core set (spec-notes §2.4), for
:mod:`rectizarr.core.dtype`:

- ``struct`` (zarr-extensions; zarr-python): packed fields in declaration order, nestable, fill value an
  object with every field (``structured`` with ``[name, type]`` fields and base64 fills is read, never
  written);
- ``null_terminated_bytes`` and ``raw_bytes`` (zarr-python's names for numpy ``S<n>`` and ``V<n>``), fill
  values base64;
- ``int2``, ``int4``, ``uint2``, ``uint4`` (tensorstore, zarrs): one byte per value, through ``ml_dtypes``;
- ``complex_float32`` / ``complex_float64`` (zarrs' spellings of complex64 / complex128) and the other
  ``complex_<float>`` types, held as a ``(real, imag)`` structured pair where numpy has no complex type.

This module knows nothing of :class:`~rectizarr.core.dtype.DataType`: struct fields are parsed through the
``parse`` callback the caller passes (``parse_data_type``), so the two modules do not import each other."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np

from rectizarr._util import is_int, json_path
from rectizarr.core import dtype_optional as opt
from rectizarr.core.fill import FLOAT_SPECS, complex_to_json, lenient, parse_complex, parse_int
from rectizarr.errors import MetadataError, UnsupportedError

ML_INTS = {"int2": (-2, 1), "int4": (-8, 7), "uint2": (0, 3), "uint4": (0, 15)}
_NATIVE_COMPLEX = {"complex_float32": "c8", "complex_float64": "c16"}
_COMPLEX = {f"complex_{f}": f for f in FLOAT_SPECS}
_BYTES = {"null_terminated_bytes": "S", "raw_bytes": "V"}
EXT_NAMES = frozenset({"struct", "structured", opt.OPTIONAL, *ML_INTS, *_COMPLEX, *_BYTES})
#: Bytes per element of the byte-string types and of Zarr v2 dtypes: their fill value is built at open, from
#: the metadata alone, so a larger claim would allocate that much before any data is read.
MAX_ITEMSIZE = 1 << 24
MAX_NESTING = 16  # structs in structs, shards in shards: deeper JSON is refused, not recursed into


class FieldType(Protocol):
    """What a struct needs of its fields' data types (a :class:`~rectizarr.core.dtype.DataType`)."""

    @property
    def name(self) -> str: ...
    @property
    def numpy(self) -> np.dtype[Any]: ...
    @property
    def variable_length(self) -> bool: ...
    @property
    def has_endianness(self) -> bool: ...
    def to_json(self) -> Any: ...
    def parse_fill(self, value: Any, path: str) -> np.ndarray[Any, Any]: ...
    def fill_to_json(self, fill: np.ndarray[Any, Any]) -> Any: ...


Parse = Callable[[Any, str], FieldType]


def ml_dtype(name: str, path: str) -> np.dtype[Any]:
    """The ml_dtypes type ``name`` (``bfloat16``, ``float8_e4m3fn``, ``int4`` ...); UnsupportedError naming the
    extra when ml_dtypes is missing or lacks it."""
    try:
        import ml_dtypes
    except ImportError as exc:
        raise UnsupportedError(
            f"data type {name!r} needs the optional ml_dtypes package: pip install 'rectizarr[ml]'", path=path
        ) from exc
    try:
        out: np.dtype[Any] = np.dtype(getattr(ml_dtypes, name))
    except AttributeError as exc:
        raise UnsupportedError(
            f"data type {name!r} is missing from ml_dtypes {ml_dtypes.__version__}; upgrade it", path=path
        ) from exc
    return out


def _component(name: str, path: str) -> np.dtype[Any]:
    comp = _COMPLEX[name]
    return (
        np.dtype(f"f{int(comp[5:]) // 8}")
        if comp in ("float16", "float32", "float64")
        else ml_dtype(comp, path)
    )


# ----------------------------------------------------------------------------------------- construction


def ext_from_name(
    name: str, config: Mapping[str, Any] | None, path: str, parse: Parse
) -> tuple[Mapping[str, Any] | None, np.dtype[Any]]:
    """The configuration (as stored) and numpy dtype of an extension data type ``name``."""
    cpath = json_path(path, "configuration")
    if name == opt.OPTIONAL:
        return opt.optional_from_name(config, path, parse)
    if name in _BYTES:
        needs = f'{name} needs a configuration {{"length_bytes": n}} with 1 <= n <= {MAX_ITEMSIZE}'
        length = _only(config, "length_bytes", lambda n: is_int(n) and 1 <= n <= MAX_ITEMSIZE, needs, cpath)
        return MappingProxyType({"length_bytes": int(length)}), np.dtype(f"{_BYTES[name]}{int(length)}")
    if config and name not in ("struct", "structured"):
        raise MetadataError(f"data type {name!r} takes no configuration", path=cpath)
    if name in ML_INTS:
        return None, ml_dtype(name, path)
    if name in _NATIVE_COMPLEX:
        return None, np.dtype(_NATIVE_COMPLEX[name])
    if name in _COMPLEX:
        comp = _component(name, path)
        return None, np.dtype([("real", comp), ("imag", comp)])
    return _struct(name, config, path, parse)


def _struct(
    name: str, config: Mapping[str, Any] | None, path: str, parse: Parse
) -> tuple[Mapping[str, Any] | None, np.dtype[Any]]:
    cpath = json_path(path, "configuration")
    needs = f'{name} needs a configuration {{"fields": [...]}} with at least one field'
    fields = _only(config, "fields", lambda f: isinstance(f, list) and bool(f), needs, cpath)
    if cpath.count(".configuration") > MAX_NESTING:
        raise MetadataError(f"structs nested more than {MAX_NESTING} levels deep", path=cpath)
    names: list[str] = []
    formats: list[np.dtype[Any]] = []
    types: list[Any] = []
    for i, field in enumerate(fields):
        where = json_path(cpath, "fields", i)
        if isinstance(field, Mapping) and set(field) == {"name", "data_type"}:
            fname, ftype = field["name"], field["data_type"]
        elif name == "structured" and isinstance(field, list) and len(field) == 2:
            fname, ftype = field
        else:
            raise MetadataError('a struct field is {"name": ..., "data_type": ...}', path=where)
        if not isinstance(fname, str) or not fname or fname in names:
            raise MetadataError(f"field names must be unique non-empty strings, got {fname!r}", path=where)
        sub = parse(ftype, json_path(where, "data_type"))
        if sub.variable_length:
            raise UnsupportedError(f"variable-length field {fname!r} in a struct", path=where)
        names.append(fname)
        formats.append(sub.numpy)
        types.append(sub.to_json())
    stored = {"fields": [{"name": n, "data_type": t} for n, t in zip(names, types, strict=True)]}
    return MappingProxyType(stored), np.dtype(list(zip(names, formats, strict=True)))


def _only(
    config: Mapping[str, Any] | None, key: str, valid: Callable[[Any], bool], needs: str, path: str
) -> Any:
    """``config[key]`` where ``config`` is ``{key: value}`` with a ``valid`` value, else MetadataError(needs)."""
    value = (config or {}).get(key)
    if not isinstance(config, Mapping) or set(config) != {key} or not valid(value):
        raise MetadataError(needs, path=path)
    return value


def _fields(config: Mapping[str, Any] | None, parse: Parse, path: str) -> list[tuple[str, FieldType]]:
    return [(f["name"], parse(f["data_type"], path)) for f in (config or {}).get("fields", [])]


def ext_from_numpy(
    dt: np.dtype[Any], from_numpy: Callable[[np.dtype[Any]], FieldType]
) -> tuple[str, Mapping[str, Any] | None] | None:
    """The extension name and configuration for a numpy dtype (``S<n>``, structured, ml_dtypes ints)."""
    if dt.kind == "S" and dt.itemsize:
        return "null_terminated_bytes", MappingProxyType({"length_bytes": dt.itemsize})
    if dt.name in ML_INTS and dt.type.__module__.startswith("ml_dtypes"):
        return dt.name, None
    if dt.fields is None:
        return None
    offsets = [dt.fields[n][1] for n in dt.names or ()]
    sizes = [dt.fields[n][0].itemsize for n in dt.names or ()]
    packed = offsets == [sum(sizes[:i]) for i in range(len(sizes))] and dt.itemsize == sum(sizes)
    if not packed or any(
        dt.fields[n][0].subdtype is not None or len(dt.fields[n]) > 2 for n in dt.names or ()
    ):
        raise UnsupportedError(
            f"structured dtype {dt}: a struct has packed fields without sub-arrays or titles"
        )
    fields = [{"name": n, "data_type": from_numpy(dt.fields[n][0]).to_json()} for n in dt.names or ()]
    return "struct", MappingProxyType({"fields": fields})


def ext_has_endianness(name: str, numpy: np.dtype[Any]) -> bool:
    if name in _BYTES or name in ML_INTS or name == opt.OPTIONAL:  # (optional: its data codecs say)
        return False
    if name in _COMPLEX:
        return numpy.itemsize > 2
    return _struct_needs_endian(numpy)


def _struct_needs_endian(dt: np.dtype[Any]) -> bool:
    if dt.fields is not None:
        return any(_struct_needs_endian(dt.fields[n][0]) for n in dt.names or ())
    if dt.type.__module__.startswith("ml_dtypes"):
        return dt.itemsize > 1
    return dt.kind not in "SVb" and dt.itemsize > 1


# ------------------------------------------------------------------------------------------ fill values


def b64_fill(value: Any, size: int, exact: bool, path: str) -> bytes:
    """The bytes of a base64 fill value of a ``size``-byte type (shorter ones zero-padded unless ``exact``)."""
    if not isinstance(value, str):
        raise MetadataError(f"expected a base64 string, got {value!r}", path=path)
    try:
        raw = base64.b64decode(value, validate=True)
    except ValueError as exc:
        raise MetadataError(f"invalid base64 fill value {value!r}: {exc}", path=path) from exc
    if len(raw) > size or (exact and len(raw) != size):
        raise MetadataError(f"fill value has {len(raw)} bytes, the data type {size}", path=path)
    return raw + bytes(size - len(raw))


def ext_parse_fill(
    name: str, config: Mapping[str, Any] | None, numpy: np.dtype[Any], value: Any, path: str, parse: Parse
) -> np.ndarray[Any, Any]:
    """A fill value of an extension type as a 0-d array of ``numpy``."""
    if name == opt.OPTIONAL:
        return opt.optional_parse_fill(config, numpy, value, path, parse)
    if name in _BYTES:
        if isinstance(value, list) and all(is_int(b) and 0 <= b <= 255 for b in value):
            lenient("fill value written as a list of bytes; zarr-python writes base64", path)
            value = base64.b64encode(bytes(value)).decode()
        # "" (no bytes: all zero) is the registry's fill value of fixed-length-bytes, read as raw_bytes
        raw = b64_fill(value, numpy.itemsize, name == "raw_bytes" and value != "", path)
        return np.frombuffer(raw, dtype=numpy).reshape(()).copy()
    if name in ML_INTS:
        return parse_int(value, numpy, path, ML_INTS[name])
    if name in _COMPLEX:
        return parse_complex(value, numpy, _component(name, path), FLOAT_SPECS[_COMPLEX[name]], name, path)
    return _struct_fill(name, config, numpy, value, path, parse)


def _struct_fill(
    name: str, config: Mapping[str, Any] | None, numpy: np.dtype[Any], value: Any, path: str, parse: Parse
) -> np.ndarray[Any, Any]:
    if isinstance(value, str):  # the legacy form: base64 of the packed little-endian bytes
        lenient("struct fill value as base64; write an object with every field", path)
        raw = b64_fill(value, numpy.itemsize, True, path)
        return np.frombuffer(raw, dtype=numpy.newbyteorder("<")).reshape(()).astype(numpy)
    fields = _fields(config, parse, path)
    if not isinstance(value, Mapping) or set(value) != {n for n, _ in fields}:
        raise MetadataError(
            f"a {name} fill value is an object with the fields {[n for n, _ in fields]}", path=path
        )
    out = np.zeros((), dtype=numpy)
    for fname, ftype in fields:
        out[fname] = ftype.parse_fill(value[fname], json_path(path, fname))
    return out


def ext_fill_to_json(
    name: str, config: Mapping[str, Any] | None, fill: np.ndarray[Any, Any], parse: Parse
) -> Any:
    """Canonical fill value JSON of an extension type (what :func:`ext_parse_fill` reads back)."""
    if name == opt.OPTIONAL:
        return opt.optional_fill_to_json(config, fill, parse)
    if name in _BYTES:
        raw = fill.tobytes()
        return base64.b64encode(raw.rstrip(b"\0") if name == "null_terminated_bytes" else raw).decode("ascii")
    if name in ML_INTS:
        return int(fill.astype(np.int8)[()])
    if name in _COMPLEX:
        return complex_to_json(fill, _component(name, "$.data_type"), FLOAT_SPECS[_COMPLEX[name]])
    return {
        fname: ftype.fill_to_json(np.asarray(fill[fname])) for fname, ftype in _fields(config, parse, "$")
    }
