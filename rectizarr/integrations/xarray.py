"""xarray integration: ``xarray.open_dataset(path, engine="rectizarr")`` and :func:`to_rectizarr`.

Reading: a group's arrays become the variables of a Dataset; dimensions come from each array's
``dimension_names``; attributes and CF decoding (times, scale/offset, ``_FillValue``, the ``coordinates``
attribute) follow xarray's Zarr v3 conventions, so stores written by ``Dataset.to_zarr(zarr_format=3)``
open identically. Data loads lazily, one orthogonal selection per access; with ``chunks={}`` the dask
chunks are the storage chunks (shards when sharded; rectilinear grids give irregular dask chunks).
Backend arrays hold a picklable :class:`~rectizarr.integrations.dask.ArrayRef`, so datasets run on distributed workers.

Arrays without ``dimension_names`` raise, as xarray's own Zarr backend does for Zarr v3; pass
``unnamed_dims="dim_n"`` to name their missing dimensions ``dim_0``, ``dim_1``, ... by axis instead.

Writing: :func:`to_rectizarr` encodes a Dataset exactly as ``to_zarr(zarr_format=3)`` would and writes
every variable as an array with its dimension names; dask-backed variables are written one task per
block through :func:`rectizarr.integrations.dask.from_dask` (one chunk per block, rectilinear when the dask chunks are
irregular; no storage unit is ever written by two tasks).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np
from xarray import Dataset, Variable, conventions
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.backends.common import AbstractDataStore
from xarray.backends.store import StoreBackendEntrypoint
from xarray.core import indexing

from rectizarr.array import Array
from rectizarr.errors import MetadataError
from rectizarr.group import Group, consolidate_metadata, open_group
from rectizarr.integrations.dask import ArrayRef, from_dask
from rectizarr.stores import Store

__all__ = ["RectizarrBackendArray", "RectizarrBackendEntrypoint", "RectizarrDataStore", "to_rectizarr"]

_UNNAMED = ("raise", "dim_n")
_LAYOUT_KEYS = frozenset({"chunks", "shards", "compressors", "filters", "serializer", "fill_value"})


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

    def _raw(self, key: tuple[Any, ...]) -> np.ndarray[Any, Any]:
        array = self._ref.open()
        if any(isinstance(k, np.ndarray) for k in key):
            return np.asarray(array.oindex[key])
        return np.asarray(array[(*key, Ellipsis)])


def _dimensions(name: str, array: Array, unnamed_dims: str) -> tuple[str, ...]:
    names = array.dimension_names
    if names is not None and all(n is not None for n in names):
        return tuple(str(n) for n in names)
    if unnamed_dims == "raise":
        raise MetadataError(
            f"array {array.name!r} has no dimension_names (or some are null), which xarray needs to know its "
            "dimensions; open with unnamed_dims='dim_n' to name them dim_0, dim_1, ... by axis",
            key=(array.path + "/zarr.json").lstrip("/"),
        )
    return tuple(str(n) if n is not None else f"dim_{i}"
                 for i, n in enumerate(names if names is not None else (None,) * array.ndim))


class RectizarrDataStore(AbstractDataStore):
    """An xarray data store over a rectizarr :class:`~rectizarr.Group` (read-only)."""

    __slots__ = ("_group", "_unnamed_dims")

    def __init__(self, group: Group, *, unnamed_dims: str = "raise") -> None:
        if unnamed_dims not in _UNNAMED:
            raise MetadataError(f"unnamed_dims must be one of {_UNNAMED}, got {unnamed_dims!r}")
        self._group = group
        self._unnamed_dims = unnamed_dims

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
        if array.is_sharded:
            encoding["shards"] = storage
        if "_FillValue" in attributes:  # xarray's Zarr v3 form of the CF attribute
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


def _open_group(obj: Any, group: str | None, storage_options: Mapping[str, Any] | None) -> Group:
    if isinstance(obj, Group):
        node = obj[group] if group else obj
        if not isinstance(node, Group):
            raise MetadataError(f"{group!r} in {obj.name!r} is an array, not a group")
        return node
    return open_group(obj, path=group, mode="r", storage_options=storage_options)


class RectizarrBackendEntrypoint(BackendEntrypoint):
    """``xarray.open_dataset(path, engine="rectizarr")``: a Zarr v3 group as a Dataset, read by rectizarr.

    ``filename_or_obj`` is anything :func:`rectizarr.open_group` takes (a directory, an fsspec URL, a
    rectizarr store) or a :class:`~rectizarr.Group`; ``group`` selects a sub-group; ``storage_options``
    go to fsspec; ``unnamed_dims`` is ``"raise"`` (xarray's behaviour) or ``"dim_n"``.
    """

    description = "Open Zarr v3 groups (rectilinear chunk grids and sharding included) with rectizarr"
    url = "https://github.com/rectizarr/rectizarr"
    open_dataset_parameters = (
        "filename_or_obj", "mask_and_scale", "decode_times", "concat_characters", "decode_coords",
        "drop_variables", "use_cftime", "decode_timedelta", "group", "storage_options", "unnamed_dims",
    )

    def open_dataset(
        self,
        filename_or_obj: Any,
        *,
        mask_and_scale: bool = True,
        decode_times: Any = True,
        concat_characters: bool = True,
        decode_coords: Any = True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime: bool | None = None,
        decode_timedelta: Any = None,
        group: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        unnamed_dims: str = "raise",
    ) -> Dataset:
        store = RectizarrDataStore(_open_group(filename_or_obj, group, storage_options), unnamed_dims=unnamed_dims)
        ds: Dataset = StoreBackendEntrypoint().open_dataset(
            store, mask_and_scale=mask_and_scale, decode_times=decode_times,
            concat_characters=concat_characters, decode_coords=decode_coords, drop_variables=drop_variables,
            use_cftime=use_cftime, decode_timedelta=decode_timedelta,
        )
        return ds

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """Only a local Zarr v3 (or v2) directory, and only when zarr-python (xarray's own Zarr engine) is absent,
        so that installing rectizarr never changes which engine ``open_dataset`` picks by default."""
        if isinstance(filename_or_obj, Group | Store):
            return True
        if not isinstance(filename_or_obj, str | os.PathLike) or importlib.util.find_spec("zarr") is not None:
            return False
        root = os.fspath(filename_or_obj)
        return any(os.path.isfile(os.path.join(root, name)) for name in ("zarr.json", ".zgroup", ".zarray"))


# ------------------------------------------------------------------------------------------- write


def _is_dask(data: Any) -> bool:
    return type(data).__module__.startswith("dask.") and hasattr(data, "dask")


def to_rectizarr(
    dataset: Dataset,
    store: Any,
    *,
    group: str | None = None,
    mode: str = "w-",
    encoding: Mapping[Hashable, Mapping[str, Any]] | None = None,
    consolidated: bool = True,
    storage_options: Mapping[str, Any] | None = None,
) -> Group:
    """Write ``dataset`` as a Zarr v3 group that xarray (``engine="zarr"`` or ``"rectizarr"``) reads back.

    ``mode``: ``"w-"`` creates the group and fails if it exists, ``"w"`` replaces it, ``"a"`` adds to it
    (replacing variables of the same name). Variables are CF-encoded the way ``to_zarr(zarr_format=3)``
    encodes them (times as numbers with units, ``_FillValue``, ``coordinates``); ``encoding`` gives per
    variable the CF keys xarray knows (``dtype``, ``units``, ``scale_factor``, ...) and the layout keys
    ``chunks``, ``shards``, ``compressors``, ``filters``, ``serializer``, ``fill_value`` (as for
    :func:`rectizarr.create_array`). Without ``chunks``, numpy data gets regular chunks of about 1 MiB
    and dask data one chunk per dask block (rectilinear when the blocks are irregular); dask data is
    always written without two tasks sharing a storage unit, in one ``dask.compute`` call.
    ``consolidated`` writes consolidated metadata (as ``to_zarr`` does by default). Returns the group.
    """
    xz = _untyped("xarray.backends.zarr")
    encode_zarr_attr_value = xz.encode_zarr_attr_value
    if mode not in ("w-", "w", "a"):
        raise MetadataError(f"mode must be 'w-', 'w' or 'a', got {mode!r}")
    encoding = {k: dict(v) for k, v in (encoding or {}).items()}
    missing = set(encoding) - set(dataset.variables)
    if missing:
        raise MetadataError(f"encoding given for variables not in the dataset: {sorted(map(str, missing))}")
    ds = dataset.copy(deep=False)
    for name, enc in encoding.items():
        cf = {k: v for k, v in enc.items() if k not in _LAYOUT_KEYS or k == "fill_value"}
        ds.variables[name].encoding = {**ds.variables[name].encoding, **cf}
    variables, attrs = conventions.encode_dataset_coordinates(ds)
    g = open_group(store, path=group, mode=mode, storage_options=storage_options)
    if attrs:
        g.attrs.update({str(k): encode_zarr_attr_value(v) for k, v in attrs.items()})
    writes = []
    for key, raw in variables.items():
        name = str(key)
        var = xz.encode_zarr_variable(raw, name=name, zarr_format=3)
        layout = {k: v for k, v in encoding.get(key, {}).items() if k in _LAYOUT_KEYS}
        fill = layout.pop("fill_value", var.encoding.get("fill_value"))
        if fill is None and var.dtype.kind == "f":
            fill = np.nan  # xarray's default for floats in Zarr v3
        var_attrs = dict(var.attrs)
        if var_attrs.get("_FillValue") is not None:
            var_attrs["_FillValue"] = xz.FillValueCoder.encode(var_attrs["_FillValue"], var.dtype)
        common: dict[str, Any] = {
            "dtype": var.dtype, "fill_value": fill, "dimension_names": [str(d) for d in var.dims],
            "attributes": {str(k): encode_zarr_attr_value(v) for k, v in var_attrs.items()},
            "overwrite": mode == "a",
            **{k: layout[k] for k in ("compressors", "filters", "serializer") if k in layout},
        }
        data = var.data  # loads a lazily indexed (not dask) variable once
        if _is_dask(data):
            path = f"{g.path}/{name}" if g.path else name
            writes.append(from_dask(data, g.store, name=path, chunks=layout.get("chunks", "match"),
                                    shards=layout.get("shards"), compute=False, **common))
            continue
        data = np.asarray(data)
        arr = g.create_array(name, shape=data.shape, chunks=layout.get("chunks", "auto"),
                             shards=layout.get("shards"), **common)
        if data.size:
            arr[...] = data
    if writes:
        _untyped("dask").compute(*writes)
    if consolidated:
        consolidate_metadata(g.store, g.path)
    return g
