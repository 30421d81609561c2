"""Writes of whole shards of small inner chunks skip the per-inner-chunk projections
(``rectizarr.io.batch.write_shards``): a spy shows which writes take that way, and every write equals
numpy and the bytes of the per-chunk way (``piecewise_bytes=0`` turns batches off)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import rectizarr
import rectizarr.io.batch as batch
from rectizarr import tuning

CODECS: dict[str, Any] = {
    "zstd": {"name": "zstd", "configuration": {"level": 1}},
    "blosc": {
        "name": "blosc",
        "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0},
    },
    "none": None,
}


@contextmanager
def taken() -> Iterator[list[bool]]:
    calls: list[bool] = []
    original = batch.write_shards

    def spy(*args: Any) -> bool:
        calls.append(original(*args))
        return calls[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(batch, "write_shards", spy)
        yield calls


@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("empty", [False, True])
def test_whole_shards_equal_the_per_chunk_way(codec: str, empty: bool) -> None:
    shape, kw = (
        (40, 36),
        {
            "dtype": "<i4",
            "chunks": (4, 6),
            "shards": (8, 12),
            "fill_value": 3,
            "compressors": CODECS[codec],
            "write_empty_chunks": empty,
        },
    )
    value = np.arange(40 * 36, dtype="<i4").reshape(shape)
    value[8:16, :] = 3  # a row of shards all fill: deleted (or kept, with write_empty_chunks)
    cases: list[tuple[Any, bool]] = [
        (np.s_[...], True),
        (np.s_[8:24, 12:36], True),
        (np.s_[0:8, 0:12], True),
        (np.s_[0:8, 0:6], False),
        (np.s_[1:9, :], False),
        (np.s_[:, ::2], False),
    ]
    for sel, whole in cases:
        stores = [rectizarr.MemoryStore(), rectizarr.MemoryStore()]
        arrays = [rectizarr.create_array(s, shape=shape, **kw) for s in stores]
        with taken() as calls:
            arrays[0][sel] = value[sel]
        assert calls == [whole], sel
        with tuning.use(replace(tuning.current(), piecewise_bytes=0)):
            arrays[1][sel] = value[sel]
        assert {k: stores[0].get(k) for k in stores[0].list_prefix("")} == {
            k: stores[1].get(k) for k in stores[1].list_prefix("")
        }, sel
        expected = np.full(shape, 3, "<i4")
        expected[sel] = value[sel]
        np.testing.assert_array_equal(arrays[0][...], expected)


def test_shards_past_the_extent_and_transposed_shards_go_the_general_way() -> None:
    a = rectizarr.create_array(
        rectizarr.MemoryStore(), shape=(20, 36), dtype="<i4", chunks=(4, 6), shards=(8, 12)
    )
    with taken() as calls:
        a[...] = 1  # the last row of shards reaches past the extent
    assert calls == [False] and (a[...] == 1).all()
    value = np.arange(16 * 24, dtype="<i4").reshape(16, 24)
    transpose = {"name": "transpose", "configuration": {"order": [1, 0]}}
    raw = {"name": "bytes", "configuration": {"endian": "little"}}
    index = [raw, {"name": "crc32c"}]
    for outer, inner, whole in (([transpose], [raw], False), ([], [transpose, raw], True)):
        sharding = {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [6, 4] if outer else [4, 6],
                "codecs": inner,
                "index_codecs": index,
            },
        }
        stores = [rectizarr.MemoryStore(), rectizarr.MemoryStore()]
        arrays = [
            rectizarr.create_array(s, shape=(16, 24), dtype="<i4", chunks=(8, 12), codecs=[*outer, sharding])
            for s in stores
        ]
        with taken() as calls:
            arrays[0][...] = value  # shards coded in another axis order; inner chunks in another
        assert calls == [whole]
        with tuning.use(replace(tuning.current(), piecewise_bytes=0)):
            arrays[1][...] = value
        assert {k: stores[0].get(k) for k in stores[0].list_prefix("")} == {
            k: stores[1].get(k) for k in stores[1].list_prefix("")
        }
        np.testing.assert_array_equal(arrays[0][...], value)


@pytest.mark.parametrize("codec", ["zstd", "blosc", "none"])
@pytest.mark.parametrize("location", ["end", "start"])
@pytest.mark.parametrize("slack", [1024, -(10**9)])  # -10**9: the shard's buffer grows at every inner chunk
def test_large_coded_inner_chunks_encoded_one_by_one_give_the_same_bytes(
    codec: str, location: str, slack: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whole shards whose inner chunks are large and compressed (or raw) are encoded inner chunk by inner
    chunk into one buffer (``threaded_bytes_coded=0`` makes these small ones count as large): the same bytes
    as the per-chunk way, empty inner chunks left out, a shard of only empty ones not stored."""
    shape = (40, 36)
    value = np.arange(40 * 36, dtype="<i4").reshape(shape) * 7919 % 10007
    value[8:16, :] = 3  # a row of shards all fill
    value[0:4, 0:6] = 3  # one empty inner chunk in a shard that is stored
    sharding = {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [4, 6],
            "index_location": location,
            "codecs": [
                {"name": "bytes", "configuration": {"endian": "little"}},
                *([CODECS[codec]] if CODECS[codec] else []),
            ],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
        },
    }
    stores = [rectizarr.MemoryStore(), rectizarr.MemoryStore()]
    arrays = [
        rectizarr.create_array(s, shape=shape, dtype="<i4", chunks=(8, 12), codecs=[sharding], fill_value=3)
        for s in stores
    ]
    calls: list[Any] = []
    each = batch.encode_shard_each
    monkeypatch.setattr(batch, "encode_shard_each", lambda *a: calls.append(1) or each(*a))
    with tuning.use(replace(tuning.current(), threaded_bytes_coded=0, encoded_slack_bytes=slack)):
        arrays[0][...] = value
    assert len(calls) == 15  # every shard
    with tuning.use(replace(tuning.current(), piecewise_bytes=0)):
        arrays[1][...] = value
    keys = sorted(stores[0].list_prefix(""))
    assert keys == sorted(stores[1].list_prefix("")) and "c/1/0" not in keys and len(keys) == 13
    assert all(stores[0].get(k) == stores[1].get(k) for k in keys)
    np.testing.assert_array_equal(arrays[0][...], value)


