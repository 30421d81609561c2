"""The store contract, run against every backend, plus backend-specific behaviour."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import random
import shutil
import signal
import threading
import warnings
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest

import rectizarr
from rectizarr.errors import ReadOnlyError, StoreError
from rectizarr.stores import CountingStore, FsspecStore, LocalStore, MemoryStore, Store, ZipStore, open_store
from tests.servers import KILL_VALUES, write_forever

DATA = bytes(range(256)) * 16  # 4096 bytes, every offset distinguishable modulo 256
TREE = {
    "zarr.json": b"{}",
    "a/zarr.json": b'{"a": 1}',
    "a/c/0/0": b"c00",
    "a/c/0/1": b"c01",
    "a/c/1/0": b"c10",
    "b/x": b"bx",
    "bc": b"bc",
}
BAD_KEYS: list[object] = [
    "",
    "/abs",
    "a/",
    "a//b",
    ".",
    "./a",
    "a/./b",
    "..",
    "../x",
    "a/../b",
    "a/..",
    "a\\b",
    "..\\x",
    "a\x00b",
    "%2e%2e/x",
    "a/%2E%2E/b",
    "%2e/x",
    "a%2f..%2fb",
    "%252e%252e/x",
    "a%5c..",
    "a%00b",
    "%2fetc/passwd",
    "a%2f%2fb",
    b"bytes",
    7,
]
BAD_PREFIXES = ["a", "/", "/a/", "a//", "../", "a/../", "%2e%2e/", "a\\/"]


@dataclass
class Harness:
    """A store under test plus backend-side helpers, so read-only stores can be seeded and changed."""

    kind: str
    store: Store
    directories_are_values: bool  # HTTP: a directory URL answers with its listing page
    write: Callable[[Mapping[str, bytes]], None]
    delete: Callable[[str], None]
    delete_prefix: Callable[[str], None]


def _http_harness(served: Path, store: Store) -> Harness:
    def write(items: Mapping[str, bytes]) -> None:
        for key, value in items.items():
            path = served / key
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".new")
            tmp.write_bytes(value)
            os.replace(tmp, path)  # a new inode, so the served ETag changes

    def delete(key: str) -> None:
        path = served / key
        path.unlink(missing_ok=True)
        while path.parent != served and path.parent.is_dir() and not any(path.parent.iterdir()):
            path.parent.rmdir()
            path = path.parent

    def delete_prefix(prefix: str) -> None:
        target = served / prefix
        if target.is_dir():
            shutil.rmtree(target)
        target.mkdir(parents=True, exist_ok=True)

    return Harness("http", store, True, write, delete, delete_prefix)


@pytest.fixture(
    params=[
        "memory",
        "dict",
        "local",
        "fsspec_memory",
        "fsspec_file",
        "zip",
        "s3",
        "http",
        "obstore",
        "obstore_http",
    ]
)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    kind = request.param
    if kind in ("http", "obstore_http"):
        served = tmp_path / "served"
        served.mkdir()
        http = request.getfixturevalue("http_store_factory")(served)
        if kind == "obstore_http":
            from rectizarr.stores import open_store

            return _http_harness(served, open_store(http.root, backend="obstore"))
        return _http_harness(served, http)
    store: Store
    if kind == "fsspec_file":
        store = FsspecStore(f"file://{tmp_path}/fsfile")
    elif kind == "dict":
        from rectizarr.stores import open_store

        store = open_store({})
    else:
        store = request.getfixturevalue(f"{kind}_store")
    return Harness(kind, store, False, store.set_many, store.delete, store.delete_prefix)


def _contents(store: Store) -> dict[str, bytes | None]:
    return {k: store.get(k) for k in sorted(store.list_prefix(""))}


class TestStoreContract:
    def test_missing_keys(self, harness: Harness) -> None:
        s = harness.store
        assert s.get("nope") is None
        assert s.get("a/b/nope", (0, 10)) is None
        assert s.get("nope", (-4, None)) is None
        assert s.get_many([("nope", None), ("x/y", (3, 4)), ("x/y", (8, 4))]) == [None, None, None]
        assert not s.exists("nope")
        assert s.getsize("nope") is None
        assert s.version("nope") is None
        assert list(s.list_prefix("nope/")) == []
        assert s.list_dir("nope/") == []
        assert list(s.list_prefix("")) == []
        assert s.list_dir("") == []

    def test_values_and_ranges(self, harness: Harness) -> None:
        harness.write({"a/b/c": DATA, "top": b"xyz"})
        s = harness.store
        assert s.get("a/b/c") == DATA
        assert s.get("top") == b"xyz"
        cases: list[tuple[tuple[int, int | None], bytes]] = [
            ((0, None), DATA),
            ((10, None), DATA[10:]),
            ((10, 5), DATA[10:15]),
            ((0, 4096), DATA),
            ((4000, 500), DATA[4000:]),  # runs past the end: truncated
            ((4095, None), DATA[4095:]),
            ((5000, 5), b""),  # starts past the end
            ((5000, None), b""),
            ((-10, None), DATA[-10:]),
            ((-4096, None), DATA),
            ((-10_000, None), DATA),  # suffix longer than the value: all of it
            ((7, 0), b""),
        ]
        for byte_range, expected in cases:
            assert s.get("a/b/c", byte_range) == expected, byte_range
            transient = s.get_transient("a/b/c", byte_range)  # (the I/O layer's one-value read)
            assert transient is not None and bytes(transient) == expected, byte_range
        assert s.get_transient("a/b/c") == DATA and s.get_transient("a/b/nope") is None
        assert s.get_many([("a/b/c", r) for r, _ in cases]) == [e for _, e in cases]

    def test_byte_range_types(self, harness: Harness) -> None:
        harness.write({"k": b"abc"})
        assert harness.store.get("k", (np.uint64(1), np.int32(1))) == b"b"  # type: ignore[arg-type]
        assert harness.store.get_many([("k", (np.int64(-2), None))]) == [b"bc"]  # type: ignore[list-item]
        for bad in [(-1, 2), (1, -1), (1.0, None), ("0", None), (0,), (True, None)]:
            with pytest.raises(StoreError, match="'k'"):
                harness.store.get("k", bad)  # type: ignore[arg-type]

    def test_get_many_coalesces_neighbouring_ranges(self, harness: Harness) -> None:
        harness.write({"k": DATA, "other": b"other"})
        counting = CountingStore(harness.store)
        counting.coalesce_gap, counting.coalesce_max = 64, 1 << 20
        requests: list[tuple[str, tuple[int, int | None] | None]] = [
            ("k", (20, 30)),
            ("other", None),
            ("k", (3000, 10)),  # far from the rest: its own request
            ("k", (0, 10)),
            ("k", (55, 5)),
            ("nope", (0, 4)),
            ("k", (20, 30)),  # duplicate
        ]
        got = counting.get_many(requests)
        assert got == [DATA[20:50], b"other", DATA[3000:3010], DATA[0:10], DATA[55:60], None, DATA[20:50]]
        assert sorted(counting.requests, key=repr) == sorted(
            [("k", (0, 60)), ("k", (3000, 10)), ("other", None), ("nope", (0, 4))], key=repr
        )

    def test_get_many_respects_coalesce_max_and_the_end(self, harness: Harness) -> None:
        harness.write({"k": DATA})
        counting = CountingStore(harness.store)
        counting.coalesce_gap, counting.coalesce_max = 100, 40
        got = counting.get_many(
            [("k", (0, 10)), ("k", (20, 10)), ("k", (40, 10)), ("k", (4090, 20)), ("k", (4080, 5))]
        )
        assert got == [DATA[0:10], DATA[20:30], DATA[40:50], DATA[4090:], DATA[4080:4085]]
        assert sorted(counting.requests) == [("k", (0, 30)), ("k", (40, 10)), ("k", (4080, 30))]
        counting.reset()
        counting.coalesce_gap = 0
        assert counting.get_many([("k", (0, 10)), ("k", (10, 10)), ("k", (21, 1))]) == [
            DATA[:10],
            DATA[10:20],
            DATA[21:22],
        ]
        assert sorted(counting.requests) == [("k", (0, 20)), ("k", (21, 1))]

    def test_listing(self, harness: Harness) -> None:
        harness.write(TREE)
        s = harness.store
        assert sorted(s.list_prefix("")) == sorted(TREE)
        assert sorted(s.list_prefix("a/")) == ["a/c/0/0", "a/c/0/1", "a/c/1/0", "a/zarr.json"]
        assert sorted(s.list_prefix("a/c/0/")) == ["a/c/0/0", "a/c/0/1"]
        assert list(s.list_prefix("b/")) == ["b/x"]
        assert s.list_dir("") == ["a", "b", "bc", "zarr.json"]
        assert s.list_dir("a/") == ["c", "zarr.json"]
        assert s.list_dir("a/c/") == ["0", "1"]
        assert s.list_dir("a/c/1/") == ["0"]
        assert s.list_dir("bc/") == []
        for prefix in ("", "a/", "a/c/0/", "b/", "bc/", "zz/"):  # some of the keys, whichever come first
            under = sorted(s.list_prefix(prefix))
            for limit in (0, 1, 2, 100):
                some = s.keys_under(prefix, limit)
                assert len(some) == min(limit, len(under)) and set(some) <= set(under), (prefix, limit, some)
            assert s.any_under(prefix) == bool(under)
        for bad in BAD_PREFIXES:
            with pytest.raises(StoreError):
                list(s.list_prefix(bad))
            with pytest.raises(StoreError):
                s.list_dir(bad)
            with pytest.raises(StoreError):
                s.keys_under(bad, 2)

    def test_delete(self, harness: Harness) -> None:
        harness.write({**TREE, "ab": b"ab", "a/c/5/0": b"x"})
        s = harness.store
        harness.delete("a/c/0/0")
        harness.delete("a/c/0/0")  # missing: fine
        harness.delete("never/was")
        assert not s.exists("a/c/0/0")
        assert s.get("a/c/0/0") is None
        assert s.list_dir("a/c/0/") == ["1"]
        harness.delete("a/c/5/0")
        assert s.list_dir("a/c/") == ["0", "1"]
        harness.delete_prefix("a/")
        assert sorted(s.list_prefix("")) == ["ab", "b/x", "bc", "zarr.json"]
        assert s.get("ab") == b"ab"
        harness.delete_prefix("nope/")
        harness.delete_prefix("")
        assert list(s.list_prefix("")) == []
        assert s.list_dir("") == []
        harness.write({"again/k": b"v"})
        assert s.get("again/k") == b"v"

    def test_delete_many(self, harness: Harness) -> None:
        if harness.store.read_only:
            harness.write(TREE)
            with pytest.raises(ReadOnlyError):
                harness.store.delete_many(["bc", "b/x"])
            assert _contents(harness.store) == TREE
            return
        harness.store.set_many(TREE)
        harness.store.delete_many(["bc", "b/x", "missing", "a/c/0/0"])
        assert sorted(harness.store.list_prefix("")) == ["a/c/0/1", "a/c/1/0", "a/zarr.json", "zarr.json"]
        harness.store.delete_many([])

    def test_exists_getsize_version(self, harness: Harness) -> None:
        s = harness.store
        harness.write({"k": b"a" * 10, "p/q": b"q"})
        assert s.exists("k") and s.exists("p/q")
        assert s.exists("p") == harness.directories_are_values
        assert s.getsize("k") == 10
        v1 = s.version("k")
        assert v1 is not None and s.version("k") == v1
        hash(v1)
        harness.write({"k": b"b" * 10})  # same size, new value
        v2 = s.version("k")
        assert v2 is not None and v2 != v1
        harness.write({"k": b"c" * 3})
        v3 = s.version("k")
        assert v3 not in (v1, v2) and s.getsize("k") == 3
        harness.write({"e": b""})
        assert s.getsize("e") == 0 and s.get("e") == b"" and s.exists("e")
        harness.delete("k")
        assert s.version("k") is None and s.getsize("k") is None

    def test_read_only(self, harness: Harness) -> None:
        harness.write(TREE)
        store = harness.store
        ro = store if store.read_only else store.with_read_only()
        assert ro.read_only
        mutators: list[Callable[[], object]] = [
            lambda: ro.set("new", b"x"),
            lambda: ro.set("zarr.json", b"changed"),
            lambda: ro.set_many({"n/1": b"1", "n/2": b"2"}),
            lambda: ro.delete("zarr.json"),
            lambda: ro.delete("missing"),
            lambda: ro.delete_many(["zarr.json", "bc"]),
            lambda: ro.delete_prefix("a/"),
            lambda: ro.delete_prefix(""),
        ]
        for mutate in mutators:
            with pytest.raises(ReadOnlyError):
                mutate()
        assert _contents(ro) == TREE
        assert _contents(store) == TREE
        assert ro.get_many([("a/c/0/0", (1, 1)), ("bc", None)]) == [b"0", b"bc"]
        assert ro.with_read_only().read_only
        ro.close()  # closing a view leaves the store usable
        assert store.get("bc") == b"bc"
        if not store.read_only:
            store.set("bc", b"still writable")
            assert ro.get("bc") == b"still writable"

    def test_key_validation(self, harness: Harness, tmp_path: Path) -> None:
        s = harness.store
        before = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
        calls: list[Callable[[object], object]] = [
            lambda k: s.get(k),  # type: ignore[arg-type]
            lambda k: s.get(k, (0, 1)),  # type: ignore[arg-type]
            lambda k: s.get_many([("fine", None), (k, None)]),  # type: ignore[list-item]
            lambda k: s.set(k, b"x"),  # type: ignore[arg-type]
            lambda k: s.set_many({"fine": b"x", k: b"x"}),  # type: ignore[dict-item]
            lambda k: s.delete(k),  # type: ignore[arg-type]
            lambda k: s.delete_many(["fine", k]),  # type: ignore[list-item]
            lambda k: s.exists(k),  # type: ignore[arg-type]
            lambda k: s.getsize(k),  # type: ignore[arg-type]
            lambda k: s.version(k),  # type: ignore[arg-type]
        ]
        for key in BAD_KEYS:
            for call in calls:
                with pytest.raises(StoreError, match="invalid store key"):
                    call(key)
        for prefix in BAD_PREFIXES:
            with pytest.raises(StoreError, match=r"invalid store (prefix|key)"):
                s.delete_prefix(prefix)
        assert list(s.list_prefix("")) == []
        after = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
        assert after == before

    def test_unusual_but_valid_keys(self, harness: Harness) -> None:
        keys = {
            ".zattrs": b"1",
            "c/0.5/-1": b"2",
            "caf\u00e9/k": b"3",
            "a%ffb": b"4",
            "x%2fy": b"5",
            "__x/y": b"6",
        }
        harness.write(keys)
        assert _contents(harness.store) == keys

    def test_pickle_round_trip(self, harness: Harness) -> None:
        harness.write(TREE)
        clone = pickle.loads(pickle.dumps(harness.store))
        assert type(clone) is type(harness.store)
        assert _contents(clone) == TREE
        assert clone.get("a/c/0/1", (-1, None)) == b"1"
        if isinstance(harness.store, ZipStore):  # the copy of an archive is a read-only reader
            assert clone.read_only
            clone.close()
        else:
            assert clone.read_only == harness.store.read_only


# ---- LocalStore ---------------------------------------------------------------------------------------


def test_local_refuses_writes_through_symlinks_leaving_the_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_bytes(b"precious")
    store = LocalStore(tmp_path / "root")
    store.set("ok/k", b"v")
    (tmp_path / "root" / "link").symlink_to(outside, target_is_directory=True)
    (tmp_path / "root" / "ok" / "deep").symlink_to(outside, target_is_directory=True)
    for key in ["link/new", "link/victim", "link/sub/new", "ok/deep/victim"]:
        with pytest.raises(StoreError, match="outside the store root"):
            store.set(key, b"evil")
        with pytest.raises(StoreError, match="outside the store root"):
            store.set_many({"ok/fine": b"v", key: b"evil"})
        with pytest.raises(StoreError, match="outside the store root"):
            store.delete(key)
    for prefix in ["link/", "ok/deep/", "link/sub/"]:
        with pytest.raises(StoreError, match="outside the store root"):
            store.delete_prefix(prefix)
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert (outside / "victim").read_bytes() == b"precious"
    store.delete_prefix("")  # removes the links, never what they point to
    assert (outside / "victim").read_bytes() == b"precious"
    assert list((tmp_path / "root").iterdir()) == []


def test_local_symlink_inside_the_root_is_allowed(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "root")
    store.set("real/k", b"v")
    (tmp_path / "root" / "alias").symlink_to(tmp_path / "root" / "real", target_is_directory=True)
    store.set("alias/k2", b"w")
    assert store.get("real/k2") == b"w"
    store.delete_prefix("alias/")  # drops the link, keeps the directory it points to
    assert sorted(store.list_prefix("")) == ["real/k", "real/k2"]


def test_local_set_many_makes_each_directory_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LocalStore(tmp_path / "root")
    store.set("zarr.json", b"{}")
    calls: list[str] = []
    real_mkdir = os.mkdir

    def counting_mkdir(path: str | os.PathLike[str], mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        calls.append(os.fspath(path))
        real_mkdir(path, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", counting_mkdir)
    store.set_many({f"c/{i}/{j}": b"x" for i in range(100) for j in range(100)})
    monkeypatch.undo()
    directories = [p for p in (tmp_path / "root").rglob("*") if p.is_dir()]
    assert len(directories) == 101  # c and c/0 ... c/99
    assert len(calls) == len(directories)
    assert len(set(calls)) == len(calls)
    assert len(list(store.list_prefix("c/"))) == 10_000


def test_local_batches_use_threads_only_when_large_and_keep_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small batch (a read's shard indexes) runs on the caller's thread; a large one on kept threads
    (no pool started and joined per batch); inside rectizarr's own workers, always on the worker."""
    import rectizarr.stores.local as local_module

    store = LocalStore(tmp_path / "root", workers=2)
    store.set_many({f"c/{i}": bytes([i]) * 2048 for i in range(64)})
    threads: list[threading.Thread] = []
    real_read = local_module.read_file

    def recording_read(path: str, byte_range: Any = None) -> Any:
        threads.append(threading.current_thread())
        return real_read(path, byte_range)

    monkeypatch.setattr(local_module, "read_file", recording_read)
    caller = threading.current_thread()
    ranges = [(f"c/{i}", (-16, None)) for i in range(64)]  # 1 KiB in all: on this thread
    assert store.get_many(ranges) == [bytes([i]) * 16 for i in range(64)]
    assert set(threads) == {caller}
    threads.clear()
    whole = [(f"c/{i}", None) for i in range(64)]  # 64 files of unknown size: on two kept threads
    assert store.get_many(whole) == [bytes([i]) * 2048 for i in range(64)]
    first = set(threads)
    assert caller not in first and len(first) <= 2
    threads.clear()
    store.get_many(whole)
    assert len((first | set(threads)) - {caller}) <= 2  # the same two threads again (one may have done all)
    threads.clear()
    assert store.get_many(whole[:8]) == [bytes([i]) * 2048 for i in range(8)]  # a few files: here
    assert set(threads) == {caller}
    threads.clear()
    store.set_many({f"big/{i}": bytes([i]) * (2 << 20) for i in range(3)})  # a few large files: threads
    assert [len(v or b"") for v in store.get_many([(f"big/{i}", None) for i in range(3)])] == [2 << 20] * 3
    assert caller not in threads
    threads.clear()
    worker = threading.Thread(target=lambda: store.get_many(whole), name="rectizarr-test-worker")
    worker.start()
    worker.join()
    assert set(threads) == {worker}


