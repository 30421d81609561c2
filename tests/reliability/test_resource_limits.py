"""A huge selection of a mostly empty array: memory proportional to the output, no Python object per
chunk that is not stored (the read lists the stored chunks and pre-fills the output)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.stores import LocalStore, MemoryStore, Store
from tests.memory import least_peak

MiB = 1 << 20


@pytest.mark.parametrize("kind", ["memory", "local"])
@pytest.mark.parametrize("sharded", [False, True], ids=["chunked", "sharded"])
def test_sparse_huge_read_memory_is_proportional_to_output(tmp_path: Path, kind: str, sharded: bool) -> None:
    store: Store = MemoryStore() if kind == "memory" else LocalStore(tmp_path / "s.zarr")
    layout = dict(shards=(100, 100), chunks=(1, 1)) if sharded else dict(chunks=(1, 1))
    a = rectizarr.create_array(
        store, shape=(10**6, 10**6), dtype="f8", compressors=None, fill_value=-1.0, **layout
    )  # type: ignore[arg-type]
    points = {(5, 7): 1.0, (500, 3): 2.0, (999, 999): 3.0, (5000, 5000): 4.0}
    for (i, j), v in points.items():
        a[i, j] = v
    outs: list[Any] = []
    bound = 4 * 1000 * 1000 * 8 + 10 * MiB
    peak = least_peak(lambda: outs.append(a[:1000, :1000]), bound)  # 10**6 touched chunks, 3 of them stored
    out = outs[-1]
    expected = np.full((1000, 1000), -1.0)
    for (i, j), v in points.items():
        if i < 1000 and j < 1000:
            expected[i, j] = v
    np.testing.assert_array_equal(out, expected)
    # The plan's coords array (16 bytes per touched chunk here) and the output; nothing per chunk in Python
    # (one ChunkProjection per touched chunk was ~300 bytes each: hundreds of MiB).
    assert peak < 4 * out.nbytes + 10 * MiB, (
        f"peak {peak / MiB:.1f} MiB for {out.nbytes / MiB:.1f} MiB of output"
    )


def test_sparse_read_path_matches_dense_path() -> None:
    """Same answers whether the read goes through the stored-chunk listing or every projection."""
    store = MemoryStore()
    a = rectizarr.create_array(store, shape=(300, 300), dtype="i4", chunks=(3, 2), fill_value=7)
    rng = np.random.default_rng(1)
    model = np.full(a.shape, 7, dtype="i4")
    for _ in range(20):
        i, j = rng.integers(0, 300, 2)
        a[i, j] = model[i, j] = int(rng.integers(0, 100))
    np.testing.assert_array_equal(a[:], model)  # 15,000 chunks touched: sparse path
    np.testing.assert_array_equal(a[::-7, 5:290:3], model[::-7, 5:290:3])
    np.testing.assert_array_equal(a.oindex[[299, 0, 17], :], model[[299, 0, 17], :])
    np.testing.assert_array_equal(a[10:40, 10:40], model[10:40, 10:40])  # few chunks: dense path
    a[:] = model + 1  # dense now: more stored chunks than a quarter of those touched
    np.testing.assert_array_equal(a[:], model + 1)


def test_sparse_huge_one_dimensional_read_builds_nothing_per_missing_chunk() -> None:
    """shape (2**31,), chunks (1,), 3 chunks stored: ``a[:10**6]`` touches 10**6 chunks. Per-axis plans keep
    numpy arrays (about six int64 per touched chunk) and build AxisChunk objects only for stored chunks."""
    a = rectizarr.create_array(
        MemoryStore(), shape=(2**31,), dtype="f8", chunks=(1,), compressors=None, fill_value=-1.0
    )
    for i in (5, 500, 999_999):
        a[i] = 1.0
    outs: list[Any] = []
    peak = least_peak(lambda: outs.append(a[: 10**6]), 12 * 10**6 * 8 + 10 * MiB)
    out = outs[-1]
    expected = np.full(10**6, -1.0)
    expected[[5, 500, 999_999]] = 1.0
    np.testing.assert_array_equal(out, expected)
    assert peak < 12 * out.nbytes + 10 * MiB, (
        f"peak {peak / MiB:.1f} MiB for {out.nbytes / MiB:.1f} MiB of output"
    )
