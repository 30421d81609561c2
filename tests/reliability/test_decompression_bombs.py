"""A few KiB of crafted chunk data that claims or inflates to gigabytes is refused with a ``CodecError``
naming the key, before the memory is taken: every bytes -> bytes decode is bounded by what a valid chunk
of the array can hold."""

from __future__ import annotations

import gzip
import json
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.errors import CodecError, RectizarrError
from rectizarr.stores import MemoryStore, ZipStore
from tests.memory import least_peak

MiB = 1 << 20
GZIP = [{"name": "gzip", "configuration": {"level": 1}}]
ZSTD = [{"name": "zstd", "configuration": {"level": 1, "checksum": False}}]
BLOSC = [{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "noshuffle", "typesize": 1,
                                            "blocksize": 0}}]


def array(compressors: list[dict[str, Any]], **kw: Any) -> tuple[MemoryStore, Any]:
    s = MemoryStore()
    a = rectizarr.create_array(s, shape=(64, 64), dtype="u1", chunks=(32, 32), compressors=compressors,
                               fill_value=0, **kw)
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
    b = rectizarr.create_array(sharded_store, shape=(64, 64), dtype="u1", chunks=(16, 16), shards=(32, 32),
                               compressors=compressors, fill_value=0)
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
        zf.writestr("zarr.json", json.dumps({
            "zarr_format": 3, "node_type": "array", "shape": [8], "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0, "codecs": [{"name": "bytes"}]}))
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
        for attempt in (lambda: store.get("c/0"), lambda: store.get("c/0", (-4, None)),
                        lambda: store.get("c/0", (2, None)), lambda: a[:]):
            with pytest.raises(RectizarrError, match="c/0"):
                attempt()

    assert least_peak(read, 16 * MiB) < 16 * MiB  # not the 64 MiB the entry inflates to
    if declared > MiB:  # a range well short of the declared end reads only what it asks for (no CRC yet)
        assert store.get("c/0", (0, 2)) == bytes(2)
    assert store.get("c/1") == b"\1\2\3\4"
    np.testing.assert_array_equal(a[4:], [1, 2, 3, 4])
    store.close()
