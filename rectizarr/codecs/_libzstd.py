"""Zstandard decoding through the C library itself (ctypes), for what numcodecs' API cannot do: decode only
the first bytes of a frame (a read that needs the start of a chunk stops there) with one reused
decompression context per thread.

The library is found on first use: the copy numcodecs links into its ``zstd`` extension (present wherever
numcodecs is, when the platform exports its symbols), else the system's ``libzstd`` (1.4 or later). With
neither, or with ``RECTIZARR_LIBZSTD=0`` in the environment, :func:`decoder` is ``None`` and the zstd codec
decodes whole frames through numcodecs. Only decoding goes through here: its output does not depend on the
library's version, whereas encoded bytes do (encoding stays with numcodecs, as in zarr-python).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["Decoder", "decoder"]

_RESET_SESSION = 1  # ZSTD_reset_session_only
_MIN_VERSION = 10400  # ZSTD_decompressStream and ZSTD_DCtx_reset are stable from 1.4.0


class _Buffer(ctypes.Structure):  # ZSTD_inBuffer and ZSTD_outBuffer share this layout
    _fields_ = [("ptr", ctypes.c_void_p), ("size", ctypes.c_size_t), ("pos", ctypes.c_size_t)]


class Decoder:
    """Decodes zstd frames with a per-thread ``ZSTD_DCtx`` (``ctypes`` releases the GIL during each call)."""

    def __init__(self, lib: Any) -> None:
        size_t, ptr = ctypes.c_size_t, ctypes.c_void_p
        lib.ZSTD_createDCtx.restype = ptr
        lib.ZSTD_createDCtx.argtypes = []
        lib.ZSTD_freeDCtx.restype = size_t
        lib.ZSTD_freeDCtx.argtypes = [ptr]
        lib.ZSTD_DCtx_reset.restype = size_t
        lib.ZSTD_DCtx_reset.argtypes = [ptr, ctypes.c_int]
        lib.ZSTD_decompressStream.restype = size_t
        lib.ZSTD_decompressStream.argtypes = [ptr, ctypes.POINTER(_Buffer), ctypes.POINTER(_Buffer)]
        lib.ZSTD_isError.restype = ctypes.c_uint
        lib.ZSTD_isError.argtypes = [size_t]
        self._lib = lib
        self._local = threading.local()

    def _dctx(self) -> int:
        dctx: int | None = getattr(self._local, "dctx", None)
        if dctx is None:
            dctx = self._lib.ZSTD_createDCtx()
            if not dctx:
                raise MemoryError("ZSTD_createDCtx failed")
            self._local.dctx = dctx
            self._local.owner = _Free(self._lib, dctx)  # freed with the thread's locals
        return dctx

    def decode_prefix(self, data: bytes | memoryview, out: np.ndarray) -> bool:
        """Decode the first ``out.nbytes`` bytes of the frame(s) in ``data`` into ``out`` (C-contiguous
        ``uint8``). False when the data is not valid zstd or decodes to fewer bytes (the caller then decodes
        the usual way, which reports the error); ``out`` may be partly written either way."""
        if out.dtype != np.uint8 or not (out.flags.c_contiguous and out.flags.writeable):
            return False  # the C library writes out.nbytes bytes from its first address
        src = np.frombuffer(data, np.uint8)  # no copy; keeps the buffer alive for the calls below
        lib = self._lib
        dctx = self._dctx()
        if lib.ZSTD_isError(lib.ZSTD_DCtx_reset(dctx, _RESET_SESSION)):
            return False
        dst = _Buffer(out.ctypes.data, out.nbytes, 0)
        inp = _Buffer(src.ctypes.data, src.nbytes, 0)
        while dst.pos < dst.size:
            if inp.pos == inp.size:  # frames ended (or truncated) before the prefix
                return False
            before = (inp.pos, dst.pos)
            if lib.ZSTD_isError(lib.ZSTD_decompressStream(dctx, ctypes.byref(dst), ctypes.byref(inp))):
                return False
            if (inp.pos, dst.pos) == before:  # no progress: malformed input
                return False
        return True


class _Free:
    """Frees a thread's decompression context when the thread's locals go away."""

    def __init__(self, lib: Any, dctx: int) -> None:
        self._lib, self._dctx = lib, dctx

    def __del__(self) -> None:
        try:
            self._lib.ZSTD_freeDCtx(self._dctx)
        except Exception:  # interpreter shutdown
            pass


_lock = threading.Lock()
_loaded = False
_decoder: Decoder | None = None


def decoder() -> Decoder | None:
    """The shared :class:`Decoder`, or ``None`` when no usable zstd library was found (or it is disabled)."""
    global _loaded, _decoder
    if not _loaded:
        with _lock:
            if not _loaded:
                _decoder = _load()
                _loaded = True
    return _decoder


def _load() -> Decoder | None:
    if os.environ.get("RECTIZARR_LIBZSTD", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    for lib in _candidates():
        try:
            lib.ZSTD_versionNumber.restype = ctypes.c_uint
            lib.ZSTD_versionNumber.argtypes = []
            if lib.ZSTD_versionNumber() < _MIN_VERSION:
                continue
            return Decoder(lib)
        except (AttributeError, OSError):  # a library without the symbols we need
            continue
    return None


def _candidates() -> Iterator[Any]:
    paths: list[str] = []
    try:
        import numcodecs.zstd

        paths.append(numcodecs.zstd.__file__ or "")
    except ImportError:
        pass
    if sys.platform == "darwin":
        paths += ["libzstd.1.dylib", "libzstd.dylib", "/opt/homebrew/lib/libzstd.1.dylib",
                  "/usr/local/lib/libzstd.1.dylib"]
    elif sys.platform == "win32":
        paths += ["zstd.dll", "libzstd.dll"]
    else:
        paths += ["libzstd.so.1", "libzstd.so"]
    for path in paths:
        if not path:
            continue
        try:
            yield ctypes.CDLL(path)
        except OSError:
            continue
