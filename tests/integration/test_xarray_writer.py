"""to_rectizarr has Dataset.to_zarr's contract: each test does the same with engine="zarr" (xarray +
zarr-python) and with rectizarr, and compares what either engine reads back."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

import rectizarr
import rectizarr.xarray
from rectizarr.xarray import to_rectizarr

pytestmark = pytest.mark.filterwarnings(
    "ignore:Consolidated metadata is currently not part", "ignore::zarr.errors.ZarrUserWarning"
)
RNG = np.random.default_rng(18)


def _cf_dataset(ntime: int = 6, start: str = "2024-01-01") -> xr.Dataset:
    """CF-style: time with units, lat/lon, packed int16 with scale/offset/_FillValue, float32 with
    _FillValue, strings, a 0-d grid-mapping variable."""
    time = pd.date_range(start, periods=ntime, freq="D")
    lat = np.linspace(-60, 60, 5)
    lon = np.linspace(0, 350, 8)
    t2m = RNG.normal(280, 5, size=(ntime, 5, 8)).astype("f4")
    t2m[0, 0, :3] = np.nan
    precip = np.round(RNG.uniform(0, 50, size=(ntime, 5, 8)), 1)
    precip[1, 2, 3] = np.nan
    ds = xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), t2m, {"units": "K", "grid_mapping": "crs"}),
            "precip": (("time", "lat", "lon"), precip, {"units": "mm"}),
            "station": (("lat",), np.array(["north", "n", "eq", "s", "south"], dtype=object)),
            "crs": (
                (),
                np.int32(0),
                {"grid_mapping_name": "latitude_longitude", "semi_major_axis": 6371000.0},
            ),
        },
        coords={
            "time": time,
            "lat": ("lat", lat, {"units": "degrees_north"}),
            "lon": ("lon", lon, {"units": "degrees_east"}),
        },
        attrs={"title": "cf test", "Conventions": "CF-1.8"},
    )
    ds.time.encoding = {"units": "days since 2000-01-01", "calendar": "standard", "dtype": "i8"}
    ds.t2m.encoding = {"_FillValue": np.float32(-9999.0)}
    ds.precip.encoding = {
        "dtype": "i2",
        "scale_factor": 0.1,
        "add_offset": 0.0,
        "_FillValue": np.int16(-32768),
    }
    return ds


def _open(path: Path, engine: str, **kwargs: object) -> xr.Dataset:
    with zarr.config.set({"array.rectilinear_chunks": True}):
        return xr.open_dataset(path, engine=engine, chunks=None, **kwargs).load()


def _decoded(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` as any Zarr engine gives it back: packed variables hold the unpacked stored integers."""
    out = ds.copy()
    for name, var in ds.data_vars.items():
        enc = var.encoding
        if "scale_factor" in enc:
            packed = np.round((var.values - enc.get("add_offset", 0.0)) / enc["scale_factor"])
            values = np.where(
                np.isnan(var.values), np.nan, packed * enc["scale_factor"] + enc.get("add_offset", 0.0)
            )
            out[name] = var.copy(data=values)
    return out


def test_round_trip_both_ways_against_the_zarr_engine(tmp_path: Path) -> None:
    ds = _cf_dataset()
    ours, theirs = tmp_path / "ours.zarr", tmp_path / "theirs.zarr"
    to_rectizarr(ds, ours, consolidated=True)
    ds.to_zarr(theirs, zarr_format=3, consolidated=True)
    for path in (ours, theirs):
        for engine in ("zarr", "rectizarr"):
            got = _open(path, engine)
            xr.testing.assert_identical(got, _decoded(ds))
    # the packed variable is stored packed, with the CF attributes either engine decodes
    stored = zarr.open_array(ours / "precip")
    assert stored.dtype == np.int16 and stored.attrs["scale_factor"] == 0.1
    assert rectizarr.open_group(ours, mode="r").metadata.consolidated_metadata is not None
    xr.testing.assert_identical(_open(ours, "rectizarr", consolidated=True, zarr_format=3), _decoded(ds))


def test_zero_d_variable_written_by_zarr_python_opens(tmp_path: Path) -> None:
    ds = xr.Dataset({"crs": ((), np.int32(0), {"grid_mapping_name": "latitude_longitude"})})
    ds.to_zarr(tmp_path / "s.zarr", zarr_format=3)
    assert "dimension_names" not in zarr.open_array(tmp_path / "s.zarr" / "crs").metadata.to_dict()
    xr.testing.assert_identical(_open(tmp_path / "s.zarr", "rectizarr"), ds)


