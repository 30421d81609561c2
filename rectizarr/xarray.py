"""``rectizarr.xarray``: the xarray integration under a short name, and the ``.rectizarr`` accessors.

>>> import rectizarr.xarray
>>> ds.rectizarr.to_zarr("out.zarr")                       # Dataset.to_zarr's arguments
>>> ds2.rectizarr.to_zarr("out.zarr", append_dim="time")
>>> tree.rectizarr.to_zarr("tree.zarr")                    # DataTree.to_zarr's arguments
>>> xr.open_dataset("out.zarr", engine="rectizarr")

Importing this module registers the accessors (``xarray.register_dataset_accessor`` and
``register_datatree_accessor``); the functions :func:`to_rectizarr` / :func:`to_rectizarr_tree` need no
registration.
"""

from __future__ import annotations

from typing import Any

import xarray as xr

from rectizarr.integrations.xarray import (
    RectizarrBackendEntrypoint,
    RectizarrDataStore,
    to_rectizarr,
    to_rectizarr_tree,
)

__all__ = ["DataTreeAccessor", "DatasetAccessor", "RectizarrBackendEntrypoint", "RectizarrDataStore",
           "to_rectizarr", "to_rectizarr_tree"]


class DatasetAccessor:
    """``ds.rectizarr``: ``to_zarr(store, **kwargs)`` is :func:`to_rectizarr` (``Dataset.to_zarr``'s contract)."""

    def __init__(self, ds: xr.Dataset) -> None:
        self._ds = ds

    def to_zarr(self, store: Any = None, **kwargs: Any) -> Any:
        return to_rectizarr(self._ds, store, **kwargs)


class DataTreeAccessor:
    """``tree.rectizarr``: ``to_zarr(store, **kwargs)`` is :func:`to_rectizarr_tree` (``DataTree.to_zarr``'s)."""

    def __init__(self, tree: Any) -> None:
        self._tree = tree

    def to_zarr(self, store: Any = None, **kwargs: Any) -> Any:
        return to_rectizarr_tree(self._tree, store, **kwargs)


_xr: Any = xr  # its registration functions are untyped
_xr.register_dataset_accessor("rectizarr")(DatasetAccessor)
_xr.register_datatree_accessor("rectizarr")(DataTreeAccessor)
