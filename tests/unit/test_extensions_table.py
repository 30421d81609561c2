"""README.md's "Registered extensions" table is what scripts/extensions_table.py makes of the registry
snapshot and of rectizarr's parsers (so it follows every codec added)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "extensions_table", ROOT / "scripts" / "extensions_table.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_table_is_the_scripts_output() -> None:
    script = _script()
    readme = (ROOT / "README.md").read_text()
    assert script.readme_block(readme) == script.table(), "run: python scripts/extensions_table.py --write"


def test_table_lists_every_registered_name_with_rectizarrs_support() -> None:
    script = _script()
    snap = json.loads((ROOT / "conformance_data" / "zarr_extensions.json").read_text())
    out = script.table(snap)
    for kind in ("codecs", "data_types", "chunk_grids", "chunk_key_encodings"):
        assert snap[kind]
        for name in snap[kind]:
            assert f"| `{name}` |" in out
    rows = {
        line.split("|")[1].strip(" `"): line.split("|")[2].strip()
        for line in out.splitlines()
        if line.startswith("| `")
    }
    assert rows["fanout"] == rows["suffix"] == rows["prefix"] == rows["template"] == "RW"
    assert rows["datetime64"] == "R" and rows["numpy.datetime64"] == "RW"
    assert rows["jpeg"] == "" and rows["sharding_indexed"] == "RW"


def test_rectizarr_columns_follow_the_parsers() -> None:
    script = _script()
    assert script.rectizarr_codec("zstd") == "RW"
    assert script.rectizarr_codec("nanovdb") == ""
    assert script.rectizarr_data_type("fixed-length-ucs4") == "R"
    assert script.rectizarr_data_type("binary_fixed_point") == ""
    assert script.rectizarr_chunk_grid("rectilinear") == "RW"
    assert script.rectizarr_chunk_key_encoding("zarrs.hashed") == ""
