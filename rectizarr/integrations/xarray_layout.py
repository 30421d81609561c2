"""How an xarray variable maps onto an array (creation keywords from its encoding and dask chunks) and
the checks xarray makes before writing into a stored array (names, sizes, regions, safe chunks)."""

from __future__ import annotations

import importlib
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
from xarray import Variable

from rectizarr._util import is_int
from rectizarr.arrays import Array

__all__ = ["array_kwargs", "check_existing", "check_safe_chunks", "is_dask", "target_slices"]

_LAYOUT = frozenset({"chunks", "shards", "compressors", "compressor", "filters", "serializer", "fill_value",
                     "write_empty_chunks", "chunk_key_encoding", "cache_metadata"})
_DROPPED = frozenset({"preferred_chunks", "source", "original_shape", "dtype", "coordinates"})


def is_dask(data: Any) -> bool:
    return type(data).__module__.startswith("dask.") and hasattr(data, "dask")


def _chunks_arg(name: str, key: str, value: Any, shape: tuple[int, ...], strict: bool) -> Any:
    """``encoding[key]`` as create_array's per-axis chunks (an int or the edges of each axis), or None
    when absent; None also when it no longer fits the variable and came from a store (not from the user)."""
    if value is None or (isinstance(value, str) and value == "auto"):
        return None
    if is_int(value):
        return [int(value)] * len(shape) if shape else []
    problem = None
    out: list[Any] = []
    if not isinstance(value, tuple | list) or len(value) != len(shape):
        problem = f"has {len(value) if isinstance(value, tuple | list) else 'no'} entries for {len(shape)} dimensions"
    else:
        for axis, (c, n) in enumerate(zip(value, shape, strict=True)):
            if is_int(c):
                out.append(max(1, int(c)))
            elif isinstance(c, tuple | list) and all(is_int(x) for x in c) and (sum(c) == n or not n):
                out.append([int(x) for x in c] or [1])
            else:
                problem = f"gives {c!r} along axis {axis}, which does not cover its length {n}"
                break
    if problem is None:
        return out
    if strict:
        raise ValueError(f"encoding[{key!r}]={value!r} for variable {name!r} {problem}")
    return None


def array_kwargs(name: str, var: Variable, *, strict: bool, dask_chunks: Any) -> dict[str, Any]:
    """create_array / from_dask keywords for the (CF-encoded) variable ``var``; ``strict``: its encoding
    came from the user, so unknown keys and chunks that do not fit raise (as in xarray)."""
    xz = importlib.import_module("xarray.backends.zarr")
    # (``_FillValue: None``, xarray's way to write no fill value, is left in the encoding after CF encoding)
    enc = {k: v for k, v in var.encoding.items() if k not in _DROPPED and not (k == "_FillValue" and v is None)}
    invalid = [k for k in enc if k not in _LAYOUT]
    if invalid and strict:
        raise ValueError(f"unexpected encoding parameters for zarr backend:  {invalid!r}.")
    shape = tuple(var.shape)
    chunks = _chunks_arg(name, "chunks", enc.get("chunks"), shape, strict)
    shards = _chunks_arg(name, "shards", enc.get("shards"), shape, strict)
    fill = enc.get("fill_value")
    if fill is None and var.dtype.kind == "f":
        fill = np.nan  # what xarray's Zarr v3 writer stores for floats
    attrs = dict(var.attrs)
    if attrs.get("_FillValue") is not None:
        attrs["_FillValue"] = xz.FillValueCoder.encode(attrs["_FillValue"], var.dtype)
    kwargs: dict[str, Any] = {
        "dtype": var.dtype, "fill_value": fill,
        "dimension_names": [str(d) for d in var.dims] if var.ndim else None,
        "attributes": {str(k): xz.encode_zarr_attr_value(v) for k, v in attrs.items()},
    }
    for key in ("compressors", "filters", "serializer", "chunk_key_encoding", "write_empty_chunks"):
        if enc.get(key) is not None:
            kwargs[key] = enc[key]
    if "compressor" in enc and "compressors" not in enc:
        kwargs["compressors"] = [] if enc["compressor"] is None else [enc["compressor"]]
    if "compressors" in enc and enc["compressors"] is None:
        kwargs["compressors"] = []
    if shards is not None:
        kwargs["shards"] = shards
    if chunks is not None:
        kwargs["chunks"] = chunks
    elif dask_chunks is None or shards is not None:
        kwargs["chunks"] = "auto" if shards is None else None
    if shards is not None and kwargs["chunks"] is None:
        raise ValueError(f"encoding['shards'] for variable {name!r} needs encoding['chunks'] (the inner chunks)")
    return kwargs


