"""The I/O layer's use of threads: one process-wide codec pool (kept by :mod:`rectizarr.threads`, made
on first use, anew in a forked child) that runs work in the caller's context so its :mod:`rectizarr.tuning`
holds; and how many threads a read or write uses."""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from typing import TYPE_CHECKING, TypeVar

from rectizarr import threads, tuning
from rectizarr._util import default_workers

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

T = TypeVar("T")
R = TypeVar("R")

_pool_size = default_workers()


def set_workers(n: int) -> None:
    """Set the process-wide number of codec threads (default: the number of usable cores)."""
    global _pool_size
    _pool_size = max(1, int(n))
    threads.drop("rectizarr", keep=_pool_size)


def pool_size() -> int:
    """The process-wide number of codec threads."""
    return _pool_size


def workers_for(workers: int | None, coded: bool, nbytes: int, t: tuning.Tuning) -> int | None:
    """Threads for per-chunk work on chunks of ``nbytes`` decoded bytes (``coded``: with a compressor):
    one for small chunks, whose work is mostly Python holding the GIL (two threads would only hand it back
    and forth), else ``workers`` (None: the pool's size)."""
    return workers if nbytes >= (t.threaded_bytes_coded if coded else t.threaded_bytes) else 1


def _get_pool() -> ThreadPoolExecutor:
    return threads.kept("rectizarr", _pool_size)


def beside(fn: Callable[[], R]) -> Future[R]:
    """``fn()`` on one of a few threads kept apart from the codec pool (in the caller's context), for work
    the caller does not wait for at once: a read's output pages made while its requests are in flight, a
    listing made beside a write. Such work never waits for other work of these threads."""
    context = contextvars.copy_context()
    return threads.kept("rectizarr-beside", 4).submit(context.run, fn)


def when_idle(fn: Callable[[], object]) -> None:
    """``fn()`` on a thread of the lowest priority (nice 19, where the system lets a thread have its own),
    for work that only pays while the cores would otherwise idle: the pages of a read's output made while
    its requests are in flight. At normal priority that took the cores from the requests being sent (a
    remote read of 256 chunks: 2.5 ms later); at nice 19 it yields to them and runs while they wait."""
    threads.kept("rectizarr-idle", 1, initializer=_lowest).submit(fn)


def _lowest() -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)  # (Linux: this thread only)
    except (AttributeError, OSError):  # not on this system: normal priority
        pass


def on_worker(fn: Callable[[], R]) -> R:
    """``fn()`` on one of the pool's threads (here, when this is one): a single-threaded loop of codec
    calls that behave differently on the main thread (numcodecs' blosc there uses c-blosc's global
    context under a lock, and the global thread count a user set, for every call)."""
    if threading.current_thread().name.startswith("rectizarr"):
        return fn()
    context = contextvars.copy_context()
    return _get_pool().submit(lambda: context.run(fn)).result()


def pmap(fn: Callable[[T], R], items: Sequence[T], workers: int | None = None) -> list[R]:
    """``map`` over a thread pool when it pays (several items and more than one worker)."""
    n = _pool_size if workers is None else workers
    if n <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    pool = _get_pool()
    # Batch small items so thread hand-off does not dominate (100,000 tiny chunks).
    per = max(1, len(items) // (tuning.current().batches_per_thread * n))
    context = contextvars.copy_context()
    if per == 1:
        return list(pool.map(lambda x: context.copy().run(fn, x), items))
    batches = [items[i : i + per] for i in range(0, len(items), per)]
    parts = pool.map(lambda b: context.copy().run(lambda: [fn(x) for x in b]), batches)
    return list(chain.from_iterable(parts))


def each_as_ready(fn: Callable[[T], object], items: Iterable[T], workers: int | None = None) -> None:
    """Call ``fn`` on each item of ``items`` (an iterator whose items arrive over time, e.g. answers of a
    remote store) in the pool as soon as it arrives; return when all calls are done. This thread takes the
    items (so requests an iterator starts on its first step start here, at once) and hands each to
    whichever worker is idle; it takes no more than twice the workers ahead of the calls, so an iterator
    that bounds what it fetches ahead bounds memory too. The first error (of ``fn`` or of ``items``)
    is raised once every call under way is done; no item is taken after it."""
    n = _pool_size if workers is None else workers
    if n <= 1:
        for x in items:
            fn(x)
        return
    import queue  # (with the pool's first use, as concurrent.futures)

    handed: queue.SimpleQueue[tuple[T] | None] = queue.SimpleQueue()
    slots = threading.Semaphore(2 * n)
    errors: list[BaseException] = []

    def work() -> None:
        while (box := handed.get()) is not None:
            try:
                if not errors:
                    fn(box[0])
            except BaseException as exc:  # raised by the caller's thread
                errors.append(exc)
            finally:
                slots.release()

    context = contextvars.copy_context()
    pool = _get_pool()
    futures = [pool.submit(lambda: context.copy().run(work)) for _ in range(n)]
    source = iter(items)
    boxes = ((x,) for x in source)
    try:
        while True:
            slots.acquire()
            if errors:
                break
            box = next(boxes, None)
            if box is None:
                break
            handed.put(box)
    finally:
        for _ in futures:
            handed.put(None)
        for f in futures:
            f.result()
        close = getattr(source, "close", None)
        if close is not None:  # a generator left early: whatever it has under way is cancelled
            close()
    if errors:
        raise errors[0]
