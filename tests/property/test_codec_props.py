"""Random codec chains over random dtypes and shapes: bit-exact round trips; corruption is always a CodecError."""

from __future__ import annotations

from typing import Any

import numcodecs
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.build import build_pipeline
from rectizarr.codecs.crc32c import crc32c
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.core.codec_meta import parse_codecs
from rectizarr.errors import ChecksumError, CodecError

DTYPES = [
    "bool",
    "uint8",
    "int8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "S3",
    "<U2",
    object,
]
BLOSC_CNAMES = numcodecs.blosc.list_compressors()


def compressors() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(lambda lvl: {"name": "gzip", "configuration": {"level": lvl}}, st.integers(0, 9)),
        st.builds(
            lambda lvl, ck: {"name": "zstd", "configuration": {"level": lvl, "checksum": ck}},
            st.integers(-5, 5),
            st.booleans(),
        ),
        st.builds(
            lambda cname, clevel, shuffle, typesize: {
                "name": "blosc",
                "configuration": {
                    "cname": cname,
                    "clevel": clevel,
                    "shuffle": shuffle,
                    "typesize": typesize,
                    "blocksize": 0,
                },
            },
            st.sampled_from(BLOSC_CNAMES),
            st.integers(0, 9),
            st.sampled_from(["noshuffle", "shuffle", "bitshuffle"]),
            st.integers(1, 8),
        ),
        st.just({"name": "crc32c"}),
    )


def serializer(draw: st.DrawFn, dtype: np.dtype) -> dict[str, Any]:
    if dtype.hasobject:
        return {"name": "vlen-utf8"}
    endians: list[str | None] = ["little", "big"]
    if dtype.itemsize == 1 or dtype.kind == "S":
        endians.append(None)
    endian = draw(st.sampled_from(endians))
    return {"name": "bytes"} if endian is None else {"name": "bytes", "configuration": {"endian": endian}}


def chain(draw: st.DrawFn, dtype: np.dtype, shape: tuple[int, ...], depth: int) -> list[dict[str, Any]]:
    """A valid chain for chunks of ``shape``: [transpose], serializer or sharding, bytes->bytes codecs."""
    codecs: list[dict[str, Any]] = []
    if draw(st.booleans()):
        order = draw(st.permutations(range(len(shape))))
        codecs.append({"name": "transpose", "configuration": {"order": list(order)}})
        shape = tuple(shape[o] for o in order)
    if depth < 2 and draw(st.integers(0, 2)) == 0:
        inner = tuple(draw(st.sampled_from([d for d in range(1, s + 1) if s % d == 0])) for s in shape)
        index_codecs: list[dict[str, Any]] = [serializer(draw, np.dtype(np.uint64))]
        if draw(st.booleans()):
            index_codecs.append({"name": "crc32c"})
        codecs.append(
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": list(inner),
                    "codecs": chain(draw, dtype, inner, depth + 1),
                    "index_codecs": index_codecs,
                    "index_location": draw(st.sampled_from(["start", "end"])),
                },
            }
        )
    else:
        codecs.append(serializer(draw, dtype))
    codecs.extend(draw(st.lists(compressors(), max_size=3)))
    return codecs


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[dict[str, Any]], np.ndarray, ChunkSpec]:
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=0, max_size=3)))
    n = int(np.prod(shape))
    if dtype.hasobject:
        data = np.empty(n, dtype=object)
        data[:] = draw(st.lists(st.text(max_size=4), min_size=n, max_size=n))
        fill = np.array("", dtype=object)
    else:
        raw = draw(st.binary(min_size=n * dtype.itemsize, max_size=n * dtype.itemsize))
        if dtype.kind == "b":
            data = (np.frombuffer(raw, dtype=np.uint8) & 1).astype(bool)
        elif dtype.kind == "U":
            data = np.frombuffer(raw, dtype=np.uint32) % 0x10000
            data = np.where((data >= 0xD800) & (data < 0xE000), 0x41, data).astype(np.uint32).view(dtype)
        else:
            data = np.frombuffer(raw, dtype=dtype)
        # Often make some of the data equal to the fill, so sharding leaves inner chunks out.
        fill = data[0].copy() if n and draw(st.booleans()) else np.zeros((), dtype)
        if n and draw(st.booleans()):
            data = np.where(np.arange(n) % 2 == 0, fill, data)
    data = data.reshape(shape)
    return chain(draw, dtype, shape, 0), data, ChunkSpec(shape, dtype, np.asarray(fill, dtype=dtype), "c/0")


def same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype.hasobject:
        return a.shape == b.shape and a.tolist() == b.tolist()
    return a.shape == b.shape and a.dtype == b.dtype and np.ascontiguousarray(a).tobytes() == b.tobytes()


def build(codecs: list[dict[str, Any]], s: ChunkSpec) -> CodecPipeline:
    return build_pipeline(parse_codecs(codecs), s.dtype, [np.array([e]) for e in s.shape])


@settings(deadline=None, max_examples=150)
@given(cases())
def test_random_chains_round_trip_bit_exactly(
    case: tuple[list[dict[str, Any]], np.ndarray, ChunkSpec],
) -> None:
    codecs, data, s = case
    p = build(codecs, s)
    encoded = p.encode(data, s)
    size = p.encoded_size(s)
    assert size is None or size == len(encoded)
    assert same(p.decode(encoded, s), data)
    # The written metadata builds the same pipeline, which writes the same bytes.
    again = build(p.to_json(), s)
    assert again.to_json() == p.to_json()
    assert again.encode(data, s) == encoded


@settings(deadline=None, max_examples=150)
@given(cases(), st.data())
def test_corruption_is_a_codec_error_or_undetected(
    case: tuple[list[dict[str, Any]], np.ndarray, ChunkSpec], data: st.DataObject
) -> None:
    codecs, array, s = case
    p = build(codecs, s)
    encoded = bytearray(p.encode(array, s))
    if data.draw(st.booleans()) and encoded:
        pos = data.draw(st.integers(0, len(encoded) - 1))
        encoded[pos] ^= data.draw(st.integers(1, 255))
    else:
        del encoded[data.draw(st.integers(0, len(encoded))) :]
        encoded += data.draw(st.binary(max_size=3))
        if bytes(encoded) == p.encode(array, s):
            return
    checked = codecs[-1]["name"] == "crc32c"
    try:
        out = p.decode(bytes(encoded), s)
    except ChecksumError:
        return
    except CodecError:
        return
    assert not checked, "a corrupted value under a trailing crc32c must not decode"
    assert out.shape == s.shape


@settings(deadline=None, max_examples=60)
@given(st.binary(max_size=5000))
def test_crc32c_agrees_with_the_bitwise_definition(data: bytes) -> None:
    reg = 0xFFFFFFFF
    for byte in data:  # RFC 3720: reflected polynomial 0x82F63B78, register and output inverted
        reg ^= byte
        for _ in range(8):
            reg = (reg >> 1) ^ (0x82F63B78 if reg & 1 else 0)
    assert crc32c(data) == crc32c(memoryview(data)) == reg ^ 0xFFFFFFFF
