"""The batch engine against NumPy over every rank and layout: arrays of 1 to 5 dimensions, regular or
rectilinear grids, chunks from one element to the whole axis, chunk files or shards (index at either end),
C-order data or a transpose codec (F order on disk), read and written with the batch size forced to one
chunk, to a few, and to everything (``Tuning.batch_bytes``), with the batch strategies taken from the first
chunk on (``block_min_chunks=1``) or never. Stores: a local directory (files read into slots, decoded in
place) and memory."""

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
from tests.strategies import basic_selections, core_dtypes, examples, seeded_arrays

BIG = 1 << 40
SETTINGS = {
    "batches-of-one": replace(tuning.DEFAULT, block_min_chunks=1, batch_bytes=1),
    "batches-of-a-few": replace(tuning.DEFAULT, block_min_chunks=1, batch_bytes=48),
    "one-batch": replace(tuning.DEFAULT, block_min_chunks=1, batch_bytes=BIG, piecewise_bytes=BIG),
    "per-chunk": replace(tuning.DEFAULT, block_min_chunks=BIG, piecewise_bytes=0),
}
ZSTD = {"name": "zstd", "configuration": {"level": 1}}


@st.composite
def arrays(draw: st.DrawFn) -> dict[str, Any]:
    """``create_array`` keywords: 1-5 dims (fewer elements the more dims), a core dtype, raw or zstd,
    maybe F order on disk (a reversing transpose), regular or rectilinear chunks of 1 to the whole axis,
    or regular inner chunks in shards."""
    ndim = draw(st.integers(1, 5))
    side = {1: 40, 2: 12, 3: 6, 4: 4, 5: 3}[ndim]
    shape = tuple(draw(st.integers(1, side)) for _ in range(ndim))
    dtype = draw(core_dtypes)
    kwargs: dict[str, Any] = {
        "shape": shape,
        "dtype": dtype,
        "fill_value": None,
        "compressors": [ZSTD] if draw(st.booleans()) else [],
        "filters": [{"name": "transpose", "configuration": {"order": list(range(ndim))[::-1]}}]
        if draw(st.booleans())
        else [],
    }
    if draw(st.booleans()):  # sharded: regular inner chunks, shards of 1-3 of them
        inner = tuple(draw(st.integers(1, max(1, n))) for n in shape)
        kwargs["chunks"] = inner
        kwargs["shards"] = tuple(c * draw(st.integers(1, 3)) for c in inner)
        kwargs["index_location"] = draw(st.sampled_from(["start", "end"]))
        return kwargs
    chunks: list[Any] = []
    for n in shape:
        if draw(st.booleans()):
            chunks.append(draw(st.integers(1, n)))
        else:  # rectilinear: edges until the extent is covered
            edges = [draw(st.integers(1, max(1, n // 2 + 1)))]
            while sum(edges) < n:
                edges.append(draw(st.integers(1, max(1, n // 2 + 1))))
            chunks.append(edges)
    kwargs["chunks"] = chunks
    return kwargs


def _store(kind: str, tmp: str) -> Any:
    return rectizarr.LocalStore(tmp) if kind == "local" else rectizarr.MemoryStore()


@pytest.mark.parametrize("store", ["local", "memory"])
@examples(2, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(setup=arrays(), data=st.data())
def test_reads_equal_numpy_at_every_batch_size(
    store: str, setup: dict[str, Any], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a = rectizarr.create_array(_store(store, tmp), **setup)
        model = np.full(a.shape, a.fill_value, dtype=a.dtype)
        for _ in range(data.draw(st.integers(1, 2), "writes")):  # some chunks stay missing
            sel = data.draw(basic_selections(a.shape), "write")
            value = data.draw(seeded_arrays(model[sel].shape, setup["dtype"]), "value")
            a[sel] = model[sel] = value
        for name, t in SETTINGS.items():
            sel = data.draw(basic_selections(a.shape) | st.just((Ellipsis,)), f"read {name}")
            with tuning.use(t):
                got = a[sel]
            np.testing.assert_array_equal(got, model[sel], err_msg=name)
            assert np.shape(got) == model[sel].shape


def _contents(store: Any) -> dict[str, bytes]:
    return {k: bytes(store.get(k) or b"") for k in sorted(store.list_prefix(""))}


@examples(1, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(setup=arrays(), data=st.data())
def test_writes_store_the_same_bytes_at_every_batch_size(setup: dict[str, Any], data: st.DataObject) -> None:
    """The same writes under each setting leave the same keys and bytes, which read back as NumPy."""
    stores = {name: rectizarr.MemoryStore() for name in SETTINGS}
    handles = {name: rectizarr.create_array(s, **setup) for name, s in stores.items()}
    model = np.full(setup["shape"], handles["per-chunk"].fill_value, dtype=handles["per-chunk"].dtype)
    for _ in range(data.draw(st.integers(1, 3), "writes")):
        sel = data.draw(basic_selections(model.shape) | st.just((Ellipsis,)), "write")
        value = data.draw(seeded_arrays(model[sel].shape, setup["dtype"]), "value")
        model[sel] = value
        for name, a in handles.items():
            with tuning.use(SETTINGS[name]):
                a[sel] = value
    expected = _contents(stores["per-chunk"])
    for name, s in stores.items():
        assert _contents(s) == expected, name
        np.testing.assert_array_equal(handles[name][...], model, err_msg=name)
