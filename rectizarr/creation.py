"""A new array's :class:`ArrayMeta` and codec pipeline from its checked
:class:`~rectizarr.core.spec.ArraySpec` (no I/O): chunk grids (``"auto"`` sizes, shards) and codec chains."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rectizarr._util import Shape, is_int, prod
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.build import build_pipeline
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.core.codec_meta import CodecMeta, codecs_to_json, parse_codecs
from rectizarr.core.dtype import DataType, parse_data_type
from rectizarr.core.dtype_optional import inner_type
from rectizarr.core.grid import ChunkGrid
from rectizarr.core.metadata import ArrayMeta
from rectizarr.core.spec import ArraySpec, auto_chunks, whole_axes
from rectizarr.core.v2keys import DIMS_ATTR
from rectizarr.errors import CodecError, MetadataError

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
        return {"name": f"numcodecs.{config.pop('id')}", "configuration": config}
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
    if dtype.variable_length:  # string or bytes
        return {"name": "vlen-utf8" if dtype.name == "string" else "vlen-bytes", "configuration": {}}
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


def _regular_inner(chunks: Any, shape: Shape) -> Shape:
    if chunks == "auto" or chunks is None:
        raise MetadataError("with shards=..., chunks must give the inner chunk shape explicitly")
    if is_int(chunks):
        chunks = (int(chunks),) * len(shape)
    out = whole_axes(chunks, shape)
    for axis, c in enumerate(out):
        if not is_int(c):
            raise MetadataError(f"inner chunks of a sharded array are regular: axis {axis} got {c!r}")
    return tuple(int(c) for c in out)


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


def _grid(shape: Shape, chunks: Any, itemsize: int) -> ChunkGrid:
    if isinstance(chunks, str):
        if chunks != "auto":
            raise MetadataError(f"chunks must be 'auto', an int, or per-axis sizes/edges, got {chunks!r}")
        return ChunkGrid.regular(shape, auto_chunks(shape, itemsize))
    if is_int(chunks):
        chunks = (int(chunks),) * len(shape)
    if len(chunks) != len(shape):
        raise MetadataError(f"chunks has {len(chunks)} entries but shape has {len(shape)} dimensions")
    return ChunkGrid.from_chunks(shape, whole_axes(chunks, shape))


def build_v3(spec: ArraySpec) -> tuple[ArrayMeta, CodecPipeline]:
    """The metadata and codec pipeline of a new Zarr v3 array (its ``zarr.json``); the format objects choose
    (:meth:`rectizarr.nodes.DocFormat.build_array`)."""
    grid, chain_json = _grid_and_chain(spec)
    metas: tuple[CodecMeta, ...] = parse_codecs(chain_json, "codecs")
    pipeline = build_pipeline(metas, spec.dtype.numpy, [d.unique_edges() for d in grid.dims], "codecs")
    meta = ArrayMeta(
        shape=spec.shape,
        data_type=spec.dtype,
        chunk_grid=grid,
        chunk_key_encoding=spec.chunk_key_encoding,
        fill_value=spec.fill,
        codecs=pipeline.metas,
        attributes=dict(spec.attributes),
        dimension_names=spec.dimension_names,
    )
    return meta, pipeline


def _grid_and_chain(spec: ArraySpec) -> tuple[ChunkGrid, list[Any]]:
    """A Zarr v3 array's chunk grid and codec chain (as JSON): ``codecs=`` as given, else the chain of
    ``filters``/``serializer``/``compressors``, inside a sharding codec where ``shards`` is given."""
    shape, dt, itemsize = spec.shape, spec.dtype, spec.dtype.itemsize or 16
    if spec.codecs is not None:
        chain_json = [codec_json(c, "codecs") for c in spec.codecs]
        return _grid(shape, spec.chunks if spec.shards is None else spec.shards, itemsize), chain_json
    if spec.shards is None:
        grid = _grid(shape, spec.chunks, itemsize)
        return grid, build_chain(dt, spec.filters, spec.serializer, spec.compressors)
    inner = _regular_inner(spec.chunks, shape)
    shards = auto_shards(shape, inner, itemsize) if _is_auto(spec.shards) else spec.shards
    grid = _grid(shape, shards, itemsize)
    _check_divides(grid, inner, shards, spec.chunks)
    sharding = {
        "chunk_shape": list(inner),
        "codecs": build_chain(dt, spec.filters, spec.serializer, spec.compressors),
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
        "index_location": spec.index_location,
    }
    return grid, [{"name": "sharding_indexed", "configuration": sharding}]


def build_v2(spec: ArraySpec) -> tuple[ArrayMeta, CodecPipeline]:
    """A new Zarr v2 array's metadata and codec pipeline (its ``.zarray``: :mod:`rectizarr.core.v2create`)."""
    from rectizarr.core.v2create import v2_zarray  # (v2: loaded on first use)
    from rectizarr.core.v2meta import decode_v2_array

    zarray = v2_zarray(spec)
    attrs = dict(spec.attributes)
    if spec.dimension_names is not None:
        attrs[DIMS_ATTR] = list(spec.dimension_names)
    meta = decode_v2_array(zarray, attrs)
    pipeline = build_pipeline(
        meta.codecs, meta.data_type.numpy, [d.unique_edges() for d in meta.chunk_grid.dims], "codecs"
    )
    _probe(pipeline, spec.fill, len(spec.shape), zarray)
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
