"""Batch decoding and vectorised scatter give bit-identical results to the per-chunk path: the codec
layer's ``decode_many`` against ``decode`` per value (corrupt values reported, never guessed), and whole
arrays read with the batch strategies forced against the per-chunk strategies and numpy, over random
grids, selections, dtypes, fill values and codec chains (sharded with the index at either end, crc32c),
with missing chunks and ``write_empty_chunks`` either way."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

import rectizarr
from rectizarr import tuning
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.batch import Frames
from rectizarr.errors import CodecError
from tests.pipelines import build, same
from tests.strategies import (
    array_kwargs,
    basic_selections,
    bit_patterns,
    bytes_codecs,
    codec_cases,
    core_dtypes,
    examples,
    numpy_orthogonal,
    orthogonal_selections,
    seeded_arrays,
)

BIG = 1 << 40
BATCH = replace(tuning.DEFAULT, block_min_chunks=1, piecewise_bytes=BIG, scratch_max_bytes=BIG)
PER_CHUNK = replace(tuning.DEFAULT, block_min_chunks=BIG, piecewise_bytes=0)


def bits(a: Any) -> bytes:
    a = np.asarray(a)
    return a.dtype.str.encode() + repr(a.shape).encode() + np.ascontiguousarray(a).tobytes()


@examples(2)
@given(codec_cases(), st.lists(st.integers(0, 2), min_size=1, max_size=6), st.data())
def test_decode_many_equals_decode_per_value(
    case: tuple[list[dict[str, Any]], np.ndarray, ChunkSpec], kinds: list[int], data: st.DataObject
) -> None:
    """Each value decoded in one batch equals its own decode; a corrupt value (kind 2: truncated) is not
    decoded by the batch and the per-value decode reports it."""
    codecs, chunk, spec = case
    if spec.dtype.hasobject:
        return
    p = build(codecs, spec)
    good = p.encode(chunk, spec)
    other = p.encode(np.ascontiguousarray(chunk[::-1]) if chunk.ndim else chunk, spec)
    values = [good if k == 0 else other if k == 1 else good[: len(good) // 2] for k in kinds]
    rows = np.array(data.draw(st.permutations(range(len(values)))), dtype=np.int64)
    out = np.zeros((len(values), *spec.shape), spec.dtype)
    done = p.decode_many(Frames.of(values), spec, out, rows, threads=data.draw(st.integers(1, 2)))
    for i, value in enumerate(values):
        try:
            want = p.decode(value, spec)
        except CodecError:
            assert not done[i]
            continue
        if done[i]:
            assert same(out[(int(rows[i]), Ellipsis)], np.asarray(want))
        else:
            assert kinds[i] == 2  # only corrupt values may be left to the per-value decode


def _populate(a: rectizarr.Array, data: st.DataObject, dtype: Any) -> None:
    """Write one or two random regions (the rest of the chunks stay missing)."""
    for _ in range(data.draw(st.integers(1, 2))):
        sel = data.draw(basic_selections(a.shape))
        shape = np.empty(a.shape, dtype=np.uint8)[sel].shape
        a[sel] = data.draw(seeded_arrays(shape, dtype))


@pytest.mark.parametrize("local", [False, True], ids=["memory", "local"])
@examples(0.5, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(setup=array_kwargs(), data=st.data())
def test_batch_reads_equal_per_chunk_reads(local: bool, setup: dict[str, Any], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store: Any = rectizarr.LocalStore(tmp) if local else rectizarr.MemoryStore()
        a = rectizarr.create_array(store, **setup)
        _populate(a, data, setup["dtype"])
        with tuning.use(PER_CHUNK):
            model = np.asarray(a[...])
        for _ in range(2):
            sel = data.draw(basic_selections(a.shape))
            with tuning.use(BATCH):
                got = a[sel]
            assert bits(got) == bits(model[sel])
            osel = data.draw(orthogonal_selections(a.shape))
            select, _ = numpy_orthogonal(osel, a.shape)
            with tuning.use(BATCH):
                got = a.oindex[osel]
            assert bits(got) == bits(select(model))


@examples(1)
@given(st.binary(max_size=5000), st.integers(-5, 9), st.booleans())
def test_zstd_encode_equals_numcodecs(data: bytes, level: int, checksum: bool) -> None:
    """The reused per-thread compressor writes the same frames as numcodecs' ``Zstd`` (a new context per call)."""
    import numcodecs

    from rectizarr.codecs.bytes_to_bytes import ZstdCodec

    assert ZstdCodec(level, checksum).encode(data) == numcodecs.Zstd(level=level, checksum=checksum).encode(
        data
    )


@examples(1)
@given(codec_cases(), st.integers(0, 4), st.integers(1, 2))
def test_encode_many_equals_encode_per_chunk(
    case: tuple[list[dict[str, Any]], np.ndarray, ChunkSpec], n: int, threads: int
) -> None:
    """A batch encode writes each chunk's bytes exactly as its own encode does (zstd, blosc, any chain)."""
    codecs, chunk, spec = case
    if spec.dtype.hasobject:
        return
    p = build(codecs, spec)
    chunks = np.stack([chunk] * n) if n else np.empty((0, *spec.shape), spec.dtype)
    frames = p.encode_many(chunks, spec, threads)
    assert [bytes(frames[i]) for i in range(len(frames))] == [
        p.encode(chunks[i, ...], spec) for i in range(n)
    ]


