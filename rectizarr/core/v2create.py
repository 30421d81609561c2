"""The :class:`~rectizarr.core.spec.ArraySpec` of ``create_array(..., zarr_format=2)`` -> a ``.zarray``
document (no I/O).

What zarr-python 3 writes for ``zarr_format=2`` is the model: the default compressor is zstd level 0,
``str`` arrays are ``|O`` with a ``vlen-utf8`` filter (``bytes``: ``vlen-bytes``), numbers are written
little-endian, ``dimension_separator`` is ``"."`` unless the ``v2`` chunk key encoding says ``"/"``.
Rectilinear grids and sharding do not exist in Zarr v2: asking for them is an :class:`UnsupportedError`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rectizarr._util import is_int
from rectizarr.core.spec import ArraySpec, ByteOrders, auto_chunks, whole_axes
from rectizarr.core.v2dtype import parse_v2_dtype, v2_dtype_to_json, v2_fill_to_json
from rectizarr.errors import MetadataError, UnsupportedError

V2_DEFAULT_COMPRESSOR = {"id": "zstd", "level": 0}
_V3_TO_V2 = {"gzip": "gzip", "zstd": "zstd", "blosc": "blosc"}


def _chunks(spec: ArraySpec) -> list[int]:
    """Regular chunk sizes for a v2 array."""
    shape, chunks = spec.shape, spec.chunks
    if isinstance(chunks, str) and chunks == "auto":
        return list(auto_chunks(shape, spec.dtype.itemsize or 16))
    if is_int(chunks):
        chunks = [chunks] * len(shape)
    if not isinstance(chunks, Sequence) or len(chunks) != len(shape):
        raise MetadataError(f"chunks {chunks!r} do not give one size for each of {len(shape)} dimensions")
    chunks = whole_axes(chunks, shape)
    for axis, c in enumerate(chunks):
        if not is_int(c):
            raise UnsupportedError(
                f"chunks[{axis}] = {c!r}: Zarr v2 has regular chunk grids only (one size per "
                "axis); rectilinear chunks need zarr_format=3"
            )
        if c < 1:
            raise MetadataError(f"chunks[{axis}] must be >= 1, got {c}")
    return [int(c) for c in chunks]


def _codec_config(codec: Any, where: str) -> dict[str, Any]:
    """A numcodecs codec object, a numcodecs config dict (``{"id": ...}``) or a v3-style gzip/zstd/blosc dict."""
    get_config = getattr(codec, "get_config", None)
    if callable(get_config):
        return _without_false_checksum(dict(get_config()))
    if isinstance(codec, Mapping) and isinstance(codec.get("id"), str):
        return _without_false_checksum(dict(codec))
    if isinstance(codec, Mapping) and codec.get("name") in _V3_TO_V2:
        config = dict(codec.get("configuration") or {})
        if codec["name"] == "blosc":
            shuffle = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
            config["shuffle"] = shuffle.get(config.get("shuffle", "shuffle"), 1)
            config.pop("typesize", None)
        return {"id": _V3_TO_V2[codec["name"]], **config}
    raise MetadataError(
        f"{where}: {codec!r} is not a Zarr v2 codec (give a numcodecs codec or {{'id': ...}})"
    )


def _without_false_checksum(config: dict[str, Any]) -> dict[str, Any]:
    """numcodecs' zstd config carries ``"checksum": false``, which tensorstore refuses in a ``.zarray``
    (an unknown member); zarr-python leaves it out, as here."""
    if config.get("id") == "zstd" and config.get("checksum", True) is False:
        del config["checksum"]
    return config


def _compressor(compressors: Any) -> dict[str, Any] | None:
    if isinstance(compressors, str) and compressors == "auto":
        return dict(V2_DEFAULT_COMPRESSOR)
    if compressors is None:
        return None
    items = list(compressors) if isinstance(compressors, list | tuple) else [compressors]
    if len(items) > 1:
        raise UnsupportedError(f"Zarr v2 arrays have one compressor, got {len(items)}")
    return _codec_config(items[0], "compressors") if items else None


# numcodecs filters that take an object array (zarr-python 2 wrote such a filter alone, as its object codec)
_OBJECT_CODECS = frozenset(
    {"vlen-utf8", "vlen-bytes", "vlen-array", "json2", "msgpack2", "pickle", "categorize"}
)


def _filters(spec: ArraySpec) -> tuple[Any, list[dict[str, Any]]]:
    """The v2 ``dtype`` JSON (in the byte order asked for) and filters (object codec first for strings)."""
    dtype, filters, big_endian = spec.dtype, spec.filters, spec.big_endian
    items = [] if filters is None else list(filters) if isinstance(filters, list | tuple) else [filters]
    out = [_codec_config(f, "filters") for f in items]
    if dtype.name in ("string", "bytes"):
        codec = "vlen-utf8" if dtype.name == "string" else "vlen-bytes"
        if not any(f.get("id") in _OBJECT_CODECS for f in out):  # filters run in order: objects in first
            out.insert(0, {"id": codec})
        return "|O", out
    return v2_dtype_to_json(_in_orders(dtype.numpy, big_endian)), out


def _in_orders(native: np.dtype[Any], big: ByteOrders) -> np.dtype[Any]:
    """``native`` with each field big-endian where ``big`` says (a tuple per structured level; orders asked
    of another dtype: the little-endian default)."""
    names = native.names
    if not names:
        return native.newbyteorder(">" if big is True else "<")
    orders = big if isinstance(big, tuple) and len(big) == len(names) else (False,) * len(names)
    return np.dtype([(n, _in_orders(native[n], o)) for n, o in zip(names, orders, strict=True)])


def v2_zarray(spec: ArraySpec) -> dict[str, Any]:
    """The ``.zarray`` of a new v2 array (big-endian where ``spec.big_endian`` says, per structured field)."""
    chunks = _chunks(spec)
    dtype_json, filter_list = _filters(spec)
    declared = parse_v2_dtype(dtype_json)
    return {
        "shape": list(spec.shape),
        "chunks": chunks,
        "dtype": dtype_json,
        "fill_value": None if spec.null_fill else v2_fill_to_json(spec.fill, declared),
        "order": spec.order,
        "filters": filter_list or None,
        "dimension_separator": spec.chunk_key_encoding.separator,
        "compressor": _compressor(spec.compressors),
        "zarr_format": 2,
    }
