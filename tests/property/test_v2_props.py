"""Zarr v2 arrays against a numpy model: random shapes and chunks, order C or F, both separators, byte
orders, a delta filter and compressors; random basic writes, basic and orthogonal reads, the array reopened,
and a resize (grow or shrink) read back."""

from __future__ import annotations

from typing import Any

import numcodecs
import numpy as np
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

import rectizarr
from tests.strategies import (
    basic_selections,
    examples,
    numpy_orthogonal,
    orthogonal_selections,
    seeded_arrays,
)

DTYPES = ["<i4", ">i4", "<f8", ">f8", "|u1", "<i2", "|b1", "<c8"]


@st.composite
def v2_arrays(draw: st.DrawFn) -> dict[str, Any]:
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(0, 9)) for _ in range(ndim))
    dtype = draw(st.sampled_from(DTYPES))
    kwargs: dict[str, Any] = {
        "shape": shape,
        "dtype": dtype,
        "zarr_format": 2,
        "chunks": tuple(draw(st.integers(1, 4)) for _ in range(ndim)),
        "order": draw(st.sampled_from(["C", "F"])),
        "chunk_key_encoding": {"name": "v2", "separator": draw(st.sampled_from([".", "/"]))},
        "compressors": draw(st.sampled_from([None, "auto", numcodecs.Zlib(1), numcodecs.Blosc("lz4", 3, 2)])),
    }
    if np.dtype(dtype).kind in "iu" and draw(st.booleans()):
        kwargs["filters"] = [numcodecs.Delta(dtype=dtype)]
    if draw(st.booleans()):
        kwargs["fill_value"] = 1 if np.dtype(dtype).kind != "b" else True
    return kwargs


def _same(got: Any, want: np.ndarray) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape
    assert got.tobytes() == want.astype(want.dtype.newbyteorder("=")).tobytes()


@given(setup=v2_arrays(), data=st.data())
@examples(2, suppress_health_check=list(HealthCheck))
def test_v2_arrays_match_numpy(setup: dict[str, Any], data: st.DataObject) -> None:
    store = rectizarr.MemoryStore()
    a = rectizarr.create_array(store, **setup)
    native = np.dtype(setup["dtype"]).newbyteorder("=")
    model = np.full(setup["shape"], a.metadata.fill_value, dtype=native)
    for _ in range(3):
        sel = data.draw(basic_selections(model.shape))
        value = data.draw(seeded_arrays(np.shape(model[sel]), native))
        model[sel] = value
        a[sel] = value
        if all(model.shape):
            osel = data.draw(orthogonal_selections(model.shape))
            select, _ = numpy_orthogonal(osel, model.shape)
            _same(a.oindex[osel], select(model))
        _same(a[sel], np.asarray(model[sel]))
    again = rectizarr.open_array(store, mode="r")
    assert again.metadata.zarr_format == 2
    _same(again[...], model)
    new_shape = tuple(data.draw(st.integers(0, 9)) for _ in model.shape)
    a.resize(new_shape)
    grown = np.full(new_shape, a.metadata.fill_value, dtype=native)
    common = tuple(slice(0, min(x, y)) for x, y in zip(new_shape, model.shape, strict=True))
    grown[common] = model[common]
    _same(rectizarr.open_array(store, mode="r")[...], grown)


@given(setup=v2_arrays(), data=st.data())
@examples(1, suppress_health_check=list(HealthCheck))
def test_v2_arrays_zarr_python_writes_match_numpy(setup: dict[str, Any], data: st.DataObject) -> None:
    """zarr-python 3 writes the v2 array (same random layout), rectizarr reads selections of it."""
    import tempfile
    import warnings

    from tests.refs import zarr_python

    zarr = zarr_python()
    native = np.dtype(setup["dtype"]).newbyteorder("=")
    value = data.draw(seeded_arrays(setup["shape"], native))
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sep = setup["chunk_key_encoding"]["separator"]
        z = zarr.create_array(
            tmp,
            shape=setup["shape"],
            dtype=setup["dtype"],
            chunks=setup["chunks"],
            zarr_format=2,
            order=setup["order"],
            filters=setup.get("filters"),
            compressors=setup["compressors"],
            chunk_key_encoding={"name": "v2", "separator": sep},
            fill_value=setup.get("fill_value"),
        )
        if value.size:
            z[...] = value
        want = np.asarray(z[...])
        a = rectizarr.open_array(tmp, mode="r")
        _same(a[...], want)
        for _ in range(3):
            sel = data.draw(basic_selections(want.shape))
            _same(a[sel], np.asarray(want[sel]))
