"""The zarr-python column of the README's extensions table (conformance_data/zarr_extensions.json) is what
the installed zarr-python registers: its codec, data type and chunk key encoding registries, asked name by
name (so the snapshot is redone when zarr-python changes)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import zarr.registry
from zarr.core.dtype import data_type_registry

SNAPSHOT = json.loads((Path(__file__).resolve().parents[2] / "conformance_data" / "zarr_extensions.json").read_text())


def _zarr_python_reads(kind: str, name: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if kind == "codecs":
                zarr.registry.get_codec_class(name)
            elif kind == "chunk_key_encodings":
                zarr.registry.get_chunk_key_encoding_class(name)
            elif name not in data_type_registry.contents:
                data_type_registry.match_json(name, zarr_format=3)
        except (KeyError, ValueError, TypeError):
            return False
    return True


@pytest.mark.parametrize(("kind", "name", "cells"), [
    (kind, name, cells) for kind in ("codecs", "data_types", "chunk_key_encodings")
    for name, cells in SNAPSHOT[kind].items()
], ids=lambda v: v if isinstance(v, str) else "")
def test_zarr_python_column_is_what_zarr_python_registers(kind: str, name: str, cells: dict[str, Any]) -> None:
    assert _zarr_python_reads(kind, name) == (cells["zarr-python"] in ("RW", "R")), (kind, name)


def test_the_snapshot_names_the_zarr_python_it_was_made_with() -> None:
    assert f"zarr {zarr.__version__}" in SNAPSHOT["peers"]["zarr-python"]
