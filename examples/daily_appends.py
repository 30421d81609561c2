"""Daily appends to a yearly-chunked time series: each append writes one day's worth of bytes.

History is stored one chunk per year (365 and 366 days: a rectilinear grid). Appending a day adds one new
one-day chunk (rectizarr's default growth for rectilinear axes), so the bytes written per append stay
one day's worth, however long the year so far. For contrast, the same appends to a regular grid with
366-day chunks rewrite the whole, growing, chunk of the current year every day. At the end of the year
the daily chunks are compacted into one yearly chunk with ``rectizarr copy``, streaming chunk by chunk.

Byte counts come from a :class:`rectizarr.stores.CountingStore` that also adds up the bytes it writes.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

import rectizarr
from rectizarr.cli import main as rectizarr_command
from rectizarr.stores import CountingStore, LocalStore

NY, NX = 40, 40
DAY_BYTES = NY * NX * 4  # one float32 day


class ByteCountingStore(CountingStore):
    """A CountingStore that also sums the bytes written to chunks and to metadata documents."""

    def __init__(self, inner: rectizarr.Store) -> None:
        super().__init__(inner)
        self.chunk_bytes = 0
        self.meta_bytes = 0

    def _set_batch(self, items: Mapping[str, bytes | bytearray | memoryview]) -> None:
        for key, value in items.items():
            if key.endswith("zarr.json"):
                self.meta_bytes += len(value)
            else:
                self.chunk_bytes += len(value)
        super()._set_batch(items)


def day_of_data(rng: np.random.Generator, t: int) -> np.ndarray:
    base = 10 + 8 * np.sin(2 * np.pi * t / 365.25)
    return (base + rng.normal(0, 1, (1, NY, NX))).astype("float32")


def appends(store: ByteCountingStore, a: rectizarr.Array, rng: np.random.Generator, days: int) -> list[int]:
    written = []
    for _ in range(days):
        store.chunk_bytes = 0
        a.append(day_of_data(rng, a.shape[0]))
        written.append(store.chunk_bytes)
    return written


def main(root: Path) -> None:
    rng = np.random.default_rng(1)
    history = np.concatenate([day_of_data(rng, t) for t in range(731)])  # 2023 and 2024

    rect_store = ByteCountingStore(LocalStore(str(root / "rectilinear.zarr")))
    a = rectizarr.create_array(
        rect_store,
        shape=history.shape,
        dtype="float32",
        chunks=[[365, 366], NY, NX],
        compressors=None,
        dimension_names=["time", "y", "x"],
    )
    a[:] = history
    rect = appends(rect_store, a, rng, 30)  # January 2025, one day at a time

    reg_store = ByteCountingStore(LocalStore(str(root / "regular.zarr")))
    b = rectizarr.create_array(
        reg_store,
        shape=history.shape,
        dtype="float32",
        chunks=(366, NY, NX),
        compressors=None,
        dimension_names=["time", "y", "x"],
    )
    b[:] = history
    reg = appends(reg_store, b, rng, 30)

    print(f"one day of data: {DAY_BYTES} bytes")
    print(f"rectilinear (yearly chunks + one chunk per new day): bytes per append {rect[:3]} ... {rect[-3:]}")
    print(f"regular 366-day chunks (rewrites the year's chunk):  bytes per append {reg[:3]} ... {reg[-3:]}")
    print("time chunks now:", a.write_chunk_sizes[0][:4], "...", len(a.write_chunk_sizes[0]), "chunks")
    assert all(n == DAY_BYTES for n in rect), rect
    assert reg[-1] > 10 * DAY_BYTES

    # End of the month: compact the daily chunks of 2025 into one chunk (streaming, chunk-aligned).
    compacted = str(root / "compacted.zarr")
    status = rectizarr_command(
        [
            "copy",
            str(root / "rectilinear.zarr"),
            compacted,
            "--chunks",
            f"[365,366,{a.shape[0] - 731}],{NY},{NX}",
        ]
    )
    assert status == 0
    c = rectizarr.open_array(compacted, mode="r")
    print("after `rectizarr copy --chunks`: time chunks", c.write_chunk_sizes[0])
    # diff exits 0: "same data, different chunking" (every value is bit-identical; only the grid differs).
    assert rectizarr_command(["diff", str(root / "rectilinear.zarr"), compacted]) == 0
    assert np.array_equal(c[...], a[...])


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        tmp = Path(tempfile.mkdtemp(prefix="rectizarr-appends-"))
        try:
            main(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
