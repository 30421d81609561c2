"""rectizarr <-> dask, computed on a LocalCluster of two worker processes (tasks cross process boundaries)."""

from __future__ import annotations

import functools
import pickle
from collections.abc import Iterator
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster

import rectizarr
from rectizarr.errors import MetadataError, ReadOnlyError
from rectizarr.integrations.dask import ArrayRef, aligned_chunks, store_dask, to_rectizarr, write_tasks
from rectizarr.stores import CountingStore, MemoryStore

RNG = np.random.default_rng(42)


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as c,
    ):
        yield c


def _worker_pids(client: Client) -> set[int]:
    return set(client.run(functools.partial(eval, "__import__('os').getpid()")).values())


def test_read_regular_and_rectilinear(client: Client, tmp_path: Path) -> None:
    data = RNG.normal(size=(40, 30)).astype("f4")
    regular = rectizarr.create_array(tmp_path, name="reg", shape=data.shape, dtype="f4", chunks=(16, 10))
    rect = rectizarr.create_array(
        tmp_path, name="rect", shape=data.shape, dtype="f4", chunks=[[5, 20, 15], [7, 23]]
    )
    regular[...] = data
    rect[...] = data
    for arr in (regular, rect):
        x = rectizarr.to_dask(rectizarr.open_array(tmp_path, path=arr.path, mode="r"))
        assert x.chunks == arr.write_chunk_sizes
        assert x.numblocks == arr.grid.grid_shape  # one task per storage chunk
        np.testing.assert_array_equal(client.compute(x).result(), data)
        np.testing.assert_array_equal(client.compute(x[3:37:2, ::-3]).result(), data[3:37:2, ::-3])
    assert rectizarr.to_dask(rect).chunks == ((5, 20, 15), (7, 23))


def test_mean_over_axis_of_rectilinear_array(client: Client, tmp_path: Path) -> None:
    days = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    data = RNG.normal(size=(365, 12)).astype("f8")
    arr = rectizarr.create_array(tmp_path, name="t", shape=data.shape, dtype="f8", chunks=[days, 6])
    arr[...] = data
    x = rectizarr.to_dask(arr)
    assert x.chunks[0] == tuple(days)
    np.testing.assert_allclose(client.compute(x.mean(axis=0)).result(), data.mean(axis=0))
    monthly = [b.mean(axis=0) for b in np.split(data, np.cumsum(days)[:-1])]
    got = client.compute(x.map_blocks(lambda b: b.mean(axis=0, keepdims=True), chunks=((1,) * 12, (6, 6))))
    np.testing.assert_allclose(got.result(), np.stack(monthly))


def test_read_chunks_on_sharded_array_are_inner_chunks(client: Client, tmp_path: Path) -> None:
    data = np.arange(24 * 20, dtype="i4").reshape(24, 20)
    arr = rectizarr.create_array(
        tmp_path, name="s", shape=data.shape, dtype="i4", shards=[[12, 8, 4], 20], chunks=(4, 5)
    )
    arr[...] = data
    storage = rectizarr.to_dask(arr)
    read = rectizarr.to_dask(arr, chunks="read")
    assert storage.chunks == ((12, 8, 4), (20,))
    assert read.chunks == ((4,) * 6, (5,) * 4) == arr.read_chunk_sizes
    np.testing.assert_array_equal(client.compute(read).result(), data)
    custom = rectizarr.to_dask(arr, chunks=(10, 7))
    assert custom.chunks == ((10, 10, 4), (7, 7, 6))
    np.testing.assert_array_equal(client.compute(custom).result(), data)


def test_write_on_cluster_and_round_trip_irregular(client: Client, tmp_path: Path) -> None:
    data = RNG.integers(1, 1000, size=(12, 10)).astype("i8")
    x = da.from_array(data, chunks=((3, 7, 2), (5, 5)))
    future = rectizarr.from_dask(x, tmp_path, name="irr", compute=False, dimension_names=["t", "y"])
    client.compute(future).result()
    arr = rectizarr.open_array(tmp_path, path="irr", mode="r")
    assert arr.grid.kind == "rectilinear"
    assert arr.write_chunk_sizes == ((3, 7, 2), (5, 5))
    assert arr.dimension_names == ("t", "y")
    np.testing.assert_array_equal(arr[...], data)
    back = rectizarr.to_dask(arr)
    assert back.chunks == x.chunks
    np.testing.assert_array_equal(client.compute(back).result(), data)
    # dask-style spelling, regular chunks and a transformed source computed on the workers
    y = to_rectizarr(x * 2 + 1, tmp_path, name="reg", compute=False)
    client.compute(y).result()
    arr2 = rectizarr.open_array(tmp_path, path="reg", mode="r")
    assert arr2.write_chunk_sizes == ((3, 7, 2), (5, 5))
    np.testing.assert_array_equal(arr2[...], data * 2 + 1)


