"""Corrupt stored chunks and shards (bit flips, truncation, extension) and classify what a read does.

Shared by ``test_corrupt_data.py`` and ``scripts/long_runs.py``. A read must return the right data, or
raise :class:`CodecError` (or its :class:`ChecksumError`) naming the corrupted key; for a chain whose every
stored byte is covered by a checksum (``CHECKED``) it must never return wrong data. Without a checksum
wrong-but-well-formed data (right shape and dtype) is tolerated: the outcome is counted as ``"wrong"``.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

import rectizarr
from rectizarr.errors import CodecError, RectizarrError
from rectizarr.stores import MemoryStore

_BYTES = {"name": "bytes", "configuration": {"endian": "little"}}
_GZIP = {"name": "gzip", "configuration": {"level": 1}}
_ZSTD = {"name": "zstd", "configuration": {"level": 1, "checksum": False}}
_ZSTD_CK = {"name": "zstd", "configuration": {"level": 1, "checksum": True}}
_BLOSC = {
    "name": "blosc",
    "configuration": {"cname": "zstd", "clevel": 1, "shuffle": "shuffle", "typesize": 4, "blocksize": 0},
}
_CRC = {"name": "crc32c"}
_T = {"name": "transpose", "configuration": {"order": [1, 0]}}


def _shard(codecs: list[Any], index_crc: bool, location: str = "end") -> dict[str, Any]:
    return {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [5, 3],
            "codecs": codecs,
            "index_location": location,
            "index_codecs": [_BYTES, _CRC] if index_crc else [_BYTES],
        },
    }


# name -> (codecs, outer chunk shape)
CHAINS: dict[str, tuple[list[Any], tuple[int, int]]] = {
    "bytes": ([_BYTES], (10, 6)),
    "bytes+gzip": ([_BYTES, _GZIP], (10, 6)),
    "bytes+zstd": ([_BYTES, _ZSTD], (10, 6)),
    "bytes+zstd(checksum)": ([_BYTES, _ZSTD_CK], (10, 6)),
    "bytes+blosc": ([_BYTES, _BLOSC], (10, 6)),
    "bytes+crc32c": ([_BYTES, _CRC], (10, 6)),
    "bytes+zstd+crc32c": ([_BYTES, _ZSTD, _CRC], (10, 6)),
    "transpose+bytes": ([_T, _BYTES], (10, 6)),
    "transpose+bytes+gzip": ([_T, _BYTES, _GZIP], (10, 6)),
    "sharding(index crc32c)": ([_shard([_BYTES], True)], (10, 6)),
    "sharding(no crc32c)": ([_shard([_BYTES], False)], (10, 6)),
    "sharding(start, no crc32c)": ([_shard([_BYTES], False, "start")], (10, 6)),
    "sharding(crc32c inner+index)": ([_shard([_BYTES, _CRC], True)], (10, 6)),
    "sharding(start, crc32c inner+index)": ([_shard([_BYTES, _CRC], True, "start")], (10, 6)),
    "sharding(gzip inside, index crc32c)": ([_shard([_BYTES, _GZIP], True)], (10, 6)),
    "sharding(zstd inside)": ([_shard([_BYTES, _ZSTD], False)], (10, 6)),
    "sharding(blosc+crc32c inside, index crc32c)": ([_shard([_BYTES, _BLOSC, _CRC], True)], (10, 6)),
    "transpose+sharding(crc32c inner+index)": (
        [
            _T,
            {
                **_shard([_BYTES, _CRC], True),
                "configuration": {**_shard([_BYTES, _CRC], True)["configuration"], "chunk_shape": [3, 5]},
            },
        ],
        (10, 6),
    ),
    "sharding+gzip": ([_shard([_BYTES], True), _GZIP], (10, 6)),
}

# Chains where every stored byte is covered by a checksum (crc32c, the gzip trailer's CRC-32 and
# length, a zstd frame checksum): corruption is never returned as data.
CHECKED = {
    "bytes+gzip",
    "bytes+zstd(checksum)",
    "bytes+crc32c",
    "bytes+zstd+crc32c",
    "transpose+bytes+gzip",
    "sharding(crc32c inner+index)",
    "sharding(start, crc32c inner+index)",
    "sharding(gzip inside, index crc32c)",
    "sharding(blosc+crc32c inside, index crc32c)",
    "transpose+sharding(crc32c inner+index)",
    "sharding+gzip",
}

SHAPE = (20, 12)
EXPECTED = np.arange(SHAPE[0] * SHAPE[1], dtype="int32").reshape(SHAPE) * 7 - 100


def build(chain: str) -> dict[str, bytes]:
    """The store contents of an array ``a`` written with ``chain`` (the root group included)."""
    codecs, chunks = CHAINS[chain]
    store = MemoryStore()
    a = rectizarr.create_array(
        store, name="a", shape=SHAPE, dtype="int32", chunks=chunks, codecs=codecs, fill_value=-1
    )
    a[...] = EXPECTED
    return {k: bytes(store.get(k) or b"") for k in store.list_prefix("")}


def corrupt(value: bytes, rng: random.Random) -> tuple[str, bytes]:
    """A random bit flip, truncation or extension of ``value`` (always different from it)."""
    kind = rng.choice(["flip", "flip", "flip", "truncate", "extend"])
    if kind == "flip" and value:
        out = bytearray(value)
        for _ in range(rng.randint(1, 3)):
            pos = rng.randrange(len(out))
            out[pos] ^= 1 << rng.randrange(8)
        if bytes(out) != value:
            return kind, bytes(out)
    if kind == "truncate" and value:
        return kind, value[: rng.randrange(len(value))]
    extra = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))) if rng.random() < 0.7 else b"\0" * 8
    return "extend", value + extra


def run_case(chain: str, contents: dict[str, bytes], rng: random.Random) -> str:
    """Corrupt one chunk/shard of ``contents``, read the whole array and one chunk's region.

    Returns ``"correct"``, ``"error"`` or ``"wrong"``; raises AssertionError on a violation.
    """
    keys = sorted(k for k in contents if not k.endswith("zarr.json"))
    key = rng.choice(keys)
    kind, bad = corrupt(contents[key], rng)
    store = MemoryStore()
    store.set_many({**contents, key: bad})
    a = rectizarr.open_array(store.with_read_only(), path="a", mode="r")
    outcomes = []
    for sel in ((Ellipsis,), (slice(2, 7), slice(4, 9))):
        try:
            got = a[sel]
        except CodecError as e:
            assert e.key == key and repr(key) in str(e), (
                f"{chain}: {type(e).__name__} does not name {key!r}: {e}"
            )
            outcomes.append("error")
            continue
        except RectizarrError as e:
            raise AssertionError(f"{chain}/{kind}: {type(e).__name__} is not a CodecError: {e}") from e
        except Exception as e:
            raise AssertionError(f"{chain}/{kind} on {key}: {type(e).__name__}: {e}") from e
        want = EXPECTED[sel]
        assert got.shape == want.shape and got.dtype == want.dtype, (chain, kind, got.shape, got.dtype)
        if np.array_equal(got, want):
            outcomes.append("correct")
        else:
            assert chain not in CHECKED, f"{chain}: {kind} of {key!r} returned wrong data without an error"
            outcomes.append("wrong")
    return "wrong" if "wrong" in outcomes else "error" if "error" in outcomes else "correct"
