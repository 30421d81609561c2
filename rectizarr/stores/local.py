"""A store in a local directory, with plain OS calls and atomic writes."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import secrets
import shutil
import stat
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from rectizarr import tuning
from rectizarr._util import ceildiv, default_workers
from rectizarr.errors import StoreError
from rectizarr.stores.base import (
    DEFAULT_COALESCE_GAP,
    DEFAULT_COALESCE_MAX,
    Buffer,
    ByteRange,
    Capabilities,
    Store,
)
from rectizarr.stores.dirfd import NAME_MAX, O_NOFOLLOW, PATH_MAX, Directories, name_too_long, too_long

__all__ = ["LocalStore"]

_TMP_NAME = re.compile(r"^\..+\.[0-9a-f]{16}\.tmp$")
_MISSING = (FileNotFoundError, NotADirectoryError, IsADirectoryError)
_O_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | getattr(os, "O_BINARY", 0)
            | getattr(os, "O_CLOEXEC", 0))
_OPEN_DIRS = 256  # directory descriptors a batch write holds at once

_T = TypeVar("_T")
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
_O_READ = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
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


def _too_long(path: str) -> bool:
    """True if the file system cannot hold ``path``: a name over NAME_MAX bytes, or the whole over PATH_MAX."""
    return len(encoded := os.fsencode(path)) >= PATH_MAX or any(len(n) > NAME_MAX for n in encoded.split(b"/"))


def _missing(exc: OSError) -> bool:
    """True for a failed open or stat that means "no value there": a socket, or a name too long to exist."""
    return isinstance(exc, _MISSING) or exc.errno in (errno.ENXIO, errno.ENAMETOOLONG)


def _open(path: str) -> int | None:
    try:
        return os.open(path, _O_READ)
    except OSError as exc:
        if _missing(exc):
            return None
        raise


def _with_file(path: str, read: Callable[[int, int | None], _R], guess: bool = False) -> _R | None:
    """``read(fd, size)`` on the regular file at ``path``; None when it is missing or is not a regular file
    (a directory, a device, a named pipe: opened without blocking and never read, so a link to ``/dev/zero``
    or a pipe holds no value, as ``exists`` and listings say). Plain descriptors: an open file object costs
    more than the read of a small chunk.

    With ``guess``, ``read(fd, None)`` comes first, without the ``fstat`` (it costs as much as a small
    read), and its answer is taken unless it is None: it must take only a read of exactly the size it
    expected, one byte short of what it asked for, which a regular file of that size gives and
    ``/dev/zero`` never does (a pipe could, from a writer feeding it: still bounded, never blocking).
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


def _read_file(path: str, byte_range: ByteRange | None) -> bytes | None:
    return _with_file(path, lambda fd, size: _read_fd(fd, size, byte_range))


def _read_fd(fd: int, size: int | None, byte_range: ByteRange | None) -> bytes:
    if byte_range is None:
        assert size is not None
        data = os.read(fd, size + 1)  # a regular file comes whole in one read; +1 sees it grow
        return data if len(data) == size else _read_rest(fd, data)
    start, length = byte_range
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
_READV = hasattr(os, "preadv") and hasattr(os, "readv")


def _buffer(size: int) -> memoryview:
    """This thread's reused read buffer, at least ``size`` bytes (pages already touched: no page faults)."""
    buf: bytearray | None = getattr(_transient, "buf", None)
    if buf is None or len(buf) < size:
        buf = _transient.buf = bytearray(max(size, 1 << 16))
        _transient.view = memoryview(buf)
    view: memoryview = _transient.view
    return view


def _read_transient(path: str, byte_range: ByteRange | None, size_hint: int | None) -> bytes | memoryview | None:
    """:func:`_read_file`, into this thread's buffer when the value is small enough. With ``size_hint``,
    a whole value is read with one ``read`` of ``size_hint + 1`` bytes and no ``fstat`` when exactly
    ``size_hint`` bytes come back (a regular file returns all it has up to the count asked for)."""
    if byte_range is not None and (byte_range[0] < 0 or byte_range[1] is None):
        return _read_file(path, byte_range)
    guess = byte_range is None and size_hint is not None and size_hint < tuning.current().transient_max_bytes
    return _with_file(path, functools.partial(_read_fd_transient, byte_range, size_hint), guess)


def _read_fd_transient(byte_range: ByteRange | None, size_hint: int | None, fd: int,
                       size: int | None) -> bytes | memoryview | None:
    if size is None:  # a guess: a value of ``size_hint`` bytes, or None
        assert size_hint is not None
        view = _buffer(size_hint + 1)
        n = os.readv(fd, [view[: size_hint + 1]])
        return view[:n] if n == size_hint else None
    if byte_range is None:
        if size >= tuning.current().transient_max_bytes:
            data = os.read(fd, size + 1)
            return data if len(data) == size else _read_rest(fd, data)
        view = _buffer(size + 1)
        n = os.readv(fd, [view[: size + 1]])  # +1 sees it grow
        return view[:n] if n == size else _read_rest(fd, bytes(view[:n]))
    start, length = byte_range
    assert length is not None
    if length >= tuning.current().transient_max_bytes or length == 0:
        return _read_range(fd, start, length)
    view = _buffer(length)
    got = 0
    while got < length and (n := os.preadv(fd, [view[got:length]], start + got)):
        got += n
    return view[:got]


