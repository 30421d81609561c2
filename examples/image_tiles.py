"""Sharded image tiles with partial reads: how many store requests does reading one tile take?

A 2048 x 2048 RGB image is stored in 512 x 512 shards (16 objects in the store instead of 256), each
holding 16 inner tiles of 128 x 128. Reading one tile fetches the shard's index once (cached afterwards)
and then only that tile's byte range: no shard is ever read whole.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

import rectizarr
from rectizarr.stores import CountingStore, LocalStore


def main(root: Path) -> None:
    path = str(root / "image.zarr")
    y, x = np.mgrid[0:2048, 0:2048]
    image = np.stack([(x // 16) % 256, (y // 16) % 256, ((x + y) // 32) % 256], axis=-1).astype("uint8")
    a = rectizarr.create_array(
        path,
        shape=image.shape,
        dtype="uint8",
        shards=(512, 512, 3),
        chunks=(128, 128, 3),
        dimension_names=["y", "x", "band"],
    )
    a[:] = image
    files = sum(1 for p in Path(path).rglob("*") if p.is_file())
    print(f"image {image.shape}: {files} files on disk (16 shards and zarr.json)")

    store = CountingStore(LocalStore(path, read_only=True))
    b = rectizarr.open_array(store, mode="r")
    for label, sel in [
        ("first tile in shard (0, 1)", np.s_[128:256, 512:640]),
        ("another tile, same shard", np.s_[256:384, 640:768]),
        ("a 50x50 window inside one tile", np.s_[1050:1100, 1550:1600]),
    ]:
        store.reset()
        tile = b[sel]
        assert np.array_equal(tile, image[sel])
        ranges = [f"{key} bytes {r}" for key, r in store.requests]  # (-n, None): the index at the end
        print(f"{label}: {len(store.requests)} request(s): {ranges}")
        assert len(store.requests) <= 2
    store.reset()
    b[128:256, 512:640]
    print(f"the first tile again: {len(store.requests)} request (index cached)")
    assert len(store.requests) == 1


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        tmp = Path(tempfile.mkdtemp(prefix="rectizarr-tiles-"))
        try:
            main(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
