"""Concurrent writers of disjoint regions lose nothing: 8 threads sharing shards, 4 processes owning
disjoint shards. (Processes writing the same shard are not safe: see docs/guarantees.md.)"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import rectizarr
from rectizarr.stores import LocalStore, MemoryStore, Store

ROOT = Path(__file__).resolve().parents[2]


def _threads_write(
    arrays: list[rectizarr.Array], regions: list[tuple[slice, slice]], values: list[np.ndarray]
) -> None:
    barrier = threading.Barrier(len(regions))
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            for _ in range(3):  # the same data three times: more interleavings
                arrays[i][regions[i]] = values[i]
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(regions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@pytest.mark.parametrize("kind", ["memory", "local"])
@pytest.mark.parametrize("shared_handle", [True, False], ids=["one-array", "array-per-thread"])
@pytest.mark.parametrize("rounds", [4])
def test_eight_threads_disjoint_regions_sharing_shards(
    tmp_path: Path, kind: str, shared_handle: bool, rounds: int
) -> None:
    store: Store = MemoryStore() if kind == "memory" else LocalStore(tmp_path / "t.zarr")
    a = rectizarr.create_array(
        store, name="x", shape=(64, 48), dtype="int32", shards=(32, 24), chunks=(4, 6), fill_value=-1
    )
    model = np.full(a.shape, -1, dtype="int32")
    rng = np.random.default_rng(0)
    for r in range(rounds):
        # 8 disjoint bands, each cutting through inner chunks and shared by several threads per shard
        cuts = np.sort(rng.choice(np.arange(1, 64), 7, replace=False))
        bounds = [0, *cuts.tolist(), 64]
        regions = [(slice(bounds[i], bounds[i + 1]), slice(r % 5, 48 - r)) for i in range(8)]
        values = [
            rng.integers(0, 10**6, size=(bounds[i + 1] - bounds[i], 48 - r - r % 5), dtype="int32")
            for i in range(8)
        ]
        if shared_handle:
            arrays = [a] * 8
        else:  # each thread its own store object and array, as separate components of one program would
            arrays = [
                rectizarr.open_array(store if kind == "memory" else LocalStore(tmp_path / "t.zarr"), path="x")
                for _ in range(8)
            ]
        _threads_write(arrays, regions, values)
        for reg, val in zip(regions, values, strict=True):
            model[reg] = val
        np.testing.assert_array_equal(a[...], model)


_PROC = """
import sys, numpy as np, rectizarr
root, i = sys.argv[1], int(sys.argv[2])
a = rectizarr.open_array(root, path="x")
rng = np.random.default_rng(i)
for rep in range(5):
    a[:, i * 16:(i + 1) * 16] = np.arange(64 * 16, dtype="int32").reshape(64, 16) + 10_000 * i + rep
    # a partial write inside the owned shards too (read-modify-write of this process's shards only)
    r = int(rng.integers(0, 60))
    a[r:r + 3, i * 16 + 2:i * 16 + 9] = -5 - i
"""


def test_four_processes_disjoint_shards(tmp_path: Path) -> None:
    root = str(tmp_path / "p.zarr")
    rectizarr.create_array(
        root, name="x", shape=(64, 64), dtype="int32", shards=(32, 16), chunks=(8, 8), fill_value=0
    )
    procs = [subprocess.Popen([sys.executable, "-c", _PROC, root, str(i)], cwd=ROOT) for i in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    got = rectizarr.open_array(root, path="x", mode="r")[...]
    for i in range(4):
        band = got[:, i * 16 : (i + 1) * 16]
        expected = np.arange(64 * 16, dtype="int32").reshape(64, 16) + 10_000 * i + 4
        rng = np.random.default_rng(i)
        mask = np.zeros_like(band, dtype=bool)
        for _ in range(5):  # each round rewrites the band first: only the last partial write survives
            r = int(rng.integers(0, 60))
        mask[r : r + 3, 2:9] = True
        np.testing.assert_array_equal(band[~mask], expected[~mask])
        assert (band[mask] == -5 - i).all()