def test_local_temp_files_are_invisible_and_reserved(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "root", fsync=True)
    store.set("a/k", b"v")
    (tmp_path / "root" / "a" / ".k.0123456789abcdef.tmp").write_bytes(b"half")
    (tmp_path / "root" / ".zarr.json.fedcba9876543210.tmp").write_bytes(b"half")
    assert list(store.list_prefix("")) == ["a/k"]
    assert store.list_dir("") == ["a"]
    assert store.list_dir("a/") == ["k"]
    with pytest.raises(StoreError, match="reserved"):
        store.set("a/.k.0123456789abcdef.tmp", b"x")
    store.set(".zattrs", b"{}")  # dot files are ordinary keys
    assert store.get(".zattrs") == b"{}"


def test_local_value_and_directory_clash(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "root")
    store.set("a", b"value")
    with pytest.raises(StoreError, match="not a directory"):
        store.set("a/b", b"x")
    store.set("d/e", b"x")
    with pytest.raises(StoreError, match="is a directory"):
        store.set("d", b"x")
    assert store.get("d") is None and store.getsize("d") is None and not store.exists("d")
    assert sorted(store.list_prefix("")) == ["a", "d/e"]


def test_local_concurrent_reader_sees_only_whole_values(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "root")
    first, second = b"\x01" * (4 << 20), b"\x02" * (4 << 20)
    store.set("k", first)
    done = threading.Event()
    seen: list[int] = []
    torn: list[int] = []

    def reader() -> None:
        while not done.is_set():
            value = store.get("k")
            if value == first:
                seen.append(1)
            elif value == second:
                seen.append(2)
            else:
                torn.append(-1 if value is None else len(value))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(40):
            store.set("k", second if i % 2 == 0 else first)
    finally:
        done.set()
        thread.join()
    assert torn == []
    assert seen
    assert list(store.list_prefix("")) == ["k"]