def test_reader_reports_encoding_like_the_zarr_engine(tmp_path: Path) -> None:
    ds = _cf_dataset()
    enc = {"t2m": {"chunks": (2, 5, 4), "shards": (4, 5, 8), "compressors": zarr.codecs.BloscCodec()}}
    ds.to_zarr(tmp_path / "e.zarr", zarr_format=3, encoding=enc)
    ours = xr.open_dataset(tmp_path / "e.zarr", engine="rectizarr").t2m.encoding
    theirs = xr.open_dataset(tmp_path / "e.zarr", engine="zarr").t2m.encoding
    assert ours["chunks"] == theirs["chunks"] == (2, 5, 4)
    assert ours["shards"] == theirs["shards"] == (4, 5, 8)
    assert list(ours["compressors"]) == [c.to_dict() for c in theirs["compressors"]]  # zarr.json dicts
    assert ours["serializer"] == theirs["serializer"].to_dict()
    assert tuple(ours["filters"]) == tuple(theirs["filters"]) == ()


def test_encoding_codecs_as_objects_and_names(tmp_path: Path) -> None:
    ds = _cf_dataset()
    enc = {
        "t2m": {"compressors": zarr.codecs.BloscCodec(), "chunks": (3, 5, 8)},
        "lat": {"compressors": "gzip"},
        "lon": {"compressors": [{"name": "zstd", "configuration": {"level": 3}}]},
    }
    to_rectizarr(ds, tmp_path / "c.zarr", encoding=enc)
    ds.to_zarr(tmp_path / "z.zarr", zarr_format=3, encoding={"t2m": enc["t2m"]})
    assert (
        rectizarr.open_array(tmp_path / "c.zarr", path="t2m").compressors[0].to_dict()
        == zarr.open_array(tmp_path / "z.zarr" / "t2m").compressors[0].to_dict()
    )
    assert rectizarr.open_array(tmp_path / "c.zarr", path="lat").compressors[0].name == "gzip"
    assert rectizarr.open_array(tmp_path / "c.zarr", path="t2m").chunks == (3, 5, 8)
    with pytest.raises(ValueError, match="unexpected encoding parameters"):
        to_rectizarr(ds, tmp_path / "bad.zarr", encoding={"t2m": {"chunkz": 3}})


def test_resave_keeps_chunks_from_encoding_rectilinear_included(tmp_path: Path) -> None:
    ds = _cf_dataset(12)
    to_rectizarr(ds.chunk({"time": (5, 3, 4)}), tmp_path / "a.zarr")  # irregular dask chunks
    assert rectizarr.open_array(tmp_path / "a.zarr", path="t2m").write_chunk_sizes[0] == (5, 3, 4)
    to_rectizarr(ds, tmp_path / "r.zarr", encoding={"t2m": {"chunks": (8, 5, 4)}})
    for src, want in (("a.zarr", (5, 3, 4)), ("r.zarr", (8, 4))):
        reopened = xr.open_dataset(tmp_path / src, engine="rectizarr")
        to_rectizarr(reopened, tmp_path / f"re-{src}")
        assert rectizarr.open_array(tmp_path / f"re-{src}", path="t2m").write_chunk_sizes[0] == want
        xr.testing.assert_identical(_open(tmp_path / f"re-{src}", "zarr"), _decoded(ds))


def test_append_along_time_five_times_like_the_zarr_engine(tmp_path: Path) -> None:
    parts = [
        _cf_dataset(3, start=str(pd.Timestamp("2024-01-01") + pd.Timedelta(days=3 * i))) for i in range(6)
    ]
    to_rectizarr(parts[0], tmp_path / "ours.zarr")
    parts[0].to_zarr(tmp_path / "theirs.zarr", zarr_format=3)
    for part in parts[1:]:
        appended = part.drop_vars(["crs", "station", "lat", "lon"])  # time-independent: written once
        to_rectizarr(appended, tmp_path / "ours.zarr", append_dim="time")
        appended.to_zarr(tmp_path / "theirs.zarr", append_dim="time")
    want = xr.concat([_decoded(p).drop_vars(["crs", "station"]) for p in parts], dim="time")
    ours, theirs = _open(tmp_path / "ours.zarr", "zarr"), _open(tmp_path / "theirs.zarr", "zarr")
    xr.testing.assert_identical(ours, theirs)
    xr.testing.assert_identical(ours.drop_vars(["crs", "station"]), want)
    xr.testing.assert_identical(_open(tmp_path / "ours.zarr", "rectizarr"), theirs)
    assert ours.time.encoding["units"] == "days since 2000-01-01"


