"""Dense reads of many small raw chunks of a local directory, batch by batch (``rectizarr.io.blocks.read_block``
-> ``LocalStore.read_into``): they equal numpy, missing chunks read as the
fill value, a chunk of the wrong size is a ``CodecError`` naming its key, and whatever the path does not
handle goes the general way (a spy on ``read_block`` shows which way each read took)."""

from __future__ import annotations

import re
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rectizarr
from rectizarr import tuning
from rectizarr.errors import CodecError
from rectizarr.stores import CountingStore, LocalStore, MemoryStore
from tests.refs import zarr_python
from tests.spies import block_calls
from tests.strategies import basic_selections, examples

RAW: dict[str, Any] = {"compressors": []}  # only the bytes codec, little-endian: raw chunks
CASES: dict[str, tuple[str, tuple[int, ...], tuple[int, ...]]] = {  # dtype, shape, chunks (edges overhang)
    "base": ("<i2", (43, 57), (4, 5)),  # 11 x 12 chunks, fill value 7
    "1d-f8": ("<f8", (1003,), (7,)),
    **{f"2d-{dt}": (dt, (61, 47), (4, 5)) for dt in ("|u1", "<i2", "<f4", "<f8", "|b1", "<c8", "|V8", "<U5")},
    "3d-i4": ("<i4", (23, 19, 17), (3, 4, 5)),
    "4d-u2": ("<u2", (9, 8, 7, 11), (2, 3, 2, 4)),
    "wide-u2": ("<u2", (9, 410), (4, 5)),  # 82 chunks in a first-axis chunk row
}
Array = tuple[Any, np.ndarray]  # an array and its data


