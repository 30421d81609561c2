"""Codecs: metadata (:mod:`.meta`), runtime codecs built from it, chains (:mod:`.pipeline`), sharding."""

from __future__ import annotations

from typing import assert_never

import numpy as np

from rectizarr._util import json_path
from rectizarr.codecs.array_to_array import NumcodecsArrayArray, TransposeCodec
from rectizarr.codecs.array_to_bytes import BytesCodec, NumcodecsArrayBytes, VlenBytesCodec, VlenUtf8Codec
from rectizarr.codecs.base import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec, ChunkSpec, Codec
from rectizarr.codecs.bytes_to_bytes import (
    BloscCodec,
    Crc32cCodec,
    GzipCodec,
    NumcodecsBytesBytes,
    ZstdCodec,
    get_numcodec,
)
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.codecs.sharding import ShardIndex, ShardingCodec, is_fill
from rectizarr.core.codec_meta import (
    BloscMeta,
    BytesMeta,
    CodecMeta,
    Crc32cMeta,
    GzipMeta,
    NumcodecsMeta,
    ShardingMeta,
    TransposeMeta,
    VlenBytesMeta,
    VlenUtf8Meta,
    ZstdMeta,
    codecs_to_json,
    parse_codecs,
)
from rectizarr.errors import MetadataError

__all__ = [
    "ArrayArrayCodec",
    "ArrayBytesCodec",
    "BloscCodec",
    "BytesBytesCodec",
    "BytesCodec",
    "ChunkSpec",
    "Codec",
    "CodecMeta",
    "CodecPipeline",
    "Crc32cCodec",
    "GzipCodec",
    "NumcodecsArrayArray",
    "NumcodecsArrayBytes",
    "NumcodecsBytesBytes",
    "ShardIndex",
    "ShardingCodec",
    "TransposeCodec",
    "VlenBytesCodec",
    "VlenUtf8Codec",
    "ZstdCodec",
    "build_codec",
    "codecs_to_json",
    "is_fill",
    "parse_codecs",
]


def _build_numcodecs(meta: NumcodecsMeta, path: str) -> Codec:
    try:
        obj = get_numcodec(meta.name, meta.codec_id, meta.configuration)
    except MetadataError as exc:
        raise type(exc)(str(exc), path=json_path(path, "configuration")) from exc
    match meta.kind:
        case "array_array":
            return NumcodecsArrayArray(meta.name, meta.codec_id, obj)
        case "array_bytes":
            return NumcodecsArrayBytes(meta.name, obj)
        case "bytes_bytes":
            return NumcodecsBytesBytes(meta.name, obj)
        case _:
            assert_never(meta.kind)


def build_codec(meta: CodecMeta, dtype: np.dtype, path: str = "$.codecs") -> Codec:
    """The runtime codec for ``meta``; ``dtype`` is the dtype of the array the codec's chain codes at this
    point (sharding builds its inner chains for it; blosc's default ``typesize`` is its itemsize).
    """
    match meta:
        case BytesMeta():
            return BytesCodec(meta.endian)
        case TransposeMeta():
            try:
                return TransposeCodec(meta.order)
            except MetadataError as exc:
                raise MetadataError(str(exc), path=json_path(path, "configuration", "order")) from exc
        case GzipMeta():
            return GzipCodec(meta.level)
        case ZstdMeta():
            return ZstdCodec(meta.level, meta.checksum)
        case BloscMeta():
            typesize = meta.typesize or (1 if dtype.hasobject else dtype.itemsize)
            return BloscCodec(meta.cname, meta.clevel, meta.shuffle, typesize, meta.blocksize)
        case Crc32cMeta():
            return Crc32cCodec()
        case VlenUtf8Meta():
            return VlenUtf8Codec()
        case VlenBytesMeta():
            return VlenBytesCodec()
        case ShardingMeta():
            config = json_path(path, "configuration")
            ndim = len(meta.chunk_shape)
            inner = CodecPipeline.build(
                meta.codecs, dtype, [np.array([c]) for c in meta.chunk_shape], json_path(config, "codecs")
            )
            index = CodecPipeline.build(
                meta.index_codecs,
                np.dtype(np.uint64),
                [np.array([1])] * ndim + [np.array([2])],
                json_path(config, "index_codecs"),
            )
            return ShardingCodec(meta.chunk_shape, inner, index, meta.index_location, path=path)
        case NumcodecsMeta():
            return _build_numcodecs(meta, path)
        case _:
            assert_never(meta)
