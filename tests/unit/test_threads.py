"""rectizarr.threads starts every thread of rectizarr: kept pools by name and size, pools for one block,
single threads; a forked child makes its own pools."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

import rectizarr
from rectizarr import threads
from rectizarr.io.pool import pmap, pool_size

ROOT = Path(__file__).parents[2]


def _name() -> str:
    return threading.current_thread().name


def test_a_kept_pool_is_made_once_per_name_and_size_and_named() -> None:
    pool = threads.kept("rectizarr-test-kept", 2)
    assert threads.kept("rectizarr-test-kept", 2) is pool
    assert threads.kept("rectizarr-test-kept", 3) is not pool
    assert pool.submit(_name).result().startswith("rectizarr-test-kept")
    threads.drop("rectizarr-test-kept")
    again = threads.kept("rectizarr-test-kept", 2)
    assert again is not pool and again.submit(lambda: 7).result() == 7
    three = threads.kept("rectizarr-test-kept", 3)
    threads.drop("rectizarr-test-kept", keep=3)  # (a change of size to 3: that pool stays)
    assert threads.kept("rectizarr-test-kept", 3) is three and three.submit(lambda: 8).result() == 8
    assert threads.kept("rectizarr-test-kept", 2) is not again
    threads.drop("rectizarr-test-kept")


def test_a_kept_pool_runs_its_initializer_on_each_thread() -> None:
    seen: list[str] = []
    pool = threads.kept("rectizarr-test-init", 1, initializer=lambda: seen.append(_name()))
    pool.submit(lambda: None).result()
    assert len(seen) == 1 and seen[0].startswith("rectizarr-test-init")
    threads.drop("rectizarr-test-init")


def test_a_pool_for_one_block_is_joined_when_it_ends() -> None:
    before = {t.name for t in threading.enumerate()}
    with threads.once("rectizarr-test-once", 2) as pool:
        names = list(pool.map(lambda _: _name(), range(4)))
    assert all(n.startswith("rectizarr-test-once") for n in names)
    assert not {t.name for t in threading.enumerate()} - before  # no thread of it left


def test_start_runs_a_named_daemon_thread() -> None:
    got: list[tuple[str, int]] = []
    thread = threads.start("rectizarr-test-one", lambda x: got.append((_name(), x)), 5)
    thread.join()
    assert thread.daemon and got == [("rectizarr-test-one", 5)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_makes_its_own_pools() -> None:
    """A child forked after the parent's pools ran (a multiprocessing pool's workers) gets new pools with
    threads of its own, and reads with them."""
    import rectizarr

    a = rectizarr.create_array(None, shape=(64, 64), dtype="i4", chunks=(8, 8))
    a[...] = np.arange(64 * 64).reshape(64, 64)
    parent_pool = threads.kept("rectizarr-test-fork", 2)
    parent_pool.submit(lambda: None).result()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (fork() with other threads running)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            child_pool = threads.kept("rectizarr-test-fork", 2)
            ok = child_pool is not parent_pool and child_pool.submit(lambda: 3).result(timeout=30) == 3
            ok = ok and int(a[...].sum()) == (64 * 64) * (64 * 64 - 1) // 2
            code = 0 if ok else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    threads.drop("rectizarr-test-fork")
    assert os.waitstatus_to_exitcode(status) == 0


def test_importing_rectizarr_starts_no_thread_and_loads_no_pool_module() -> None:
    code = (
        "import sys, threading, rectizarr\n"
        "print(threading.active_count(), 'concurrent.futures' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.stdout.split() == ["1", "False"]


def test_set_workers_resizes_the_codec_pool() -> None:
    before = pool_size()
    try:
        rectizarr.set_workers(3)
        assert pool_size() == 3
        seen = set(pmap(lambda _: _name(), range(64)))
        assert seen and all(n.startswith("rectizarr_") for n in seen) and len(seen) <= 3
    finally:
        rectizarr.set_workers(before)
    assert pool_size() == before
