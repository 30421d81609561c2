"""Turn ``create_array`` arguments into a validated :class:`ArrayMeta` (no I/O)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rectizarr._util import Shape, is_int, prod
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.build import build_pipeline
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.core.chunk_keys import ChunkKeyEncoding, parse_chunk_key_encoding
from rectizarr.core.codec_meta import CodecMeta, codecs_to_json, parse_codecs
from rectizarr.core.dtype import DataType, data_type_from_numpy, parse_data_type
from rectizarr.core.dtype_optional import inner_type, optional_fill_from_user
from rectizarr.core.grid import ChunkGrid
from rectizarr.core.metadata import ArrayMeta, check_attributes, parse_shape
from rectizarr.core.v2create import ByteOrders, v2_chunks, v2_zarray, whole_axes
from rectizarr.core.v2meta import decode_v2_array
from rectizarr.errors import CodecError, MetadataError, UnsupportedError

ChunksArg = Any  # int | Sequence[int | Sequence[int]] | "auto"

_TARGET_CHUNK_BYTES = 1 << 20


def auto_chunks(shape: Shape, itemsize: int) -> Shape:
    """Regular chunks of about 1 MiB: halve the largest axis until the chunk is small enough."""
    chunks = [max(1, s) for s in shape]
    while prod(tuple(chunks)) * max(1, itemsize) > _TARGET_CHUNK_BYTES and max(chunks) > 1:
        i = int(np.argmax(chunks))
        chunks[i] = -(-chunks[i] // 2)
    return tuple(chunks)


_TARGET_SHARD_BYTES = 64 << 20


def auto_shards(shape: Shape, inner: Shape, itemsize: int) -> Shape:
    """``shards="auto"``: whole inner chunks, doubled along the axis holding the fewest of them (and never
    past the array's extent), until a shard would pass about 64 MiB decoded."""
    shard = [max(1, c) for c in inner]

    def fits(axis: int) -> bool:
        grown = [2 * n if i == axis else n for i, n in enumerate(shard)]
        return (
            grown[axis] < max(1, shape[axis]) + shard[axis]
            and prod(tuple(grown)) * itemsize <= _TARGET_SHARD_BYTES
        )

    while True:
        growable = [i for i in range(len(shard)) if fits(i)]
        if not growable:
            return tuple(shard)
        axis = min(growable, key=lambda i: shard[i] // max(1, inner[i]))
        shard[axis] *= 2


# What a codec given by name alone means (zarr-python's defaults for its codec classes).
_NAME_DEFAULTS: Mapping[str, dict[str, Any]] = {
    "gzip": {"level": 5},
    "zstd": {"level": 0, "checksum": False},
    "blosc": {"cname": "zstd", "clevel": 5, "shuffle": "shuffle", "blocksize": 0},
    "transpose": {},
    "bytes": {"endian": "little"},
}


def codec_json(codec: Any, where: str, itemsize: int = 1) -> Any:
    """A user codec as JSON: a JSON-shaped dict, a name (``"gzip"``: zarr-python's default
    configuration), our metadata struct, a numcodecs object, or any object with zarr-python's
    ``to_dict()`` (``zarr.codecs.BloscCodec()``)."""
    if isinstance(codec, Mapping):
        return dict(codec)
    if isinstance(codec, str):
        config = _NAME_DEFAULTS.get(codec)
        if config is None:
            return codec
        if codec == "blosc":
            config = {**config, "typesize": itemsize, "shuffle": "shuffle" if itemsize > 1 else "bitshuffle"}
        return {"name": codec, "configuration": dict(config)} if config else {"name": codec}
    if hasattr(codec, "__struct_fields__"):
        return codecs_to_json([codec])[0]
    to_dict = getattr(codec, "to_dict", None)
    if callable(to_dict) and not hasattr(codec, "get_config"):
        # zarr-python's BloscCodec leaves typesize/shuffle "tunable" (set from the array's dtype)
        tunable = getattr(codec, "_tunable_attrs", None)
        unset = {str(k) for k in tunable} if isinstance(tunable, set | frozenset) else set()
        return _zarr_codec_json(to_dict(), itemsize, where, unset)
    get_config = getattr(codec, "get_config", None)
    if callable(get_config):  # a numcodecs codec object
        config = dict(get_config())
        codec_id = config.pop("id")
        return {"name": f"numcodecs.{codec_id}", "configuration": config}
    raise MetadataError(
        f"{where}: cannot use {codec!r} as a codec (give a dict like "
        "{'name': 'gzip', 'configuration': {'level': 1}}, a name, or a numcodecs codec)"
    )


def _zarr_codec_json(doc: Any, itemsize: int, where: str, unset: set[str]) -> dict[str, Any]:
    """A zarr-python codec's ``to_dict()``, with what it leaves to be filled from the array (blosc's
    ``typesize``, a shuffle of ``None``) resolved as zarr-python resolves it."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("name"), str):
        raise MetadataError(f"{where}: to_dict() gave {doc!r}, not a codec document")
    out = {k: v for k, v in doc.items() if k != "configuration"}
    config = {
        k: v for k, v in dict(doc.get("configuration") or {}).items() if v is not None and k not in unset
    }
    if out["name"] == "blosc":
        config.setdefault("typesize", itemsize)
        config.setdefault("shuffle", "shuffle" if itemsize > 1 else "bitshuffle")
    if config or "configuration" in doc:
        out["configuration"] = config
    return out


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str | Mapping) or not isinstance(value, Sequence):
        return [value]
    return list(value)


def default_serializer(dtype: DataType) -> dict[str, Any]:
    if dtype.name == "optional":  # as zarrs writes it: the mask bit-packed, the present values by their type
        data = [default_serializer(inner_type(dtype.configuration, parse_data_type))]
        return {
            "name": "optional",
            "configuration": {"mask_codecs": [{"name": "packbits"}], "data_codecs": data},
        }
    if dtype.name == "string":
        return {"name": "vlen-utf8", "configuration": {}}
    if dtype.variable_length:
        return {"name": "vlen-bytes", "configuration": {}}
    if dtype.has_endianness:
        return {"name": "bytes", "configuration": {"endian": "little"}}
    return {"name": "bytes"}


def build_chain(dtype: DataType, filters: Any, serializer: Any, compressors: Any) -> list[Any]:
    size = dtype.itemsize or 1
    chain = [codec_json(c, "filters", size) for c in _as_list(None if _is_auto(filters) else filters)]
    chain.append(
        default_serializer(dtype) if _is_auto(serializer) else codec_json(serializer, "serializer", size)
    )
    if _is_auto(compressors):
        chain.append({"name": "zstd", "configuration": {"level": 0, "checksum": False}})
    else:
        chain.extend(codec_json(c, "compressors", size) for c in _as_list(compressors))
    return chain


def _is_auto(value: Any) -> bool:
    return isinstance(value, str) and value == "auto"


def _regular_inner(chunks: ChunksArg, shape: Shape) -> Shape:
    if chunks == "auto" or chunks is None:
        raise MetadataError("with shards=..., chunks must give the inner chunk shape explicitly")
    if is_int(chunks):
        chunks = (int(chunks),) * len(shape)
    out = []
    for axis, c in enumerate(whole_axes(chunks, shape)):
        if not is_int(c):
            raise MetadataError(f"inner chunks of a sharded array are regular: axis {axis} got {c!r}")
        out.append(int(c))
    return tuple(out)


def _check_divides(grid: ChunkGrid, inner: Shape, shards: Any, chunks: Any) -> None:
    """Every shard edge a multiple of the inner chunk size, said in the caller's words."""
    if len(inner) != len(grid.dims):
        raise MetadataError(
            f"chunks={chunks!r} has {len(inner)} entries but the array has {len(grid.dims)} dimensions"
        )
    for axis, (dim, size) in enumerate(zip(grid.dims, inner, strict=True)):
        if size <= 0:
            raise MetadataError(f"chunks={chunks!r}: the inner chunk size along axis {axis} must be positive")
        bad = [int(e) for e in dim.unique_edges() if int(e) % size]
        if bad:
            raise MetadataError(
                f"shards={shards!r} is not divisible by chunks={chunks!r}: the shard size "
                f"{bad[0]} along axis {axis} is not a multiple of the chunk size {size}"
            )


def _grid(shape: Shape, chunks: ChunksArg, itemsize: int) -> ChunkGrid:
    if isinstance(chunks, str):
        if chunks != "auto":
            raise MetadataError(f"chunks must be 'auto', an int, or per-axis sizes/edges, got {chunks!r}")
        return ChunkGrid.regular(shape, auto_chunks(shape, itemsize))
    if is_int(chunks):
        chunks = (int(chunks),) * len(shape)
    if len(chunks) != len(shape):
        raise MetadataError(f"chunks has {len(chunks)} entries but shape has {len(shape)} dimensions")
    return ChunkGrid.from_chunks(shape, whole_axes(chunks, shape))


def _shape_and_dtype(shape: Any, dtype: Any) -> tuple[Shape, DataType]:
    if is_int(shape):
        shape = (int(shape),)
    if not all(is_int(s) and int(s) >= 0 for s in shape):
        raise MetadataError(f"shape must be non-negative integers, got {shape!r}")
    return parse_shape([int(s) for s in shape], None), (
        data_type_from_numpy(dtype) if not isinstance(dtype, DataType) else dtype
    )


class _NullFill:
    """The type of :data:`NULL_FILL`."""

    def __repr__(self) -> str:
        return "NULL_FILL"


NULL_FILL: Any = _NullFill()
"""``fill_value=NULL_FILL`` for a Zarr v2 array: a ``.zarray`` whose ``fill_value`` is ``null`` (no fill
value: chunks not stored read as the data type's default, and xarray sees no ``_FillValue``), what
zarr-python writes for an explicit ``fill_value=None``."""


def build_v2_array_meta(
    *,
    shape: Any,
    dtype: Any,
    chunks: ChunksArg = "auto",
    shards: ChunksArg | None = None,
    filters: Any = None,
    compressors: Any = "auto",
    serializer: Any = "auto",
    codecs: Sequence[Any] | None = None,
    fill_value: Any = None,
    dimension_names: Sequence[str | None] | None = None,
    attributes: Mapping[str, Any] | None = None,
    chunk_key_encoding: Any = None,
    order: str | None = None,
) -> tuple[ArrayMeta, CodecPipeline]:
    """:func:`build_array_meta` for ``zarr_format=2``: a ``.zarray`` (:mod:`rectizarr.core.v2create`)."""
    if shards is not None:
        raise UnsupportedError("sharding (shards=...) exists in Zarr v3 only; use zarr_format=3")
    if codecs is not None or serializer != "auto":
        raise UnsupportedError(
            "codecs=/serializer= describe a Zarr v3 codec chain; for zarr_format=2 give "
            "filters= and compressors="
        )
    shape, dt = _shape_and_dtype(shape, dtype)
    cke = parse_chunk_key_encoding(
        _flat_key_encoding(chunk_key_encoding or {"name": "v2"}, "v2"), "chunk_key_encoding"
    )
    if cke.name != "v2":
        raise UnsupportedError(f"chunk key encoding {cke.name!r} is Zarr v3 only; Zarr v2 uses 'v2'")
    if any(n is None for n in dimension_names or ()):
        raise MetadataError("Zarr v2 dimension names (_ARRAY_DIMENSIONS) must all be strings")
    chunk_list = v2_chunks(shape, chunks, auto_chunks(shape, dt.itemsize or 16))
    null = fill_value is NULL_FILL
    fill = dt.default_fill() if fill_value is None or null else user_fill(dt, fill_value)
    if dt.name == "bytes" and fill[()] != b"":
        raise UnsupportedError(
            "a Zarr v2 .zarray has no JSON form for a bytes fill value (it would be lost); "
            "leave fill_value unset (b'') or use zarr_format=3"
        )
    zarray = v2_zarray(
        shape=shape,
        dtype=dt,
        chunks=chunk_list,
        filters=filters,
        compressors=compressors,
        fill=fill,
        order=order,
        separator=cke.separator,
        big_endian=_asks_big_endian(dtype),
    )
    if null:
        zarray["fill_value"] = None
    attrs = check_attributes(attributes or {})
    if dimension_names is not None:
        if len(dimension_names) != len(shape):
            raise MetadataError(
                f"dimension_names has {len(dimension_names)} entries for {len(shape)} dimensions"
            )
        attrs["_ARRAY_DIMENSIONS"] = list(dimension_names)
    meta = decode_v2_array(zarray, attrs)
    pipeline = build_pipeline(
        meta.codecs, meta.data_type.numpy, [d.unique_edges() for d in meta.chunk_grid.dims], "codecs"
    )
    _probe(pipeline, fill, len(shape), zarray)
    return meta, pipeline


def _probe(pipeline: CodecPipeline, fill: np.ndarray, ndim: int, zarray: Mapping[str, Any]) -> None:
    """Encode and decode one element of the fill value, so that a chain that cannot code the data type at all
    (``vlen-utf8`` on integers, ``delta`` on strings) is refused before any ``.zarray`` is written."""
    spec = ChunkSpec((1,) * ndim, fill.dtype, fill)
    try:
        pipeline.decode(pipeline.encode(np.broadcast_to(fill, spec.shape).copy(), spec), spec)
    except CodecError as exc:
        raise MetadataError(
            f"filters {zarray.get('filters')} and compressor {zarray.get('compressor')} cannot "
            f"code the data type {zarray.get('dtype')}: {exc}"
        ) from None


def _flat_key_encoding(given: Any, name: str) -> Any:
    """zarr-python's flat form ``{"name": ..., "separator": ...}`` as the metadata's form."""
    if isinstance(given, Mapping) and "separator" in given and "configuration" not in given:
        return {"name": given.get("name", name), "configuration": {"separator": given["separator"]}}
    return given


def _asks_big_endian(dtype: Any) -> tuple[ByteOrders, ...]:
    """Whether ``dtype`` (a NumPy dtype or its string) names big-endian values (``">f8"``): for each field
    of a structured dtype, nested ones field by field (``[("a", "<i4"), ("b", ">f8")]`` is stored so, as
    zarr-python 2 does), else one."""
    if isinstance(dtype, DataType):
        return (False,)
    try:
        d = np.dtype(dtype)
    except (TypeError, ValueError):
        return (False,)
    return tuple(_big(d[n]) for n in d.names) if d.names else (_big(d),)


def _big(d: np.dtype[Any]) -> ByteOrders:
    if d.subdtype is not None:
        return _big(d.subdtype[0])
    if d.names:
        return tuple(_big(d[n]) for n in d.names)
    return d.byteorder == ">" or (d.byteorder == "=" and sys.byteorder == "big" and d.itemsize > 1)


def build_array_meta(
    *,
    shape: Any,
    dtype: Any,
    chunks: ChunksArg = "auto",
    shards: ChunksArg | None = None,
    filters: Any = None,
    compressors: Any = "auto",
    serializer: Any = "auto",
    codecs: Sequence[Any] | None = None,
    fill_value: Any = None,
    dimension_names: Sequence[str | None] | None = None,
    attributes: Mapping[str, Any] | None = None,
    chunk_key_encoding: Any = None,
    index_location: str = "end",
) -> tuple[ArrayMeta, CodecPipeline]:
    shape, dt = _shape_and_dtype(shape, dtype)
    if dt.name.startswith(
        "v2:"
    ):  # a Zarr v2 type (a structured dtype with a sub-array field) with no v3 name
        raise UnsupportedError(
            f"no Zarr v3 data type can hold {dt.name[3:]} ({dt.numpy}); write it with zarr_format=2"
        )
    itemsize = dt.itemsize or 16
    if codecs is not None:
        if filters is not None or compressors not in ("auto", None) or serializer != "auto":
            raise MetadataError("give either codecs=[...] or filters/serializer/compressors, not both")
        chain_json: list[Any] = [codec_json(c, "codecs") for c in codecs]
        grid = _grid(shape, chunks if shards is None else shards, itemsize)
    elif shards is not None:
        inner = _regular_inner(chunks, shape)
        if _is_auto(shards):
            shards = auto_shards(shape, inner, itemsize)
        grid = _grid(shape, shards, itemsize)
        _check_divides(grid, inner, shards, chunks)
        chain_json = [
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": list(inner),
                    "codecs": build_chain(dt, filters, serializer, compressors),
                    "index_codecs": [
                        {"name": "bytes", "configuration": {"endian": "little"}},
                        {"name": "crc32c"},
                    ],
                    "index_location": index_location,
                },
            }
        ]
    else:
        grid = _grid(shape, chunks, itemsize)
        chain_json = build_chain(dt, filters, serializer, compressors)
    metas: tuple[CodecMeta, ...] = parse_codecs(chain_json, "codecs")
    pipeline = build_pipeline(metas, dt.numpy, [d.unique_edges() for d in grid.dims], "codecs")
    if fill_value is NULL_FILL:
        raise MetadataError(
            "a null fill value (NULL_FILL) exists in Zarr v2 only; Zarr v3 arrays always have one"
        )
    fill = dt.default_fill() if fill_value is None else user_fill(dt, fill_value)
    if dimension_names is not None:
        dimension_names = tuple(dimension_names)
        if len(dimension_names) != len(shape):
            raise MetadataError(
                f"dimension_names has {len(dimension_names)} entries for {len(shape)} dimensions"
            )
    cke: ChunkKeyEncoding = parse_chunk_key_encoding(
        _flat_key_encoding(
            chunk_key_encoding if chunk_key_encoding is not None else {"name": "default"}, "default"
        ),
        "chunk_key_encoding",
    )
    meta = ArrayMeta(
        shape=shape,
        data_type=dt,
        chunk_grid=grid,
        chunk_key_encoding=cke,
        fill_value=fill,
        codecs=pipeline.metas,
        attributes=check_attributes(attributes or {}),
        dimension_names=dimension_names,
    )
    return meta, pipeline


