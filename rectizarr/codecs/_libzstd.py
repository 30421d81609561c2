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
_STABLE_OUT = 1001  # ZSTD_d_stableOutBuffer (ZSTD_d_experimentalParam2), from 1.4.4; else buffered
_MORE_INPUT = 32 << 10  # compressed bytes given beyond the estimate, and per further step


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
        lib.ZSTD_DCtx_setParameter.restype = size_t
        lib.ZSTD_DCtx_setParameter.argtypes = [ptr, ctypes.c_int, ctypes.c_int]
        self._lib = lib
        self._local = threading.local()
        probe = _Free(lib, self._new_dctx())
        self._stable = not lib.ZSTD_isError(lib.ZSTD_DCtx_setParameter(probe.dctx, _STABLE_OUT, 1))
        del probe

    def _new_dctx(self) -> int:
        dctx: int | None = self._lib.ZSTD_createDCtx()
        if not dctx:
            raise MemoryError("ZSTD_createDCtx failed")
        return dctx

    def _dctx(self, stable: bool) -> int:
        name = "stable" if stable else "buffered"
        dctx: int | None = getattr(self._local, name, None)
        if dctx is None:
            dctx = self._new_dctx()
            setattr(self._local, name + "_owner", _Free(self._lib, dctx))  # freed with the thread's locals
            if stable:
                self._lib.ZSTD_DCtx_setParameter(dctx, _STABLE_OUT, 1)
            setattr(self._local, name, dctx)
        return dctx

    def decode_prefix(self, data: bytes | memoryview, out: np.ndarray, n: int | None = None) -> bool:
        """Decode at least the first ``n`` bytes (default ``out.nbytes``) of the frame(s) in ``data`` into
        ``out`` (C-contiguous ``uint8``); with ``n``, ``out`` must hold the whole first frame, of which the
        bytes past ``n`` are unspecified. False when the data is not valid zstd or decodes to fewer bytes
        (the caller then decodes the usual way, which reports the error); ``out`` may be partly written
        either way."""
        if out.dtype != np.uint8 or not (out.flags.c_contiguous and out.flags.writeable):
            return False  # the C library writes up to out.nbytes bytes from its first address
        if n is not None and n < out.nbytes:
            return self._stable_prefix(data, out, n) if self._stable else self._buffered(data, out[:n])
        return self._buffered(data, out)

    def _stable_prefix(self, data: bytes | memoryview, out: np.ndarray, n: int) -> bool:
        """Straight into ``out`` (zstd's stable output buffer: no copy through its own window), fed with about
        as much input as ``n`` bytes of output need (at the frame's average ratio), then a little more at
        a time until ``n`` bytes are out."""
        session = self._begin(data, out, stable=True)
        if session is None:
            return False
        dst, inp = session
        total = inp.size
        inp.size = min(total, n * total // out.nbytes + _MORE_INPUT)
        while dst.pos < n:
            step = self._step(dst, inp, stable=True)
            if step is None:
                return False
            if dst.pos >= n:
                break
            if inp.size == total and not step[1]:  # all input given, no progress
                return False
            inp.size = min(total, inp.size + _MORE_INPUT)
        return True

    def _buffered(self, data: bytes | memoryview, out: np.ndarray) -> bool:
        session = self._begin(data, out, stable=False)
        if session is None:
            return False
        dst, inp = session
        while dst.pos < dst.size:
            if inp.pos == inp.size:  # frames ended (or truncated) before the prefix
                return False
            step = self._step(dst, inp, stable=False)
            if step is None or not step[1]:  # invalid, or no progress: malformed input
                return False
        return True

    def decode_bounded(self, data: bytes | memoryview, limit: int) -> bytes | int | None:
        """All frames in ``data`` decoded; ``-1`` when they decode to more than ``limit`` bytes (decoding
        stops one byte past it: at most ``limit + 1`` bytes of memory); None when they are invalid."""
        out = np.empty(limit + 1, np.uint8)
        session = self._begin(data, out, stable=False)
        if session is None:
            return None
        dst, inp = session
        left = 1  # ZSTD_decompressStream's hint: 0 once a frame is complete
        while inp.pos < inp.size or left:
            step = self._step(dst, inp, stable=False)
            if dst.pos > limit:
                return -1
            if step is None or not step[1]:
                return None  # invalid, or truncated (no progress)
            left = step[0]
        return out[: dst.pos].tobytes()

    def _begin(self, data: bytes | memoryview, out: np.ndarray, *, stable: bool) -> tuple[_Buffer, _Buffer] | None:
        """A new decompression session of this thread's context: the output and input buffers (None when the
        context cannot be reset). The caller keeps ``data`` and ``out`` alive while it steps."""
        if self._lib.ZSTD_isError(self._lib.ZSTD_DCtx_reset(self._dctx(stable), _RESET_SESSION)):
            return None
        src = np.frombuffer(data, np.uint8)  # no copy
        return _Buffer(out.ctypes.data, out.nbytes, 0), _Buffer(src.ctypes.data, src.nbytes, 0)

    def _step(self, dst: _Buffer, inp: _Buffer, *, stable: bool) -> tuple[int, bool] | None:
        """One ``ZSTD_decompressStream`` call: its hint and whether it consumed or produced anything; None
        on a zstd error."""
        before = (inp.pos, dst.pos)
        hint = self._lib.ZSTD_decompressStream(self._dctx(stable), ctypes.byref(dst), ctypes.byref(inp))
        if self._lib.ZSTD_isError(hint):
            return None
        return hint, (inp.pos, dst.pos) != before


class _Free:
    """Frees a thread's decompression context when the thread's locals go away."""

    def __init__(self, lib: Any, dctx: int) -> None:
        self._lib, self.dctx = lib, dctx

    def __del__(self) -> None:
        try:
            self._lib.ZSTD_freeDCtx(self.dctx)
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
