"""Chunk key encodings: ``default`` and ``v2`` (spec-notes §9 items 26, 31), and the registered ones beyond
them (zarr-extensions: fanout, prefix, suffix, template):
keys per their registry READMEs, round trips through rectizarr, and hand-made stores read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.core.chunk_keys import ChunkKeyEncoding, parse_chunk_key_encoding
from rectizarr.errors import MetadataError, SelectionError, UnsupportedError
from rectizarr.stores import LocalStore

# --- chunk key encodings (items 26, 31) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "sep", "coords", "key"),
    [
        ("default", "/", (1, 23, 45), "c/1/23/45"),
        ("default", ".", (1, 23, 45), "c.1.23.45"),
        ("v2", ".", (1, 23, 45), "1.23.45"),
        ("v2", "/", (1, 23, 45), "1/23/45"),
        ("default", "/", (), "c"),
        ("default", ".", (), "c"),
        ("v2", ".", (), "0"),
        ("v2", "/", (), "0"),
        ("default", "/", (0, 0), "c/0/0"),
        ("v2", ".", (7,), "7"),
    ],
)
def test_chunk_key_table(name: Any, sep: Any, coords: tuple[int, ...], key: str) -> None:
    enc = ChunkKeyEncoding(name, sep)
    assert enc.encode(coords) == key
    assert enc.encode_many(np.array([coords, coords], dtype=np.int64).reshape(2, len(coords))) == [key, key]
    assert enc.decode(key, ndim=len(coords)) == coords
    assert enc.to_json() == {"name": name, "configuration": {"separator": sep}}


@pytest.mark.parametrize(
    ("enc", "key"),
    [
        (ChunkKeyEncoding("default", "/"), "zarr.json"),
        (ChunkKeyEncoding("default", "/"), "c.0"),
        (ChunkKeyEncoding("default", "/"), "c/01"),
        (ChunkKeyEncoding("default", "/"), "c/-1"),
        (ChunkKeyEncoding("default", "/"), "c/+1"),
        (ChunkKeyEncoding("default", "/"), "c//1"),
        (ChunkKeyEncoding("default", "/"), "c/1/"),
        (ChunkKeyEncoding("default", "/"), "c/1/zarr.json"),
        (ChunkKeyEncoding("default", "/"), "c/\u0661"),
        (ChunkKeyEncoding("default", "."), "c/0"),
        (ChunkKeyEncoding("default", "/"), "d/0"),
        (ChunkKeyEncoding("v2", "."), "zarr.json"),
        (ChunkKeyEncoding("v2", "."), ".zarray"),
        (ChunkKeyEncoding("v2", "."), "0/1"),
        (ChunkKeyEncoding("v2", "/"), "c/0"),
        (ChunkKeyEncoding("v2", "/"), ""),
    ],
)
def test_not_chunk_keys(enc: ChunkKeyEncoding, key: str) -> None:
    assert enc.decode(key) is None


def test_decode_ndim() -> None:
    d = ChunkKeyEncoding("default", "/")
    assert d.decode("c/1/2") == (1, 2)
    assert d.decode("c/1/2", ndim=3) is None
    assert d.decode("c", ndim=1) is None
    v = ChunkKeyEncoding("v2", ".")
    assert v.decode("0") == (0,)
    assert v.decode("0", ndim=0) == ()
    assert v.decode("1", ndim=0) is None


def test_encode_many() -> None:
    enc = ChunkKeyEncoding("default", "/")
    coords = np.array([[0, 1, 2], [10, 200, 3000]], dtype=np.uint32)
    assert enc.encode_many(coords) == ["c/0/1/2", "c/10/200/3000"]
    assert enc.encode_many(np.empty((0, 3), dtype=np.int64)) == []
    assert ChunkKeyEncoding("v2", ".").encode_many(np.zeros((3, 0), dtype=np.int64)) == ["0", "0", "0"]
    for bad in (np.array([[1, -1]]), np.array([1, 2]), np.array([[1.0]])):
        with pytest.raises(SelectionError):
            enc.encode_many(bad)
    for coords_bad in [(1, -1), (1.0,), (True,)]:
        with pytest.raises(SelectionError):
            enc.encode(coords_bad)  # type: ignore[arg-type]
    assert enc.encode((np.int64(3), np.uint8(4))) == "c/3/4"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "name", "sep"),
    [
        ({"name": "default", "configuration": {"separator": "/"}}, "default", "/"),
        ({"name": "default", "configuration": {"separator": "."}}, "default", "."),
        ({"name": "default"}, "default", "/"),  # tensorstore
        ({"name": "default", "configuration": {}}, "default", "/"),
        ({"name": "v2"}, "v2", "."),
        ({"name": "v2", "configuration": {"separator": "/"}}, "v2", "/"),
        ("default", "default", "/"),
        ("v2", "v2", "."),
        ({"name": "v2", "must_understand": True}, "v2", "."),
    ],
)
def test_parse_chunk_key_encoding(value: Any, name: str, sep: str) -> None:
    enc = parse_chunk_key_encoding(value)
    assert (enc.name, enc.separator) == (name, sep)
    assert parse_chunk_key_encoding(enc.to_json()) == enc


K = "$.chunk_key_encoding"


@pytest.mark.parametrize(
    ("value", "path", "unsupported"),
    [
        ({"name": "default", "configuration": {"separator": "-"}}, f"{K}.configuration.separator", False),
        ({"name": "v2", "configuration": {"separator": 1}}, f"{K}.configuration.separator", False),
        ({"name": "default", "configuration": {"separator": "/", "x": 1}}, f"{K}.configuration.x", False),
        ({"name": "default", "configuration": "/"}, f"{K}.configuration", False),
        ({"name": "default", "separator": "/"}, f"{K}.separator", False),
        ({"name": "default", "must_understand": "yes"}, f"{K}.must_understand", False),
        ({"configuration": {"separator": "/"}}, f"{K}.name", False),
        ({"name": 2}, f"{K}.name", False),
        (["default"], K, False),
        (None, K, False),
        ({"name": "custom"}, f"{K}.name", True),
        ("zarrs.hashed", f"{K}.name", True),  # (suffix is read since the registry encodings were added)
    ],
)
def test_invalid_chunk_key_encoding(value: Any, path: str, unsupported: bool) -> None:
    with pytest.raises(MetadataError) as e:
        parse_chunk_key_encoding(value)
    assert e.value.path == path
    assert isinstance(e.value, UnsupportedError) == unsupported


def test_chunk_key_encoding_constructor_validation() -> None:
    with pytest.raises(MetadataError):
        ChunkKeyEncoding("default", "-")  # type: ignore[arg-type]
    with pytest.raises(UnsupportedError):
        ChunkKeyEncoding("v3", "/")  # type: ignore[arg-type]


# --- the registered encodings beyond default and v2 ---------------------------------------------------

FANOUT_101 = {"name": "fanout", "configuration": {"max_children": 101}}


@pytest.mark.parametrize(
    ("coords", "key"),
    [
        ((), "c"),
        ((123,), "d0/1/23/c"),
        ((1234, 5, 67890), "d0/12/34/d1/5/d2/6/78/90/c"),  # the README's table
        ((0, 100), "d0/0/d1/1/0/c"),
    ],
)
def test_fanout_keys_are_the_readmes(coords: tuple[int, ...], key: str) -> None:
    enc = parse_chunk_key_encoding(FANOUT_101)
    assert enc.encode(coords) == key
    assert enc.decode(key, len(coords)) == coords
    if coords:
        assert enc.encode_many(np.array([coords])) == [key]


def test_fanout_refuses_other_keys_and_bad_configurations() -> None:
    enc = parse_chunk_key_encoding(FANOUT_101)
    for key in ("d0/01/23/c", "d0/100/c", "d0/c", "d1/3/c", "d0/3", "c/3", "d0/3/d1/4/c"):
        assert enc.decode(key, 1) is None
    assert parse_chunk_key_encoding("fanout").max_children == 1001  # the registered default
    with pytest.raises(MetadataError, match=r"max_children") as e:
        parse_chunk_key_encoding({"name": "fanout", "configuration": {"max_children": 3}})
    assert e.value.path == "$.chunk_key_encoding.configuration.max_children"
    with pytest.raises(MetadataError, match="unknown key 'fan'"):
        parse_chunk_key_encoding({"name": "fanout", "configuration": {"fan": 3}})


def test_prefix_and_suffix_keys_are_the_readmes() -> None:
    prefix = parse_chunk_key_encoding(
        {"name": "prefix", "configuration": {"prefix": "x/", "base_encoding": "v2"}}
    )
    assert prefix.encode((0, 0, 0)) == "x/0.0.0"
    assert prefix.decode("x/0.0.0", 3) == (0, 0, 0)
    assert prefix.decode("0.0.0", 3) is None
    tiff = parse_chunk_key_encoding(
        {"name": "suffix", "configuration": {"suffix": ".tiff", "base-encoding": {"name": "default"}}}
    )
    assert tiff.encode((1, 2)) == "c/1/2.tiff"
    assert tiff.decode("c/1/2.tiff", 2) == (1, 2)
    assert tiff.decode("c/1/2", 2) is None
    assert tiff.to_json()["configuration"]["base_encoding"] == {
        "name": "default",
        "configuration": {"separator": "/"},
    }
    zipped = parse_chunk_key_encoding(
        {"name": "suffix", "configuration": {"suffix": ".shard.zip", "base_encoding": {"name": "v2"}}}
    )
    assert zipped.encode_many(np.array([[3, 4]])) == ["3.4.shard.zip"]


@pytest.mark.parametrize(
    ("config", "where"),
    [
        ({"prefix": "/x", "base_encoding": "v2"}, "prefix"),
        ({"prefix": "a/../b", "base_encoding": "v2"}, "prefix"),
        ({"prefix": "zarr.json", "base_encoding": "v2"}, "prefix"),
        ({"prefix": "", "base_encoding": "v2"}, "prefix"),
        ({"prefix": "x"}, None),
        (
            {"prefix": "x", "base_encoding": {"name": "v2", "configuration": {"separator": "-"}}},
            "base_encoding.configuration.separator",
        ),
    ],
)
def test_prefix_refuses_what_its_readme_forbids(config: dict[str, Any], where: str | None) -> None:
    with pytest.raises(MetadataError) as e:
        parse_chunk_key_encoding({"name": "prefix", "configuration": config})
    assert e.value.path == "$.chunk_key_encoding.configuration" + (f".{where}" if where else "")


def test_unknown_encodings_name_themselves() -> None:
    with pytest.raises(UnsupportedError, match=r"'zarrs\.hashed'") as e:
        parse_chunk_key_encoding({"name": "zarrs.hashed", "configuration": {}})
    assert e.value.path == "$.chunk_key_encoding.name"


# the registry's chunk-key-encodings/template/examples.tsv: format, separator, coordinates, key
TEMPLATE_EXAMPLES = [
    ("c/{*}", "/", (11, 22, 33), "c/11/22/33"),
    ("{*}", ".", (11, 22, 33), "11.22.33"),
    ("prefix/{*}", "/", (11, 22, 33), "prefix/11/22/33"),
    ("{*}.suffix", "_", (11, 22, 33), "11_22_33.suffix"),
    ("{2}/{0}/{1}", ".", (11, 22, 33), "33/11/22"),
    ("{-1}/{*}", "/", (11, 22, 33), "33/11/22"),
    ("{*:04}", "/", (11, 22, 33), "0011/0022/0033"),
    ("{*:02}", "/", (111, 2, 33), "111/02/33"),
]


@pytest.mark.parametrize(
    ("fmt", "sep", "coords", "key"), TEMPLATE_EXAMPLES, ids=[e[0] for e in TEMPLATE_EXAMPLES]
)
def test_template_keys_are_the_registry_examples(
    fmt: str, sep: str, coords: tuple[int, ...], key: str
) -> None:
    enc = parse_chunk_key_encoding({"name": "template", "configuration": {"format": fmt, "separator": sep}})
    assert enc.encode(coords) == key
    assert enc.encode_many(np.array([coords])) == [key]
    assert enc.decode(key, 3) == coords
    assert enc.decode(key) == coords
    assert enc.to_json() == {"name": "template", "configuration": {"format": fmt, "separator": sep}}


def test_template_reads_the_readmes_field_name_and_escapes() -> None:
    enc = parse_chunk_key_encoding({"name": "template", "configuration": {"template": "{{x}}-{1}_{0:03}"}})
    assert enc.encode((4, 5)) == "{x}-5_004"
    assert enc.decode("{x}-5_004", 2) == (4, 5)
    assert enc.decode("{x}-5_04", 2) is None  # not the canonical width
    assert enc.to_json()["configuration"] == {"format": "{{x}}-{1}_{0:03}"}


def test_template_dimensionality_must_fit() -> None:
    enc = parse_chunk_key_encoding({"name": "template", "configuration": {"format": "{0}/{1}"}})
    for coords in [(1,), (1, 2, 3)]:
        with pytest.raises(MetadataError, match="template"):
            enc.encode(coords)
    assert enc.decode("1/2", 3) is None
    rest = parse_chunk_key_encoding(
        {"name": "template", "configuration": {"format": "{0}/{-1}/{*}", "separator": "."}}
    )
    with pytest.raises(MetadataError, match="no coordinate is left"):
        rest.encode((1, 2))
    assert rest.encode((1, 2, 3, 4)) == "1/4/2.3"


@pytest.mark.parametrize(
    ("config", "where", "message"),
    [
        ({"format": "/{0}"}, ".format", "leading /"),
        ({"format": "a/../{0}"}, ".format", r"\.\."),
        ({"format": "zarr.json{0}"}, ".format", "zarr.json"),
        ({"format": "chunks"}, ".format", "no {...} expression"),
        ({"format": "{*}"}, "", "needs a separator"),
        ({"format": "{*}/{*}", "separator": "."}, ".format", "more than one"),
        ({"format": "{0:5}"}, ".format", "malformed"),
        ({"format": "{0}", "sep": "."}, ".sep", "unknown key"),
    ],
)
def test_malformed_templates_name_the_path(config: dict[str, Any], where: str, message: str) -> None:
    with pytest.raises(MetadataError, match=message) as e:
        parse_chunk_key_encoding({"name": "template", "configuration": config})
    assert e.value.path == "$.chunk_key_encoding.configuration" + where


ENCODINGS = [
    (FANOUT_101, {(0, 0): "d0/0/d1/0/c", (2, 1): "d0/2/d1/1/c"}),
    (
        {"name": "template", "configuration": {"format": "tiles/{1}/{0:03}.bin"}},
        {(0, 0): "tiles/0/000.bin", (2, 1): "tiles/1/002.bin"},
    ),
    (
        {"name": "prefix", "configuration": {"prefix": "chunks/", "base_encoding": {"name": "default"}}},
        {(0, 0): "chunks/c/0/0", (2, 1): "chunks/c/2/1"},
    ),
    (
        {"name": "suffix", "configuration": {"suffix": ".bin", "base_encoding": {"name": "v2"}}},
        {(0, 0): "0.0.bin", (2, 1): "2.1.bin"},
    ),
]


@pytest.mark.parametrize(("enc", "keys"), ENCODINGS, ids=["fanout", "template", "prefix", "suffix"])
def test_round_trip_writes_the_registered_keys(
    tmp_path: Path, enc: dict[str, Any], keys: dict[Any, str]
) -> None:
    data = np.arange(30, dtype="int32").reshape(6, 5)
    a = rectizarr.create_array(
        LocalStore(tmp_path / "a"),
        shape=data.shape,
        dtype=data.dtype,
        chunks=(2, 3),
        chunk_key_encoding=enc,
        compressors=None,
    )
    a[...] = data
    for key in keys.values():
        assert (tmp_path / "a" / key).is_file()
    doc = json.loads((tmp_path / "a" / "zarr.json").read_text())
    assert doc["chunk_key_encoding"]["name"] == enc["name"]
    np.testing.assert_array_equal(rectizarr.open_array(LocalStore(tmp_path / "a"))[...], data)
    assert rectizarr.open_array(LocalStore(tmp_path / "a")).nchunks_initialized == 6


@pytest.mark.parametrize(("enc", "keys"), ENCODINGS, ids=["fanout", "template", "prefix", "suffix"])
def test_hand_made_stores_read(tmp_path: Path, enc: dict[str, Any], keys: dict[Any, str]) -> None:
    root = tmp_path / "h"
    root.mkdir()
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [6, 5],
        "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3]}},
        "chunk_key_encoding": enc,
        "fill_value": 7,
        "codecs": [{"name": "bytes"}],
    }
    (root / "zarr.json").write_text(json.dumps(doc))
    for coords, key in keys.items():
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes([coords[0] * 10 + coords[1]]) * 6)
    out = rectizarr.open_array(LocalStore(root))[...]
    expect = np.full((6, 5), 7, dtype="uint8")
    expect[0:2, 0:3] = 0
    expect[4:6, 3:5] = 21
    np.testing.assert_array_equal(out, expect)
