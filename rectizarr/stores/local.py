"""A store in a local directory, with plain OS calls and atomic writes."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

from rectizarr import threads, tuning
from rectizarr._util import ceildiv, default_workers, process_alive, this_host
from rectizarr.errors import StoreError
from rectizarr.stores.base import Capabilities, Store
from rectizarr.stores.dirfd import NAME_MAX, O_NOFOLLOW, Directories, name_too_long, path_too_long, too_long
from rectizarr.stores.fileread import READV, missing, read_file, read_into, read_many_into, read_transient
from rectizarr.stores.keys import Buffer, ByteRange

_TMP_NAME = re.compile(r"^\..+\.[0-9a-f]{16}\.tmp$")
# a temporary file's writer: its process id and machine (a hash of the host name: another machine's
# processes, on a shared file system, are not known here)
_WRITER = re.compile(r"\.p([0-9]+)-([0-9a-f]{6})\.[0-9a-f]{16}\.tmp$")
_swept: set[tuple[str, str]] = set()  # (root, directory) whose killed writers' temporary files were removed


_O_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | O_NOFOLLOW
    | getattr(os, "O_BINARY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)

_T = TypeVar("_T")
_R = TypeVar("_R")


def _sweep(root: str, directory: str, dir_fd: int) -> None:
    """Remove the temporary files in a directory whose writer process is gone (killed while writing): done
    by the first write of each process to each directory (``directory`` of the store at ``root``)."""
    if (root, directory) in _swept:
        return
    _swept.add((root, directory))
    try:
        names = os.listdir(dir_fd)
    except OSError:
        return
    for name in names:
        found = _WRITER.search(name) if name.startswith(".") else None
        if (
            found is None
            or found.group(2) != this_host()
            or not _TMP_NAME.match(name)
            or process_alive(int(found.group(1)))
        ):
            continue
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)


def _range_bytes(requests: Sequence[tuple[str, ByteRange | None]]) -> int | None:
    """The bytes ``requests`` ask for, when every one is a range of known length (None otherwise)."""
    total = 0
    for _, byte_range in requests:
        if byte_range is None:
            return None
        start, length = byte_range
        if length is None and start >= 0:
            return None
        total += -start if length is None else length
    return total


class LocalStore(Store):
    """A store in the directory ``root``; key ``a/b/c`` is the file ``root/a/b/c``. Reads use plain
    descriptors; batches run on ``workers`` threads.

    A write goes to a uniquely named temporary file in its directory (``.{name}.p{pid}-{host}.{random}.tmp``,
    never listed) renamed over the key: a reader or a crash sees the old or the new value. A process's
    first write into a directory removes the temporary files there of writers no longer running. With
    ``fsync=True`` the file and its directory reach the disk before the write returns. ``set_many`` opens
    (makes) each directory once per batch, segment by segment from the root (:mod:`~rectizarr.stores.dirfd`:
    writes and deletes through a link out of ``root`` are refused; reads follow links); deleting a
    directory's last key removes the emptied directories. A key that is not a regular file (a device, a
    pipe) reads as missing. Versions are ``(size, mtime_ns, inode)`` (every write makes a new inode).
    Pickles by path."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        read_only: bool = False,
        fsync: bool = False,
        coalesce_gap: int | None = None,
        coalesce_max: int | None = None,
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

    def _map(
        self, fn: Callable[[_T], _R], args: Sequence[_T], nbytes: int | None, many: int | None
    ) -> list[_R]:
        """``[fn(a) for a in args]``, on up to ``workers`` threads in slices when the batch is large:
        ``nbytes`` (None: unknown) from ``Tuning.local_threaded_bytes``, or ``many`` values (None: never by
        count); below, a hand-off costs more than the work (measured: ``Tuning.local_threaded_*``)."""
        workers = min(self.workers, len(args))
        large = (nbytes is not None and nbytes >= tuning.current().local_threaded_bytes) or (
            many is not None and len(args) >= many
        )
        if workers <= 1 or not large or threading.current_thread().name.startswith("rectizarr"):
            # One thread, small work, or inside a worker of rectizarr's engine, which keeps the cores busy.
            return [fn(a) for a in args]
        step = ceildiv(len(args), 4 * workers)
        slices = [args[i : i + step] for i in range(0, len(args), step)]
        pool = threads.kept("rectizarr-local", workers)
        return [r for part in pool.map(lambda part: [fn(a) for a in part], slices) for r in part]

    # ---- reads ---------------------------------------------------------------------------------------

    def _get_batch(self, requests: Sequence[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        if len(requests) == 1:  # the engine reads local chunks one by one in its workers
            key, byte_range = requests[0]
            return [read_file(self._path(key), byte_range)]
        nbytes = _range_bytes(requests)  # ranges of known size: by bytes alone; whole files: by count too
        many = None if nbytes is not None else tuning.current().local_threaded_files
        if (
            many is not None
            and len(requests) < many
            and self.workers > 1
            and not threading.current_thread().name.startswith("rectizarr")
        ):
            nbytes = sum(map(self._stat_bytes, requests))  # a few whole files (shards): by their sizes
        return self._map(lambda r: read_file(self._path(r[0]), r[1]), requests, nbytes, many)

    def _stat_bytes(self, request: tuple[str, ByteRange | None]) -> int:
        """About how many bytes ``request`` reads (0 when its file is not there)."""
        key, byte_range = request
        try:
            size = os.stat(self._path(key)).st_size
        except OSError:
            return 0
        if byte_range is None:
            return size
        start, length = byte_range
        return min(size, -start) if start < 0 else max(0, size - start) if length is None else length

    capabilities = Capabilities(
        low_latency=True,
        native_read_into=True,
        cheap_versions=True,
        consistent_listing=True,
        process_locks=True,
        values_consumed=True,
    )

    def get_transient(
        self, key: str, byte_range: ByteRange | None = None, size_hint: int | None = None
    ) -> bytes | memoryview | None:
        if not READV:
            return read_file(self._path(key), byte_range)
        return read_transient(self._path(key), byte_range, size_hint)

    def read_into(self, keys: Sequence[str], views: Sequence[memoryview]) -> list[int]:
        """See :meth:`Store.read_into`: one ``readv`` per file, into the view and one spare byte."""
        if os.sep != "/":
            return [read_into(self._path(k), v, bytearray(1)) for k, v in zip(keys, views, strict=True)]
        return read_many_into(self._root_slash, keys, views)

    def _info(self, key: str) -> tuple[int, Hashable] | None:
        try:
            st = os.stat(self._path(key))
        except OSError as exc:
            if missing(exc):
                return None
            raise
        if not stat.S_ISREG(st.st_mode):
            return None
        return st.st_size, (st.st_size, st.st_mtime_ns, st.st_ino)

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        return self._walk(self._path(prefix[:-1]) if prefix else self.root, prefix)

    def _walk(self, directory: str, prefix: str) -> Iterator[str]:
        for entry in _entries(directory):
            if entry.is_dir(follow_symlinks=False):
                yield from self._walk(entry.path, f"{prefix}{entry.name}/")
            elif entry.is_file() and not _TMP_NAME.match(entry.name):
                yield prefix + entry.name

    def _list_dir(self, prefix: str) -> Iterable[str]:
        return [
            e.name
            for e in _entries(self._path(prefix[:-1]) if prefix else self.root)
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
                raise StoreError(
                    f"cannot store key {key!r}: the name is reserved for LocalStore temporary files"
                )
            if len(key) > NAME_MAX // 4 and path_too_long(self._path(key)):
                raise too_long(key)
            work.append((directory, name, key, value))
        work.sort(key=lambda w: w[0])
        start = 0
        t = tuning.current()
        while start < len(work):  # in runs holding at most t.local_open_dirs directory descriptors
            with self._dirs(create=True) as dirs:
                run: list[tuple[int, str, str, Buffer]] = []
                leaves: set[int] = set()
                while start < len(work) and (
                    len(dirs) < t.local_open_dirs or work[start][0] == work[start - 1][0]
                ):
                    directory, name, key, value = work[start]
                    fd = dirs.open(directory, key)
                    assert fd is not None  # made when missing
                    _sweep(self._real_root, directory, fd)
                    run.append((fd, name, key, value))
                    leaves.add(fd)
                    start += 1
                # (each write waits for the disk with fsync: then two values are worth two threads)
                self._map(
                    self._write_one,
                    run,
                    sum(len(memoryview(v)) for *_, v in run),
                    2 if self.fsync else t.local_threaded_writes,
                )
                if self.fsync:
                    for fd in leaves:
                        os.fsync(fd)

    def _write_one(self, item: tuple[int, str, str, Buffer], again: bool = True) -> None:
        dir_fd, name, key, value = item
        short = name if len(name.encode()) <= 190 else "long"
        tmp = f".{short}.p{os.getpid()}-{this_host()}.{os.urandom(8).hex()}.tmp"
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
        return StoreError(
            f"cannot store key {key!r} in {self.root!r}: its directory was removed while writing"
        )

    def _delete_batch(self, keys: Sequence[str]) -> None:
        with self._dirs(create=False) as dirs:
            touched = set()
            for key in keys:
                directory, _, name = key.rpartition("/")
                dir_fd = dirs.open(directory, key)
                if dir_fd is None:
                    continue
                _sweep(self._real_root, directory, dir_fd)
                touched.add(directory)
                try:
                    if not stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                        os.unlink(name, dir_fd=dir_fd)
                except OSError as exc:
                    if not missing(exc):
                        raise
            for directory in sorted(touched, reverse=True):
                dirs.prune(directory)

    def _delete_prefix(self, prefix: str) -> None:
        if not prefix:  # everything but in-flight temporary files; links are removed, never followed
            for entry in [e for e in _entries(self.root) if not _TMP_NAME.match(e.name)]:
                if entry.is_dir(follow_symlinks=False):
                    _rmtree(entry.name, self.root)
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
                _rmtree(name, dir_fd)
            dirs.prune(directory)


def _entries(directory: str) -> list[os.DirEntry[str]]:
    """The entries of ``directory`` (none when it is missing)."""
    try:
        with os.scandir(directory) as it:
            return list(it)
    except OSError as exc:
        if missing(exc):
            return []
        raise


def _rmtree(name: str, parent: int | str) -> None:
    """Remove the directory ``name`` of ``parent`` (a descriptor or a path) and all in it. A writer of
    another process may be adding a file meanwhile (a directory is "not empty" when its last entry is
    removed): removed again, a few times, before the error is raised."""
    import shutil  # (slow to import: it imports every compression module)

    for attempt in range(8):
        try:
            if isinstance(parent, int):
                shutil.rmtree(name, dir_fd=parent)
            else:
                shutil.rmtree(os.path.join(parent, name))
            return
        except OSError as exc:
            if missing(exc):
                return
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST) or attempt == 7:
                raise
