"""The README's "Registered extensions" table, from a snapshot of the zarr-extensions registry.

The registry's names and what zarr-python, zarrs and tensorstore do with each are data
(conformance_data/zarr_extensions.json); rectizarr's columns are computed from rectizarr itself: a name is
read when rectizarr's own parser takes it (a configuration error still means the name is known), written
when the type rectizarr reads it as keeps that name (a registry spelling read under zarr-python's name is
"R")::

    python scripts/extensions_table.py            # print the table
    python scripts/extensions_table.py --write    # replace it in README.md
    python scripts/extensions_table.py --check    # exit 1 when README.md's table differs
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "conformance_data" / "zarr_extensions.json"
README = ROOT / "README.md"
BEGIN = "<!-- extensions-table: begin (scripts/extensions_table.py --write) -->"
END = "<!-- extensions-table: end -->"
PEERS = ("zarr-python", "zarrs", "tensorstore")
_KINDS = (
    ("codecs", "Codecs"),
    ("data_types", "Data types"),
    ("chunk_grids", "Chunk grids"),
    ("chunk_key_encodings", "Chunk key encodings"),
)

# A typical configuration per name where an empty one would not tell "unknown" from "malformed".
_DTYPE_EXAMPLES: dict[str, Any] = {"r": "r16"}  # the registry's "r" is the family r8, r16, ...


def _known(parse: Callable[[], Any]) -> bool | str:
    """True when ``parse`` takes the name (or refuses only its configuration), "ml" when only the optional
    ml_dtypes package is missing, False when the name is unsupported."""
    from rectizarr.errors import MetadataError, UnsupportedError

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lenient readings of the bare examples: still the name is known
        try:
            parse()
        except UnsupportedError as exc:
            return "ml" if "ml_dtypes" in str(exc) else False
        except MetadataError:
            return True
    return True


def rectizarr_codec(name: str) -> str:
    from rectizarr.core.codec_meta import parse_codecs

    return "RW" if _known(lambda: parse_codecs([{"name": name, "configuration": {}}])) else ""


def rectizarr_data_type(name: str) -> str:
    from rectizarr.core.dtype import parse_data_type
    from rectizarr.errors import MetadataError

    value = _DTYPE_EXAMPLES.get(name, name)
    if not _known(lambda: parse_data_type(value)):
        return ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            written = parse_data_type(value).name
    except MetadataError:  # known, but only with a configuration
        written = _written_with_configuration(name)
    return "RW" if written in (name, value) else "R"


def _written_with_configuration(name: str) -> str:
    from rectizarr.core.dtype import parse_data_type
    from rectizarr.errors import MetadataError

    configs: list[dict[str, Any]] = [
        {"unit": "s", "scale_factor": 1},
        {"length_bytes": 4},
        {"length_bits": 32},
        {"fields": [{"name": "a", "data_type": "int8"}]},
        {"fields": [["a", "int8"]]},
    ]
    for config in configs:
        try:
            return str(parse_data_type({"name": name, "configuration": config}).name)
        except MetadataError:
            continue  # the next example configuration
    return name


def rectizarr_chunk_grid(name: str) -> str:
    from rectizarr.core.grid_json import parse_chunk_grid

    return "RW" if _known(lambda: parse_chunk_grid({"name": name, "configuration": {}}, (4,))) else ""


def rectizarr_chunk_key_encoding(name: str) -> str:
    from rectizarr.core.chunk_keys import parse_chunk_key_encoding

    return "RW" if _known(lambda: parse_chunk_key_encoding({"name": name})) else ""


_RECTIZARR = {
    "codecs": rectizarr_codec,
    "data_types": rectizarr_data_type,
    "chunk_grids": rectizarr_chunk_grid,
    "chunk_key_encodings": rectizarr_chunk_key_encoding,
}


def table(snapshot: dict[str, Any] | None = None) -> str:
    """The README block, markers included."""
    snap = snapshot if snapshot is not None else json.loads(SNAPSHOT.read_text())
    lines = [BEGIN, "", f"Registry: {snap['source']}.", ""]
    lines.append(
        "RW: reads and writes; R: reads only (writes the name zarr-python uses); ?: not known; "
        "empty: no. Peers: " + "; ".join(f"{p}: {snap['peers'][p]}" for p in PEERS) + "."
    )
    for kind, title in _KINDS:
        lines += [
            "",
            f"**{title}**",
            "",
            "| name | rectizarr | " + " | ".join(PEERS) + " |",
            "|---|---|" + "---|" * len(PEERS),
        ]
        for name, peers in sorted(snap[kind].items()):
            ours = _RECTIZARR[kind](name)
            lines.append(f"| `{name}` | {ours} | " + " | ".join(peers[p] for p in PEERS) + " |")
    lines += ["", END]
    return "\n".join(lines)


def readme_block(text: str) -> str:
    start, stop = text.index(BEGIN), text.index(END) + len(END)
    return text[start:stop]


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = args.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="replace the table in README.md")
    group.add_argument("--check", action="store_true", help="exit 1 when README.md's table differs")
    opts = args.parse_args(argv)
    out = table()
    if opts.write:
        text = README.read_text()
        README.write_text(text.replace(readme_block(text), out))
    elif opts.check:
        if readme_block(README.read_text()) != out:
            print(
                "README.md's extensions table is stale: python scripts/extensions_table.py --write",
                file=sys.stderr,
            )
            return 1
    else:
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
