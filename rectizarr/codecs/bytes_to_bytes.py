"""``bytes -> bytes`` codecs (``gzip``, ``zstd``, ``blosc``, ``crc32c``, ``numcodecs.*``).

This is the only module that imports numcodecs, on first use (it is slow to import): :func:`get_numcodec`
hands numcodecs codec objects to the array->array and array->bytes wrappers."""

from __future__ import annotations

import functools
import struct
import sys
import zlib
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from rectizarr.codecs.base import BytesBytesCodec, too_large
from rectizarr.codecs.batch import Frames
from rectizarr.codecs.crc32c import crc32c
from rectizarr.errors import ChecksumError, CodecError, MetadataError, UnsupportedError

_GZIP_MAGIC = b"\x1f\x8b"


def get_numcodec(name: str, codec_id: str, configuration: dict[str, Any]) -> Any:
    """A numcodecs codec object for ``{"id": codec_id, **configuration}``; bad configurations raise."""
    import numcodecs  # on first use: importing numcodecs costs more than the rest of rectizarr
    from numcodecs.errors import UnknownCodecError

    try:
        return numcodecs.get_codec({"id": codec_id, **configuration})
    except UnknownCodecError as exc:
        raise UnsupportedError(f"codec {name!r} is not available in this numcodecs installation") from exc
    except Exception as exc:  # numcodecs raises TypeError/ValueError/... for bad configurations
        raise MetadataError(f"invalid configuration for codec {name!r}: {exc}") from exc


def _bytes(value: Any) -> bytes:
    """numcodecs' output (bytes or a buffer) as ``bytes``; no copy when it already is."""
    if isinstance(value, bytes):
        return value
    from numcodecs.compat import ensure_bytes

    return bytes(ensure_bytes(value))


def _as_bytes(data: bytes | memoryview) -> bytes | memoryview:
    return data if isinstance(data, bytes) else memoryview(data).cast("B")


def _failed(exc: Exception, key: str | None, codec: str, verb: str = "decompress") -> CodecError:
    """A codec library's decoding failure: a ChecksumError where it names a checksum."""
    cls = ChecksumError if "checksum" in str(exc).lower() else CodecError
    return cls(f"cannot {verb}: {exc}", key=key, codec=codec)


class GzipCodec(BytesBytesCodec):
    """DEFLATE in gzip members (RFC 1952); several concatenated members decode as one stream."""

    name = "gzip"
    infallible = True

    def __init__(self, level: int) -> None:
        self.level = level

    def encode(self, data: bytes | memoryview) -> bytes:
        import gzip  # (decoding needs only zlib)

        return gzip.compress(data, compresslevel=self.level, mtime=0)

    def decode(self, data: bytes | memoryview, key: str | None = None) -> bytes:
        return _gunzip(data, key, None, self.name)

    def decode_limited(self, data: bytes | memoryview, key: str | None, limit: int) -> bytes:
        return _gunzip(data, key, limit, self.name)


def _gunzip(data: bytes | memoryview, key: str | None, limit: int | None, name: str) -> bytes:
    """The gzip members in ``data`` inflated, at most ``limit`` bytes in all: inflating stops one byte past
    it (``CodecError``), whatever the members would inflate to."""
    rest = bytes(data)
    parts: list[bytes] = []
    room = None if limit is None else min(limit, sys.maxsize - 1)  # room + 1 is a C ssize_t
    while True:
        if rest[:2] != _GZIP_MAGIC:
            what = "a zlib stream" if rest[:1] == b"x" else "no gzip header"
            raise CodecError(f"not a gzip member ({what} at a member start)", key=key, codec=name)
        inflater = zlib.decompressobj(wbits=31)
        try:
            part = inflater.decompress(rest) if room is None else inflater.decompress(rest, room + 1)
        except zlib.error as exc:
            raise CodecError(f"corrupt gzip data: {exc}", key=key, codec=name) from exc
        if room is not None:
            room -= len(part)
            if room < 0:  # stopped one byte past the limit: there is more
                raise too_large(name, key, limit or 0)
        parts.append(part)
        if not inflater.eof:
            raise CodecError("truncated gzip member", key=key, codec=name)
        rest = inflater.unused_data.lstrip(b"\x00")  # gzip tolerates zero padding between members
        if not rest:
            return b"".join(parts)


def _decode_into(codec: Any, data: bytes | memoryview, out: np.ndarray) -> bool:
    """numcodecs ``decode(out=...)`` after the caller checked the sizes; False (decode the usual way, which
    names the key in its error) on any failure."""
    try:
        codec.decode(_as_bytes(data), out=out)
    except Exception:
        return False
    return True


