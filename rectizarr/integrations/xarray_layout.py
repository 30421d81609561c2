"""How an xarray variable maps onto an array (creation keywords from its encoding and dask chunks) and
the checks xarray makes before writing into a stored array (names, sizes, regions, safe chunks)."""

from __future__ import annotations

import importlib
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
from xarray import Variable

from rectizarr import nodes
from rectizarr._util import is_int
from rectizarr.arrays import Array
from rectizarr.core.spec import NULL_FILL

__all__ = ["array_kwargs", "check_existing", "check_safe_chunks", "is_dask", "target_slices"]

_LAYOUT = frozenset(
    {
        "chunks",
        "shards",
        "compressors",
        "compressor",
        "filters",
        "serializer",
        "fill_value",
        "write_empty_chunks",
        "chunk_key_encoding",
        "cache_metadata",
    }
)
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
    if isinstance(value, tuple | list) and any(
        not is_int(c) and not isinstance(c, tuple | list) for c in value
    ):
        raise TypeError(
            f"zarr chunk sizes specified in `encoding[{key!r}]` must be an int or a tuple of ints (or, "
            f"per axis, a list of chunk lengths). Instead found encoding[{key!r}]={value!r} for variable "
            f"named {name!r}."
        )
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


def array_kwargs(
    name: str, var: Variable, *, strict: bool, dask_chunks: Any, zarr_format: int = 3
) -> dict[str, Any]:
    """create_array / from_dask keywords for the (CF-encoded) variable ``var``; ``strict``: its encoding
    came from the user, so unknown keys and chunks that do not fit raise (as in xarray). In Zarr v2 the
    CF ``_FillValue`` is the array's fill value (``null`` without one) and chunks are regular."""
    xz = importlib.import_module("xarray.backends.zarr")
    # (``_FillValue: None``, xarray's way to write no fill value, is left in the encoding after CF encoding)
    enc = {
        k: v for k, v in var.encoding.items() if k not in _DROPPED and not (k == "_FillValue" and v is None)
    }
    rules = nodes.format_for(zarr_format).rules
    layout = _LAYOUT - {"fill_value"} if rules.nullable_fill else _LAYOUT
    invalid = [k for k in enc if k not in layout]
    if invalid and strict:
        hint = " Use `_FillValue` to set the Zarr array `fill_value`" if "fill_value" in invalid else ""
        raise ValueError(f"unexpected encoding parameters for zarr backend:  {invalid!r}.{hint}")
    shape = tuple(var.shape)
    chunks = _chunks_arg(name, "chunks", enc.get("chunks"), shape, strict)
    shards = _chunks_arg(name, "shards", enc.get("shards"), shape, strict)
    if isinstance(enc.get("shards"), str) and enc["shards"] == "auto" and rules.sharding:
        shards = "auto"  # rectizarr picks the shard shape (create_array's shards="auto")
    attrs = dict(var.attrs)
    if not rules.rectilinear and chunks is None and dask_chunks is not None:
        chunks = regular_dask_chunks(name, dask_chunks)
    if rules.nullable_fill:
        fill = attrs.pop("_FillValue", None)
        fill = NULL_FILL if fill is None else fill
    else:
        fill = enc.get("fill_value")
        if fill is None and var.dtype.kind == "f":
            fill = np.nan  # what xarray's Zarr v3 writer stores for floats
        if attrs.get("_FillValue") is not None:
            attrs["_FillValue"] = xz.FillValueCoder.encode(attrs["_FillValue"], var.dtype)
    kwargs: dict[str, Any] = {
        "dtype": var.dtype,
        "fill_value": fill,
        "dimension_names": [str(d) for d in var.dims] if var.ndim or rules.dims_attribute else None,
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
        raise ValueError(
            f"encoding['shards'] for variable {name!r} needs encoding['chunks'] (the inner chunks)"
        )
    return kwargs


def regular_dask_chunks(name: str, dask_chunks: tuple[tuple[int, ...], ...]) -> list[int]:
    """The regular chunk shape of a Zarr v2 array written from dask blocks: each axis's first block, where
    every block but the last has that size and the last no more (else xarray's error: v2 has no
    rectilinear grids)."""
    out = []
    for blocks in dask_chunks:
        first = blocks[0] if blocks else 1
        if any(b != first for b in blocks[:-1]) or (blocks and blocks[-1] > first):
            raise ValueError(
                f"Zarr requires uniform chunk sizes except for final chunk. Variable named {name!r} has "
                f"incompatible dask chunks: {dask_chunks!r}. Consider rechunking using `chunk()` (or "
                "write Zarr format 3, where irregular chunks become a rectilinear grid)."
            )
        out.append(max(1, first))
    return out


def storage_lengths(chunks: Any, shards: Any, shape: tuple[int, ...]) -> tuple[tuple[int, ...], ...] | None:
    """The lengths of the chunks a new array's writes go by (its shards when sharded) per axis, from
    :func:`array_kwargs`' ``chunks`` / ``shards``; None where those are automatic."""
    given = shards if shards is not None else chunks
    if not isinstance(given, list) or len(given) != len(shape):
        return None
    out = []
    for c, n in zip(given, shape, strict=True):
        if isinstance(c, list):
            out.append(tuple(c))
        else:
            out.append((c,) * (n // c) + ((n % c,) if n % c else ()))
    return tuple(out)


def aligned_rechunk(data: Any, target: tuple[slice, ...], storage: tuple[tuple[int, ...], ...]) -> Any:
    """``data`` (dask) rechunked so that its blocks, written at ``target``, end only on boundaries of the
    stored chunks (``storage``: their lengths per axis), each block about as long as the largest block
    was (``align_chunks=True``): no two blocks share a chunk, so the write is safe."""
    new = []
    for blocks, where, lengths in zip(data.chunks, target, storage, strict=True):
        start = where.start or 0
        stop = start + sum(blocks)
        ends = np.cumsum(lengths).tolist()
        cuts = [int(b) for b in ends if start < b < stop] + [stop]
        longest = max(blocks, default=0)
        out, first, previous = [], start, start
        for cut in cuts:
            if cut - first > longest and previous > first:  # this piece would make the block too long
                out.append(previous - first)
                first = previous
            previous = cut
        if stop > first or not out:
            out.append(stop - first)
        new.append(tuple(out))
    return data.rechunk(tuple(new))


def _resolved(s: slice, n: int) -> slice:
    start, stop, _ = s.indices(n)
    return slice(start, max(start, stop))


def target_slices(
    dims: tuple[str, ...], shape: tuple[int, ...], region: Mapping[Hashable, slice]
) -> tuple[slice, ...]:
    """Where a variable goes in its stored array: the region's slice per region dimension, else all."""
    return tuple(
        _resolved(region[d], n) if d in region else slice(0, n) for d, n in zip(dims, shape, strict=True)
    )


def check_existing(
    name: str, var: Variable, array: Array, append_dim: Hashable | None, region: Mapping[Hashable, slice]
) -> Variable:
    """xarray's checks before writing into a stored variable: the same dimension names (in any order:
    ``var`` is returned transposed to the stored one), the same sizes except along ``append_dim``, region
    slices inside the stored extent and as long as the data."""
    stored_dims = tuple(str(d) for d in (array.dimension_names or ())) if array.ndim else ()
    by_name = {str(d): d for d in var.dims}
    if set(by_name) == set(stored_dims):
        var = var.transpose(*(by_name[d] for d in stored_dims))
    dims, shape = tuple(str(d) for d in var.dims), var.shape
    if stored_dims != dims:
        raise ValueError(
            f"variable {name!r} already exists with different dimension names {stored_dims} != {dims}, "
            "but changing variable dimensions is not supported by to_zarr()."
        )
    stored = dict(zip(dims, array.shape, strict=True))
    new = dict(zip(dims, shape, strict=True))
    for d in dims:
        if d in region:
            s = _resolved(region[d], stored[d])
            if s.stop - s.start != new[d] or (region[d].stop or 0) > stored[d]:
                raise ValueError(
                    f"variable {name!r} already exists with different dimension sizes: the region "
                    f"{d}={region[d]} covers {s.stop - s.start} of the stored length {stored[d]}, but "
                    f"the data has length {new[d]} along {d!r}"
                )
    keep = [d for d in dims if d != str(append_dim) and d not in region]
    if any(stored[d] != new[d] for d in keep):
        raise ValueError(
            f"variable {name!r} already exists with different dimension sizes: {dict((d, stored[d]) for d in keep)} "
            f"!= {dict((d, new[d]) for d in keep)}. to_zarr() only supports changing dimension sizes when "
            f"explicitly appending, but append_dim={append_dim!r}."
        )
    return var


def check_safe_chunks(
    name: str,
    chunks: tuple[tuple[int, ...], ...],
    target: tuple[slice, ...],
    storage: tuple[tuple[int, ...], ...],
    *,
    edges: bool,
) -> None:
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
                f"Specified Zarr chunks {sizes!r} along axis {axis} of the variable named {name!r} "
                f"would overlap multiple Dask chunks (a block boundary at {bad[0]} falls inside a stored chunk). "
                "Consider rechunking using `chunk()`, or specify `safe_chunks=False` (rectizarr's partial chunk "
                "writes are compare-and-swap, so none is lost)."
            )
