"""Zarr v2 metadata (``.zarray``, ``.zgroup``, ``.zattrs``, ``.zmetadata``) <-> the v3 metadata model.

A v2 array becomes an :class:`~rectizarr.core.metadata.ArrayMeta` with ``zarr_format=2``: a regular grid,
the ``v2`` chunk key encoding with the array's ``dimension_separator``, and a codec chain that codes the
same bytes as v2 does. Without filters: ``transpose`` (for ``order: "F"``) + ``bytes`` (the byte order of
the v2 dtype) + the compressor (native blosc/zstd/gzip where the stream format is the same, else numcodecs).
With filters, object or structured dtypes: one :class:`V2ChunkMeta` array->bytes step that runs the v2
filters exactly as zarr-python 2 does, then the compressor. The ``.zarray`` document as read is kept in
``ArrayMeta.v2`` and written back with the current shape (so fields we do not model survive).

``_ARRAY_DIMENSIONS`` (xarray's convention) becomes ``dimension_names`` and leaves the attributes; it is
put back when the attributes are written."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Literal

import msgspec
import numpy as np

from rectizarr._util import is_int, json_path
from rectizarr.core.chunk_keys import ChunkKeyEncoding
from rectizarr.core.codec_meta import (
    NUMCODECS_KINDS,
    BloscMeta,
    BytesMeta,
    CodecMeta,
    GzipMeta,
    NumcodecsMeta,
    TransposeMeta,
    V2ChunkMeta,
    ZstdMeta,
)
from rectizarr.core.grid import ChunkGrid
from rectizarr.core.metadata import ArrayMeta, GroupMeta, NodeMeta, parse_shape
from rectizarr.core.v2dtype import data_type_of, is_ml_dtype, parse_v2_dtype, parse_v2_fill, v2_dtype_to_json
from rectizarr.core.v2keys import DIMS_ATTR, V2_ARRAY, V2_ATTRS, V2_CONSOLIDATED, V2_GROUP, V2_KEYS
from rectizarr.errors import MetadataError, UnsupportedError

_BLOSC_SHUFFLE = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}
_BLOSC_CNAMES = frozenset({"lz4", "lz4hc", "blosclz", "zstd", "snappy", "zlib"})


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
            blosc = {
                "cname": config["cname"],
                "shuffle": _BLOSC_SHUFFLE[shuffle],
                "clevel": int(config.get("clevel", 5)),
                "typesize": max(1, declared.itemsize),
                "blocksize": int(config.get("blocksize", 0)),
            }
            return [msgspec.convert(blosc, BloscMeta)]  # (converted: the bounds of each field checked)
        if cid == "zstd" and set(config) <= {"level", "checksum"}:
            return [ZstdMeta(level=int(config.get("level", 1)), checksum=bool(config.get("checksum", False)))]
        if cid == "gzip" and set(config) <= {"level"}:
            return [GzipMeta(level=int(config.get("level", 1)))]
    except (KeyError, TypeError, ValueError, OverflowError, msgspec.ValidationError) as exc:
        raise MetadataError(f"invalid {cid} configuration: {exc}", path=path) from exc
    if cid not in NUMCODECS_KINDS:
        raise UnsupportedError(
            f"unknown compressor {cid!r}: rectizarr cannot decode it", path=json_path(path, "id")
        )
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


def _endian(dt: np.dtype[Any]) -> Literal["little", "big"] | None:
    if is_ml_dtype(dt):
        return "little" if dt.itemsize > 1 else None
    if dt.byteorder == "|" or dt.itemsize <= 1 or dt.kind in "SV":
        return None
    if dt.byteorder == "=":
        return "little" if sys.byteorder == "little" else "big"
    return "little" if dt.byteorder == "<" else "big"


def v2_codecs(
    declared: np.dtype[Any], order: str, filters: list[dict[str, Any]], compressor: Any, ndim: int
) -> tuple[CodecMeta, ...]:
    """The codec chain that codes a v2 array's chunks."""
    chain: list[CodecMeta] = []
    if filters or declared.kind == "O" or declared.fields is not None:
        chain.append(V2ChunkMeta(v2_dtype_to_json(declared), order, tuple(filters)))  # type: ignore[arg-type]
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
        raise MetadataError(
            f"zarr_format must be 2 in .zarray, got {doc.get('zarr_format')!r}", path="$.zarr_format"
        )
    for name in ("shape", "chunks", "dtype", "order", "compressor"):
        if name not in doc:
            raise MetadataError(f"missing required key {name!r}", path="$")
    shape = parse_shape(doc["shape"], None)
    chunks = doc["chunks"]
    if not (
        isinstance(chunks, list) and len(chunks) == len(shape) and all(is_int(c) and c > 0 for c in chunks)
    ):
        raise MetadataError(f"chunks must be {len(shape)} positive integers, got {chunks!r}", path="$.chunks")
    order = doc["order"]
    if order not in ("C", "F"):
        raise MetadataError(f"order must be 'C' or 'F', got {order!r}", path="$.order")
    sep = doc.get("dimension_separator", ".")
    if sep not in (".", "/"):
        raise MetadataError(
            f"dimension_separator must be '.' or '/', got {sep!r}", path="$.dimension_separator"
        )
    declared = parse_v2_dtype(doc["dtype"])
    filters = _filters(doc.get("filters"), "$.filters")
    if declared.kind == "O" and not filters:
        raise MetadataError("an object ('|O') array needs an object codec in 'filters'", path="$.filters")
    dtype = data_type_of(declared, filters)
    names, attributes = _dims(attrs, len(shape))
    return ArrayMeta(
        shape=shape,
        data_type=dtype,
        chunk_grid=ChunkGrid.regular(shape, chunks),
        chunk_key_encoding=ChunkKeyEncoding("v2", sep),
        fill_value=parse_v2_fill(doc.get("fill_value"), declared, dtype),
        codecs=v2_codecs(declared, order, filters, doc["compressor"], len(shape)),
        attributes=attributes,
        dimension_names=names,
        zarr_format=2,
        v2=dict(doc),
    )