def test_shards_match_writes_one_shard_per_block(client: Client, tmp_path: Path) -> None:
    data = RNG.normal(size=(30, 16)).astype("f4")
    x = da.from_array(data, chunks=((10, 15, 5), (8, 8)))
    delayed = rectizarr.from_dask(x, tmp_path, name="sh", shards="match", chunks=(5, 4), compute=False)
    client.compute(delayed).result()
    arr = rectizarr.open_array(tmp_path, path="sh", mode="r")
    assert arr.is_sharded and arr.write_chunk_sizes == x.chunks and arr.read_chunk_sizes[1] == (4,) * 4
    np.testing.assert_array_equal(arr[...], data)
    with pytest.raises(MetadataError, match="inner chunk shape"):
        rectizarr.from_dask(x, tmp_path, name="bad", shards="match")


def _touched_units(array: rectizarr.Array, chunks: tuple[tuple[int, ...], ...]) -> list[set[tuple[int, ...]]]:
    """For every block of ``chunks``, the storage units (chunk coords) it writes."""
    out = []
    stops = [np.cumsum(c) for c in chunks]
    for idx in np.ndindex(*(len(c) for c in chunks)):
        ranges = []
        for ax, i in enumerate(idx):
            lo, hi = int(stops[ax][i] - chunks[ax][i]), int(stops[ax][i])
            d = array.grid.dims[ax]
            ranges.append(
                range(int(d.chunks_of(np.array([lo]))[0]), int(d.chunks_of(np.array([hi - 1]))[0]) + 1)
            )
        out.append(
            {tuple(r[j] for r, j in zip(ranges, c, strict=True)) for c in np.ndindex(*map(len, ranges))}
        )
    return out


def test_misaligned_blocks_into_shared_shards_lose_nothing(client: Client, tmp_path: Path) -> None:
    """zarr-python issue 3682: many small dask blocks per shard, written by several processes at once,
    read-modify-write the same shard and lose each other's data. rectizarr rechunks to shard boundaries."""
    data = np.arange(1, 96 * 64 + 1, dtype="i4").reshape(96, 64)  # no value equals the fill value 0
    x = da.from_array(data, chunks=(5, 7))  # 20 x 10 blocks, none aligned to the 32 x 32 shards
    arr = rectizarr.create_array(
        tmp_path, name="shared", shape=data.shape, dtype="i4", shards=(32, 32), chunks=(8, 8)
    )
    # every shard is written by exactly one task
    tasks = write_tasks(x, arr)
    assert tasks.numblocks == arr.grid.grid_shape == (3, 2)
    rechunked = aligned_chunks(x.chunks, arr.write_chunk_sizes)
    assert rechunked == arr.write_chunk_sizes
    owners = _touched_units(arr, rechunked)
    assert sum(len(o) for o in owners) == len(set().union(*owners)) == arr.nshards
    assert client.compute(store_dask(x, arr)).result() == data.size
    np.testing.assert_array_equal(rectizarr.open_array(tmp_path, path="shared", mode="r")[...], data)
    # the same through from_dask with explicit, misaligned storage chunks (rectilinear target)
    out = rectizarr.from_dask(x, tmp_path, name="rect", chunks=[[40, 56], 30], compute=False)
    client.compute(out).result()
    np.testing.assert_array_equal(rectizarr.open_array(tmp_path, path="rect", mode="r")[...], data)


def test_aligned_chunks_keeps_coarser_whole_unit_blocks() -> None:
    assert aligned_chunks(((20, 20), (5, 5)), ((10, 10, 10, 10), (3, 7))) == ((20, 20), (3, 7))
    assert aligned_chunks(((3, 7, 2),), ((3, 7, 2),)) == ((3, 7, 2),)
    assert aligned_chunks(((6, 6),), ((4, 4, 4),)) == ((4, 4, 4),)


def test_aligned_write_reads_no_chunk(tmp_path: Path) -> None:
    """chunks='match': every block is one complete chunk, so nothing is read back (no read-modify-write)."""
    data = RNG.normal(size=(12, 10))
    store = CountingStore(MemoryStore())
    with dask.config.set(scheduler="threads"):
        arr = rectizarr.from_dask(da.from_array(data, chunks=((3, 7, 2), (4, 6))), store, name="a")
        assert not [k for k, _ in store.requests if "/c/" in k]
        assert store.writes >= 6
        sh = rectizarr.from_dask(
            da.from_array(data, chunks=((6, 6), (5, 5))), store, name="b", shards="match", chunks=(3, 5)
        )
        assert not [k for k, _ in store.requests if "/c/" in k]
    np.testing.assert_array_equal(arr[...], data)
    np.testing.assert_array_equal(sh[...], data)


