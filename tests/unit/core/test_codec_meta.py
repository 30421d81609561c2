"""Codec metadata (``rectizarr.core.codec_meta``): parsing, canonical writing, short-hand names and aliases,
errors that carry the JSON path (the codecs at run time: tests/unit/codecs/test_codecs.py)."""

from __future__ import annotations

from typing import Any

import pytest

from rectizarr.core.codec_meta import (
    BitroundMeta,
    BytesMeta,
    NumcodecsMeta,
    VlenUtf8Meta,
    codecs_to_json,
    parse_codecs,
)
from rectizarr.errors import LenientMetadataWarning, MetadataError, UnsupportedError

LE = {"name": "bytes", "configuration": {"endian": "little"}}
BE = {"name": "bytes", "configuration": {"endian": "big"}}


CANONICAL: list[tuple[Any, dict[str, Any]]] = [
    ("bytes", {"name": "bytes"}),
    ({"name": "bytes", "configuration": {}}, {"name": "bytes"}),
    ({"name": "endian", "configuration": {"endian": "big"}}, BE),
    ("crc32c", {"name": "crc32c"}),
    ({"name": "crc32c", "configuration": {}}, {"name": "crc32c"}),
    ("vlen-utf8", {"name": "vlen-utf8", "configuration": {}}),
    ({"name": "numcodecs.vlen-utf8"}, {"name": "vlen-utf8", "configuration": {}}),
    ({"name": "numcodecs.vlen-bytes", "configuration": {}}, {"name": "vlen-bytes"}),
    (
        {"name": "gzip", "configuration": {"level": 1}, "must_understand": False},
        {"name": "gzip", "configuration": {"level": 1}},
    ),
    (
        {"name": "zstd", "configuration": {"level": 3}},
        {"name": "zstd", "configuration": {"level": 3, "checksum": False}},
    ),
    (
        {"name": "transpose", "configuration": {"order": [1, 0]}, "must_understand": True},
        {"name": "transpose", "configuration": {"order": [1, 0]}},
    ),
    (
        {"name": "bitround", "configuration": {"keepbits": 3}},
        {"name": "bitround", "configuration": {"keepbits": 3}},
    ),
]


@pytest.mark.parametrize(("raw", "canonical"), CANONICAL)
def test_parse_then_write_is_canonical(raw: Any, canonical: dict[str, Any]) -> None:
    written = codecs_to_json(parse_codecs([raw]))
    assert written == [canonical]
    assert codecs_to_json(parse_codecs(written)) == written


def test_short_hand_names_and_aliases() -> None:
    assert parse_codecs(["bytes", "vlen-utf8"]) == (BytesMeta(), VlenUtf8Meta())
    # zarr-extensions' bitround is native (integers too); numcodecs.bitround stays numcodecs'
    assert parse_codecs([{"name": "bitround", "configuration": {"keepbits": 2}}])[0] == BitroundMeta(
        keepbits=2
    )
    legacy = parse_codecs([{"name": "numcodecs.bitround", "configuration": {"keepbits": 2}}])[0]
    assert (
        isinstance(legacy, NumcodecsMeta) and legacy.codec_id == "bitround" and legacy.kind == "array_array"
    )


def test_sharding_writes_all_four_keys() -> None:
    raw = {
        "name": "sharding_indexed",
        "configuration": {"chunk_shape": [2], "codecs": ["bytes"], "index_codecs": [LE, "crc32c"]},
    }
    written = codecs_to_json(parse_codecs([raw]))[0]
    assert written["configuration"] == {
        "chunk_shape": [2],
        "codecs": [{"name": "bytes"}],
        "index_codecs": [LE, {"name": "crc32c"}],
        "index_location": "end",
    }


def test_sharding_missing_chains_get_defaults_with_a_warning() -> None:
    with pytest.warns(LenientMetadataWarning) as record:
        meta = parse_codecs([{"name": "sharding_indexed", "configuration": {"chunk_shape": [2]}}])[0]
    assert len(record) == 2
    written = codecs_to_json([meta])[0]["configuration"]
    assert written["codecs"] == [LE] and written["index_codecs"] == [LE, {"name": "crc32c"}]