class ZstdCodec(BytesBytesCodec):
    """A Zstandard frame; ``checksum`` adds the frame content checksum, verified on decode."""

    name = "zstd"
    infallible = True
    batch_releases_gil = True

    def __init__(self, level: int, checksum: bool) -> None:
        self.level, self.checksum = level, checksum
        from numcodecs import Zstd

        self._codec = Zstd(level=level, checksum=checksum)

    def encode(self, data: bytes | memoryview) -> bytes:
        if len(data) > _zstd_small():  # numcodecs' context per call costs little next to a large chunk
            return _bytes(self._codec.encode(_as_bytes(data)))
        from rectizarr.codecs import zstd

        return zstd.encode(data, self.level, self.checksum)  # the same bytes, a third of the cost for 1 KiB

    def encode_many(self, rows: np.ndarray, threads: int) -> Frames:
        from rectizarr.codecs import zstd

        if not rows.shape[0] or not rows.shape[1]:  # zstandard refuses empty segments
            return super().encode_many(rows, threads)
        buffer, sizes = zstd.encode_many(rows, self.level, self.checksum, threads)
        return Frames(buffer, np.cumsum(sizes) - sizes, sizes)

    def decode(self, data: bytes | memoryview, key: str | None = None) -> bytes:
        try:
            return _bytes(self._codec.decode(_as_bytes(data)))
        except Exception as exc:
            raise _failed(exc, key, self.name) from exc

    def decode_limited(self, data: bytes | memoryview, key: str | None, limit: int) -> bytes | memoryview:
        return _zstd_limited(data, key, limit, self.name, self.decode)

    def decode_into(self, data: bytes | memoryview, out: np.ndarray) -> bool:
        # The frame must declare exactly out's size. The zstandard binding decodes it in place with this
        # thread's reused context: numcodecs makes one per call (5x the cost of a 1 KiB frame) and its
        # decode took 1.2-1.4x as long for 128 KiB-2 MiB frames too (zstd 1.5.7 in zstandard).
        if _zstd_content_size(data) != out.nbytes:
            return False
        from rectizarr.codecs import zstd

        return zstd.decode_into(data, out) or _decode_into(self._codec, data, out)

    def decode_many_into(self, frames: Frames, out: np.ndarray, rows: np.ndarray, threads: int) -> np.ndarray:
        from rectizarr.codecs import zstd

        if zstd.decode_many(frames.buffer, frames.segments(), out, rows, threads):
            return np.ones(len(frames), dtype=bool)
        return super().decode_many_into(frames, out, rows, threads)  # finds the frames it cannot decode

    def decode_prefix(self, data: bytes | memoryview, out: np.ndarray, n: int) -> bool:
        # only within a first frame that declares exactly out's size and carries no checksum: a checksum
        # is verified only at the end of its frame, which a prefix never reaches
        size = _zstd_content_size(data)  # also checks the magic number
        if size != out.nbytes or bytes(data[4:5])[0] & 0x04:
            return False
        from rectizarr.codecs import zstd

        return zstd.prefix_enabled() and zstd.decode_prefix(data, out, n)


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _zstd_limited(
    data: bytes | memoryview,
    key: str | None,
    limit: int,
    name: str,
    decode: Callable[[bytes | memoryview, str | None], bytes | memoryview],
) -> bytes | memoryview:
    """zstd frames decoded to at most ``limit`` bytes, never allocating more: a first frame declaring more is
    refused from its header, one declaring its size that is the whole value decoded into a buffer of that
    size; anything else (no size or a size of 0 declared, more frames: numcodecs would grow its buffer as long
    as data comes) is first counted through a reused buffer, stopping one byte past the limit, then ``decode``
    (numcodecs, which reports truncated data) makes it."""
    size = _zstd_content_size(data)  # numcodecs allocates what the frame header declares
    if size is not None and size > limit:
        raise too_large(name, key, limit)
    from rectizarr.codecs import zstd

    if size:  # one frame of exactly that size and nothing after it (the usual value): decoded in place
        out = np.empty(size, np.uint8)
        if zstd.decode_into(data, out):
            return memoryview(out).cast("B")
    try:
        counted = zstd.decoded_size(data, limit)  # decoding stops one byte past the limit
    except zstd.ZstdError as exc:
        raise _failed(exc, key, name) from exc
    if counted > limit:
        raise too_large(name, key, limit)
    out2 = decode(data, key)  # bounded now (it holds no more than was counted); reports truncation
    if len(out2) > limit:
        raise too_large(name, key, limit)
    return out2