def test_local_write_killed_midway_is_never_torn(tmp_path: Path) -> None:
    # forkserver: children fork from a clean single-threaded server with rectizarr already imported
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["rectizarr.stores", "tests.servers"])
    root = tmp_path / "root"
    LocalStore(root).set("k", KILL_VALUES[1])
    rng = random.Random(1234)
    for _ in range(10):
        ready = ctx.Event()
        child = ctx.Process(target=write_forever, args=(str(root), ready), daemon=True)
        child.start()
        try:
            assert ready.wait(60)
            threading.Event().wait(rng.uniform(0.0, 0.2))
        finally:
            child.kill()
            child.join()
        assert child.exitcode == -signal.SIGKILL
        store = LocalStore(root)
        assert store.get("k") in KILL_VALUES
        assert list(store.list_prefix("")) == ["k"]
        assert store.list_dir("") == ["k"]


def test_local_pickles_by_path(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "root", fsync=True, coalesce_gap=5, coalesce_max=7, workers=3)
    clone = pickle.loads(pickle.dumps(store))
    assert (clone.root, clone.fsync, clone.coalesce_gap, clone.coalesce_max, clone.workers) == (
        store.root,
        True,
        5,
        7,
        3,
    )
    clone.set("k", b"v")
    assert store.get("k") == b"v"


