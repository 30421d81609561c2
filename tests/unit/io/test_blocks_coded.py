"""Dense reads of many small *coded* chunk files of a local directory (``rectizarr.io.blocks``: each file read
into a slot of a staging buffer with one ``readv``, each batch decoded with one batch call): they equal numpy
for zstd, blosc and gzip, with chunks missing (one by one, or a whole directory), a value larger than its
slot, keys without a directory (v2's ``.`` separator) and two threads reading at once; an invalid chunk is a
``CodecError`` naming its key. A spy on ``read_block`` shows that the batch path took each read."""

from __future__ import annotations

import gzip
import re
import shutil
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.errors import CodecError
from rectizarr.stores import LocalStore
from tests.spies import block_calls

CODECS: dict[str, Any] = {
    "zstd": {"name": "zstd", "configuration": {"level": 1}},
    "zstd-checksum": {"name": "zstd", "configuration": {"level": 3, "checksum": True}},
    "blosc": {
        "name": "blosc",
        "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 2, "blocksize": 0},
    },
    "gzip": {"name": "gzip", "configuration": {"level": 1}},
}
SHAPE, CHUNKS = (45, 203), (4, 8)  # 12 x 26 chunks of 64 bytes, the last row and column partial


def make(tmp_path: Path, codec: str, **kw: Any) -> tuple[Any, np.ndarray]:
    data = np.random.default_rng(1).integers(0, 600, SHAPE, dtype=np.uint16)
    data[:8, :64] = 3  # a few chunks that compress well
    a = rectizarr.create_array(
        LocalStore(tmp_path / "a"),
        shape=SHAPE,
        dtype="<u2",
        chunks=CHUNKS,
        fill_value=7,
        compressors=CODECS[codec],
        **kw,
    )
    a[...] = data
    return rectizarr.open_array(LocalStore(tmp_path / "a"), mode="r"), data


SELECTIONS: list[Any] = [np.s_[...], np.s_[3:41, 5:200], np.s_[8:, :60], np.s_[:13, 50:]]  # >= 64 chunks each


@pytest.mark.parametrize("codec", list(CODECS))
def test_equal_numpy_with_missing_chunks(tmp_path: Path, codec: str) -> None:
    a, data = make(tmp_path, codec)
    root, expected = tmp_path / "a" / "c", data.copy()
    for i, j in [
        (0, 0),
        (1, 5),
        (2, 25),
        (11, 0),
        (11, 25),
    ]:  # the first of a chunk row, the last, inner ones
        (root / str(i) / str(j)).unlink()
        expected[4 * i : 4 * i + 4, 8 * j : 8 * j + 8] = 7
    shutil.rmtree(root / "4")  # a whole row of chunks
    expected[16:20] = 7
    with block_calls() as calls:
        for sel in SELECTIONS:
            np.testing.assert_array_equal(a[sel], expected[sel])
    assert calls == [True] * len(SELECTIONS)


def _big_gzip(value: bytes, comment: int) -> bytes:
    """The data of a gzip member in another member whose header carries a long comment (still one valid
    member, larger than any slot)."""
    body = zlib.compressobj(1, zlib.DEFLATED, -15)
    raw = gzip.decompress(value)
    deflated = body.compress(raw) + body.flush()
    header = b"\x1f\x8b\x08\x10" + b"\0" * 4 + b"\x00\xff" + b"c" * comment + b"\0"  # FCOMMENT
    return header + deflated + zlib.crc32(raw).to_bytes(4, "little") + len(raw).to_bytes(4, "little")


def test_a_value_larger_than_its_slot(tmp_path: Path) -> None:
    a, data = make(tmp_path, "gzip")
    for key in ("c/2/3", "c/2/4", "c/9/0"):
        path = tmp_path / "a" / key
        path.write_bytes(_big_gzip(path.read_bytes(), 5000))
        assert path.stat().st_size > 5000
    with block_calls() as calls:
        for sel in SELECTIONS:
            np.testing.assert_array_equal(a[sel], data[sel])
    assert calls == [True] * len(SELECTIONS)


@pytest.mark.parametrize("codec", ["zstd", "blosc", "gzip"])
@pytest.mark.parametrize("bad", [b"", b"\0" * 10, b"\x28\xb5\x2f\xfd" + b"\0" * 60, None])
def test_an_invalid_chunk_names_its_key(tmp_path: Path, codec: str, bad: bytes | None) -> None:
    a, _ = make(tmp_path, codec)
    path = tmp_path / "a" / "c" / "5" / "7"
    value = path.read_bytes()
    path.write_bytes(value[: len(value) // 2] if bad is None else bad)  # None: cut short
    with block_calls() as calls, pytest.raises(CodecError, match=re.escape("'c/5/7'")):
        a[...]
    assert calls == ["CodecError"]
    np.testing.assert_array_equal(a[:20], make(tmp_path / "again", codec)[1][:20])  # other batches still read


@pytest.mark.parametrize("codec", ["zstd", "blosc"])
def test_keys_without_a_directory(tmp_path: Path, codec: str) -> None:
    a, data = make(
        tmp_path, codec, chunk_key_encoding={"name": "default", "configuration": {"separator": "."}}
    )
    (tmp_path / "a" / "c.3.1").unlink()
    expected = data.copy()
    expected[12:16, 8:16] = 7
    with block_calls() as calls:
        np.testing.assert_array_equal(a[...], expected)
    assert calls == [True]


@pytest.mark.parametrize("codec", ["zstd", "blosc"])
def test_two_threads_reading(tmp_path: Path, codec: str) -> None:
    a, data = make(tmp_path, codec)
    barrier = threading.Barrier(2)

    def read(i: int) -> bool:
        barrier.wait()
        return all(
            np.array_equal(a[SELECTIONS[(i + k) % 4]], data[SELECTIONS[(i + k) % 4]]) for k in range(8)
        )

    with block_calls() as calls, ThreadPoolExecutor(2) as pool:
        assert all(pool.map(read, [0, 1]))
    assert calls == [True] * 16


def test_special_files_and_a_growing_value_in_read_into(tmp_path: Path) -> None:
    """``LocalStore.read_into`` over several directories: a value that fits is taken from one read, one
    larger than its view says so (view size + 1), and a directory or a missing directory is missing."""
    s = LocalStore(tmp_path / "s")
    s.set_many({"d/0": b"abc", "d/1": b"x" * 20, "e/0": b"", "e/1": b"yz", "top": b"t"})
    (tmp_path / "s" / "e" / "sub").mkdir()
    views = [memoryview(bytearray(8)) for _ in range(8)]
    got = s.read_into(["d/0", "d/1", "e/0", "e/sub", "e/1", "f/0", "top", "d/9"], views)
    assert got == [3, 9, 0, -1, 2, -1, 1, -1]
    assert bytes(views[0][:3]) == b"abc" and bytes(views[1]) == b"x" * 8 and bytes(views[4][:2]) == b"yz"
