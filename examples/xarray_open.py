"""Open a rectizarr-written group with xarray: ``xarray.open_dataset(path, engine="rectizarr")``.

We write a small dataset by hand with rectizarr (a temperature cube chunked one month per chunk along
time, a rectilinear grid, plus its coordinate arrays), give every array its ``dimension_names``, and open
it with xarray through rectizarr's backend. Data loads lazily; with ``chunks={}`` the dask chunks are the
storage chunks, so each dask block along time is one month.
"""

from __future__ import annotations

import calendar
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr

import rectizarr


def main(root: Path) -> None:
    path = str(root / "climate.zarr")
    days = [calendar.monthrange(2025, m)[1] for m in range(1, 13)]
    g = rectizarr.open_group(path, mode="w", attributes={"title": "synthetic daily temperature"})
    time = g.create_array(
        "time",
        shape=(365,),
        dtype="int64",
        chunks=(365,),
        dimension_names=["time"],
        attributes={"units": "days since 2025-01-01", "calendar": "proleptic_gregorian"},
    )
    time[:] = np.arange(365)
    lat = g.create_array(
        "lat",
        shape=(18,),
        dtype="float64",
        chunks=(18,),
        dimension_names=["lat"],
        attributes={"units": "degrees_north"},
    )
    lat[:] = np.linspace(-85, 85, 18)
    lon = g.create_array(
        "lon",
        shape=(36,),
        dtype="float64",
        chunks=(36,),
        dimension_names=["lon"],
        attributes={"units": "degrees_east"},
    )
    lon[:] = np.arange(0, 360, 10.0)
    t = g.create_array(
        "t2m",
        shape=(365, 18, 36),
        dtype="float32",
        chunks=[days, 18, 36],
        fill_value=np.nan,
        dimension_names=["time", "lat", "lon"],
        attributes={"units": "degC", "long_name": "2 m temperature"},
    )
    seasonal = 15 - 10 * np.cos(2 * np.pi * np.arange(365) / 365)[:, None, None]
    t[:] = (seasonal - 0.3 * np.abs(lat[:])[None, :, None] + np.zeros((1, 1, 36))).astype("float32")

    ds = xr.open_dataset(path, engine="rectizarr")
    print(ds)
    march = ds.t2m.sel(time=slice("2025-03-01", "2025-03-31"))
    print("March mean:", float(march.mean()))
    assert march.sizes["time"] == 31
    assert ds.t2m.dims == ("time", "lat", "lon")
    np.testing.assert_array_equal(ds.t2m.values, t[...])

    lazy = xr.open_dataset(path, engine="rectizarr", chunks={})
    print("dask chunks along time:", lazy.t2m.chunks[0])
    assert lazy.t2m.chunks[0] == tuple(days)
    monthly = lazy.t2m.mean(dim=("lat", "lon")).resample(time="MS").mean().compute()
    print("monthly means:", np.round(monthly.values, 1))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        tmp = Path(tempfile.mkdtemp(prefix="rectizarr-xarray-"))
        try:
            main(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
