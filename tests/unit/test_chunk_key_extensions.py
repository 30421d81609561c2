"""The registered chunk key encodings beyond ``default``/``v2`` (zarr-extensions: fanout, prefix, suffix):
keys per their registry READMEs, round trips through rectizarr, and hand-made stores read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.core.chunk_keys import parse_chunk_key_encoding
from rectizarr.errors import MetadataError, UnsupportedError
from rectizarr.stores import LocalStore

FANOUT_101 = {"name": "fanout", "configuration": {"max_children": 101}}


@pytest.mark.parametrize(("coords", "key"), [
    ((), "c"), ((123,), "d0/1/23/c"), ((1234, 5, 67890), "d0/12/34/d1/5/d2/6/78/90/c"),  # the README's table
    ((0, 100), "d0/0/d1/1/0/c"),
])
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
    prefix = parse_chunk_key_encoding({"name": "prefix", "configuration": {"prefix": "x/", "base_encoding": "v2"}})
    assert prefix.encode((0, 0, 0)) == "x/0.0.0"
    assert prefix.decode("x/0.0.0", 3) == (0, 0, 0)
    assert prefix.decode("0.0.0", 3) is None
    tiff = parse_chunk_key_encoding(
        {"name": "suffix", "configuration": {"suffix": ".tiff", "base-encoding": {"name": "default"}}})
    assert tiff.encode((1, 2)) == "c/1/2.tiff"
    assert tiff.decode("c/1/2.tiff", 2) == (1, 2)
    assert tiff.decode("c/1/2", 2) is None
    assert tiff.to_json()["configuration"]["base_encoding"] == {"name": "default", "configuration": {"separator": "/"}}
    zipped = parse_chunk_key_encoding(
        {"name": "suffix", "configuration": {"suffix": ".shard.zip", "base_encoding": {"name": "v2"}}})
    assert zipped.encode_many(np.array([[3, 4]])) == ["3.4.shard.zip"]


@pytest.mark.parametrize(("config", "where"), [
    ({"prefix": "/x", "base_encoding": "v2"}, "prefix"),
    ({"prefix": "a/../b", "base_encoding": "v2"}, "prefix"),
    ({"prefix": "zarr.json", "base_encoding": "v2"}, "prefix"),
    ({"prefix": "", "base_encoding": "v2"}, "prefix"),
    ({"prefix": "x"}, None),
    ({"prefix": "x", "base_encoding": {"name": "v2", "configuration": {"separator": "-"}}},
     "base_encoding.configuration.separator"),
])
def test_prefix_refuses_what_its_readme_forbids(config: dict[str, Any], where: str | None) -> None:
    with pytest.raises(MetadataError) as e:
        parse_chunk_key_encoding({"name": "prefix", "configuration": config})
    assert e.value.path == "$.chunk_key_encoding.configuration" + (f".{where}" if where else "")


def test_unregistered_or_unsupported_encodings_name_themselves() -> None:
    with pytest.raises(UnsupportedError, match="'template'") as e:
        parse_chunk_key_encoding({"name": "template", "configuration": {"template": "{0}"}})
    assert e.value.path == "$.chunk_key_encoding.name"


ENCODINGS = [
    (FANOUT_101, {(0, 0): "d0/0/d1/0/c", (2, 1): "d0/2/d1/1/c"}),
    ({"name": "prefix", "configuration": {"prefix": "chunks/", "base_encoding": {"name": "default"}}},
     {(0, 0): "chunks/c/0/0", (2, 1): "chunks/c/2/1"}),
    ({"name": "suffix", "configuration": {"suffix": ".bin", "base_encoding": {"name": "v2"}}},
     {(0, 0): "0.0.bin", (2, 1): "2.1.bin"}),
]


@pytest.mark.parametrize(("enc", "keys"), ENCODINGS, ids=["fanout", "prefix", "suffix"])
def test_round_trip_writes_the_registered_keys(tmp_path: Path, enc: dict[str, Any], keys: dict[Any, str]) -> None:
    data = np.arange(30, dtype="int32").reshape(6, 5)
    a = rectizarr.create_array(LocalStore(tmp_path / "a"), shape=data.shape, dtype=data.dtype, chunks=(2, 3),
                               chunk_key_encoding=enc, compressors=None)
    a[...] = data
    for key in keys.values():
        assert (tmp_path / "a" / key).is_file()
    doc = json.loads((tmp_path / "a" / "zarr.json").read_text())
    assert doc["chunk_key_encoding"]["name"] == enc["name"]
    np.testing.assert_array_equal(rectizarr.open_array(LocalStore(tmp_path / "a"))[...], data)
    assert rectizarr.open_array(LocalStore(tmp_path / "a")).nchunks_initialized == 6


@pytest.mark.parametrize(("enc", "keys"), ENCODINGS, ids=["fanout", "prefix", "suffix"])
def test_hand_made_stores_read(tmp_path: Path, enc: dict[str, Any], keys: dict[Any, str]) -> None:
    root = tmp_path / "h"
    root.mkdir()
    doc = {"zarr_format": 3, "node_type": "array", "shape": [6, 5], "data_type": "uint8",
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3]}},
           "chunk_key_encoding": enc, "fill_value": 7, "codecs": [{"name": "bytes"}]}
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
