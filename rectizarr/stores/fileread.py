"""Reads of regular files by path with plain descriptors (an open file object costs more than the read
of a small chunk): whole values, ranges, into this thread's reused buffer or into a caller's view. A path
that is not a regular file (a directory, a device, a named pipe, a socket) reads as missing: it is opened
without blocking and never read, so a link to ``/dev/zero`` or a pipe cannot take memory or block."""

from __future__ import annotations

import errno
import functools
import os
import stat
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from rectizarr import tuning
from rectizarr.stores.dirfd import O_DIR
from rectizarr.stores.keys import ByteRange

MISSING = (FileNotFoundError, NotADirectoryError, IsADirectoryError)

_R = TypeVar("_R")


def _read_exact(f: Callable[[int], bytes | None], length: int) -> bytes:
    parts: list[bytes] = []
    remaining = length
    while remaining > 0:
        chunk = f(remaining)
        if not chunk:
            break
        parts.append(chunk)
        remaining -= len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


# O_NONBLOCK: opening a named pipe must not wait for a writer (regular files ignore the flag).
_O_READ = (
    os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
)
_PREAD = hasattr(os, "pread")


def _read_rest(fd: int, first: bytes) -> bytes:
    """``first`` plus everything after it up to the end of the file."""
    parts = [first]
    while part := os.read(fd, 1 << 20):
        parts.append(part)
    return b"".join(parts)


def _read_range(fd: int, start: int, length: int) -> bytes:
    """Up to ``length`` bytes from ``start`` (fewer at the end of the file)."""
    if _PREAD:
        data = os.pread(fd, length, start)
        if len(data) == length or not data:
            return data
        return data + _read_exact(lambda n: os.pread(fd, n, start + len(data)), length - len(data))
    os.lseek(fd, start, os.SEEK_SET)
    return _read_exact(lambda n: os.read(fd, n), length)


def missing(exc: OSError) -> bool:
    """True for a failed open or stat that means "no value there": a socket, or a name too long to exist."""
    return isinstance(exc, MISSING) or exc.errno in (errno.ENXIO, errno.ENAMETOOLONG)


def _open(path: str, flags: int = _O_READ) -> int | None:
    try:
        return os.open(path, flags)
    except OSError as exc:
        if missing(exc):
            return None
        raise


def with_file(path: str, read: Callable[[int, int | None], _R], guess: bool = False) -> _R | None:
    """``read(fd, size)`` on the regular file at ``path``; None when it is missing or is not a regular file
    (it holds no value, as ``exists`` and listings say). With ``guess``, ``read(fd, None)`` comes first,
    without the ``fstat`` (it costs as much as a small read), and its answer is taken unless it is None:
    it must take only a non-empty read that returned less than it asked for, which a regular file gives
    and ``/dev/zero`` never does (a pipe could, from a writer feeding it: still bounded, never blocking).
    Otherwise the file is checked and read again from its start."""
    fd = _open(path)
    if fd is None:
        return None
    try:
        if guess:
            try:
                got = read(fd, None)
            except OSError:  # a directory (EISDIR), a pipe with a writer but no data (EAGAIN): checked below
                got = None
            if got is not None:
                return got
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if guess:
            os.lseek(fd, 0, os.SEEK_SET)
        return read(fd, st.st_size)
    finally:
        os.close(fd)


def read_file(path: str, byte_range: ByteRange | None) -> bytes | None:
    return with_file(path, lambda fd, size: _read_fd(fd, size, byte_range))


def _within(size: int, start: int, length: int) -> int:
    """How many of ``length`` bytes from ``start`` a file of ``size`` bytes can give (a range asked for
    by a corrupt shard index may claim terabytes: never allocated, never past what the file holds)."""
    return max(0, min(length, size - start))


def _read_fd(fd: int, size: int | None, byte_range: ByteRange | None) -> bytes:
    if byte_range is None:
        assert size is not None
        data = os.read(fd, size + 1)  # a regular file comes whole in one read; +1 sees it grow
        return data if len(data) == size else _read_rest(fd, data)
    start, length = byte_range
    if size is not None and start >= 0 and length is not None:
        length = _within(size, start, length)
        if not length:
            return b""
    if start >= 0 and length is not None:
        return _read_range(fd, start, length)
    if start < 0:
        try:
            os.lseek(fd, start, os.SEEK_END)
        except OSError:  # the suffix is longer than the file: read all of it
            os.lseek(fd, 0, os.SEEK_SET)
    else:
        os.lseek(fd, start, os.SEEK_SET)
    rest = os.read(fd, 1 << 20) if length is None else _read_exact(lambda n: os.read(fd, n), length)
    return _read_rest(fd, rest) if length is None and rest else rest


