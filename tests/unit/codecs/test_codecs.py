"""The runtime codecs and the codec pipeline (their metadata: tests/unit/core/test_codec_meta.py; sharding:
test_sharding.py)."""

from __future__ import annotations

import gzip
import struct
import warnings
import zlib
from typing import Any

import numcodecs
import numpy as np
import pytest

import rectizarr
from rectizarr.codecs.array_to_bytes import NumcodecsArrayBytes
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.build import build_codec, build_pipeline
from rectizarr.codecs.crc32c import crc32c
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.core.codec_meta import BloscMeta, NumcodecsMeta, codecs_to_json, parse_codecs
from rectizarr.errors import (
    ChecksumError,
    CodecError,
    LenientMetadataWarning,
    MetadataError,
    UnsupportedError,
)

LE = {"name": "bytes", "configuration": {"endian": "little"}}
BE = {"name": "bytes", "configuration": {"endian": "big"}}


def spec(shape: tuple[int, ...], dtype: Any, fill: Any = 0, key: str | None = "c/0") -> ChunkSpec:
    dt = np.dtype(dtype)
    return ChunkSpec(tuple(shape), dt, np.array(fill, dtype=dt), key)


def build(codecs: list[Any], dtype: Any, shape: tuple[int, ...]) -> CodecPipeline:
    return build_pipeline(parse_codecs(codecs), np.dtype(dtype), [np.array([s]) for s in shape])


def roundtrip(codecs: list[Any], data: np.ndarray, fill: Any = 0) -> bytes:
    p = build(codecs, data.dtype, data.shape)
    s = spec(data.shape, data.dtype, fill)
    encoded = p.encode(data, s)
    decoded = p.decode(encoded, s)
    assert decoded.shape == data.shape and decoded.dtype == data.dtype
    if data.dtype.hasobject:
        assert decoded.tolist() == data.tolist()
    else:
        assert np.ascontiguousarray(decoded).tobytes() == np.ascontiguousarray(data).tobytes()
    return encoded


# ---------------------------------------------------------------------------------------------- crc32c


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"123456789", 0xE3069283),
        (b"", 0),
        (bytes(32), 0x8A9136AA),
        (b"\xff" * 32, 0x62A8AB43),  # RFC 3720 B.4
        (bytes(range(32)), 0x46DD794E),
        (bytes(range(31, -1, -1)), 0x113FDB5C),
    ],
)
def test_crc32c_known_vectors(data: bytes, expected: int) -> None:
    assert crc32c(data) == expected
    assert (
        crc32c(memoryview(data))
        == crc32c(bytearray(data))
        == crc32c(np.frombuffer(data, np.uint8))
        == expected
    )


@pytest.mark.parametrize("n", [1, 7, 4096, 70_001, 1 << 20])
def test_crc32c_of_every_buffer_type(n: int) -> None:
    data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()
    assert (
        crc32c(data)
        == crc32c(memoryview(data))
        == crc32c(bytearray(data))
        == crc32c(np.frombuffer(data, np.uint8))
    )
    assert crc32c(memoryview(data)[1:]) == crc32c(data[1:]) != crc32c(data)


def test_crc32c_codec_appends_little_endian() -> None:
    p = build([{"name": "bytes"}, {"name": "crc32c"}], "uint8", (4,))
    data = np.array([1, 2, 3, 4], dtype=np.uint8)
    assert p.encode(data, spec((4,), "uint8")).hex() == "01020304f48c3029"
    assert p.encoded_size(spec((4,), "uint8")) == 8


def test_crc32c_codec_detects_corruption() -> None:
    p = build(["bytes", "crc32c"], "uint8", (4,))
    bad = bytearray(p.encode(np.arange(4, dtype=np.uint8), spec((4,), "uint8")))
    bad[1] ^= 0x10
    with pytest.raises(ChecksumError, match="c/0") as info:
        p.decode(bytes(bad), spec((4,), "uint8"))
    assert info.value.codec == "crc32c" and info.value.key == "c/0"
    with pytest.raises(CodecError, match="too short"):
        p.decode(b"\x01\x02", spec((4,), "uint8"))


# ----------------------------------------------------------------------------------------------- bytes


