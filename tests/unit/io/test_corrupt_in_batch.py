"""One corrupt chunk among many: a read of them all is a ``CodecError`` naming that chunk's key, whatever the
batch size, and a write that must decode it (a partly written chunk) raises the same error with nothing
written: every stored value is as it was. Chunk files and shards, on every writable store (local files,
memory, zip, S3 through both backends: compare-and-swap writes)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr import tuning
from rectizarr.errors import CodecError
from rectizarr.stores import Store

ZSTD = {"name": "zstd", "configuration": {"level": 1}}
SETTINGS = [
    replace(tuning.DEFAULT, batch_bytes=1),
    tuning.DEFAULT,
    replace(tuning.DEFAULT, batch_bytes=1 << 40),
    replace(tuning.DEFAULT, block_min_chunks=1 << 40, piecewise_bytes=0),
]
LAYOUTS: dict[str, dict[str, Any]] = {
    "1-d chunk files": {"shape": (2000,), "chunks": (20,)},
    "2-d chunk files": {"shape": (40, 60), "chunks": (4, 5)},
    "4-d chunk files": {"shape": (8, 6, 6, 6), "chunks": (2, 3, 2, 3)},
    "2-d shards": {"shape": (40, 60), "chunks": (4, 5), "shards": (8, 20)},
}


def _contents(store: Store) -> dict[str, bytes]:
    return {k: bytes(store.get(k) or b"") for k in sorted(store.list_prefix(""))}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("kind", ["memory", "local", "zip", "s3", "obstore"])
def test_one_corrupt_chunk_fails_the_read_and_the_write_writes_nothing(
    request: pytest.FixtureRequest, kind: str, layout: str
) -> None:
    store: Store = request.getfixturevalue(f"{kind}_store")
    kw = LAYOUTS[layout]
    a = rectizarr.create_array(store, dtype="<u2", compressors=[ZSTD], fill_value=0, **kw)
    data = (np.arange(np.prod(kw["shape"])) % 600).astype("<u2").reshape(kw["shape"])
    a[...] = data
    sharded = "shards" in kw
    # a chunk (shard) the write below covers in part: the first along axis 0, in the middle of the last axis
    grid = [n // c for n, c in zip(kw["shape"], kw["shards"] if sharded else kw["chunks"], strict=True)]
    coords = [0] * (len(grid) - 1) + [grid[-1] // 2] if len(grid) > 1 else [0]
    key = "c/" + "/".join(map(str, coords))
    original = store.get(key) or b""
    value = bytearray(original)
    if sharded:  # every inner chunk's frame damaged, the index (at the end) intact
        for i in range(0, len(value) - 4 - 16 * 8, 7):
            value[i] ^= 0x5A
    else:
        value = value[: len(value) // 2]
    store.set(key, bytes(value))
    before = _contents(store)
    for t in SETTINGS:
        with tuning.use(t), pytest.raises(CodecError) as err:
            a[...]
        assert err.value.key == key and key in str(err.value)
    with pytest.raises(CodecError) as err:  # the chunks at index 0 of axis 0 partly written, the others whole
        a[1:] = 7
    assert err.value.key == key
    assert _contents(store) == before  # nothing written, not even the chunks before or after it
    store.set(key, original)  # repaired: the write goes through
    np.testing.assert_array_equal(a[...], data)
    a[1:] = 7
    data[1:] = 7
    np.testing.assert_array_equal(a[...], data)
