"""Every thread rectizarr starts is started here: pools kept for the process (made on first use, by name
and size), pools for one call (joined before it returns) and single threads. Threads are named
``rectizarr-...``: code that is already on one of them does its work inline rather than hand it on.

Nothing runs in the background between calls, and a forked child inherits no pool: the child's first
use makes its own (the parent's threads do not exist there). :mod:`concurrent.futures` is imported on
the first use of a pool, not with rectizarr. This module imports nothing of rectizarr, so that every
layer (the stores too) may use it."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor


_kept: dict[tuple[str, int], ThreadPoolExecutor] = {}
_lock = threading.Lock()


def kept(name: str, workers: int, initializer: Callable[[], object] | None = None) -> ThreadPoolExecutor:
    """The pool of ``workers`` threads named ``name``, made on first use and kept (a pool per batch
    would start and join threads every time: 1.4 ms for two threads on this project's machines)."""
    with _lock:
        pool = _kept.get((name, workers))
        if pool is None:
            from concurrent.futures import ThreadPoolExecutor

            pool = _kept[name, workers] = ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix=name, initializer=initializer
            )
        return pool


def drop(name: str, keep: int | None = None) -> None:
    """Let the kept pools named ``name`` (but the one of ``keep`` threads) finish their work and end, after a
    change of size to ``keep``: a pool of the new size made meanwhile is never shut down under its users (a
    pool of the old size that a caller who took the size just before the change still makes is kept)."""
    with _lock:
        gone = [key for key in _kept if key[0] == name and key[1] != keep]
        pools = [_kept.pop(key) for key in gone]
    for pool in pools:
        pool.shutdown(wait=False)


@contextmanager
def once(name: str, workers: int) -> Iterator[ThreadPoolExecutor]:
    """A pool of ``workers`` threads named ``name`` for one ``with`` block, joined when it ends: for work
    whose threads wait (uploads, reads ahead) and so must not take the kept pools' threads."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers, thread_name_prefix=name) as pool:
        yield pool


def start(name: str, fn: Callable[..., object], *args: object) -> threading.Thread:
    """``fn(*args)`` on a new daemon thread named ``name``, started; the caller joins it."""
    thread = threading.Thread(target=fn, args=args, name=name, daemon=True)
    thread.start()
    return thread


def _forget() -> None:  # pragma: no cover - runs in forked children
    """In a forked child: the parent's pools have no threads here; each is made anew on its next use."""
    global _lock
    _kept.clear()
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