_transient = threading.local()
READV = hasattr(os, "preadv") and hasattr(os, "readv")


def _buffer(size: int) -> memoryview:
    """This thread's reused read buffer, at least ``size`` bytes (pages already touched: no page faults)."""
    buf: bytearray | None = getattr(_transient, "buf", None)
    if buf is None or len(buf) < size:
        buf = _transient.buf = bytearray(max(size, 1 << 16))
        _transient.view = memoryview(buf)
    view: memoryview = _transient.view
    return view


def read_transient(
    path: str, byte_range: ByteRange | None, size_hint: int | None
) -> bytes | memoryview | None:
    """:func:`read_file`, into this thread's buffer when the value is small enough. With ``size_hint``,
    a whole value is read with one ``read`` of ``size_hint + 1`` bytes and no ``fstat`` when exactly
    ``size_hint`` bytes come back (a regular file returns all it has up to the count asked for)."""
    if byte_range is not None and (byte_range[0] < 0 or byte_range[1] is None):
        return read_file(path, byte_range)
    guess = byte_range is None and size_hint is not None and size_hint < tuning.current().transient_max_bytes
    return with_file(path, functools.partial(_read_fd_transient, byte_range, size_hint), guess)


def _read_fd_transient(
    byte_range: ByteRange | None, size_hint: int | None, fd: int, size: int | None
) -> bytes | memoryview | None:
    if size is None:  # a guess: a value of ``size_hint`` bytes, or None
        assert size_hint is not None
        view = _buffer(size_hint + 1)
        n = os.readv(fd, [view[: size_hint + 1]])
        return view[:n] if n == size_hint else None
    if byte_range is None:
        if size >= tuning.current().transient_max_bytes:
            return _read_fd(fd, size, None)
        view = _buffer(size + 1)
        n = os.readv(fd, [view[: size + 1]])  # +1 sees it grow
        return view[:n] if n == size else _read_rest(fd, bytes(view[:n]))
    start, length = byte_range
    assert length is not None
    if length >= tuning.current().transient_max_bytes:  # large: fresh bytes (however few the file holds)
        return _read_range(fd, start, _within(size, start, length))
    length = _within(size, start, length)
    if not length:
        return b""
    view = _buffer(length)
    got = 0
    while got < length and (n := os.preadv(fd, [view[got:length]], start + got)):
        got += n
    return view[:got]


def read_into(path: str, view: memoryview, extra: bytearray) -> int:
    """One ``readv`` of the file at ``path`` into ``view`` and the one spare byte ``extra``: how many bytes
    came, -1 if it is missing or not a regular file."""
    fd = _open(path)
    if fd is None:
        return -1
    try:
        return _readv_whole(fd, view, extra)
    finally:
        os.close(fd)


_DIR_FD = os.open in os.supports_dir_fd and hasattr(os, "O_DIRECTORY") and hasattr(os, "readv")


def read_many_into(root: str, keys: Sequence[str], views: Sequence[memoryview]) -> list[int]:
    """:func:`read_into` of the file ``root + key`` of each key into the view beside it. Consecutive keys
    in one directory are opened by name in it, its descriptor opened once (one path walk per directory)."""
    extra, sizes = bytearray(1), [-1] * len(keys)
    if not _DIR_FD:
        return [read_into(root + key, view, extra) for key, view in zip(keys, views, strict=True)]
    current, dfd = None, None
    try:
        for i, (key, view) in enumerate(zip(keys, views, strict=True)):
            head, _, name = key.rpartition("/")
            if head != current:
                if dfd is not None:
                    os.close(dfd)
                current, dfd = head, _open(root + head, O_DIR)
            if dfd is None:
                continue
            try:
                fd = os.open(name, _O_READ, dir_fd=dfd)
            except OSError as exc:
                if missing(exc):
                    continue
                raise
            try:
                sizes[i] = _readv_whole(fd, view, extra)
            finally:
                os.close(fd)
    finally:
        if dfd is not None:
            os.close(dfd)
    return sizes


def _readv_whole(fd: int, view: memoryview, extra: bytearray) -> int:
    """The value of ``fd`` read into ``view`` and ``extra``: taken at once when it fits the view (see
    :func:`with_file`); an empty read or one that overflows into ``extra`` (a larger value, ``/dev/zero``)
    is checked (-1: not a regular file) and read again from its start."""
    try:
        n = os.readv(fd, [view, extra])
    except OSError:  # a directory (EISDIR), a pipe with a writer but no data (EAGAIN): checked below
        n = 0
    if 0 < n <= len(view):
        return n
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        return -1
    os.lseek(fd, 0, os.SEEK_SET)
    return os.readv(fd, [view, extra])
