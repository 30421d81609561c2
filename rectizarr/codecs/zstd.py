"""Zstandard decoding through the ``zstandard`` package, for what numcodecs' API cannot do: decode only the
first bytes of a frame into the caller's buffer (a read that needs the start of a chunk stops there), and
decode a frame that declares no size without producing more than a bound.

This is the only module that imports ``zstandard``. Each thread reuses one decompressor (its context and
window). Whole frames are still decoded, and all frames encoded, by numcodecs: encoded bytes depend on the
library's version, decoded bytes do not. ``RECTIZARR_ZSTD_PREFIX=0`` in the environment turns prefix
decoding off (every chunk is then decoded whole).
"""

from __future__ import annotations

import functools
import os
import threading

import numpy as np
import zstandard

__all__ = ["ZstdError", "decode_prefix", "decoded_size", "prefix_enabled"]

ZstdError = zstandard.ZstdError
_local = threading.local()


def _decompressor() -> zstandard.ZstdDecompressor:
    """This thread's decompressor (one may not be used by two threads at once)."""
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
        reader = _decompressor().stream_reader(data, read_across_frames=True)
        return bool(reader.readinto(out[:n]) == n)
    except (ZstdError, TypeError, ValueError):  # invalid data; an unsuitable ``out``
        return False


def decoded_size(data: bytes | memoryview, limit: int) -> int:
    """How many bytes the frames in ``data`` decode to, counted up to ``limit + 1``: decoding stops there
    (at most ``limit + 1`` bytes of memory, however much the data would inflate to). Truncated data
    counts what was decoded before its end; invalid data raises :class:`ZstdError`."""
    reader = _decompressor().stream_reader(data, read_across_frames=True)
    return int(reader.readinto(np.empty(limit + 1, np.uint8)))
