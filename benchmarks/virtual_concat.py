"""How long ``rectizarr.virtual.build`` takes to join N daily files (local directories) along time.

    python -m benchmarks.virtual_concat [--days 365] [--tiles 4] [--sharded]

Each day is one array of shape (1, 180, 360) in ``--tiles`` chunks (or one shard of them); the build reads
each source's ``zarr.json``, lists its directory (or reads its shard index) and writes no chunk. Prints
the wall time of the build (best of 3) and of writing the JSON.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import rectizarr
from rectizarr import virtual


def make_days(root: Path, days: int, tiles: int, sharded: bool) -> list[str]:
    rows = 180 // (2 if tiles >= 2 else 1)
    cols = 360 // max(1, tiles // 2)
    kwargs = {"chunks": (1, rows, cols), "shards": (1, 180, 360)} if sharded else {"chunks": (1, rows, cols)}
    paths = []
    for d in range(days):
        path = str(root / f"day{d:03d}")
        rectizarr.create_array(path, data=np.full((1, 180, 360), d, dtype="f4"), **kwargs)
        paths.append(path)
    return paths


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--days", type=int, default=365)
    p.add_argument("--tiles", type=int, default=4)
    p.add_argument("--sharded", action="store_true")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_days(Path(tmp), args.days, args.tiles, args.sharded)
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            result = virtual.build(paths, 0)
            best = min(best, time.perf_counter() - t0)
        t0 = time.perf_counter()
        virtual.write_refs(result.refs, Path(tmp) / "v.json")
        written = time.perf_counter() - t0
        n = len(result.refs["refs"]) - 1
        print(
            f"{args.days} sources ({'sharded' if args.sharded else 'chunked'}, {n} chunk references): "
            f"build {best:.3f} s (best of 3), write JSON {written:.3f} s, {result.rewritten} rewritten"
        )
        a = rectizarr.open_array("reference://", mode="r", storage_options={"fo": result.refs})
        assert a.shape == (args.days, 180, 360) and float(a[args.days - 1, 0, 0]) == args.days - 1


if __name__ == "__main__":
    main()
