"""Writes of whole shards of small inner chunks skip the per-inner-chunk projections
(``rectizarr.io.batch.write_shards``): a spy shows which writes take that way, and every write equals
numpy and the bytes of the per-chunk way (``piecewise_bytes=0`` turns batches off)."""

from __future__ import annotations

from collections.abc import Iterator
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
    "blosc": {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4,
                                                 "blocksize": 0}},
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
    shape, kw = (40, 36), {"dtype": "<i4", "chunks": (4, 6), "shards": (8, 12), "fill_value": 3,
                          "compressors": CODECS[codec], "write_empty_chunks": empty}
    value = np.arange(40 * 36, dtype="<i4").reshape(shape)
    value[8:16, :] = 3  # a row of shards all fill: deleted (or kept, with write_empty_chunks)
    cases: list[tuple[Any, bool]] = [(np.s_[...], True), (np.s_[8:24, 12:36], True), (np.s_[0:8, 0:12], True),
                                     (np.s_[0:8, 0:6], False), (np.s_[1:9, :], False), (np.s_[:, ::2], False)]
    for sel, whole in cases:
        stores = [rectizarr.MemoryStore(), rectizarr.MemoryStore()]
        arrays = [rectizarr.create_array(s, shape=shape, **kw) for s in stores]
        with taken() as calls:
            arrays[0][sel] = value[sel]
        assert calls == [whole], sel
        with tuning.use(replace(tuning.current(), piecewise_bytes=0)):
            arrays[1][sel] = value[sel]
        assert {k: stores[0].get(k) for k in stores[0].list_prefix("")} == \
            {k: stores[1].get(k) for k in stores[1].list_prefix("")}, sel
        expected = np.full(shape, 3, "<i4")
        expected[sel] = value[sel]
        np.testing.assert_array_equal(arrays[0][...], expected)


def test_shards_past_the_extent_and_transposed_shards_go_the_general_way() -> None:
    a = rectizarr.create_array(rectizarr.MemoryStore(), shape=(20, 36), dtype="<i4", chunks=(4, 6), shards=(8, 12))
    with taken() as calls:
        a[...] = 1  # the last row of shards reaches past the extent
    assert calls == [False] and (a[...] == 1).all()
    value = np.arange(16 * 24, dtype="<i4").reshape(16, 24)
    transpose = {"name": "transpose", "configuration": {"order": [1, 0]}}
    raw = {"name": "bytes", "configuration": {"endian": "little"}}
    index = [raw, {"name": "crc32c"}]
    for outer, inner, whole in (([transpose], [raw], False), ([], [transpose, raw], True)):
        sharding = {"name": "sharding_indexed", "configuration": {
            "chunk_shape": [6, 4] if outer else [4, 6], "codecs": inner, "index_codecs": index}}
        stores = [rectizarr.MemoryStore(), rectizarr.MemoryStore()]
        arrays = [rectizarr.create_array(s, shape=(16, 24), dtype="<i4", chunks=(8, 12), codecs=[*outer, sharding])
                  for s in stores]
        with taken() as calls:
            arrays[0][...] = value  # shards coded in another axis order; inner chunks in another
        assert calls == [whole]
        with tuning.use(replace(tuning.current(), piecewise_bytes=0)):
            arrays[1][...] = value
        assert {k: stores[0].get(k) for k in stores[0].list_prefix("")} == \
            {k: stores[1].get(k) for k in stores[1].list_prefix("")}
        np.testing.assert_array_equal(arrays[0][...], value)