def sample(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng, dt = np.random.default_rng(seed), np.dtype(dtype)
    z = rng.standard_normal((2, *shape)) * 100
    out: np.ndarray = (
        rng.integers(0, 256, (*shape, dt.itemsize), dtype=np.uint8).view(dt).reshape(shape)
        if dt.kind == "V"
        else (z[0] + 1j * z[1]).astype(dt)
        if dt.kind == "c"
        else z[0].astype(dt)
        if dt.kind == "f"
        else z[0].astype(np.int64).astype(dt)
    )
    return out


def base(tmp: Path, store: Any = None, case: str = "base", **kw: Any) -> Array:
    """The array of ``CASES[case]`` with every chunk written."""
    dtype, shape, chunks = CASES[case]
    data = sample(dtype, shape, len(case))
    opts = {"chunks": chunks, "fill_value": 7 if case == "base" else None, **RAW, **kw}
    a = rectizarr.create_array(
        LocalStore(tmp / "a") if store is None else store, shape=shape, dtype=dtype, **opts
    )
    a[...] = data
    return a, data


@pytest.fixture(scope="module", params=list(CASES)[1:])
def array(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Array:
    return base(tmp_path_factory.mktemp("blocks"), case=request.param)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Array:  # read only
    return base(tmp_path_factory.mktemp("shared"))


def selections(shape: tuple[int, ...]) -> st.SearchStrategy[tuple[Any, ...]]:
    """Per axis an int or a slice of step None or 1 (bounds may be negative or out of range)."""
    return basic_selections(
        shape, steps=st.sampled_from([None, 1]), advanced=False, ellipsis=False, newaxis=False
    )


def block_path(sel: tuple[Any, ...], a: Any) -> bool:
    """Whether a step-1 selection touches Tuning.block_min_chunks (64) chunks or more."""
    total = 1
    for s, n, c in zip(sel, a.shape, a.chunks, strict=True):
        start, stop, _ = s.indices(n) if isinstance(s, slice) else (0, 1, 1)
        total *= (stop - 1) // c - start // c + 1 if stop > start else 0
    return total >= 64


@examples(0.6)
@given(data=st.data())
def test_step1_blocks_equal_numpy(array: Array, data: st.DataObject) -> None:
    a, expected = array
    sel = data.draw(selections(a.shape), "sel")
    oindex = data.draw(st.booleans(), "oindex")
    with block_calls() as calls:
        got = a.oindex[sel] if oindex else a[sel]
    assert np.shape(got) == expected[sel].shape
    np.testing.assert_array_equal(got, expected[sel])
    assert calls == ([True] if block_path(sel, a) else [])


def test_whole_inner_and_one_chunk_row(array: Array) -> None:
    a, data = array
    rest, c0 = tuple(slice(1, n - 1) for n in a.shape[1:]), a.chunks[0]
    sels: list[Any] = [
        (slice(1, a.shape[0] - 1), *rest),
        (slice(c0 + 1, 2 * c0), *rest),
        (c0, *rest),
        (slice(c0, c0), *rest),
        (*(slice(3, 3 + 7 * c0), *rest)[:-1], 2),
    ]
    with block_calls() as calls:
        for sel in sels:
            for got in (a[sel], a.oindex[sel]):
                assert np.shape(got) == data[sel].shape
                np.testing.assert_array_equal(got, data[sel])
    assert calls == [True for sel in sels if block_path(sel, a) for _ in "ab"]
    out = np.zeros((*a.shape[:-1], 2 * a.shape[-1]), a.dtype)[..., ::2]  # a strided out: still filled right
    with block_calls() as calls:
        np.testing.assert_array_equal(a[...], data)
        np.testing.assert_array_equal(a.get_basic_selection(..., out=out), data)
        np.testing.assert_array_equal(a.blocks[..., 1:], data[..., a.chunks[-1] :])
    assert calls == [True] * 3


def test_declined_selections(shared: Array) -> None:
    a, data = shared
    cases: list[Any] = [  # kind, selection, spy calls
        ("basic", np.s_[::2, 1:50], []),
        ("basic", np.s_[3:, ::-1], []),  # steps 2 and -1
        ("oindex", (np.arange(0, 43, 3), slice(None)), []),  # an int array
        ("oindex", (slice(None), np.arange(57) % 3 > 0), []),  # a mask
        ("vindex", (np.arange(40), np.arange(40) % 7 * 8), []),
        ("basic", np.s_[0:28, 0:45], []),
        ("basic", np.s_[0:32, 0:40], [True]),  # 63 and 64 chunks
    ]
    for kind, sel, expected in cases:
        with block_calls() as calls:
            got = a.oindex[sel] if kind == "oindex" else a.vindex[sel] if kind == "vindex" else a[sel]
        np.testing.assert_array_equal(got, data[sel])
        assert calls == expected, sel


def test_index_arrays_on_later_axes_equal_numpy(shared: Array) -> None:
    """Sorted indices with one run per chunk become step-1 slices per chunk: not a contiguous block."""
    a, data = shared
    idx = np.array([4, 5, 10, 15, 20, 26, 33, 40, 45, 50, 56])
    for sel in [(slice(None), idx), (slice(None), np.isin(np.arange(57), idx)), (np.arange(43), idx)]:
        np.testing.assert_array_equal(a.oindex[sel], data[:, idx])
    np.testing.assert_array_equal(a[:, list(idx)], data[:, idx])


BIG_ENDIAN = {"name": "bytes", "configuration": {"endian": "big"}}
OTHER_LAYOUTS: dict[str, tuple[dict[str, Any], list[bool]]] = {  # create keywords, spy calls
    "rectilinear": ({"chunks": ([3, 5] * 5 + [3], 5)}, []),
    "sharded": ({"shards": (8, 10)}, []),
    "zstd": (
        {"compressors": [{"name": "zstd", "configuration": {"level": 1}}]},
        [True],
    ),  # batch-decoded (calls, not reads)
    "big-endian": ({"serializer": BIG_ENDIAN}, [True]),  # coded: batch-decoded
    "memory": ({}, []),  # raw, and no native read_into
    "batch-of-one": ({}, [True]),  # batches of one chunk each
}


@pytest.mark.parametrize("case", list(OTHER_LAYOUTS))
def test_other_layouts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, case: str) -> None:
    kw, expected = OTHER_LAYOUTS[case]
    if case == "memory":
        kw = {"store": MemoryStore()}
    a, data = base(tmp_path, **kw)
    sels: list[Any] = [np.s_[...], np.s_[0:32, 0:40], np.s_[2:, 1:]]
    limit = 1 if case == "batch-of-one" else tuning.current().batch_bytes
    with tuning.use(replace(tuning.current(), batch_bytes=limit)):
        for sel in sels:
            with block_calls() as calls:
                np.testing.assert_array_equal(a[sel], data[sel])
            assert calls == expected


def test_wrappers_forward_the_capability(tmp_path: Path) -> None:
    """A CountingStore around a local directory reads batch by batch too, and records every file read."""
    spy = CountingStore(LocalStore(tmp_path / "c"))
    a, data = base(tmp_path, store=spy)
    spy.reset()
    with block_calls() as calls:
        np.testing.assert_array_equal(a[...], data)
    assert calls == [True]
    assert len(spy.requests) == a.nchunks and all(r is None for _, r in spy.requests)


@pytest.mark.parametrize(("rows", "taken"), [(255, True), (256, False)])
def test_chunks_from_256_kib_go_the_threaded_way(tmp_path: Path, rows: int, taken: bool) -> None:
    a = rectizarr.create_array(
        LocalStore(tmp_path / "a"),
        shape=(8 * rows, 8 * 1024),
        dtype="|u1",
        chunks=(rows, 1024),
        fill_value=7,
        **RAW,
    )  # 64 chunks, a few stored
    expected = np.full(a.shape, 7, np.uint8)
    a[100:400, 3000:5000] = expected[100:400, 3000:5000] = sample("|u1", (300, 2000), 1)
    with block_calls() as calls:
        np.testing.assert_array_equal(a[...], expected)
    assert calls == ([True] if taken else [])


def test_missing_chunks_read_as_fill(tmp_path: Path) -> None:
    a, data = base(tmp_path)
    root, expected = tmp_path / "a" / "c", data.copy()
    for i, j in [(0, 0), (1, 2), (7, 9), (10, 11)]:
        (root / str(i) / str(j)).unlink()
        expected[4 * i : 4 * i + 4, 5 * j : 5 * j + 5] = 7
    shutil.rmtree(root / "3")  # a whole chunk row
    shutil.rmtree(root / "5")
    (root / "5").write_bytes(b"")  # a file where the row's directory was: its chunks are missing
    expected[12:16] = expected[20:24] = 7
    sels: list[Any] = [np.s_[...], np.s_[2:41, 1:56], np.s_[10:30, :], np.s_[-30:, 10:], np.s_[:, 7]]
    with block_calls() as calls:
        for sel in sels:
            np.testing.assert_array_equal(a[sel], expected[sel])
    assert calls == [True] * 4  # np.s_[:, 7] touches 11 chunks: the general way
    np.testing.assert_array_equal(a.oindex[np.arange(43), :], expected)  # the general way agrees


@pytest.mark.parametrize(("dtype", "fill"), [("<i2", 7), ("<f8", np.nan), ("<U5", "ab"), ("|V8", b"\1" * 8)])
def test_no_chunks_written(tmp_path: Path, dtype: str, fill: Any) -> None:
    a = rectizarr.create_array(
        LocalStore(tmp_path / "a"), shape=(103, 87), dtype=dtype, chunks=(4, 5), fill_value=fill, **RAW
    )
    with block_calls() as calls:
        np.testing.assert_array_equal(a[1:, 2:], np.full((102, 85), fill, dtype))
    assert calls == [True]


def test_wrong_sizes_raise_naming_the_key(tmp_path: Path) -> None:
    a, data = base(tmp_path)
    root = tmp_path / "a" / "c"
    (root / "1" / "2").write_bytes(b"\0" * 39)  # a (4, 5) int16 chunk is 40 bytes
    (root / "5" / "3").write_bytes(b"\0" * 4000)
    cases: list[Any] = [(np.s_[:, :], "c/1/2"), (np.s_[20:, :], "c/5/3"), (np.s_[2:30, 8:], "c/1/2")]
    for sel, key in cases:
        with block_calls() as calls, pytest.raises(CodecError, match=re.escape(repr(key))) as batch_error:
            a[sel]
        assert (
            calls == ["CodecError"] and batch_error.value.key == key and "40 bytes" in str(batch_error.value)
        )
        with pytest.raises(CodecError) as general_error:  # index arrays: the general way, the same error
            a.oindex[np.arange(43)[sel[0]], sel[1]]
        assert str(general_error.value) == str(batch_error.value)
    (root / "2" / "4").unlink()
    (root / "2" / "4").mkdir()  # a directory where a chunk file was: missing
    expected = data.copy()
    expected[8:12, 20:25] = 7
    with block_calls() as calls:  # no chunk of the wrong size in these blocks
        np.testing.assert_array_equal(a[:, 20:], expected[:, 20:])
        np.testing.assert_array_equal(a[8:, 20:], expected[8:, 20:])
    assert calls == [True] * 2


@examples(0.6)
@given(sizes=st.lists(st.tuples(st.integers(0, 300), st.integers(0, 300)), min_size=1, max_size=6))
def test_read_into(tmp_path_factory: pytest.TempPathFactory, sizes: list[tuple[int, int]]) -> None:
    """Per key the bytes it has up to the view's size plus one, -1 when missing (or not a file)."""
    s = LocalStore(tmp_path_factory.getbasetemp() / "read_into")
    values = {f"v{i}": bytes((i * 7 + k) % 256 for k in range(n)) for i, (n, _) in enumerate(sizes)}
    s.set_many({**values, "dir/x": b"1"})
    keys = [*values, "missing", "dir", "v0/below"]  # below a file: missing too
    stage = [np.full(m, 0xEE, np.uint8) for _, m in sizes] + [np.full(8, 0xEE, np.uint8)] * 3
    sizes_read = s.read_into(keys, [memoryview(row) for row in stage])
    assert sizes_read == [min(n, m + 1) for n, m in sizes] + [-1, -1, -1]
    for row, value, (n, m) in zip(stage, values.values(), sizes, strict=False):
        assert row[: min(n, m)].tobytes() == value[:m] and (row[n:] == 0xEE).all()
    assert all((row == 0xEE).all() for row in stage[len(sizes) :])


@pytest.mark.parametrize("writer", ["rectizarr", "zarr-python"])
@pytest.mark.parametrize(("name", "sep"), [("default", "."), ("default", "/"), ("v2", "."), ("v2", "/")])
def test_chunk_key_encodings(tmp_path: Path, writer: str, name: str, sep: str) -> None:
    data = np.arange(31 * 47, dtype="<f4").reshape(31, 47)
    kw: dict[str, Any] = {"shape": data.shape, "dtype": "<f4", "chunks": (4, 3), "fill_value": 7}  # 8 x 16
    if writer == "rectizarr":
        enc = {"name": name, "configuration": {"separator": sep}}
        z: Any = rectizarr.create_array(LocalStore(tmp_path / "z"), chunk_key_encoding=enc, **RAW, **kw)
    else:
        z = zarr_python().create_array(
            str(tmp_path / "z"), compressors=None, **kw, chunk_key_encoding={"name": name, "separator": sep}
        )
    z[...] = data
    key12, key69 = (
        ("c" + sep if name == "default" else "") + sep.join(map(str, c)) for c in ((1, 2), (6, 9))
    )
    (tmp_path / "z" / key12).unlink()
    (tmp_path / "z" / key69).write_bytes(b"\0" * 3)
    expected = data.copy()
    expected[4:8, 6:9] = 7
    a = rectizarr.open_array(str(tmp_path / "z"), mode="r")
    with block_calls() as calls:
        np.testing.assert_array_equal(a[:24], expected[:24])
        np.testing.assert_array_equal(a.oindex[2:31, 1:26], expected[2:31, 1:26])
        with pytest.raises(CodecError, match=re.escape(repr(key69))):
            a[16:, :]
    assert calls == [True, True, "CodecError"]


def test_threads_reading_one_array(shared: Array) -> None:
    a, data = shared
    sels: list[Any] = [np.s_[0:30, :], np.s_[10:43, 10:50], np.s_[1:, 3], np.s_[5:40, 2:56]]
    barrier = threading.Barrier(2)

    def read(i: int) -> bool:
        barrier.wait()
        return all(np.array_equal(a[sels[(i + k) % 4]], data[sels[(i + k) % 4]]) for k in range(12))

    with block_calls() as calls, ThreadPoolExecutor(2) as pool:
        assert all(pool.map(read, [0, 1]))
    assert calls == [True] * 18  # np.s_[1:, 3] touches 11 chunks: the general way
