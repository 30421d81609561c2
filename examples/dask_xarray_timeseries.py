"""An irregular daily time series written with dask on a local cluster, read back with xarray.

One year of daily maps is built lazily with dask, one block per month (months have different lengths),
and written by two worker processes to a rectilinear Zarr v3 array: one chunk per month, each written by
its own task, with no locks and no read-modify-write. xarray then opens the store with
``engine="rectizarr"``; ``chunks={}`` gives one dask block per stored month, and the monthly mean is
computed on the cluster. Needs the ``dask`` and ``xarray`` extras.
"""

from __future__ import annotations

import calendar
import shutil
import sys
import tempfile
from pathlib import Path

import dask.array as da
import numpy as np
import pandas as pd
import xarray as xr
from distributed import Client, LocalCluster

import rectizarr
from rectizarr.integrations.xarray import to_rectizarr


def main(root: Path) -> None:
    year = 2024  # a leap year: February has 29 days
    days = tuple(calendar.monthrange(year, m)[1] for m in range(1, 13))
    time = pd.date_range(f"{year}-01-01", periods=sum(days), freq="D")
    ny, nx = 90, 180

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster),
    ):
        # A seasonal cycle plus noise, one dask block per month (irregular chunks along time).
        season = da.from_array(
            15 + 10 * np.sin(2 * np.pi * (np.arange(sum(days)) - 100) / 366), chunks=(days,)
        )
        noise = da.random.default_rng(0).normal(0, 2, size=(sum(days), ny, nx), chunks=(days, ny, nx))
        temp = (season[:, None, None] + noise).astype("float32")
        ds = xr.Dataset(
            {"temp": (("time", "y", "x"), temp, {"units": "degC", "long_name": "air temperature"})},
            coords={"time": time, "y": np.linspace(-89, 89, ny), "x": np.linspace(-179, 179, nx)},
            attrs={"title": "synthetic daily temperature"},
        )
        path = root / "daily.zarr"
        to_rectizarr(ds, path)  # the dask blocks are written by the workers, one chunk per month

        stored = rectizarr.open_array(path, path="temp", mode="r")
        print(f"grid: {stored.grid.kind}, chunks along time: {stored.write_chunk_sizes[0]}")

        opened = xr.open_dataset(path, engine="rectizarr", chunks={})
        assert opened.temp.chunks[0] == days  # one dask block per stored month
        monthly = opened.temp.mean(dim=("y", "x")).resample(time="MS").mean().compute()
        print("monthly mean temperature (degC):")
        for t, v in zip(monthly.time.values, monthly.values, strict=True):
            print(f"  {pd.Timestamp(t):%Y-%m}  {v:6.2f}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        tmp = Path(tempfile.mkdtemp(prefix="rectizarr-dask-xarray-"))
        try:
            main(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
