"""No lost update: read-modify-writes of ``zarr.json`` (append, resize, attributes) and of chunks are made
against the value as stored, under locks every thread, handle and (on a local directory) process shares.
Each test counts lost updates and wrong values; the bar is 0 of each."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import shutil
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest

import rectizarr
from rectizarr.errors import ConflictError
from rectizarr.stores import LocalStore, MemoryStore, Store

THREADS = 8
SCALE = int(os.environ.get("RECTIZARR_STRESS_SCALE", "1"))  # scripts/long_runs.py consistency raises it


def run_threads(n: int, work: Callable[[int], None]) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def one(i: int) -> None:
        try:
            start.wait()
            work(i)
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


def stores(tmp_path: Path) -> dict[str, Store]:
    return {"local": LocalStore(tmp_path / "s"), "memory": MemoryStore()}


def rows_of(a: Any) -> list[int]:
    return sorted(int(v) for v in a[:, 0])


@pytest.mark.parametrize("kind", ["local", "memory"])
@pytest.mark.parametrize("handles", ["one", "separate"])
def test_threads_appending(tmp_path: Path, kind: str, handles: str) -> None:
    store = stores(tmp_path)[kind]
    a = rectizarr.create_array(store, name="x", shape=(0, 4), dtype="i4", chunks=(5, 4), fill_value=-1)

    def work(i: int) -> None:
        mine = a if handles == "one" else rectizarr.open_array(store, path="x")
        for j in range(3 * SCALE):
            mine.append(np.full((1, 4), 1000 * i + j, "i4"))

    run_threads(THREADS, work)
    back = rectizarr.open_array(store, path="x", mode="r")
    assert back.shape == (THREADS * 3 * SCALE, 4)  # 0 lost appends
    assert rows_of(back) == sorted(1000 * i + j for i in range(THREADS) for j in range(3 * SCALE))  # 0 wrong
    assert (back[...] == back[:, :1]).all()


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_threads_setting_attributes(tmp_path: Path, kind: str) -> None:
    store = stores(tmp_path)[kind]
    a = rectizarr.create_array(store, name="x", shape=(4,), dtype="i1", chunks=(2,))
    g = rectizarr.open_group(store)

    def work(i: int) -> None:
        (a if i % 2 else rectizarr.open_array(store, path="x")).attrs[f"k{i}"] = i
        g.attrs[f"g{i}"] = i

    run_threads(THREADS, work)
    assert dict(rectizarr.open_array(store, path="x").attrs) == {f"k{i}": i for i in range(THREADS)}
    assert dict(rectizarr.open_group(store).attrs) == {f"g{i}": i for i in range(THREADS)}


def test_handles_one_after_the_other(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s")
    one = rectizarr.create_array(store, name="x", shape=(4, 2), dtype="i4", chunks=(2, 2), fill_value=0)
    two = rectizarr.open_array(store, path="x")
    one.attrs["a"] = 1
    two.attrs["b"] = 2  # does not undo "a"
    one.append(np.full((2, 2), 7, "i4"))
    two.append(np.full((3, 2), 8, "i4"))  # lands after one's rows
    assert dict(one.attrs) == dict(rectizarr.open_array(store, path="x").attrs) == {"a": 1, "b": 2}
    back = rectizarr.open_array(store, path="x", mode="r")
    assert back.shape == (9, 2) and back[4:6].tolist() == [[7, 7]] * 2 and back[6:].tolist() == [[8, 8]] * 3


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_shrink_racing_a_write(tmp_path: Path, kind: str) -> None:
    lost = 0
    for trial in range(40 * SCALE):
        store = stores(tmp_path / str(trial))[kind]
        a = rectizarr.create_array(store, name="x", shape=(1000,), dtype="i4", chunks=(1000,), fill_value=0)
        a[...] = 1
        writer = rectizarr.open_array(store, path="x")
        value = np.arange(100, 110, dtype="i4")

        def work(i: int, a: Any = a, writer: Any = writer, value: np.ndarray = value) -> None:
            if i == 0:
                a.resize((500,))
            else:
                writer[100:110] = value

        run_threads(2, work)
        back = rectizarr.open_array(store, path="x", mode="r")
        assert back.shape == (500,)
        lost += not np.array_equal(back[100:110], value)
        assert (back[:100] == 1).all() and (back[110:] == 1).all()  # 0 wrong values
    assert lost == 0


def _append_many(path: str, worker: int, n: int) -> None:
    a = rectizarr.open_array(path, path="x")
    for j in range(n):
        a.append(np.full((1, 3), 1000 * worker + j, "i4"))


def test_processes_appending(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    rectizarr.create_array(path, name="x", shape=(0, 3), dtype="i4", chunks=(4, 3), fill_value=-1)
    workers, n = 4, 50 * SCALE
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for f in [pool.submit(_append_many, path, w, n) for w in range(workers)]:
            f.result(timeout=120)
    back = rectizarr.open_array(path, path="x", mode="r")
    assert back.shape == (workers * n, 3)  # 0 lost appends
    assert rows_of(back) == sorted(1000 * w + j for w in range(workers) for j in range(n))


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_threads_creating_in_a_consolidated_group(tmp_path: Path, kind: str) -> None:
    store = stores(tmp_path)[kind]
    rectizarr.create_group(store)
    rectizarr.consolidate_metadata(store)

    def work(i: int) -> None:
        rectizarr.open_group(store).create_array(f"a{i}", shape=(4,), dtype="i2", chunks=(2,))

    run_threads(THREADS, work)
    g = rectizarr.open_group(store)
    assert sorted(g.keys()) == sorted(f"a{i}" for i in range(THREADS))  # 0 lost entries
    assert all(g[f"a{i}"].shape == (4,) for i in range(THREADS))


@pytest.mark.parametrize("kind", ["local", "memory"])
@pytest.mark.parametrize("consolidated", [False, True])
def test_threads_requiring_the_same_members(tmp_path: Path, kind: str, consolidated: bool) -> None:
    """``require_array`` / ``require_group`` of one name by many threads at once: each gets the member
    (the one that lost the race to create it raised NodeExistsError: 25 of 160 calls, 4 processes)."""
    store = stores(tmp_path)[kind]
    rectizarr.create_group(store)
    if consolidated:
        rectizarr.consolidate_metadata(store)
    got: list[tuple[str, str]] = []

    def work(i: int) -> None:
        g = rectizarr.open_group(store)
        for j in range(10 * SCALE):
            a = g.require_array(f"a{j}", shape=(4,), dtype="i2", chunks=(2,))
            sub = g.require_group(f"g{j}")
            got.append((a.name, sub.name))

    run_threads(THREADS, work)
    assert sorted(got) == sorted((f"/a{j}", f"/g{j}") for j in range(10 * SCALE) for _ in range(THREADS))


@pytest.mark.parametrize("kind", ["local", "memory"])
@pytest.mark.parametrize("call", ["open_array", "open_group", "open"])
def test_threads_opening_a_missing_node_with_mode_a(tmp_path: Path, kind: str, call: str) -> None:
    """``mode="a"`` creates what is missing; threads doing so at once each get the node (those that lost
    the race to create it raised NodeExistsError: 90 of 120 calls of open_array)."""
    store = stores(tmp_path)[kind]
    for r in range(5 * SCALE):
        path = f"n{r}"

        def work(i: int, path: str = path) -> None:
            if call == "open_array":
                a = rectizarr.open_array(store, path=path, mode="a", shape=(4,), dtype="i2", chunks=(2,))
            elif call == "open_group":
                a = rectizarr.open_group(store, path=path, mode="a")
            else:
                a = rectizarr.open(store, path=path, mode="a", shape=(4,), dtype="i2", chunks=(2,))
            assert a.name == "/" + path

        run_threads(THREADS, work)


@pytest.mark.parametrize("kind", ["local", "memory", "zip"])
def test_attribute_updates_never_make_writes_plan_again_and_give_up(tmp_path: Path, kind: str) -> None:
    """Threads each writing their own elements across all shards and setting attributes of the same
    array: an attribute update changes ``zarr.json``, and a write then planned again, up to 16 times, then
    raised ConflictError ("resized during each of 16 attempts"), though nothing was resized (zip: 8 of
    720 writes)."""
    store = rectizarr.ZipStore(tmp_path / "s.zip", mode="w") if kind == "zip" else stores(tmp_path)[kind]
    size, n = 96, 40 * SCALE
    rectizarr.create_array(
        store, name="x", shape=(size,), dtype="i4", chunks=(4,), shards=(32,), fill_value=0
    )

    def work(i: int) -> None:
        h = rectizarr.open_array(store, path="x")
        for k in range(n):
            h.oindex[np.arange(i, size, 6)] = k + 1
            h.attrs[f"t{i}_{k}"] = k

    run_threads(6, work)
    a = rectizarr.open_array(store, path="x")
    assert int((a[...] != n).sum()) == 0  # 0 lost writes
    assert len(a.attrs) == 6 * n  # 0 lost attributes


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_threads_writing_inner_chunks_of_one_shard(tmp_path: Path, kind: str) -> None:
    store = stores(tmp_path)[kind]
    rectizarr.create_array(
        store, name="x", shape=(8, 8), dtype="i4", chunks=(1, 2), shards=(8, 8), fill_value=0
    )

    def work(i: int) -> None:  # row i: the thread's own inner chunks, all in the one shard
        mine = rectizarr.open_array(store, path="x")
        for j in range(8):
            mine[i, j] = 10 * i + j + 1

    run_threads(THREADS, work)
    back = rectizarr.open_array(store, path="x", mode="r")[...]
    assert back.tolist() == [[10 * i + j + 1 for j in range(8)] for i in range(THREADS)]  # 0 lost, 0 wrong


def _write_cells(path: str, worker: int) -> None:
    a = rectizarr.open_array(path, path="x")
    for j in range(8):
        a[worker, j] = 10 * worker + j + 1  # row `worker`: its own inner chunks, all in one shard


def test_processes_writing_inner_chunks_of_one_shard(tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    rectizarr.create_array(
        path, name="x", shape=(4, 8), dtype="i4", chunks=(1, 2), shards=(4, 8), fill_value=0
    )
    with ProcessPoolExecutor(4, mp_context=multiprocessing.get_context("spawn")) as pool:
        for f in [pool.submit(_write_cells, path, w) for w in range(4)]:
            f.result(timeout=120)
    back = rectizarr.open_array(path, path="x", mode="r")[...]
    assert back.tolist() == [[10 * w + j + 1 for j in range(8)] for w in range(4)]  # 0 lost, 0 wrong


def test_a_cached_remote_reader_never_reads_another_chunk(s3_store: Any) -> None:
    """A reader keeps its handle on S3 while another client rewrites the shard (inner chunks moved): its
    next read returns the new values, never the bytes of a different inner chunk."""
    from rectizarr.stores import FsspecStore

    other = FsspecStore(s3_store.fs, path=s3_store.root)  # a second client of the same bucket path
    shape, kw = (32, 8), {"dtype": "i4", "chunks": (8, 8), "shards": (32, 8), "fill_value": 0}
    first = np.arange(32 * 8, dtype="i4").reshape(shape)
    rectizarr.create_array(s3_store, name="x", shape=shape, **kw)[...] = first
    reader = rectizarr.open_array(s3_store, path="x", mode="r")
    assert np.array_equal(reader[0:8], first[0:8])
    second = -first
    second[0:8] = 7  # a repeating chunk compresses differently: every later inner chunk moves
    writer = rectizarr.open_array(other, path="x")
    writer[...] = second
    assert np.array_equal(reader[8:16], second[8:16])
    assert np.array_equal(reader[...], second)


class _Racing:
    """A store mixin that rewrites a shard once, through the same store, just before the first ranged read
    of inner chunks: the window between a shard index's read and its data's. The hook is held in a list
    shared with the store's views (:meth:`Store.limited` copies the store's attributes)."""

    _hook: list[Callable[[], None] | None]

    @property
    def rewrite(self) -> Callable[[], None] | None:
        return self.__dict__.setdefault("_hook", [None])[0]

    @rewrite.setter
    def rewrite(self, value: Callable[[], None] | None) -> None:
        self.__dict__.setdefault("_hook", [None])[0] = value

    def _race(self) -> None:
        rewrite, self.rewrite = self.rewrite, None
        if rewrite is not None:
            rewrite()

    def _race_before(self, requests: Any) -> None:
        if any(r[1] is not None and r[1][0] >= 0 for r in requests):  # inner chunks, not an index suffix
            self._race()

    def _get_batch(self, requests: Any) -> Any:
        self._race_before(requests)
        return super()._get_batch(requests)  # type: ignore[misc]

    def _gets(self, requests: Any) -> Any:  # FsspecStore's S3 reads
        self._race_before(requests)
        return super()._gets(requests)  # type: ignore[misc]

    def get_transient(self, key: str, byte_range: Any = None, size_hint: Any = None) -> Any:
        if byte_range is not None and byte_range[0] >= 0:
            self._race()
        return super().get_transient(key, byte_range, size_hint)  # type: ignore[misc]


def racing_store(kind: str, tmp_path: Path, s3_store: Any) -> Store:
    if kind == "s3":
        from rectizarr.stores import FsspecStore

        return type("RacingS3", (_Racing, FsspecStore), {})(s3_store.fs, path=s3_store.root)  # type: ignore[no-any-return]
    base = {"local": LocalStore, "piecewise": LocalStore, "memory": MemoryStore}[kind]
    return (
        type("Racing", (_Racing, base), {})(tmp_path / "s")
        if base is LocalStore
        else type(  # type: ignore[no-any-return]
            "Racing", (_Racing, base), {}
        )()
    )


@pytest.mark.parametrize("kind", ["local", "piecewise", "memory", "s3"])
def test_a_shard_rewritten_between_index_and_data_reads(tmp_path: Path, s3_store: Any, kind: str) -> None:
    """The shard is rewritten after its index was read (or taken from the cache) and before its inner
    chunks are: the read notices (If-Match on S3, the version elsewhere), reads the new index and
    returns the new values, never bytes of another inner chunk."""
    from dataclasses import replace

    from rectizarr import tuning

    store = racing_store(kind, tmp_path, s3_store)
    store.rewrite = None  # type: ignore[attr-defined]  # (the hook's list, before any view of the store shares it)
    shape, kw = (32, 8), {"dtype": "i4", "chunks": (8, 8), "shards": (32, 8), "fill_value": 0}
    first = np.arange(32 * 8, dtype="i4").reshape(shape)
    a = rectizarr.create_array(store, name="x", shape=shape, **kw)
    a[...] = first
    second = -first
    second[0:8] = 7  # compresses differently: every later inner chunk moves
    wrong = 0
    t = replace(tuning.current(), piecewise_bytes=1) if kind == "piecewise" else tuning.current()
    with tuning.use(t):
        for rows in [slice(8, 16), slice(16, 32), slice(0, 8)]:
            a[...] = first
            assert np.array_equal(a[0:8], first[0:8])  # the index is now known (and cached where cheap)

            def rewrite() -> None:
                a[...] = second

            store.rewrite = rewrite  # type: ignore[attr-defined]
            got = a[rows]
            wrong += int(np.count_nonzero(got != second[rows]))
            assert store.rewrite is None  # type: ignore[attr-defined]
    assert wrong == 0


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_a_handle_takes_up_another_handles_changes(tmp_path: Path, kind: str) -> None:
    store = stores(tmp_path)[kind]
    one = rectizarr.create_array(store, name="x", shape=(10,), dtype="i4", chunks=(4,), fill_value=0)
    two = rectizarr.open_array(store, path="x")
    one[...] = np.arange(10)
    one.resize((4,))
    with pytest.raises(IndexError):  # two knew a shape of 10: it now sees 4
        two[8] = 99
    one.resize((10,))
    assert rectizarr.open_array(store, path="x")[...].tolist() == [0, 1, 2, 3] + [0] * 6  # nothing came back
    one.append(np.array([5, 6], "i4"))
    assert two[...].tolist() == [0, 1, 2, 3] + [0] * 6 + [5, 6] and two.shape == (12,)
    one.append(np.array([7], "i4"))  # a mask has the stored shape, not the one the handle last saw
    mask = np.zeros(13, bool)
    mask[[0, 12]] = True
    two.set_mask_selection(mask, np.array([-1, -2], "i4"))
    assert two.get_mask_selection(mask).tolist() == [-1, -2]
    assert rectizarr.open_array(store, path="x").get_mask_selection(mask).tolist() == [-1, -2]


def test_a_write_planned_before_another_thread_took_up_a_resize_plans_again() -> None:
    """The plan, its layout and their version are taken together: a thread of the same handle taking up
    another handle's resize between them made a write use a plan of one shape with the layout of another
    (a grow: the edge chunk written with the old extent, the other thread's element cleared; a shrink:
    an internal "chunk index out of range")."""
    store = MemoryStore()
    a = rectizarr.create_array(store, shape=(6,), dtype="i4", chunks=[[2, 3, 2, 4, 4]], fill_value=0)
    c = rectizarr.open_array(store)

    class Grows:  # its conversion runs after the write planned (once, however often it is planned)
        def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
            c.resize((12,))
            a[6] = 7  # the same handle, as another thread would use it, takes up the grow
            return np.array([5], dtype="i4")

    a[5:6] = Grows()
    assert rectizarr.open_array(store)[...].tolist() == [0] * 5 + [5, 7] + [0] * 5
    b = rectizarr.create_array(MemoryStore(), shape=(10, 11), dtype="i4", chunks=(2, 5), fill_value=0)
    d = rectizarr.open_array(b.store)

    class Shrinks:
        def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
            d.resize((13, 3))
            b[0, 0]
            return np.array([1, 2], dtype="i4")

    with pytest.raises(IndexError, match="out of bounds for axis 1"):
        b.vindex[[5, 9], [0, 6]] = Shrinks()  # (9, 6) is outside the new shape
    assert rectizarr.open_array(b.store)[...].sum() == 0


@pytest.mark.parametrize("layout", [{"chunks": (10,)}, {"chunks": (2,), "shards": (10,)}])
@pytest.mark.parametrize("whole", [True, False], ids=["whole-chunks", "partial-chunks"])
def test_a_write_racing_a_shrink_leaves_nothing_past_the_new_end(
    tmp_path: Path, layout: dict[str, Any], whole: bool
) -> None:
    """Another handle keeps writing near the end while the array shrinks: each write happened before the
    shrink (its chunks then deleted or cleared) or after it (an empty selection), so a grow shows fill.
    Before, a write that planned with the old shape landed after the clean-up: 27 of 50 runs wrong."""
    wrong = 0
    for run in range(12 * SCALE):
        path = tmp_path / f"{run}.zarr"
        a = rectizarr.create_array(path, shape=(100,), dtype="i4", fill_value=0, **layout)
        other = rectizarr.open_array(path)
        stop = threading.Event()

        def write(other: Any = other, stop: threading.Event = stop) -> None:
            while not stop.is_set():
                other[80 : 100 if whole else 95] = 7

        t = threading.Thread(target=write)
        t.start()
        threading.Event().wait(0.002)
        a.resize((50,))
        stop.set()
        t.join()
        a.resize((100,))
        wrong += int(np.count_nonzero(a[50:]))
    assert wrong == 0


def test_a_write_to_the_edge_chunk_keeps_what_an_append_put_past_its_end(tmp_path: Path) -> None:
    """A handle that knows shape 10 writes element 9 while another appends elements 10-11 to the same
    edge chunk: the writer planned with its shape, and when it held the chunk the append had happened,
    so it plans again instead of clearing past 10 (before: 4 of 100 runs lost appended elements)."""
    lost = 0
    for run in range(20 * SCALE):
        path = tmp_path / f"{run}.zarr"
        a = rectizarr.create_array(path, shape=(10,), dtype="i4", chunks=(4,), fill_value=0)
        other = rectizarr.open_array(path)
        stop = threading.Event()

        def write(other: Any = other, stop: threading.Event = stop) -> None:
            while not stop.is_set():
                other[9] = 1

        t = threading.Thread(target=write)
        t.start()
        threading.Event().wait(0.002)
        a.append(np.array([100, 101], "i4"))
        threading.Event().wait(0.002)
        stop.set()
        t.join()
        lost += int(np.count_nonzero(rectizarr.open_array(path, mode="r")[10:12] != [100, 101]))
    assert lost == 0


def _overwrite_and_write(path: str, i: int, n: int) -> list[str]:
    errors = []
    for _ in range(n):
        try:
            a = rectizarr.create_array(
                path, shape=(64,), dtype="i4", chunks=(4 + i,), fill_value=0, overwrite=True
            )
        except Exception as exc:  # counted
            errors.append(repr(exc))
            continue
        try:
            a[...] = i + 1
        except (rectizarr.NodeNotFoundError, rectizarr.StoreError):  # the array was replaced under the write
            continue
    return errors


def test_overwrites_racing_writers_in_other_processes_fail_nothing(tmp_path: Path) -> None:
    """A writer of another process adds chunk files while an overwrite removes the array's directory:
    it is removed again (before: 35 of 400 creates raised OSError "Directory not empty"). A write into an
    array replaced under it may fail, with a StoreError."""
    path = str(tmp_path / "o.zarr")
    with ProcessPoolExecutor(4, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_overwrite_and_write, path, i, 25 * SCALE) for i in range(4)]
        errors = [e for f in futures for e in f.result(timeout=120)]
    assert errors == []
    assert set(rectizarr.open_array(path, mode="r")[...].tolist()) <= {0, 1, 2, 3, 4}


def _hold_forever(path: str, ready: str) -> None:
    store = LocalStore(path)
    with store.lock(["x/zarr.json", "x/c/0"]):
        Path(ready).write_text("held")
        threading.Event().wait(120)


def test_a_killed_holder_never_blocks_the_others(tmp_path: Path) -> None:
    import signal

    path, ready = str(tmp_path / "s"), tmp_path / "ready"
    a = rectizarr.create_array(path, name="x", shape=(4,), dtype="i4", chunks=(4,), fill_value=0)
    proc = multiprocessing.get_context("spawn").Process(target=_hold_forever, args=(path, str(ready)))
    proc.start()
    for _ in range(600):  # up to 60 s for the child to start and take the locks
        if ready.exists() or not proc.is_alive():
            break
        threading.Event().wait(0.1)
    assert ready.exists()
    done = threading.Event()

    def append() -> None:
        a.append(np.array([1, 2], "i4"))  # needs both locks the child holds
        done.set()

    t = threading.Thread(target=append)
    t.start()
    assert not done.wait(0.5)  # blocked while the child lives
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    assert done.wait(30)  # the OS released the child's locks
    t.join()
    assert rectizarr.open_array(path, path="x").shape == (6,)


# ------------------------------------------------------------------ S3: conditional writes (moto server)


@pytest.mark.parametrize("zarr_format", [3, 2])
@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_threads_appending_on_s3(s3_server: Any, s3_store: Any, backend: str, zarr_format: int) -> None:
    """Clients of their own (no shared lock) appending and setting attributes: the conditional writes of
    zarr.json (v2: .zarray and .zattrs, each its own compare-and-swap) lose nothing."""
    from rectizarr.stores import open_store

    def client() -> Any:
        return open_store(
            f"s3://{s3_store.root}", backend=backend, storage_options=s3_server.storage_options()
        )

    assert client().capabilities.conditional_writes
    a = rectizarr.create_array(
        client(), name="x", shape=(0, 2), dtype="i4", chunks=(4, 2), fill_value=-1, zarr_format=zarr_format
    )

    def work(i: int) -> None:
        mine = rectizarr.open_array(client(), path="x")
        for j in range(3):
            mine.append(np.full((1, 2), 10 * i + j, "i4"))
        mine.attrs[f"k{i}"] = i

    run_threads(4, work)
    back = rectizarr.open_array(client(), path="x", mode="r")
    assert back.metadata.zarr_format == zarr_format
    assert back.shape == (12, 2)  # 0 lost appends
    assert rows_of(back) == sorted(10 * i + j for i in range(4) for j in range(3))
    assert dict(back.attrs) == {f"k{i}": i for i in range(4)}  # 0 lost attributes
    assert a.shape == (0, 2)  # the first handle has not been asked anything since


@pytest.mark.parametrize("zarr_format", [3, 2])
@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_handles_on_s3_take_up_what_this_process_changed(
    s3_server: Any, s3_store: Any, backend: str, zarr_format: int
) -> None:
    """Where versions cost a request, a handle keeps what it read, but takes up what this process changed
    through any other handle or store object: an append through ``g["x"]`` of a consolidated group, then
    ``g["x"]`` has the new shape (it had the old one, and a write to the appended rows did nothing); a
    second handle of the array sees a resize. Nothing is asked of the server for it."""
    from rectizarr.stores import open_store

    def client() -> Any:
        return open_store(
            f"s3://{s3_store.root}", backend=backend, storage_options=s3_server.storage_options()
        )

    g = rectizarr.open_group(client(), mode="a", zarr_format=zarr_format)
    g.create_array("x", shape=(8,), dtype="i4", chunks=(4,), fill_value=0)
    rectizarr.consolidate_metadata(client())
    g = rectizarr.open_group(client(), mode="a", use_consolidated=True)
    g["x"].append(np.ones(2, "i4"))
    s3_server.reset_counts()
    x = g["x"]
    reads = sum(s3_server.counts()[k] for k in ("get", "get_range", "head"))
    assert x.shape == (10,) and reads == (1 if zarr_format == 3 else 4)  # the group's documents, read again
    x[8:10] = 5
    assert rectizarr.open_array(client(), path="x", mode="r")[...].tolist() == [0] * 8 + [5, 5]
    other = rectizarr.open_array(client(), path="x")
    x.resize((12,))
    other[11] = 7
    s3_server.reset_counts()
    assert other.shape == (12,) and list(g) == ["x"] and g["x"].shape == (12,)
    assert rectizarr.open_array(client(), path="x", mode="r")[...].tolist() == [0] * 8 + [5, 5, 0, 7]
    assert dict(rectizarr.open_group(client(), mode="r", use_consolidated=True).members())["x"].shape == (12,)
    x.attrs["k"] = 1  # Zarr v2: .zattrs, a document of its own
    other[0]
    assert dict(other.attrs) == {"k": 1}
    # a store of the other backend on the same bucket is the same data (its handles, its locks)
    twin = open_store(
        f"s3://{s3_store.root}",
        backend="obstore" if backend == "fsspec" else "fsspec",
        storage_options=s3_server.storage_options(),
    )
    assert twin.lock_identity == client().lock_identity
    y = rectizarr.open_array(twin, path="x")
    x.append(np.array([9], "i4"))
    assert y[...].tolist() == [0] * 8 + [5, 5, 0, 7, 9] and y.shape == (13,)


@pytest.mark.parametrize("zarr_format", [3, 2])
@pytest.mark.parametrize("kind", ["local", "memory", "obstore"])
def test_a_write_through_an_older_consolidated_entry_uses_the_arrays_own_document(
    tmp_path: Path, obstore_store: Any, kind: str, zarr_format: int
) -> None:
    """A group's consolidated metadata may be older than an array's own document (a writer that did not
    consolidate again, a resize whose consolidated update failed): ``g["x"]`` reads ``zarr.json`` before
    its first write, so a write past the consolidated shape lands (it was clipped to nothing)."""
    store = obstore_store if kind == "obstore" else stores(tmp_path)[kind]
    g = rectizarr.open_group(store, mode="a", zarr_format=zarr_format)
    g.create_array("x", shape=(4,), dtype="i4", chunks=(2,), fill_value=0)[:] = 1
    rectizarr.consolidate_metadata(store)
    root = ".zmetadata" if zarr_format == 2 else "zarr.json"
    old = store.get(root)
    assert old is not None
    rectizarr.open_array(store, path="x").resize((8,))
    store.set(root, old)  # the consolidated entry says 4 again
    fresh = rectizarr.open_group(store, mode="a", use_consolidated=True)
    x = fresh["x"]
    assert x.shape == (4,)  # what the consolidated metadata says (reads trust it)
    x[4:8] = 7
    assert x.shape == (8,)
    assert rectizarr.open_array(store, path="x", mode="r")[...].tolist() == [1] * 4 + [7] * 4


@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_a_conditional_write_of_a_key_deleted_meanwhile_is_a_lost_race(
    s3_server: Any, s3_store: Any, backend: str
) -> None:
    """S3 answers If-Match on a deleted key with 404: the write lost a race (retried), not a StoreError.
    Writers of one chunk whose writes empty it (so it is deleted) lose nothing and fail nothing."""
    from rectizarr.stores import open_store

    store = open_store(f"s3://{s3_store.root}", backend=backend, storage_options=s3_server.storage_options())
    store.set("k", b"1")
    version = store.get_versioned("k")[1]
    store.delete("k")
    assert store.set_if("k", b"2", version) is False and store.get("k") is None
    rectizarr.create_array(store, name="x", shape=(4,), dtype="i4", chunks=(4,), fill_value=0)

    def work(i: int) -> None:
        mine = rectizarr.open_array(
            open_store(f"s3://{s3_store.root}", backend=backend, storage_options=s3_server.storage_options()),
            path="x",
        )
        for n in range(8):
            mine[i] = ((n + 1) % 2) * (
                i + 1
            )  # every other write empties it (the last too): the chunk comes and goes

    run_threads(4, work)
    assert rectizarr.open_array(store, path="x", mode="r")[...].tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("layout", [{"chunks": (4, 3)}, {"chunks": (2, 3), "shards": (4, 3)}])
@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_a_shrink_on_s3_then_a_grow_shows_the_fill_value(
    s3_server: Any, s3_store: Any, backend: str, layout: dict[str, Any]
) -> None:
    """As on a local directory: the boundary chunks are cleared past the new end (before, an edge chunk's
    tail was kept for appenders that might come, and the old values came back)."""
    from rectizarr.stores import open_store

    store = open_store(f"s3://{s3_store.root}", backend=backend, storage_options=s3_server.storage_options())
    a = rectizarr.create_array(store, name="x", shape=(10, 3), dtype="i4", fill_value=0, **layout)
    a[...] = np.arange(1, 31).reshape(10, 3)
    a.resize((5, 3))
    a.resize((10, 3))
    want = np.zeros((10, 3), "i4")
    want[:5] = np.arange(1, 16).reshape(5, 3)
    assert a[...].tolist() == want.tolist()
    assert rectizarr.open_array(store, path="x", mode="r")[...].tolist() == want.tolist()


@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_an_append_just_after_a_shrink_on_s3_is_kept(s3_server: Any, s3_store: Any, backend: str) -> None:
    """Another client appends as soon as the shrunk shape is stored: here, right after the shrink's
    clean-up has listed the chunks, so the chunk it appended to is listed as past the end. The clean-up
    reads the shape as stored after each chunk and keeps the append (before: the chunk was deleted)."""
    from rectizarr.stores import open_store

    def client() -> Any:
        return open_store(
            f"s3://{s3_store.root}", backend=backend, storage_options=s3_server.storage_options()
        )

    rectizarr.create_array(client(), name="x", shape=(6,), dtype="i4", chunks=(2,), fill_value=-1)[...] = (
        np.arange(6)
    )
    other = rectizarr.open_array(client(), path="x")
    shrinking = client()
    listing = shrinking.list_prefix

    def list_then_append(prefix: str) -> Any:
        keys = list(listing(prefix))
        if prefix and other.shape == (6,):  # the clean-up's listing: the other client appends now
            assert rectizarr.open_array(client(), path="x", mode="r").shape == (4,)
            other.append(np.array([42], "i4"))  # into chunk 2, wholly past the shrink's end
        return iter(keys)

    shrinking.list_prefix = list_then_append  # type: ignore[method-assign]
    a = rectizarr.open_array(shrinking, path="x")  # (after the patch: the array's view of the store has it)
    a.resize((4,))
    back = rectizarr.open_array(client(), path="x", mode="r")
    assert back.shape == (5,) and back[...].tolist() == [0, 1, 2, 3, 42]


@pytest.mark.parametrize("layout", [{"chunks": (4, 3)}, {"chunks": (2, 3), "shards": (4, 3)}])
@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_an_append_on_s3_never_shows_what_a_shrinks_clean_up_has_not_reached(
    s3_server: Any, s3_store: Any, backend: str, layout: dict[str, Any]
) -> None:
    """A shrink's clean-up runs after its document, and another client may append before it reaches a
    chunk (or the shrinking client was killed first). Between the append's document and its data, the
    appended rows read as the fill value, never the values the shrink cut (before: the old values showed
    there until the append's data came; the soak on the obstore backend found 157 such reads in 10
    minutes)."""
    from rectizarr.stores import open_store

    store = open_store(f"s3://{s3_store.root}", backend=backend, storage_options=s3_server.storage_options())
    a = rectizarr.create_array(store, name="x", shape=(12, 3), dtype="i4", fill_value=-1, **layout)
    a[...] = 5
    with patch.object(rectizarr.Array, "_clean_up_shrink", lambda *args: None):  # (not reached yet)
        rectizarr.open_array(store, path="x").resize((9, 3))
    b = rectizarr.open_array(store, path="x")
    seen = []
    write = rectizarr.Array.__setitem__

    def read_then_write(
        self: Any, selection: Any, value: Any
    ) -> None:  # the append's data, once its document is
        seen.append(rectizarr.open_array(store, path="x", mode="r")[...].tolist())
        write(self, selection, value)

    with patch.object(rectizarr.Array, "__setitem__", read_then_write):
        b.append(np.full((2, 3), 7, "i4"))
    assert seen == [[[5] * 3] * 9 + [[-1] * 3] * 2]
    assert rectizarr.open_array(store, path="x", mode="r")[...].tolist() == [[5] * 3] * 9 + [[7] * 3] * 2


@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_the_consolidated_entry_on_s3_is_the_latest_document(
    s3_server: Any, s3_store: Any, backend: str
) -> None:
    """Two clients change one array of a consolidated group at once, and the refresh of the first lands
    last: the entry is the array's document as stored then, not the first client's older one (before,
    2-4 of 40 rounds of four racing clients left a stale entry)."""
    from rectizarr.stores import open_store

    def client() -> Any:
        return open_store(
            f"s3://{s3_store.root}", backend=backend, storage_options=s3_server.storage_options()
        )

    first = client()
    rectizarr.create_group(first)
    rectizarr.open_group(first).create_array("x", shape=(0,), dtype="i4", chunks=(4,))
    rectizarr.consolidate_metadata(first)
    mine, theirs = rectizarr.open_array(first, path="x"), rectizarr.open_array(client(), path="x")
    versioned = first.get_versioned

    def meanwhile(key: str) -> Any:  # the first client's refresh reads the group: the other changes x now
        if key == "zarr.json" and not theirs.attrs:
            theirs.attrs["by"] = "second"
        return versioned(key)

    first.get_versioned = meanwhile  # type: ignore[method-assign]
    mine.append(np.array([1], "i4"))
    stored = json.loads(client().get("x/zarr.json"))
    entry = json.loads(client().get("zarr.json"))["consolidated_metadata"]["metadata"]["x"]
    assert stored["attributes"] == {"by": "second"} and stored["shape"] == [1]
    assert entry["attributes"] == stored["attributes"] and entry["shape"] == stored["shape"]
    group = rectizarr.open_group(client(), mode="r")
    assert dict(group["x"].attrs) == {"by": "second"} and group["x"].shape == (1,)


def test_conflicts_end_in_conflict_error(s3_store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from rectizarr import tuning

    a = rectizarr.create_array(s3_store, name="x", shape=(4,), dtype="i4", chunks=(2,))
    other = rectizarr.open_array(s3_store, path="x")
    read, calls, meddling = s3_store.get_versioned, 0, [False]

    def meddle(key: str) -> Any:  # another writer wins every round, right after this one read
        nonlocal calls
        got = read(key)
        if key == "x/zarr.json" and not meddling[0]:
            calls += 1
            meddling[0] = True
            try:
                other.attrs[f"other{calls}"] = calls
            finally:
                meddling[0] = False
        return got

    monkeypatch.setattr(s3_store, "get_versioned", meddle)
    with (
        tuning.use(replace(tuning.current(), conflict_retries=3)),
        pytest.raises(ConflictError, match=r"x/zarr\.json"),
    ):
        a.attrs["mine"] = 1
    assert calls == 3 and "mine" not in rectizarr.open_array(s3_store, path="x").attrs


def _s3_store(endpoint: str, root: str) -> Any:
    import s3fs

    from rectizarr.stores import FsspecStore

    fs = s3fs.S3FileSystem(
        key="testing",
        secret="testing",
        skip_instance_cache=True,
        client_kwargs={"endpoint_url": endpoint, "region_name": "us-east-1"},
    )
    return FsspecStore(fs, path=root)


def _s3_worker(endpoint: str, root: str, worker: int, n: int) -> None:
    store = _s3_store(endpoint, root)  # a client of its own: only the server's conditions order the writes
    a = rectizarr.open_array(store, path="x")
    s = rectizarr.open_array(store, path="s")
    for j in range(n):
        for attempt in range(4):  # a ConflictError changed nothing ("try again"): the rows below tell
            try:  # a lost or doubled append; 4 writers racing on one zarr.json under a loaded machine
                a.append(np.full((1, 2), 100 * worker + j, "i4"))  # can lose 16 rounds in a row
                break
            except ConflictError:
                if attempt == 3:
                    raise
        s[worker, j] = 100 * worker + j + 1  # its own inner chunk of the one shard


def test_processes_on_s3(s3_server: Any, s3_store: Any) -> None:
    workers, n = 4, 50 * SCALE
    rectizarr.create_array(s3_store, name="x", shape=(0, 2), dtype="i4", chunks=(4, 2), fill_value=-1)
    rectizarr.create_array(
        s3_store, name="s", shape=(workers, n), dtype="i4", chunks=(1, 1), shards=(workers, n), fill_value=0
    )
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for f in [
            pool.submit(_s3_worker, s3_server.endpoint_url, s3_store.root, w, n) for w in range(workers)
        ]:
            f.result(timeout=180)
    fresh = _s3_store(s3_server.endpoint_url, s3_store.root)
    back = rectizarr.open_array(fresh, path="x", mode="r")
    assert back.shape == (workers * n, 2)  # 0 lost appends
    assert rows_of(back) == sorted(100 * w + j for w in range(workers) for j in range(n))
    shard = rectizarr.open_array(fresh, path="s", mode="r")[...]
    assert shard.tolist() == [
        [100 * w + j + 1 for j in range(n)] for w in range(workers)
    ]  # 0 lost inner chunks


def _s3_create(endpoint: str, root: str, name: str) -> None:
    rectizarr.open_group(_s3_store(endpoint, root)).create_array(name, shape=(4,), dtype="i2", chunks=(2,))


def test_processes_creating_in_a_consolidated_group_on_s3(s3_server: Any, s3_store: Any) -> None:
    rectizarr.create_group(s3_store)
    rectizarr.consolidate_metadata(s3_store)
    names = [f"a{i}" for i in range(6)]
    with ProcessPoolExecutor(3, mp_context=multiprocessing.get_context("spawn")) as pool:
        for f in [pool.submit(_s3_create, s3_server.endpoint_url, s3_store.root, n) for n in names]:
            f.result(timeout=180)
    g = rectizarr.open_group(_s3_store(s3_server.endpoint_url, s3_store.root))
    assert sorted(g.keys()) == names  # 0 lost consolidated entries


@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
@pytest.mark.parametrize("kind", ["array", "group"])
def test_a_node_another_client_creates_after_the_check_is_not_overwritten(
    s3_server: Any,
    s3_store: Any,
    obstore_store: Any,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    kind: str,
) -> None:
    """Another client (another process or machine: no lock of ours) creates the node after our listing
    and just before our write: create-only, the write is refused, NodeExistsError, and the other client's
    node stays. It was overwritten and both callers told they made it (4 processes x 20 names on S3: 31
    successes)."""
    store = s3_store if backend == "fsspec" else obstore_store
    theirs = json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {"by": "them"}}).encode()
    real_list, real_set_if = type(store).keys_under, type(store).set_if

    def listed_first(self: Any, prefix: str, limit: int) -> list[str]:
        if prefix == "x/":
            listed.set()
        return real_list(self, prefix, limit)

    def they_create_first(self: Any, key: str, value: Any, version: Any) -> bool:
        if key == "x/zarr.json":
            assert listed.wait(10)
            self.set("x/zarr.json", theirs)  # (through the store, as their client's own PUT would land)
        return real_set_if(self, key, value, version)

    listed = threading.Event()
    monkeypatch.setattr(type(store), "keys_under", listed_first)
    monkeypatch.setattr(type(store), "set_if", they_create_first)
    with pytest.raises(rectizarr.NodeExistsError, match="already exists at 'x'"):
        if kind == "array":
            rectizarr.create_array(store, name="x", shape=(4,), dtype="i2", chunks=(2,))
        else:
            rectizarr.create_group(store, path="x")
    monkeypatch.undo()
    assert rectizarr.open_group(store, path="x").attrs["by"] == "them"


@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_consolidating_keeps_what_another_client_changes_meanwhile(
    s3_store: Any, obstore_store: Any, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """Another client sets a group attribute and creates a member while ``consolidate_metadata`` lists the
    group: both are kept. The group's document was written back as read, unconditionally (4 processes
    on S3: 44 of 60 attributes lost, 3 members missing from the listing)."""
    store = s3_store if backend == "fsspec" else obstore_store
    g = rectizarr.create_group(store, attributes={"a": 1})
    g.create_array("x", shape=(2,), dtype="i1", chunks=(2,))
    real, calls = type(store).list_prefix, []

    def list_then_they_change(self: Any, prefix: str) -> Any:
        calls.append(prefix)
        if len(calls) == 1:  # their writes, between our read of the group and our write of it
            doc = json.loads(self.get("zarr.json"))
            self.set("zarr.json", json.dumps({**doc, "attributes": {"a": 1, "b": 2}}).encode())
            self.set("y/zarr.json", json.dumps({"zarr_format": 3, "node_type": "group"}).encode())
        return real(self, prefix)

    monkeypatch.setattr(type(store), "list_prefix", list_then_they_change)
    rectizarr.consolidate_metadata(store)
    monkeypatch.undo()
    g = rectizarr.open_group(store)
    assert dict(g.attrs) == {"a": 1, "b": 2} and sorted(g.keys()) == ["x", "y"] and len(calls) >= 2
    assert sorted(json.loads(store.get("zarr.json"))["consolidated_metadata"]["metadata"]) == ["x", "y"]


def test_an_unusable_lock_directory_warns_and_writes_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rectizarr.stores.locks as locks

    a = rectizarr.create_array(tmp_path / "s", shape=(4,), dtype="i4", chunks=(2,), fill_value=0)
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    monkeypatch.setattr(locks, "_DIR", str(blocker / "locks"))
    monkeypatch.setattr(locks, "_warned", [])
    with pytest.warns(RuntimeWarning, match="lock directory"):
        a[1:3] = 7
    assert a[...].tolist() == [0, 7, 7, 0]


def test_a_lock_directory_cleaned_away_is_made_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rectizarr.stores.locks as locks

    a = rectizarr.create_array(tmp_path / "s", shape=(4,), dtype="i4", chunks=(2,), fill_value=0)
    where = tmp_path / "locks" / "nested"
    monkeypatch.setattr(locks, "_DIR", str(where))
    monkeypatch.setattr(locks, "_warned", [])
    for value in (5, 6):  # made on the first write; removed, made again on the second
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            a[1:3] = value
        assert where.is_dir() and any(where.glob("*.lock"))
        shutil.rmtree(tmp_path / "locks")
    assert a[...].tolist() == [0, 6, 6, 0]


def test_a_lock_file_removed_while_waited_for_is_locked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock file removed (a ``/tmp`` cleaner) while a process waits to lock it: the flock it then gets is
    on a file nobody else will lock, so it locks the file now at the path instead. (It held the old one,
    and processes writing one chunk lost 45 of 1200 increments with the files unlinked every 2 ms.)"""
    import fcntl

    import rectizarr.stores.locks as locks

    monkeypatch.setattr(locks, "_DIR", str(tmp_path / "locks"))
    real, calls = fcntl.flock, []

    def flock_while_removed(fd: int, op: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            os.unlink(os.path.join(locks._DIR, "7.lock"))  # removed while this process waited
        real(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock_while_removed)
    fd = locks._os_lock(7)
    assert fd is not None and len(calls) == 2
    assert os.fstat(fd).st_ino == os.stat(os.path.join(locks._DIR, "7.lock")).st_ino
    locks._close(fd)


_FORK_CHILD = """
import fcntl, multiprocessing, os, sys, time
import rectizarr.stores.locks as locks
locks._DIR = sys.argv[1]
def body(started):
    started.set()
    time.sleep(60)
ctx = multiprocessing.get_context("fork")
started = ctx.Event()
with locks.hold("t:", ["a/c/0"], True):  # a fork while this process holds a lock
    child = ctx.Process(target=body, args=(started,))
    child.start()
started.wait(30)  # (the child has run its fork hooks)
fd = os.open(os.path.join(locks._DIR, f"{locks._stripe('t:', 'a/c/0')}.lock"), os.O_RDWR)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free")
except BlockingIOError:
    print("still held by the child")
finally:
    child.kill()
"""


def test_a_forked_child_keeps_none_of_the_parents_locks(tmp_path: Path) -> None:
    """A child forked while the parent holds a lock (multiprocessing's default start on Linux, < 3.14):
    its copy of the lock file's descriptor kept the flock held after the parent let go, as long as the child
    ran (the parent's next write of the chunk waited 10 s; children writing it hung)."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _FORK_CHILD, str(tmp_path / "locks")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip() == "free", out.stderr


_FORK_WHILE_READING = """
import os, signal, sys, threading, time, warnings
import rectizarr
warnings.simplefilter("ignore", DeprecationWarning)  # (fork() in a process with threads)
root = sys.argv[1]
rectizarr.create_array(root, shape=(64, 64), dtype="i4", chunks=(2, 2), shards=(4, 4), fill_value=0)[...] = 1
shared = rectizarr.open_array(root, mode="r")
stop = threading.Event()
def reader(a):
    while not stop.is_set():
        a[5, 7]  # each read takes the index cache's lock, and the handle's
threads = [threading.Thread(target=reader, args=(a,), daemon=True)
           for a in [shared] * 3 + [rectizarr.open_array(root, mode="r") for _ in range(3)]]
for t in threads:
    t.start()
time.sleep(0.2)
hung = 0
for n in range(int(sys.argv[2])):
    pid = os.fork()
    if pid == 0:
        ok = shared[1, 1] == 1 and rectizarr.open_array(root, mode="r")[2, 2] == 1
        os._exit(0 if ok else 3)
    deadline = time.monotonic() + 10
    while not os.waitpid(pid, os.WNOHANG)[0]:
        if time.monotonic() > deadline:
            hung += 1
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            break
        time.sleep(0.005)
stop.set()
print(hung)
"""


def test_a_child_forked_while_threads_read_reads_too(tmp_path: Path) -> None:
    """A child forked while other threads read a sharded array (a multiprocessing pool's workers): its copies
    of the process-wide index cache's lock and of the handle's lock could be held for good (8 of 100 children
    hung on their first read, through a shared handle or a fresh one). Every lock is made afresh in the child."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _FORK_WHILE_READING, str(tmp_path / "a"), str(40 * SCALE)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    assert out.stdout.strip() == "0", out.stderr
    assert "Exception ignored" not in out.stderr  # a fork hook that failed (Python 3.12: type(lock)())


def test_fork_hooks_make_locks_of_the_same_kind() -> None:
    """A forked child's handles get fresh locks of the kinds they had: a plain lock for a store, a
    reentrant one for an array. (``type(lock)()`` raised "cannot create '_thread.lock' instances" before
    Python 3.13, so every fork on 3.11 and 3.12 printed an ignored exception and later handles kept their
    parent's locks.)"""
    import threading

    from rectizarr import _util

    store = rectizarr.MemoryStore()
    array = rectizarr.create_array(store, shape=(4,), dtype="i1", chunks=(2,))
    before = (store._lock, array._lock)
    _util._relock()  # what the fork hook does in a child, run here
    assert store._lock is not before[0] and array._lock is not before[1]
    assert type(store._lock) is type(threading.Lock()) and type(array._lock) is type(threading.RLock())
    array[...] = [1, 2, 3, 4]  # the new locks work
    assert array[...].tolist() == [1, 2, 3, 4]


def _s3_v2_worker(endpoint: str, root: str, worker: int, n: int) -> None:
    from rectizarr.stores import open_store

    store = open_store(
        f"s3://{root}",
        backend="obstore",
        storage_options={
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
        },
    )
    a = rectizarr.open_array(store, path="v2")
    for j in range(n):
        a.append(np.full((1, 2), 100 * worker + j, "i4"))
        a.attrs[f"w{worker}"] = j


def test_processes_on_s3_zarr_v2(s3_server: Any, s3_store: Any) -> None:
    """Processes share no lock: a Zarr v2 array's .zarray (appends) and .zattrs (attributes) are each
    rewritten with compare-and-swap, so nothing is lost."""
    workers, n = 4, 10 * SCALE
    rectizarr.create_array(
        s3_store, name="v2", shape=(0, 2), dtype="i4", chunks=(4, 2), fill_value=-1, zarr_format=2
    )
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for f in [
            pool.submit(_s3_v2_worker, s3_server.endpoint_url, s3_store.root, w, n) for w in range(workers)
        ]:
            f.result(timeout=180)
    back = rectizarr.open_array(_s3_store(s3_server.endpoint_url, s3_store.root), path="v2", mode="r")
    assert back.shape == (workers * n, 2)  # 0 lost appends
    assert rows_of(back) == sorted(100 * w + j for w in range(workers) for j in range(n))
    assert dict(back.attrs) == {f"w{w}": n - 1 for w in range(workers)}  # 0 lost attributes


def test_a_shard_rewritten_behind_a_server_that_ignores_if_match(tmp_path: Path, http_server: Any) -> None:
    """Over plain HTTP (obstore) a cached shard index leads to ranged reads with ``If-Match``; a web server
    that ignores the header answered with bytes of the rewritten shard at the old offsets (603 CodecErrors
    in 727 reads while a writer rewrote shards). The answer's ETag tells: the index is read again."""
    from rectizarr.stores import open_store

    path = tmp_path / "a"
    kw: dict[str, Any] = {
        "shape": (32, 8),
        "dtype": "i4",
        "chunks": (8, 8),
        "shards": (32, 8),
        "fill_value": 0,
    }
    first = np.arange(32 * 8, dtype="i4").reshape(32, 8)
    second = -first
    second[0:8] = 7  # compresses differently: every later inner chunk moves
    w = rectizarr.create_array(str(path), **kw)
    w[...] = first
    r = rectizarr.open_array(open_store(http_server.serve(path), backend="obstore"), mode="r")
    assert np.array_equal(r[0:8], first[0:8])  # its index read and cached
    w[...] = second
    assert np.array_equal(r[8:16], second[8:16]) and np.array_equal(r[...], second)


@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_a_parent_group_another_client_makes_meanwhile_is_kept(
    s3_store: Any, obstore_store: Any, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """Creating ``p/z`` writes the missing group ``p`` create-only: a group another client made there after
    our check keeps its attributes (an unconditional PUT replaced it)."""
    import rectizarr.nodes.create as nodes

    store = s3_store if backend == "fsspec" else obstore_store
    rectizarr.create_group(store)
    real = nodes.missing_parents

    def check_then_they_create(*args: Any) -> list[str]:
        missing = real(*args)
        store.set(
            "p/zarr.json",
            json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {"by": "them"}}).encode(),
        )
        return missing

    monkeypatch.setattr(nodes, "missing_parents", check_then_they_create)
    rectizarr.create_array(store, name="p/z", shape=(2,), dtype="i1", chunks=(2,))
    monkeypatch.undo()
    assert rectizarr.open_group(store, path="p").attrs.asdict() == {"by": "them"}
    assert rectizarr.open_array(store, path="p/z").shape == (2,)


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_missing_parents_are_written_before_the_node(tmp_path: Path, zarr_format: int) -> None:
    """A process killed while creating ``a/b/c`` left ``a/b/c``'s document with no group ``a`` or ``a/b``:
    no reader found the node and ``validate`` failed. Parents go first now (a kill leaves empty groups)."""
    order: list[str] = []
    store = LocalStore(tmp_path / "s")
    rectizarr.create_group(store, zarr_format=zarr_format)
    real = LocalStore.set_if

    def spy(self: Any, key: str, value: Any, version: Any) -> bool:
        order.append(key)
        return real(self, key, value, version)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(LocalStore, "set_if", spy)
        rectizarr.create_group(store, path="a/b/c", zarr_format=zarr_format)
    doc = "zarr.json" if zarr_format == 3 else ".zgroup"
    assert order == [f"a/{doc}", f"a/b/{doc}", f"a/b/c/{doc}"]


@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_consolidating_a_v2_group_keeps_what_another_client_changes_meanwhile(
    s3_store: Any, obstore_store: Any, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """Zarr v2: ``.zmetadata`` is written with a compare-and-swap too, listing again on a conflict (it was an
    unconditional PUT: a member or attribute another client added meanwhile was dropped)."""
    store = s3_store if backend == "fsspec" else obstore_store
    rectizarr.create_group(store, zarr_format=2, attributes={"a": 1})
    rectizarr.consolidate_metadata(store)
    real, calls = type(store).list_prefix, []

    def list_then_they_change(self: Any, prefix: str) -> Any:
        calls.append(prefix)
        listing = list(real(self, prefix))
        if len(calls) == 1:  # after our listing, before our write: their change, .zmetadata included
            rectizarr.open_group(store, use_consolidated=False).attrs["b"] = 2
        return iter(listing)

    monkeypatch.setattr(type(store), "list_prefix", list_then_they_change)
    rectizarr.consolidate_metadata(store)
    monkeypatch.undo()
    zmeta = json.loads(store.get(".zmetadata"))["metadata"]
    assert zmeta[".zattrs"] == {"a": 1, "b": 2} and len(calls) >= 2


@pytest.mark.parametrize("kind", ["memory", "obstore"])
def test_require_finds_a_member_its_consolidated_entry_does_not_list_yet(
    obstore_store: Any, kind: str
) -> None:
    """Another client made the member, but the group's consolidated metadata does not list it yet (its
    creator adds the entry after the member's own document): ``require_array`` / ``require_group`` open its
    own document (on S3 61 of 120 calls raised NodeNotFoundError "(consolidated metadata)")."""
    store = MemoryStore() if kind == "memory" else obstore_store
    rectizarr.create_group(store)
    rectizarr.consolidate_metadata(store)
    g = rectizarr.open_group(store)
    arr = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4],
        "data_type": "int16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    }
    store.set("x/zarr.json", json.dumps(arr).encode())  # theirs, not consolidated yet
    store.set("y/zarr.json", json.dumps({"zarr_format": 3, "node_type": "group"}).encode())
    assert g.require_array("x", shape=(4,), dtype="i2").shape == (4,)
    assert g.require_group("y").name == "/y"


@pytest.mark.parametrize("kind", ["memory", "obstore"])
def test_a_v2_consolidated_entry_is_the_documents_as_stored(obstore_store: Any, kind: str) -> None:
    """Zarr v2: a change refreshes ``.zmetadata`` with the node's documents as stored when it rewrites it
    (a compare-and-swap on every store); it put its own, and a client whose refresh landed last after
    another client's later change left ``.zmetadata`` stale (4 processes: stale after 1 round)."""
    import rectizarr.nodes as nodes

    store = MemoryStore() if kind == "memory" else obstore_store
    g = rectizarr.create_group(store, zarr_format=2)
    a = g.create_array("x", shape=(2,), dtype="i2", chunks=(2,))
    rectizarr.consolidate_metadata(store)
    mine = rectizarr.open_array(store, path="x").metadata  # before their change
    store.set("x/.zattrs", json.dumps({"theirs": 1}).encode())  # their later change, already stored
    nodes.V2.refresh(store, "x", mine, None)  # our refresh lands after theirs
    entry = json.loads(store.get(".zmetadata"))["metadata"]["x/.zattrs"]
    assert entry == {"theirs": 1}, entry
    assert a.shape == (2,)


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_a_handle_opened_during_appends_never_clears_what_they_put_past_its_shape(
    tmp_path: Path, kind: str
) -> None:
    """Writers that open the array again and again (each handle's document read just before another
    append) write by masks into the last rows while one thread appends a row at a time: no appended row
    is lost. Before, a handle took the version of a document newer than the one it had read, and its
    write of the edge chunk cleared rows past its shape (soak finding: 5-20 of 1000 rows lost)."""
    store = stores(tmp_path)[kind]
    a = rectizarr.create_array(
        store, name="x", shape=(1, 4), dtype="i8", chunks=[[6] * 100, 4], fill_value=-1
    )
    a[...] = 1000
    n = 300 * SCALE if 300 * SCALE < 600 else 599
    done = threading.Event()

    def appender() -> None:
        h = rectizarr.open_array(store, path="x")
        while h.shape[0] < n:
            h.append(np.full((1, 4), 1000 + h.shape[0]))
        done.set()

    def masker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        while not done.is_set():
            h = rectizarr.open_array(store, path="x")
            m = np.zeros(h.shape, bool)
            m[-1 - int(rng.integers(0, 2)), 0] = True
            with contextlib.suppress(rectizarr.SelectionError):  # the shape moved on: refused
                h.set_mask_selection(m, [-5])

    threads = [threading.Thread(target=appender)] + [
        threading.Thread(target=masker, args=(i,)) for i in (1, 2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    x = rectizarr.open_array(store, path="x", mode="r")[...]
    assert [r for r in range(len(x)) if (x[r, 1:] != 1000 + r).any()] == []


def test_a_delete_on_s3_fsspec_sees_a_node_another_client_made(s3_server: Any) -> None:
    """s3fs answers ``isdir`` from a listing it cached: a client that listed a group before another client
    made a node there deleted nothing (soak finding); it deletes the node."""
    from rectizarr.stores import open_store

    bucket = s3_server.new_bucket(s3_server.filesystem())
    opts = {**s3_server.storage_options(), "skip_instance_cache": True}

    def client() -> Any:
        return open_store(f"s3://{bucket}", backend="fsspec", storage_options=opts)

    rectizarr.create_group(client()).create_group("nodes")
    mine = rectizarr.open_group(client(), path="nodes", mode="r+", use_consolidated=False)
    assert mine.keys() == []
    rectizarr.open_group(client(), path="nodes", mode="r+").create_group("n1")
    del mine["n1"]
    assert rectizarr.open_group(client(), path="nodes", mode="r").keys() == []


@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
@pytest.mark.parametrize("chunks", [(2, 2), [[2, 2, 2, 2], 2]])
def test_a_grow_on_s3_between_a_shrink_and_its_clean_up_shows_the_fill_value(
    s3_server: Any, s3_store: Any, backend: str, chunks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another client grows the array right after a shrink's ``zarr.json`` is stored, before its clean-up:
    the grow clears what lies past the stored end first, so the rows the shrink cut show the fill value
    (soak finding: they showed their old values, for good)."""
    import rectizarr.io as rio
    from rectizarr.stores import open_store

    def client() -> Any:
        return open_store(
            f"s3://{s3_store.root}", backend=backend, storage_options=s3_server.storage_options()
        )

    x = rectizarr.create_array(client(), name="x", shape=(8, 2), dtype="i8", chunks=chunks, fill_value=-1)
    x[...] = 7
    clean_up = rio.delete_outside
    first = [True]

    def grow_first(*args: Any, **kwargs: Any) -> Any:
        if first[0]:
            first[0] = False
            rectizarr.open_array(client(), path="x").resize((8, 2))
        return clean_up(*args, **kwargs)

    monkeypatch.setattr(rio, "delete_outside", grow_first)
    x.resize((1, 2))
    assert not first[0]
    assert rectizarr.open_array(client(), path="x", mode="r")[:, 0].tolist() == [7] + [-1] * 7
