"""Per-key exclusive locks for read-modify-writes, shared by every store object on the same data.

A key, named by ``store.lock_identity + key``, maps to one of :data:`STRIPES` stripes (a stable hash, the
same in every process) of one of two levels: metadata documents (``zarr.json``), then values (chunks,
shards). A hold takes its stripes at once, in ascending order. Inside a hold a thread takes no stripe it
does not hold (RuntimeError), except value stripes inside a hold of metadata stripes alone (an append
holds ``zarr.json`` while it writes its chunks): stripes are taken in one order, so holds never wait in a
circle (two holds of unrelated keys may meet on one stripe). A stripe already held is not taken again (a
shrink holds a boundary chunk while rewriting it). A compare-and-swap step (:func:`attempt`) out of that
order does not wait for a stripe another holds: its swap counts as lost. Every stripe is a thread lock;
where ``process_locks``, also an ``flock`` on a file in the user's lock directory, which the OS releases
when its holder dies, so processes exclude each other as threads do."""

from __future__ import annotations

import os
import threading
import warnings
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

__all__ = ["STRIPES", "attempt", "hold", "reset"]

STRIPES = 1024

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: thread locks only
    fcntl = None  # type: ignore[assignment]

META_NAMES = frozenset({"zarr.json"})
_threads = [threading.Lock() for _ in range(2 * STRIPES)]  # metadata stripes, then value stripes
_held = threading.local()
_warned: list[bool] = []
_DIR: str | None = None  # the lock directory: see _lock_dir


def _lock_dir() -> str:
    """The directory of the lock files, under the temporary directory (tempfile: imported on first use)."""
    global _DIR
    if _DIR is None:
        import tempfile

        _DIR = os.path.join(
            tempfile.gettempdir(), f"rectizarr-locks-{os.getuid() if hasattr(os, 'getuid') else 0}"
        )
    return _DIR


_open: set[int] = set()  # the descriptors of the flocks held now, by any thread
_open_lock = threading.Lock()
_generation = [0]  # counts forks: a hold begun before one does not close descriptors in the child


def reset() -> None:
    """In a forked child: fresh thread locks (a lock held by another thread of the parent stays held), and
    the lock files the parent held closed (without unlocking: the parent still holds them). Left open, the
    child's copies kept the parent's flocks held after the parent let go, for as long as the child ran."""
    global _threads, _open_lock
    _threads = [threading.Lock() for _ in range(2 * STRIPES)]
    for fd in _open:
        try:
            os.close(fd)
        except OSError:  # pragma: no cover - already closed
            pass
    _open.clear()
    _open_lock = threading.Lock()
    _generation[0] += 1


def _stripe(identity: str, key: str) -> int:
    """The lock number of a key: metadata documents in [0, STRIPES), values in [STRIPES, 2 * STRIPES)."""
    level = 0 if key.rpartition("/")[2] in META_NAMES else STRIPES
    return level + zlib.crc32((identity + key).encode("utf-8", "surrogateescape")) % STRIPES


def _os_lock(stripe: int, wait: bool = True) -> int | None:
    """An flock on the stripe's lock file; None (with one warning) when the lock directory is unusable.

    The lock counts only if the file locked is still the one at the path: a file removed meanwhile (a
    ``/tmp`` cleaner) is locked by nobody else, and the next process would make and lock a new one, both
    then writing. So the path is checked after the flock, and the file locked again if it changed; and
    each hold stamps the file's time, so that cleaners of old files pass it by."""
    path = os.path.join(_lock_dir(), f"{stripe}.lock")
    for _ in range(100):
        fd = _open_file(path)
        if fd is None:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                _close(fd)
                return -1  # (``wait=False``: another process holds it)
            here = os.fstat(fd)
            try:
                there = os.stat(path)
            except FileNotFoundError:
                there = None
            if there is not None and (there.st_ino, there.st_dev) == (here.st_ino, here.st_dev):
                os.utime(fd)
                return fd
        except BaseException:
            _close(fd)
            raise
        _close(fd)  # removed or replaced while we waited: lock the file now there
    raise OSError(f"the lock file {path!r} kept being removed")


