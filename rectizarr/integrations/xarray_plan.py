"""Writing an xarray variable into an array: a write into a stored array checked and planned (:class:`Plan`,
its values cast to the stored dtype before any resize), then written (into the array, or into its staged
form for an append published later), and the array of a new variable created and written
(:mod:`.xarray_write`)."""

from __future__ import annotations

import importlib
from collections.abc import Hashable
from typing import Any, NamedTuple

import numpy as np
from xarray import Variable

from rectizarr.arrays import Array, StagedTarget
from rectizarr.core.dims import FixedDim
from rectizarr.core.dtype import as_strings
from rectizarr.core.grid import all_data_lens
from rectizarr.groups import Group
from rectizarr.integrations.dask import from_dask
from rectizarr.integrations.xarray_layout import (
    aligned_rechunk,
    array_kwargs,
    check_existing,
    check_safe_chunks,
    is_dask,
    storage_lengths,
    target_slices,
)

__all__ = ["Plan", "planned", "write_existing", "write_new", "write_staged"]


def _untyped(module: str) -> Any:
    return importlib.import_module(module)


class Plan(NamedTuple):
    """A checked write into a stored array: the values (in the stored dimension order and dtype), the shape
    (grown by an append) with the new edges of a rectilinear append axis, and the target region."""

    data: Any
    shape: tuple[int, ...]
    edges: list[Any] | None
    target: tuple[slice, ...]


def planned(
    name: str,
    var: Variable,
    array: Array,
    append_dim: Hashable | None,
    region: dict[Hashable, slice],
    safe_chunks: bool,
    mode: str,
    align_chunks: bool = False,
) -> Plan:
    """Check a write into a stored array (xarray's checks; safe chunks against the grid as the write leaves
    it) and cast its values to the stored dtype, so that values that do not fit fail before any resize."""
    var = check_existing(name, var, array, append_dim, region)
    dims = tuple(str(d) for d in var.dims)
    data = _as_stored(var.data if is_dask(var.data) else np.asarray(var.data), array)
    shape, edges, grid = array.shape, None, array.grid
    if append_dim is not None and str(append_dim) in dims:
        axis = dims.index(str(append_dim))
        shape = tuple(n + var.shape[axis] if i == axis else n for i, n in enumerate(shape))
        if is_dask(data) and not isinstance(grid.dims[axis], FixedDim):  # the (non-empty) blocks: new chunks
            edges = [[c for c in data.chunks[axis] if c] if i == axis else None for i in range(array.ndim)]
        grid = grid.resize(shape, "new_chunk" if edges is None else edges)
        target = tuple(slice(array.shape[axis], n) if i == axis else slice(0, n) for i, n in enumerate(shape))
    else:
        target = target_slices(dims, shape, region)
    if align_chunks and is_dask(data):
        data = aligned_rechunk(data, target, all_data_lens(grid.dims))
    if safe_chunks and is_dask(data):
        # dask blocks must not share a stored chunk; with mode "r+" (xarray's rule) a region must also
        # start and end on chunk boundaries, where "a" lets its first and last blocks write part of one
        check_safe_chunks(
            name, data.chunks, target, all_data_lens(grid.dims), edges=bool(region) and mode == "r+"
        )
    return Plan(data, shape, edges, target)


def _as_stored(data: Any, array: Array) -> Any:
    """``data`` (NumPy or dask) cast to the stored dtype as zarr-python casts it (numbers and bytes written
    into a string array become text: :meth:`Array.__setitem__`'s cast, done here before any resize)."""
    data = data.astype(array.dtype, copy=False)
    if array.metadata.data_type.name != "string":
        return data
    return data.map_blocks(as_strings, dtype=object) if is_dask(data) else as_strings(data)


def write_existing(array: Array, plan: Plan) -> list[Any]:
    """Append to, overwrite, or write a region of a stored array (checked, and grown, already)."""
    if is_dask(plan.data):
        da = _untyped("dask.array")
        return [da.store(plan.data, array, regions=plan.target, lock=False, compute=False)]
    if plan.data.size:
        array[plan.target] = plan.data
    return []


def write_staged(array: Array, plan: Plan) -> list[Any]:
    """Write an append's data into a staged array (its document not yet published)."""
    if is_dask(plan.data):
        da = _untyped("dask.array")
        return [da.store(plan.data, StagedTarget(array), regions=plan.target, lock=False, compute=False)]
    if plan.data.size:
        array.write_staged(plan.target, plan.data)
    return []


def write_new(
    name: str,
    var: Variable,
    g: Group,
    *,
    strict: bool,
    write_empty_chunks: bool | None,
    zarr_format: int,
    safe_chunks: bool,
    align_chunks: bool = False,
) -> list[Any]:
    """Create the array of a new variable (chunks from the encoding, else dask blocks, else auto)."""
    data = var.data
    kwargs = array_kwargs(
        name, var, strict=strict, dask_chunks=data.chunks if is_dask(data) else None, zarr_format=zarr_format
    )
    if write_empty_chunks is not None:
        kwargs["write_empty_chunks"] = write_empty_chunks
    if is_dask(data):
        storage = storage_lengths(kwargs.get("chunks"), kwargs.get("shards"), tuple(var.shape))
        if align_chunks and storage is not None:
            data = aligned_rechunk(data, tuple(slice(0, n) for n in var.shape), storage)
        if safe_chunks and storage is not None:  # dask blocks that share a chunk (shard) would race
            check_safe_chunks(name, data.chunks, tuple(slice(0, n) for n in var.shape), storage, edges=False)
        path = f"{g.path}/{name}" if g.path else name
        return [
            from_dask(
                data, g.store, name=path, compute=False, overwrite=True, zarr_format=zarr_format, **kwargs
            )
        ]
    values = np.asarray(data)
    array = g.create_array(name, shape=values.shape, overwrite=True, zarr_format=zarr_format, **kwargs)
    if values.size:
        array[...] = values
    return []