# ---- MemoryStore, CountingStore -----------------------------------------------------------------------


def test_memory_stores_are_independent() -> None:
    seed = {"k": b"seed"}
    a, b = MemoryStore(seed), MemoryStore(seed)
    a.set("k", b"a")
    a.set("only-a", b"1")
    seed["k"] = b"changed"
    assert b.get("k") == b"seed" and b.get("only-a") is None
    assert MemoryStore().get("only-a") is None
    clone = pickle.loads(pickle.dumps(a))
    clone.set("k", b"clone")
    assert a.get("k") == b"a"
    buffer = bytearray(b"mutable")
    a.set("buf", buffer)
    buffer[:] = b"MUTATED"
    assert a.get("buf") == b"mutable"


def test_counting_store_counts_backend_operations() -> None:
    counting = CountingStore(MemoryStore())
    counting.set_many({"a/1": b"1", "a/2": b"2"})
    counting.set("b", b"b")
    counting.delete_many(["a/1", "zz"])
    counting.delete_prefix("a/")
    list(counting.list_prefix(""))
    counting.list_dir("")
    counting.get("b")
    assert (counting.writes, counting.deletes, counting.lists) == (3, 3, 2)
    assert counting.requests == [("b", None)]
    counting.reset()
    assert (counting.writes, counting.deletes, counting.lists, counting.requests) == (0, 0, 0, [])
    assert CountingStore(MemoryStore(read_only=True)).read_only


