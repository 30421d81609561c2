"""``numcodecs.vlen-array`` (object arrays of 1-d arrays): bit-exact with numcodecs' ``VLenArray`` both ways,
round trips through rectizarr arrays (partial writes, unwritten regions), malformed input as errors.
zarr-python 3.4.2 does not write it (no Zarr data type of its own holds such elements)."""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import pytest
from numcodecs import VLenArray

import rectizarr
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.build import build_pipeline
from rectizarr.core.codec_meta import codecs_to_json, parse_codecs
from rectizarr.errors import CodecError, MetadataError


def _codec(dtype: str) -> dict[str, Any]:
    return {"name": "numcodecs.vlen-array", "configuration": {"dtype": dtype}}


def _objects(*items: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    for i, x in enumerate(items):
        out[i] = x
    return out.reshape(shape or (len(items),))


def _pipeline(dtype: str, shape: tuple[int, ...]) -> tuple[Any, ChunkSpec]:
    spec = ChunkSpec(shape, np.dtype(object), np.array(b"", dtype=object))
    return build_pipeline(parse_codecs([_codec(dtype)]), spec.dtype, [np.array([s]) for s in shape]), spec


CASES = [
    ("<i4", _objects(np.array([1, 2, 3]), np.array([], dtype="i4"), np.array([7]))),
    (">i2", _objects(np.array([1, 2]), [5, 6], None, np.array([7]))),  # None: an empty element
    ("<f8", _objects(np.array([1.5, np.nan, -0.0]), np.array([np.inf]), shape=(1, 2))),
    ("u1", _objects(np.array([255, 0]), np.array(7), np.array([], dtype="u1"), shape=(3,))),  # 0-d: one value
    ("<c8", _objects(np.array([1 + 2j, -0.5j], dtype="c8"))),
    ("<i8", _objects(np.array([1.7, -2.2]))),  # cast as numcodecs casts (towards zero)
]


@pytest.mark.parametrize(("dtype", "values"), CASES)
def test_bit_exact_with_numcodecs_both_ways(dtype: str, values: np.ndarray) -> None:
    p, spec = _pipeline(dtype, values.shape)
    theirs = bytes(VLenArray(dtype).encode(values))
    assert bytes(p.encode(values, spec)) == theirs
    ours = p.decode(theirs, spec)
    expected = VLenArray(dtype).decode(theirs)
    assert ours.shape == values.shape and ours.dtype == object
    for got, want in zip(ours.reshape(-1), np.asarray(expected).reshape(-1), strict=True):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_the_configuration_round_trips() -> None:
    assert codecs_to_json(parse_codecs([_codec(">i2")])) == [_codec(">i2")]


def test_round_trip_through_an_array() -> None:
    data: dict[str, Any] = {}
    store = rectizarr.MemoryStore.in_dict(data)
    a = rectizarr.create_array(
        store, shape=(7,), chunks=(3,), dtype="bytes", serializer=_codec("<i4"), compressors=None
    )
    values = _objects(np.array([1, 2, 3]), np.array([], dtype="i4"), np.array([7]))
    a[:3] = values
    assert data["c/0"] == bytes(VLenArray("<i4").encode(values))
    a[3] = np.array([9, 9, 9])
    got = rectizarr.open_array(store)[...]
    assert [x.tolist() for x in got[:6]] == [[1, 2, 3], [], [7], [9, 9, 9], [], []]  # (fill b"": empty)
    assert isinstance(got[6], bytes) and got[6] == b""  # a chunk never written: the bytes type's fill value
    assert json.loads(data["zarr.json"])["codecs"][0] == _codec("<i4")


@pytest.mark.parametrize(
    "stored",
    [
        b"\x01\x00",  # no count
        struct.pack("<I", 3),  # count without elements
        struct.pack("<II", 2, 4) + b"\0\0\0\0",  # a count that is not the chunk's
        struct.pack("<II", 1, 6) + b"\0" * 6,  # 6 bytes are not whole int32 values
        struct.pack("<II", 1, 2**31) + b"\0" * 4,  # a length past the end
        struct.pack("<II", 1, 4) + b"\0" * 5,  # a byte after the last element
    ],
)
def test_corrupt_values_are_codec_errors(stored: bytes) -> None:
    p, spec = _pipeline("<i4", (1,))
    with pytest.raises(CodecError):
        p.decode(stored, spec)


@pytest.mark.parametrize(
    ("configuration", "message"),
    [({}, "takes a configuration"), ({"dtype": "nope"}, "invalid dtype"), ({"dtype": "O"}, "not supported")],
)
def test_bad_configurations(configuration: dict[str, Any], message: str) -> None:
    with pytest.raises(MetadataError, match=message) as e:
        build_pipeline(
            parse_codecs([{"name": "numcodecs.vlen-array", "configuration": configuration}]),
            np.dtype(object),
            [np.array([1])],
        )
    assert e.value.path == "$.codecs[0].configuration"


def test_only_object_arrays() -> None:
    with pytest.raises(MetadataError, match="codes object arrays"):
        build_pipeline(parse_codecs([_codec("<i4")]), np.dtype("i4"), [np.array([1])])


def test_elements_it_cannot_store() -> None:
    p, spec = _pipeline("<i4", (2,))
    with pytest.raises(CodecError, match="1-dimensional"):
        p.encode(_objects(np.zeros((2, 2)), None), spec)
    with pytest.raises(CodecError, match="not an array of int32"):
        p.encode(_objects("abc", None), spec)


def test_dates_are_refused_as_numcodecs_refuses_them() -> None:
    with pytest.raises(MetadataError, match="numbers only"):
        build_pipeline(parse_codecs([_codec("<M8[s]")]), np.dtype(object), [np.array([1])])