def test_bytes_big_endian_vector_reads_native() -> None:
    data = np.array([1, 258], dtype=np.uint16)
    encoded = roundtrip([BE], data)
    assert encoded.hex() == "00010102"
    decoded = build([BE], "uint16", (2,)).decode(encoded, spec((2,), "uint16"))
    assert decoded.dtype.isnative


@pytest.mark.parametrize("config", [None, {}, {"endian": "little"}, {"endian": "big"}])
def test_bytes_single_byte_types_need_no_endian(config: dict[str, str] | None) -> None:
    codec: dict[str, Any] = (
        {"name": "bytes"} if config is None else {"name": "bytes", "configuration": config}
    )
    assert roundtrip([codec], np.array([0, 7, 255], dtype=np.uint8)).hex() == "0007ff"
    assert roundtrip([codec], np.array([True, False])).hex() == "0100"
    assert roundtrip([codec], np.array([b"ab", b"cd"], dtype="S2")).hex() == "61626364"


@pytest.mark.parametrize("dtype", ["int16", "float32", "complex128", "<U3", [("a", "u1"), ("b", "<i4")]])
def test_bytes_missing_endian_on_multibyte_type_is_rejected(dtype: Any) -> None:
    with pytest.raises(MetadataError, match="endian") as info:
        build([{"name": "bytes"}], dtype, (2,))
    assert info.value.path == "$.codecs[0]"


def test_bytes_rejects_object_dtype() -> None:
    with pytest.raises(MetadataError, match="vlen-utf8"):
        build([LE], object, (2,))


@pytest.mark.parametrize("endian", [LE, BE])
@pytest.mark.parametrize(
    "data",
    [
        np.array([1 + 2j, -3.5 - 0j], dtype=np.complex64),
        np.array([(1, 2.5), (3, -1.0)], dtype=[("a", "<i2"), ("b", "<f8")]),
        np.array(["ab", "c"], dtype="<U2"),
        np.array(7, dtype=np.int64),
    ],
)
def test_bytes_round_trips_both_endians(endian: dict[str, Any], data: np.ndarray) -> None:
    roundtrip([endian], data)


def test_bytes_big_endian_complex_layout() -> None:
    encoded = roundtrip([BE], np.array([1 + 2j], dtype=np.complex64))
    assert encoded == struct.pack(">ff", 1.0, 2.0)


def test_bytes_wrong_length_names_key_and_codec() -> None:
    p = build([LE], "int32", (3,))
    with pytest.raises(CodecError, match="expected 12 bytes") as info:
        p.decode(b"\x00" * 11, spec((3,), "int32", key="c/1/2"))
    assert info.value.key == "c/1/2" and info.value.codec == "bytes"


# ------------------------------------------------------------------------------------------- transpose


def test_transpose_2d_vector() -> None:
    data = np.arange(6, dtype=np.uint8).reshape(2, 3)
    assert roundtrip([{"name": "transpose", "configuration": {"order": [1, 0]}}, "bytes"], data).hex() == (
        "000301040205"
    )


def test_transpose_3d_permutation_round_trips() -> None:
    data = np.arange(2 * 3 * 4, dtype="<i4").reshape(2, 3, 4)
    encoded = roundtrip([{"name": "transpose", "configuration": {"order": [2, 0, 1]}}, LE], data)
    assert encoded == np.transpose(data, (2, 0, 1)).tobytes()


def test_transpose_0d() -> None:
    roundtrip([{"name": "transpose", "configuration": {"order": []}}, LE], np.array(5, dtype="<i2"))


@pytest.mark.parametrize(
    ("order", "path"),
    [
        ([0, 0], "$.codecs[0].configuration.order"),
        ([0, 2], "$.codecs[0].configuration.order"),
        ([0], "$.codecs[0]"),
    ],
)
def test_transpose_order_must_be_a_permutation_of_the_input_axes(order: list[int], path: str) -> None:
    with pytest.raises(MetadataError, match="transpose order") as info:
        build([{"name": "transpose", "configuration": {"order": order}}, "bytes"], "uint8", (2, 3))
    assert info.value.path == path


