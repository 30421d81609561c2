"""The reading side of the xarray integration: a rectizarr group as an xarray data store.

Dimensions come from each array's ``dimension_names`` (a 0-d array needs none); encoding is reported as
xarray's Zarr engine reports it (chunks, preferred_chunks, compressors, filters, serializer, shards,
fill_value); data loads lazily through a picklable :class:`~rectizarr.integrations.dask.ArrayRef`.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import numpy as np
from xarray import Variable
from xarray.backends import BackendArray
from xarray.backends.common import AbstractDataStore
from xarray.core import indexing

from rectizarr import nodes
from rectizarr.arrays import Array
from rectizarr.errors import MetadataError
from rectizarr.groups import Group
from rectizarr.integrations.dask import ArrayRef

__all__ = ["UNNAMED", "RectizarrBackendArray", "RectizarrDataStore"]

UNNAMED = ("raise", "dim_n")


def _untyped(module: str) -> Any:
    """A module whose functions carry no annotations (typed as Any for mypy --strict)."""
    return importlib.import_module(module)


def _compact(sizes: tuple[int, ...], extent: int) -> int | tuple[int, ...]:
    """Per-axis chunk sizes as xarray's Zarr backend reports them: an int when regular, else the sizes."""
    if not sizes:
        return max(1, extent)
    if len(sizes) == 1 or (len(set(sizes[:-1])) == 1 and sizes[-1] <= sizes[0]):
        return sizes[0]
    return sizes


class RectizarrBackendArray(BackendArray):
    """A lazily read array for xarray: basic selections read through ``array[...]``, outer (orthogonal)
    ones through ``array.oindex``; vectorised selections are decomposed by xarray into an outer read."""

    __slots__ = ("_ref", "dtype", "shape")

    def __init__(self, ref: ArrayRef, dtype: np.dtype[Any]) -> None:
        self._ref = ref
        self.shape = ref.shape
        self.dtype = dtype

    def get_array(self) -> Array:
        return self._ref.open()

    def __getitem__(self, key: Any) -> Any:
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.OUTER, self._raw)

    async def async_getitem(self, key: Any) -> Any:
        """``__getitem__`` to await (xarray's ``load_async``): the read runs on a thread of asyncio's default
        executor, so the event loop goes on while its chunks are fetched and decoded, and the variables of a
        dataset load concurrently."""

        async def raw(k: tuple[Any, ...]) -> np.ndarray[Any, Any]:
            return await asyncio.to_thread(self._raw, k)

        return await indexing.async_explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, raw
        )

    def _raw(self, key: tuple[Any, ...]) -> np.ndarray[Any, Any]:
        array = self._ref.open()
        key = tuple(_bounded(k, n) for k, n in zip(key, self.shape, strict=True))
        if any(isinstance(k, np.ndarray) for k in key):
            return np.asarray(array.oindex[key])
        return np.asarray(array[(*key, Ellipsis)])


def _bounded(k: Any, n: int) -> Any:
    """``k`` (an int, slice or int array over an axis of length ``n`` at opening) with every position
    explicit: an array that has grown since (an append by another writer) is read as the variable
    describes it, as xarray's Zarr engine does, not with the new end."""
    if isinstance(k, slice):
        start, stop, step = k.indices(n)
        return slice(start, None if stop < 0 else stop, step)  # stepping down past 0: to the start
    if isinstance(k, np.ndarray):
        return np.where(k < 0, k + n, k) if k.dtype.kind == "i" else k
    return k + n if isinstance(k, int | np.integer) and k < 0 else k


class DimensionNamesError(MetadataError, KeyError):
    """An array whose dimensions xarray cannot name; also a ``KeyError``, as xarray's Zarr engine raises."""

    def __str__(self) -> str:  # ValueError's form, not KeyError's quoted one
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


def _dimensions(name: str, array: Array, unnamed_dims: str) -> tuple[str, ...]:
    if array.ndim == 0:  # a scalar needs no names (zarr-python writes none for it)
        return ()
    names = array.dimension_names
    if names is not None and all(n is not None for n in names):
        return tuple(str(n) for n in names)
    if unnamed_dims == "raise":
        raise DimensionNamesError(
            f"array {array.name!r} has no dimension_names (or some are null; in Zarr v2 no _ARRAY_DIMENSIONS "
            "attribute), which xarray needs: they allow xarray to determine variable dimensions. Open with "
            "unnamed_dims='dim_n' to name them dim_0, dim_1, ... by axis",
            key=(array.path + "/zarr.json").lstrip("/"),
        )
    return tuple(
        str(n) if n is not None else f"dim_{i}"
        for i, n in enumerate(names if names is not None else (None,) * array.ndim)
    )


