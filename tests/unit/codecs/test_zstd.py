"""Prefix decoding of zstd frames (``rectizarr.codecs.zstd``, through ``zstandard``), the zstd codec's
``decode_prefix`` and ``CodecPipeline.decode_prefix``: always the leading bytes numcodecs gives,
False (never an exception) for anything it cannot decode that far. Then the bounded decode of frames that
declare no size (``zstd.decoded_size``, ``ZstdCodec.decode_limited``)."""

from __future__ import annotations

import struct
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st
from numcodecs import Zstd

import rectizarr.codecs.zstd as zstd
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.build import build_pipeline
from rectizarr.codecs.bytes_to_bytes import ZstdCodec
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.core.codec_meta import parse_codecs
from rectizarr.errors import ChecksumError, CodecError
from tests.strategies import examples

BLOCK = 128 << 10  # zstd's largest block


def payload(n: int, seed: int = 0, alphabet: int = 16) -> bytes:
    """``n`` bytes: random over ``alphabet`` values (compressible below 256), runs of zeros every 4 KiB."""
    a = np.random.default_rng(seed).integers(0, alphabet, n, dtype=np.uint8)
    a[(np.arange(n) // 4096) % 3 == 0] = 0
    return a.tobytes()


def prefix_of(data: bytes | memoryview, n: int) -> bytes | None:
    out = np.full(n, 0xAB, dtype=np.uint8)
    return out.tobytes() if zstd.decode_prefix(data, out, n) else None


def raw_frame(content: bytes, *, declare: int | None = None) -> bytes:
    """A hand-made zstd frame of raw blocks; with ``declare``, a 4-byte content size (else none at all)."""
    descriptor = 0x00 if declare is None else 0x80  # FCS_flag 2 (4 bytes), not single segment, no checksum
    head = b"\x28\xb5\x2f\xfd" + bytes([descriptor, 7 << 3])  # window 2**17: 128 KiB blocks
    if declare is not None:
        head += struct.pack("<I", declare)
    blocks = [content[i : i + BLOCK] for i in range(0, len(content), BLOCK)] or [b""]
    for i, block in enumerate(blocks):
        last = i == len(blocks) - 1
        head += (len(block) << 3 | int(last)).to_bytes(3, "little") + block  # type 0: raw
    return head


def skippable(payload_bytes: bytes) -> bytes:
    return struct.pack("<II", 0x184D2A53, len(payload_bytes)) + payload_bytes


# -------------------------------------------------------------------------------------- decode_prefix


@pytest.mark.parametrize("alphabet", [16, 256], ids=["compressible", "random"])
def test_prefixes_match_numcodecs_at_block_boundaries(alphabet: int) -> None:
    raw = payload(3 * BLOCK + 4321, seed=alphabet, alphabet=alphabet)
    encoded = Zstd(level=3).encode(raw)
    full = bytes(Zstd().decode(encoded))
    assert full == raw
    n = len(raw)
    for size in [1, 2, 17, 4096, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK, 2 * BLOCK + 7, n - 1, n]:
        assert prefix_of(encoded, size) == full[:size], size
    assert prefix_of(memoryview(encoded), BLOCK + 1) == full[: BLOCK + 1]  # a memoryview works as well
    assert prefix_of(memoryview(bytearray(encoded)), 99) == full[:99]  # writable buffers too


@pytest.mark.parametrize("level", range(-1, 20))
def test_every_level(level: int) -> None:
    raw = payload(BLOCK + 5000, seed=level + 1)
    encoded = Zstd(level=level).encode(raw)
    for size in (1, BLOCK - 3, BLOCK + 3, len(raw)):
        assert prefix_of(encoded, size) == raw[:size]


@examples(0.8)
@given(
    n=st.integers(1, 3 * BLOCK),
    cut=st.floats(0, 1),
    level=st.sampled_from([-1, 1, 5]),
    alphabet=st.sampled_from([2, 16, 256]),
)
def test_random_prefixes_and_truncations(n: int, cut: float, level: int, alphabet: int) -> None:
    raw = payload(n, seed=n, alphabet=alphabet)
    encoded = Zstd(level=level).encode(raw)
    size = max(1, int(cut * n))
    assert prefix_of(encoded, size) == raw[:size]
    truncated = encoded[: int(cut * len(encoded))]
    got = prefix_of(truncated, size)  # may succeed when the prefix lies in the blocks that are there
    assert got is None or got == raw[:size]
    assert prefix_of(encoded[:-1], n) is None  # the last byte is needed for the last element


def test_concatenated_frames_and_skippable_frames() -> None:
    parts = [payload(BLOCK // 2 + 11, seed=1), payload(BLOCK + 3, seed=2), payload(5, seed=3)]
    encoded = b"".join(Zstd(level=i + 1).encode(p) for i, p in enumerate(parts))
    full = bytes(Zstd().decode(encoded))
    assert full == b"".join(parts)
    for size in (1, len(parts[0]), len(parts[0]) + 1, len(full) - 5, len(full)):
        assert prefix_of(encoded, size) == full[:size]
    assert prefix_of(encoded, len(full) + 1) is None
    with_skippable = skippable(b"metadata") + encoded + skippable(b"") + Zstd().encode(b"tail")
    assert prefix_of(with_skippable, 10) == full[:10]
    assert prefix_of(with_skippable, len(full) + 4) == full + b"tail"
    assert prefix_of(skippable(b"x" * 100), 1) is None  # only a skippable frame: nothing to decode


def test_hand_made_frames_without_and_with_content_size() -> None:
    raw = payload(2 * BLOCK + 100, seed=4, alphabet=256)
    for frame in (raw_frame(raw), raw_frame(raw, declare=len(raw))):
        assert prefix_of(frame, BLOCK + 1) == raw[: BLOCK + 1]
        assert prefix_of(frame, len(raw)) == raw
        assert prefix_of(frame, len(raw) + 1) is None
    # a header that declares more than the blocks hold: an error at the frame's end, never a crash
    lying = raw_frame(raw[:1000], declare=5000)
    assert prefix_of(lying, 500) in (None, raw[:500])  # zstd may report the mismatch before any output
    assert prefix_of(lying, 2000) is None


@given(data=st.binary(max_size=300), size=st.integers(1, 5000))
def test_garbage_is_false_not_an_error(data: bytes, size: int) -> None:
    assert prefix_of(data, size) is None or data[:4] == b"\x28\xb5\x2f\xfd"
    result = zstd.decode_prefix(
        b"\x28\xb5\x2f\xfd" + data, np.zeros(size, np.uint8), size
    )  # a header, then junk
    assert result is True or result is False
    codec_ok = ZstdCodec(1, False).decode_prefix(data, np.zeros(size, np.uint8), size // 2)
    assert not codec_ok or data[:4] == b"\x28\xb5\x2f\xfd"


@given(pos=st.integers(0, 10**6), value=st.integers(0, 255), size=st.integers(1, 40000))
def test_corrupted_frames_do_not_crash(pos: int, value: int, size: int) -> None:
    raw = payload(40000, seed=5)
    encoded = bytearray(Zstd(level=1).encode(raw))
    encoded[pos % len(encoded)] = value
    got = prefix_of(bytes(encoded), size)
    assert got is None or len(got) == size


def test_empty_and_truncated_input() -> None:
    raw = payload(BLOCK + 10, seed=6)
    encoded = Zstd(level=1).encode(raw)
    assert prefix_of(b"", 1) is None
    assert prefix_of(memoryview(b""), 10) is None
    for cut in (1, 4, 5, 6, 8, 12):  # inside the magic number and the frame header
        assert prefix_of(encoded[:cut], 1) is None
    assert prefix_of(Zstd().encode(b""), 1) is None  # a frame of no content
    assert prefix_of(Zstd().encode(b"abc"), 4) is None  # prefix longer than the content


def test_threads_decode_concurrently() -> None:
    datas = [payload(BLOCK + 1000 * i, seed=10 + i, alphabet=(16, 256)[i % 2]) for i in range(8)]
    frames = [Zstd(level=1 + i % 3).encode(d) for i, d in enumerate(datas)]
    jobs = [(i % 8, 1 + (i * 7919) % len(datas[i % 8])) for i in range(96)]

    def work(job: tuple[int, int]) -> tuple[bool, int]:
        i, size = job
        return prefix_of(frames[i], size) == datas[i][:size], id(zstd.thread_decompressor())

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, jobs))
    assert all(ok for ok, _ in results)
    mine = zstd.thread_decompressor()
    assert zstd.thread_decompressor() is mine and id(mine) not in {
        d for _, d in results
    }  # one per thread, reused
    assert prefix_of(frames[0], 10) == datas[0][:10]  # the main thread's decompressor is still fine


@pytest.fixture
def fresh_switch() -> Any:
    zstd.prefix_enabled.cache_clear()
    yield
    zstd.prefix_enabled.cache_clear()


def test_env_var_turns_prefix_decoding_off(monkeypatch: pytest.MonkeyPatch, fresh_switch: None) -> None:
    encoded = ZstdCodec(1, False).encode(payload(1000))
    for value in ("0", "false", "No", " off "):
        zstd.prefix_enabled.cache_clear()
        monkeypatch.setenv("RECTIZARR_ZSTD_PREFIX", value)
        assert not zstd.prefix_enabled()
        assert not ZstdCodec(1, False).decode_prefix(encoded, np.zeros(1000, np.uint8), 10)
        monkeypatch.setenv("RECTIZARR_ZSTD_PREFIX", "1")
        assert not zstd.prefix_enabled()  # read once: no look-up per chunk
    zstd.prefix_enabled.cache_clear()
    assert zstd.prefix_enabled()
    assert ZstdCodec(1, False).decode_prefix(encoded, np.zeros(1000, np.uint8), 10)
    zstd.prefix_enabled.cache_clear()
    monkeypatch.delenv("RECTIZARR_ZSTD_PREFIX")
    assert zstd.prefix_enabled()  # on by default


def test_unsuitable_output_buffers_are_false() -> None:
    encoded = Zstd(level=1).encode(payload(1000))
    read_only = np.zeros(1000, np.uint8)
    read_only.flags.writeable = False
    assert not zstd.decode_prefix(encoded, read_only, 10)
    assert not zstd.decode_prefix(encoded, np.zeros((1000, 2), np.uint8)[:, 0], 10)  # not contiguous
    assert not zstd.decode_prefix(encoded, np.zeros((10, 100), np.uint8), 10)  # not flat


# ----------------------------------------------------------------------------- ZstdCodec.decode_prefix


def test_codec_decode_prefix_conditions() -> None:
    raw = payload(BLOCK + 77, seed=7)
    full = np.zeros(len(raw), np.uint8)  # the codec decodes into a buffer of the whole decoded size
    plain = ZstdCodec(1, False).encode(raw)
    assert ZstdCodec(1, False).decode_prefix(plain, full, 1000) and full[:1000].tobytes() == raw[:1000]
    assert ZstdCodec(1, True).decode_prefix(plain, full, 1000)  # the frame decides, not the codec's setting
    checked = ZstdCodec(1, True).encode(raw)
    assert checked[4] & 0x04
    assert not ZstdCodec(1, False).decode_prefix(checked, full, 1000)  # checksum frames are decoded whole
    for wrong in (len(raw) + 1, len(raw) - 1):  # the frame must declare exactly the buffer's size
        assert not ZstdCodec(1, False).decode_prefix(plain, np.zeros(wrong, np.uint8), 1000)
    assert not ZstdCodec(1, False).decode_prefix(raw_frame(raw), full, 1000)  # no content size in the header
    full[:] = 0
    assert ZstdCodec(1, False).decode_prefix(raw_frame(raw, declare=len(raw)), full, 1000)
    assert full[:1000].tobytes() == raw[:1000]
    assert not ZstdCodec(1, False).decode_prefix(skippable(b"ab") + plain, full, 1000)
    for junk in (b"", b"\x28\xb5", b"not zstd at all, not at all", raw[:100]):
        assert not ZstdCodec(1, False).decode_prefix(junk, full, 1000)


@examples(0.8)
@given(
    size=st.integers(1, 3 * BLOCK),
    frac=st.floats(0, 1),
    level=st.sampled_from([-1, 1, 3]),
    alphabet=st.sampled_from([4, 256]),
)
def test_prefix_into_a_whole_chunk_buffer(size: int, frac: float, level: int, alphabet: int) -> None:
    """The codec hands the decoder a buffer of the whole frame: the first ``n`` bytes are right, nothing
    past them is written, and a frame cut before ``n`` is False."""
    raw = payload(size, alphabet=alphabet, seed=size)
    encoded = ZstdCodec(level, False).encode(raw)
    n = max(1, min(size - 1, int(size * frac))) if size > 1 else 1
    out = np.full(size, 0xAB, np.uint8)
    assert zstd.decode_prefix(encoded, out, n)
    assert out[:n].tobytes() == raw[:n] and (out[n:] == 0xAB).all()
    assert (
        not zstd.decode_prefix(encoded[: len(encoded) // 3], np.zeros(size, np.uint8), size - 1) or size < 8
    )


# ------------------------------------------------------------------------ CodecPipeline.decode_into


def pipeline(checksum: bool) -> tuple[CodecPipeline, ChunkSpec]:
    codecs: list[Any] = [
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "zstd", "configuration": {"level": 1, "checksum": checksum}},
    ]
    shape, dt = (64, 1024), np.dtype("<u2")
    p = build_pipeline(parse_codecs(codecs), dt, [np.array([s]) for s in shape])
    return p, ChunkSpec(shape, dt, np.array(0, dtype=dt), "c/0")


@pytest.mark.parametrize("checksum", [False, True])
def test_pipeline_decode_into_with_prefix(monkeypatch: pytest.MonkeyPatch, checksum: bool) -> None:
    calls: list[int] = []
    original = zstd.decode_prefix

    def spy(data: Any, out: np.ndarray, n: int) -> bool:
        calls.append(n)
        return original(data, out, n)

    monkeypatch.setattr(zstd, "decode_prefix", spy)
    p, s = pipeline(checksum)
    data = np.random.default_rng(8).integers(0, 300, s.shape, dtype="<u2")
    encoded = p.encode(data, s)
    flat = data.reshape(-1).view(np.uint8)
    for prefix in (1, 2, 3001, BLOCK - 1, 100_000):
        out = np.zeros(s.shape, s.dtype)
        assert p.decode_prefix(encoded, s, out, prefix)
        assert out.reshape(-1).view(np.uint8)[:prefix].tobytes() == flat[:prefix].tobytes()
    assert calls == ([] if checksum else [1, 2, 3001, BLOCK - 1, 100_000])
    for whole in (flat.size, flat.size + 5):  # the whole chunk: no prefix decoding
        out = np.zeros(s.shape, s.dtype)
        assert p.decode_prefix(encoded, s, out, whole)
        np.testing.assert_array_equal(out, data)
    out = np.zeros(s.shape, s.dtype)
    assert p.decode_into(encoded, s, out)
    np.testing.assert_array_equal(out, data)
    assert len(calls) == (0 if checksum else 5)
    assert not p.decode_prefix(b"garbage", s, np.zeros(s.shape, s.dtype), 10)  # the caller then decodes


def test_corrupted_frames_decode_or_are_refused_never_crash() -> None:
    """Random byte changes, truncations and insertions in a frame, decoded by prefix."""
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 50, 200_000, dtype=np.uint8).tobytes()
    encoded = ZstdCodec(1, False).encode(raw)
    outcomes = set()
    for _ in range(400):
        b = bytearray(encoded)
        for _ in range(int(rng.integers(1, 6))):
            kind, j = rng.random(), int(rng.integers(len(b)))
            if kind < 0.6:
                b[j] = int(rng.integers(256))
            elif kind < 0.8:
                b = b[:j]
            else:
                b[j:j] = rng.bytes(int(rng.integers(1, 20)))
        n = int(rng.integers(1, len(raw)))
        outcomes.add(ZstdCodec(1, False).decode_prefix(bytes(b), np.zeros(len(raw), np.uint8), n))
    assert outcomes == {True, False}  # some damage lies past the prefix, some is detected


# ------------------------------------------------------------- frames without a size: bounded decoding


def sizeless(raw: bytes, *, checksum: bool = False, level: int = 1) -> bytes:
    """A frame as a streaming compressor writes it: no content size in the header."""
    frame = zstandard.ZstdCompressor(level=level, write_content_size=False, write_checksum=checksum).compress(
        raw
    )
    assert frame[4] & 0xE0 == 0  # no size field, not a single segment
    return frame


def rle_bomb(blocks: int) -> bytes:
    """A frame of ``blocks`` RLE blocks of 128 KiB zeros that declares no size: 4 bytes per 128 KiB."""
    block = ((128 << 10) << 3 | 1 << 1).to_bytes(3, "little") + b"\0"
    last = ((128 << 10) << 3 | 1 << 1 | 1).to_bytes(3, "little") + b"\0"
    return b"\x28\xb5\x2f\xfd" + bytes([0x00, 7 << 3]) + block * (blocks - 1) + last


def test_decoded_size_counts_up_to_one_past_the_limit() -> None:
    raw = payload(3 * BLOCK + 5, seed=11)
    frame = sizeless(raw)
    assert zstd.decoded_size(frame, len(raw)) == len(raw)
    assert zstd.decoded_size(frame, len(raw) - 1) == len(raw)  # one past: too large
    assert zstd.decoded_size(frame, 10) == 11
    assert (
        zstd.decoded_size(frame + sizeless(b"tail") + skippable(b"x"), 10**7) == len(raw) + 4
    )  # every frame
    assert zstd.decoded_size(rle_bomb(8000), 1 << 20) == (1 << 20) + 1  # 1 GiB claimed, 1 MiB + 1 made
    assert zstd.decoded_size(frame[: len(frame) // 2], len(raw)) < len(raw)  # truncated: what was there
    with pytest.raises(zstd.ZstdError):
        zstd.decoded_size(b"not zstd at all", 100)


def test_codec_decode_limited_without_a_declared_size() -> None:
    raw = payload(2 * BLOCK + 3, seed=12)
    codec = ZstdCodec(1, False)
    for frame in (
        sizeless(raw),
        sizeless(raw, checksum=True),
        sizeless(raw[:BLOCK]) + sizeless(raw[BLOCK:]),
        skippable(b"meta") + sizeless(raw),
    ):
        assert codec.decode_limited(frame, "c/0", len(raw)) == raw
        with pytest.raises(CodecError, match=f"more than {len(raw) - 1} bytes") as info:
            codec.decode_limited(frame, "c/0", len(raw) - 1)
        assert info.value.key == "c/0"
    with pytest.raises(CodecError, match="more than 4096 bytes"):
        codec.decode_limited(rle_bomb(8000), "c/1", 4096)
    with pytest.raises(CodecError, match="c/2"):
        codec.decode_limited(sizeless(raw)[:-3], "c/2", len(raw))  # truncated
    damaged = bytearray(sizeless(raw, checksum=True))
    damaged[-1] ^= 1
    with pytest.raises(ChecksumError, match="c/3"):
        codec.decode_limited(bytes(damaged), "c/3", len(raw))
    for junk in (b"", b"\x28\xb5\x2f\xfd", b"not zstd at all"):
        with pytest.raises(CodecError, match="c/4"):
            codec.decode_limited(junk, "c/4", len(raw))


@examples(1.2)
@given(pos=st.integers(0, 10**6), value=st.integers(0, 255), cut=st.integers(0, 10**6))
def test_corrupted_sizeless_frames_decode_or_are_refused(pos: int, value: int, cut: int) -> None:
    raw = payload(40000, seed=13)
    frame = bytearray(sizeless(raw))
    frame[pos % len(frame)] = value
    frame = frame[: len(frame) - cut % 8]
    try:
        out = ZstdCodec(1, False).decode_limited(bytes(frame), "c/0", len(raw))
    except CodecError:
        return
    assert len(out) <= len(raw)


@pytest.mark.parametrize("n", [1000, 300_000])  # one block; several blocks
def test_decode_into_takes_exactly_one_frame_of_the_size_and_checks_its_checksum(n: int) -> None:
    """``zstd.decode_into`` decodes in place (large frames too); another size, a frame after it, a broken
    checksum or a cut frame give False, with nothing raised."""
    data = (np.arange(n, dtype=np.uint32) // 7).astype(np.uint32)
    frame = Zstd(level=1, checksum=True).encode(data)
    out = np.zeros(data.nbytes, np.uint8)
    assert zstd.decode_into(frame, out) and np.array_equal(out.view(np.uint32), data)
    assert zstd.decode_into(memoryview(frame), out)
    assert not zstd.decode_into(frame + Zstd(level=1).encode(data[:10]), out)  # a second frame follows
    assert not zstd.decode_into(frame, np.zeros(data.nbytes - 4, np.uint8))  # larger than out
    assert not zstd.decode_into(frame, np.zeros(data.nbytes + 4, np.uint8))  # smaller than out
    broken = bytearray(frame)
    broken[-1] ^= 0xFF  # the frame's checksum
    assert not zstd.decode_into(bytes(broken), out)
    assert not zstd.decode_into(frame[:-9], out)