def decode_v2_group(zgroup: Any, attrs: Any, consolidated: Any = None, key: str | None = None) -> GroupMeta:
    """A :class:`GroupMeta` (``zarr_format=2``); ``consolidated`` is a decoded ``.zmetadata`` or None."""
    if not isinstance(zgroup, dict) or zgroup.get("zarr_format") != 2:
        raise MetadataError('.zgroup must be {"zarr_format": 2}', path="$.zarr_format", key=key)
    inline = None
    if consolidated is not None:
        where = key[: -len(V2_GROUP)] + V2_CONSOLIDATED if key and key.endswith(V2_GROUP) else key
        inline = {
            "kind": "inline",
            "must_understand": False,
            "metadata": consolidated_entries(consolidated, where),
        }
    return GroupMeta(attributes=_attrs(attrs, key), consolidated_metadata=inline, zarr_format=2)


def consolidated_entries(zmetadata: Any, key: str | None = None) -> dict[str, Any]:
    """The entries of a ``.zmetadata`` as ``{relative path: combined v2 document}`` (see :func:`v2_combined`)."""
    if not isinstance(zmetadata, dict) or not isinstance(zmetadata.get("metadata"), dict):
        raise MetadataError('.zmetadata must be {"metadata": {...}}', path="$.metadata", key=key)
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


def load_json(data: bytes | None, key: str) -> Any:
    """A v2 document's JSON (None when absent); zarr-python 2 writes bare ``NaN`` in attributes."""
    if data is None:
        return None
    import json

    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise MetadataError(f"not valid JSON ({exc})", path="$", key=key) from exc


def with_entries(zmetadata: dict[str, Any], rel: str, meta: NodeMeta | None) -> dict[str, Any]:
    """``zmetadata`` (a ``.zmetadata`` document) with the node at ``rel`` (relative to its group) rewritten as
    ``meta``, or dropped with everything below it when ``meta`` is None."""
    here = f"{rel}/" if rel else ""
    entries = {
        k: v
        for k, v in zmetadata["metadata"].items()
        if not (k.startswith(here) and (meta is None or k[len(here) :] in V2_KEYS))
    }
    if meta is not None:
        entries.update({here + name: doc for name, doc in v2_docs(meta).items()})
    return {**zmetadata, "metadata": dict(sorted(entries.items()))}
