"""The engine's fast paths (issue 8) give the same answers as the general ones.

Covered: decoding straight into the output or a scratch chunk (zstd/blosc ``decode_into``), whole shards
of raw inner chunks pasted with one copy (``ShardingCodec.dense``), writes that encode the caller's data
as it is, run-length-encoded rectilinear edges parsed from raw JSON, and 0-d / string arrays on disk.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

import rectizarr
from rectizarr.codecs.bytes_to_bytes import BloscCodec, ZstdCodec
from rectizarr.core.grid import expand_rle
from rectizarr.core.grid_json import fast_rle_runs, parse_chunk_grid
from rectizarr.errors import MetadataError
from rectizarr.stores import LocalStore, MemoryStore, Store

ZSTD = [{"name": "zstd", "configuration": {"level": 1, "checksum": False}}]
BLOSC = [
    {
        "name": "blosc",
        "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0},
    }
]


def stores(tmp_path: Path) -> list[Store]:
    return [MemoryStore(), LocalStore(tmp_path / "a.zarr")]


@pytest.mark.parametrize("compressors", [[], ZSTD, BLOSC], ids=["raw", "zstd", "blosc"])
@pytest.mark.parametrize("sharded", [False, True], ids=["chunked", "sharded"])
def test_reads_and_writes_match_numpy(tmp_path: Path, compressors: list[Any], sharded: bool) -> None:
    rng = random.Random(8)
    for store in stores(tmp_path):
        for _ in range(8):
            inner = tuple(rng.choice([1, 2, 3]) for _ in range(3))
            layout: dict[str, Any] = {"chunks": inner}
            if sharded:
                layout["shards"] = tuple(i * rng.choice([1, 2]) for i in inner)
            shape = tuple(rng.randint(1, 7) for _ in range(3))
            a = rectizarr.create_array(
                store,
                shape=shape,
                dtype="<i4",
                compressors=compressors,
                fill_value=-1,
                overwrite=True,
                **layout,
            )
            data = np.arange(np.prod(shape), dtype="<i4").reshape(shape) * 7 + 1
            a[...] = data
            view = np.asarray(data)[::-1, :, 1:]  # writes from a strided view of the caller's data
            a[:, :, 1:] = view
            model = data.copy()
            model[:, :, 1:] = view
            for sel in [
                (...,),
                (slice(1, None), slice(None), 0),
                (slice(None, None, -1),) * 3,
                (slice(0, 1), slice(0, 2), slice(1, 3)),
            ]:
                np.testing.assert_array_equal(a[sel], model[sel])
            np.testing.assert_array_equal(
                a.oindex[[2 % shape[0], 0], :, [0]], model[[2 % shape[0], 0]][:, :, [0]]
            )


def test_zero_d_and_strings_on_disk(tmp_path: Path) -> None:
    for sharded in (None, ()):
        kwargs: dict[str, Any] = {} if sharded is None else {"shards": (), "chunks": ()}
        a = rectizarr.create_array(
            str(tmp_path / f"i{sharded}.zarr"), shape=(), dtype="i8", fill_value=3, compressors=ZSTD, **kwargs
        )
        a[()] = 7
        assert rectizarr.open_array(str(tmp_path / f"i{sharded}.zarr"))[()] == 7
        s = rectizarr.create_array(
            str(tmp_path / f"s{sharded}.zarr"), shape=(), dtype=str, compressors=ZSTD, **kwargs
        )
        s[()] = "hé"
        assert rectizarr.open_array(str(tmp_path / f"s{sharded}.zarr"))[()] == "hé"
    t = rectizarr.create_array(str(tmp_path / "t.zarr"), shape=(5,), dtype=str, chunks=(2,), compressors=ZSTD)
    t[:] = np.array(["a", "bé", "", "x", "y"])
    assert rectizarr.open_array(str(tmp_path / "t.zarr"))[:].tolist() == ["a", "bé", "", "x", "y"]


def test_decode_into_checks_sizes() -> None:
    raw = np.arange(100, dtype="<u2").tobytes()
    for codec in (ZstdCodec(1, False), BloscCodec("lz4", 5, "shuffle", 2, 0)):
        encoded = codec.encode(raw)
        out = np.zeros(200, dtype=np.uint8)
        assert codec.decode_into(encoded, out) and out.tobytes() == raw
        assert not codec.decode_into(encoded, np.zeros(300, dtype=np.uint8))  # would be filled in part
        assert not codec.decode_into(encoded[:-3], np.zeros(200, dtype=np.uint8))  # truncated
        assert not codec.decode_into(b"not a frame at all", np.zeros(200, dtype=np.uint8))


def test_dense_shard_only_for_back_to_back_layouts() -> None:
    store = MemoryStore()
    a = rectizarr.create_array(
        store, shape=(8, 8), dtype="<u2", shards=(4, 8), chunks=(2, 2), compressors=[], fill_value=0
    )
    data = np.arange(64, dtype="<u2").reshape(8, 8) + 1
    a[...] = data
    codec = a.pipeline.sharding
    assert codec is not None
    shard = store.get("c/0/0")
    assert shard is not None
    block = codec.dense(shard, (4, 8), np.dtype("<u2"), key="c/0/0")
    assert block is not None and block.shape == (2, 4, 2, 2)
    np.testing.assert_array_equal(block.transpose(0, 2, 1, 3).reshape(4, 8), data[:4])
    a[0:2, 0:2] = 0  # an empty inner chunk: not stored, so no dense layout
    shard = store.get("c/0/0")
    assert shard is not None and codec.dense(shard, (4, 8), np.dtype("<u2"), key="c/0/0") is None
    expected = data.copy()
    expected[0:2, 0:2] = 0
    np.testing.assert_array_equal(a[...], expected)


def test_large_rectilinear_grids_split_in_one_pass_parse_as_the_general_path_does() -> None:
    edges = [int(e) for e in np.random.default_rng(3).integers(1, 9, size=3000)]
    shape = (sum(edges), 40)
    config: dict[str, Any] = {"kind": "inline", "chunk_shapes": [edges, [[8, 5]]]}
    grid = {"name": "rectilinear", "configuration": config}
    raw = msgspec.Raw(msgspec.json.encode(grid))
    assert len(raw) > 4096
    fast, general = parse_chunk_grid(raw, shape), parse_chunk_grid(grid, shape)
    assert fast.kind == general.kind == "rectilinear" and fast.dims == general.dims
    assert (
        parse_chunk_grid(msgspec.Raw(msgspec.json.encode({**grid, "must_understand": False})), shape).dims
        == general.dims
    )
    bad = [
        ({**grid, "extra": 1}, "$.chunk_grid.extra"),
        ({**grid, "configuration": {**config, "other": 1}}, "$.chunk_grid.configuration.other"),
        ({**grid, "configuration": {**config, "kind": 7}}, "$.chunk_grid.configuration.kind"),
        ({**grid, "name": "rectilinear2"}, "$.chunk_grid.name"),
    ]
    for doc, where in bad:
        with pytest.raises(rectizarr.RectizarrError, match=where.replace("$", r"\$").replace(".", r"\.")):
            parse_chunk_grid(msgspec.Raw(msgspec.json.encode(doc)), shape)
    with pytest.raises(MetadataError, match="less than the extent"):
        parse_chunk_grid(raw, (shape[0] + 1, 40))


def test_rle_edges_from_raw_json_match_the_general_parser() -> None:
    rng = random.Random(2)
    for _ in range(3000):
        items: list[Any] = []
        for _ in range(rng.randint(1, 20)):
            r = rng.random()
            if r < 0.5:
                items.append(rng.randint(0, 9))
            elif r < 0.9:
                items.append([rng.randint(0, 9), rng.randint(0, 5)])
            elif r < 0.95:
                items.append([rng.randint(1, 9)] * rng.choice([1, 3]))
            else:
                items.append(2**64 + rng.randint(0, 9))
        raw = msgspec.json.encode(items)
        if rng.random() < 0.5:
            raw = raw.replace(b",", b", ").replace(b"[", b"[ ")
        try:
            want = expand_rle(items, "$")
        except Exception:
            want = None
        got = fast_rle_runs(msgspec.Raw(raw), "$")
        if got is not None:  # None: the general parser decides (and names the offending item)
            assert want is not None and np.array_equal(np.repeat(*got), want), items
    for raw in [b"16", b"[]", b"[[]]", b"[[1,2],[3]]", b"[[[1]]]", b"[1.5]", b'["a"]', b"[-1]"]:
        assert fast_rle_runs(msgspec.Raw(raw), "$") is None
    values, counts = fast_rle_runs(msgspec.Raw(b"[1, [2, 3], 4]"), "$")  # type: ignore[misc]
    assert (values.tolist(), counts.tolist()) == ([1, 2, 4], [1, 3, 1])