def test_transpose_shapes_are_permuted() -> None:
    p = build([{"name": "transpose", "configuration": {"order": [1, 0]}}, "bytes"], "uint8", (2, 3))
    assert p.resolve(spec((2, 3), "uint8")).shape == (3, 2)
    assert p.array_array[0].map_axes(["rows", "cols"]) == ["cols", "rows"]


# ---------------------------------------------------------------------------------------- compressors


def test_gzip_writes_gzip_members_and_reads_several() -> None:
    data = np.arange(1000, dtype="<u4")
    encoded = roundtrip([LE, {"name": "gzip", "configuration": {"level": 5}}], data)
    assert encoded[:2] == b"\x1f\x8b"
    raw = data.tobytes()
    two = gzip.compress(raw[:1000]) + gzip.compress(raw[1000:])
    p = build([LE, {"name": "gzip", "configuration": {"level": 1}}], "uint32", (1000,))
    assert np.array_equal(p.decode(two, spec((1000,), "uint32")), data)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (zlib.compress(b"\x00" * 8), "zlib stream"),
        (gzip.compress(b"\x00" * 8, mtime=0)[:-3], "truncated"),
        (b"\x1f\x8b\x08\x00garbagegarbage", "corrupt"),
        (b"", "no gzip header"),
    ],
)
def test_gzip_rejects_bad_streams(payload: bytes, message: str) -> None:
    p = build(["bytes", {"name": "gzip", "configuration": {"level": 1}}], "uint8", (8,))
    with pytest.raises(CodecError, match=message):
        p.decode(payload, spec((8,), "uint8"))


@pytest.mark.parametrize("level", [0, -5, 1, 22])
@pytest.mark.parametrize("checksum", [False, True])
def test_zstd_round_trips(level: int, checksum: bool) -> None:
    data = np.arange(500, dtype="<f8")
    roundtrip([LE, {"name": "zstd", "configuration": {"level": level, "checksum": checksum}}], data)


def test_zstd_checksum_mismatch_is_a_checksum_error() -> None:
    p = build([LE, {"name": "zstd", "configuration": {"level": 3, "checksum": True}}], "uint32", (100,))
    bad = bytearray(p.encode(np.arange(100, dtype=np.uint32), spec((100,), "uint32")))
    bad[-1] ^= 1
    with pytest.raises(ChecksumError):
        p.decode(bytes(bad), spec((100,), "uint32"))
    with pytest.raises(CodecError):
        p.decode(b"not zstd", spec((100,), "uint32"))


def test_zstd_frame_without_content_size_decodes() -> None:
    payload = bytes(range(100))
    # magic, frame header descriptor 0 (no content size, not single-segment), window descriptor, one raw block
    frame = (
        b"\x28\xb5\x2f\xfd" + b"\x00" + b"\x00" + ((len(payload) << 3) | 1).to_bytes(3, "little") + payload
    )
    p = build(["bytes", {"name": "zstd", "configuration": {"level": 0}}], "uint8", (100,))
    assert p.decode(frame, spec((100,), "uint8")).tobytes() == payload


@pytest.mark.parametrize("cname", numcodecs.blosc.list_compressors())
@pytest.mark.parametrize("shuffle", ["noshuffle", "shuffle", "bitshuffle"])
def test_blosc_every_compressor_and_shuffle(cname: str, shuffle: str) -> None:
    config = {"cname": cname, "clevel": 5, "shuffle": shuffle, "typesize": 4, "blocksize": 0}
    roundtrip([LE, {"name": "blosc", "configuration": config}], np.arange(300, dtype="<i4"))


def test_blosc_compressor_missing_from_the_build_is_unsupported() -> None:
    config = {"cname": "snappy", "clevel": 5, "shuffle": "noshuffle", "typesize": 1, "blocksize": 0}
    codec = {"name": "blosc", "configuration": config}
    if "snappy" in numcodecs.blosc.list_compressors():
        roundtrip(["bytes", codec], np.arange(10, dtype=np.uint8))
    else:
        with pytest.raises(UnsupportedError, match="snappy"):
            build(["bytes", codec], "uint8", (10,))


