"""The peer columns of the README's extensions table (conformance_data/zarr_extensions.json) are what the
installed zarr-python and tensorstore register: asked name by name (so the snapshot is redone when they
change). zarrs' column is from its documentation: zarrs-python decodes only under zarr-python's metadata."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import zarr.registry
from zarr.core.dtype import data_type_registry

SNAPSHOT = json.loads(
    (Path(__file__).resolve().parents[2] / "conformance_data" / "zarr_extensions.json").read_text()
)


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


@pytest.mark.parametrize(
    ("kind", "name", "cells"),
    [
        (kind, name, cells)
        for kind in ("codecs", "data_types", "chunk_key_encodings")
        for name, cells in SNAPSHOT[kind].items()
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_zarr_python_column_is_what_zarr_python_registers(
    kind: str, name: str, cells: dict[str, Any]
) -> None:
    assert _zarr_python_reads(kind, name) == (cells["zarr-python"] in ("RW", "R")), (kind, name)


def test_the_snapshot_names_the_zarr_python_it_was_made_with() -> None:
    assert f"zarr {zarr.__version__}" in SNAPSHOT["peers"]["zarr-python"]


_TENSORSTORE_PROBE = r"""
import json, sys
import tensorstore as ts
kind, names = sys.argv[1], json.loads(sys.argv[2])
out = {}
for name in names:
    meta = {"shape": [4, 4], "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 2]}},
            "data_type": "uint8", "codecs": [{"name": "bytes"}]}
    if kind == "codecs":
        meta["codecs"] = [{"name": name, "configuration": {}}]
    elif kind == "chunk_key_encodings":
        meta["chunk_key_encoding"] = {"name": name}
    else:
        meta["data_type"] = name
    try:
        ts.Spec({"driver": "zarr3", "kvstore": {"driver": "memory"}, "metadata": meta})
        out[name] = True
    except Exception as exc:  # a refused configuration still means the name is known
        text = str(exc)
        refusal = "is not registered" if kind == "codecs" else "Expected one of" if kind == "chunk_key_encodings" \
            else "r<N>"  # (the unknown data type error lists the known ones, r<N> last)
        out[name] = refusal not in text
print(json.dumps(out))
"""


@pytest.mark.parametrize("kind", ["codecs", "data_types", "chunk_key_encodings"])
def test_tensorstore_column_is_what_tensorstore_registers(kind: str) -> None:
    """Each name in a zarr3 spec, in a child process (tensorstore aborts the process on some specs: the
    raw types, which the snapshot marks '?', are left out)."""
    names = [n for n, cells in SNAPSHOT[kind].items() if cells["tensorstore"] != "?"]
    run = subprocess.run(
        [sys.executable, "-c", _TENSORSTORE_PROBE, kind, json.dumps(names)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    known = json.loads(run.stdout)
    wrong = {
        n: SNAPSHOT[kind][n]["tensorstore"]
        for n in names
        if known[n] != (SNAPSHOT[kind][n]["tensorstore"] == "RW")
    }
    assert wrong == {}
