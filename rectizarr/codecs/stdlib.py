"""numcodecs' ``zlib``, ``bz2`` and ``lzma`` compressors (Zarr v2 compressors; ``numcodecs.*`` in v3) on
Python's own modules, so that decoding stops one byte past the most a valid chunk can hold instead of
allocating whatever a crafted stream expands to. Encoding calls the same functions with the same
parameters as numcodecs, so the bytes are numcodecs' bytes."""

from __future__ import annotations

import bz2
import lzma
import sys
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from rectizarr.codecs.base import BytesBytesCodec, too_large
from rectizarr.errors import CodecError, MetadataError

__all__ = ["StdlibCodec", "stdlib_codec"]


class StdlibCodec(BytesBytesCodec):
    """One of zlib, bz2, lzma: ``compress`` encodes, a decompressor object decodes with a size bound."""

    infallible = True

    def __init__(self, name: str, compress: Callable[[bytes], bytes], decompressor: Callable[[], Any]) -> None:
        self.name = name
        self._compress = compress
        self._decompressor = decompressor

    def encode(self, data: bytes | memoryview) -> bytes:
        return self._compress(bytes(data))

    def decode(self, data: bytes | memoryview, key: str | None = None) -> bytes:
        return self._inflate(data, key, None)

    def decode_limited(self, data: bytes | memoryview, key: str | None, limit: int) -> bytes:
        return self._inflate(data, key, limit)

    def _inflate(self, data: bytes | memoryview, key: str | None, limit: int | None) -> bytes:
        d = self._decompressor()
        try:
            if limit is None:
                out = d.decompress(bytes(data))
            else:
                out = d.decompress(bytes(data), min(limit + 1, sys.maxsize))  # a C ssize_t
                if len(out) > limit:
                    raise too_large(self.name, key, limit)
        except (zlib.error, OSError, lzma.LZMAError, EOFError, ValueError) as exc:
            raise CodecError(f"cannot decompress: {exc}", key=key, codec=self.name) from exc
        if not d.eof:
            raise CodecError("the compressed stream is truncated", key=key, codec=self.name)
        return bytes(out)


def _lzma(config: Mapping[str, Any]) -> StdlibCodec | None:
    fmt, check, preset = config.get("format", 1), config.get("check", -1), config.get("preset")
    if config.get("filters") is not None or fmt not in (lzma.FORMAT_XZ, lzma.FORMAT_ALONE):
        return None  # raw formats and custom filter chains: numcodecs handles them
    return StdlibCodec("numcodecs.lzma", lambda b: lzma.compress(b, format=fmt, check=check, preset=preset),
                       lambda: lzma.LZMADecompressor(format=lzma.FORMAT_AUTO))


def stdlib_codec(codec_id: str, config: Mapping[str, Any]) -> StdlibCodec | None:
    """The bounded codec for a numcodecs ``zlib``/``bz2``/``lzma`` configuration; None for any other.
    Raises :class:`MetadataError` for a configuration the compressor refuses (an out-of-range level)."""
    try:
        codec = _codec(codec_id, config)
        if codec is not None:
            codec.encode(b"")  # the parameters are checked when compressing
    except (TypeError, ValueError, OverflowError, lzma.LZMAError, zlib.error) as exc:
        raise MetadataError(f"invalid configuration for codec 'numcodecs.{codec_id}': {exc}") from exc
    return codec


def _codec(codec_id: str, config: Mapping[str, Any]) -> StdlibCodec | None:
    keys = set(config)
    if codec_id == "zlib" and keys <= {"level"}:
        level = int(config.get("level", 1))
        return StdlibCodec("numcodecs.zlib", lambda b: zlib.compress(b, level), zlib.decompressobj)
    if codec_id == "bz2" and keys <= {"level"}:
        level = int(config.get("level", 1))
        return StdlibCodec("numcodecs.bz2", lambda b: bz2.compress(b, level), bz2.BZ2Decompressor)
    if codec_id == "lzma" and keys <= {"format", "check", "preset", "filters"}:
        return _lzma(config)
    return None
