"""Zarr v2 metadata (``.zarray``, ``.zgroup``, ``.zattrs``, ``.zmetadata``) <-> the v3 metadata model.

A v2 array becomes an :class:`~rectizarr.core.metadata.ArrayMeta` with ``zarr_format=2``: a regular grid,
the ``v2`` chunk key encoding with the array's ``dimension_separator``, and a codec chain that codes the
same bytes as v2 does. Without filters: ``transpose`` (for ``order: "F"``) + ``bytes`` (the byte order of
the v2 dtype) + the compressor (native blosc/zstd/gzip where the stream format is the same, else numcodecs).
With filters, object or structured dtypes: one :class:`V2ChunkMeta` array->bytes step that runs the v2
filters exactly as zarr-python 2 does, then the compressor. The ``.zarray`` document as read is kept in
``ArrayMeta.v2`` and written back with the current shape (so fields we do not model survive).

``_ARRAY_DIMENSIONS`` (xarray's convention) becomes ``dimension_names`` and leaves the attributes; it is
put back when the attributes are written.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Mapping
from typing import Any, Literal

import msgspec
import numpy as np

from rectizarr._util import is_int, json_path
from rectizarr.core.chunk_keys import ChunkKeyEncoding
from rectizarr.core.codec_meta import (
    BloscMeta,
    BytesMeta,
    CodecMeta,
    GzipMeta,
    NumcodecsMeta,
    TransposeMeta,
    V2ChunkMeta,
    ZstdMeta,
)
from rectizarr.core.dtype import DataType, data_type_from_numpy, parse_data_type
from rectizarr.core.dtype_ext import ML_INTS
from rectizarr.core.fill import FLOAT_SPECS, ML_FLOATS, json_int, parse_bool, parse_float
from rectizarr.core.grid import ChunkGrid
from rectizarr.core.metadata import ArrayMeta, GroupMeta, NodeMeta, parse_shape
from rectizarr.errors import MetadataError, UnsupportedError

__all__ = [
    "V2_ARRAY",
    "V2_ATTRS",
    "V2_CONSOLIDATED",
    "V2_GROUP",
    "V2_KEYS",
    "consolidated_entries",
    "decode_v2_array",
    "decode_v2_group",
    "parse_v2_dtype",
    "v2_combined",
    "v2_docs",
    "v2_dtype_to_json",
    "v2_node_from_json",
]

V2_ARRAY, V2_GROUP, V2_ATTRS, V2_CONSOLIDATED = ".zarray", ".zgroup", ".zattrs", ".zmetadata"
V2_KEYS = (V2_ARRAY, V2_GROUP, V2_ATTRS)
DIMS_ATTR = "_ARRAY_DIMENSIONS"
_KINDS = "biufcMmSUVO"
_ML_NAMES = frozenset(ML_FLOATS | set(ML_INTS))
_BLOSC_SHUFFLE = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}
_BLOSC_CNAMES = frozenset({"lz4", "lz4hc", "blosclz", "zstd", "snappy", "zlib"})


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
        return dt
    if not isinstance(value, list) or not value:
        raise MetadataError(f"dtype must be a string or a list of fields, got {value!r}", path=path)
    fields: list[Any] = []
    for i, field in enumerate(value):
        where = json_path(path, i)
        if not (isinstance(field, list) and len(field) in (2, 3) and isinstance(field[0], str)):
            raise MetadataError("a structured field is [name, dtype] or [name, dtype, shape]", path=where)
        sub = parse_v2_dtype(field[1], json_path(where, 1))
        if sub.kind == "O":
            raise UnsupportedError("object fields in structured dtypes", path=where)
        if len(field) == 3:
            shape = field[2]
            if not (isinstance(shape, list) and all(is_int(s) and s >= 0 for s in shape)):
                raise MetadataError("a field shape is a list of non-negative integers", path=json_path(where, 2))
            fields.append((field[0], sub, tuple(shape)))
        else:
            fields.append((field[0], sub))
    try:
        return np.dtype(fields)
    except (TypeError, ValueError) as exc:
        raise MetadataError(f"invalid structured dtype: {exc}", path=path) from exc


def v2_dtype_to_json(dt: np.dtype[Any]) -> Any:
    """The v2 ``dtype`` JSON of a numpy dtype (typestr, or nested field lists for structured types)."""
    if _is_ml(dt):
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


def _native(dt: np.dtype[Any]) -> np.dtype[Any]:
    """``dt`` in native byte order (fields too)."""
    if dt.fields is None and dt.subdtype is None:
        return dt.newbyteorder("=") if dt.byteorder in "<>" else dt
    if dt.subdtype is not None:
        return np.dtype((_native(dt.subdtype[0]), dt.subdtype[1]))
    fields: Any = dt.fields or {}
    spec: Any = {"names": list(fields), "formats": [_native(fields[n][0]) for n in fields],
                 "offsets": [fields[n][1] for n in fields], "itemsize": dt.itemsize}
    out: np.dtype[Any] = np.dtype(spec)
    return out


def _data_type(declared: np.dtype[Any], filters: list[dict[str, Any]]) -> DataType:
    if declared.kind == "O":
        ids = {f.get("id") for f in filters}
        if "vlen-utf8" in ids:
            return data_type_from_numpy("string")
        if "vlen-bytes" in ids:
            return data_type_from_numpy("bytes")
        return DataType("object", None, np.dtype(object))
    native = _native(declared)
    try:
        return data_type_from_numpy(native)
    except UnsupportedError:
        return DataType(f"v2:{declared.str}", None, native)


# ----------------------------------------------------------------------------------------- fill values


def _b64(value: Any, size: int, path: str) -> bytes:
    if value == 0 and not isinstance(value, bool):
        return bytes(size)
    if not isinstance(value, str):
        raise MetadataError(f"expected a base64 string, got {value!r}", path=path)
    try:
        raw = base64.b64decode(value, validate=True)
    except ValueError as exc:
        raise MetadataError(f"invalid base64 fill value {value!r}: {exc}", path=path) from exc
    if len(raw) > size:
        raise MetadataError(f"fill value has {len(raw)} bytes, the dtype {size}", path=path)
    return raw + bytes(size - len(raw))


def parse_v2_fill(value: Any, declared: np.dtype[Any], dtype: DataType, path: str = "$.fill_value") -> np.ndarray:
    """A v2 ``fill_value`` as a 0-d array of ``dtype.numpy`` (null: the type's default fill)."""
    if value is None:
        return dtype.default_fill()
    if _is_ml(declared):
        return dtype.parse_fill(value, path)
    kind = declared.kind
    if kind == "O":
        out = np.empty((), dtype=object)
        wanted = {"string": str, "bytes": bytes}.get(dtype.name)
        out[()] = value if wanted is None or isinstance(value, wanted) else dtype.default_fill()[()]
        return out
    if kind == "b":
        return parse_bool(value, path)
    if kind in "iu":
        n = json_int(value, path)
        info = np.iinfo(declared)
        if not int(info.min) <= n <= int(info.max):
            raise MetadataError(f"{n} is out of range for {declared}", path=path)
        return np.array(n, dtype=dtype.numpy)
    if kind == "f":
        return _parse_v2_float(value, dtype.numpy, path)
    if kind == "c":
        if not (isinstance(value, list) and len(value) == 2):
            raise MetadataError(f"a complex fill value is [real, imag], got {value!r}", path=path)
        part = np.dtype(f"f{dtype.numpy.itemsize // 2}")
        re_, im = (_parse_v2_float(v, part, json_path(path, i)) for i, v in enumerate(value))
        return np.frombuffer(re_.tobytes() + im.tobytes(), dtype=dtype.numpy).reshape(()).copy()
    if kind in "Mm":
        n = -(2**63) if value == "NaT" else json_int(value, path)
        return np.array(n, dtype=np.int64).view(dtype.numpy)
    if kind == "U":
        if not isinstance(value, str) or len(value) > declared.itemsize // 4:
            raise MetadataError(f"expected a string of at most {declared.itemsize // 4} characters", path=path)
        return np.array(value, dtype=dtype.numpy)
    raw = _b64(value, declared.itemsize, path)  # S, V and structured: base64 of the bytes
    return np.frombuffer(raw, dtype=declared).reshape(()).astype(dtype.numpy)


def _parse_v2_float(value: Any, dt: np.dtype[Any], path: str) -> np.ndarray:
    spec = FLOAT_SPECS.get(f"float{dt.itemsize * 8}")
    if spec is None:
        raise UnsupportedError(f"float type {dt}", path=path)
    return parse_float(value, dt, spec, path)


def v2_fill_to_json(fill: np.ndarray, declared: np.dtype[Any]) -> Any:
    """The v2 ``fill_value`` JSON of a 0-d fill (as zarr-python 2 writes it)."""
    if _is_ml(declared):
        return data_type_from_numpy(declared).fill_to_json(fill)
    kind, value = declared.kind, np.asarray(fill)[()]
    if kind == "O":
        return value if isinstance(value, str | int | float | bool) or value is None else None
    if kind == "b":
        return bool(value)
    if kind in "iu":
        return int(value)
    if kind == "f":
        return _float_json(np.asarray(fill))
    if kind == "c":
        arr = np.asarray(fill)
        return [_float_json(np.asarray(arr.real)), _float_json(np.asarray(arr.imag))]
    if kind in "Mm":
        return int(np.asarray(fill).view(np.int64)[()])
    if kind == "U":
        return str(value)
    return base64.b64encode(np.asarray(fill).astype(declared).tobytes()).decode("ascii")


def _float_json(arr: np.ndarray) -> Any:
    x = float(arr[()])
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    return x


# --------------------------------------------------------------------------------------------- codecs


def _compressor(value: Any, declared: np.dtype[Any], path: str) -> list[CodecMeta]:
    """The compressor as v3 codec metadata: native where the stream format is the same, else numcodecs."""
    if value is None:
        return []
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        raise MetadataError("compressor must be null or an object with an 'id'", path=path)
    config = {k: v for k, v in value.items() if k != "id"}
    cid = value["id"]
    try:
        if cid == "blosc" and config.get("cname") in _BLOSC_CNAMES:
            shuffle = config.get("shuffle", 1)
            if shuffle == -1:  # AUTOSHUFFLE
                shuffle = 2 if declared.itemsize == 1 else 1
            return [BloscMeta(cname=config["cname"], shuffle=_BLOSC_SHUFFLE[shuffle],  # type: ignore[arg-type]
                              clevel=int(config.get("clevel", 5)), typesize=max(1, declared.itemsize),
                              blocksize=int(config.get("blocksize", 0)))]
        if cid == "zstd" and set(config) <= {"level", "checksum"}:
            return [ZstdMeta(level=int(config.get("level", 1)), checksum=bool(config.get("checksum", False)))]
        if cid == "gzip" and set(config) <= {"level"}:
            return [GzipMeta(level=int(config.get("level", 1)))]
    except (KeyError, TypeError, ValueError, msgspec.ValidationError) as exc:
        raise MetadataError(f"invalid {cid} configuration: {exc}", path=path) from exc
    return [NumcodecsMeta(name=f"numcodecs.{cid}", configuration=config)]


def _filters(value: Any, path: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise MetadataError("filters must be null or a list", path=path)
    for i, f in enumerate(value):
        if not isinstance(f, dict) or not isinstance(f.get("id"), str):
            raise MetadataError("a filter is an object with an 'id'", path=json_path(path, i))
    return list(value)


def _is_ml(dt: np.dtype[Any]) -> bool:
    return dt.type.__module__.startswith("ml_dtypes")


def _endian(dt: np.dtype[Any]) -> Literal["little", "big"] | None:
    if _is_ml(dt):
        return "little" if dt.itemsize > 1 else None
    if dt.byteorder == "|" or dt.itemsize <= 1 or dt.kind in "SV":
        return None
    if dt.byteorder == "=":
        return "little" if sys.byteorder == "little" else "big"
    return "little" if dt.byteorder == "<" else "big"


def v2_codecs(declared: np.dtype[Any], order: str, filters: list[dict[str, Any]], compressor: Any,
              ndim: int) -> tuple[CodecMeta, ...]:
    """The codec chain that codes a v2 array's chunks."""
    chain: list[CodecMeta] = []
    if filters or declared.kind == "O" or declared.fields is not None:
        chain.append(V2ChunkMeta(dtype=v2_dtype_to_json(declared), order=order,  # type: ignore[arg-type]
                                 filters=tuple(filters)))
    else:
        if order == "F" and ndim > 1:
            chain.append(TransposeMeta(order=tuple(range(ndim - 1, -1, -1))))
        chain.append(BytesMeta(endian=_endian(declared)))
    return (*chain, *_compressor(compressor, declared, "$.compressor"))


# ---------------------------------------------------------------------------------------------- nodes


def _attrs(value: Any, key: str | None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MetadataError(".zattrs must be a JSON object", path="$", key=key)
    return value


def _dims(attrs: dict[str, Any], ndim: int) -> tuple[tuple[str | None, ...] | None, dict[str, Any]]:
    names = attrs.get(DIMS_ATTR)
    if isinstance(names, list) and len(names) == ndim and all(isinstance(n, str) for n in names):
        return tuple(names), {k: v for k, v in attrs.items() if k != DIMS_ATTR}
    return None, attrs


def decode_v2_array(zarray: Any, attrs: Any, key: str | None = None) -> ArrayMeta:
    """An :class:`ArrayMeta` (``zarr_format=2``) from a decoded ``.zarray`` and ``.zattrs`` (or None)."""
    try:
        return _decode_v2_array(zarray, _attrs(attrs, key))
    except MetadataError as exc:
        if exc.key is None and key is not None:
            raise exc.with_key(key) from exc
        raise


def _decode_v2_array(doc: Any, attrs: dict[str, Any]) -> ArrayMeta:
    if not isinstance(doc, dict):
        raise MetadataError(".zarray must be a JSON object", path="$")
    if doc.get("zarr_format") != 2:
        raise MetadataError(f"zarr_format must be 2 in .zarray, got {doc.get('zarr_format')!r}", path="$.zarr_format")
    for name in ("shape", "chunks", "dtype", "order", "compressor"):
        if name not in doc:
            raise MetadataError(f"missing required key {name!r}", path="$")
    shape = parse_shape(doc["shape"], None)
    chunks = doc["chunks"]
    if not (isinstance(chunks, list) and len(chunks) == len(shape) and all(is_int(c) and c > 0 for c in chunks)):
        raise MetadataError(f"chunks must be {len(shape)} positive integers, got {chunks!r}", path="$.chunks")
    order = doc["order"]
    if order not in ("C", "F"):
        raise MetadataError(f"order must be 'C' or 'F', got {order!r}", path="$.order")
    sep = doc.get("dimension_separator", ".")
    if sep not in (".", "/"):
        raise MetadataError(f"dimension_separator must be '.' or '/', got {sep!r}", path="$.dimension_separator")
    declared = parse_v2_dtype(doc["dtype"])
    filters = _filters(doc.get("filters"), "$.filters")
    if declared.kind == "O" and not filters:
        raise MetadataError("an object ('|O') array needs an object codec in 'filters'", path="$.filters")
    dtype = _data_type(declared, filters)
    names, attributes = _dims(attrs, len(shape))
    return ArrayMeta(
        shape=shape, data_type=dtype, chunk_grid=ChunkGrid.regular(shape, chunks),
        chunk_key_encoding=ChunkKeyEncoding("v2", sep),
        fill_value=parse_v2_fill(doc.get("fill_value"), declared, dtype),
        codecs=v2_codecs(declared, order, filters, doc["compressor"], len(shape)),
        attributes=attributes, dimension_names=names, zarr_format=2, v2=dict(doc),
    )


def decode_v2_group(zgroup: Any, attrs: Any, consolidated: Any = None, key: str | None = None) -> GroupMeta:
    """A :class:`GroupMeta` (``zarr_format=2``); ``consolidated`` is a decoded ``.zmetadata`` or None."""
    if not isinstance(zgroup, dict) or zgroup.get("zarr_format") != 2:
        raise MetadataError(".zgroup must be {\"zarr_format\": 2}", path="$.zarr_format", key=key)
    inline = None
    if consolidated is not None:
        inline = {"kind": "inline", "must_understand": False, "metadata": consolidated_entries(consolidated, key)}
    return GroupMeta(attributes=_attrs(attrs, key), consolidated_metadata=inline, zarr_format=2)


def consolidated_entries(zmetadata: Any, key: str | None = None) -> dict[str, Any]:
    """The entries of a ``.zmetadata`` as ``{relative path: combined v2 document}`` (see :func:`v2_combined`)."""
    if not isinstance(zmetadata, dict) or not isinstance(zmetadata.get("metadata"), dict):
        raise MetadataError(".zmetadata must be {\"metadata\": {...}}", path="$.metadata", key=key)
    docs: dict[str, dict[str, Any]] = {}
    for name, value in zmetadata["metadata"].items():
        if not isinstance(name, str):
            continue
        rel, _, leaf = name.rpartition("/")
        if leaf in V2_KEYS and rel:
            docs.setdefault(rel, {})[leaf] = value
    out: dict[str, Any] = {}
    for rel, parts in docs.items():
        attrs = parts.get(V2_ATTRS) if isinstance(parts.get(V2_ATTRS), dict) else {}
        if V2_ARRAY in parts and isinstance(parts[V2_ARRAY], dict):
            out[rel] = {**parts[V2_ARRAY], "node_type": "array", "attributes": attrs}
        elif V2_GROUP in parts:
            out[rel] = {"zarr_format": 2, "node_type": "group", "attributes": attrs}
    return out


def v2_node_from_json(obj: Mapping[str, Any], key: str | None = None) -> NodeMeta:
    """A node from its combined v2 document (``.zarray``/``.zgroup`` fields + ``node_type`` + ``attributes``)."""
    doc = dict(obj)
    kind = doc.pop("node_type", None)
    attrs = doc.pop("attributes", {})
    if kind == "array":
        return decode_v2_array(doc, attrs, key)
    if kind == "group":
        return decode_v2_group(doc, attrs, None, key)
    raise MetadataError(f"node_type must be 'array' or 'group', got {kind!r}", path="$.node_type", key=key)


def _attrs_out(meta: NodeMeta) -> dict[str, Any]:
    attrs = dict(meta.attributes)
    if isinstance(meta, ArrayMeta) and meta.dimension_names is not None:
        attrs[DIMS_ATTR] = list(meta.dimension_names)
    return attrs


def _zarray(meta: ArrayMeta) -> dict[str, Any]:
    chunks = meta.chunk_grid.regular_chunk_shape
    if meta.v2 is None or chunks is None:
        raise UnsupportedError("this array has no Zarr v2 form (v2 has regular grids only)")
    return {**meta.v2, "shape": list(meta.shape), "chunks": list(chunks)}


def v2_docs(meta: NodeMeta) -> dict[str, dict[str, Any]]:
    """The documents of a v2 node: ``{".zarray" | ".zgroup": ..., ".zattrs": ...}``."""
    if isinstance(meta, ArrayMeta):
        return {V2_ARRAY: _zarray(meta), V2_ATTRS: _attrs_out(meta)}
    return {V2_GROUP: {"zarr_format": 2}, V2_ATTRS: _attrs_out(meta)}


def v2_combined(meta: NodeMeta) -> dict[str, Any]:
    """One JSON object for a v2 node (as consolidated entries hold it in memory)."""
    if isinstance(meta, ArrayMeta):
        return {**_zarray(meta), "node_type": "array", "attributes": _attrs_out(meta)}
    return {"zarr_format": 2, "node_type": "group", "attributes": _attrs_out(meta)}