def _resolved(s: slice, n: int) -> slice:
    start, stop, _ = s.indices(n)
    return slice(start, max(start, stop))


def target_slices(dims: tuple[str, ...], shape: tuple[int, ...], region: Mapping[Hashable, slice]) -> tuple[slice, ...]:
    """Where a variable goes in its stored array: the region's slice per region dimension, else all."""
    return tuple(_resolved(region[d], n) if d in region else slice(0, n) for d, n in zip(dims, shape, strict=True))


def check_existing(name: str, var: Variable, array: Array, append_dim: Hashable | None,
                   region: Mapping[Hashable, slice]) -> Variable:
    """xarray's checks before writing into a stored variable: the same dimension names (in any order:
    ``var`` is returned transposed to the stored one), the same sizes except along ``append_dim``, region
    slices inside the stored extent and as long as the data."""
    stored_dims = tuple(str(d) for d in (array.dimension_names or ())) if array.ndim else ()
    by_name = {str(d): d for d in var.dims}
    if set(by_name) == set(stored_dims):
        var = var.transpose(*(by_name[d] for d in stored_dims))
    dims, shape = tuple(str(d) for d in var.dims), var.shape
    if stored_dims != dims:
        raise ValueError(f"variable {name!r} already exists with different dimension names {stored_dims} != {dims}, "
                         "but changing variable dimensions is not supported by to_zarr().")
    stored = dict(zip(dims, array.shape, strict=True))
    new = dict(zip(dims, shape, strict=True))
    for d in dims:
        if d in region:
            s = _resolved(region[d], stored[d])
            if s.stop - s.start != new[d] or (region[d].stop or 0) > stored[d]:
                raise ValueError(f"variable {name!r}: region {d}={region[d]} covers {s.stop - s.start} of the "
                                 f"stored length {stored[d]}, but the data has length {new[d]} along {d!r}")
    keep = [d for d in dims if d != str(append_dim) and d not in region]
    if any(stored[d] != new[d] for d in keep):
        raise ValueError(
            f"variable {name!r} already exists with different dimension sizes: {dict((d, stored[d]) for d in keep)} "
            f"!= {dict((d, new[d]) for d in keep)}. to_zarr() only supports changing dimension sizes when "
            f"explicitly appending, but append_dim={append_dim!r}.")
    return var


def check_safe_chunks(name: str, chunks: tuple[tuple[int, ...], ...], target: tuple[slice, ...],
                      storage: tuple[tuple[int, ...], ...], *, edges: bool) -> None:
    """Refuse dask blocks that would share a storage chunk: every interior block boundary (and with
    ``edges``, the start and end of the target region) must be a boundary of the storage chunks
    (``storage``: their sizes per axis once the array is written, grown by an append)."""
    for axis, (blocks, where, sizes) in enumerate(zip(chunks, target, storage, strict=True)):
        start = where.start or 0
        bounds = set((start + np.cumsum(blocks)[:-1]).tolist())
        if edges:
            bounds |= {start, start + sum(blocks)}
        ends = {0, *np.cumsum(sizes).tolist()}
        bad = sorted(b for b in bounds if b not in ends)
        if bad:
            raise ValueError(
                f"Specified Zarr chunks {sizes!r} along axis {axis} of variable {name!r} "
                f"would overlap multiple Dask chunks (a block boundary at {bad[0]} falls inside a stored chunk). "
                "Consider rechunking using `chunk()`, or specify `safe_chunks=False` (rectizarr's partial chunk "
                "writes are compare-and-swap, so none is lost).")
