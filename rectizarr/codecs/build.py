"""Codecs and codec chains built from their metadata (:mod:`rectizarr.core.codec_meta`), validated."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, assert_never, cast

import msgspec
import numpy as np

from rectizarr._util import json_path
from rectizarr.codecs.array_to_array import NumcodecsArrayArray, TransposeCodec
from rectizarr.codecs.array_to_bytes import (
    BytesCodec,
    NumcodecsArrayBytes,
    VlenArrayCodec,
    VlenBytesCodec,
    VlenUtf8Codec,
)
from rectizarr.codecs.base import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec, ChunkSpec, Codec
from rectizarr.codecs.bitround import BitroundCodec
from rectizarr.codecs.bytes_to_bytes import (
    BloscCodec,
    Crc32cCodec,
    GzipCodec,
    NumcodecsBytesBytes,
    ZstdCodec,
    get_numcodec,
)
from rectizarr.codecs.optional import OptionalCodec
from rectizarr.codecs.packbits import PackbitsCodec
from rectizarr.codecs.pipeline import CodecPipeline, ShardingCodec
from rectizarr.codecs.reshape import ReshapeCodec, SqueezeCodec
from rectizarr.codecs.value_codecs import CastValueCodec, ScaleOffsetCodec
from rectizarr.codecs.vlen_ndarray import NumcodecsVlenArrayCodec, vlen_array_dtype
from rectizarr.codecs.zfp import ZfpCodec
from rectizarr.core import codec_meta as cm
from rectizarr.core.dtype_optional import is_optional_dtype
from rectizarr.errors import MetadataError

T = TypeVar("T")


def build_pipeline(
    metas: Sequence[cm.CodecMeta],
    dtype: np.dtype,
    edges_per_axis: Sequence[np.ndarray],
    path: str = "$.codecs",
) -> CodecPipeline:
    """Build and validate a chain for chunks of ``dtype`` whose axis ``i`` edges are ``edges_per_axis[i]``;
    every declared edge is checked (for sharding: divisible by the inner chunk shape) as the array->bytes
    codec sees it, after any ``transpose``."""
    edges: list[Any] = [np.asarray(e) for e in edges_per_axis]
    spec = ChunkSpec(tuple(int(e[0]) if e.size else 1 for e in edges), dtype, np.zeros((), dtype=dtype))
    array_array: list[ArrayArrayCodec] = []
    array_bytes: ArrayBytesCodec | None = None
    bytes_bytes: list[BytesBytesCodec] = []
    resolved: list[cm.CodecMeta] = []
    for i, meta in enumerate(metas):
        where = json_path(path, i)
        try:
            codec = (
                _build_optional(meta, spec.dtype, edges, where)
                if isinstance(meta, cm.OptionalMeta)
                else build_codec(meta, spec.dtype, where)
            )
            if isinstance(meta, cm.BloscMeta) and isinstance(codec, BloscCodec):
                meta = msgspec.structs.replace(meta, typesize=codec.typesize)
            if isinstance(codec, ShardingCodec | OptionalCodec):
                meta = codec.meta
            resolved.append(meta)
            if isinstance(codec, ArrayArrayCodec):
                if array_bytes is not None:
                    raise MetadataError(f"array->array codec {codec.name!r} after the array->bytes codec")
                spec = codec.resolve(spec)
                edges = codec.map_axes(edges)
                array_array.append(codec)
            elif isinstance(codec, ArrayBytesCodec):
                if array_bytes is not None:
                    raise MetadataError(
                        f"only one array->bytes codec is allowed ({array_bytes.name!r} and {codec.name!r})"
                    )
                codec.validate(spec.dtype, edges)
                array_bytes = codec
            else:
                if array_bytes is None:
                    raise MetadataError(
                        f"bytes->bytes codec {codec.name!r} before the array->bytes codec (invalid codec order)"
                    )
                bytes_bytes.append(cast(BytesBytesCodec, codec))  # the third and last kind
        except MetadataError as exc:
            # (the same error at this codec's path, unless it names one already)
            raise (exc if exc.path is not None else type(exc)(str(exc), path=where, key=exc.key)) from exc
    if array_bytes is None:
        raise MetadataError("at least one array->bytes codec (such as 'bytes') is required", path=path)
    if is_optional_dtype(spec.dtype) and not isinstance(array_bytes, OptionalCodec | ShardingCodec):
        raise MetadataError(
            f"the optional data type is coded by the 'optional' codec, not {array_bytes.name!r}", path=path
        )
    return CodecPipeline(tuple(resolved), tuple(array_array), array_bytes, tuple(bytes_bytes))


def _build_optional(
    meta: cm.OptionalMeta, dtype: np.dtype, edges: Sequence[np.ndarray], path: str
) -> OptionalCodec:
    """The optional codec: mask chain codes ``bool`` chunks, the data chain the 1-d run of present values."""
    if not is_optional_dtype(dtype):
        raise MetadataError(f"the optional codec codes the optional data type only, not {dtype}", path=path)
    config = json_path(path, "configuration")
    mask = build_pipeline(meta.mask_codecs, np.dtype(np.bool_), edges, json_path(config, "mask_codecs"))
    data = build_pipeline(meta.data_codecs, dtype["value"], [np.array([1])], json_path(config, "data_codecs"))
    return OptionalCodec(mask, data)


def _configured(make: Callable[[], T], path: str, *field: str) -> T:
    """``make()``; its MetadataError is one (of its class) at the configuration (``field``) of the codec at
    ``path``."""
    try:
        return make()
    except MetadataError as exc:
        raise type(exc)(str(exc), path=json_path(path, "configuration", *field)) from exc


def _build_numcodecs(meta: cm.NumcodecsMeta, dtype: np.dtype, path: str) -> Codec:
    if meta.codec_id == "vlen-array":  # native: numcodecs' layout, decoding bounded
        return _configured(lambda: NumcodecsVlenArrayCodec(vlen_array_dtype(meta.configuration)), path)
    if meta.kind == "array_array":
        NumcodecsArrayArray.check_declared(meta.configuration, dtype, json_path(path, "configuration"))
    if meta.kind == "bytes_bytes":  # zlib, bz2, lzma: decoding bounded by the chunk size
        from rectizarr.codecs.stdlib import stdlib_codec  # (bz2 and lzma: imported when used)

        native = _configured(lambda: stdlib_codec(meta.codec_id, meta.configuration), path)
        if native is not None:
            return native
    obj = _configured(lambda: get_numcodec(meta.name, meta.codec_id, meta.configuration), path)
    match meta.kind:
        case "array_array":
            return NumcodecsArrayArray(meta.name, meta.codec_id, obj)
        case "array_bytes":
            return NumcodecsArrayBytes(meta.name, obj)
        case "bytes_bytes":
            return NumcodecsBytesBytes(meta.name, obj)
        case _:
            assert_never(meta.kind)


# Codecs made from their configuration's values in order (a MetadataError at ``field``, where one is named)
_BY_FIELDS: dict[type[cm.CodecMeta], tuple[Callable[..., Codec], str | None]] = {
    cm.BytesMeta: (BytesCodec, None),
    cm.GzipMeta: (GzipCodec, None),
    cm.ZstdMeta: (ZstdCodec, None),
    cm.Crc32cMeta: (Crc32cCodec, None),
    cm.VlenUtf8Meta: (VlenUtf8Codec, None),
    cm.VlenBytesMeta: (VlenBytesCodec, None),
    cm.VlenArrayMeta: (VlenArrayCodec, None),
    cm.SqueezeMeta: (SqueezeCodec, None),
    cm.TransposeMeta: (TransposeCodec, "order"),
    cm.ReshapeMeta: (ReshapeCodec, "shape"),
    cm.PackbitsMeta: (PackbitsCodec, "last_bit"),
    cm.BitroundMeta: (BitroundCodec, "keepbits"),
}


def build_codec(meta: cm.CodecMeta, dtype: np.dtype, path: str = "$.codecs") -> Codec:
    """The runtime codec for ``meta``; ``dtype`` is the dtype of the array the codec's chain codes at this
    point (sharding builds its inner chains for it; blosc's default ``typesize`` is its itemsize)."""
    match meta:
        case cm.BloscMeta():
            typesize = meta.typesize or (1 if dtype.hasobject else dtype.itemsize)
            return BloscCodec(meta.cname, meta.clevel, meta.shuffle, typesize, meta.blocksize)
        case cm.ShardingMeta():
            config, u64 = json_path(path, "configuration"), np.dtype(np.uint64)
            edges = [np.array([c]) for c in meta.chunk_shape]
            inner = build_pipeline(meta.codecs, dtype, edges, json_path(config, "codecs"))
            index_edges = [np.array([1])] * len(edges) + [np.array([2])]  # (offset, nbytes) per inner chunk
            index = build_pipeline(meta.index_codecs, u64, index_edges, json_path(config, "index_codecs"))
            return ShardingCodec(meta.chunk_shape, inner, index, meta.index_location, path=path)
        case cm.NumcodecsMeta():
            return _build_numcodecs(meta, dtype, path)
        case cm.ScaleOffsetMeta():
            return ScaleOffsetCodec(meta, dtype, path)
        case cm.CastValueMeta():
            return CastValueCodec(meta, dtype, path)
        case cm.ZfpMeta():
            return ZfpCodec(meta.mode, meta.params(), json_path(path, "configuration", "mode"))
        case cm.OptionalMeta():  # (edges unknown here: the mask chain is checked for one axis)
            return _build_optional(meta, dtype, [np.array([1])], path)
        case cm.PluginMeta():
            from rectizarr.codecs.plugins import build_plugin_codec
            from rectizarr.core.codec_registry import unsupported_codec_error

            plugged = build_plugin_codec(meta.name, meta.configuration, dtype, path)
            if plugged is None:  # (uninstalled since the document was parsed)
                raise unsupported_codec_error(meta.name, path)
            return plugged
        case cm.V2ChunkMeta():
            from rectizarr.codecs.v2chunk import V2ChunkCodec
            from rectizarr.core.v2dtype import parse_v2_dtype

            declared = parse_v2_dtype(meta.dtype, json_path(path, "configuration", "dtype"))
            return V2ChunkCodec(declared, meta.order, meta.filters, path)
        case _:  # every other kind is made from its fields (_BY_FIELDS)
            make, field = _BY_FIELDS[type(meta)]
            args = msgspec.structs.astuple(meta)
            return _configured(lambda: make(*args), path, field) if field else make(*args)
