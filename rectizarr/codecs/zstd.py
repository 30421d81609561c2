"""Zstandard through the ``zstandard`` package (the only module that imports it), for what numcodecs' API
cannot do: decode only the first bytes of a frame (a read that needs the start of a chunk stops there), count
what a frame without a declared size decodes to within a bound, decode frames straight into the caller's
memory (:func:`decode_into`, :func:`decode_many`), and encode with reused contexts (:func:`encode`: numcodecs
makes one per call). Each thread reuses one decompressor, and one compressor per parameters.
``RECTIZARR_ZSTD_PREFIX=0`` in the environment turns prefix decoding off (chunks are then decoded whole)."""

from __future__ import annotations

import functools
import os
import threading

import numpy as np
import zstandard

from rectizarr import tuning

ZstdError = zstandard.ZstdError
LIBZSTD_VERSION = (
    10000 * zstandard.ZSTD_VERSION[0] + 100 * zstandard.ZSTD_VERSION[1] + zstandard.ZSTD_VERSION[2]
)
"""The version of the libzstd ``zstandard`` bundles, as numcodecs' ``zstd.VERSION_NUMBER`` gives its own."""
_local = threading.local()


def thread_decompressor() -> zstandard.ZstdDecompressor:
    """This thread's decompressor (one may not be used by two threads at once), made on its first use and
    reused after. Internal (the codec's helpers use it); public so that tests can check the reuse."""
    dctx: zstandard.ZstdDecompressor | None = getattr(_local, "dctx", None)
    if dctx is None:
        dctx = _local.dctx = zstandard.ZstdDecompressor()
    return dctx


@functools.cache
def prefix_enabled() -> bool:
    """False when ``RECTIZARR_ZSTD_PREFIX`` is ``0``/``false``/``no``/``off`` (read once per process)."""
    return os.environ.get("RECTIZARR_ZSTD_PREFIX", "1").strip().lower() not in ("0", "false", "no", "off")


def decode_prefix(data: bytes | memoryview, out: np.ndarray, n: int) -> bool:
    """Decode the first ``n`` bytes of the frames in ``data`` into ``out[:n]`` (``out``: C-contiguous,
    writeable ``uint8``; nothing past ``n`` is written). False, never an exception, when the data is not
    valid zstd before that point or decodes to fewer bytes; ``out[:n]`` may be partly written then."""
    try:
        reader = thread_decompressor().stream_reader(data, read_across_frames=True)
        return bool(reader.readinto(out[:n]) == n)
    except (ZstdError, TypeError, ValueError):  # invalid data; an unsuitable ``out``
        return False


def decoded_size(data: bytes | memoryview, limit: int) -> int:
    """How many bytes the frames in ``data`` decode to, counted up to ``limit + 1``: decoding stops there.
    Decoded through one reused 1 MiB buffer, so memory is bounded whatever the data would inflate to and
    whatever ``limit`` (a declared chunk size) claims. Truncated data counts what was decoded before its
    end; invalid data raises :class:`ZstdError`."""
    reader = thread_decompressor().stream_reader(data, read_across_frames=True)
    buffer = np.empty(min(limit + 1, tuning.current().zstd_count_buffer), np.uint8)
    total = 0
    while total <= limit:
        got = int(reader.readinto(buffer[: min(buffer.size, limit + 1 - total)]))
        if not got:
            break
        total += got
    return total


def decode_into(data: bytes | memoryview, out: np.ndarray) -> bool:
    """Decode ``data``, one frame that declares its size, into ``out`` (C-contiguous ``uint8``) when it decodes
    to exactly ``out.nbytes``; False, never an exception, otherwise (invalid data, another size, more frames)."""
    try:
        reader = thread_decompressor().stream_reader(data, read_across_frames=True)
        # then one more byte asked for: none when the frame ended (its checksum, if any, verified) and no
        # frame follows
        return bool(reader.readinto(memoryview(out).cast("B")) == out.nbytes and not reader.read(1))
    except (ZstdError, TypeError, ValueError):
        return False


def decode_many(
    buffer: bytes | memoryview, segments: np.ndarray, out: np.ndarray, rows: np.ndarray, threads: int
) -> bool:
    """Decode the frame at each ``(offset, size)`` row of ``segments`` (inside ``buffer``) into row
    ``rows[i]`` of ``out`` (C-contiguous ``uint8``, ``(m, row_bytes)``), with one call on ``threads``
    threads that do not hold the GIL. All or nothing: False, never an exception, when any frame is invalid
    or does not decode to exactly ``row_bytes`` (then decode them one by one)."""
    n, width = len(segments), out.shape[1]
    t = tuning.current()
    threads = threads if n >= t.zstd_frames_per_thread * threads else 0  # threads are started per call
    if not threads and width >= t.zstd_large_frame:  # each straight into its row: no copies of the output
        view = memoryview(buffer)
        return all(
            decode_into(view[start : start + size], out[row])
            for (start, size), row in zip(segments.tolist(), rows.tolist(), strict=True)
        )
    try:
        frames = zstandard.BufferWithSegments(buffer, np.ascontiguousarray(segments, np.uint64).tobytes())
        got = thread_decompressor().multi_decompress_to_buffer(
            frames, decompressed_sizes=np.full(n, width, np.uint64).tobytes(), threads=max(0, threads)
        )
    except (ZstdError, TypeError, ValueError):
        return False
    # every frame decoded to exactly ``width`` bytes (another size is an error above): joined in one C
    # call (the segments are buffers), then copied to their rows at once
    joined = np.frombuffer(b"".join(got), np.uint8).reshape(n, width)  # type: ignore[arg-type]  # buffers
    if n and int(rows[0]) == 0 and int(rows[-1]) == n - 1:  # rows 0..n-1 (rows are increasing)
        out[:n] = joined
    else:
        out[rows] = joined
    return True


def _compressor(level: int, checksum: bool) -> zstandard.ZstdCompressor:
    cache: dict[tuple[int, bool], zstandard.ZstdCompressor] | None = getattr(_local, "cctx", None)
    if cache is None:
        cache = _local.cctx = {}
    cctx = cache.get((level, checksum))
    if cctx is None:
        cctx = cache[level, checksum] = zstandard.ZstdCompressor(level=level, write_checksum=checksum)
    return cctx


def encode(data: bytes | memoryview, level: int, checksum: bool) -> bytes:
    """One frame of ``data`` (with its size; a checksum if ``checksum``) by this thread's compressor."""
    return _compressor(level, checksum).compress(data)


def encode_many(rows: np.ndarray, level: int, checksum: bool, threads: int) -> tuple[bytes, np.ndarray]:
    """Each row of ``rows`` (C-contiguous ``uint8``, ``(n, row_bytes)``) as one frame (the bytes of
    :func:`encode`), with one call on up to ``threads`` threads: the frames back to back, and their sizes."""
    n, width = rows.shape
    segments = np.stack(
        [np.arange(n, dtype=np.uint64) * np.uint64(width), np.full(n, width, np.uint64)], axis=1
    )
    threads = threads if n >= tuning.current().zstd_frames_per_thread // 8 * threads else 0
    got = _compressor(level, checksum).multi_compress_to_buffer(
        zstandard.BufferWithSegments(memoryview(rows).cast("B"), segments.tobytes()), threads=threads
    )
    parts = [got[i] for i in range(n)]
    sizes = np.fromiter(map(len, parts), dtype=np.uint64, count=n)
    return b"".join(parts), sizes  # type: ignore[arg-type]  # segments are buffers (untyped)