def test_empty_blocks_of_a_filtered_array_are_no_chunk_edges() -> None:
    """``x[x > 3]`` after ``compute_chunk_sizes()`` has blocks of length 0: written as dask + zarr-python do."""
    x = da.arange(10, chunks=3)
    y = x[x > 3].compute_chunk_sizes()
    assert 0 in y.chunks[0]
    with dask.config.set(scheduler="threads"):
        a = rectizarr.from_dask(y, MemoryStore())
        s = rectizarr.from_dask(
            da.from_array(np.arange(20), chunks=((0, 5, 0, 7, 8, 0),)),
            MemoryStore(),
            shards="match",
            chunks=(1,),
        )
    np.testing.assert_array_equal(a[...], np.arange(4, 10))
    assert a.write_chunk_sizes == (tuple(c for c in y.chunks[0] if c),)
    np.testing.assert_array_equal(s[...], np.arange(20))
    assert s.write_chunk_sizes == ((5, 7, 8),)


def test_graphs_pickle_small_and_carry_no_array_state(tmp_path: Path) -> None:
    data = np.zeros((64, 64), "f8")
    arr = rectizarr.from_array(tmp_path, data, name="p", chunks=(8, 8))
    x = rectizarr.to_dask(arr)
    blob = pickle.dumps(dict(x.__dask_graph__()))
    assert len(blob) < data.nbytes // 2  # 64 tasks of (store path, array path, region), no data
    ref = pickle.loads(pickle.dumps(ArrayRef.of(arr)))
    assert ref.store.root == arr.store.root and ref.path == "p" and ref.mode == "r"
    restored = pickle.loads(blob)
    np.testing.assert_array_equal(dask.get(restored, (x.name, 1, 2)), data[8:16, 16:24])
    w = store_dask(da.from_array(data, chunks=8), arr)
    assert pickle.loads(pickle.dumps(dict(w.__dask_graph__())))
    # a MemoryStore pickles by value: a writer on another process would write to a copy
    mem = rectizarr.create_array(MemoryStore(), shape=(4,), dtype="i1", chunks=2)
    with pytest.raises(ReadOnlyError, match="MemoryStore"):
        pickle.dumps(ArrayRef.of(mem, "r+"))
    counted = rectizarr.create_array(CountingStore(MemoryStore()), shape=(4,), dtype="i1", chunks=2)
    with pytest.raises(ReadOnlyError, match="MemoryStore"):
        pickle.dumps(ArrayRef.of(counted, "r+"))
    assert pickle.loads(pickle.dumps(ArrayRef.of(mem, "r"))).open().shape == (4,)
    # so is fsspec's memory:// filesystem, one per process
    fs_mem = rectizarr.create_array(f"memory://dask-ref-{id(mem)}/a", shape=(4,), dtype="i1", chunks=2)
    with pytest.raises(ReadOnlyError, match="memory://"):
        pickle.dumps(ArrayRef.of(fs_mem, "r+"))


def test_workers_reopen_once_per_process(client: Client, tmp_path: Path) -> None:
    data = np.arange(200, dtype="u2")
    arr = rectizarr.from_array(tmp_path, data, name="c", chunks=(10,))
    x = rectizarr.to_dask(arr)
    np.testing.assert_array_equal(client.compute(x).result(), data)
    token = x.name.removeprefix("rectizarr-read-")
    count = functools.partial(
        eval,
        f"sum(k[1] == {token!r} for k in __import__('rectizarr.integrations.dask').integrations.dask._cache)",
    )
    per_worker = client.run(count)
    assert len(_worker_pids(client)) == 2
    assert sum(per_worker.values()) >= 1 and max(per_worker.values()) == 1  # 20 tasks, one open per process


def test_resized_array_is_detected(tmp_path: Path) -> None:
    """A read graph still reads the extent it was built for after an append (its regions are explicit);
    one built before a shrink, or a write graph after any resize, asks to be rebuilt."""
    arr = rectizarr.create_array(tmp_path, name="r", shape=(10,), dtype="i4", chunks=5)
    arr[...] = np.arange(10)
    x, shrunk = rectizarr.to_dask(arr), rectizarr.to_dask(arr)
    writes = write_tasks(da.zeros(10, dtype="i4", chunks=5), arr)
    arr.append(np.full(10, -1, dtype="i4"))
    with dask.config.set(scheduler="sync"):
        np.testing.assert_array_equal(x.compute(), np.arange(10))
        with pytest.raises(MetadataError, match="rebuild"):
            writes.compute()
        rectizarr.open_array(tmp_path / "r").resize((8,))
        with pytest.raises(MetadataError, match="rebuild"):
            shrunk.compute()


# ------------------------------------------------------------------------- Array as a dask duck array


