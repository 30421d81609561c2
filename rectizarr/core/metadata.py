"""``zarr.json`` documents: decode, validate and encode array and group metadata.

The document is split at the top level into raw JSON values (``msgspec.Raw``) so that each field is
validated on its own with a precise JSON path, and so that a rectilinear ``chunk_grid`` with a million
edges reaches :func:`rectizarr.core.grid_json.parse_chunk_grid` as bytes and is parsed vectorised.

Rules (spec-notes §1): unknown top-level keys fail unless their value is an object with
``"must_understand": false`` (those are kept verbatim and written back); non-empty storage transformers
fail unless every entry says ``"must_understand": false``; bare ``NaN``/``Infinity`` tokens (which
zarr-python writes in attributes) are read through a fallback decoder with a warning."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping
from typing import Any, Literal

import msgspec
import numpy as np

from rectizarr._util import Shape, json_path
from rectizarr.core.chunk_keys import ChunkKeyEncoding, parse_chunk_key_encoding
from rectizarr.core.codec_meta import BytesMeta, CodecMeta, ShardingMeta, codecs_to_json, parse_codecs
from rectizarr.core.dtype import DataType, parse_data_type
from rectizarr.core.grid import ChunkGrid
from rectizarr.core.grid_json import parse_chunk_grid
from rectizarr.errors import LenientMetadataWarning, MetadataError, UnsupportedError

MAX_NDIM = 32  # NPY_MAXDIMS_LEGACY_ITERS: nditer, ``.flat`` and fancy indexing refuse more operand dimensions
REQUIRED_ARRAY_KEYS = ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs")
_NODE_KEYS = ("zarr_format", "node_type", "attributes")
# others: extra_fields
ARRAY_KEYS = frozenset({*_NODE_KEYS, *REQUIRED_ARRAY_KEYS, "storage_transformers", "dimension_names"})
GROUP_KEYS = frozenset({*_NODE_KEYS, "consolidated_metadata"})


class ArrayMeta(msgspec.Struct, frozen=True, kw_only=True, tag="array", tag_field="node_type"):
    """An array ``zarr.json``, validated. Runtime objects are built from it; it never does I/O."""

    shape: Shape
    data_type: DataType
    chunk_grid: ChunkGrid
    chunk_key_encoding: ChunkKeyEncoding
    fill_value: np.ndarray
    codecs: tuple[CodecMeta, ...]
    attributes: dict[str, Any] = msgspec.field(default_factory=dict)
    dimension_names: tuple[str | None, ...] | None = None
    storage_transformers: tuple[dict[str, Any], ...] = ()
    extra_fields: dict[str, Any] = msgspec.field(default_factory=dict)
    zarr_format: Literal[2, 3] = 3
    v2: dict[str, Any] | None = None  # a Zarr v2 array: its ``.zarray`` as read (rectizarr.core.v2meta)

    @property
    def ndim(self) -> int:
        return len(self.shape)


class GroupMeta(msgspec.Struct, frozen=True, kw_only=True, tag="group", tag_field="node_type"):
    """A group ``zarr.json``. ``consolidated_metadata`` is kept as the raw JSON object (or ``None``)."""

    attributes: dict[str, Any] = msgspec.field(default_factory=dict)
    consolidated_metadata: dict[str, Any] | None = None
    extra_fields: dict[str, Any] = msgspec.field(default_factory=dict)
    zarr_format: Literal[2, 3] = 3


NodeMeta = ArrayMeta | GroupMeta


# --------------------------------------------------------------------------------------------- decode


def _split_document(data: bytes, key: str | None) -> tuple[dict[str, Any], bool]:
    """Top-level object as ``{name: Raw | value}``; the flag says values are raw bytes."""
    try:
        top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
        return top, True
    except msgspec.ValidationError as exc:
        raise MetadataError("the document is not a JSON object", path="$", key=key) from exc
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):  # re-diagnosed below
        pass
    # zarr-python writes bare NaN/Infinity tokens (invalid JSON) in attributes: read them, with a warning.
    try:
        text = data.decode("utf-8")
        obj = json.loads(text)
        json.dumps(obj, ensure_ascii=False, allow_nan=True).encode("utf-8")  # no lone surrogates ("\ud800")
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise MetadataError(f"not valid JSON ({exc})", path="$", key=key) from exc
    if not isinstance(obj, dict):
        raise MetadataError("the document is not a JSON object", path="$", key=key)
    warnings.warn(
        f"{key or 'zarr.json'}: bare NaN/Infinity tokens are not valid JSON; read leniently",
        LenientMetadataWarning,
        stacklevel=3,
    )
    return obj, False


def _value(top: dict[str, Any], raw: bool, name: str, key: str | None) -> Any:
    item = top[name]
    if not raw:
        return item
    try:
        return msgspec.json.decode(item)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError) as exc:
        raise MetadataError(f"invalid JSON value ({exc})", path=f"$.{name}", key=key) from exc


def _check_format(top: dict[str, Any], raw: bool, key: str | None) -> str:
    if "zarr_format" not in top:
        raise MetadataError("missing required key 'zarr_format'", path="$", key=key)
    fmt = _value(top, raw, "zarr_format", key)
    if type(fmt) is not int or fmt != 3:
        raise UnsupportedError(
            f"zarr_format must be the integer 3, got {fmt!r} (rectizarr reads Zarr v3 only)",
            path="$.zarr_format",
            key=key,
        )
    if "node_type" not in top:
        raise MetadataError("missing required key 'node_type'", path="$", key=key)
    node_type = _value(top, raw, "node_type", key)
    if node_type not in ("array", "group"):
        raise MetadataError(
            f"node_type must be 'array' or 'group', got {node_type!r}", path="$.node_type", key=key
        )
    return str(node_type)


# The field parsers (validate.py runs them one by one) read ``top``, a document's top-level object, whose
# values are raw JSON when ``raw``; ``key`` names the document in errors.
def extra_fields(top: dict[str, Any], raw: bool, known: frozenset[str], key: str | None) -> dict[str, Any]:
    """The fields not in ``known``, kept when each is an object with ``"must_understand": false``."""
    extras: dict[str, Any] = {}
    for name in top:
        if name in known:
            continue
        value = _value(top, raw, name, key)
        if isinstance(value, dict) and value.get("must_understand") is False:
            extras[name] = value
            continue
        raise UnsupportedError(
            f"unknown metadata field {name!r}: an extension this reader does not understand "
            '(only objects with "must_understand": false may be ignored)',
            path=f"$.{name}",
            key=key,
        )
    return extras


def parse_attributes(top: dict[str, Any], raw: bool, key: str | None) -> dict[str, Any]:
    """``attributes`` (``{}`` when absent, or null with a warning)."""
    if "attributes" not in top:
        return {}
    attrs = _value(top, raw, "attributes", key)
    if attrs is None:
        warnings.warn(f"{key}: 'attributes': null read as {{}}", LenientMetadataWarning, stacklevel=4)
        return {}
    if not isinstance(attrs, dict):
        raise MetadataError(
            f"attributes must be a JSON object, got {type(attrs).__name__}", path="$.attributes", key=key
        )
    return attrs


def parse_shape(value: Any, key: str | None) -> Shape:
    """A decoded ``shape`` value: at most ``MAX_NDIM`` non-negative integers below ``2**63``."""
    if not isinstance(value, list):
        raise MetadataError("shape must be a list of non-negative integers", path="$.shape", key=key)
    if len(value) > MAX_NDIM:
        raise UnsupportedError(
            f"arrays of {len(value)} dimensions; at most {MAX_NDIM} are supported (numpy's iterators "
            f"handle no more)",
            path="$.shape",
            key=key,
        )
    for i, s in enumerate(value):
        if type(s) is not int or s < 0:
            raise MetadataError(
                f"shape entries must be non-negative integers, got {s!r}",
                path=json_path("$.shape", i),
                key=key,
            )
        if s >= 2**63:
            raise MetadataError(f"extent {s} does not fit in int64", path=json_path("$.shape", i), key=key)
    return tuple(value)


def parse_dimension_names(
    top: dict[str, Any], raw: bool, ndim: int, key: str | None
) -> tuple[str | None, ...] | None:
    """``dimension_names``: ``ndim`` strings or nulls, or None when absent (or null, with a warning)."""
    if "dimension_names" not in top:
        return None
    names = _value(top, raw, "dimension_names", key)
    if names is None:
        warnings.warn(
            f"{key}: 'dimension_names': null should be omitted; read as absent",
            LenientMetadataWarning,
            stacklevel=4,
        )
        return None
    if not isinstance(names, list) or not all(n is None or isinstance(n, str) for n in names):
        raise MetadataError(
            "dimension_names must be a list of strings or nulls", path="$.dimension_names", key=key
        )
    if len(names) != ndim:
        raise MetadataError(
            f"dimension_names has {len(names)} entries but the array has {ndim} dimensions",
            path="$.dimension_names",
            key=key,
        )
    return tuple(names)


def parse_storage_transformers(top: dict[str, Any], raw: bool, key: str | None) -> tuple[dict[str, Any], ...]:
    """``storage_transformers``: only entries with ``"must_understand": false`` (kept verbatim)."""
    if "storage_transformers" not in top:
        return ()
    value = _value(top, raw, "storage_transformers", key)
    if not isinstance(value, list):
        raise MetadataError("storage_transformers must be a list", path="$.storage_transformers", key=key)
    kept = []
    for i, item in enumerate(value):
        if isinstance(item, dict) and item.get("must_understand") is False:
            kept.append(item)
            continue
        name = item.get("name") if isinstance(item, dict) else item
        raise UnsupportedError(
            f"storage transformer {name!r} is not supported",
            path=json_path("$.storage_transformers", i),
            key=key,
        )
    return tuple(kept)


def _decode_array(top: dict[str, Any], raw: bool, key: str | None) -> ArrayMeta:
    for name in REQUIRED_ARRAY_KEYS:
        if name not in top:
            raise MetadataError(f"missing required key {name!r}", path="$", key=key)
    extras = extra_fields(top, raw, ARRAY_KEYS, key)
    shape = parse_shape(_value(top, raw, "shape", key), key)
    try:
        dtype = parse_data_type(_value(top, raw, "data_type", key), "$.data_type")
        grid_value = top["chunk_grid"] if not raw else bytes(top["chunk_grid"])
        grid = parse_chunk_grid(grid_value, shape, "$.chunk_grid")
        cke = parse_chunk_key_encoding(_value(top, raw, "chunk_key_encoding", key), "$.chunk_key_encoding")
        fill = dtype.parse_fill(_value(top, raw, "fill_value", key), "$.fill_value")
        codecs = parse_codecs(_value(top, raw, "codecs", key), "$.codecs")
    except MetadataError as exc:
        if exc.key is None and key is not None:
            raise exc.with_key(key) from exc
        raise
    return ArrayMeta(
        shape=shape,
        data_type=dtype,
        chunk_grid=grid,
        chunk_key_encoding=cke,
        fill_value=fill,
        codecs=codecs,
        attributes=parse_attributes(top, raw, key),
        dimension_names=parse_dimension_names(top, raw, len(shape), key),
        storage_transformers=parse_storage_transformers(top, raw, key),
        extra_fields=extras,
    )


def _decode_group(top: dict[str, Any], raw: bool, key: str | None) -> GroupMeta:
    extras = extra_fields(top, raw, GROUP_KEYS, key)
    consolidated = _value(top, raw, "consolidated_metadata", key) if "consolidated_metadata" in top else None
    if consolidated is not None and not isinstance(consolidated, dict):
        raise MetadataError(
            "consolidated_metadata must be an object", path="$.consolidated_metadata", key=key
        )
    return GroupMeta(
        attributes=parse_attributes(top, raw, key),
        consolidated_metadata=consolidated or None,
        extra_fields=extras,
    )


def decode_node(data: bytes | memoryview, key: str | None = None) -> NodeMeta:
    """Decode and validate a ``zarr.json`` document (``key`` names it in error messages)."""
    return _decode_node(*_split_document(bytes(data), key), key)


def node_from_json(obj: Mapping[str, Any], key: str | None = None) -> NodeMeta:
    """Validate an already-decoded document (e.g. an entry of consolidated metadata)."""
    if not isinstance(obj, Mapping):
        raise MetadataError("a node document must be a JSON object", path="$", key=key)
    return _decode_node(dict(obj), False, key)


def _decode_node(top: dict[str, Any], raw: bool, key: str | None) -> NodeMeta:
    decode = _decode_array if _check_format(top, raw, key) == "array" else _decode_group
    return decode(top, raw, key)


# --------------------------------------------------------------------------------------------- encode


def node_to_json(meta: NodeMeta) -> dict[str, Any]:
    """The canonical JSON object of a node (spec-notes §1.7 writer rules)."""
    if isinstance(meta, GroupMeta):
        doc: dict[str, Any] = {"zarr_format": 3, "node_type": "group", "attributes": meta.attributes}
        if meta.consolidated_metadata is not None:
            doc["consolidated_metadata"] = meta.consolidated_metadata
        doc.update(meta.extra_fields)
        return doc
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(meta.shape),
        "data_type": meta.data_type.to_json(),
        "chunk_grid": meta.chunk_grid.to_json(),
        "chunk_key_encoding": meta.chunk_key_encoding.to_json(),
        "fill_value": meta.data_type.fill_to_json(meta.fill_value),
        "codecs": codecs_to_json(canonical_codecs(meta.codecs, meta.data_type)),
        "attributes": meta.attributes,
    }
    if meta.dimension_names is not None:
        doc["dimension_names"] = list(meta.dimension_names)
    if meta.storage_transformers:
        doc["storage_transformers"] = list(meta.storage_transformers)
    doc.update(meta.extra_fields)
    return doc


def canonical_codecs(metas: tuple[CodecMeta, ...], dtype: DataType) -> tuple[CodecMeta, ...]:
    """Writer form of a chain: ``bytes`` carries no ``endian`` for types without endianness (also inside
    shards, whose inner chunks have the array's data type)."""
    out: list[CodecMeta] = []
    for m in metas:
        if isinstance(m, BytesMeta) and m.endian is not None and not dtype.has_endianness:
            m = BytesMeta(endian=None)
        elif isinstance(m, ShardingMeta):
            m = msgspec.structs.replace(m, codecs=canonical_codecs(m.codecs, dtype))
        out.append(m)
    return tuple(out)


def _has_nonfinite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_nonfinite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_nonfinite(v) for v in value)
    return False