def test_dimension_size_and_dtype_checks_say_what_xarray_says(tmp_path: Path) -> None:
    ds = _cf_dataset(6)
    to_rectizarr(ds, tmp_path / "d.zarr")
    ds.to_zarr(tmp_path / "z.zarr", zarr_format=3)
    shorter = _cf_dataset(4)
    for target, write in (
        (tmp_path / "d.zarr", lambda d, p, **k: to_rectizarr(d, p, **k)),
        (tmp_path / "z.zarr", lambda d, p, **k: d.to_zarr(p, **k)),
    ):
        with pytest.raises(ValueError, match="already exists with different dimension sizes"):
            write(shorter, target, mode="a")
        with pytest.raises(ValueError, match="does not match any existing dataset dimensions"):
            write(shorter, target, append_dim="nope")
        with pytest.raises(ValueError, match="non-pre-existing variables"):
            write(ds.assign(extra=ds.t2m * 2), target, mode="r+")
        with pytest.raises(ValueError, match="cannot set append_dim unless"):
            write(ds, target, mode="w", append_dim="time")
        with pytest.raises(ValueError, match="already exists, but encoding was provided"):
            write(ds, target, mode="a", encoding={"t2m": {"chunks": (1, 5, 8)}})
        with pytest.raises(FileExistsError):
            write(ds, target, mode="w-")
    narrow = xr.Dataset({"code": ("lat", np.array(["a", "b", "c", "d", "e"], dtype="U1"))})
    wide = xr.Dataset({"code": ("lat", np.array(["aaa", "b", "c", "d", "e"], dtype="U3"))})
    for target, write in (
        (tmp_path / "u.zarr", lambda d, p, **k: to_rectizarr(d, p, **k)),
        (tmp_path / "uz.zarr", lambda d, p, **k: d.to_zarr(p, zarr_format=3, **k)),
    ):
        write(narrow, target)
        with pytest.raises(ValueError, match="Mismatched dtypes"):
            write(wide, target, mode="a")
    xr.testing.assert_identical(_open(tmp_path / "d.zarr", "zarr"), _decoded(ds))  # nothing was changed


def test_mode_w_replaces_and_accessor_mirrors_to_zarr(tmp_path: Path) -> None:
    ds = _cf_dataset()
    ds.rectizarr.to_zarr(tmp_path / "w.zarr")
    ds.isel(time=slice(2)).rectizarr.to_zarr(tmp_path / "w.zarr", mode="w")
    xr.testing.assert_identical(_open(tmp_path / "w.zarr", "zarr"), _decoded(ds.isel(time=slice(2))))


def test_region_writes_from_four_dask_tasks_in_parallel(tmp_path: Path) -> None:
    ds = _cf_dataset(16).chunk({"time": 4})
    path = tmp_path / "region.zarr"
    to_rectizarr(ds, path, compute=False)  # metadata and coordinates now; data by the tasks below
    pieces = [ds.isel(time=slice(4 * i, 4 * i + 4)) for i in range(4)]

    def write(i: int) -> int:
        piece = pieces[i].drop_vars(["lat", "lon", "crs", "station"]).compute()
        region: object = "auto" if i % 2 else {"time": slice(4 * i, 4 * i + 4)}
        to_rectizarr(piece.drop_vars("time") if i % 2 == 0 else piece, path, region=region)
        return i

    tasks = [dask.delayed(write)(i) for i in range(4)]
    assert sorted(dask.compute(*tasks, scheduler="threads", num_workers=4)) == [0, 1, 2, 3]
    xr.testing.assert_identical(_open(path, "zarr"), _decoded(ds.compute()))
    xr.testing.assert_identical(_open(path, "rectizarr"), _decoded(ds.compute()))


