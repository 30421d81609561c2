"""The public surface is pinned, and imports point one way (design.md "Layout")."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import rectizarr
import rectizarr.errors as errors

PKG = pathlib.Path(rectizarr.__file__).parent

EXPECTED_ALL = {
    "Array", "ChecksumError", "CodecError", "FsspecStore", "Group", "LenientMetadataWarning", "LocalStore",
    "MemoryStore", "MetadataError", "NodeExistsError", "NodeNotFoundError", "ReadOnlyError", "RectizarrError",
    "SelectionError", "Store", "StoreError", "UnsupportedError", "ZipStore", "__version__",
    "consolidate_metadata", "create_array", "create_group", "from_array", "from_dask", "open", "open_array",
    "open_group", "open_store", "set_workers", "to_dask", "validate",
}


def test_all_is_pinned() -> None:
    assert set(rectizarr.__all__) == EXPECTED_ALL
    for name in rectizarr.__all__:
        assert hasattr(rectizarr, name), name


def test_error_tree() -> None:
    assert set(errors.__all__) == {
        "ChecksumError", "CodecError", "LenientMetadataWarning", "MetadataError", "NodeExistsError",
        "NodeNotFoundError", "ReadOnlyError", "RectizarrError", "SelectionError", "StoreError",
        "UnsupportedError",
    }
    assert issubclass(errors.MetadataError, ValueError)
    assert issubclass(errors.UnsupportedError, errors.MetadataError)
    assert issubclass(errors.NodeNotFoundError, FileNotFoundError)
    assert issubclass(errors.NodeExistsError, FileExistsError)
    assert issubclass(errors.ReadOnlyError, PermissionError)
    assert issubclass(errors.SelectionError, IndexError)
    assert issubclass(errors.ChecksumError, errors.CodecError)
    for name in errors.__all__:
        cls = getattr(errors, name)
        if name != "LenientMetadataWarning":
            assert issubclass(cls, errors.RectizarrError)
    e = errors.MetadataError("bad level", path="$.codecs[1].configuration.level", key="a/zarr.json")
    assert "a/zarr.json" in str(e) and "$.codecs[1].configuration.level" in str(e)
    c = errors.CodecError("truncated", key="a/c/0/0", codec="zstd")
    assert "a/c/0/0" in str(c) and "zstd" in str(c)


# Lower layers never import higher ones. Each module may import only modules of a lower or equal rank.
RANK = {
    "errors": 0, "_util": 0,
    "dtype": 1, "_dtype_fill": 1,
    "chunk_keys": 2, "grid": 2, "codecs": 2, "_index_axis": 3, "_index_plan": 3, "indexing": 3,
    "metadata": 3,
    "store": 1, "_stores": 1,
    "engine": 4, "nodes": 4,
    "_create": 5, "array": 5, "api": 6, "group": 7, "__init__": 9,
    "cli": 9, "__main__": 9, "dask": 8, "xarray": 8, "validate": 8,
}


def _rank(module: str) -> int:
    head = module.split(".")[0]
    if head not in RANK:  # private helpers rank with their public module: _cli_x -> cli
        head = next(k for k in sorted(RANK, key=len, reverse=True) if head.lstrip("_").startswith(k.lstrip("_")))
    return RANK[head]


def test_import_direction() -> None:
    bad = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).with_suffix("")
        me = ".".join(rel.parts)
        my_rank = _rank(me if me != "__init__" else "__init__")
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rectizarr"):
                target = node.module.removeprefix("rectizarr").lstrip(".") or "__init__"
                names = [target] if target != "__init__" else [a.name for a in node.names]
                for t in names:
                    if t.split(".")[0] in RANK and _rank(t) > my_rank and me.split(".")[0] != t.split(".")[0]:
                        bad.append(f"{me} imports {t}")
    assert not bad, bad


def test_store_is_used_only_by_engine_array_group() -> None:
    for path in PKG.rglob("*.py"):
        rel = ".".join(path.relative_to(PKG).with_suffix("").parts)
        if rel.split(".")[0] in {"codecs", "grid", "chunk_keys", "dtype", "_dtype_fill", "metadata", "indexing",
                                 "_index_axis"}:
            assert "rectizarr.store" not in path.read_text(), rel


def test_import_is_light() -> None:
    code = "import sys, rectizarr; print(','.join(m for m in ('dask', 'xarray', 'zarr', 's3fs', 'tensorstore') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
