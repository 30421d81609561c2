"""``rectizarr.xarray``: the xarray integration under a short name, and the ``.rectizarr`` accessors.

>>> import rectizarr.xarray
>>> ds.rectizarr.to_zarr("out.zarr")                       # Dataset.to_zarr's arguments
>>> ds2.rectizarr.to_zarr("out.zarr", append_dim="time")
>>> tree.rectizarr.to_zarr("tree.zarr")                    # DataTree.to_zarr's arguments
>>> da.rectizarr.to_zarr("da.zarr")                        # DataArray.to_zarr's
>>> xr.open_dataset("out.zarr", engine="rectizarr")

Importing this module registers the accessors (``xarray.register_dataset_accessor``,
``register_dataarray_accessor`` and ``register_datatree_accessor``); the functions :func:`to_rectizarr` /
:func:`to_rectizarr_tree` need no registration."""

from __future__ import annotations

from typing import Any

import xarray as xr

from rectizarr.integrations.xarray import (
    RectizarrBackendEntrypoint,
    RectizarrDataStore,
    to_rectizarr,
    to_rectizarr_tree,
)

__all__ = [
    "DataArrayAccessor",
    "DataTreeAccessor",
    "DatasetAccessor",
    "RectizarrBackendEntrypoint",
    "RectizarrDataStore",
    "to_rectizarr",
    "to_rectizarr_tree",
]


class _Accessor:
    """What the accessors share: the Dataset, DataArray or DataTree they were made for."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj


class DatasetAccessor(_Accessor):
    """``ds.rectizarr``: ``to_zarr(store, **kwargs)`` is :func:`to_rectizarr` (``Dataset.to_zarr``'s contract)."""

    def to_zarr(self, store: Any = None, **kwargs: Any) -> Any:
        return to_rectizarr(self._obj, store, **kwargs)


class DataArrayAccessor(_Accessor):
    """``da.rectizarr``: ``to_zarr(store, **kwargs)`` writes the DataArray as xarray's ``DataArray.to_zarr``
    does: as a one-variable Dataset, named ``__xarray_dataarray_variable__`` when it has no name (or its name
    is also a coordinate's or a dimension's, then kept in the ``__xarray_dataarray_name__`` attribute), so
    ``xr.open_dataarray(store, engine="rectizarr")`` gives it back."""

    def to_zarr(self, store: Any = None, **kwargs: Any) -> Any:
        da = self._obj
        renamed = da.name is None or da.name in da.coords or da.name in da.dims
        ds = da.to_dataset(name=DATAARRAY_VARIABLE) if renamed else da.to_dataset()
        if renamed and da.name is not None:
            ds.attrs[DATAARRAY_NAME] = da.name
        return to_rectizarr(ds, store, **kwargs)


DATAARRAY_VARIABLE = "__xarray_dataarray_variable__"
DATAARRAY_NAME = "__xarray_dataarray_name__"
"""The names xarray gives a DataArray written as a Dataset (its ``open_dataarray`` reads them back)."""


class DataTreeAccessor(_Accessor):
    """``tree.rectizarr``: ``to_zarr(store, **kwargs)`` is :func:`to_rectizarr_tree` (``DataTree.to_zarr``'s)."""

    def to_zarr(self, store: Any = None, **kwargs: Any) -> Any:
        return to_rectizarr_tree(self._obj, store, **kwargs)


_xr: Any = xr  # its registration functions are untyped
_xr.register_dataset_accessor("rectizarr")(DatasetAccessor)
_xr.register_dataarray_accessor("rectizarr")(DataArrayAccessor)
_xr.register_datatree_accessor("rectizarr")(DataTreeAccessor)