def test_region_checks_and_safe_chunks(tmp_path: Path) -> None:
    ds = _cf_dataset(8)
    path = tmp_path / "r.zarr"
    to_rectizarr(ds, path, encoding={"t2m": {"chunks": (4, 5, 8)}})
    piece = ds[["t2m"]].isel(time=slice(2, 6)).drop_vars(["time", "lat", "lon"])
    with pytest.raises(ValueError, match="all keys in ``region`` are not in Dataset dimensions"):
        to_rectizarr(piece, path, region={"nope": slice(0, 4)})
    with pytest.raises(ValueError, match="at least one dimension in common"):
        to_rectizarr(ds[["t2m", "crs"]].drop_vars("time"), path, region={"time": slice(0, 8)})
    with pytest.raises(ValueError, match="safe_chunks"):  # two dask blocks share the stored chunk [4, 8)
        to_rectizarr(piece.chunk({"time": 1}), path, region={"time": slice(2, 6)})
    to_rectizarr(piece.chunk({"time": 1}), path, region={"time": slice(2, 6)}, safe_chunks=False)
    with pytest.raises(KeyError, match="were found in the original store"):
        to_rectizarr(_cf_dataset(2, start="1999-01-01")[["t2m"]], path, region="auto")
    xr.testing.assert_identical(_open(path, "zarr").t2m, ds.t2m)


def test_datatree_of_three_groups(tmp_path: Path) -> None:
    base = _cf_dataset(4)
    tree = xr.DataTree.from_dict(
        {
            "/": base[["crs"]].assign_attrs(title="root"),
            "/surface": base[["t2m", "precip"]],
            "/surface/stations": xr.Dataset({"name": ("site", np.array(["a", "b", "c"], dtype=object))}),
        }
    )
    tree.rectizarr.to_zarr(tmp_path / "tree.zarr", consolidated=True)
    tree.to_zarr(tmp_path / "theirs.zarr", zarr_format=3, consolidated=True)
    ours = xr.open_datatree(tmp_path / "tree.zarr", engine="rectizarr")
    for got in (
        ours,
        xr.open_datatree(tmp_path / "tree.zarr", engine="zarr"),
        xr.open_datatree(tmp_path / "theirs.zarr", engine="rectizarr"),
    ):
        xr.testing.assert_identical(got.load(), tree.map_over_datasets(_decoded))
    groups = xr.open_groups(tmp_path / "theirs.zarr", engine="rectizarr")
    assert sorted(groups) == ["/", "/surface", "/surface/stations"]
    xr.testing.assert_identical(
        groups["/surface/stations"], tree["/surface/stations"].to_dataset(inherit=False)
    )


def test_dask_irregular_chunks_become_a_rectilinear_grid(tmp_path: Path) -> None:
    ds = _cf_dataset(10)
    chunked = ds.assign(
        t2m=(ds.t2m.dims, da.from_array(ds.t2m.values, chunks=((3, 7), (5,), (2, 6))), ds.t2m.attrs)
    )
    chunked.t2m.encoding = ds.t2m.encoding
    to_rectizarr(chunked, tmp_path / "g.zarr")
    assert rectizarr.open_array(tmp_path / "g.zarr", path="t2m").write_chunk_sizes == ((3, 7), (5,), (2, 6))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        xr.testing.assert_identical(_open(tmp_path / "g.zarr", "rectizarr"), _decoded(ds))


def test_new_variable_with_a_conflicting_dimension_is_refused(tmp_path: Path) -> None:
    """xarray's zarr engine writes it, leaving a group no engine opens; rectizarr refuses before writing."""
    path = tmp_path / "c.zarr"
    to_rectizarr(xr.Dataset({"a": ("time", np.arange(6.0))}), path)
    with pytest.raises(ValueError, match="conflicting sizes for dimension 'time'"):
        to_rectizarr(xr.Dataset({"b": ("time", np.arange(4.0))}), path, mode="a")
    with pytest.raises(ValueError, match="conflicting sizes for dimension 'time'"):
        to_rectizarr(
            xr.Dataset({"a": ("time", np.arange(2.0)), "b": ("time", np.arange(2.0))}),
            path,
            append_dim="time",
        )
    to_rectizarr(xr.Dataset({"b": ("time", np.arange(6.0) * 2)}), path, mode="a")
    got = _open(path, "zarr")
    assert list(got.b.values) == list(np.arange(6.0) * 2) and sorted(got.data_vars) == ["a", "b"]