@pytest.mark.parametrize(
    ("codecs", "path", "error"),
    [
        (
            [LE, {"name": "gzip", "configuration": {"level": "x"}}],
            "$.codecs[1].configuration.level",
            MetadataError,
        ),
        (
            [LE, {"name": "gzip", "configuration": {"level": 10}}],
            "$.codecs[1].configuration.level",
            MetadataError,
        ),
        ([LE, {"name": "gzip", "configuration": {}}], "$.codecs[1].configuration.level", MetadataError),
        ([LE, {"name": "gzip"}], "$.codecs[1]", MetadataError),
        (["gzip"], "$.codecs[0]", MetadataError),
        (
            [LE, {"name": "gzip", "configuration": {"level": 1, "foo": 2}}],
            "$.codecs[1].configuration.foo",
            MetadataError,
        ),
        (
            [{"name": "bytes", "configuration": {"endian": "middle"}}],
            "$.codecs[0].configuration.endian",
            MetadataError,
        ),
        (
            [{"name": "transpose", "configuration": {"order": [0, "a"]}}],
            "$.codecs[0].configuration.order[1]",
            MetadataError,
        ),
        ([{"name": "bytes", "configuration": []}], "$.codecs[0].configuration", MetadataError),
        ([{"name": "bytes", "must_understand": "false"}], "$.codecs[0].must_understand", MetadataError),
        ([{"name": "bytes", "extra": 1}], "$.codecs[0]", MetadataError),
        ([{"configuration": {}}], "$.codecs[0].name", MetadataError),
        ([3], "$.codecs[0]", MetadataError),
        ([{"name": "fancy", "must_understand": False}], "$.codecs[0].name", UnsupportedError),
        (["fancy"], "$.codecs[0].name", UnsupportedError),
        ([{"name": "numcodecs.nonesuch", "configuration": {}}], "$.codecs[0].name", UnsupportedError),
        (
            [{"name": "packbits", "configuration": {"padding_encoding": "middle"}}],
            "$.codecs[0].configuration.padding_encoding",
            MetadataError,
        ),  # zarrs' packbits, not numcodecs'
        (
            [{"name": "numcodecs.zlib", "configuration": {"id": "zlib"}}],
            "$.codecs[0].configuration.id",
            MetadataError,
        ),
        (
            [
                {
                    "name": "sharding_indexed",
                    "configuration": {"chunk_shape": [0], "codecs": ["bytes"], "index_codecs": ["bytes"]},
                }
            ],
            "$.codecs[0].configuration.chunk_shape[0]",
            MetadataError,
        ),
        (
            [
                {
                    "name": "sharding_indexed",
                    "configuration": {
                        "chunk_shape": [2],
                        "codecs": ["bytes", "nope"],
                        "index_codecs": ["bytes"],
                    },
                }
            ],
            "$.codecs[0].configuration.codecs[1].name",
            UnsupportedError,
        ),
        (
            [{"name": "blosc", "configuration": {"cname": "lz4", "shuffle": 1}}],
            "$.codecs[0].configuration.shuffle",
            MetadataError,
        ),
        ([], "$.codecs", MetadataError),
        ({"name": "bytes"}, "$.codecs", MetadataError),
    ],
)
def test_parse_errors_carry_the_json_path(codecs: Any, path: str, error: type[Exception]) -> None:
    with pytest.raises(error) as info:
        parse_codecs(codecs)
    assert type(info.value) is error
    assert isinstance(info.value, MetadataError) and info.value.path == path
    assert path in str(info.value)


def test_unknown_codec_error_names_it() -> None:
    with pytest.raises(UnsupportedError, match="'fancy'"):
        parse_codecs([{"name": "fancy", "must_understand": False}])
