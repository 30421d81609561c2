"""zlib, bz2 and lzma (v2 compressors, ``numcodecs.*`` in v3) on the standard library: numcodecs' bytes when
encoding, numcodecs' streams decoded, decoding bounded by what the chunk can hold (a bomb is refused without
inflating it), bad levels refused when the chain is built."""

from __future__ import annotations

import zlib
from pathlib import Path

import numcodecs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rectizarr
from rectizarr.codecs.stdlib import stdlib_codec
from tests.strategies import examples

PEERS = [
    ("zlib", {"level": 3}, numcodecs.Zlib(3)),
    ("bz2", {"level": 9}, numcodecs.BZ2(9)),
    ("lzma", {"format": 1, "check": -1, "preset": None, "filters": None}, numcodecs.LZMA()),
]


@given(raw=st.binary(max_size=3000), which=st.sampled_from(range(len(PEERS))))
@examples(1)
def test_same_bytes_as_numcodecs(raw: bytes, which: int) -> None:
    cid, config, peer = PEERS[which]
    codec = stdlib_codec(cid, config)
    assert codec is not None
    assert codec.encode(raw) == bytes(peer.encode(raw))
    assert codec.decode(bytes(peer.encode(raw))) == raw
    assert codec.decode_limited(codec.encode(raw), "k", len(raw)) == raw


def test_bomb_is_refused_before_inflating(tmp_path: Path) -> None:
    a = rectizarr.create_array(
        tmp_path / "a", shape=(10,), chunks=(10,), dtype="<i4", zarr_format=2, compressors=numcodecs.Zlib(1)
    )
    (tmp_path / "a" / "0").write_bytes(zlib.compress(bytes(64 << 20)))
    with pytest.raises(rectizarr.CodecError, match="more than 40 bytes"):
        a[...]
    (tmp_path / "a" / "0").write_bytes(zlib.compress(np.arange(10, dtype="<i4").tobytes())[:-3])
    with pytest.raises(rectizarr.CodecError, match=r"truncated|cannot decompress"):
        a[...]


def test_bad_level_is_refused_at_build(tmp_path: Path) -> None:
    with pytest.raises(rectizarr.MetadataError, match="compression level") as info:
        rectizarr.create_array(
            tmp_path / "b",
            shape=(4,),
            dtype="<i4",
            compressors=[{"name": "numcodecs.zlib", "configuration": {"level": 42}}],
        )
    assert info.value.path == "codecs[1].configuration"
    assert stdlib_codec("lzma", {"format": 3, "filters": [{"id": 33}]}) is None  # raw lzma: numcodecs