# ---- ZipStore -----------------------------------------------------------------------------------------


def test_zip_overwrite_appends_and_newest_wins(tmp_path: Path) -> None:
    path = tmp_path / "data.zip"
    with ZipStore(path, mode="w") as store:
        store.set("k", b"old" * 100)
        store.set("k", b"new")
        store.set("j", b"j")
        assert store.get("k") == b"new"
    with zipfile.ZipFile(path) as zf:
        assert [i.filename for i in zf.infolist()] == ["k", "k", "j"]
        assert zf.read("k") == b"new"
    with ZipStore(path, mode="a") as store:
        assert store.get("k") == b"new"
        store.set("more/x", b"x")
    reader = ZipStore(path)
    assert reader.read_only and sorted(reader.list_prefix("")) == ["j", "k", "more/x"]
    reader.close()
    with pytest.raises(StoreError, match="closed"):
        reader.get("k")


def test_zip_deletes_are_compacted_on_close(tmp_path: Path) -> None:
    path = tmp_path / "data.zip"
    store = ZipStore(path, mode="w")
    store.set_many({"a/1": b"1" * 1000, "a/2": b"2", "b": b"b"})
    store.set("b", b"bb")
    store.delete("a/1")
    store.flush()
    store.set("c", b"c")
    store.delete_prefix("a/")
    store.close()
    with zipfile.ZipFile(path) as zf:
        assert sorted(i.filename for i in zf.infolist()) == ["b", "c"]
        assert zf.read("b") == b"bb"
    assert os.path.getsize(path) < 1000
    assert [p.name for p in tmp_path.iterdir()] == ["data.zip"]


def test_zip_reads_compressed_entries(tmp_path: Path) -> None:
    path = tmp_path / "foreign.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("dir/", b"")
        zf.writestr("dir/k", DATA)
    with ZipStore(path) as store:
        assert store.get("dir/k", (10, 5)) == DATA[10:15]
        assert store.get("dir/k", (-3, None)) == DATA[-3:]
        assert list(store.list_prefix("")) == ["dir/k"]
        assert store.list_dir("") == ["dir"]


def test_zip_bad_mode_and_bad_file(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="mode"):
        ZipStore(tmp_path / "x.zip", mode="x")  # type: ignore[arg-type]
    (tmp_path / "bad.zip").write_bytes(b"not a zip")
    with pytest.raises(StoreError, match="cannot open zip archive"):
        ZipStore(tmp_path / "bad.zip")
    with pytest.raises(StoreError, match="not a zip archive"):
        ZipStore(tmp_path / "bad.zip", mode="a")
    assert (tmp_path / "bad.zip").read_bytes() == b"not a zip"


def _damaged(path: Path, where: bytes, offset: int, value: int | None = None) -> bytes:
    """``path`` with the byte at ``offset`` past the first ``where`` flipped (or set to ``value``)."""
    raw = bytearray(path.read_bytes())
    at = raw.find(where) + offset
    raw[at] = raw[at] ^ 0xFF if value is None else value
    path.write_bytes(bytes(raw))
    return bytes(raw)


