"""Quickstart: a rectilinear, sharded array in a local directory (what `make demo` runs).

Daily data for one year, stored one month per shard (months have different lengths: a rectilinear
grid), with weekly-ish inner chunks of 1 day x 50 x 50 inside each shard. We write it, append a few days
of the next year, read a region back and print what is on disk.
"""

from __future__ import annotations

import calendar
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

import rectizarr


def main(root: Path) -> None:
    days = [calendar.monthrange(2025, m)[1] for m in range(1, 13)]  # 31, 28, 31, 30, ...
    path = root / "temperature.zarr"
    a = rectizarr.create_array(
        str(path),
        shape=(365, 100, 100),
        dtype="float32",
        shards=[days, 100, 100],  # one shard per month: rectilinear along time
        chunks=(1, 50, 50),  # inner chunks: one day, a quarter of the map
        fill_value=np.nan,
        dimension_names=["time", "y", "x"],
        attributes={"units": "degC"},
    )
    rng = np.random.default_rng(0)
    data = (
        15 + 10 * np.sin(np.arange(365) / 58.0)[:, None, None] + rng.normal(0, 1, (365, 100, 100))
    ).astype("float32")
    a[:] = data

    a.append(data[:3] + 1, axis=0)  # three days of January 2026: one new chunk of 3 days
    region = a[360:368, 10:12, 20]
    assert np.array_equal(region[:5], data[360:365, 10:12, 20])
    assert np.array_equal(region[5:], data[:3, 10:12, 20] + 1)

    b = rectizarr.open_array(str(path), mode="r")
    print(b.info)
    print("write_chunk_sizes[0]:", b.write_chunk_sizes[0])
    print("read_chunk_sizes[1:]:", b.read_chunk_sizes[1:])
    print("region mean:", float(np.nanmean(region)))
    print("files in store:", sum(1 for p in path.rglob("*") if p.is_file()))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        tmp = Path(tempfile.mkdtemp(prefix="rectizarr-demo-"))
        try:
            main(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
