"""The process-wide pool's helpers: ``on_worker`` runs a function on one of the pool's threads (in the
caller's tuning context, inline when already there) and hands back its result or its exception."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace

import pytest

from rectizarr import tuning
from rectizarr.io.pool import each_as_ready, on_worker, pmap


def test_on_worker_runs_on_a_pool_thread_in_the_callers_context() -> None:
    with tuning.use(replace(tuning.current(), block_min_chunks=12345)):
        name, seen = on_worker(lambda: (threading.current_thread().name, tuning.current().block_min_chunks))
    assert name.startswith("rectizarr") and seen == 12345
    inner = on_worker(lambda: on_worker(lambda: threading.current_thread().name))  # inline there: no deadlock
    assert inner.startswith("rectizarr")
    assert pmap(lambda i: on_worker(lambda: i * 2), range(8), 2) == [0, 2, 4, 6, 8, 10, 12, 14]


def test_on_worker_raises_what_the_function_raised() -> None:
    def fail() -> None:
        raise KeyError("k")

    with pytest.raises(KeyError, match="k"):
        on_worker(fail)


def test_each_as_ready_takes_every_item_once_as_it_arrives() -> None:
    seen: list[int] = []
    lock = threading.Lock()
    first_done = threading.Event()

    def arriving() -> Iterator[int]:
        yield 0
        assert first_done.wait(5)  # the first item is worked on before the next one arrives
        yield from range(1, 200)

    def work(i: int) -> None:
        with lock:
            seen.append(i)
        first_done.set()

    each_as_ready(work, arriving(), 2)
    assert sorted(seen) == list(range(200))


def test_each_as_ready_raises_what_a_call_or_the_source_raised() -> None:
    def work(i: int) -> None:
        if i == 7:
            raise ValueError("seven")

    with pytest.raises(ValueError, match="seven"):
        each_as_ready(work, iter(range(20)), 2)

    def broken() -> Iterator[int]:
        yield 1
        raise OSError("the store failed")

    with pytest.raises(OSError, match="the store failed"):
        each_as_ready(lambda i: None, broken(), 2)
