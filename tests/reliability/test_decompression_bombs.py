"""A few KiB of crafted chunk data that claims or inflates to gigabytes is refused with a ``CodecError``
naming the key, before the memory is taken: every bytes -> bytes decode is bounded by what a valid chunk
of the array can hold. Zip entries are read no further than what their reader can take (a chunk, a shard,
a metadata document): a ``StoreError`` naming the key."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.errors import CodecError, RectizarrError, StoreError
from rectizarr.stores import MemoryStore, ZipStore, max_document_bytes, set_max_document_bytes
from tests.memory import least_peak
from tests.reliability._bombs import array_doc, deflate_zeros, run_limited, write_zip

MiB = 1 << 20
GZIP = [{"name": "gzip", "configuration": {"level": 1}}]
ZSTD = [{"name": "zstd", "configuration": {"level": 1, "checksum": False}}]
BLOSC = [
    {
        "name": "blosc",
        "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "noshuffle", "typesize": 1, "blocksize": 0},
    }
]


def array(compressors: list[dict[str, Any]], **kw: Any) -> tuple[MemoryStore, Any]:
    s = MemoryStore()
    a = rectizarr.create_array(
        s, shape=(64, 64), dtype="u1", chunks=(32, 32), compressors=compressors, fill_value=0, **kw
    )
    a[...] = np.arange(64 * 64, dtype=np.uint64).reshape(64, 64).astype("u1")
    return s, a


def test_gzip_bomb_stops_at_the_chunk_size() -> None:
    s, a = array(GZIP)
    bomb = gzip.compress(b"\0" * (200 * MiB), compresslevel=9)  # ~200 KiB inflating to 200 MiB
    assert len(bomb) < MiB
    s.set("c/1/0", bomb)

    def read() -> None:
        with pytest.raises(CodecError, match="more than 1024 bytes") as info:
            a[32:, :32]
        assert "c/1/0" in str(info.value)

    assert least_peak(read, 4 * MiB) < 4 * MiB  # stopped at the limit, not after inflating everything
    np.testing.assert_array_equal(a[:32], np.arange(32 * 64, dtype=np.uint64).reshape(32, 64).astype("u1"))


def test_gzip_members_within_the_limit_still_decode() -> None:
    s, a = array(GZIP)
    chunk = np.arange(32 * 32, dtype=np.uint64).astype("u1")
    half = chunk.nbytes // 2
    s.set("c/0/1", gzip.compress(chunk[:half].tobytes()) + gzip.compress(chunk[half:].tobytes()))
    np.testing.assert_array_equal(a[:32, 32:].reshape(-1), chunk)
    s.set("c/0/1", gzip.compress(chunk.tobytes()) + gzip.compress(b"x"))  # one byte too many
    with pytest.raises(CodecError, match="more than 1024 bytes"):
        a[:32, 32:]


def zstd_header(content_size: int) -> bytes:
    """A zstd frame header declaring ``content_size`` (8-byte field, single segment) and one empty raw block."""
    return b"\x28\xb5\x2f\xfd" + bytes([0xE0]) + struct.pack("<Q", content_size) + (1).to_bytes(3, "little")


@pytest.mark.parametrize("claimed", [2 * 1024, 1 << 40])
def test_zstd_header_claiming_more_than_a_chunk(claimed: int) -> None:
    s, a = array(ZSTD)
    s.set("c/0/0", zstd_header(claimed))

    def read() -> None:
        with pytest.raises(CodecError, match="more than 1024 bytes") as info:
            a[:32, :32]
        assert "c/0/0" in str(info.value)

    assert least_peak(read, 4 * MiB) < 4 * MiB


def test_blosc_header_claiming_more_than_a_chunk() -> None:
    s, a = array(BLOSC)
    good = bytearray(s.get("c/0/0") or b"")
    good[4:8] = (1 << 31).to_bytes(4, "little")  # decoded size in the header
    s.set("c/0/0", bytes(good))
    with pytest.raises(CodecError, match="c/0/0"):
        a[:32, :32]


@pytest.mark.parametrize("compressors", [GZIP, ZSTD, BLOSC], ids=["gzip", "zstd", "blosc"])
def test_bounded_decoding_keeps_valid_data_readable(compressors: list[dict[str, Any]]) -> None:
    _, a = array(compressors)
    expected = np.arange(64 * 64, dtype=np.uint64).reshape(64, 64).astype("u1")
    np.testing.assert_array_equal(a[...], expected)
    np.testing.assert_array_equal(a.oindex[[3, 40], [1, 63]], expected[[3, 40]][:, [1, 63]])
    sharded_store = MemoryStore()
    b = rectizarr.create_array(
        sharded_store,
        shape=(64, 64),
        dtype="u1",
        chunks=(16, 16),
        shards=(32, 32),
        compressors=compressors,
        fill_value=0,
    )
    b[...] = expected
    np.testing.assert_array_equal(b[5:50, 7:60], expected[5:50, 7:60])


def test_variable_length_chunks_have_no_bound_but_still_decode() -> None:
    s = MemoryStore()
    a = rectizarr.create_array(s, shape=(4,), dtype="str", chunks=(2,), compressors=GZIP)
    a[...] = np.array(["a" * 5000, "b", "", "c" * 70000], dtype=object)
    assert [len(x) for x in a[...]] == [5000, 1, 0, 70000]


def test_chains_of_two_compressors_are_bounded_at_each_step() -> None:
    chain = ZSTD + GZIP + [{"name": "crc32c"}]  # bytes -> zstd -> gzip -> crc32c
    s, a = array(chain)
    expected = np.arange(64 * 64, dtype=np.uint64).reshape(64, 64).astype("u1")
    np.testing.assert_array_equal(a[...], expected)
    bomb = gzip.compress(b"\0" * (50 * MiB), compresslevel=9)  # the gzip step inflates far past its bound
    from rectizarr.codecs.crc32c import crc32c

    s.set("c/1/1", bomb + crc32c(bomb).to_bytes(4, "little"))
    with pytest.raises(CodecError, match="more than") as info:
        a[32:, 32:]
    assert "c/1/1" in str(info.value) and "gzip" in str(info.value)
    np.testing.assert_array_equal(a[:32, :32], expected[:32, :32])


def rle_frame(blocks: int, block_size: int, value: int) -> bytes:
    """A zstd frame that declares no content size, of ``blocks`` RLE blocks of ``block_size`` bytes."""
    head = b"\x28\xb5\x2f\xfd" + bytes([0x00, 7 << 3])  # no size field; window 2**17 (128 KiB blocks)
    body = b""
    for i in range(blocks):
        last = int(i == blocks - 1)
        body += (block_size << 3 | 1 << 1 | last).to_bytes(3, "little") + bytes([value])
    return head + body


def test_zstd_frame_without_a_size_is_bounded_while_decoding() -> None:
    s, a = array(ZSTD)
    s.set("c/0/1", rle_frame(1, 1024, 7))  # a valid chunk, its size not declared
    assert (a[:32, 32:] == 7).all()
    s.set("c/0/1", rle_frame(2000, 128 << 10, 0))  # 8 KiB of data, 250 MiB decoded

    def read() -> None:
        with pytest.raises(CodecError, match="more than 1024 bytes") as info:
            a[:32, 32:]
        assert "c/0/1" in str(info.value)

    assert least_peak(read, 4 * MiB) < 4 * MiB
    s.set("c/0/1", rle_frame(1, 1024, 7)[:-2])  # truncated: the usual error
    with pytest.raises(CodecError, match="c/0/1"):
        a[:32, 32:]


def zip_bomb(path: Path, inflated: int, declared: int) -> None:
    """A zip archive whose deflated entry ``c/0`` inflates to ``inflated`` zero bytes while its headers
    declare ``declared`` (a few hundred KiB on disk), beside a valid stored array."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(
            "zarr.json",
            json.dumps(
                {
                    "zarr_format": 3,
                    "node_type": "array",
                    "shape": [8],
                    "data_type": "uint8",
                    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
                    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                    "fill_value": 0,
                    "codecs": [{"name": "bytes"}],
                }
            ),
        )
        zf.writestr("c/1", b"\1\2\3\4")
        info = zipfile.ZipInfo("c/0")
        info.compress_type = zipfile.ZIP_DEFLATED
        with zf.open(info, "w") as f:
            for _ in range(inflated // MiB):
                f.write(bytes(MiB))
    raw = bytearray(path.read_bytes())
    # (signature, offset of the file size, of the name length, of the name): central and local headers
    for signature, size_at, len_at, name_at in ((b"PK\x01\x02", 24, 28, 46), (b"PK\x03\x04", 22, 26, 30)):
        start = raw.find(signature)
        while start >= 0:
            name_len = struct.unpack_from("<H", raw, start + len_at)[0]
            if raw[start + name_at : start + name_at + name_len] == b"c/0":
                struct.pack_into("<I", raw, start + size_at, declared)
            start = raw.find(signature, start + 4)
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("declared", [4, 4 << 20], ids=["declared-4", "declared-4MiB"])
def test_zip_entry_inflating_past_its_declared_size(tmp_path: Path, declared: int) -> None:
    path = tmp_path / "bomb.zip"
    zip_bomb(path, 64 * MiB, declared)
    assert path.stat().st_size < MiB
    store = ZipStore(path)
    a = rectizarr.open_array(store, mode="r")

    def read() -> None:
        for attempt in (
            lambda: store.get("c/0"),
            lambda: store.get("c/0", (-4, None)),
            lambda: store.get("c/0", (2, None)),
            lambda: a[:],
        ):
            with pytest.raises(RectizarrError, match="c/0"):
                attempt()

    assert least_peak(read, 16 * MiB) < 16 * MiB  # not the 64 MiB the entry inflates to
    if declared > MiB:  # a range well short of the declared end reads only what it asks for (no CRC yet)
        assert store.get("c/0", (0, 2)) == bytes(2)
    assert store.get("c/1") == b"\1\2\3\4"
    np.testing.assert_array_equal(a[4:], [1, 2, 3, 4])
    store.close()


# ---- issue 35: every bytes -> bytes codec bounded before or while decoding; zip entries read to a limit ----


def gzip_zeros(n: int) -> bytes:
    """A gzip member of ``n`` zero bytes (``n`` a multiple of 16 MiB), made in milliseconds (its trailer's
    CRC is not computed: a bounded read stops long before it)."""
    return (
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + deflate_zeros(n) + struct.pack("<II", 0, n & 0xFFFFFFFF)
    )


def lz4_zeros(n: int) -> bytes:
    import numcodecs

    return bytes(numcodecs.LZ4().encode(np.zeros(n, np.uint8)))


def numcodec(name: str, **configuration: Any) -> list[dict[str, Any]]:
    return [{"name": f"numcodecs.{name}", "configuration": configuration}]


EMPTY_ZSTD_FRAME = bytes.fromhex("28b52ffd2000010000")  # declares 0 bytes
LZMA2 = [{"id": lzma.FILTER_LZMA2, "preset": 1}]
NUMCODECS_BOMBS: dict[str, tuple[list[dict[str, Any]], Any]] = {
    # name: (compressors, the crafted value: 64 MiB of zeros or more, or a header claiming 2 GiB)
    "lz4": (numcodec("lz4", acceleration=1), lambda: lz4_zeros(64 * MiB)),
    "lz4-claim": (numcodec("lz4", acceleration=1), lambda: (2**31 - 1).to_bytes(4, "little") + bytes(16)),
    "zstd": (numcodec("zstd", level=1), lambda: rle_frame(500, 128 << 10, 0)),
    "zstd-empty-first-frame": (
        numcodec("zstd", level=1),
        lambda: EMPTY_ZSTD_FRAME + rle_frame(500, 128 << 10, 0),
    ),
    "zstd-sized-first-frame": (
        numcodec("zstd", level=1),
        lambda: zstd_frame(bytes(1000)) + rle_frame(500, 128 << 10, 0),
    ),
    "gzip": (numcodec("gzip", level=1), lambda: gzip_zeros(64 * MiB)),
    "blosc-claim": (
        numcodec("blosc", cname="zstd", clevel=1, shuffle=0, blocksize=0),
        lambda: (
            bytes([2, 1, 0, 1])
            + (2**31).to_bytes(4, "little")
            + bytes(4)
            + (32).to_bytes(4, "little")
            + bytes(16)
        ),
    ),
    "lzma-raw": (
        numcodec("lzma", format=lzma.FORMAT_RAW, check=-1, preset=None, filters=LZMA2),
        lambda: lzma.compress(bytes(16 * MiB), format=lzma.FORMAT_RAW, filters=LZMA2),
    ),
    "lzma": (numcodec("lzma"), lambda: lzma.compress(bytes(16 * MiB), preset=1)),
    "zlib": (numcodec("zlib", level=1), lambda: b"\x78\x01" + deflate_zeros(64 * MiB)),
    "bz2": (numcodec("bz2", level=1), lambda: bz2.compress(bytes(16 * MiB), 1)),
}


def zstd_frame(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor(write_content_size=True).compress(data)


@pytest.mark.parametrize("name", sorted(NUMCODECS_BOMBS))
def test_numcodecs_compressors_stop_at_the_chunk_size(name: str) -> None:
    """Every numcodecs ``bytes -> bytes`` compressor: a value claiming or inflating to far more than a
    chunk (1024 bytes) is refused with a CodecError naming the key, and at most the chunk's size is ever
    allocated (lz4: 263 KiB inflating to 64 MiB took 64 MiB, 1 GiB took 1.5 s to refuse; numcodecs'
    zstd, gzip and lzma in its raw format grew their buffers as long as data came; a zstd value whose
    first frame declares its size or none was decoded whole)."""
    compressors, make = NUMCODECS_BOMBS[name]
    s, a = array(compressors)
    expected = np.arange(64 * 64, dtype=np.uint64).reshape(64, 64).astype("u1")
    np.testing.assert_array_equal(a[...], expected)  # valid chunks still decode
    s.set("c/1/0", make())

    def read() -> None:
        with pytest.raises(CodecError, match="more than 1024 bytes") as info:
            a[32:, :32]
        assert "c/1/0" in str(info.value)

    assert least_peak(read, 4 * MiB) < 4 * MiB
    np.testing.assert_array_equal(a[:32], expected[:32])


@pytest.mark.parametrize("compressors", [ZSTD, numcodec("zstd", level=1)], ids=["zstd", "numcodecs.zstd"])
def test_zstd_values_of_several_frames_are_bounded_and_still_decode(
    compressors: list[dict[str, Any]],
) -> None:
    """Frames after the first count towards the bound (numcodecs decoded them all whatever the first one
    declared: 100 MiB for a chunk of 1 KiB); several valid frames still make one chunk."""
    s, a = array(compressors)
    chunk = (np.arange(1024) % 251).astype("u1").tobytes()
    s.set("c/0/1", zstd_frame(chunk[:1000]) + zstd_frame(chunk[1000:]))
    assert a[:32, 32:].reshape(-1).tobytes() == chunk
    s.set("c/0/1", EMPTY_ZSTD_FRAME + zstd_frame(chunk))
    assert a[:32, 32:].reshape(-1).tobytes() == chunk
    for bomb in (
        EMPTY_ZSTD_FRAME + rle_frame(800, 128 << 10, 0),
        zstd_frame(bytes(1000)) + rle_frame(800, 128 << 10, 0),
    ):
        s.set("c/0/1", bomb)

        def read() -> None:
            with pytest.raises(CodecError, match="more than 1024 bytes"):
                a[:32, 32:]

        assert least_peak(read, 4 * MiB) < 4 * MiB


def test_an_lzma_header_declaring_a_huge_dictionary_is_refused() -> None:
    """An lzma stream allocates the dictionary its header declares (4 GiB in a 1 KiB ``.lzma`` value: a raw
    MemoryError under a 2 GiB address-space limit): decoding runs with a memory limit of the chunk's size
    plus 65 MiB (numcodecs' largest preset uses 64 MiB), so the value is a CodecError naming the key."""
    s, a = array(numcodec("lzma"))
    value = bytearray(lzma.compress(bytes(1024), format=lzma.FORMAT_ALONE, preset=0))
    value[1:5] = (0xFFFFFFFF).to_bytes(4, "little")  # the dictionary size
    s.set("c/1/1", bytes(value))
    with pytest.raises(CodecError, match="c/1/1") as info:
        a[32:, 32:]
    assert "memory" in str(info.value).lower()
    s.set("c/1/1", lzma.compress(bytes(1024), preset=9 | lzma.PRESET_EXTREME))  # a 64 MiB dictionary: decodes
    assert not a[32:, 32:].any()


def test_a_compressor_after_sharding_is_bounded_by_the_shard() -> None:
    """``sharding_indexed`` then ``gzip``: the gzip step is bounded by what a shard can take (it had no
    bound: a shard's encoded size varies)."""
    s = MemoryStore()
    shard = {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [16, 16],
            "codecs": [{"name": "bytes"}],
            "index_location": "end",
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
        },
    }
    s.set(
        "zarr.json",
        json.dumps(
            {
                "zarr_format": 3,
                "node_type": "array",
                "shape": [64, 64],
                "data_type": "uint8",
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [32, 32]}},
                "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                "fill_value": 0,
                "codecs": [shard, {"name": "gzip", "configuration": {"level": 1}}],
            }
        ).encode(),
    )
    a = rectizarr.open_array(s, mode="r+")
    expected = np.arange(64 * 64, dtype=np.uint64).reshape(64, 64).astype("u1")
    a[...] = expected
    np.testing.assert_array_equal(a[...], expected)
    s.set("c/1/1", gzip_zeros(64 * MiB))

    def read() -> None:
        with pytest.raises(CodecError, match="more than 2184 bytes") as info:  # twice (4 x 256 + 68)
            a[32:, 32:]
        assert "c/1/1" in str(info.value)

    assert least_peak(read, 4 * MiB) < 4 * MiB