def encode_json(doc: Mapping[str, Any]) -> bytes:
    """Encode a metadata object; never turns NaN into ``null``.

    Attribute values that are non-finite floats have no JSON form; like zarr-python we write them as bare
    ``NaN``/``Infinity`` tokens (which rectizarr and zarr-python read back) and warn."""
    if _has_nonfinite(doc.get("attributes")) or _has_nonfinite(doc.get("consolidated_metadata")):
        warnings.warn(
            "attributes hold non-finite floats; written as bare NaN/Infinity tokens (not strict JSON)",
            LenientMetadataWarning,
            stacklevel=3,
        )
        return json.dumps(doc, indent=2, allow_nan=True).encode()
    try:
        data = msgspec.json.encode(doc)
    except (TypeError, msgspec.EncodeError) as exc:
        raise MetadataError(f"metadata is not JSON-serialisable: {exc}") from exc
    # Pretty-print small documents like other implementations; keep huge ones (1e6 edges) compact.
    return msgspec.json.format(data, indent=2) if len(data) < 1 << 16 else data


def encode_node(meta: NodeMeta) -> bytes:
    """The bytes of a node's ``zarr.json``."""
    return encode_json(node_to_json(meta))


def check_attributes(attrs: Any, *, path: str = "$.attributes") -> dict[str, Any]:
    """Validate user-supplied attributes: a mapping with string keys whose values are JSON values (``None``,
    ``bool``, ``int``, ``float``, ``str``, lists or tuples and string-keyed mappings of them; subclasses such
    as ``np.float64`` become the plain type). Anything else (``bytes``, dates, sets, ``np.float32``) is
    refused, as zarr-python refuses it, rather than written as some other value (msgspec would write bytes
    as base64 text, a date as an ISO string)."""
    if not isinstance(attrs, Mapping):
        raise MetadataError(f"attributes must be a mapping, got {type(attrs).__name__}", path=path)
    out: dict[str, Any] = _json_value(attrs, path)
    return out


def _json_value(value: Any, path: str) -> Any:
    """``value`` as a JSON value (plain types), or MetadataError naming ``path``."""
    if value is None or value.__class__ in (str, int, float, bool):
        return value
    for plain in (bool, int, float, str):  # subclasses: np.float64, np.str_, an IntEnum
        if isinstance(value, plain):
            return plain(value)
    if isinstance(value, list | tuple):
        items = [_json_value(item, f"{path}[{i}]") for i, item in enumerate(value)]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, Mapping):
        for k in value:
            if not isinstance(k, str):
                raise MetadataError(f"keys of a JSON object must be strings, got {k!r}", path=path)
        return {k: _json_value(item, f"{path}.{k}") for k, item in value.items()}
    hint = " (convert it with .item() or .tolist())" if isinstance(value, np.generic | np.ndarray) else ""
    raise MetadataError(f"{type(value).__name__} {value!r:.60} is not a JSON value{hint}", path=path)
