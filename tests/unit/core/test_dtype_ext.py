"""Data types under the zarr-extensions registry's own spellings (``datetime64``, ``timedelta64``,
``fixed-length-bytes``/``-ascii``/``-ucs4`` sized in ``length_bits``) read as the types zarr-python names
otherwise (``numpy.datetime64``, ``raw_bytes``, ...): documents made by hand per the registry READMEs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.core.dtype import parse_data_type
from rectizarr.errors import MetadataError, UnsupportedError
from rectizarr.stores import LocalStore

CASES: list[tuple[dict[str, Any], str, Any, str]] = [
    # registry document, numpy dtype, fill value as the registry writes it, the name rectizarr writes
    (
        {"name": "datetime64", "configuration": {"unit": "s", "scale_factor": 1}},
        "M8[s]",
        "NaT",
        "numpy.datetime64",
    ),
    (
        {"name": "datetime64", "configuration": {"unit": "us", "scale_factor": 10}},
        "M8[10us]",
        0,
        "numpy.datetime64",
    ),
    (
        {"name": "timedelta64", "configuration": {"unit": "ms", "scale_factor": 1}},
        "m8[ms]",
        -5,
        "numpy.timedelta64",
    ),
    ({"name": "fixed-length-bytes", "configuration": {"length_bits": 32}}, "V4", "AAAAAA==", "raw_bytes"),
    ({"name": "fixed-length-ascii", "configuration": {"length_bits": 24}}, "S3", "", "null_terminated_bytes"),
    ({"name": "fixed-length-ucs4", "configuration": {"length_bits": 64}}, "U2", "", "fixed_length_utf32"),
]


@pytest.mark.parametrize(
    ("doc", "np_dtype", "fill", "written"), CASES, ids=[c[0]["name"] + str(i) for i, c in enumerate(CASES)]
)
def test_registry_spellings_parse(doc: dict[str, Any], np_dtype: str, fill: Any, written: str) -> None:
    dt = parse_data_type(doc)
    assert dt.numpy == np.dtype(np_dtype)
    assert dt.name == written
    dt.parse_fill(fill)


def _values(np_dtype: str) -> np.ndarray:
    d = np.dtype(np_dtype)
    if d.kind in "Mm":
        return np.arange(6).astype(d).reshape(2, 3)
    if d.kind == "V":
        return np.frombuffer(bytes(range(24)), dtype=d).reshape(2, 3)
    if d.kind == "S":
        return np.array([[b"a", b"bc", b"def"], [b"", b"xy", b"z"]], dtype=d)
    return np.array([["a", "bé", "c"], ["", "xy", "zz"]], dtype=d)


@pytest.mark.parametrize(
    ("doc", "np_dtype", "fill", "written"), CASES, ids=[c[0]["name"] + str(i) for i, c in enumerate(CASES)]
)
def test_hand_made_documents_with_registry_spellings_open(
    tmp_path: Path, doc: dict[str, Any], np_dtype: str, fill: Any, written: str
) -> None:
    values = _values(np_dtype)
    a = rectizarr.create_array(
        LocalStore(tmp_path / "a"), shape=values.shape, dtype=values.dtype, chunks=(1, 2), compressors=None
    )
    a[...] = values
    meta = json.loads((tmp_path / "a" / "zarr.json").read_text())
    assert parse_data_type(meta["data_type"]).numpy == values.dtype  # rectizarr writes zarr-python's names
    meta["data_type"], meta["fill_value"] = doc, fill  # as a peer following the registry README writes it
    (tmp_path / "a" / "zarr.json").write_text(json.dumps(meta))
    b = rectizarr.open_array(LocalStore(tmp_path / "a"))
    assert b.dtype == values.dtype
    np.testing.assert_array_equal(b[...], values)
    b[0, 0] = values[1, 2]  # writable; the document keeps what it said
    assert b[0, 0] == values[1, 2]


@pytest.mark.parametrize(
    ("doc", "message", "where"),
    [
        (
            {"name": "fixed-length-ucs4", "configuration": {"length_bits": 24}},
            "multiple of 32",
            ".length_bits",
        ),
        (
            {"name": "fixed-length-bytes", "configuration": {"length_bits": 12}},
            "multiple of 8",
            ".length_bits",
        ),
        ({"name": "fixed-length-bytes", "configuration": {"length_bytes": 4}}, "missing", ""),
        ({"name": "fixed-length-ascii"}, "requires a configuration", None),
        ({"name": "datetime64", "configuration": {"scale_factor": 1}}, "missing", ""),
    ],
)
def test_malformed_registry_spellings_name_the_path(
    doc: dict[str, Any], message: str, where: str | None
) -> None:
    with pytest.raises(MetadataError, match=message) as e:
        parse_data_type(doc)
    assert e.value.path == "$.data_type" + ("" if where is None else ".configuration" + where)


def test_unsupported_registered_types_name_themselves() -> None:
    with pytest.raises(UnsupportedError, match="'binary_fixed_point'") as e:
        parse_data_type({"name": "binary_fixed_point", "configuration": {}})
    assert e.value.path == "$.data_type"


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ("N0f8", "a fixed-point type registered in zarr-extensions"),
        ("float128", "unsupported data type 'float128' (data types cannot be skipped)"),
    ],
)
def test_unsupported_data_types_say_whether_they_are_registered(doc: Any, says: str) -> None:
    with pytest.raises(UnsupportedError) as e:
        parse_data_type(doc)
    assert says in str(e.value)
    assert e.value.path == "$.data_type"