def _close(fd: int) -> None:
    with _open_lock:  # (no fork in between: see _before_fork)
        _open.discard(fd)
        os.close(fd)  # releases the flock


def _open_file(path: str) -> int | None:
    """The lock file opened, its descriptor in ``_open`` from the start: a fork while this thread waits for
    the flock closes the child's copy."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    try:
        try:
            with _open_lock:
                fd = os.open(path, flags, 0o600)
                _open.add(fd)
                return fd
        except FileNotFoundError:  # no lock directory yet (or it was cleaned away): make it
            os.makedirs(_lock_dir(), mode=0o700, exist_ok=True)
            with _open_lock:
                fd = os.open(path, flags, 0o600)
                _open.add(fd)
                return fd
    except OSError as exc:
        if not _warned:
            _warned.append(True)
            warnings.warn(
                f"rectizarr cannot use its lock directory {_lock_dir()!r} ({exc}): writes of other "
                "processes to the same data are not excluded",
                RuntimeWarning,
                stacklevel=5,
            )
        return None


@contextmanager
def attempt(identity: str, keys: Iterable[str], across_processes: bool) -> Iterator[bool]:
    """:func:`hold` for one compare-and-swap step (a version checked, a value written; no other lock
    inside): True once held. Where :func:`hold` would refuse the stripes (out of the one order: metadata
    inside metadata, anything inside values) it does not wait (a wait there could close a circle): False
    when a stripe is taken by someone else, holding nothing, and the caller's compare-and-swap counts as
    lost (its rounds read and try again)."""
    held: set[int] = _held.__dict__.setdefault("stripes", set())
    stripes = sorted({_stripe(identity, k) for k in keys} - held)
    if not stripes or not held or (max(held) < STRIPES and stripes[0] >= STRIPES):  # (in the one order)
        with hold(identity, keys, across_processes):
            yield True
        return
    fds: list[int] = []
    taken: list[int] = []
    generation = _generation[0]
    try:
        for s in stripes:
            if not _threads[s].acquire(blocking=False):
                break
            taken.append(s)
            if across_processes and fcntl is not None:
                fd = _os_lock(s, wait=False)
                if fd == -1:
                    break
                if fd is not None:
                    fds.append(fd)
        else:
            held.update(stripes)
            try:
                yield True
            finally:
                held.difference_update(stripes)
            return
        yield False
    finally:
        if generation == _generation[0]:
            for fd in fds:
                _close(fd)
        for s in reversed(taken):
            _threads[s].release()


@contextmanager
def hold(identity: str, keys: Iterable[str], across_processes: bool) -> Iterator[None]:
    """Hold the locks of ``keys`` (named by ``identity + key``) for a ``with`` block."""
    held: set[int] = _held.__dict__.setdefault("stripes", set())
    stripes = sorted({_stripe(identity, k) for k in keys} - held)
    if stripes and held and (max(held) >= STRIPES or stripes[0] < STRIPES):
        raise RuntimeError(
            "a lock is taken while the thread holds "
            + ("value locks" if max(held) >= STRIPES else "metadata locks and this is one")
            + ": holds must take every key at once (lock order)"
        )
    fds: list[int] = []
    taken: list[int] = []
    generation = _generation[0]
    try:
        for s in stripes:
            _threads[s].acquire()
            taken.append(s)
            fd = _os_lock(s) if across_processes and fcntl is not None else None
            if fd is not None:
                fds.append(fd)
        held.update(stripes)
        yield
    finally:
        held.difference_update(stripes)
        if generation == _generation[0]:  # (in a child forked meanwhile, reset() closed them)
            for fd in fds:
                _close(fd)
        for s in reversed(taken):
            _threads[s].release()


def _before_fork() -> None:
    _open_lock.acquire()  # no descriptor half opened or half closed at the fork


def _after_fork_in_parent() -> None:
    _open_lock.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=reset)
