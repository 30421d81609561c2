"""Codecs built from their metadata (:mod:`rectizarr.core.codec_meta`): the three kinds, chains and sharding
(:mod:`.pipeline`), built from metadata (:mod:`.build`), the shard format (:mod:`.shard_index`). This module only re-exports."""

from __future__ import annotations

from rectizarr.codecs.array_to_array import NumcodecsArrayArray, TransposeCodec
from rectizarr.codecs.array_to_bytes import BytesCodec, NumcodecsArrayBytes, VlenBytesCodec, VlenUtf8Codec
from rectizarr.codecs.base import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec, ChunkSpec, Codec
from rectizarr.codecs.build import build_codec, build_pipeline
from rectizarr.codecs.bytes_to_bytes import BloscCodec, Crc32cCodec, GzipCodec, NumcodecsBytesBytes, ZstdCodec
from rectizarr.codecs.pipeline import CodecPipeline, ShardingCodec
from rectizarr.codecs.shard_index import ShardIndex, is_fill
from rectizarr.core.codec_meta import CodecMeta, codecs_to_json, parse_codecs

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
    "build_pipeline",
    "codecs_to_json",
    "is_fill",
    "parse_codecs",
]
