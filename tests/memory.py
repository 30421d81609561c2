"""Memory bounds measured with tracemalloc (numpy reports its buffers to it); never a timing."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any


def least_peak(fn: Callable[[], Any], bound: float, attempts: int = 3) -> int:
    """The peak of traced memory while ``fn()`` runs, called again (up to ``attempts`` times in all) while the
    peak is not below ``bound``, the least one kept. tracemalloc counts every thread's allocations, and a
    thread an earlier test left running (a server thread answering late) can add its own to one call
    (CI once saw 8 MiB more than the measured write); an allocation of the code under test shows in every
    call. ``fn`` must give the same outcome each time."""
    least: int | None = None
    for _ in range(attempts):
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            fn()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        least = peak if least is None else min(least, peak)
        if least < bound:
            break
    assert least is not None
    return least