def _codec_encoding(array: Array) -> dict[str, Any]:
    """The codecs as encoding that both writers take back (xarray's ``to_zarr`` with zarr-python, and
    rectizarr's): Zarr v3 codecs as their ``zarr.json`` dicts; for a Zarr v2 array, its compressor and
    filters as numcodecs codecs and no serializer, as xarray's Zarr engine reports them."""
    v2 = array.metadata.v2
    if v2 is None:
        return {
            "compressors": tuple(c.to_dict() for c in array.compressors),
            "filters": tuple(c.to_dict() for c in array.filters),
            "serializer": array.serializer.to_dict(),
        }
    from numcodecs import get_codec

    return {
        "compressors": () if v2.get("compressor") is None else (get_codec(dict(v2["compressor"])),),
        "filters": tuple(get_codec(dict(f)) for f in v2.get("filters") or ()),
    }


class RectizarrDataStore(AbstractDataStore):
    """An xarray data store over a rectizarr :class:`~rectizarr.Group` (read-only)."""

    __slots__ = ("_fill_as_mask", "_group", "_unnamed_dims")

    def __init__(
        self, group: Group, *, unnamed_dims: str = "raise", use_zarr_fill_value_as_mask: bool | None = None
    ) -> None:
        """``use_zarr_fill_value_as_mask``, as xarray's: the array's Zarr fill value is its ``_FillValue``
        (CF masking); None: for Zarr v2 arrays, whose ``.zarray`` holds xarray's ``_FillValue``."""
        if unnamed_dims not in UNNAMED:
            raise MetadataError(f"unnamed_dims must be one of {UNNAMED}, got {unnamed_dims!r}")
        self._group = group
        self._unnamed_dims = unnamed_dims
        self._fill_as_mask = use_zarr_fill_value_as_mask

    def open_store_variable(self, name: str, array: Array) -> Variable:
        from xarray.backends.zarr import FillValueCoder

        dims = _dimensions(name, array, self._unnamed_dims)
        attributes = dict(array.attrs.asdict())
        dtype = array.dtype
        if array.metadata.data_type.name == "string":
            dtype = _untyped("xarray.coding.strings").create_vlen_dtype(str)
        storage = tuple(_compact(s, n) for s, n in zip(array.write_chunk_sizes, array.shape, strict=True))
        encoding: dict[str, Any] = {
            "chunks": tuple(_compact(s, n) for s, n in zip(array.read_chunk_sizes, array.shape, strict=True)),
            "preferred_chunks": dict(zip(dims, storage, strict=True)),
            "fill_value": array.fill_value,
        }
        encoding.update(_codec_encoding(array), shards=storage if array.is_sharded else None)
        fmt = nodes.format_of(array.metadata)
        # the fill value is the _FillValue: always where it may be null (v2, as xarray reads it; null: none)
        if fmt.rules.nullable_fill or self._fill_as_mask:
            if fmt.has_fill(array.metadata):
                attributes["_FillValue"] = array.fill_value
        elif "_FillValue" in attributes:  # xarray's Zarr v3 form of the CF attribute
            attributes["_FillValue"] = FillValueCoder.decode(attributes["_FillValue"], array.dtype)
        data = indexing.LazilyIndexedArray(RectizarrBackendArray(ArrayRef.of(array, "r"), dtype))
        return Variable(dims, data, attributes, encoding)

    def get_variables(self) -> dict[str, Variable]:
        return {name: self.open_store_variable(name, array) for name, array in self._group.arrays()}

    def get_attrs(self) -> dict[str, Any]:
        return {k: v for k, v in self._group.attrs.asdict().items() if not k.lower().startswith("_nc")}

    def get_dimensions(self) -> dict[str, int]:
        dims: dict[str, int] = {}
        for name, array in self._group.arrays():
            for d, n in zip(_dimensions(name, array, self._unnamed_dims), array.shape, strict=True):
                if dims.setdefault(d, n) != n:
                    raise MetadataError(f"dimension {d!r} has length {dims[d]} and {n} (array {name!r})")
        return dims

    def close(self) -> None:
        """Nothing to release: rectizarr holds no open handles."""
