"""rectizarr: a small, fast Zarr v3 reader/writer — rectilinear chunk grids first, complete sharding,
NumPy-exact indexing.

>>> import rectizarr
>>> a = rectizarr.create_array("data.zarr", shape=(365, 100), dtype="f4",
...                            chunks=[[31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], 100])
>>> a[:31] = 1.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rectizarr.api import create_array, from_array, open_array
from rectizarr.arrays import Array
from rectizarr.convenience import (
    array,
    create,
    empty,
    empty_like,
    full,
    full_like,
    group,
    load,
    ones,
    ones_like,
    open_consolidated,
    save,
    zeros,
    zeros_like,
)
from rectizarr.errors import (
    CastError,
    ChecksumError,
    CodecError,
    ConflictError,
    IrregularChunksError,
    LenientMetadataWarning,
    MetadataError,
    NodeExistsError,
    NodeNotFoundError,
    NodeTypeError,
    ReadOnlyError,
    RectizarrError,
    SelectionError,
    StoreError,
    UnsupportedError,
)
from rectizarr.groups import Group, consolidate_metadata, create_group, open, open_group
from rectizarr.io.pool import set_workers
from rectizarr.stores import LocalStore, MemoryStore, Store, open_store, set_requests_in_flight
from rectizarr.validate import validate

__version__ = "0.1.0"


if TYPE_CHECKING:
    from rectizarr.stores import FsspecStore, ObjectStore, ZipStore


def __getattr__(name: str) -> Any:  # what opening a local array does not need: imported when first used
    import importlib

    if name in ("dask", "xarray"):  # rectizarr.dask / rectizarr.xarray without importing them up front
        return importlib.import_module(f"rectizarr.{name}")
    if name in ("FsspecStore", "ObjectStore", "ZipStore"):  # (fsspec, obstore, zipfile)
        return getattr(importlib.import_module("rectizarr.stores"), name)
    if name in ("from_dask", "to_dask"):
        return getattr(importlib.import_module("rectizarr.integrations.dask"), name)
    raise AttributeError(f"module 'rectizarr' has no attribute {name!r}")


__all__ = [
    "Array",
    "CastError",
    "ChecksumError",
    "ConflictError",
    "CodecError",
    "FsspecStore",
    "Group",
    "IrregularChunksError",
    "LenientMetadataWarning",
    "LocalStore",
    "MemoryStore",
    "MetadataError",
    "NodeExistsError",
    "NodeNotFoundError",
    "ObjectStore",
    "NodeTypeError",
    "ReadOnlyError",
    "RectizarrError",
    "SelectionError",
    "Store",
    "StoreError",
    "UnsupportedError",
    "ZipStore",
    "__version__",
    "array",
    "create",
    "consolidate_metadata",
    "create_array",
    "create_group",
    "empty",
    "empty_like",
    "from_array",
    "from_dask",
    "full",
    "full_like",
    "group",
    "load",
    "ones",
    "ones_like",
    "open",
    "open_array",
    "open_consolidated",
    "open_group",
    "open_store",
    "set_requests_in_flight",
    "save",
    "set_workers",
    "to_dask",
    "validate",
    "zeros",
    "zeros_like",
]
