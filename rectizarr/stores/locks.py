"""Per-key exclusive locks for read-modify-writes, shared by every store object on the same data.

A key is named by ``store.lock_identity + key`` and mapped to one of :data:`STRIPES` stripes (a stable
hash, the same in every process) of one of two levels: metadata documents (``zarr.json``) and values (chunks,
shards). A hold takes metadata stripes before value stripes, each in ascending order, and a thread that
holds value stripes never waits for a metadata stripe, so holds never wait on each other in a circle (an
append holds the array's ``zarr.json`` while it writes its chunks). A thread that already holds a stripe
does not take it again (a shrink holds a boundary chunk while rewriting it). Every stripe is a thread lock; for stores whose capabilities say
``process_locks`` it is also an OS advisory lock (``flock``) on a file in the user's lock directory, which
the OS releases when its holder dies, so processes exclude each other the same way threads do.
"""

from __future__ import annotations

import os
import tempfile
import threading
import warnings
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

__all__ = ["STRIPES", "hold", "reset"]

STRIPES = 1024

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: thread locks only
    fcntl = None  # type: ignore[assignment]

META_NAMES = frozenset({"zarr.json"})
_threads = [threading.Lock() for _ in range(2 * STRIPES)]  # metadata stripes, then value stripes
_held = threading.local()
_warned: list[bool] = []
_DIR = os.path.join(tempfile.gettempdir(), f"rectizarr-locks-{os.getuid() if hasattr(os, 'getuid') else 0}")


def reset() -> None:
    """Fresh thread locks (in a forked child: a lock held by another thread of the parent stays held)."""
    global _threads
    _threads = [threading.Lock() for _ in range(2 * STRIPES)]


def _stripe(identity: str, key: str) -> int:
    """The lock number of a key: metadata documents in [0, STRIPES), values in [STRIPES, 2 * STRIPES)."""
    level = 0 if key.rpartition("/")[2] in META_NAMES else STRIPES
    return level + zlib.crc32((identity + key).encode("utf-8", "surrogateescape")) % STRIPES


def _os_lock(stripe: int) -> int | None:
    """An flock on the stripe's lock file; None (with one warning) when the lock directory is unusable."""
    path = os.path.join(_DIR, f"{stripe}.lock")
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    try:
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:  # no lock directory yet (or it was cleaned away): make it once
            os.makedirs(_DIR, mode=0o700, exist_ok=True)
            fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if not _warned:
            _warned.append(True)
            warnings.warn(f"rectizarr cannot use its lock directory {_DIR!r} ({exc}): writes of other "
                          "processes to the same data are not excluded", RuntimeWarning, stacklevel=4)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def hold(identity: str, keys: Iterable[str], across_processes: bool) -> Iterator[None]:
    """Hold the locks of ``keys`` (named by ``identity + key``) for a ``with`` block."""
    held: set[int] = _held.__dict__.setdefault("stripes", set())
    stripes = sorted({_stripe(identity, k) for k in keys} - held)
    if stripes and stripes[0] < STRIPES and any(s >= STRIPES for s in held):
        raise RuntimeError("a metadata lock is taken while value locks are held (lock order)")
    fds: list[int] = []
    taken: list[int] = []
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
        for fd in fds:
            os.close(fd)  # releases the flock
        for s in reversed(taken):
            _threads[s].release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=reset)