def test_a_damaged_zip_is_a_store_error_and_is_never_rewritten(tmp_path: Path) -> None:
    """A central directory that does not read (its end record intact, so it passes ``is_zipfile``): mode
    'a' raised nothing and zipfile appended a new, empty archive to it, which lost the array on close. Now
    a StoreError, as in mode 'r', and the file is untouched. A damaged version field or a name flagged
    UTF-8 that is not (NotImplementedError, UnicodeDecodeError from zipfile), and an entry whose
    compression field was changed (zlib.error on reading), are StoreErrors naming the archive too."""
    import rectizarr

    def fresh(name: str) -> Path:
        p = tmp_path / name
        with ZipStore(p, mode="w") as s:
            rectizarr.create_array(s, name="a", shape=(4,), chunks=(2,), dtype="i4")[:] = [1, 2, 3, 4]
        return p

    p = fresh("cd.zip")
    raw = _damaged(p, b"PK\x01\x02", 1)  # the central directory's first signature
    assert zipfile.is_zipfile(p)
    for mode in ("r", "a"):
        with pytest.raises(StoreError, match=r"cd\.zip"):
            ZipStore(p, mode=mode)  # type: ignore[arg-type]
    with pytest.raises(StoreError, match=r"cd\.zip"):
        rectizarr.open_group(str(p))  # mode 'a'
    assert p.read_bytes() == raw
    p = fresh("version.zip")
    _damaged(p, b"PK\x01\x02", 6, 255)  # "version needed to extract": 25.5
    with pytest.raises(StoreError, match=r"version\.zip"):
        ZipStore(p)
    p = fresh("utf8.zip")
    raw = bytearray(p.read_bytes())
    cd = raw.find(b"PK\x01\x02")
    raw[cd + 9] |= 0x08  # general purpose flags, bit 11 (UTF-8 names) set ...
    raw[cd + 46] = 0xFF  # ... on a name that is not UTF-8
    p.write_bytes(bytes(raw))
    with pytest.raises(StoreError, match=r"utf8\.zip"):
        ZipStore(p)
    p = fresh("deflate.zip")
    raw = bytearray(p.read_bytes())
    for sig, field in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):  # compression method: 8 (deflate)
        at = -1
        while (at := raw.find(sig, at + 1)) >= 0:
            raw[at + field] = 8
    p.write_bytes(bytes(raw))
    with pytest.raises(StoreError, match=r"deflate\.zip"):
        ZipStore(p).get("a/c/0")


# ---- FsspecStore and open_store -----------------------------------------------------------------------


def test_http_store_is_read_only(tmp_path: Path, http_store_factory: Callable[[Path], FsspecStore]) -> None:
    (tmp_path / "k").write_bytes(b"v")
    store = http_store_factory(tmp_path)
    assert store.read_only
    assert FsspecStore(store.root, read_only=False).read_only
    with pytest.raises(ReadOnlyError):
        store.set("k", b"w")


def test_fsspec_store_from_filesystem_and_mapper(tmp_path: Path) -> None:
    fs = fsspec.filesystem("file")
    a = FsspecStore(fs, path=str(tmp_path / "a"))
    a.set("x/y", b"1")
    b = FsspecStore(fs.get_mapper(str(tmp_path / "a")))
    assert b.get("x/y") == b"1"
    c = FsspecStore(fs, path=str(tmp_path))
    assert c.get("a/x/y") == b"1"
    with pytest.raises(StoreError, match="expected a URL"):
        FsspecStore(42)  # type: ignore[arg-type]


def test_fsspec_reads_a_zip_chain(tmp_path: Path) -> None:
    with ZipStore(tmp_path / "d.zip", mode="w") as z:
        z.set_many(TREE)
    store = open_store(f"zip::file://{tmp_path}/d.zip", mode="r")
    assert isinstance(store, FsspecStore) and store.read_only
    assert _contents(store) == TREE
    assert store.list_dir("a/") == ["c", "zarr.json"]


def test_open_store_dispatch(tmp_path: Path) -> None:
    local = open_store(tmp_path / "dir")
    assert isinstance(local, LocalStore) and not local.read_only
    assert open_store(str(tmp_path / "dir"), mode="r").read_only
    zipped = open_store(tmp_path / "x.zip", mode="w")
    assert isinstance(zipped, ZipStore) and zipped.mode == "w"
    zipped.set("k", b"v")
    zipped.close()
    reopened = open_store(tmp_path / "x.zip", mode="r")
    assert isinstance(reopened, ZipStore) and reopened.get("k") == b"v"
    reopened.close()
    appended = open_store(f"file://{tmp_path}/x.zip", mode="r+")
    assert isinstance(appended, ZipStore) and appended.mode == "a" and appended.get("k") == b"v"
    appended.close()
    assert isinstance(open_store(f"memory://open-store-{os.getpid()}"), FsspecStore)
    # a file:// URL is the directory's LocalStore (same locks and atomic writes as its path: through fsspec,
    # two threads writing one chunk by path and by URL lost 7-48 of 600 increments, and reads saw torn
    # chunks); with storage_options or backend="fsspec" it stays an fsspec store
    local = open_store(f"file://{tmp_path}/f", mode="w")
    assert isinstance(local, LocalStore) and local.lock_identity == LocalStore(tmp_path / "f").lock_identity
    assert isinstance(open_store(f"file://{tmp_path}/f", mode="w", backend="fsspec"), FsspecStore)
    assert isinstance(open_store(f"file://{tmp_path}/f", storage_options={"auto_mkdir": True}), FsspecStore)
    assert isinstance(open_store(fsspec.filesystem("memory")), FsspecStore)
    assert isinstance(open_store(fsspec.get_mapper(f"memory://m-{os.getpid()}")), FsspecStore)
    memory = MemoryStore()
    assert open_store(memory) is memory
    view = open_store(memory, mode="r")
    assert view.read_only and not memory.read_only
    with pytest.raises(StoreError, match="invalid mode"):
        open_store(memory, mode="rw")
    with pytest.raises(StoreError, match="storage_options"):
        open_store(tmp_path / "dir", storage_options={"anon": True})
    with pytest.raises(StoreError, match="cannot open a store"):
        open_store(3.5)  # type: ignore[arg-type]