def test_append_of_several_dask_blocks_like_the_zarr_engine(tmp_path: Path) -> None:
    """Blocks along append_dim append when their boundaries fall on chunk boundaries of the grown array (the
    first block may complete the partial last chunk), onto an empty array too; a boundary inside a chunk is
    refused by both engines. Along a rectilinear axis, every block becomes a new chunk."""

    def part(start: int, blocks: tuple[int, ...]) -> xr.Dataset:
        return xr.Dataset({"v": ("t", np.arange(start, start + sum(blocks), dtype="f8"))}).chunk(t=blocks)

    writers = (lambda d, p, **k: to_rectizarr(d, p, **k), lambda d, p, **k: d.to_zarr(p, zarr_format=3, **k))
    for stored, blocks in ((8, (4, 4)), (10, (2, 4)), (0, (4, 4)), (10, (2, 4, 1))):
        ours, theirs = (
            tmp_path / f"ours-{stored}-{len(blocks)}.zarr",
            tmp_path / f"theirs-{stored}-{len(blocks)}.zarr",
        )
        for path, write in zip((ours, theirs), writers, strict=True):
            write(
                xr.Dataset({"v": ("t", np.arange(stored, dtype="f8"))}),
                path,
                encoding={"v": {"chunks": (4,)}},
            )
            write(part(stored, blocks), path, append_dim="t")
        xr.testing.assert_identical(_open(ours, "zarr"), _open(theirs, "zarr"))
        assert list(_open(ours, "rectizarr").v.values) == list(range(stored + sum(blocks)))
        for path, write in zip((ours, theirs), writers, strict=True):
            with pytest.raises(ValueError, match="would overlap multiple Dask chunks"):
                write(part(stored + sum(blocks), (2, 2)), path, append_dim="t")
    rectilinear = tmp_path / "rectilinear.zarr"
    to_rectizarr(part(0, (3, 5)), rectilinear)
    to_rectizarr(part(8, (2, 4)), rectilinear, append_dim="t")
    assert rectizarr.open_array(rectilinear, path="v").write_chunk_sizes == ((3, 5, 2, 4),)
    assert list(_open(rectilinear, "zarr").v.values) == list(range(14))


def test_mode_a_minus_with_append_dim_like_the_zarr_engine(tmp_path: Path) -> None:
    """``mode="a-"``: variables having append_dim are appended to, new ones added, the others left alone."""

    def part(n: int, start: int) -> xr.Dataset:
        return xr.Dataset(
            {"v": ("t", np.arange(start, start + n, 1.0)), "lat": ("y", [1.0 + start, 2.0 + start])}
        )

    ours, theirs = tmp_path / "ours.zarr", tmp_path / "theirs.zarr"
    to_rectizarr(part(3, 0), ours)
    part(3, 0).to_zarr(theirs, zarr_format=3)
    for path, write in ((ours, to_rectizarr), (theirs, xr.Dataset.to_zarr)):
        write(part(2, 3).assign(w=("y", [7.0, 8.0])), path, mode="a-", append_dim="t")
    got = _open(ours, "zarr")
    xr.testing.assert_identical(got, _open(theirs, "zarr"))
    assert (
        list(got.v.values) == [0, 1, 2, 3, 4]
        and list(got.lat.values) == [1, 2]
        and list(got.w.values) == [7, 8]
    )


def test_stored_variable_given_in_another_dimension_order_is_transposed(tmp_path: Path) -> None:
    """As xarray does, for an append, a mode="a" overwrite and a region write alike."""

    def v_yt(values: np.ndarray) -> xr.Dataset:
        return xr.Dataset({"v": (("y", "t"), values)})

    ours, theirs = tmp_path / "ours.zarr", tmp_path / "theirs.zarr"
    base = xr.Dataset({"v": (("t", "y"), np.arange(6.0).reshape(2, 3))})
    for path, write in (
        (ours, lambda d, p, **k: to_rectizarr(d, p, **k)),
        (theirs, lambda d, p, **k: d.to_zarr(p, zarr_format=3, **k)),
    ):
        write(base, path)
        write(v_yt(np.arange(6.0, 12).reshape(3, 2)), path, append_dim="t")
        write(v_yt(np.arange(12.0).reshape(3, 4) * 10), path, mode="a")
        write(v_yt(-np.arange(3.0).reshape(3, 1)), path, region={"t": slice(1, 2)})
    want = np.arange(12.0).reshape(3, 4).T * 10
    want[1] = -np.arange(3.0)
    got = _open(ours, "zarr")
    xr.testing.assert_identical(got, _open(theirs, "zarr"))
    assert got.v.dims == ("t", "y") and (got.v.values == want).all()


