"""The sharding codec: binary layout, index validation, divisibility rules, primitives, index cache."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from rectizarr._util import MAX_U64
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.build import build_pipeline
from rectizarr.codecs.pipeline import CodecPipeline, ShardingCodec
from rectizarr.codecs.shard_index import ShardIndex, is_fill
from rectizarr.core.codec_meta import parse_codecs
from rectizarr.errors import ChecksumError, CodecError, MetadataError
from rectizarr.io.cache import ShardIndexCache
from rectizarr.stores import MemoryStore

LE = {"name": "bytes", "configuration": {"endian": "little"}}
BE = {"name": "bytes", "configuration": {"endian": "big"}}
CRC_INDEX = [LE, {"name": "crc32c"}]


def sharding_json(
    chunk_shape: list[int],
    codecs: list[Any] | None = None,
    index_codecs: list[Any] | None = None,
    index_location: str = "end",
) -> dict[str, Any]:
    return {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": chunk_shape,
            "codecs": codecs if codecs is not None else [LE],
            "index_codecs": index_codecs if index_codecs is not None else CRC_INDEX,
            "index_location": index_location,
        },
    }


def pipeline(codecs: list[Any], dtype: Any, edges: list[list[int]]) -> CodecPipeline:
    return build_pipeline(parse_codecs(codecs), np.dtype(dtype), [np.array(e) for e in edges])


def sharding(codecs: list[Any], dtype: Any, edges: list[list[int]]) -> ShardingCodec:
    codec = pipeline(codecs, dtype, edges).sharding
    assert codec is not None
    return codec


def spec(shape: tuple[int, ...], dtype: Any, fill: Any = 0, key: str = "c/0/0") -> ChunkSpec:
    dt = np.dtype(dtype)
    return ChunkSpec(shape, dt, np.array(fill, dtype=dt), key)


def manual_shard(
    codec: ShardingCodec,
    shard_shape: tuple[int, ...],
    chunks: Mapping[tuple[int, ...], bytes],
    order: Sequence[tuple[int, ...]],
    gap: bytes = b"",
) -> bytes:
    """A shard with inner chunks at ``order`` positions, ``gap`` bytes before each one."""
    cps = codec.chunks_per_shard(shard_shape)
    table = np.full((*cps, 2), MAX_U64, dtype=np.uint64)
    n = codec.index_nbytes(shard_shape)
    pos = n if codec.index_location == "start" else 0
    body = b""
    for c in order:
        body += gap
        pos += len(gap)
        table[c] = (pos, len(chunks[c]))
        body += chunks[c]
        pos += len(chunks[c])
    index = codec.index_codecs.encode(
        table, ChunkSpec((*cps, 2), np.dtype(np.uint64), np.array(0, np.uint64))
    )
    return index + body if codec.index_location == "start" else body + index


# ------------------------------------------------------------------------------------ known layouts


def test_start_index_first_offset_is_index_size() -> None:
    p = pipeline([sharding_json([2, 2], index_location="start")], "uint16", [[4], [4]])
    data = np.arange(16, dtype=np.uint16).reshape(4, 4)
    shard = p.encode(data, spec((4, 4), "uint16"))
    codec = p.sharding
    assert codec is not None
    assert codec.index_nbytes((4, 4)) == 68 and len(shard) == 68 + 4 * 8
    index = codec.decode_index(shard[:68], (4, 4), shard_nbytes=len(shard), key="k")
    assert index.offsets.tolist() == [[68, 76], [84, 92]]
    assert index.nbytes.tolist() == [[8, 8], [8, 8]]
    assert shard[68:76] == data[:2, :2].tobytes()
    assert codec.index_byte_range((4, 4)) == (0, 68)
    assert np.array_equal(p.decode(shard, spec((4, 4), "uint16")), data)


def test_zero_dimensional_shard_bytes() -> None:
    p = pipeline([sharding_json([])], "int32", [])
    shard = p.encode(np.array(42, dtype=np.int32), spec((), "int32"))
    assert shard.hex() == "2a000000" + "0000000000000000" + "0400000000000000" + "87186d63"
    assert p.decode(shard, spec((), "int32")).tolist() == 42


def test_rectilinear_shards_have_their_own_index_sizes() -> None:
    codec = sharding([sharding_json([2, 3])], "uint8", [[4, 8, 4], [6]])
    assert codec.index_nbytes((4, 6)) == 68 and codec.index_nbytes((8, 6)) == 132
    assert codec.chunks_per_shard((8, 6)) == (4, 2)
    for shape, size in [((4, 6), 92), ((8, 6), 180)]:
        data = np.arange(np.prod(shape), dtype=np.uint8).reshape(shape) + 1
        shard = codec.encode(data, spec(shape, "uint8"))
        assert len(shard) == size
        assert np.array_equal(codec.decode(shard, spec(shape, "uint8")), data)
    assert codec.index_byte_range((8, 6)) == (-132, None)


def test_big_endian_index() -> None:
    p = pipeline([sharding_json([2], index_codecs=[BE])], "uint8", [[4]])
    shard = p.encode(np.array([1, 2, 3, 4], dtype=np.uint8), spec((4,), "uint8"))
    assert (
        shard.hex()
        == "01020304" + "0000000000000000" + "0000000000000002" + "0000000000000002" + "0000000000000002"
    )
    assert p.decode(shard, spec((4,), "uint8")).tolist() == [1, 2, 3, 4]


# ------------------------------------------------------------------------------- order, gaps, empties


@pytest.mark.parametrize("location", ["start", "end"])
@pytest.mark.parametrize(
    "order",
    [
        [(1, 1), (1, 0), (0, 1), (0, 0)],  # reversed
        [(0, 0), (1, 0), (0, 1), (1, 1)],  # Morton (zarr-python)
    ],
)
def test_any_physical_order_and_gaps_decode(location: str, order: list[tuple[int, int]]) -> None:
    codec = sharding([sharding_json([2, 2], index_location=location)], "uint16", [[4], [4]])
    data = np.arange(16, dtype=np.uint16).reshape(4, 4)
    chunks: dict[tuple[int, ...], bytes] = {
        (i, j): data[2 * i : 2 * i + 2, 2 * j : 2 * j + 2].tobytes() for i in range(2) for j in range(2)
    }
    for gap in [b"", b"\xee" * 5]:
        shard = manual_shard(codec, (4, 4), chunks, order, gap)
        assert np.array_equal(codec.decode(shard, spec((4, 4), "uint16")), data)


def test_missing_inner_chunks_read_as_fill_and_are_not_written() -> None:
    codec = sharding([sharding_json([2, 2])], "float32", [[4], [4]])
    data = np.full((4, 4), np.nan, dtype=np.float32)
    data[2:, :2] = 1.5
    shard = codec.encode(data, spec((4, 4), "float32", np.nan))
    index, views = codec.split(shard, (4, 4), key="k")
    assert list(views) == [(1, 0)]
    assert index.present().tolist() == [[False, False], [True, False]]
    assert index.byte_range((0, 0)) is None and index.byte_range((1, 0)) == (0, 16)
    out = codec.decode(shard, spec((4, 4), "float32", np.nan))
    assert np.array_equal(out, data, equal_nan=True)


def test_all_empty_index_decodes_as_fill() -> None:
    codec = sharding([sharding_json([2])], "int8", [[4]])
    shard = manual_shard(codec, (4,), {}, [])
    assert codec.decode(shard, spec((4,), "int8", -1)).tolist() == [-1] * 4
    assert codec.encode(np.full(4, -1, np.int8), spec((4,), "int8", -1)) == shard


def test_overlapping_and_index_pointing_ranges_are_accepted() -> None:
    codec = sharding([sharding_json([1], index_location="start")], "uint8", [[2]])
    table = np.array([[36, 1], [36, 1]], dtype="<u8")  # both point at the byte after the 36-byte index
    shard = codec.index_codecs.encode(table, spec((2, 2), "uint64")) + b"\x07"
    assert codec.decode(shard, spec((2,), "uint8")).tolist() == [7, 7]
    table = np.array([[0, 1], [1, 1]], dtype="<u8")  # inside the index itself
    shard = codec.index_codecs.encode(table, spec((2, 2), "uint64")) + b"\x07"
    assert codec.decode(shard, spec((2,), "uint8")).tolist() == [table.tobytes()[0], table.tobytes()[1]]


# ---------------------------------------------------------------------------------- malformed shards


MAX = MAX_U64


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ((MAX, 0), "half an empty marker"),
        ((0, MAX), "half an empty marker"),
        ((MAX, 4), "half an empty marker"),
        ((0, 0), "zero length"),
        ((33, 4), "ends past"),
        ((MAX - 1, 4), "ends past"),
        ((0, MAX - 1), "ends past"),
    ],
)
def test_malformed_index_entries(entry: tuple[int, int], message: str) -> None:
    codec = sharding([sharding_json([2], index_codecs=[LE])], "uint8", [[4]])
    table = np.array([[0, 2], list(entry)], dtype=np.uint64)
    shard = b"\x01\x02\x03\x04" + codec.index_codecs.encode(table, spec((2, 2), "uint64"))
    with pytest.raises(CodecError, match=message) as info:
        codec.decode(shard, spec((4,), "uint8", key="c/5"))
    assert info.value.key == "c/5" and info.value.codec == "sharding_indexed"


def test_index_overflow_without_known_shard_size() -> None:
    codec = sharding([sharding_json([2], index_codecs=[LE])], "uint8", [[2]])
    raw = np.array([[MAX - 1, 5]], dtype="<u8").tobytes()
    with pytest.raises(CodecError, match="overflows"):
        codec.decode_index(raw, (2,), shard_nbytes=None, key="k")
    ok = codec.decode_index(np.array([[10, 5]], dtype="<u8").tobytes(), (2,), shard_nbytes=None, key="k")
    assert ok.byte_range((0,)) == (10, 5)


@pytest.mark.parametrize("size", [0, 1, 19])
def test_short_shards_are_errors(size: int) -> None:
    codec = sharding([sharding_json([2])], "uint8", [[4]])
    with pytest.raises(CodecError, match="shorter than its 36-byte index"):
        codec.decode(b"\x00" * size, spec((4,), "uint8"))
    with pytest.raises(CodecError, match="expected 36"):
        codec.decode_index(b"\x00" * size, (4,), shard_nbytes=None, key="k")


def test_crc_protected_index_detects_corruption() -> None:
    codec = sharding([sharding_json([2])], "uint8", [[4]])
    shard = bytearray(codec.encode(np.arange(4, dtype=np.uint8) + 1, spec((4,), "uint8")))
    shard[-10] ^= 0x01
    with pytest.raises(ChecksumError):
        codec.decode(bytes(shard), spec((4,), "uint8"))


def test_inner_chunk_corruption_surfaces_as_codec_error() -> None:
    codec = sharding([sharding_json([2], codecs=[LE, {"name": "crc32c"}])], "uint8", [[4]])
    shard = bytearray(codec.encode(np.arange(4, dtype=np.uint8) + 1, spec((4,), "uint8")))
    shard[0] ^= 0x01
    with pytest.raises(ChecksumError):
        codec.decode(bytes(shard), spec((4,), "uint8"))


# ------------------------------------------------------------------------------------ validation


def test_variable_size_index_codecs_are_rejected() -> None:
    for extra in [
        {"name": "gzip", "configuration": {"level": 1}},
        {"name": "zstd", "configuration": {"level": 1}},
    ]:
        with pytest.raises(MetadataError, match="fixed-size") as info:
            pipeline([sharding_json([2], index_codecs=[LE, extra])], "uint8", [[4]])
        assert info.value.path == "$.codecs[0].configuration.index_codecs"


def test_index_codecs_follow_chain_rules() -> None:
    with pytest.raises(MetadataError, match="array->bytes") as info:
        pipeline([sharding_json([2], index_codecs=[{"name": "crc32c"}])], "uint8", [[4]])
    assert info.value.path == "$.codecs[0].configuration.index_codecs[0]"


def test_divisibility_is_checked_after_transpose() -> None:
    transpose = {"name": "transpose", "configuration": {"order": [2, 0, 1]}}
    edges = [[4], [6], [4]]  # seen by the sharding codec as (4, 4, 6)
    p = pipeline([transpose, sharding_json([2, 2, 3])], "int16", edges)
    data = np.arange(96, dtype=np.int16).reshape(4, 6, 4)
    s = spec((4, 6, 4), "int16")
    assert np.array_equal(p.decode(p.encode(data, s), s), data)
    with pytest.raises(MetadataError, match="dimension 1 is not divisible by the shard's inner chunk size 3"):
        pipeline([transpose, sharding_json([2, 3, 2])], "int16", edges)


def test_every_rectilinear_edge_must_divide_including_trailing() -> None:
    pipeline([sharding_json([2, 3])], "uint8", [[4, 8, 4], [6]])
    with pytest.raises(MetadataError, match="edge length 5 in dimension 0") as info:
        pipeline([sharding_json([2, 3])], "uint8", [[4, 8, 5], [6]])  # trailing edge past the extent
    assert info.value.path == "$.codecs[0]"
    with pytest.raises(MetadataError, match="2 dimensions but the shards it codes have 1"):
        pipeline([sharding_json([2, 3])], "uint8", [[4]])


def test_chunks_per_shard_rejects_mismatched_shapes() -> None:
    codec = sharding([sharding_json([2])], "uint8", [[4]])
    with pytest.raises(MetadataError, match="not a multiple"):
        codec.chunks_per_shard((5,))


def test_inner_chain_is_validated_for_the_dtype() -> None:
    with pytest.raises(MetadataError, match="endian") as info:
        pipeline([sharding_json([2], codecs=["bytes"])], "int32", [[4]])
    assert info.value.path == "$.codecs[0].configuration.codecs[0]"


# ---------------------------------------------------------------------------------- composition


def test_nested_sharding_round_trips() -> None:
    inner = sharding_json([2, 2], codecs=[LE, {"name": "gzip", "configuration": {"level": 1}}])
    p = pipeline([sharding_json([4, 4], codecs=[inner])], "int32", [[8], [8]])
    data = np.arange(64, dtype=np.int32).reshape(8, 8)
    data[:4, :4] = 0  # one empty outer-inner shard
    s = spec((8, 8), "int32")
    shard = p.encode(data, s)
    assert np.array_equal(p.decode(shard, s), data)
    codec = p.sharding
    assert codec is not None
    assert codec.split(shard, (8, 8), key="k")[0].present().tolist() == [[False, True], [True, True]]
    assert p.to_json()[0]["configuration"]["codecs"][0]["name"] == "sharding_indexed"


def test_vlen_utf8_inside_shards() -> None:
    p = pipeline([sharding_json([2], codecs=[{"name": "vlen-utf8"}])], object, [[6]])
    data = np.empty(6, dtype=object)
    data[:] = ["a", "", "héllo", "", "", "z"]
    s = spec((6,), object, "")
    shard = p.encode(data, s)
    assert p.decode(shard, s).tolist() == data.tolist()
    codec = p.sharding
    assert codec is not None
    assert codec.split(shard, (6,), key="k")[0].present().tolist() == [True, True, True]
    empty = np.array(["", "", "", "", "", ""], dtype=object)
    assert codec.split(p.encode(empty, s), (6,), key="k")[0].present().tolist() == [False, False, False]


def test_bytes_to_bytes_after_sharding_uses_the_whole_shard_path() -> None:
    p = pipeline([sharding_json([2]), {"name": "gzip", "configuration": {"level": 1}}], "uint16", [[4]])
    assert p.sharding is None and isinstance(p.array_bytes, ShardingCodec)
    data = np.array([1, 2, 3, 4], dtype=np.uint16)
    shard = p.encode(data, spec((4,), "uint16"))
    assert shard[:2] == b"\x1f\x8b"
    assert np.array_equal(p.decode(shard, spec((4,), "uint16")), data)


# ------------------------------------------------------------------------------------ primitives


def test_split_gives_zero_copy_views() -> None:
    codec = sharding([sharding_json([2])], "uint8", [[6]])
    shard = codec.encode(np.arange(6, dtype=np.uint8) + 1, spec((6,), "uint8"))
    index, views = codec.split(shard, (6,), key="k")
    assert list(views) == [(0,), (1,), (2,)]
    assert all(v.obj is shard for v in views.values())
    assert bytes(views[(1,)]) == b"\x03\x04"
    assert isinstance(index, ShardIndex)


def test_assemble_and_inner_coding() -> None:
    codec = sharding([sharding_json([2, 2], index_location="start")], "uint8", [[4], [4]])
    s = spec((4, 4), "uint8", 9)
    inner = codec.inner_spec(s)
    assert inner.shape == (2, 2) and inner.dtype == np.uint8 and inner.fill_value == 9
    assert codec.assemble((4, 4), {}) is None
    assert codec.assemble((4, 4), {(0, 0): b""}) is None
    chunk = np.array([[1, 2], [3, 4]], dtype=np.uint8)
    shard = codec.assemble(
        (4, 4), {(1, 1): codec.encode_inner(chunk, inner), (0, 1): memoryview(b"\x05" * 4)}
    )
    assert shard is not None and len(shard) == 68 + 8
    index, views = codec.split(shard, (4, 4), key="k")
    assert index.byte_range((0, 1)) == (68, 4) and index.byte_range((1, 1)) == (72, 4)
    assert np.array_equal(codec.decode_inner(views[(1, 1)], inner), chunk)
    out = codec.decode(shard, s)
    assert out[2:, 2:].tolist() == [[1, 2], [3, 4]] and out[:2, 2:].tolist() == [[5, 5], [5, 5]]
    assert (out[:, :2] == 9).all()
    with pytest.raises(CodecError, match="outside a shard"):
        codec.assemble((4, 4), {(2, 0): b"x"})
    with pytest.raises(CodecError, match="does not match"):
        codec.encode(np.zeros((2, 2), np.uint8), s)


def test_encoded_size_is_variable() -> None:
    p = pipeline([sharding_json([2])], "uint8", [[4]])
    assert p.encoded_size(spec((4,), "uint8")) is None


# -------------------------------------------------------------------------------------- is_fill


def f32(bits: int) -> np.ndarray:
    return np.array(bits, dtype=np.uint32).view(np.float32)


def test_is_fill_is_bitwise() -> None:
    nan0, nan1 = f32(0x7FC00000), f32(0x7FC00001)
    assert is_fill(np.full(3, nan0), nan0)
    assert not is_fill(np.full(3, nan1), nan0)  # the payload is kept (TensorStore, zarrs)
    assert not is_fill(np.array([-0.0, 0.0]), np.array(0.0))
    assert is_fill(np.zeros((2, 2)), np.array(0.0))
    assert is_fill(np.zeros(0, np.int8), np.array(5, np.int8))
    assert not is_fill(np.array([1, 0], np.int64), np.array(0, np.int64))


def test_is_fill_wide_and_structured_types() -> None:
    c = np.full(4, complex(np.nan, 1.0))
    assert is_fill(c, np.array(complex(np.nan, 1.0)))
    c[1] = complex(np.nan, -1.0)
    assert not is_fill(c, np.array(complex(np.nan, 1.0)))
    rec = np.zeros(3, dtype=[("a", "u1"), ("b", "<f8")])
    assert is_fill(rec, np.zeros((), rec.dtype))
    rec["a"][2] = 1
    assert not is_fill(rec, np.zeros((), rec.dtype))
    strided = np.zeros((4, 4), np.uint16)[:, ::2]
    assert is_fill(strided, np.array(0, np.uint16))


def test_is_fill_objects_compare_by_value() -> None:
    data = np.array(["", ""], dtype=object)
    assert is_fill(data, np.array("", dtype=object))
    data[1] = "x"
    assert not is_fill(data, np.array("", dtype=object))
    assert is_fill(np.array([b"a"], dtype=object), np.array(b"a", dtype=object))


# ---------------------------------------------------------------------------------- index cache


def small_index(value: int) -> ShardIndex:
    return ShardIndex(np.array([value], np.uint64), np.array([1], np.uint64))


S = MemoryStore()  # the store the cache entries below belong to


def test_index_cache_versions_and_lru() -> None:
    cache = ShardIndexCache(maxsize=2)
    a, b, c = small_index(1), small_index(2), small_index(3)
    cache.put(S, "a", "v1", a)
    assert cache.get(S, "a", "v1") is a
    assert cache.get(S, "a", "v2") is None  # rewritten externally: never stale
    assert cache.get(S, "missing", "v1") is None
    cache.put(S, "b", 7, b)
    cache.get(S, "a", "v1")  # a is now most recent
    cache.put(S, "c", (1, 2), c)
    assert cache.get(S, "b", 7) is None and cache.get(S, "a", "v1") is a and cache.get(S, "c", (1, 2)) is c
    cache.invalidate(S, ["a"])
    cache.invalidate(S, ["never-there"])
    assert cache.get(S, "a", "v1") is None
    cache.put(S, "c", "new", a)
    assert cache.get(S, "c", (1, 2)) is None and cache.get(S, "c", "new") is a
    assert cache.get(MemoryStore(), "c", "new") is None  # another store: another entry


def test_index_cache_is_thread_safe() -> None:
    cache = ShardIndexCache(maxsize=64)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(500):
                key = f"k{(i * 7 + t) % 100}"
                cache.put(S, key, i, small_index(i))
                hit = cache.get(S, key, i)
                assert hit is None or int(hit.offsets[0]) == i
                if i % 13 == 0:
                    cache.invalidate(S, [key])
        except BaseException as exc:  # collected for the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(cache) <= 64
