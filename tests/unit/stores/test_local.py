"""``Store.get_transient``: the I/O layer's one-value read, which ``LocalStore`` may answer with a view of a
per-thread buffer. Contract: it equals ``get(key, byte_range)``; a view stays valid only until the same
thread's next transient read (consume or copy it first); other threads have buffers of their own."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rectizarr
import rectizarr.stores.local as local
from rectizarr import tuning
from rectizarr.stores import CountingStore, LocalStore, MemoryStore
from tests.strategies import examples

DATA = bytes(range(256)) * 40 + b"tail"  # 10244 bytes
ZSTD_CHECKED = [{"name": "zstd", "configuration": {"level": 1, "checksum": True}}]


def as_bytes(value: bytes | memoryview | None) -> bytes | None:
    return None if value is None else bytes(value)


def same_as_get(store: Any, key: str, byte_range: tuple[int, int | None] | None) -> bytes | None:
    """``get_transient``'s answer (copied) after checking it equals ``get``'s."""
    got = store.get_transient(key, byte_range)
    assert got is None or isinstance(got, bytes | memoryview)
    copied = as_bytes(got)
    assert copied == store.get(key, byte_range), (key, byte_range)
    return copied


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    s = LocalStore(tmp_path / "s")
    s.set_many({"k": DATA, "empty": b"", "dir/inner": b"x", "one": b"1"})
    return s


RANGES: list[tuple[int, int | None] | None] = [
    None,
    (0, 10),
    (0, len(DATA)),
    (5000, 123),
    (len(DATA) - 4, 4),
    (len(DATA) - 4, 100),  # past the end
    (len(DATA), 1),
    (len(DATA) + 50, 10),
    (0, 0),
    (77, 0),
    (len(DATA) + 1, 0),  # zero-length
    (-4, None),
    (-len(DATA) - 10, None),
    (0, None),
    (10000, None),
    (len(DATA) + 3, None),  # fallbacks
]


@pytest.mark.parametrize("byte_range", RANGES, ids=str)
def test_equals_get(store: LocalStore, byte_range: tuple[int, int | None] | None) -> None:
    expected = DATA if byte_range is None else store.get("k", byte_range)
    assert same_as_get(store, "k", byte_range) == expected
    if byte_range is None:
        assert expected == DATA
    assert same_as_get(store, "empty", byte_range) == b""
    assert same_as_get(store, "missing", byte_range) is None
    assert same_as_get(store, "dir", byte_range) is None  # a directory is no value, whatever the range
    assert same_as_get(store, "one/below", byte_range) is None  # a file as a directory: missing


def test_slices_of_known_values(store: LocalStore) -> None:
    assert same_as_get(store, "k", (0, 3)) == b"\x00\x01\x02"
    assert same_as_get(store, "k", (len(DATA) - 2, 10)) == b"il"
    assert same_as_get(store, "k", (-4, None)) == b"tail"
    assert same_as_get(store, "k", (10240, None)) == b"tail"
    assert same_as_get(store, "dir/inner", None) == b"x"


@examples(0.8)
@given(
    size=st.integers(0, 70_000),
    start=st.integers(0, 80_000),
    length=st.integers(0, 80_000) | st.none(),
    whole=st.booleans(),
)
def test_random_sizes_and_ranges(
    tmp_path_factory: pytest.TempPathFactory, size: int, start: int, length: int | None, whole: bool
) -> None:
    s = LocalStore(tmp_path_factory.getbasetemp() / "random")
    value = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    s.set("v", value)
    byte_range = None if whole else (start, length)
    expected = value if whole else value[start:] if length is None else value[start : start + length]
    assert same_as_get(s, "v", byte_range) == expected


def test_overwrites_are_seen(store: LocalStore) -> None:
    for value in (b"short", DATA * 3, b"", b"again"):
        store.set("k", value)
        assert same_as_get(store, "k", None) == value
        assert same_as_get(store, "k", (2, 3)) == value[2:5]
    store.delete("k")
    assert same_as_get(store, "k", None) is None


def test_view_is_reused_by_the_next_read(store: LocalStore) -> None:
    store.set_many({"other": b"Z" * 2000, "big": DATA * 10})  # 102440 bytes: more than the first buffer

    def reads() -> None:  # on a new thread: its buffer from scratch
        first = store.get_transient("k", (0, 1000))
        assert isinstance(first, memoryview)  # the buffer path (POSIX readv)
        kept = bytes(first)  # the contract: copy (or consume) before this thread's next read
        second = store.get_transient("other", None)
        assert isinstance(second, memoryview)
        assert kept == DATA[:1000] and bytes(second) == b"Z" * 2000
        assert bytes(first) == b"Z" * 1000  # the first view now shows the second read's bytes
        assert np.shares_memory(np.frombuffer(first, np.uint8), np.frombuffer(second, np.uint8))
        big = store.get_transient("big", None)  # larger than the buffer so far: a new one, old views intact
        assert isinstance(big, memoryview)
        assert bytes(big) == DATA * 10 and bytes(second) == b"Z" * 2000
        assert not np.shares_memory(np.frombuffer(big, np.uint8), np.frombuffer(second, np.uint8))

    with ThreadPoolExecutor(1) as pool:
        pool.submit(reads).result()


def test_threads_have_their_own_buffers(store: LocalStore) -> None:
    values = {f"t{i}": bytes([i]) * (1000 + 37 * i) for i in range(16)}
    store.set_many(values)

    def read(key: str) -> bool:
        ok = True
        for _ in range(20):  # interleaved with the other threads' reads
            ok &= bytes(store.get_transient(key, None) or b"") == values[key]
            ok &= bytes(store.get_transient(key, (3, 500)) or b"") == values[key][3:503]
        return ok

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(read, list(values) * 2))


@pytest.mark.parametrize("key", ["k", "empty", "one", "missing", "dir"])
def test_size_hints_right_or_wrong(monkeypatch: pytest.MonkeyPatch, store: LocalStore, key: str) -> None:
    expected = store.get(key)
    for hint in (None, 0, 1, len(DATA) - 1, len(DATA), len(DATA) + 1, 1 << 20):
        got = store.get_transient(key, None, hint)  # a hint only saves an fstat: any hint gives the value
        assert as_bytes(got) == expected, hint
        assert as_bytes(store.get_transient(key, (1, 3), hint)) == store.get(key, (1, 3))
    with tuning.use(replace(tuning.current(), transient_max_bytes=5)):
        assert as_bytes(store.get_transient(key, None, len(DATA))) == expected
        assert as_bytes(store.get_transient(key, None, 4)) == expected


def test_values_from_the_size_limit_get_fresh_bytes(store: LocalStore) -> None:
    with tuning.use(replace(tuning.current(), transient_max_bytes=100)):
        _check_fresh(store)


def _check_fresh(store: LocalStore) -> None:
    for key, byte_range in [
        ("k", None),
        ("k", (10, 100)),
        ("k", (len(DATA) - 50, 200)),
        ("dir", None),
        ("dir", (0, 200)),
        ("missing", None),
    ]:
        got = store.get_transient(key, byte_range)
        assert got is None or isinstance(got, bytes), (key, byte_range)
        assert got == store.get(key, byte_range)
    small = store.get_transient("k", (0, 99))
    assert isinstance(small, memoryview) and bytes(small) == DATA[:99]
    assert store.get_transient("empty", None) == b""


def test_without_readv_the_plain_read(monkeypatch: pytest.MonkeyPatch, store: LocalStore) -> None:
    monkeypatch.setattr(local, "READV", False)
    for byte_range in RANGES:
        got = store.get_transient("k", byte_range)
        assert isinstance(got, bytes) and got == store.get("k", byte_range)
    assert store.get_transient("missing", None) is None


def test_other_stores_and_counting(monkeypatch: pytest.MonkeyPatch, store: LocalStore) -> None:
    memory = MemoryStore()
    memory.set("k", DATA)
    for byte_range in [None, (0, 5), (10240, 100), (-4, None), (3, None)]:
        assert same_as_get(memory, "k", byte_range) == store.get("k", byte_range)
    assert memory.get_transient("missing", None) is None
    for inner in (store, memory):
        counting = CountingStore(inner)
        assert as_bytes(counting.get_transient("k", (1, 2))) == DATA[1:3]
        assert counting.get_transient("nope", None) is None
        assert as_bytes(counting.get_transient("k", None)) == DATA
        assert as_bytes(counting.get_transient("k", None, len(DATA))) == DATA
        assert counting.requests == [("k", (1, 2)), ("nope", None), ("k", None), ("k", None)]
    hints: list[int | None] = []
    original = LocalStore.get_transient

    def spy(self: LocalStore, key: str, byte_range: Any, hint: int | None = None) -> Any:
        hints.append(hint)
        return original(self, key, byte_range, hint)

    monkeypatch.setattr(LocalStore, "get_transient", spy)
    assert as_bytes(CountingStore(store).get_transient("k", None, 12345)) == DATA
    assert hints == [12345]  # the size hint is passed on


@pytest.mark.parametrize("shards", [None, (4, 8)], ids=["chunked", "sharded"])
def test_array_reads_through_transient_values(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shards: tuple[int, int] | None
) -> None:
    """Chunks and shards of local data come through ``get_transient`` (views of the reused buffers)."""
    seen: list[tuple[str, Any]] = []
    original = LocalStore.get_transient

    def spy(self: LocalStore, key: str, byte_range: Any, *args: Any) -> bytes | memoryview | None:
        seen.append((key, byte_range))
        return original(self, key, byte_range, *args)

    monkeypatch.setattr(LocalStore, "get_transient", spy)
    counting = CountingStore(LocalStore(tmp_path / "a.zarr"))
    extra: dict[str, Any] = {} if shards is None else {"shards": shards}
    a = rectizarr.create_array(
        counting, shape=(17, 30), dtype="<i4", chunks=(2, 4), fill_value=-1, compressors=ZSTD_CHECKED, **extra
    )
    data = np.arange(17 * 30, dtype="<i4").reshape(17, 30) * 3
    data[8:12] = -1  # some chunks never stored
    a[...] = data
    # inner chunks of a shard read one by one; no block batches (their chunk files are read into slots: test_coded_blocks)
    piecewise = replace(tuning.current(), piecewise_bytes=0, block_min_chunks=10**9)
    for sel in [(...,), (slice(None, None, -1), slice(3, 29, 2)), (slice(1, 16, 5), [0, 29, 4])]:
        seen.clear()
        with tuning.use(piecewise):
            np.testing.assert_array_equal(a[sel], data[sel])
        assert seen and all(r is None if shards is None else r is not None for _, r in seen), sel