def test_append_casts_values_before_growing_and_undoes_a_failed_write(tmp_path: Path) -> None:
    """Ints appended to a string variable become text (zarr-python casts them so) before any array grows;
    a write that fails after the arrays grew (here a dask task) shrinks them back: the group is left as it
    was, and opens (xarray's zarr engine leaves the grown arrays, filled with the fill value)."""
    first = xr.Dataset(
        {"v": ("t", [1.0, 2.0]), "s": ("t", np.array(["a", "b"], dtype=object)), "n": ("t", [0.5, 1.5])},
        coords={"t": [0, 1]},
    )
    nxt = xr.Dataset({"v": ("t", [3.0]), "s": ("t", np.array([7])), "n": ("t", [2.5])}, coords={"t": [2]})
    ours, theirs = tmp_path / "ours.zarr", tmp_path / "theirs.zarr"
    for path, write in ((ours, to_rectizarr), (theirs, xr.Dataset.to_zarr)):
        write(first, path)
        write(nxt, path, append_dim="t")
    assert list(_open(ours, "zarr").s.values) == list(_open(theirs, "zarr").s.values) == ["a", "b", "7"]
    before = _open(ours, "rectizarr")

    def fail(block: np.ndarray) -> np.ndarray:
        raise RuntimeError("the task computing n failed")

    failing = da.map_blocks(fail, da.zeros(1, chunks=1), meta=np.array((), "f8"))
    with pytest.raises(RuntimeError, match="the task computing n failed"):
        to_rectizarr(nxt.assign(n=("t", failing), t=[3]), ours, append_dim="t")
    for engine in ("rectizarr", "zarr"):
        xr.testing.assert_identical(_open(ours, engine), before)


def test_mode_a_minus_without_append_dim_is_mode_a_like_the_zarr_engine(tmp_path: Path) -> None:
    first = xr.Dataset({"v": ("x", [1.0, 2.0])})
    second = xr.Dataset({"v": ("x", [3.0, 4.0]), "w": ("x", [5.0, 6.0])})
    ours, theirs = tmp_path / "ours.zarr", tmp_path / "theirs.zarr"
    to_rectizarr(first, ours)
    to_rectizarr(second, ours, mode="a-")
    first.to_zarr(theirs, zarr_format=3)
    second.to_zarr(theirs, mode="a-")
    xr.testing.assert_identical(_open(ours, "zarr"), _open(theirs, "zarr"))
    assert list(_open(ours, "zarr").v.values) == [3.0, 4.0]


@pytest.mark.parametrize(
    "enc", [{"_FillValue": None}, {"dtype": "f4", "_FillValue": None}, {"_FillValue": -9.0}]
)
def test_fill_value_encodings_as_xarray_takes_them(tmp_path: Path, enc: dict[str, Any]) -> None:
    """``encoding={"v": {"_FillValue": None}}``, xarray's way to store floats with no fill value, was refused
    ("unexpected encoding parameters"); the store matches xarray's own, read without masking."""
    ds = xr.Dataset({"v": (("t",), np.array([np.nan, 1.0, 2.0]))})
    ds.rectizarr.to_zarr(tmp_path / "rz.zarr", encoding={"v": dict(enc)})
    ds.to_zarr(tmp_path / "xr.zarr", encoding={"v": dict(enc)})
    got, want = (
        xr.open_dataset(tmp_path / p, engine="zarr", mask_and_scale=False) for p in ("rz.zarr", "xr.zarr")
    )
    np.testing.assert_array_equal(got.v.values, want.v.values)
    assert got.v.attrs == want.v.attrs


@pytest.mark.parametrize("append", [False, True])
def test_mode_a_replaces_the_group_attributes_like_the_zarr_engine(tmp_path: Path, append: bool) -> None:
    """xarray's zarr engine puts the dataset's attributes in place of the group's (they were merged)."""
    ds = xr.Dataset({"a": ("x", np.arange(3.0))}, attrs={"title": "old", "keep": 1})
    new = xr.Dataset({"a" if append else "b": ("x", np.ones(3))}, attrs={"title": "new"})
    kwargs: dict[str, Any] = {"append_dim": "x"} if append else {}
    for engine, path in (("zarr", tmp_path / "z"), ("rectizarr", tmp_path / "r")):
        if engine == "zarr":
            ds.to_zarr(path, zarr_format=3)
            new.to_zarr(path, mode="a", **kwargs)
        else:
            ds.rectizarr.to_zarr(path)
            new.rectizarr.to_zarr(path, mode="a", **kwargs)
    want = xr.open_dataset(tmp_path / "z", engine="zarr").attrs
    assert want == {"title": "new"} and xr.open_dataset(tmp_path / "r", engine="rectizarr").attrs == want
