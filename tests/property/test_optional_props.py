"""The ``optional`` data type against NumPy masked arrays as the oracle: random shapes, chunks, masks,
fill values and basic selections written then read, through the default codecs or a compressed chain."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import rectizarr
from tests.strategies import basic_selections, examples, shapes

CODECS = [
    None,  # the default: optional{packbits; bytes} then zstd
    [
        {
            "name": "optional",
            "configuration": {
                "mask_codecs": [{"name": "packbits"}, {"name": "gzip", "configuration": {"level": 1}}],
                "data_codecs": [{"name": "bytes", "configuration": {"endian": "big"}}, {"name": "crc32c"}],
            },
        }
    ],
]


def _same(got: Any, want: np.ma.MaskedArray) -> bool:
    got_mask, want_mask = np.ma.getmaskarray(got), np.ma.getmaskarray(want)
    return bool(
        np.shape(got) == want.shape
        and (got_mask == want_mask).all()
        and (np.ma.getdata(got)[~got_mask] == np.ma.getdata(want)[~want_mask]).all()
    )


@st.composite
def _masked(draw: st.DrawFn, shape: tuple[int, ...], inner: str) -> np.ma.MaskedArray:
    if inner == "string":
        data = np.empty(shape, dtype=object)
        data.flat[:] = draw(st.lists(st.text(max_size=3), min_size=data.size, max_size=data.size))
    else:
        data = draw(hnp.arrays(np.int16, shape))
    mask = draw(hnp.arrays(np.bool_, shape))
    return np.ma.MaskedArray(data, mask=mask)


@examples(1)
@given(shapes(min_dims=1, max_dims=3, max_side=7), st.data())
def test_writes_and_reads_match_numpy_masked_arrays(shape: tuple[int, ...], data: st.DataObject) -> None:
    chunks = tuple(data.draw(st.integers(1, max(s, 1))) for s in shape)
    inner = data.draw(st.sampled_from(["int16", "string"]))
    np_inner = np.dtype(object) if inner == "string" else np.dtype(np.int16)
    fill = data.draw(st.sampled_from([None, "x"] if inner == "string" else [None, 5, -1]))
    codecs = None if inner == "string" else data.draw(st.sampled_from(CODECS))
    dtype = {"name": "optional", "configuration": {"name": inner}}
    a = rectizarr.create_array(
        rectizarr.MemoryStore(), shape=shape, chunks=chunks, dtype=dtype, fill_value=fill, codecs=codecs
    )
    oracle = (
        np.ma.masked_all(shape, dtype=np_inner)
        if fill is None
        else np.ma.MaskedArray(np.full(shape, fill, np_inner))
    )
    for _ in range(data.draw(st.integers(1, 3))):
        sel = data.draw(basic_selections(shape, advanced=False, ellipsis=False, newaxis=False))
        target = oracle[sel]
        plain = "s" if inner == "string" else 3
        value = data.draw(_masked(np.shape(target), inner) | st.sampled_from([np.ma.masked, plain]))
        a[sel] = value
        oracle[sel] = value
    assert _same(a[...], oracle)
    sel = data.draw(basic_selections(shape, advanced=False, ellipsis=False, newaxis=False))
    got = a[sel]
    want = oracle[sel]
    if np.ndim(want) == 0:
        missing = bool(np.ma.getmaskarray(want))  # (NumPy gives a 0-d masked array for an object element)
        assert (got is np.ma.masked) == missing
        assert missing or got == want
    else:
        assert _same(got, np.ma.asarray(want))