def test_any_store_fixture_gives_writable_stores(any_store: Store) -> None:
    any_store.set("k", b"v")
    assert any_store.get("k") == b"v" and not any_store.read_only


@pytest.fixture
def _no_leftover_threads() -> Iterator[None]:
    before = threading.active_count()
    yield
    assert threading.active_count() <= before


@pytest.mark.usefixtures("_no_leftover_threads")
def test_local_get_many_uses_no_lingering_threads(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "root", workers=4)
    store.set_many({f"k{i}": bytes([i]) * 10 for i in range(20)})
    assert store.get_many([(f"k{i}", (1, 2)) for i in range(20)]) == [bytes([i]) * 2 for i in range(20)]


def test_zip_read_only_view_never_writes_the_archive(tmp_path: Path) -> None:
    path = tmp_path / "data.zip"
    store = ZipStore(path, mode="w")
    store.set_many({"a": b"1", "b": b"2"})
    store.delete("a")
    view = store.with_read_only()
    before = path.read_bytes(), path.stat().st_mtime_ns
    with pytest.raises(StoreError, match="flush"):  # the copy could not read "b": refused, not written
        pickle.dumps(view)
    view.flush()  # nothing for a view
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    store.flush()
    flushed = path.read_bytes(), path.stat().st_mtime_ns
    clone = pickle.loads(pickle.dumps(view))
    assert clone.read_only and clone.get("b") == b"2" and clone.get("a") is None
    clone.close()
    view.close()
    assert (path.read_bytes(), path.stat().st_mtime_ns) == flushed
    store.set("c", b"3")  # the writer is untouched by its view's pickling and closing
    store.close()
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["b", "c"]


def test_versioned_reads_and_conditional_writes(any_store: Store) -> None:
    """The compare-and-swap contract on every writable store: versions read with values; writes and
    deletes at a stale version change nothing; reads at a stale version raise VersionChanged."""
    from rectizarr.errors import VersionChanged

    s = any_store
    assert s.get_versioned("k") == (None, None)
    assert s.set_if("k", b"one", None)
    assert not s.set_if("k", b"two", None)  # create-only: it exists now
    value, v1 = s.get_versioned("k")
    assert value == b"one" and v1 is not None
    [(whole, v), (part, w)] = s.get_many_versioned([("k", None), ("k", (1, 2))])
    assert (whole, part) == (b"one", b"ne") and v == w == v1
    assert s.get_many([("k", (0, 1)), ("k", (2, 1))], versions={"k": v1}) == [b"o", b"e"]
    assert s.set_if("k", b"three", v1)
    assert not s.set_if("k", b"four", v1)  # v1 is stale
    assert not s.delete_if("k", v1)
    assert s.get("k") == b"three"
    with pytest.raises(VersionChanged) as info:
        s.get_many([("k", (0, 1))], versions={"k": v1})
    assert info.value.key == "k"
    _, v3 = s.get_versioned("k")
    assert s.delete_if("k", v3)
    assert s.get("k") is None
    assert s.get_many_versioned([("k", (0, 4))]) == [(None, None)]


def test_iter_many_fetches_at_most_ahead_values_before_they_are_taken() -> None:
    """The base class: batches of ``ahead // 2`` requests, the next one fetched while this one is taken;
    every result once, as ``(index, value)``, missing keys as None."""
    from rectizarr.stores import MemoryStore

    store = MemoryStore()
    store.set_many({f"k/{i}": bytes([i]) for i in range(0, 10, 2)})
    batches: list[int] = []
    real = store.get_many

    def spy(requests: Any, **kw: Any) -> Any:
        batches.append(len(requests))
        return real(requests, **kw)

    store.get_many = spy  # type: ignore[method-assign]
    requests = [(f"k/{i}", None) for i in range(10)]
    got = store.iter_many(requests, ahead=4)
    first = next(got)
    assert first == (0, b"\x00") and sum(batches) <= 4  # one batch taken from, the next one in flight
    rest = list(got)
    assert [first, *rest] == [(i, bytes([i]) if i % 2 == 0 else None) for i in range(10)]
    assert batches == [2, 2, 2, 2, 2]
    batches.clear()
    assert list(store.iter_many(requests[:3], ahead=4)) == [(0, b"\x00"), (1, None), (2, b"\x02")]
    assert batches == [3]


def test_each_arrival_calls_on_every_value_in_order_for_stores_without_request_threads() -> None:
    from rectizarr.stores import MemoryStore

    store = MemoryStore()
    store.set_many({"a": b"abc", "b": b"defg"})
    assert not store.capabilities.requests_on_threads
    got: list[tuple[int, bytes | None]] = []
    store.each_arrival(
        [("b", (1, 2)), ("x", None), ("a", None)],
        lambda i, v: got.append((i, None if v is None else bytes(v))),
    )
    assert got == [(0, b"ef"), (1, None), (2, b"abc")]