def test_blosc_lenient_defaults_are_written_back() -> None:
    with pytest.warns(LenientMetadataWarning, match="typesize"):
        metas = parse_codecs([LE, {"name": "blosc", "configuration": {"cname": "lz4", "shuffle": "shuffle"}}])
    assert metas[1] == BloscMeta(cname="lz4", shuffle="shuffle", clevel=5, typesize=None, blocksize=0)
    p = build_pipeline(metas, np.dtype("float64"), [np.array([10])])
    assert p.to_json()[1] == {
        "name": "blosc",
        "configuration": {"cname": "lz4", "shuffle": "shuffle", "clevel": 5, "typesize": 8, "blocksize": 0},
    }


def test_blosc_wrong_typesize_still_decodes() -> None:
    data = np.arange(200, dtype="<u2")
    wrong = {
        "name": "blosc",
        "configuration": {"cname": "zstd", "clevel": 3, "shuffle": "shuffle", "typesize": 8, "blocksize": 0},
    }
    right = {
        "name": "blosc",
        "configuration": {"cname": "zstd", "clevel": 3, "shuffle": "shuffle", "typesize": 2, "blocksize": 0},
    }
    encoded = build([LE, wrong], "uint16", (200,)).encode(data, spec((200,), "uint16"))
    assert np.array_equal(build([LE, right], "uint16", (200,)).decode(encoded, spec((200,), "uint16")), data)


def test_blosc_corrupt_data_is_a_codec_error() -> None:
    config = {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}
    p = build([LE, {"name": "blosc", "configuration": config}], "int32", (10,))
    with pytest.raises(CodecError, match="blosc"):
        p.decode(b"\x02\x01" + b"\xff" * 30, spec((10,), "int32"))


# ------------------------------------------------------------------------------------------ vlen-*


def obj(values: list[Any], shape: tuple[int, ...] | None = None) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape if shape is not None else (len(values),))


def test_vlen_utf8_vector() -> None:
    encoded = roundtrip([{"name": "vlen-utf8"}], obj(["a", "héllo"]))
    assert encoded.hex() == "02000000" + "01000000" + "61" + "06000000" + "68c3a96c6c6f"


@pytest.mark.parametrize("values", [["", "ü", "ascii", "x" * 1000, "日本"], [], ["only"]])
def test_vlen_utf8_round_trips(values: list[str]) -> None:
    roundtrip([{"name": "vlen-utf8"}, {"name": "zstd", "configuration": {"level": 1}}], obj(values))


def test_vlen_utf8_multidimensional_c_order() -> None:
    data = obj(["a", "b", "c", "d", "e", "f"], (2, 3))
    encoded = roundtrip([{"name": "vlen-utf8"}], data)
    assert encoded[4:].split(b"\x01\x00\x00\x00")[1:] == [b"a", b"b", b"c", b"d", b"e", b"f"]


def test_vlen_bytes_round_trips() -> None:
    roundtrip([{"name": "vlen-bytes"}], obj([b"", b"\x00\xff", b"abc"]))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"\x01\x00", "too short"),
        (b"\x03\x00\x00\x00", "holds 3 elements"),
        (b"\x02\x00\x00\x00" + b"\x01\x00\x00\x00a" + b"\x00" * 3, "truncated"),
        (b"\x02\x00\x00\x00" + b"\xf0\xff\xff\xffa" + b"\x00" * 4, "past the end"),
        (b"\x02\x00\x00\x00" + b"\x01\x00\x00\x00a" * 2 + b"zz", "trailing"),
        (b"\x02\x00\x00\x00" + b"\x01\x00\x00\x00\xff" * 2, "UTF-8"),
        (b"\xff\xff\xff\x7f" + b"\x00" * 8, "holds"),
    ],
)
def test_vlen_utf8_malformed(payload: bytes, message: str) -> None:
    p = build([{"name": "vlen-utf8"}], object, (2,))
    with pytest.raises(CodecError, match=message):
        p.decode(payload, spec((2,), object, ""))


def test_vlen_count_larger_than_buffer_rejected_before_allocating() -> None:
    p = build([{"name": "vlen-bytes"}], object, (1000,))
    with pytest.raises(CodecError, match="cannot fit"):
        p.decode(b"\xe8\x03\x00\x00" + b"\x00" * 8, spec((1000,), object, b""))