def test_array_pickles_by_store_and_path(tmp_path: Path) -> None:
    data = RNG.normal(size=(30, 20)).astype("f4")
    a = rectizarr.create_array(tmp_path, name="p", shape=data.shape, dtype="f4", chunks=[[5, 25], 7])
    a[...] = data
    b = pickle.loads(pickle.dumps(a))
    assert b.path == a.path and b.shape == a.shape and not b.read_only
    np.testing.assert_array_equal(b[...], data)
    b[0, 0] = 99.0  # the copy writes to the same store
    assert a[0, 0] == 99.0
    r = pickle.loads(pickle.dumps(rectizarr.open_array(tmp_path, path="p", mode="r")))
    assert r.read_only
    g = pickle.loads(pickle.dumps(rectizarr.open_group(tmp_path)))
    assert g.keys() == ["p"]


def test_chunks_of_a_rectilinear_array_is_an_attribute_error(tmp_path: Path) -> None:
    a = rectizarr.create_array(tmp_path, shape=(30, 20), dtype="f4", chunks=[[5, 25], 7])
    assert getattr(a, "chunks", None) is None and not hasattr(a, "chunks")
    with pytest.raises(rectizarr.IrregularChunksError, match="write_chunk_sizes") as info:
        _ = a.chunks
    assert isinstance(info.value, AttributeError) and isinstance(info.value, MetadataError)


def test_from_array_and_store_on_a_cluster(client: Client, tmp_path: Path) -> None:
    data = RNG.normal(size=(40, 30)).astype("f4")
    a = rectizarr.create_array(tmp_path, name="src", shape=data.shape, dtype="f4", chunks=[[5, 20, 15], 10])
    a[...] = data
    grid = da.from_array(a, chunks=a.write_chunk_sizes)
    assert grid.chunks == a.write_chunk_sizes  # 1:1 with the storage grid
    np.testing.assert_array_equal(client.compute(grid).result(), data)
    auto = da.from_array(a)  # no .chunks to take: dask's own choice
    np.testing.assert_array_equal(client.compute(auto[::3]).result(), data[::3])
    out = rectizarr.create_array(tmp_path, name="dst", shape=data.shape, dtype="f4", chunks=(8, 10))
    x = da.from_array(data, chunks=(8, 10))  # aligned with the target's chunks: each block one chunk
    da.store(x, out, compute=False).compute()  # dask's default lock: pickled to the workers too
    np.testing.assert_array_equal(out[...], data)
    assert len({*_worker_pids(client)}) == 2


def test_from_zarr_and_to_zarr_take_paths(client: Client, tmp_path: Path) -> None:
    data = RNG.integers(0, 100, size=(24, 9)).astype("i2")
    x = da.from_array(data, chunks=((4, 10, 10), (9,)))
    url = str(tmp_path / "d.zarr")
    written = rectizarr.dask.to_zarr(x, url, "v")
    assert written.write_chunk_sizes == ((4, 10, 10), (9,))  # irregular blocks -> rectilinear grid
    y = rectizarr.dask.from_zarr(url, "v")
    assert y.chunks == ((4, 10, 10), (9,))
    np.testing.assert_array_equal(client.compute(y).result(), data)
    with pytest.raises(rectizarr.NodeExistsError):
        rectizarr.dask.to_zarr(x, url, "v")
    rectizarr.dask.to_zarr(x * 2, url, "v", overwrite=True)
    np.testing.assert_array_equal(rectizarr.dask.from_zarr(url, "v").compute(), data * 2)


def test_empty_blocks_on_any_axis_are_written_around(tmp_path: Path) -> None:
    """Blocks of no elements, leading, inner or trailing, on every axis: written as if absent, into a new
    array and into a misaligned one. An elementwise operation on such an array can lose blocks from its
    graph (dask 2026.7): a clear UnsupportedError then, never "could not broadcast" or a wrong write."""
    from rectizarr.errors import UnsupportedError
    from rectizarr.integrations.dask import store_dask

    want = np.arange(24.0).reshape(4, 6)
    x = da.from_array(want, chunks=((0, 2, 0, 2), (3, 0, 3, 0)))
    a = rectizarr.from_dask(x, str(tmp_path), name="a")
    assert np.array_equal(a[...], want) and a.write_chunk_sizes == ((2, 2), (3, 3))
    b = rectizarr.create_array(str(tmp_path), name="b", shape=want.shape, dtype="f8", chunks=(3, 4))
    store_dask(x, b).compute()
    assert np.array_equal(b[...], want)
    y = da.from_array(want[:, :1], chunks=((4,), (0, 1))) * 2
    try:
        c = rectizarr.from_dask(y, str(tmp_path), name="c")
    except UnsupportedError as exc:
        assert "empty blocks" in str(exc) and "rechunk" in str(exc)
    else:  # a dask whose graph keeps every block
        assert np.array_equal(c[...], want[:, :1] * 2)