def test_a_zip_archive_has_one_writer_in_a_process(tmp_path: Path) -> None:
    """A second writable ZipStore of an archive another one of this process writes is refused: the two
    wrote over each other's central directory (one array lost, nothing raised). Readers, and a writer
    once the first is closed, are fine."""
    path = tmp_path / "a.zip"
    first = ZipStore(path, mode="w")
    first.set("k", b"1")
    for mode in ("a", "w"):
        with pytest.raises(StoreError, match="open for writing by another ZipStore"):
            ZipStore(path, mode=mode)
    import rectizarr

    with pytest.raises(StoreError, match="open for writing"):
        rectizarr.open_group(str(path), mode="a")
    first.close()
    with ZipStore(path, mode="a") as second:
        second.set("j", b"2")
    with ZipStore(path) as reader:
        assert reader.get("k") == b"1" and reader.get("j") == b"2"


def test_a_dict_is_a_memory_store_over_its_contents() -> None:
    """As zarr-python: a dict opened as a store holds its contents, as bytes; other stores over the same
    dict see them (and take the same locks); a value put there by other code is a new version; a value
    that is not bytes-like is a StoreError naming its key."""
    from rectizarr.stores import open_store

    d: dict[str, Any] = {}
    a = rectizarr.create_array(d, shape=(5,), dtype="i4", chunks=(2,))
    a[...] = np.arange(5)
    assert sorted(d) == ["c/0", "c/1", "c/2", "zarr.json"] and all(type(v) is bytes for v in d.values())
    b = rectizarr.open_array(d, mode="r")
    assert np.array_equal(b[...], np.arange(5)) and open_store(d).lock_identity == open_store(d).lock_identity
    store = open_store(d)
    before = store.version("c/0")
    d["c/0"] = bytearray(d["c/1"])  # changed by other code: a new version, read as bytes
    assert store.version("c/0") != before and store.get("c/0") == d["c/1"]
    assert np.array_equal(b[...], [2, 3, 2, 3, 4])
    with pytest.raises(ReadOnlyError):
        b[0] = 1
    with pytest.raises(StoreError, match=r"'zarr\.json'.*int"):
        rectizarr.open_array({"zarr.json": 5})
    with pytest.raises(StoreError, match=r"'c/0'.*int"):
        MemoryStore({"c/0": 4})  # (not four zero bytes)
    g = rectizarr.open_group(d2 := {}, mode="w")
    g.create_array("x", shape=(3,), dtype="f4", chunks=(3,))[...] = 1
    assert np.array_equal(rectizarr.open_group(d2, mode="r")["x"][...], np.ones(3, "f4"))


def test_a_bytearray_in_a_dict_changed_in_place_is_a_new_version() -> None:
    """A mutable value changed in place (same object) is a new version: a cached shard index is not used
    for its new bytes."""
    d: dict[str, Any] = {}
    a = rectizarr.create_array(
        d, shape=(32,), dtype="i4", chunks=(2,), shards=(16,), fill_value=0, compressors=None
    )
    a[0:2], a[30:32], a[16:18] = [1, 2], [7, 8], [5, 6]
    d["c/0"] = bytearray(d["c/0"])
    assert a[0:4].tolist() == [1, 2, 0, 0] and a[0] == 1  # its index cached
    d["c/0"][:] = d["c/1"]  # in place: now shard 1's bytes
    assert a[0:16].tolist() == [5, 6] + [0] * 12 + [7, 8]


def test_a_dict_written_by_zarr_python_is_read() -> None:
    """zarr-python keeps its own buffer objects in a dict store: rectizarr reads their bytes."""
    zarr = pytest.importorskip("zarr")
    d: dict[str, Any] = {}
    z = zarr.create_array(d, shape=(3,), dtype="i4", chunks=(2,))
    z[...] = [1, 2, 3]
    assert not isinstance(d["zarr.json"], bytes)
    assert rectizarr.open_array(d, mode="r")[...].tolist() == [1, 2, 3]


def test_get_many_versioned_reads_again_only_the_keys_rewritten_meanwhile() -> None:
    """A key rewritten during the read is read again alone, at one version for all its ranges (every key
    was read again, and a writer rewriting one of many shards made readers give up)."""

    reads: list[list[str]] = []

    class Rewriting(MemoryStore):
        def _get_batch(self, requests: Any) -> Any:
            reads.append(sorted({k for k, _ in requests}))
            out = super()._get_batch(requests)
            if len(reads) == 1:
                self.set("b", b"BBBB")  # a writer, between the read and the version check
            return out

    store = Rewriting({"a": b"aaaa", "b": b"bbbb", "c": b"cccc"})
    got = store.get_many_versioned([("a", (0, 2)), ("b", (0, 2)), ("b", (2, 2)), ("c", None)])
    assert [d for d, _ in got] == [b"aa", b"BB", b"BB", b"cccc"]
    assert reads == [["a", "b", "c"], ["b"]]
    assert got[1][1] == got[2][1] == store.version("b") and got[0][1] == store.version("a")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_gets_a_fresh_lock_shared_by_a_store_and_its_views() -> None:
    """A lock held at the fork (by another thread of the parent) is free in the child, and a store and its
    read-only view still share one lock there."""
    store = MemoryStore()
    view = store.with_read_only()
    with store._lock, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (fork() with other threads running)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os._exit(0 if store._lock is view._lock and store._lock.acquire(timeout=5) else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