@pytest.mark.parametrize("codec", ["zstd", "none"])
def test_whole_shards_of_large_inner_chunks_are_encoded_at_once(
    codec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that replaces whole shards of large (here 128 KiB) inner chunks encodes each shard from its
    block of the value at once: the bytes of the sharding codec's own per-chunk encoding."""
    from rectizarr.codecs.base import ChunkSpec

    calls: list[int] = []
    each = batch.encode_shard_each
    monkeypatch.setattr(batch, "encode_shard_each", lambda *a: calls.append(1) or each(*a))
    store = rectizarr.MemoryStore()
    a = rectizarr.create_array(
        store,
        shape=(512, 256),
        dtype="<f8",
        chunks=(128, 128),
        shards=(256, 256),
        compressors=CODECS[codec],
        fill_value=0,
    )
    value = np.arange(512 * 256, dtype="<f8").reshape(512, 256) % 977
    value[256:384, 0:128] = 0  # an empty inner chunk
    a[...] = value
    assert len(calls) == 2
    sharding = a.pipeline.sharding
    for i in range(2):
        block = value[i * 256 : (i + 1) * 256]
        expected = sharding.encode(block, ChunkSpec((256, 256), np.dtype("<f8"), np.array(0.0), f"c/{i}/0"))
        assert store.get(f"c/{i}/0") == expected
    np.testing.assert_array_equal(a[...], value)


class _Keeping(rectizarr.MemoryStore):
    """A store that keeps the very buffers it is given (as a user's store may), and says so: it must not
    be handed memory that is reused afterwards."""

    capabilities = replace(rectizarr.MemoryStore.capabilities, values_consumed=False)

    def _set_batch(self, items: Any) -> None:
        with self._lock:
            for key, value in items.items():
                self._data[key] = (value, 0)

    def get(self, key: str, byte_range: Any = None) -> Any:
        got = super().get(key, byte_range)
        return None if got is None else bytes(got)


@pytest.mark.parametrize("codec", ["none", "zstd"])
@pytest.mark.parametrize("kind", ["local", "memory", "keeping"])
def test_shards_made_in_one_reused_buffer_per_thread_are_each_stored_whole(
    codec: str, kind: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the store keeps no reference to what it is given, a write of large values makes them in one
    buffer per thread, reused from value to value (each stored before the next is made): 24 shards,
    several per thread, read back exactly; with a store that keeps its values, new memory every time."""
    import rectizarr.io.chunk as chunk

    makers: dict[str, Any] = {
        "local": lambda: rectizarr.LocalStore(tmp_path / "a"),
        "memory": rectizarr.MemoryStore,
        "keeping": _Keeping,
    }
    store = makers[kind]()
    addresses: list[int] = []
    made = chunk.value_buffer

    def spy(nbytes: int) -> np.ndarray:
        buf = made(nbytes)
        addresses.append(int(buf.__array_interface__["data"][0]))
        return buf

    monkeypatch.setattr(batch, "value_buffer", spy)
    a = rectizarr.create_array(
        store,
        shape=(768, 256),
        dtype="<i8",
        chunks=(32, 64),
        shards=(32, 128),
        compressors=CODECS[codec],
        fill_value=0,
    )
    value = np.arange(768 * 256, dtype="<i8").reshape(768, 256) * 7 % 1009
    value[32:64] = 0  # two empty shards
    with tuning.use(replace(tuning.current(), threaded_bytes_coded=1, reused_value_bytes=32 * 128 * 8)):
        a[...] = value
    np.testing.assert_array_equal(rectizarr.open_array(store, mode="r")[...], value)
    assert len(addresses) == 48  # every shard (the two empty ones store nothing)
    reused = len(set(addresses)) < len(addresses) / 4  # a buffer or two per thread
    assert reused == (kind != "keeping")
    assert chunk.value_buffer(16).flags.owndata  # after the write: new memory again


def test_writers_on_many_threads_each_get_their_own_reused_buffers(tmp_path: Any) -> None:
    """Six threads write whole arrays of shards at once (local and memory stores), twelve times each, with
    value buffers reused within each write: every read back equals its last write."""
    wrong: list[tuple[int, int]] = []

    def writer(i: int) -> None:
        rng = np.random.default_rng(i)
        store = rectizarr.LocalStore(tmp_path / str(i)) if i % 2 else rectizarr.MemoryStore()
        a = rectizarr.create_array(
            store,
            shape=(256, 128),
            dtype="<u8",
            chunks=(32, 64),
            shards=(64, 128),
            compressors=None if i % 3 else CODECS["zstd"],
            fill_value=0,
        )
        with tuning.use(replace(tuning.current(), threaded_bytes_coded=1, reused_value_bytes=1)):
            for step in range(12):
                value = rng.integers(0, 1000, size=(256, 128), dtype=np.uint64) * (step + 1) + i
                if step % 3 == 2:
                    value[:64] = 0  # an empty shard
                a[...] = value
                if not np.array_equal(rectizarr.open_array(store, mode="r")[...], value):
                    wrong.append((i, step))

    with ThreadPoolExecutor(6) as pool:  # a writer's error is raised here
        list(pool.map(writer, range(6)))
    assert wrong == []


@pytest.mark.parametrize(
    "tuned", [{}, {"threaded_bytes_coded": 0, "threaded_bytes": 0}, {"piecewise_bytes": 0}]
)
@pytest.mark.parametrize(
    ("dtype", "value"), [("S3", b"ab"), ("U3", "x"), ("i4", 7), ("f8", 1.5), ("?", True), ("c16", 1 - 2j)]
)
@pytest.mark.parametrize("codec", ["zstd", "none"])
def test_zero_dimensional_sharded_arrays(
    tmp_path: Any, tuned: dict[str, int], dtype: str, value: Any, codec: str
) -> None:
    """A 0-d shard is cut out of the value as a NumPy scalar unless indexed with an Ellipsis: an 'S3' value
    b"ab" was stored in 2 bytes (every later read a CodecError), and through the per-inner-chunk encoder
    any 0-d write raised TypeError."""
    with tuning.use(replace(tuning.current(), **tuned)):
        for store in (rectizarr.MemoryStore(), str(tmp_path / f"{dtype}{codec}")):
            a = rectizarr.create_array(
                store, shape=(), dtype=dtype, chunks=(), shards=(), compressors=CODECS[codec]
            )
            a[...] = value
            expected = np.array(value, dtype=dtype)
            assert a[...] == expected and a[()] == expected and a[...].dtype == expected.dtype
            b = rectizarr.open_array(store, mode="r")
            assert b[...] == expected and np.asarray(b).shape == ()
