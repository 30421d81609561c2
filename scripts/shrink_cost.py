"""What a shrink's clean-up costs: CPU ms, reads and bytes read (a CountingStore), chunks deleted.

    PYTHONPATH=. .venv/bin/python scripts/shrink_cost.py        # a local array of 64 x 64 chunks
    PYTHONPATH=. .venv/bin/python scripts/shrink_cost.py --s3   # also 16 x 16 chunks on moto S3, both backends

Each array is shrunk to half its rows plus half a chunk: half the chunks lie wholly past the new end (deleted),
one row of chunks is cut (read, cleared past the end, written). On S3 the CPU time includes the moto
server's, which runs in this process: compare reads and bytes there.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import rectizarr
from rectizarr.stores import CountingStore, LocalStore, Store


def shrink(store: Store, n: int, chunk: int = 16) -> tuple[float, int, int, int]:
    """(CPU ms, reads, bytes read, deletes) of one shrink of an array of ``n`` x ``n`` chunks in ``store``."""
    side = n * chunk
    a = rectizarr.create_array(
        store, name="x", shape=(side, side), chunks=(chunk, chunk), dtype="f8", fill_value=0
    )
    a[...] = np.random.default_rng(0).random((side, side))
    sizes = {k: store.getsize(k) or 0 for k in store.list_prefix("x/")}
    spy = CountingStore(store)
    b = rectizarr.open_array(spy, path="x")
    spy.reset()
    start = time.process_time()
    b.resize((side // 2 + chunk // 2, side))
    cpu = (time.process_time() - start) * 1000
    nbytes = sum(sizes.get(k, 0) if r is None else (r[1] or 0) for k, r in spy.requests)
    return cpu, len(spy.requests), nbytes, spy.deletes


def main() -> None:
    runs = []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as d:
            runs.append(shrink(LocalStore(Path(d)), 64))
    cpu = sorted(r[0] for r in runs)[1]
    _, reads, nbytes, deletes = runs[-1]
    print(
        f"local, 4096 chunks: CPU {cpu:.0f} ms (median of 3), {reads} reads, {nbytes} bytes read, {deletes} deletes"
    )
    if "--s3" not in sys.argv:
        return
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from tests.servers import S3Server

    server = S3Server()
    for backend in ("obstore", "fsspec"):
        bucket = server.new_bucket(server.filesystem())
        store = rectizarr.stores.open_store(
            f"s3://{bucket}", backend=backend, storage_options=server.storage_options()
        )
        server.reset_counts()
        cpu, reads, nbytes, deletes = shrink(store, 16)
        print(
            f"s3 {backend}, 256 chunks: CPU {cpu:.0f} ms, {reads} reads, {nbytes} bytes read, {deletes} deletes"
        )


if __name__ == "__main__":
    main()
