"""The fill values the zarr-extensions registry gives for the data types rectizarr reads under registry
spellings (its first entries, from zarr-python's drafts: ``fixed-length-bytes`` / ``-ascii`` / ``-ucs4`` with
``"fill_value": ""``, ``datetime64`` with ``{"unit"}`` alone and an int64 fill), read without a warning and
written back under zarr-python's names."""

from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.core.dtype import parse_data_type
from rectizarr.errors import MetadataError

NAT = -(2**63)


@pytest.mark.parametrize(
    ("data_type", "fill", "expected", "written"),
    [
        (
            {"name": "fixed-length-bytes", "configuration": {"length_bits": 24}},
            "",
            np.void(b"\0\0\0"),
            "AAAA",
        ),
        (
            {"name": "fixed-length-ascii", "configuration": {"length_bits": 24}},
            "",
            np.array(b"", dtype="S3"),
            "",
        ),
        (
            {"name": "fixed-length-ucs4", "configuration": {"length_bits": 64}},
            "",
            np.array("", dtype="U2"),
            "",
        ),
        ({"name": "datetime64", "configuration": {"unit": "s"}}, NAT, np.datetime64("NaT", "s"), NAT),
        ("datetime64", NAT, np.array(NAT).view("M8"), NAT),
        ({"name": "datetime64", "configuration": {"unit": "ms"}}, 5, np.datetime64(5, "ms"), 5),
        ({"name": "timedelta64", "configuration": {"unit": "ns"}}, 7, np.timedelta64(7, "ns"), 7),
    ],
)
def test_registry_fill_values(data_type: Any, fill: Any, expected: Any, written: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # permitted by the registry: no lenient reading
        dt = parse_data_type(data_type)
        value = dt.parse_fill(fill)
    assert value.dtype == np.asarray(expected).dtype
    assert value.tobytes() == np.asarray(expected).tobytes()
    assert dt.fill_to_json(value) == written


def test_an_array_under_the_registry_spelling_opens_and_reads_its_fill(tmp_path: Any) -> None:
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [3],
        "data_type": {"name": "fixed-length-bytes", "configuration": {"length_bits": 16}},
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": "",
        "codecs": [{"name": "bytes"}],
    }
    (tmp_path / "zarr.json").write_text(json.dumps(doc))
    assert rectizarr.open_array(str(tmp_path))[...].tobytes() == bytes(6)
    assert not list(rectizarr.validate(str(tmp_path)).errors)


def test_a_short_non_empty_raw_bytes_fill_is_still_an_error() -> None:
    dt = parse_data_type({"name": "fixed-length-bytes", "configuration": {"length_bits": 24}})
    with pytest.raises(MetadataError, match="has 1 bytes"):
        dt.parse_fill("AA==")
