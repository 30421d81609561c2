"""``rectizarr copy`` streams: its peak memory is bounded by a few destination regions, not the array.

A memory bound, measured with tracemalloc (numpy reports its buffers to it); never a timing.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

import rectizarr
from rectizarr.cli import main
from tests.memory import least_peak

DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
NY = NX = 64
DAY_BYTES = NY * NX * 4
MONTH_BYTES = 31 * DAY_BYTES  # the largest destination region (one month)
TOTAL = 365 * DAY_BYTES


def _peak(fn: Callable[[], int], destination: str | None = None) -> int:
    """The least peak of up to three runs of a command that must succeed (``destination`` removed first)."""

    def run() -> None:
        if destination is not None:
            shutil.rmtree(destination, ignore_errors=True)
        assert fn() == 0

    return least_peak(run, 5.5 * MONTH_BYTES)


def test_copy_daily_to_monthly_and_back_in_bounded_memory(tmp_path: Path) -> None:
    daily, monthly, back = (str(tmp_path / n) for n in ("daily.zarr", "monthly.zarr", "back.zarr"))
    a = rectizarr.create_array(daily, shape=(365, NY, NX), dtype="float32", chunks=(1, NY, NX))
    data = np.random.default_rng(0).normal(size=a.shape).astype("float32")
    a[:] = data
    del data  # the oracle is re-read below, outside the measured region
    spec = f"[{','.join(map(str, DAYS))}],{NY},{NX}"
    # A budget of one month: regions are single destination chunks (months).
    peak = _peak(
        lambda: main(["copy", daily, monthly, "--chunks", spec, "--memory", str(MONTH_BYTES)]), monthly
    )
    assert peak < 5.5 * MONTH_BYTES < TOTAL / 2, (peak, MONTH_BYTES)
    m = rectizarr.open_array(monthly, mode="r")
    assert m.write_chunk_sizes[0] == tuple(DAYS)
    # Back to daily chunks: the destination chunks are days; regions follow the source's monthly
    # boundaries (each monthly chunk decoded once) and stay within the budget.
    peak = _peak(
        lambda: main(["copy", monthly, back, "--chunks", f"1,{NY},{NX}", "--memory", str(MONTH_BYTES)]), back
    )
    assert peak < 5.5 * MONTH_BYTES < TOTAL / 2, (peak, MONTH_BYTES)
    b = rectizarr.open_array(back, mode="r")
    assert b.write_chunk_sizes == rectizarr.open_array(daily).write_chunk_sizes
    assert main(["diff", daily, back, "--memory", str(MONTH_BYTES)]) == 0
    assert np.asarray(b[...]).tobytes() == np.asarray(rectizarr.open_array(daily)[...]).tobytes()


def test_diff_streams_in_bounded_memory(tmp_path: Path) -> None:
    one, two = str(tmp_path / "one.zarr"), str(tmp_path / "two.zarr")
    for p in (one, two):
        rectizarr.create_array(p, shape=(365, NY, NX), dtype="float32", chunks=[DAYS, NY, NX])[:] = 1.5
    peak = _peak(lambda: main(["diff", one, two, "--memory", str(MONTH_BYTES)]))
    assert peak < 5.5 * MONTH_BYTES < TOTAL / 2, (peak, MONTH_BYTES)
