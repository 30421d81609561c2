"""Corrupted chunks and shards: right data, or a CodecError naming the key; never wrong data when every
byte is covered by a checksum. Without one (plain ``bytes``, ``transpose``, zstd without ``checksum``,
blosc, a shard without crc32c in both chains) wrong-but-well-formed data can come back and is tolerated."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.reliability._corrupt import CHAINS, CHECKED, build, run_case

CASES_PER_CHAIN = 30


@pytest.mark.parametrize("chain", list(CHAINS))
def test_corruption_is_detected_or_harmless(chain: str) -> None:
    contents = build(chain)
    seen = Counter(run_case(chain, contents, random.Random(f"{chain}-{i}")) for i in range(CASES_PER_CHAIN))
    assert sum(seen.values()) == CASES_PER_CHAIN
    if chain in CHECKED:
        assert seen["wrong"] == 0
        assert seen["error"] > 0


def test_every_checked_chain_contains_a_checksum() -> None:
    for chain in CHECKED:
        assert any(word in chain for word in ("crc32c", "gzip", "checksum")), chain


def test_blosc_header_claiming_more_bytes_than_stored_is_an_error_not_a_crash() -> None:
    """Regression: c-blosc trusted the header's compressed size and read past the value (segfault)."""
    import rectizarr
    from rectizarr.errors import CodecError
    from rectizarr.stores import MemoryStore

    contents = build("bytes+blosc")
    key = "a/c/0/1"
    bad = bytearray(contents[key])
    bad[15] ^= 0x10  # compressed size (bytes 12..15) now 2**28 larger than the value
    store = MemoryStore()
    store.set_many({**contents, key: bytes(bad)})
    with pytest.raises(CodecError, match="blosc") as info:
        rectizarr.open_array(store, path="a", mode="r")[...]
    assert info.value.key == key


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_fixed_width_strings_that_are_not_code_points_are_a_codec_error(
    tmp_path: Path, zarr_format: int
) -> None:
    """A corrupt chunk of a NumPy 'U' array (no checksum) holding 0xFFFFFFFF: NumPy made the array, then
    raised SystemError on any use of the value (``a[0]``, ``tolist()``). Now a CodecError on the read."""
    import rectizarr
    from rectizarr.errors import CodecError

    a = rectizarr.create_array(
        str(tmp_path / "u"), shape=(2,), chunks=(2,), dtype="<U1", compressors=None, zarr_format=zarr_format
    )
    a[:] = ["a", "b"]
    key = "0" if zarr_format == 2 else "c/0"
    (tmp_path / "u" / key).write_bytes(b"\xff\xff\xff\xff" + "b".encode("utf-32-le"))
    b = rectizarr.open_array(str(tmp_path / "u"), mode="r")
    for read in (
        lambda: b[0],
        lambda: b[:],
        lambda: b.get_basic_selection(slice(None), out=np.empty(2, "<U1")),
    ):
        with pytest.raises(CodecError, match="not a Unicode code point"):
            read()


@pytest.mark.parametrize("location", ["start", "end"])
@pytest.mark.parametrize(("offset", "nbytes"), [(2**63, 10), (0, 2**63), (0, 2**36), (0, 2**30), (300, 200)])
def test_a_shard_index_pointing_past_a_local_shard_is_a_codec_error(
    tmp_path: Path, location: str, offset: int, nbytes: int
) -> None:
    """An index entry (with a valid crc32c) claiming bytes the shard file does not hold: a CodecError naming
    the shard, with memory bounded by the file. With the index at the end, the local read went to
    ``os.pread`` as asked: OverflowError, MemoryError for 64 GiB, and 1 GiB allocated for 1 GiB."""
    import struct

    import google_crc32c

    import rectizarr
    from rectizarr.errors import CodecError
    from tests.memory import least_peak

    path = tmp_path / "a"
    a = rectizarr.create_array(
        str(path), shape=(20, 30), dtype="i4", shards=(10, 14), chunks=(5, 7), index_location=location
    )
    a[...] = np.arange(600, dtype="i4").reshape(20, 30)
    shard = path / "c" / "0" / "0"
    data, size = shard.read_bytes(), 16 * 4 + 4  # 2 x 2 inner chunks, then the crc32c
    index = bytearray(data[-size:] if location == "end" else data[:size])
    struct.pack_into("<QQ", index, 0, offset, nbytes)
    index[-4:] = struct.pack("<I", google_crc32c.value(bytes(index[:-4])))
    shard.write_bytes(data[:-size] + bytes(index) if location == "end" else bytes(index) + data[size:])
    b = rectizarr.open_array(str(path), mode="r")

    def read() -> None:
        with pytest.raises(CodecError) as info:
            b[0:1, 0:1]
        assert info.value.key == "c/0/0"

    assert least_peak(read, 4 << 20) < 4 << 20
    np.testing.assert_array_equal(b[10:, :], np.arange(600, dtype="i4").reshape(20, 30)[10:, :])


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_shrink_meeting_a_corrupt_shard_clears_the_others_and_says_so(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    """A shrink whose clean-up meets one corrupt shard (its index checksum broken) still clears every other
    shard reaching past the new end, then raises a CodecError saying the array was resized and which shard
    was left. It stopped at the corrupt one: a healthy shard showed its old values after growing again."""
    import rectizarr
    from rectizarr.errors import CodecError

    store: Any = str(tmp_path / "a") if where == "local" else request.getfixturevalue("obstore_store")
    a = rectizarr.create_array(
        store, shape=(20, 28), dtype="i4", shards=(10, 14), chunks=(5, 7), compressors=None
    )
    a[...] = np.arange(560, dtype="i4").reshape(20, 28) + 1
    raw = a.store.get("c/0/0")
    a.store.set("c/0/0", raw[:-1] + bytes([raw[-1] ^ 1]))  # the crc32c of its index
    with pytest.raises(CodecError, match="resized, but 1 chunk") as info:
        rectizarr.open_array(store, mode="r+").resize((7, 28))
    assert info.value.key == "c/0/0"
    b = rectizarr.open_array(store, mode="r+")
    assert b.shape == (7, 28)
    b.resize((20, 28))
    assert b[7:, 14:].tolist() == np.zeros((13, 14), "i4").tolist()  # the healthy shard c/0/1 was cleared