def user_fill(dt: DataType, value: Any) -> np.ndarray:
    """A user-given fill value as a 0-d array of the dtype, bit-exact for numpy scalars of that dtype."""
    if dt.name == "optional":
        return dt.parse_fill(optional_fill_from_user(dt.numpy, value), "fill_value")
    if isinstance(value, np.ndarray | np.generic) and np.asarray(value).dtype == dt.numpy:
        return np.array(value, dtype=dt.numpy).reshape(())
    if dt.variable_length:
        if dt.name == "string" and not isinstance(value, str):
            raise MetadataError(f"fill_value for a string array must be a str, got {value!r}")
        if dt.name != "string" and not isinstance(value, bytes | bytearray):
            raise MetadataError(f"fill_value for a bytes array must be bytes, got {value!r}")
        out = np.empty((), dtype=object)
        out[()] = str(value) if dt.name == "string" else bytes(value)  # np.str_: the plain type, as read back
        return out
    if isinstance(value, list | dict):  # the JSON form: [re, im] of a complex, {field: ...} of a struct
        return dt.parse_fill(value, "fill_value")
    try:
        arr = np.array(value, dtype=dt.numpy)
    except (TypeError, ValueError, OverflowError) as exc:
        raise MetadataError(f"fill_value {value!r} cannot be stored as {dt.name}: {exc}") from exc
    if arr.shape != ():
        raise MetadataError(f"fill_value must be a scalar, got shape {arr.shape}")
    if dt.numpy.kind in "iub" and not isinstance(value, bool | np.bool_) and arr.item() != value:
        raise MetadataError(f"fill_value {value!r} does not fit in {dt.name}")
    # Round-trip through the JSON form so what we write is exactly what we hold.
    return dt.parse_fill(dt.fill_to_json(arr), "fill_value")