def _contents(store: Any) -> dict[str, bytes]:
    return {k: bytes(store.get(k) or b"") for k in sorted(store.list_prefix(""))}


@examples(0.5, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(setup=array_kwargs(), data=st.data())
def test_batch_writes_store_the_per_chunk_bytes(setup: dict[str, Any], data: st.DataObject) -> None:
    """The same writes with the batch strategies (whole shards cut, checked for emptiness and encoded at
    once) and without leave the same keys and bytes, and read back as numpy."""
    stores = [rectizarr.MemoryStore(), rectizarr.MemoryStore()]
    arrays = [rectizarr.create_array(s, **setup) for s in stores]
    model = np.asarray(arrays[0][...])
    for _ in range(data.draw(st.integers(1, 3))):
        if data.draw(st.booleans()):
            sel: Any = (Ellipsis,)
        else:
            sel = data.draw(basic_selections(model.shape))
        value = data.draw(seeded_arrays(model[sel].shape, setup["dtype"]))
        if data.draw(st.booleans()):  # often all fill: empty inner chunks
            value = np.full(value.shape, model.reshape(-1)[0] if model.size else 0, dtype=value.dtype)
        model[sel] = value
        for a, t in zip(arrays, (PER_CHUNK, BATCH), strict=True):
            with tuning.use(t):
                a[sel] = value
    assert _contents(stores[0]) == _contents(stores[1])
    assert bits(arrays[1][...]) == bits(model)


@st.composite
def whole_shard_reads(draw: st.DrawFn) -> tuple[dict[str, Any], tuple[slice, ...]]:
    """A sharded array (any core dtype, fill, compressors incl. crc32c, index at either end, maybe an edge
    shard past the extent) and a selection of whole shards inside the extent."""
    ndim = draw(st.integers(1, 3))
    inner = [draw(st.integers(1, 3)) for _ in range(ndim)]
    shard = [c * draw(st.integers(1, 3)) for c in inner]
    counts = [draw(st.integers(1, 3)) for _ in range(ndim)]
    shape = tuple(s * n + draw(st.sampled_from([0, 0, 1])) for s, n in zip(shard, counts, strict=True))
    dtype = draw(core_dtypes)
    fill = draw(st.none() | st.sampled_from([0, 1]) | bit_patterns(np.dtype(dtype)).map(lambda a: a[()]))
    kwargs = {
        "shape": shape,
        "dtype": dtype,
        "chunks": tuple(inner),
        "shards": tuple(shard),
        "compressors": draw(st.lists(bytes_codecs(), max_size=2)),
        "fill_value": fill if dtype != "bool" or fill is None else bool(fill),
        "index_location": draw(st.sampled_from(["start", "end"])),
        "write_empty_chunks": draw(st.booleans()),
    }
    sel = []
    for s, n in zip(shard, counts, strict=True):
        a = draw(st.integers(0, n - 1))
        b = draw(st.integers(a + 1, n))
        sel.append(slice(a * s, b * s))
    return kwargs, tuple(sel)


@examples(1, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=whole_shard_reads(), data=st.data())
def test_whole_shard_reads_equal_per_chunk_reads(
    case: tuple[dict[str, Any], tuple[slice, ...]], data: st.DataObject
) -> None:
    setup, sel = case
    a = rectizarr.create_array(rectizarr.MemoryStore(), **setup)
    _populate(a, data, setup["dtype"])
    with tuning.use(PER_CHUNK):
        model = np.asarray(a[...])
    with tuning.use(BATCH):
        got = a[sel]
    assert bits(got) == bits(model[sel])


class _RoundTrips(rectizarr.MemoryStore):
    """A memory store the I/O layer treats as one with round trips (as S3): whole shards are requested at
    once and pasted as they arrive."""

    capabilities = replace(rectizarr.MemoryStore.capabilities, low_latency=False)


@examples(1, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=whole_shard_reads(), data=st.data())
def test_whole_shard_reads_with_round_trips_equal_per_chunk_reads(
    case: tuple[dict[str, Any], tuple[slice, ...]], data: st.DataObject
) -> None:
    setup, sel = case
    remote = _RoundTrips()
    a = rectizarr.create_array(remote, **setup)
    _populate(a, data, setup["dtype"])
    local = rectizarr.MemoryStore({k: remote.get(k) or b"" for k in remote.list_prefix("")})  # the same bytes
    with tuning.use(PER_CHUNK):
        model = np.asarray(rectizarr.open_array(local, mode="r")[...])
    assert bits(a[sel]) == bits(model[sel])


@examples(1, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=whole_shard_reads(), data=st.data())
def test_whole_shard_writes_store_the_per_chunk_bytes(
    case: tuple[dict[str, Any], tuple[slice, ...]], data: st.DataObject
) -> None:
    setup, sel = case
    stores = [rectizarr.MemoryStore(), rectizarr.MemoryStore()]
    arrays = [rectizarr.create_array(s, **setup) for s in stores]
    model = np.asarray(arrays[0][...])
    value = data.draw(seeded_arrays(model[sel].shape, setup["dtype"]))
    if data.draw(st.booleans()):  # some inner chunks all fill
        value.reshape(-1)[: value.size // 2] = model.reshape(-1)[0] if model.size else 0
    model[sel] = value
    for a, t in zip(arrays, (PER_CHUNK, BATCH), strict=True):
        with tuning.use(t):
            a[sel] = value
    assert _contents(stores[0]) == _contents(stores[1])
    assert bits(arrays[1][...]) == bits(model)
