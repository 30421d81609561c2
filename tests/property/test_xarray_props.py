"""to_rectizarr over a class of inputs: any dask chunking (irregular ones become a rectilinear grid) and
any sequence of appends reads back as NumPy says (concatenation), with either engine."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import dask.array as da
import numpy as np
import xarray as xr
import zarr
from hypothesis import given
from hypothesis import strategies as st

import rectizarr
from rectizarr.xarray import to_rectizarr
from tests.strategies import examples


@st.composite
def dask_chunks(draw: st.DrawFn, extent: int) -> tuple[int, ...]:
    sizes: list[int] = []
    while sum(sizes) < extent:
        sizes.append(draw(st.integers(1, max(1, extent - sum(sizes)))))
    return tuple(sizes) or (0,)


@st.composite
def cases(draw: st.DrawFn) -> tuple[np.ndarray, tuple[tuple[int, ...], ...], list[int]]:
    shape = (draw(st.integers(1, 12)), draw(st.integers(1, 5)))
    data = np.arange(np.prod(shape), dtype="f4").reshape(shape) * draw(st.sampled_from([1.0, -0.5]))
    chunks = tuple(draw(dask_chunks(n)) for n in shape)
    appends = draw(st.lists(st.integers(1, 4), max_size=3))
    return data, chunks, appends


def _ds(values: np.ndarray, start: int, chunks: tuple[tuple[int, ...], ...] | None = None) -> xr.Dataset:
    arr = da.from_array(values, chunks=chunks) if chunks is not None else values
    return xr.Dataset({"v": (("t", "x"), arr)}, coords={"t": np.arange(start, start + values.shape[0])})


@examples(0.3, deadline=None)
@given(cases())
def test_dask_chunks_and_appends_read_back_as_numpy(
    case: tuple[np.ndarray, tuple[tuple[int, ...], ...], list[int]],
) -> None:
    data, chunks, appends = case
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = Path(tmp) / "p.zarr"
        to_rectizarr(_ds(data, 0, chunks), path)
        assert rectizarr.open_array(path, path="v").write_chunk_sizes == chunks
        want = [data]
        for i, n in enumerate(appends):
            more = np.full((n, data.shape[1]), float(i + 1), dtype="f4")
            to_rectizarr(_ds(more, sum(w.shape[0] for w in want)), path, append_dim="t")
            want.append(more)
        expected = np.concatenate(want)
        with zarr.config.set({"array.rectilinear_chunks": True}):
            for engine in ("rectizarr", "zarr"):
                got = xr.open_dataset(path, engine=engine).load()
                np.testing.assert_array_equal(got.v.values, expected)
                np.testing.assert_array_equal(got.t.values, np.arange(expected.shape[0]))