@functools.cache
def _zstd_small() -> int:
    """Values up to this size are encoded through reused zstandard contexts: 64 KiB (a third of numcodecs'
    cost for 1 KiB), or 256 KiB where zstandard and numcodecs bundle the same libzstd, so that the bytes
    stay zarr-python's (32 MiB of 128 KiB uint16 chunks at level 1: 72-82 ms on one thread, 86-101 ms
    through numcodecs, which makes a context per call; from 512 KiB on, neither is faster). Versions 1.5.6
    and 1.5.7 code some values apart at every level from 256 KiB on, at levels 0 and 3 from 17 KiB."""
    import numcodecs.zstd

    from rectizarr.codecs import zstd

    return (256 if getattr(numcodecs.zstd, "VERSION_NUMBER", None) == zstd.LIBZSTD_VERSION else 64) << 10


def _zstd_content_size(data: bytes | memoryview) -> int | None:
    """The decompressed size a zstd frame header declares, or None (no frame, size not recorded)."""
    head = bytes(data[:18])
    if len(head) < 6 or head[:4] != _ZSTD_MAGIC:
        return None
    descriptor = head[4]
    single_segment = (descriptor >> 5) & 1
    size_flag = descriptor >> 6
    pos = 5 + (1 - single_segment) + (0, 1, 2, 4)[descriptor & 3]  # window byte, dictionary id
    width = (single_segment, 2, 4, 8)[size_flag]
    if width == 0 or len(head) < pos + width:
        return None
    value = int.from_bytes(head[pos : pos + width], "little")
    return value + 256 if width == 2 else value


_SHUFFLE = {"noshuffle": "NOSHUFFLE", "shuffle": "SHUFFLE", "bitshuffle": "BITSHUFFLE"}  # numcodecs.blosc's


def _blosc_whole(data: bytes | memoryview, key: str | None, name: str) -> None:
    """c-blosc trusts the header's compressed size and reads past a shorter buffer (a crash): check it."""
    if len(data) < 16 or int.from_bytes(bytes(data[12:16]), "little") != len(data):
        raise CodecError(
            f"not a whole blosc buffer: the header's compressed size does not match the "
            f"{len(data)}-byte value (truncated or corrupt)",
            key=key,
            codec=name,
        )


def _blosc_declared(data: bytes | memoryview, key: str | None, limit: int, name: str) -> None:
    """A blosc header that declares more than ``limit`` decoded bytes is refused before c-blosc allocates
    them (it allocates what the header declares and decodes no more)."""
    if len(data) >= 8 and int.from_bytes(bytes(data[4:8]), "little") > limit:
        raise too_large(name, key, limit)


class BloscCodec(BytesBytesCodec):
    """Blosc; decoding reads every parameter from the blosc header."""

    name = "blosc"
    infallible = True

    def __init__(
        self,
        cname: str,
        clevel: int,
        shuffle: Literal["noshuffle", "shuffle", "bitshuffle"],
        typesize: int,
        blocksize: int,
    ) -> None:
        from numcodecs import blosc

        if cname not in blosc.list_compressors():
            raise UnsupportedError(f"blosc compressor {cname!r} is not built into this numcodecs")
        self.typesize = typesize
        self._args = (cname.encode(), clevel, getattr(blosc, _SHUFFLE[shuffle]), blocksize, typesize)
        self._codec = blosc.Blosc(
            cname=cname, clevel=clevel, shuffle=self._args[2], blocksize=blocksize, typesize=typesize
        )

    def encode(self, data: bytes | memoryview) -> bytes:
        return _bytes(self._codec.encode(_as_bytes(data)))

    def decode(self, data: bytes | memoryview, key: str | None = None) -> bytes:
        _blosc_whole(data, key, self.name)
        try:
            return _bytes(self._codec.decode(_as_bytes(data)))
        except Exception as exc:
            raise self.error(f"cannot decompress: {exc}", key) from exc

    def decode_limited(self, data: bytes | memoryview, key: str | None, limit: int) -> bytes:
        _blosc_declared(data, key, limit, self.name)
        return self.decode(data, key)

    def decode_into(self, data: bytes | memoryview, out: np.ndarray) -> bool:
        # the header's compressed size (at 12) the value's, its decoded size (at 4) out's
        whole = len(data) >= 16 and int.from_bytes(bytes(data[12:16]), "little") == len(data)
        sizes_ok = whole and int.from_bytes(bytes(data[4:8]), "little") == out.nbytes
        return sizes_ok and _decode_into(self._codec, data, out)

    def encode_many(self, rows: np.ndarray, threads: int) -> Frames:
        # numcodecs' module-level compress with this codec's parameters: the bytes of encode(), without
        # its per-call buffer checks (2.5x the cost for 1 KiB chunks)
        from numcodecs import blosc

        args = self._args
        return Frames.of([blosc.compress(memoryview(row), *args) for row in rows])

    def decode_many_into(self, frames: Frames, out: np.ndarray, rows: np.ndarray, threads: int) -> np.ndarray:
        # the header checks of decode_into for all values at once (so each decodes to one row: the memory
        # is bounded by the output), then c-blosc into new bytes (numcodecs' path into a given buffer costs
        # 2.5x for 1 KiB chunks), joined and copied to their rows at once
        from numcodecs import blosc

        width = out.shape[1]
        done: np.ndarray = (frames.u32_at(12) == frames.sizes.astype(np.int64)) & (frames.u32_at(4) == width)
        view, starts, ends = (
            memoryview(frames.buffer).cast("B"),
            frames.offsets.tolist(),
            (frames.offsets + frames.sizes).tolist(),
        )
        decompress, parts, got = blosc.decompress, [], []
        for i in np.flatnonzero(done).tolist():
            try:
                part = decompress(view[starts[i] : ends[i]])
            except Exception:
                part = b""
            if len(part) == width:
                parts.append(part)
                got.append(i)
            else:
                done[i] = False
        if got:
            out[rows[got]] = np.frombuffer(b"".join(parts), np.uint8).reshape(len(got), width)
        return done


