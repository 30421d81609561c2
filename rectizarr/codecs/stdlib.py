"""numcodecs' ``zlib``, ``bz2`` and ``lzma`` compressors (Zarr v2 compressors; ``numcodecs.*`` in v3) on
Python's own modules, so that decoding stops one byte past the most a valid chunk can hold instead of
allocating whatever a crafted stream expands to. Encoding calls the same functions with the same
parameters as numcodecs, so the bytes are numcodecs' bytes. An lzma stream is also decoded with a memory
limit (:data:`LZMA_DICTIONARY`): its header declares the dictionary the decoder allocates (up to 4 GiB)."""

from __future__ import annotations

import bz2
import lzma
import sys
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from rectizarr.codecs.base import BytesBytesCodec, too_large
from rectizarr.errors import CodecError, MetadataError

LZMA_DICTIONARY = 65 << 20
"""The memory an lzma decoder may take beyond the decoded size limit: preset 9 (the largest numcodecs
writes) uses a 64 MiB dictionary."""


def _lzma_memlimit(limit: int | None) -> int | None:
    return None if limit is None else min(limit + LZMA_DICTIONARY, 2**63 - 1)


class StdlibCodec(BytesBytesCodec):
    """One of zlib, bz2, lzma: ``compress`` encodes, a decompressor object decodes with a size bound."""

    infallible = True

    def __init__(
        self, name: str, compress: Callable[[bytes], bytes], decompressor: Callable[[int | None], Any]
    ) -> None:
        self.name, self._compress, self._decompressor = name, compress, decompressor

    def encode(self, data: bytes | memoryview) -> bytes:
        return self._compress(bytes(data))

    def decode(self, data: bytes | memoryview, key: str | None = None) -> bytes:
        return self.decode_limited(data, key, None)

    def decode_limited(self, data: bytes | memoryview, key: str | None, limit: int | None) -> bytes:
        d = self._decompressor(limit)
        try:
            if limit is None:
                out = d.decompress(bytes(data))
            else:
                out = d.decompress(bytes(data), min(limit + 1, sys.maxsize))  # a C ssize_t
                if len(out) > limit:
                    raise too_large(self.name, key, limit)
        except (zlib.error, OSError, lzma.LZMAError, EOFError, ValueError) as exc:
            raise self.error(f"cannot decompress: {exc}", key) from exc
        except MemoryError as exc:  # an lzma dictionary past the memory left (no bound, or a large one)
            raise self.error(f"cannot decompress: out of memory ({exc})", key) from exc
        if not d.eof:
            raise self.error("the compressed stream is truncated", key)
        return bytes(out)


def _lzma(config: Mapping[str, Any]) -> StdlibCodec | None:
    fmt, check, preset = config.get("format", 1), config.get("check", -1), config.get("preset")
    if config.get("filters") is not None or fmt not in (lzma.FORMAT_XZ, lzma.FORMAT_ALONE):
        return None  # raw formats and custom filter chains: numcodecs handles them
    return StdlibCodec(
        "numcodecs.lzma",
        lambda b: lzma.compress(b, format=fmt, check=check, preset=preset),
        lambda limit: lzma.LZMADecompressor(format=lzma.FORMAT_AUTO, memlimit=_lzma_memlimit(limit)),
    )


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
    if codec_id in ("zlib", "bz2") and keys <= {"level"}:
        level, module = int(config.get("level", 1)), zlib if codec_id == "zlib" else bz2
        make: Callable[[], Any] = zlib.decompressobj if codec_id == "zlib" else bz2.BZ2Decompressor
        return StdlibCodec(f"numcodecs.{codec_id}", lambda b: module.compress(b, level), lambda _: make())
    return _lzma(config) if codec_id == "lzma" and keys <= {"format", "check", "preset", "filters"} else None


def lzma_limited(
    data: bytes | memoryview, key: str | None, limit: int, name: str, fmt: int, filters: Any
) -> bytes:
    """numcodecs' ``lzma`` decode (``lzma.decompress``: one stream after another, trailing data that is not a
    stream ignored) of the formats and filter chains :func:`stdlib_codec` leaves to numcodecs, stopping one
    byte past ``limit``; with the memory limit of :data:`LZMA_DICTIONARY` except in the raw format (whose
    dictionary the array's metadata declares)."""
    rest, total = bytes(data), 0
    parts: list[bytes] = []
    memlimit = None if fmt == lzma.FORMAT_RAW else _lzma_memlimit(limit)
    while True:
        try:
            d = lzma.LZMADecompressor(fmt, memlimit, filters)
            part = d.decompress(rest, min(limit + 1 - total, sys.maxsize))
        except lzma.LZMAError as exc:
            if parts:
                break  # what follows the streams is not a stream: ignored, as lzma.decompress does
            raise CodecError(f"cannot decompress: {exc}", key=key, codec=name) from exc
        except (ValueError, TypeError, MemoryError) as exc:
            raise CodecError(f"cannot decompress: {type(exc).__name__}: {exc}", key=key, codec=name) from exc
        total += len(part)
        if total > limit:
            raise too_large(name, key, limit)
        parts.append(part)
        if not d.eof:
            raise CodecError("the compressed stream is truncated", key=key, codec=name)
        rest = d.unused_data
        if not rest:
            return b"".join(parts)
    return b"".join(parts)
