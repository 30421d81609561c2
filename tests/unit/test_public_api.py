"""The public surface is pinned, and imports point one way (design.md "Layout")."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import rectizarr
import rectizarr.errors as errors

PKG = pathlib.Path(rectizarr.__file__).parent

EXPECTED_ALL = {
    "Array",
    "CastError",
    "ChecksumError",
    "CodecError",
    "ConflictError",
    "FsspecStore",
    "Group",
    "LenientMetadataWarning",
    "LocalStore",
    "MemoryStore",
    "MetadataError",
    "NodeExistsError",
    "NodeNotFoundError",
    "ReadOnlyError",
    "RectizarrError",
    "SelectionError",
    "Store",
    "StoreError",
    "UnsupportedError",
    "ZipStore",
    "__version__",
    "consolidate_metadata",
    "create_array",
    "create_group",
    "from_array",
    "from_dask",
    "open",
    "open_array",
    "open_group",
    "open_store",
    "set_workers",
    "to_dask",
    "validate",
    "ObjectStore",
    "set_requests_in_flight",
    # zarr-python's names (rectizarr.convenience) and the errors they need
    "IrregularChunksError",
    "NodeTypeError",
    "array",
    "create",
    "empty",
    "empty_like",
    "full",
    "full_like",
    "group",
    "load",
    "ones",
    "ones_like",
    "open_consolidated",
    "save",
    "zeros",
    "zeros_like",
}


def test_all_is_pinned() -> None:
    assert set(rectizarr.__all__) == EXPECTED_ALL
    for name in rectizarr.__all__:
        assert hasattr(rectizarr, name), name


def test_error_tree() -> None:
    assert set(errors.__all__) == {
        "CastError",
        "ChecksumError",
        "CodecError",
        "ConflictError",
        "IrregularChunksError",
        "LenientMetadataWarning",
        "MetadataError",
        "NodeExistsError",
        "NodeNotFoundError",
        "NodeTypeError",
        "ReadOnlyError",
        "RectizarrError",
        "SelectionError",
        "SelectionValueError",
        "StoreError",
        "UnsupportedError",
        "VersionChanged",
    }
    assert issubclass(errors.MetadataError, ValueError)
    assert issubclass(errors.UnsupportedError, errors.MetadataError)
    assert issubclass(errors.NodeNotFoundError, FileNotFoundError)
    assert issubclass(errors.NodeNotFoundError, KeyError)
    assert issubclass(errors.IrregularChunksError, AttributeError)
    assert issubclass(errors.IrregularChunksError, errors.MetadataError)
    assert issubclass(errors.NodeTypeError, errors.MetadataError)
    assert issubclass(errors.NodeExistsError, FileExistsError)
    assert issubclass(errors.ReadOnlyError, PermissionError)
    # caught by code written for zarr-python (ContainsArrayError, ContainsGroupError, its read-only error)
    assert issubclass(errors.NodeExistsError, ValueError) and issubclass(errors.ReadOnlyError, ValueError)
    assert issubclass(errors.SelectionError, IndexError)
    assert issubclass(errors.SelectionValueError, errors.SelectionError)
    assert issubclass(errors.SelectionValueError, ValueError)  # as NumPy's a[::0]
    assert issubclass(errors.ChecksumError, errors.CodecError)
    assert issubclass(errors.VersionChanged, errors.ConflictError)
    assert issubclass(errors.CastError, OverflowError)  # NumPy's error for such a value
    for name in errors.__all__:
        cls = getattr(errors, name)
        if name != "LenientMetadataWarning":
            assert issubclass(cls, errors.RectizarrError)
    e = errors.MetadataError("bad level", path="$.codecs[1].configuration.level", key="a/zarr.json")
    assert "a/zarr.json" in str(e) and "$.codecs[1].configuration.level" in str(e)
    c = errors.CodecError("truncated", key="a/c/0/0", codec="zstd")
    assert "a/c/0/0" in str(c) and "zstd" in str(c)


def test_import_is_light() -> None:
    code = "import sys, rectizarr; print(','.join(m for m in ('dask', 'xarray', 'zarr', 's3fs', 'tensorstore') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