class Crc32cCodec(BytesBytesCodec):
    """Appends the CRC-32C of the data as 4 little-endian bytes; decode verifies and strips it."""

    name = "crc32c"
    infallible = True

    def encode(self, data: bytes | memoryview) -> bytes:
        return bytes(data) + struct.pack("<I", crc32c(data))

    def decode(self, data: bytes | memoryview, key: str | None = None) -> memoryview:
        mv = memoryview(data).cast("B")
        if len(mv) < 4:
            raise self.error(f"{len(mv)} bytes is too short for a checksum", key)
        body = mv[:-4]
        stored = int.from_bytes(mv[-4:], "little")
        actual = crc32c(body)
        if stored != actual:
            raise ChecksumError(
                f"checksum mismatch (stored {stored:#010x}, computed {actual:#010x})",
                key=key,
                codec=self.name,
            )
        return body

    def encoded_size(self, nbytes: int) -> int:
        return nbytes + 4


class NumcodecsBytesBytes(BytesBytesCodec):
    """A numcodecs compressor or checksum (``numcodecs.zlib``, ``numcodecs.crc32`` ...). Decoding with a limit
    never allocates more: ``lz4`` and ``blosc`` headers declaring more are refused before numcodecs allocates
    it; ``zstd``, ``gzip`` and ``lzma`` (the raw formats and filter chains :mod:`.stdlib` leaves to numcodecs)
    stop one byte past it; the others (``shuffle``, the checksums) never decode to more than their input."""

    def __init__(self, name: str, codec: Any) -> None:
        self.name, self.codec = name, codec
        self._id = str(getattr(codec, "codec_id", ""))

    def encode(self, data: bytes | memoryview) -> bytes:
        try:
            return _bytes(self.codec.encode(np.frombuffer(data, dtype=np.uint8)))
        except Exception as exc:  # e.g. shuffle's elementsize not dividing the length
            raise CodecError(f"cannot encode {len(data)} bytes: {exc}", codec=self.name) from exc

    def decode(self, data: bytes | memoryview, key: str | None = None) -> bytes:
        if self._id == "blosc":
            _blosc_whole(data, key, self.name)
        try:
            return _bytes(self.codec.decode(_as_bytes(data)))
        except Exception as exc:
            raise _failed(exc, key, self.name, "decode") from exc

    def decode_limited(self, data: bytes | memoryview, key: str | None, limit: int) -> bytes | memoryview:
        match self._id:
            case "lz4":  # numcodecs' lz4: a signed 32-bit little-endian decoded size, then one LZ4 block
                if len(data) >= 4 and int.from_bytes(bytes(data[:4]), "little", signed=True) > limit:
                    raise too_large(self.name, key, limit)
            case "blosc":
                _blosc_declared(data, key, limit, self.name)
            case "zstd":
                return _zstd_limited(data, key, limit, self.name, self.decode)
            case "gzip":
                return _gunzip(data, key, limit, self.name)
            case "lzma":
                from rectizarr.codecs.stdlib import lzma_limited

                return lzma_limited(data, key, limit, self.name, self.codec.format, self.codec.filters)
        return super().decode_limited(data, key, limit)  # bounded now (lz4 and blosc decode no more
        # than their header declares), or no larger than the input