def test_vlen_encode_rejects_wrong_element_types() -> None:
    with pytest.raises(CodecError, match="expected str"):
        build([{"name": "vlen-utf8"}], object, (2,)).encode(obj(["a", 1]), spec((2,), object, ""))
    with pytest.raises(CodecError, match="expected bytes"):
        build([{"name": "vlen-bytes"}], object, (1,)).encode(obj(["a"]), spec((1,), object, b""))


def test_vlen_needs_object_dtype() -> None:
    with pytest.raises(MetadataError, match="variable-length"):
        build([{"name": "vlen-utf8"}], "uint8", (2,))


# ------------------------------------------------------------------------------------------ numcodecs


NUMCODECS_CASES: list[tuple[str, dict[str, Any], np.ndarray]] = [
    ("numcodecs.delta", {"dtype": "<i4"}, np.arange(12, dtype="<i4").reshape(3, 4)),
    ("numcodecs.delta", {"dtype": "<i4"}, np.array([0, 4_000_000_000, 1, 2**32 - 1], dtype="<u4")),
    ("numcodecs.delta", {"dtype": "<i4", "astype": "<i2"}, np.arange(12, dtype="<i4").reshape(3, 4)),
    (
        "numcodecs.fixedscaleoffset",
        {"offset": 0, "scale": 10, "dtype": "<f8", "astype": "<u2"},
        np.linspace(0, 10, 12).round(1).reshape(3, 4),
    ),
    ("numcodecs.quantize", {"digits": 20, "dtype": "<f8"}, np.array([0.5, 0.25, 2.0, -1.0])),
    ("numcodecs.bitround", {"keepbits": 23}, np.linspace(0, 1, 6, dtype="<f4").reshape(2, 3)),
    ("numcodecs.astype", {"encode_dtype": "<i2", "decode_dtype": "<i4"}, np.arange(6, dtype="<i4")),
    ("numcodecs.packbits", {}, np.array([[True, False, True], [True, True, False], [False, False, True]])),
    ("numcodecs.shuffle", {"elementsize": 4}, np.arange(8, dtype="<i4")),
    ("numcodecs.zlib", {"level": 1}, np.arange(8, dtype="<i4")),
    ("numcodecs.gzip", {"level": 1}, np.arange(8, dtype="<i4")),
    ("numcodecs.bz2", {"level": 1}, np.arange(8, dtype="<i4")),
    ("numcodecs.lzma", {}, np.arange(8, dtype="<i4")),
    ("numcodecs.lz4", {"acceleration": 1}, np.arange(8, dtype="<i4")),
    ("numcodecs.zstd", {"level": 1, "checksum": True}, np.arange(8, dtype="<i4")),
    (
        "numcodecs.blosc",
        {"cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
        np.arange(8, dtype="<i4"),
    ),
    ("numcodecs.adler32", {}, np.arange(8, dtype="<i4")),
    ("numcodecs.crc32", {}, np.arange(8, dtype="<i4")),
    ("numcodecs.crc32c", {}, np.arange(8, dtype="<i4")),
    ("numcodecs.fletcher32", {}, np.arange(8, dtype="<i4")),
    ("numcodecs.jenkins_lookup3", {}, np.arange(8, dtype="<i4")),
]


@pytest.mark.parametrize(
    ("name", "config", "data"), NUMCODECS_CASES, ids=lambda x: x if isinstance(x, str) else ""
)
def test_numcodecs_codecs_round_trip(name: str, config: dict[str, Any], data: np.ndarray) -> None:
    codec = {"name": name, "configuration": config}
    meta = parse_codecs([codec])[0]
    assert isinstance(meta, NumcodecsMeta)
    chain = [codec, LE] if meta.kind == "array_array" else [LE, codec]
    roundtrip(chain, data)
    assert codecs_to_json(parse_codecs(chain)) == chain


def test_numcodecs_packbits_output_is_flat_bytes() -> None:
    p = build([{"name": "numcodecs.packbits", "configuration": {}}, "bytes"], "bool", (3, 3))
    resolved = p.resolve(spec((3, 3), "bool"))
    assert resolved.shape == (3,) and resolved.dtype == np.uint8
    assert p.encoded_size(spec((3, 3), "bool")) == 3


def test_numcodecs_astype_resolves_dtype() -> None:
    p = build(
        [{"name": "numcodecs.astype", "configuration": {"encode_dtype": "<i2", "decode_dtype": "<i4"}}, LE],
        "int32",
        (4,),
    )
    assert p.resolve(spec((4,), "int32")).dtype == np.int16
    assert p.encoded_size(spec((4,), "int32")) == 8


def test_numcodecs_zarr_python_chain_delta_bytes_zlib() -> None:
    data = np.array([10, 11, 13, 16], dtype="<i4")
    chain = [
        {"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}},
        LE,
        {"name": "numcodecs.zlib", "configuration": {"level": 1}},
    ]
    written = zlib.compress(np.array([10, 1, 2, 3], dtype="<i4").tobytes(), 1)
    assert np.array_equal(build(chain, "int32", (4,)).decode(written, spec((4,), "int32")), data)


def test_numcodecs_decode_failures_are_codec_errors() -> None:
    p = build([LE, {"name": "numcodecs.zlib", "configuration": {"level": 1}}], "int32", (4,))
    with pytest.raises(CodecError, match=r"numcodecs\.zlib") as info:
        p.decode(b"garbage", spec((4,), "int32", key="c/9"))
    assert info.value.key == "c/9" and isinstance(info.value.__cause__, Exception)
    p = build([LE, {"name": "numcodecs.crc32", "configuration": {}}], "int32", (1,))
    with pytest.raises(ChecksumError):
        p.decode(b"\x00\x00\x00\x00\x01\x00\x00\x00", spec((1,), "int32"))
    p = build([{"name": "numcodecs.packbits", "configuration": {}}, "bytes"], "bool", (4,))
    with pytest.raises(CodecError, match=r"numcodecs\.packbits"):
        p.decode(b"\x09\x00", spec((4,), "bool"))


def test_numcodecs_bad_configuration_names_the_path() -> None:
    with pytest.raises(MetadataError, match=r"numcodecs\.delta") as info:
        build(
            [
                LE,
                {"name": "numcodecs.zlib", "configuration": {"level": 1}},
                {"name": "numcodecs.delta", "configuration": {"nope": 1}},
            ],
            "int32",
            (4,),
        )
    assert info.value.path == "$.codecs[2].configuration"
    with pytest.raises(MetadataError, match="cannot code dtype"):
        build(
            [
                {"name": "numcodecs.astype", "configuration": {"encode_dtype": "<i2", "decode_dtype": "<i4"}},
                LE,
            ],
            "S3",
            (4,),
        )


@pytest.mark.parametrize("name", ["numcodecs.pcodec", "numcodecs.zfpy"])
def test_numcodecs_array_bytes_codecs_need_their_package(name: str) -> None:
    try:
        numcodecs.get_codec({"id": name.removeprefix("numcodecs.")})
    except numcodecs.errors.UnknownCodecError:
        with pytest.raises(UnsupportedError, match=name):
            build([{"name": name, "configuration": {}}], "float64", (4,))
    else:
        roundtrip([{"name": name, "configuration": {}}], np.linspace(0, 1, 4))


class _HalfCodec:
    """A stand-in numcodecs array->bytes codec: float64 stored as float32."""

    def encode(self, buf: np.ndarray) -> bytes:
        return np.asarray(buf, dtype="<f4").tobytes()

    def decode(self, buf: bytes) -> np.ndarray:
        if len(buf) % 4:
            raise ValueError("bad length")
        return np.frombuffer(buf, dtype="<f4")


def test_numcodecs_array_bytes_wrapper() -> None:
    codec = NumcodecsArrayBytes("numcodecs.half", _HalfCodec())
    s = spec((2, 2), "float64")
    data = np.array([[0.5, 1.5], [2.0, -4.0]])
    encoded = codec.encode(data, s)
    assert len(encoded) == 16
    assert np.array_equal(codec.decode(encoded, s), data)
    with pytest.raises(CodecError, match="decoding failed"):
        codec.decode(b"abc", s)
    with pytest.raises(CodecError, match="encoding failed"):
        codec.encode(np.array(["x"], dtype=object), spec((1,), object, ""))


# ------------------------------------------------------------------------------------------- pipeline


@pytest.mark.parametrize(
    ("codecs", "path", "message"),
    [
        ([{"name": "crc32c"}], "$.codecs[0]", "before the array->bytes"),
        (["crc32c", "bytes"], "$.codecs[0]", "before the array->bytes"),
        (["bytes", "bytes"], "$.codecs[1]", "only one array->bytes"),
        (
            ["bytes", {"name": "transpose", "configuration": {"order": [0]}}],
            "$.codecs[1]",
            "after the array->bytes",
        ),
        ([{"name": "transpose", "configuration": {"order": [0]}}], "$.codecs", "at least one array->bytes"),
    ],
)
def test_chain_order_errors(codecs: list[Any], path: str, message: str) -> None:
    with pytest.raises(MetadataError, match=message) as info:
        build(codecs, "uint8", (4,))
    assert info.value.path == path


def test_pipeline_parts_sizes_and_json() -> None:
    chain = [
        {"name": "transpose", "configuration": {"order": [1, 0]}},
        LE,
        {"name": "crc32c"},
        {"name": "gzip", "configuration": {"level": 1}},
    ]
    p = build(chain, "int16", (2, 3))
    assert [c.name for c in p.array_array] == ["transpose"] and p.array_bytes.name == "bytes"
    assert [c.name for c in p.bytes_bytes] == ["crc32c", "gzip"]
    assert p.encoded_size(spec((2, 3), "int16")) is None
    assert build(chain[:3], "int16", (2, 3)).encoded_size(spec((2, 3), "int16")) == 16
    assert p.to_json() == chain
    assert p.sharding is None
    data = np.arange(6, dtype=np.int16).reshape(2, 3)
    assert np.array_equal(
        p.decode_array(p.encode_array(data, spec((2, 3), "int16")), spec((2, 3), "int16")), data
    )


def test_build_codec_dispatches_every_meta() -> None:
    metas = parse_codecs([LE, {"name": "gzip", "configuration": {"level": 1}}])
    assert [build_codec(m, np.dtype("int32")).name for m in metas] == ["bytes", "gzip"]


def test_decode_into_native_read_only_is_allowed() -> None:
    p = build([LE], "int32", (3,))
    out = p.decode(np.arange(3, dtype="<i4").tobytes(), spec((3,), "int32"))
    assert out.tolist() == [0, 1, 2]


def test_lenient_warnings_do_not_fire_for_complete_metadata() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parse_codecs(
            [
                LE,
                {
                    "name": "blosc",
                    "configuration": {
                        "cname": "lz4",
                        "clevel": 1,
                        "shuffle": "noshuffle",
                        "typesize": 4,
                        "blocksize": 0,
                    },
                },
            ]
        )


@pytest.mark.parametrize(
    "compressor",
    [
        {"name": "zstd", "configuration": {"level": 1, "checksum": False}},
        {
            "name": "blosc",
            "configuration": {
                "cname": "lz4",
                "clevel": 5,
                "shuffle": "shuffle",
                "typesize": 4,
                "blocksize": 0,
            },
        },
        {"name": "gzip", "configuration": {"level": 1}},
        {"name": "crc32c"},
    ],
)
def test_the_compressor_reads_strided_and_contiguous_chunks_as_their_c_order_bytes(compressor: dict) -> None:
    """Chunks go to the compressor as the chunk's own memory (no bytes object in between): a strided view,
    a contiguous one and another dtype's values give the bytes of the chunk's C-order copy."""
    store, other = rectizarr.MemoryStore(), rectizarr.MemoryStore()
    a = rectizarr.create_array(
        store, shape=(40, 30), dtype="<i4", chunks=(20, 15), compressors=[compressor], fill_value=-1
    )
    big = np.arange(80 * 90, dtype="<i4").reshape(80, 90)
    a[...] = big[::2, ::3]  # every chunk a strided view of the caller's data
    assert np.array_equal(a[...], big[::2, ::3])
    same = rectizarr.create_array(
        other, shape=(20, 15), dtype="<i4", chunks=(20, 15), compressors=[compressor], fill_value=-1
    )
    same[...] = np.ascontiguousarray(big[::2, ::3][:20, 15:])  # a contiguous chunk
    assert store.get("c/0/1") == other.get("c/0/0")
    a[20:, :15] = np.arange(300, dtype="<i8").reshape(20, 15)  # another dtype: cast first
    same[...] = np.arange(300, dtype="<i4").reshape(20, 15)
    assert store.get("c/1/0") == other.get("c/0/0")
    assert np.array_equal(a[20:, :15], np.arange(300).reshape(20, 15))


_SHARD_AFTER = {
    "name": "sharding_indexed",
    "configuration": {"chunk_shape": [2], "codecs": [LE], "index_codecs": [LE], "index_location": "end"},
}


@pytest.mark.parametrize(
    ("dtype", "fill", "codec", "values"),
    [
        (
            "i4",
            7,
            {"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}},
            [5, 5, 5, 5, 7, 14, 21, 28],
        ),
        (
            "f8",
            5.0,
            {
                "name": "numcodecs.fixedscaleoffset",
                "configuration": {"offset": 1.0, "scale": 10, "dtype": "<f8", "astype": "<i4"},
            },
            [2.0, 2.0, 1.5, 1.5, 5.0, 5.0, 0.5, 0.7],
        ),
        (
            "f4",
            1.5,
            {"name": "numcodecs.quantize", "configuration": {"digits": 3, "dtype": "<f4"}},
            [1.5, 1.5, 0.25, 1.5, 1.5, 1.5, 3.0, 1.5],
        ),
        (
            "i4",
            3,
            {"name": "numcodecs.astype", "configuration": {"encode_dtype": "<i2", "decode_dtype": "<i4"}},
            [3, 3, 1, 2, 3, 3, 3, 9],
        ),
    ],
)
def test_a_shard_after_a_numcodecs_filter_reads_and_writes_as_zarr_python(
    tmp_path: Any, dtype: str, fill: Any, codec: dict[str, Any], values: list[Any]
) -> None:
    """An inner chunk of a shard behind a ``numcodecs.*`` array -> array codec that is not stored holds the
    fill value cast to the encoded dtype (zarr-python's reading: it leaves inner chunks out whose encoded
    values equal it), not the fill value encoded: each library reads the other's shards alike. (The
    encoded fill was cached per dtype whatever the fill value: a fill of 5.0 read unwritten values as 0.)"""
    zarr = pytest.importorskip("zarr")
    want = np.asarray(values, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.create_array(
            str(tmp_path / "zp"),
            shape=(8,),
            chunks=(8,),
            dtype=dtype,
            fill_value=fill,
            filters=[codec],
            serializer=_SHARD_AFTER,
            compressors=None,
        )
        z[:] = want
        zp_reads = z[:]
    assert np.array_equal(rectizarr.open_array(str(tmp_path / "zp"))[:], zp_reads)

    a = rectizarr.create_array(
        str(tmp_path / "rz"),
        shape=(8,),
        chunks=(8,),
        dtype=dtype,
        fill_value=fill,
        codecs=[codec, _SHARD_AFTER],
    )
    a[1:3] = want[1:3]
    a[6:] = want[6:]
    mine = a[:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.array_equal(zarr.open_array(str(tmp_path / "rz"))[:], mine)
    a[...] = want
    assert np.array_equal(rectizarr.open_array(str(tmp_path / "rz"))[:], zp_reads)


def test_a_numcodecs_compressor_that_cannot_encode_raises_a_codec_error(tmp_path: Any) -> None:
    """numcodecs' own ValueError (shuffle: 3 bytes in elements of 2) is a CodecError naming the codec, and
    nothing is stored."""
    a = rectizarr.create_array(
        str(tmp_path / "s"),
        shape=(3,),
        chunks=(3,),
        dtype="u1",
        fill_value=0,
        codecs=[{"name": "bytes"}, {"name": "numcodecs.shuffle", "configuration": {"elementsize": 2}}],
    )
    with pytest.raises(CodecError, match=r"numcodecs\.shuffle.*elementsize"):
        a[:] = [1, 2, 3]
    assert not (tmp_path / "s" / "c").exists() and np.array_equal(a[:], [0, 0, 0])