GiB = 1 << 30


@pytest.fixture(scope="module")
def gigabyte_bomb() -> bytes:
    return deflate_zeros(3 * GiB // 2)  # 1.5 MiB inflating to 1.5 GiB


@pytest.mark.parametrize("declared", ["honest", "lying"])
@pytest.mark.parametrize("entry", ["c/0", "zarr.json"])
def test_zip_entries_inflating_to_gigabytes_are_refused(
    tmp_path: Path, gigabyte_bomb: bytes, entry: str, declared: str
) -> None:
    """A 1.5 MiB deflated zip entry that inflates to 1.5 GiB, a chunk or the array's ``zarr.json``, read in
    a child under a 2 GiB address-space limit: a header that declares 1.5 GiB is refused before anything
    is inflated (it was inflated whole: a raw MemoryError at 1.5 GiB of resident memory, 10 s); one that
    declares less than the entry inflates to (3 bytes) is read to that size and refused for its CRC.
    StoreError naming the key, and no more resident memory than before the read."""
    path = tmp_path / "bomb.zip"
    size = 3 * GiB // 2 if declared == "honest" else 3
    doc = array_doc()
    entries = [("zarr.json", doc, len(doc), None), ("c/1", b"\1\2\3\4", 4, None)]
    entries = [e for e in entries if e[0] != entry] + [(entry, gigabyte_bomb, size, 0)]
    write_zip(path, entries)
    assert path.stat().st_size < 2 * MiB
    out, base, peak = run_limited(
        "from rectizarr.stores import ZipStore", f"rectizarr.open_array(ZipStore({str(path)!r}), mode='r')[:]"
    )
    assert out.startswith("ERR StoreError") and repr(entry) in out, out
    assert ("header's size" in out) == (declared == "honest"), out
    assert peak - base < 64 << 10, (base, peak)  # KiB
    if entry == "c/0":
        a = rectizarr.open_array(ZipStore(path), mode="r")
        assert a[4:].tolist() == [1, 2, 3, 4]


def test_zip_reads_are_limited_by_their_reader(tmp_path: Path) -> None:
    """A plain read of a ZipStore takes what the entry's header declares; the array's reads go through
    ``limited()`` views (a chunk: what a valid chunk or shard takes), metadata documents are limited by
    ``max_document_bytes()``."""
    path = tmp_path / "a.zip"
    with ZipStore(path, mode="w") as store:
        a = rectizarr.create_array(
            store,
            shape=(64, 64),
            dtype="u1",
            chunks=(8, 8),
            shards=(32, 32),
            compressors=GZIP,
            fill_value=0,
            attributes={"pad": "x" * 5000},
        )
        a[...] = 7
        store.set("big", bytes(MiB))
    store = ZipStore(path)
    assert (rectizarr.open_array(store, mode="r")[...] == 7).all()
    assert len(store.get("big") or b"") == MiB
    with pytest.raises(StoreError, match=r"'big'.* 1048576 bytes, more than the 1000 bytes a chunk"):
        store.limited(1000).get("big")
    assert store.limited(1000).get("big", (10, 1000)) == bytes(1000)  # a range within the limit
    assert store.limited(1000).get("zarr.json") == store.get("zarr.json")  # documents keep their own limit
    before = max_document_bytes()
    set_max_document_bytes(4096)
    try:
        with pytest.raises(StoreError, match=r"zarr\.json.*more than the 4096 bytes a metadata document"):
            rectizarr.open_array(store, mode="r")
    finally:
        set_max_document_bytes(before)
    store.close()
