"""The process-wide pool's helpers: ``on_worker`` runs a function on one of the pool's threads (in the
caller's tuning context, inline when already there) and hands back its result or its exception."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from rectizarr import tuning
from rectizarr.io.pool import on_worker, pmap


def test_on_worker_runs_on_a_pool_thread_in_the_callers_context() -> None:
    with tuning.use(replace(tuning.current(), slab_min_chunks=12345)):
        name, seen = on_worker(lambda: (threading.current_thread().name, tuning.current().slab_min_chunks))
    assert name.startswith("rectizarr") and seen == 12345
    inner = on_worker(lambda: on_worker(lambda: threading.current_thread().name))  # inline there: no deadlock
    assert inner.startswith("rectizarr")
    assert pmap(lambda i: on_worker(lambda: i * 2), range(8), 2) == [0, 2, 4, 6, 8, 10, 12, 14]


def test_on_worker_raises_what_the_function_raised() -> None:
    def fail() -> None:
        raise KeyError("k")

    with pytest.raises(KeyError, match="k"):
        on_worker(fail)
