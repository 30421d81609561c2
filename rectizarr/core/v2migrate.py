"""The Zarr v3 codec chain that reads a Zarr v2 array's chunks as they are stored (for ``migrate`` and
``copy``): the v2 compressors, ``order: "F"`` (``transpose``) and byte orders are v3 codecs already;
``vlen-utf8``/``vlen-bytes`` map to the v3 codecs of those names; numcodecs filters on little-endian data map to
``numcodecs.<id>`` array->array codecs (callers check those on a stored chunk)."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from rectizarr.core import codec_meta as cm
from rectizarr.core.codec_meta import NUMCODECS_KINDS
from rectizarr.core.metadata import ArrayMeta
from rectizarr.core.v2dtype import parse_v2_dtype

__all__ = ["v3_attributes", "v3_codecs"]

_SAFE_FILTERS = frozenset(k for k, v in NUMCODECS_KINDS.items() if v == "array_array") - {"packbits"}
_BYTES_FILTERS = frozenset(k for k, v in NUMCODECS_KINDS.items() if v == "bytes_bytes")


def v3_codecs(meta: ArrayMeta) -> tuple[tuple[cm.CodecMeta, ...] | None, str]:
    """The v3 chain that reads the v2 chunks as they are, or None and why not."""
    first = meta.codecs[0] if meta.codecs else None
    if not isinstance(first, cm.V2ChunkMeta):
        return meta.codecs, "the v2 codecs are v3 codecs"
    rest = meta.codecs[1:]
    declared = parse_v2_dtype(first.dtype)
    ids = [str(f.get("id")) for f in first.filters]
    ndim = meta.ndim
    transpose: list[cm.CodecMeta] = (
        [cm.TransposeMeta(order=tuple(range(ndim - 1, -1, -1)))] if first.order == "F" and ndim > 1 else []
    )
    if ids == ["vlen-utf8"] and meta.data_type.name == "string":
        return (*transpose, cm.VlenUtf8Meta(), *rest), "vlen-utf8 is a v3 codec"
    if ids == ["vlen-bytes"] and meta.data_type.name == "bytes":
        return (*transpose, cm.VlenBytesMeta(), *rest), "vlen-bytes is a v3 codec"
    n_array = next((n for n, i in enumerate(ids) if i not in _SAFE_FILTERS), len(ids))
    if (
        declared.fields is None
        and declared.kind != "O"
        and all(i in _BYTES_FILTERS for i in ids[n_array:])
        and (declared.byteorder in "<|=" or declared.itemsize == 1)
    ):
        # array->array filters, then any bytes->bytes ones (kerchunk's shuffle + zlib) after the bytes codec
        filters = [
            cm.NumcodecsMeta(name=f"numcodecs.{i}", configuration={k: v for k, v in f.items() if k != "id"})
            for i, f in zip(ids, first.filters, strict=True)
        ]
        wide = declared.itemsize > 1 and declared.kind not in "SV"
        return (
            *transpose,
            *filters[:n_array],
            cm.BytesMeta(endian="little" if wide else None),
            *filters[n_array:],
            *rest,
        ), f"filters {ids} as numcodecs.* codecs"
    return None, f"filters {ids} on {declared} have no v3 codec chain that reads the v2 chunks"


def v3_attributes(meta: ArrayMeta) -> dict[str, Any]:
    """The attributes of a v2 array as a v3 array: xarray's v2 arrays (``_ARRAY_DIMENSIONS``: dimension
    names here) keep their CF ``_FillValue`` in the ``.zarray`` ``fill_value``, its v3 arrays in a
    ``_FillValue`` attribute (an int, or a float's little-endian float64 bytes in base64): written so, or the
    values it masks come back as numbers."""
    attrs = dict(meta.attributes)
    fill = None if meta.v2 is None else meta.v2.get("fill_value")
    if meta.dimension_names is None or fill is None or "_FillValue" in attrs:  # (v3 arrays: no meta.v2)
        return attrs
    value = meta.fill_value
    if value.dtype.kind in "iu":
        attrs["_FillValue"] = int(value)
    elif value.dtype.kind == "f":
        attrs["_FillValue"] = base64.b64encode(np.float64(value).astype("<f8").tobytes()).decode()
    return attrs
