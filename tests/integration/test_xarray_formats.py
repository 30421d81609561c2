"""The xarray writer in Zarr v2 and v3: what rectizarr writes, xarray with zarr-python reads identically, and
the reverse; a DataArray (named, unnamed, named like a coordinate) round-trips through ``da.rectizarr``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pytest.importorskip("zarr")
pytest.importorskip("dask")

import rectizarr  # noqa: E402
import rectizarr.xarray  # noqa: E402


def _dataset() -> xr.Dataset:
    t = np.array(["2026-01-01", "2026-01-02", "2026-01-04"], dtype="datetime64[ns]")
    ds = xr.Dataset(
        {
            "temp": (("time", "x"), np.array([[1.5, np.nan], [2.0, 3.0], [4.0, 5.0]]), {"units": "K"}),
            "count": (("time",), np.array([1, 2, 3], dtype="i2")),
            "flag": (("x",), np.array([True, False])),
            "label": (("x",), np.array(["a", "bcd"], dtype=object)),
            None: (("x",), np.array([7, 8], dtype="u1")),
        },
        coords={"time": t, "x": [10, 20]},
        attrs={"title": "t", "n": 3},
    )
    ds["scaled"] = (("time",), np.array([0.5, 1.0, 1.5]))
    ds["scaled"].encoding = {"dtype": "i2", "scale_factor": 0.5, "_FillValue": -1}
    return ds


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("chunked", [False, True])
def test_rectizarr_writes_what_xarray_reads(tmp_path: Path, zarr_format: int, chunked: bool) -> None:
    ds = _dataset()
    if chunked:
        ds = ds.chunk({"time": 2})
    ours, theirs = tmp_path / "ours.zarr", tmp_path / "theirs.zarr"
    ds.rectizarr.to_zarr(ours, zarr_format=zarr_format)
    ds.to_zarr(theirs, zarr_format=zarr_format)
    assert rectizarr.open_group(str(ours), mode="r").metadata.zarr_format == zarr_format
    with xr.open_dataset(ours, engine="zarr") as a, xr.open_dataset(theirs, engine="zarr") as b:
        xr.testing.assert_identical(a, b)
        xr.testing.assert_identical(a.compute(), ds.compute())
    with xr.open_dataset(theirs, engine="rectizarr") as a, xr.open_dataset(ours, engine="rectizarr") as b:
        xr.testing.assert_identical(a, b)
        xr.testing.assert_identical(a.compute(), ds.compute())


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_v2_append_and_region(tmp_path: Path, zarr_format: int) -> None:
    ds = _dataset()
    path = tmp_path / "d.zarr"
    ds.isel(time=[0]).rectizarr.to_zarr(path, zarr_format=zarr_format)
    ds.isel(time=[1, 2]).rectizarr.to_zarr(path, append_dim="time")
    with xr.open_dataset(path, engine="zarr") as back:
        xr.testing.assert_identical(back, ds)
    new = ds.isel(time=[1]).drop_vars(["x", "flag", "label", None]).copy(deep=True)
    new["temp"][:] = 9.0
    new["count"][:] = 9
    new.drop_vars("time").rectizarr.to_zarr(path, region={"time": slice(1, 2)})
    with xr.open_dataset(path, engine="rectizarr") as back:
        assert back["temp"].values[1].tolist() == [9.0, 9.0] and back["count"].values.tolist() == [1, 9, 3]


def test_v2_refuses_what_it_cannot_store(tmp_path: Path) -> None:
    ds = xr.Dataset({"v": ("x", np.arange(12))}).chunk({"x": (5, 4, 3)})
    with pytest.raises(ValueError, match="uniform chunk sizes"):
        ds.rectizarr.to_zarr(tmp_path / "a.zarr", zarr_format=2)
    with pytest.raises(ValueError, match="Use `_FillValue`"):
        ds.rectizarr.to_zarr(tmp_path / "b.zarr", zarr_format=2, encoding={"v": {"fill_value": 1}})
    ds.rectizarr.to_zarr(tmp_path / "c.zarr", zarr_format=3)  # v3: a rectilinear grid
    with pytest.raises(ValueError, match="stored in Zarr format 3"):
        ds.rectizarr.to_zarr(tmp_path / "c.zarr", mode="a", zarr_format=2)


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("name", [None, "foo", "x"])
def test_dataarray_accessor(tmp_path: Path, zarr_format: int, name: str | None) -> None:
    da = xr.DataArray(np.arange(3.0), dims="x", coords={"x": [1, 2, 3]}, name=name)
    path = tmp_path / "da.zarr"
    da.rectizarr.to_zarr(path, zarr_format=zarr_format)
    for engine in ("rectizarr", "zarr"):
        with xr.open_dataarray(path, engine=engine) as back:
            xr.testing.assert_identical(back, da)


@pytest.mark.parametrize("name", [0, (4, 5), True, ""])
def test_invalid_variable_names(tmp_path: Path, name: object) -> None:
    ds = xr.Dataset({name: ("x", np.arange(2))})  # type: ignore[dict-item]
    with pytest.raises(
        TypeError if name != "" else ValueError, match=repr(name).replace("(", r"\(").replace(")", r"\)")
    ):
        ds.rectizarr.to_zarr(tmp_path / "d.zarr")
    assert not (tmp_path / "d.zarr").exists()  # refused before anything is written


def test_load_async(tmp_path: Path) -> None:
    import asyncio

    ds = _dataset()
    ds.rectizarr.to_zarr(tmp_path / "d.zarr")
    with xr.open_dataset(tmp_path / "d.zarr", engine="rectizarr") as lazy:
        loaded = asyncio.run(lazy.load_async())
        xr.testing.assert_identical(loaded, ds)


@pytest.mark.parametrize("cache", ["simplecache", "filecache"])
def test_chunks_never_written_read_as_the_fill_value_through_fsspec_caches(cache: str) -> None:
    """fsspec's ``simplecache::`` raises for a whole ``cat_ranges`` call when one path is missing (it does not
    honour ``on_error="return"``): a chunk never written still reads as the fill value, as on the plain URL."""
    import uuid

    url = f"memory://cache-{uuid.uuid4().hex}.zarr"
    a = rectizarr.create_array(url, shape=(6,), dtype="i4", chunks=(2,), fill_value=7)
    a[:2] = [1, 2]
    a[4:] = [5, 6]
    assert rectizarr.open_array(f"{cache}::{url}", mode="r")[...].tolist() == [1, 2, 7, 7, 5, 6]
    ds = xr.Dataset({"v": ("x", np.arange(6.0))}).chunk({"x": 2})
    ds.rectizarr.to_zarr(url.replace(".zarr", "-ds.zarr"), encoding={"v": {"chunks": 2}}, compute=False)
    opened = xr.open_dataset(
        f"{cache}::" + url.replace(".zarr", "-ds.zarr"), engine="rectizarr", consolidated=False
    )
    assert np.isnan(opened["v"].values).all()  # nothing computed: every chunk is the (NaN) fill value


def test_arrays_without_dimension_names_are_a_key_error(tmp_path: Path) -> None:
    """As xarray's engine raises for an array it cannot name the dimensions of (a KeyError, also a
    rectizarr MetadataError); ``unnamed_dims="dim_n"`` opens it."""
    g = rectizarr.create_group(str(tmp_path / "d.zarr"))
    g.create_array("bar", shape=(3, 5), dtype="f4", chunks=(3, 5))
    with pytest.raises(KeyError, match="xarray to determine variable dimensions"):
        xr.open_dataset(tmp_path / "d.zarr", engine="rectizarr", consolidated=False)
    with pytest.raises(rectizarr.MetadataError):
        xr.open_dataset(tmp_path / "d.zarr", engine="rectizarr", consolidated=False)
    assert xr.open_dataset(tmp_path / "d.zarr", engine="rectizarr", consolidated=False, unnamed_dims="dim_n")[
        "bar"
    ].dims == ("dim_0", "dim_1")
