"""What the I/O layer may ask of a store (capabilities, lock identity, cache token, read_into) and of the
tuning: every store answers, wrappers and views forward, and the answers steer the strategies."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import rectizarr
from rectizarr import tuning
from rectizarr.io.pool import pmap
from rectizarr.stores import (
    Capabilities,
    CountingStore,
    FsspecStore,
    LocalStore,
    MemoryStore,
    Store,
    ZipStore,
)


def test_every_store_answers(any_store: Store) -> None:
    caps = any_store.capabilities
    assert isinstance(caps, Capabilities)
    remote_objects = type(any_store).__name__ == "ObjectStore" or (
        getattr(any_store, "fs", None) is not None and "s3" in any_store.fs.protocol
    )
    assert caps.conditional_writes == caps.conditional_reads == remote_objects
    assert isinstance(any_store.lock_identity, str) and any_store.lock_identity
    assert isinstance(any_store.cache_token, str) and any_store.cache_token
    view = any_store.with_read_only()
    assert (view.capabilities, view.lock_identity, view.cache_token) == (
        caps,
        any_store.lock_identity,
        any_store.cache_token,
    )


def test_a_stored_value_is_the_callers_bytes_at_the_time_of_the_write(any_store: Store) -> None:
    """No store keeps the caller's buffer: writes that say so (``values_consumed``) reuse it at once."""
    buf = bytearray(b"abc" * 1000)
    any_store.set_many({"k/v": memoryview(buf), "k/w": buf})
    buf[:] = b"x" * len(buf)
    assert any_store.get("k/v") == any_store.get("k/w") == b"abc" * 1000


def test_capabilities_by_backend(tmp_path: Path) -> None:
    local, memory = LocalStore(tmp_path / "l"), MemoryStore()
    zipped = ZipStore(tmp_path / "z.zip", mode="w")
    remote = FsspecStore("memory://caps")
    assert local.capabilities == Capabilities(
        low_latency=True,
        native_read_into=True,
        cheap_versions=True,
        process_locks=True,
        consistent_listing=True,
        values_consumed=True,
    )
    assert memory.capabilities == Capabilities(
        low_latency=True, cheap_versions=True, consistent_listing=True, values_consumed=True
    )
    assert zipped.capabilities == Capabilities(consistent_listing=True, cheap_versions=True)
    assert remote.capabilities == Capabilities()
    for inner in (local, memory, zipped, remote):  # a wrapper forwards what it wraps
        spy = CountingStore(inner)
        assert spy.capabilities == inner.capabilities and spy.lock_identity == inner.lock_identity
        assert spy.cache_token != inner.cache_token  # its own cache entries
    zipped.close()


def test_lock_identity_names_where_data_lives(tmp_path: Path) -> None:
    (tmp_path / "a" / "sub").mkdir(parents=True)
    one, two, sub = LocalStore(tmp_path / "a"), LocalStore(tmp_path / "a"), LocalStore(tmp_path / "a" / "sub")
    assert one.lock_identity == two.lock_identity
    assert one.lock_identity + "sub/k" == sub.lock_identity + "k"  # a subdirectory: the same key
    assert MemoryStore().lock_identity != MemoryStore().lock_identity
    assert one.cache_token != two.cache_token


@pytest.mark.parametrize("kind", ["local", "memory", "counting"])
def test_read_into(tmp_path: Path, kind: str) -> None:
    """Natively or through ``get``: the bytes up to the view's size plus one, -1 when missing."""
    store: Store = {
        "local": LocalStore(tmp_path / "s"),
        "memory": MemoryStore(),
        "counting": CountingStore(MemoryStore()),
    }[kind]
    values = {"a": b"12345", "b": b"", "c": b"xyz", "d": bytes(range(10))}
    store.set_many(values)
    views = [memoryview(bytearray(b"\xee" * n)) for n in (5, 4, 8, 3, 3)]
    sizes = store.read_into(["a", "b", "c", "missing", "d"], views)
    assert sizes == [5, 0, 3, -1, 4]  # "d" holds more than its view: the view's size plus one
    assert [bytes(v) for v in views] == [
        b"12345",
        b"\xee" * 4,
        b"xyz" + b"\xee" * 5,
        b"\xee" * 3,
        b"\x00\x01\x02",
    ]


def test_tuning_reaches_the_pool_threads() -> None:
    seen: list[int] = []
    lock = threading.Lock()

    def probe(_: int) -> None:
        with lock:
            seen.append(tuning.current().block_min_chunks)

    with tuning.use(replace(tuning.current(), block_min_chunks=3)):
        pmap(probe, list(range(64)), 2)
    pmap(probe, [0, 1], 2)
    assert seen == [3] * 64 + [tuning.DEFAULT.block_min_chunks] * 2


@pytest.mark.parametrize(
    "setting",
    [
        {"block_min_chunks": 1},
        {"piecewise_bytes": 0},
        {"sparse_min_chunks": 1},
        {"block_min_chunks": 0, "sparse_min_chunks": 0},
        {"threaded_bytes": 0, "threaded_bytes_coded": 0},
        {"window_bytes": 1},
        {"block_min_chunks": 1, "block_coded_bytes": 1 << 40},
        {"block_coded_bytes": 0},
        {"block_min_chunks": 1, "batch_bytes": 1},
        {"prefix_min_bytes": 1, "prefix_max_fraction": 1.0},
        {"scratch_max_bytes": 0},
        {"small_read_projections": 0, "shard_group_block": 1},
        {"transient_max_bytes": 1, "assemble_numpy_bytes": 1},
    ],
)
@pytest.mark.parametrize("shards", [None, (8, 12)])
@pytest.mark.parametrize("zstd", [False, True])
def test_any_tuning_gives_the_same_data(
    tmp_path: Path, setting: dict[str, float], shards: tuple[int, ...] | None, zstd: bool
) -> None:
    """Thresholds change how data moves, never what is read or written."""
    rng = np.random.default_rng(7)
    data = rng.integers(0, 50, (37, 41)).astype("<i2")
    with tuning.use(replace(tuning.current(), **setting)):
        for store in (LocalStore(tmp_path / "a"), MemoryStore(), FsspecStore("memory://tuned")):
            store.delete_prefix("")
            a = rectizarr.create_array(
                store,
                shape=data.shape,
                dtype=data.dtype,
                chunks=(4, 6),
                shards=shards,
                fill_value=0,
                compressors=[{"name": "zstd", "configuration": {"level": 1}}] if zstd else None,
            )
            a[3:30, 5:40] = data[3:30, 5:40]
            a[0, :] = data[0, :]
            expected = np.zeros_like(data)
            expected[3:30, 5:40] = data[3:30, 5:40]
            expected[0, :] = data[0, :]
            np.testing.assert_array_equal(a[...], expected)
            np.testing.assert_array_equal(a[2:33:3, ::-2], expected[2:33:3, ::-2])
            np.testing.assert_array_equal(a.vindex[[1, 5, 36], [0, 40, 7]], expected[[1, 5, 36], [0, 40, 7]])
            assert a[3:1].shape == (0, 41) and a.oindex[[], 2:5].shape == (0, 3)  # empty selections
            a[3:1] = 1
            a.resize((20, 41))
            np.testing.assert_array_equal(a[...], expected[:20])