def _readv_into(view: memoryview, extra: bytearray, fd: int, size: int | None) -> int | None:
    """What ``read_into`` reads of one file: a guess (``size`` None) takes only a value of the view's size."""
    n = os.readv(fd, [view, extra])
    return n if size is not None or n == len(view) else None


class LocalStore(Store):
    """A store in the directory ``root``; key ``a/b/c`` is the file ``root/a/b/c``.

    Reads use plain ``open``/``seek``/``read``; batches run in a thread pool of ``workers`` threads.
    Every write goes to a uniquely named temporary file in the destination directory
    (``.{name}.{random}.tmp``, never listed) that is then renamed over the key, so a reader or a crash
    only ever sees the old or the new value. With ``fsync=True`` the file and its directory are
    flushed to disk before the write returns. ``set_many`` opens (and makes) each directory once per
    batch, segment by segment from the root, and writes by name in the opened directory; deleting the
    last key of a directory removes the emptied directories. Writes and deletes through a symbolic link
    that leads outside ``root`` are refused, also when a directory is swapped for one meanwhile (reads
    follow links). A key that is not a regular file (a device, a pipe) reads as missing. The version of
    a key is ``(size, mtime_ns, inode)``; every write makes a new inode. Pickles by path.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        read_only: bool = False,
        fsync: bool = False,
        coalesce_gap: int = DEFAULT_COALESCE_GAP,
        coalesce_max: int = DEFAULT_COALESCE_MAX,
        workers: int | None = None,
    ) -> None:
        super().__init__(read_only=read_only, coalesce_gap=coalesce_gap, coalesce_max=coalesce_max)
        self.root = os.path.abspath(os.fspath(root))
        self.fsync = fsync
        self.workers = workers or default_workers()
        self._real_root = os.path.realpath(self.root)
        self.lock_identity = f"local:{self._real_root}/"  # a store on a subdirectory shares the parent's
        self._root_slash = os.path.join(self.root, "")

    def __repr__(self) -> str:
        return f"LocalStore({self.root!r}, read_only={self.read_only})"

    def _path(self, key: str) -> str:
        if os.sep == "/":  # keys are validated: no backslash, no '.' or '..' segment
            return self._root_slash + key
        return os.path.join(self.root, *key.split("/"))

    def _map(self, fn: Callable[[_T], _R], args: Sequence[_T]) -> list[_R]:
        """``[fn(a) for a in args]`` on up to ``workers`` threads, in slices (one task per value is slow)."""
        workers = min(self.workers, len(args))
        if workers <= 1 or threading.current_thread().name.startswith("rectizarr"):
            # One thread, or inside a worker of rectizarr's engine, which already keeps the cores busy.
            return [fn(a) for a in args]
        step = ceildiv(len(args), 4 * workers)
        slices = [args[i : i + step] for i in range(0, len(args), step)]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return [r for part in pool.map(lambda part: [fn(a) for a in part], slices) for r in part]

    # ---- reads ---------------------------------------------------------------------------------------

    def _get_batch(self, requests: Sequence[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        if len(requests) == 1:  # the engine reads local chunks one by one in its workers
            key, byte_range = requests[0]
            return [_read_file(self._path(key), byte_range)]
        return self._map(lambda r: _read_file(self._path(r[0]), r[1]), requests)

    capabilities = Capabilities(low_latency=True, native_read_into=True, cheap_versions=True,
                                consistent_listing=True)

    def get_transient(self, key: str, byte_range: ByteRange | None = None,
                      size_hint: int | None = None) -> bytes | memoryview | None:
        if not _READV:
            return _read_file(self._path(key), byte_range)
        return _read_transient(self._path(key), byte_range, size_hint)

    def read_into(self, keys: Sequence[str], views: Sequence[memoryview]) -> list[int]:
        """See :meth:`Store.read_into`: one ``readv`` per file, into the view and one spare byte."""
        extra = bytearray(1)
        sizes = []
        path, partial = self._path, functools.partial
        for key, view in zip(keys, views, strict=False):
            n = _with_file(path(key), partial(_readv_into, view, extra), True)
            sizes.append(-1 if n is None else n)
        return sizes

    def _info(self, key: str) -> tuple[int, Hashable] | None:
        try:
            st = os.stat(self._path(key))
        except OSError as exc:
            if _missing(exc):
                return None
            raise
        if not stat.S_ISREG(st.st_mode):
            return None
        return st.st_size, (st.st_size, st.st_mtime_ns, st.st_ino)

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        return self._walk(self._path(prefix[:-1]) if prefix else self.root, prefix)

    def _walk(self, directory: str, prefix: str) -> Iterator[str]:
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except OSError as exc:
            if _missing(exc):
                return
            raise
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                yield from self._walk(entry.path, f"{prefix}{entry.name}/")
            elif entry.is_file() and not _TMP_NAME.match(entry.name):
                yield prefix + entry.name

    def _list_dir(self, prefix: str) -> Iterable[str]:
        try:
            with os.scandir(self._path(prefix[:-1]) if prefix else self.root) as it:
                entries = list(it)
        except OSError as exc:
            if _missing(exc):
                return []
            raise
        return [
            e.name
            for e in entries
            if e.is_dir(follow_symlinks=False) or (e.is_file() and not _TMP_NAME.match(e.name))
        ]

    # ---- writes --------------------------------------------------------------------------------------

    def _dirs(self, *, create: bool) -> Directories:
        return Directories(self.root, self._real_root, create=create)

    def _set_batch(self, items: Mapping[str, Buffer]) -> None:
        work: list[tuple[str, str, str, Buffer]] = []  # (directory, name, key, value)
        for key, value in items.items():
            directory, _, name = key.rpartition("/")
            if _TMP_NAME.match(name):
                raise StoreError(f"cannot store key {key!r}: the name is reserved for LocalStore temporary files")
            if len(key) > NAME_MAX // 4 and _too_long(self._path(key)):
                raise too_long(key)
            work.append((directory, name, key, value))
        work.sort(key=lambda w: w[0])
        start = 0
        while start < len(work):  # in runs holding at most _OPEN_DIRS directory descriptors
            with self._dirs(create=True) as dirs:
                run: list[tuple[int, str, str, Buffer]] = []
                leaves: set[int] = set()
                while start < len(work) and (len(dirs) < _OPEN_DIRS or work[start][0] == work[start - 1][0]):
                    directory, name, key, value = work[start]
                    fd = dirs.open(directory, key)
                    assert fd is not None  # made when missing
                    run.append((fd, name, key, value))
                    leaves.add(fd)
                    start += 1
                self._map(self._write_one, run)
                if self.fsync:
                    for fd in leaves:
                        os.fsync(fd)

    def _write_one(self, item: tuple[int, str, str, Buffer], again: bool = True) -> None:
        dir_fd, name, key, value = item
        tmp = f".{name if len(name.encode()) <= 200 else 'long'}.{secrets.token_hex(8)}.tmp"  # fits if the name does
        try:
            fd = os.open(tmp, _O_FLAGS, 0o666, dir_fd=dir_fd)
        except FileNotFoundError:  # a concurrent delete removed the directory: make it again, once
            if not again:
                raise self._removed(key) from None
            with self._dirs(create=True) as dirs:
                fresh = dirs.open(key.rpartition("/")[0], key)
                assert fresh is not None
                return self._write_one((fresh, name, key, value), again=False)
        except OSError as exc:
            raise name_too_long(exc, key) or exc from None
        try:
            with open(fd, "wb", buffering=0) as f:
                view = memoryview(value).cast("B")
                while view:
                    view = view[f.write(view) or 0 :]
                if self.fsync:
                    os.fsync(fd)
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            if isinstance(exc, IsADirectoryError):
                raise StoreError(
                    f"cannot store key {key!r}: {self._path(key)!r} is a directory (it has keys below it)"
                ) from exc
            if isinstance(exc, FileNotFoundError):
                raise self._removed(key) from exc
            if isinstance(exc, OSError) and (error := name_too_long(exc, key)) is not None:
                raise error from exc
            raise

    def _removed(self, key: str) -> StoreError:
        return StoreError(f"cannot store key {key!r} in {self.root!r}: its directory was removed while writing")

    def _delete_batch(self, keys: Sequence[str]) -> None:
        with self._dirs(create=False) as dirs:
            touched = set()
            for key in keys:
                directory, _, name = key.rpartition("/")
                dir_fd = dirs.open(directory, key)
                if dir_fd is None:
                    continue
                touched.add(directory)
                try:
                    if not stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                        os.unlink(name, dir_fd=dir_fd)
                except OSError as exc:
                    if not _missing(exc):
                        raise
            for directory in sorted(touched, reverse=True):
                dirs.prune(directory)

    def _delete_prefix(self, prefix: str) -> None:
        if not prefix:  # everything but in-flight temporary files; links are removed, never followed
            try:
                with os.scandir(self.root) as it:
                    entries = [e for e in it if not _TMP_NAME.match(e.name)]
            except _MISSING:
                return
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
            return
        directory, _, name = prefix[:-1].rpartition("/")
        with self._dirs(create=False) as dirs:
            dir_fd = dirs.open(directory, prefix)
            if dir_fd is None:
                return
            if dirs.is_link_inside(dir_fd, name, prefix[:-1], prefix):  # drop the link only
                os.unlink(name, dir_fd=dir_fd)
            else:
                try:
                    shutil.rmtree(name, dir_fd=dir_fd)
                except OSError as exc:
                    if not _missing(exc):
                        raise
            dirs.prune(directory)
