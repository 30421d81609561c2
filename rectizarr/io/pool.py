"""The engine's concurrency: one process-wide thread pool for codec work and striped per-key locks.

Nothing runs in the background: the pool is created on first use, and both are reset in a forked child.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from rectizarr._util import default_workers
from rectizarr.stores import LocalStore, Store

T = TypeVar("T")
R = TypeVar("R")

# ------------------------------------------------------------------------------------ thread pool

_pool: ThreadPoolExecutor | None = None
_pool_size = default_workers()
_pool_lock = threading.Lock()


def set_workers(n: int) -> None:
    """Set the process-wide number of codec threads (default: the number of usable cores)."""
    global _pool, _pool_size
    with _pool_lock:
        _pool_size = max(1, int(n))
        if _pool is not None:
            _pool.shutdown(wait=False)
            _pool = None


def _reset_after_fork() -> None:  # pragma: no cover - exercised by process-based tests
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()
    _locks.reset()


def pool_size() -> int:
    """The process-wide number of codec threads."""
    return _pool_size


def pmap(fn: Callable[[T], R], items: Sequence[T], workers: int | None = None) -> list[R]:
    """``map`` over a thread pool when it pays (several items and more than one worker)."""
    n = _pool_size if workers is None else workers
    if n <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_pool_size, thread_name_prefix="rectizarr")
        pool = _pool
    # Batch small items so thread hand-off does not dominate (100,000 tiny chunks).
    per = max(1, len(items) // (4 * n))
    if per == 1:
        return list(pool.map(fn, items))
    batches = [items[i : i + per] for i in range(0, len(items), per)]
    out: list[R] = []
    for part in pool.map(lambda b: [fn(x) for x in b], batches):
        out.extend(part)
    return out


# --------------------------------------------------------------------------------- per-key locks


class _StripedLocks:
    """Locks for read-modify-write of store keys inside this process (no lost writes between threads)."""

    def __init__(self, n: int = 256) -> None:
        self.n = n
        self.reset()

    def reset(self) -> None:
        self._locks = [threading.Lock() for _ in range(self.n)]

    def hold(self, store: Store, keys: Iterable[str]) -> _Held:
        base = _lock_base(store)
        stripes = sorted({hash(base + k) % self.n for k in keys})
        return _Held([self._locks[s] for s in stripes])


def _lock_base(store: Store) -> str:
    """What the keys of ``store`` are relative to: two store objects on one directory (or fsspec path)
    share their locks, so separately opened arrays on the same data do not lose each other's writes."""
    inner = getattr(store, "inner", store)
    if isinstance(inner, LocalStore):  # a store on a subdirectory shares the locks of the parent's
        return f"local:{inner._real_root}/"
    base, fs = getattr(inner, "_base", None), getattr(inner, "fs", None)
    if isinstance(base, str) and fs is not None:
        return f"fsspec:{type(fs).__name__}:{base}"
    return f"id:{id(getattr(inner, '_data', inner))}:"


class _Held:
    def __init__(self, locks: list[threading.Lock]) -> None:
        self.locks = locks

    def __enter__(self) -> None:
        for lock in self.locks:
            lock.acquire()

    def __exit__(self, *exc: object) -> None:
        for lock in reversed(self.locks):
            lock.release()


_locks = _StripedLocks()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
