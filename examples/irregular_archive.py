"""An irregular, "virtualised" archive: one chunk per legacy monthly file, months of different lengths.

Legacy archives often hold one file per month: 31, 28 (or 29), 31, 30, ... days. A regular grid cannot
give each file its own chunk, so a virtual Zarr view of such an archive needs a rectilinear grid along
time. Here we build that layout (each month's data becomes exactly one chunk), then access months as
blocks: ``a.blocks[m]`` is month ``m`` whatever its length, and reading it touches exactly one chunk.
"""

from __future__ import annotations

import calendar
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

import rectizarr
from rectizarr.stores import CountingStore, LocalStore


def legacy_files(year: int, nstations: int) -> list[np.ndarray]:
    """Stand-ins for the monthly files: (days in month, stations) of daily rainfall."""
    rng = np.random.default_rng(year)
    return [
        rng.gamma(0.6, 4.0, (calendar.monthrange(year, m)[1], nstations)).astype("float32")
        for m in range(1, 13)
    ]


def main(root: Path) -> None:
    files = legacy_files(2024, 25) + legacy_files(2025, 25)  # 24 months, one leap February
    edges = [f.shape[0] for f in files]
    path = str(root / "rainfall.zarr")
    a = rectizarr.create_array(
        path,
        shape=(sum(edges), 25),
        dtype="float32",
        chunks=[edges, 25],
        fill_value=np.nan,
        dimension_names=["time", "station"],
        attributes={"units": "mm/day", "source": "24 monthly files"},
    )
    for m, f in enumerate(files):
        a.blocks[m] = f  # one file -> one chunk; nothing else is touched

    counting = CountingStore(LocalStore(path, read_only=True))
    b = rectizarr.open_array(counting, mode="r")
    print("time chunks:", b.write_chunk_sizes[0])
    for m in (1, 13):  # February 2024 (29 days) and February 2025 (28 days)
        counting.reset()
        month = b.blocks[m]
        print(
            f"block {m}: shape {month.shape}, station-mean total {month.sum(axis=0).mean():.1f} mm, "
            f"{len(counting.requests)} chunk read(s): {[k for k, _ in counting.requests]}"
        )
        assert np.array_equal(month, files[m])
        assert len(counting.requests) == 1
    # Block slices work too: the second quarter of 2025 is blocks 15..17, 91 days.
    q2 = b.blocks[15:18]
    assert q2.shape == (91, 25)
    print("Q2 2025:", q2.shape, "days x stations")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        tmp = Path(tempfile.mkdtemp(prefix="rectizarr-archive-"))
        try:
            main(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
