"""`rectizarr validate` checks the configuration of every registered extension rectizarr supports against
what its zarr-extensions schema allows (the bounds, enums, required and forbidden fields of each
schema.json), reporting the extension's name and the JSON path; unsupported registered codecs are named
with what implements them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import rectizarr

BYTES = {"name": "bytes", "configuration": {"endian": "little"}}


def _doc(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [8, 8],
        "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0.0,
        "codecs": [BYTES],
        "attributes": {},
    }
    doc.update(over)
    return doc


def _errors(tmp_path: Path, doc: dict[str, Any]) -> list[Any]:
    (tmp_path / "zarr.json").write_text(json.dumps(doc))
    return list(rectizarr.validate(str(tmp_path)).errors)


def _codec(name: str, configuration: dict[str, Any], position: str = "after") -> list[Any]:
    codec = {"name": name, "configuration": configuration}
    return [BYTES, codec] if position == "after" else [codec, BYTES] if position == "before" else [codec]


# (the document's changed fields, the JSON path of the error, the extension named)
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "zstd level above 22",
        {"codecs": _codec("zstd", {"level": 23})},
        "$.codecs[1].configuration.level",
        "codec 'zstd'",
    ),
    (
        "zstd level required",
        {"codecs": _codec("zstd", {"checksum": False})},
        "$.codecs[1].configuration.level",
        "codec 'zstd'",
    ),
    (
        "zstd checksum boolean",
        {"codecs": _codec("zstd", {"level": 1, "checksum": "yes"})},
        "$.codecs[1].configuration.checksum",
        "codec 'zstd'",
    ),
    (
        "gzip level 0..9",
        {"codecs": _codec("gzip", {"level": 10})},
        "$.codecs[1].configuration.level",
        "codec 'gzip'",
    ),
    (
        "blosc cname enum",
        {
            "codecs": _codec(
                "blosc", {"cname": "brotli", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}
            )
        },
        "$.codecs[1].configuration.cname",
        "codec 'blosc'",
    ),
    (
        "blosc clevel 0..9",
        {
            "codecs": _codec(
                "blosc", {"cname": "lz4", "clevel": 10, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}
            )
        },
        "$.codecs[1].configuration.clevel",
        "codec 'blosc'",
    ),
    (
        "blosc shuffle enum",
        {
            "codecs": _codec(
                "blosc", {"cname": "lz4", "clevel": 5, "shuffle": "twice", "typesize": 4, "blocksize": 0}
            )
        },
        "$.codecs[1].configuration.shuffle",
        "codec 'blosc'",
    ),
    (
        "bytes endian enum",
        {"codecs": [{"name": "bytes", "configuration": {"endian": "middle"}}]},
        "$.codecs[0].configuration.endian",
        "codec 'bytes'",
    ),
    (
        "transpose order unique",
        {"codecs": _codec("transpose", {"order": [0, 0]}, "before")},
        "$.codecs[0].configuration.order",
        "codec 'transpose'",
    ),
    (
        "transpose order required",
        {"codecs": _codec("transpose", {}, "before")},
        "$.codecs[0].configuration.order",
        "codec 'transpose'",
    ),
    (
        "crc32c takes no configuration",
        {"codecs": _codec("crc32c", {"seed": 1})},
        "$.codecs[1].configuration.seed",
        "codec 'crc32c'",
    ),
    (
        "sharding chunk_shape >= 1",
        {
            "codecs": _codec(
                "sharding_indexed",
                {"chunk_shape": [0, 2], "codecs": [BYTES], "index_codecs": [BYTES]},
                "alone",
            )
        },
        "$.codecs[0].configuration.chunk_shape[0]",
        "codec 'sharding_indexed'",
    ),
    (
        "sharding index_location enum",
        {
            "codecs": _codec(
                "sharding_indexed",
                {
                    "chunk_shape": [2, 2],
                    "codecs": [BYTES],
                    "index_codecs": [BYTES],
                    "index_location": "middle",
                },
                "alone",
            )
        },
        "$.codecs[0].configuration.index_location",
        "codec 'sharding_indexed'",
    ),
    (
        "inner codec of a shard",
        {
            "codecs": _codec(
                "sharding_indexed",
                {
                    "chunk_shape": [2, 2],
                    "codecs": [BYTES, {"name": "zstd", "configuration": {"level": 99}}],
                    "index_codecs": [BYTES],
                },
                "alone",
            )
        },
        "$.codecs[0].configuration.codecs[1].configuration.level",
        "codec 'zstd'",
    ),
    (
        "bitround keepbits >= 0",
        {"codecs": _codec("bitround", {"keepbits": -1}, "before")},
        "$.codecs[0].configuration.keepbits",
        "codec 'bitround'",
    ),
    (
        "packbits padding_encoding enum",
        {
            "data_type": "bool",
            "fill_value": False,
            "codecs": _codec("packbits", {"padding_encoding": "both"}, "alone"),
        },
        "$.codecs[0].configuration.padding_encoding",
        "codec 'packbits'",
    ),
    (
        "datetime64 unit enum",
        {
            "data_type": {"name": "datetime64", "configuration": {"unit": "fortnight", "scale_factor": 1}},
            "fill_value": 0,
        },
        "$.data_type.configuration.unit",
        "data type 'datetime64'",
    ),
    (
        "datetime64 scale_factor >= 1",
        {
            "data_type": {"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 0}},
            "fill_value": 0,
        },
        "$.data_type.configuration.scale_factor",
        "data type 'numpy.datetime64'",
    ),
    (
        "fixed_length_utf32 length_bytes multiple of 4",
        {"data_type": {"name": "fixed_length_utf32", "configuration": {"length_bytes": 3}}, "fill_value": ""},
        "$.data_type.configuration.length_bytes",
        "data type 'fixed_length_utf32'",
    ),
    (
        "fixed-length-bytes length_bits",
        {"data_type": {"name": "fixed-length-bytes", "configuration": {"length_bits": 12}}, "fill_value": ""},
        "$.data_type.configuration.length_bits",
        "data type 'fixed-length-bytes'",
    ),
    (
        "regular chunk_shape >= 1",
        {"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [0, 4]}}},
        "$.chunk_grid.configuration.chunk_shape[0]",
        "chunk grid 'regular'",
    ),
    (
        "default separator enum",
        {"chunk_key_encoding": {"name": "default", "configuration": {"separator": "-"}}},
        "$.chunk_key_encoding.configuration.separator",
        "chunk key encoding 'default'",
    ),
    (
        "fanout max_children > 3",
        {"chunk_key_encoding": {"name": "fanout", "configuration": {"max_children": 3}}},
        "$.chunk_key_encoding.configuration.max_children",
        "chunk key encoding 'fanout'",
    ),
    (
        "prefix must not start with /",
        {
            "chunk_key_encoding": {
                "name": "prefix",
                "configuration": {"prefix": "/x", "base_encoding": "default"},
            }
        },
        "$.chunk_key_encoding.configuration.prefix",
        "chunk key encoding 'prefix'",
    ),
    (
        "template fits the dimensionality",
        {"chunk_key_encoding": {"name": "template", "configuration": {"format": "{0}/{1}/{2}"}}},
        "$.chunk_key_encoding",
        "chunk key encoding 'template'",
    ),
    (
        "suffix base_encoding required",
        {"chunk_key_encoding": {"name": "suffix", "configuration": {"suffix": ".tiff"}}},
        "$.chunk_key_encoding.configuration",
        "chunk key encoding 'suffix'",
    ),
]


@pytest.mark.parametrize(("over", "path", "named"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_schema_violations_are_reported_naming_the_extension(
    tmp_path: Path, over: dict[str, Any], path: str, named: str
) -> None:
    errors = _errors(tmp_path, _doc(**over))
    found = [e for e in errors if e.json_path == path]
    assert found, [(e.json_path, e.message) for e in errors]
    assert found[0].key == "zarr.json"
    assert named in found[0].message, found[0].message


@pytest.mark.parametrize(
    "over",
    [
        {"codecs": _codec("zstd", {"level": -131072, "checksum": True})},
        {
            "codecs": _codec(
                "blosc",
                {"cname": "zstd", "clevel": 9, "shuffle": "bitshuffle", "typesize": 4, "blocksize": 0},
            )
        },
        {
            "codecs": _codec(
                "sharding_indexed",
                {
                    "chunk_shape": [2, 2],
                    "codecs": [BYTES],
                    "index_codecs": [BYTES, {"name": "crc32c"}],
                    "index_location": "start",
                },
                "alone",
            )
        },
        {
            "data_type": {"name": "datetime64", "configuration": {"unit": "μs", "scale_factor": 10}},
            "fill_value": "NaT",
        },
        {"chunk_key_encoding": {"name": "fanout", "configuration": {"max_children": 4}}},
        {
            "chunk_key_encoding": {
                "name": "suffix",
                "configuration": {"suffix": ".bin", "base_encoding": {"name": "v2"}},
            }
        },
        {
            "chunk_key_encoding": {
                "name": "template",
                "configuration": {"format": "{-1}/{*}", "separator": "_"},
            }
        },
    ],
    ids=["zstd", "blosc", "sharding", "datetime64", "fanout", "suffix", "template"],
)
def test_configurations_the_schemas_allow_validate_clean(tmp_path: Path, over: dict[str, Any]) -> None:
    assert _errors(tmp_path, _doc(**over)) == []


@pytest.mark.parametrize(
    ("name", "provider"),
    [("jpeg", "imagecodecs"), ("n5_default", "N5"), ("arrow-ipc", "pyarrow"), ("nanovdb", "NanoVDB")],
)
def test_registered_codecs_not_built_in_say_what_implements_them(
    tmp_path: Path, name: str, provider: str
) -> None:
    errors = _errors(tmp_path, _doc(codecs=[{"name": name, "configuration": {}}]))
    found = [e for e in errors if e.json_path == "$.codecs[0].name"]
    assert found and found[0].rule == "codecs.unsupported"
    assert f"codec {name!r} (a codec registered in zarr-extensions)" in found[0].message
    assert provider in found[0].message
