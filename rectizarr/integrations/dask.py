"""Dask integration: rectizarr arrays as lazy dask arrays, and dask arrays written chunk-aligned.

>>> x = rectizarr.to_dask(array)                      # one block per storage chunk (shard)
>>> x = rectizarr.to_dask(array, chunks="read")       # one block per inner chunk when sharded
>>> rectizarr.from_dask(x.rechunk(((31, 28, 31), 100)), "out.zarr", name="t")   # rectilinear grid

Tasks carry an :class:`ArrayRef` (the picklable store, the node path and the open mode), never the
``Array`` object or its data, so graphs pickle and run on ``dask.distributed`` workers in other processes.
Each process opens a reference once and keeps it (a small per-process cache), so the shard index cache
is shared by the tasks a worker runs.

**Write guarantee.** :func:`from_dask` never lets two tasks write the same storage unit (chunk, or shard
when sharded). With ``chunks="match"`` the storage grid *is* the dask block grid (rectilinear when the
dask chunks are irregular), so every block is exactly one complete chunk or, with ``shards="match"``, one
complete shard: no locks and no read-modify-write. When the target grid does not line up with the dask
blocks, the dask array is first rechunked along the misaligned axes to the storage unit boundaries
(``write_chunk_sizes``), so every task owns whole storage units and no write can be lost, whatever the
scheduler. (Writing misaligned blocks into shared shards from several processes is what loses data in
zarr-python, its issue 3682.)

A :class:`~rectizarr.MemoryStore` pickles by value: distributed *reads* work on a copy, distributed
*writes* cannot work and raise when the graph is pickled; use a directory or an fsspec store.
"""

from __future__ import annotations

import importlib
import itertools
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from rectizarr._util import in_forked_child
from rectizarr.api import create_array, open_array
from rectizarr.arrays import Array
from rectizarr.errors import MetadataError, ReadOnlyError, UnsupportedError
from rectizarr.stores import MemoryStore, Store

if TYPE_CHECKING:
    from dask.delayed import Delayed

__all__ = [
    "ArrayRef",
    "aligned_chunks",
    "from_dask",
    "from_zarr",
    "store_dask",
    "to_dask",
    "to_rectizarr",
    "to_zarr",
    "write_tasks",
]

Chunks = tuple[tuple[int, ...], ...]

# ------------------------------------------------------------------------------ array references

_CACHE_SIZE = 128
_cache: OrderedDict[tuple[int, str], Array] = OrderedDict()
_cache_lock = threading.Lock()


@in_forked_child
def _relock() -> None:  # pragma: no cover - runs in forked children
    global _cache_lock
    _cache_lock = threading.Lock()


def _cache_get(token: str) -> Array | None:
    with _cache_lock:
        arr = _cache.get((os.getpid(), token))
        if arr is not None:
            _cache.move_to_end((os.getpid(), token))
        return arr


def _cache_put(token: str, array: Array) -> None:
    with _cache_lock:
        _cache[(os.getpid(), token)] = array
        _cache.move_to_end((os.getpid(), token))
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


class ArrayRef:
    """What a task needs to reopen an array: the (picklable) store, the node path and the mode.

    :meth:`open` returns the array, opening it at most once per process and reference (``token``); the
    expected ``shape`` guards against an array that was resized after the graph was built. A reader's
    regions are explicit, so an array that has only grown since (an append) is still read as it was
    then; a writer's blocks were aligned to the storage units of that shape, so it must be unchanged.
    """

    __slots__ = ("mode", "path", "shape", "store", "token")

    def __init__(self, store: Store, path: str, mode: str, shape: tuple[int, ...], token: str) -> None:
        self.store = store
        self.path = path
        self.mode = mode
        self.shape = shape
        self.token = token

    @classmethod
    def of(cls, array: Array, mode: str = "r") -> ArrayRef:
        """A new reference to ``array``; in this process it resolves to ``array`` itself."""
        if mode != "r" and array.read_only:
            raise ReadOnlyError(f"array {array.name!r} is read-only")
        ref = cls(array.store, array.path, mode, array.shape, uuid.uuid4().hex)
        _cache_put(ref.token, array)
        return ref

    def open(self) -> Array:
        arr = _cache_get(self.token)
        if arr is None:
            arr = open_array(self.store, path=self.path, mode=self.mode)
            _cache_put(self.token, arr)
        grown = (
            self.mode == "r"
            and len(arr.shape) == len(self.shape)
            and all(n >= m for n, m in zip(arr.shape, self.shape, strict=True))
        )
        if arr.shape != self.shape and not grown:
            raise MetadataError(
                f"array {arr.name!r} now has shape {arr.shape}, not {self.shape} as when the "
                "dask graph was built; rebuild it"
            )
        return arr

    def __reduce__(self) -> tuple[Any, ...]:
        inner: Any = self.store
        while hasattr(inner, "inner"):  # wrappers such as CountingStore
            inner = inner.inner
        if self.mode != "r" and isinstance(inner, MemoryStore):
            raise ReadOnlyError(
                "a MemoryStore pickles by value, so writes made in another process would be "
                "lost: write from dask workers to a directory or an fsspec store"
            )
        if self.mode != "r" and "memory" in _protocols(inner):
            raise ReadOnlyError(
                "fsspec's memory:// filesystem lives in each process, so writes made by dask "
                "workers in other processes would be lost: write to a directory or object store"
            )
        return (ArrayRef, (self.store, self.path, self.mode, self.shape, self.token))

    def __dask_tokenize__(self) -> tuple[str, ...]:
        return ("rectizarr.ArrayRef", self.token, self.mode)

    def __repr__(self) -> str:
        return f"ArrayRef({self.store!r}, {self.path!r}, mode={self.mode!r})"


def _protocols(store: Any) -> set[str]:
    """The protocols of an fsspec-backed store's filesystem (empty for other stores)."""
    protocol = getattr(getattr(store, "fs", None), "protocol", ())
    return {protocol} if isinstance(protocol, str) else set(protocol)


def _dask() -> tuple[Any, Any]:
    """``dask.array`` and ``HighLevelGraph``, imported on first use (typed as Any: dask is untyped)."""
    return importlib.import_module("dask.array"), importlib.import_module(
        "dask.highlevelgraph"
    ).HighLevelGraph


def _read_block(ref: ArrayRef, region: tuple[slice, ...]) -> np.ndarray:
    return np.asarray(ref.open()[(*region, Ellipsis)])


def _write_block(ref: ArrayRef, block: Any, region: tuple[slice, ...]) -> np.ndarray:
    block = np.asarray(block)
    ref.open()[(*region, Ellipsis)] = block
    return np.full((1,) * block.ndim, block.size, dtype=np.int64)


def _regions(chunks: Chunks) -> tuple[list[tuple[int, ...]], list[tuple[slice, ...]]]:
    """Block indices and the array region of each block, in C order."""
    per_axis = []
    for sizes in chunks:
        stops = np.cumsum(sizes, dtype=np.int64)
        per_axis.append([slice(int(b - s), int(b)) for s, b in zip(sizes, stops, strict=True)])
    indices = list(itertools.product(*(range(len(c)) for c in chunks)))
    return indices, [tuple(per_axis[ax][i] for ax, i in enumerate(idx)) for idx in indices]


def _dask_sizes(sizes: Chunks, shape: tuple[int, ...]) -> Chunks:
    """rectizarr reports no chunks along an empty axis; dask wants ``(0,)``."""
    return tuple(s if n else (0,) for s, n in zip(sizes, shape, strict=True))


# -------------------------------------------------------------------------------------------- read


def to_dask(array: Array, *, chunks: Any = "storage", name: str | None = None) -> Any:
    """A lazy dask array reading ``array``.

    ``chunks="storage"`` (default): one block per storage chunk, or per shard when sharded
    (:attr:`Array.write_chunk_sizes`), rectilinear grids included; ``"read"``: one block per inner chunk
    (:attr:`Array.read_chunk_sizes`); anything else is a dask chunk specification (normalised against the
    storage chunks, so ``"auto"`` keeps to their multiples). Each task reads one block through an
    :class:`ArrayRef`; ``name`` fixes the dask key name (default: unique per call).
    """
    da, HighLevelGraph = _dask()
    if not isinstance(array, Array):
        raise TypeError(f"to_dask expects a rectizarr Array, got {type(array).__name__}")
    storage = _dask_sizes(array.write_chunk_sizes, array.shape)
    if isinstance(chunks, str) and chunks == "storage":
        normalized: Chunks = storage
    elif isinstance(chunks, str) and chunks == "read":
        normalized = _dask_sizes(array.read_chunk_sizes, array.shape)
    else:
        normalized = da.core.normalize_chunks(chunks, array.shape, dtype=array.dtype, previous_chunks=storage)
    ref = ArrayRef.of(array, "r")
    name = name or f"rectizarr-read-{ref.token}"
    indices, regions = _regions(normalized)
    dsk = {(name, *idx): (_read_block, ref, region) for idx, region in zip(indices, regions, strict=True)}
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=())
    meta = np.empty((0,) * array.ndim, dtype=array.dtype)
    return da.Array(graph, name, chunks=normalized, dtype=array.dtype, meta=meta)


# ------------------------------------------------------------------------------------------- write


def _edges(sizes: tuple[int, ...], extent: int) -> int | list[int]:
    """Per-axis chunk argument for create_array: an int when regular, else the list of edges (the empty
    blocks of a filtered dask array, ``x[x > 3]``, are no edges)."""
    sizes = tuple(s for s in sizes if s)
    if extent == 0 or not sizes:
        return max(1, sizes[0] if sizes else 1)
    if len(sizes) == 1 or (len(set(sizes[:-1])) == 1 and sizes[-1] <= sizes[0]):
        return sizes[0]
    return list(sizes)


def _boundaries(sizes: Sequence[int]) -> set[int]:
    return {int(b) for b in np.cumsum(sizes) if b}  # (an empty leading block is no boundary)


def aligned_chunks(block_chunks: Chunks, unit_sizes: Chunks) -> Chunks:
    """Dask chunks where every block is a union of whole storage units.

    Per axis: the dask chunks are kept when each block boundary is a storage unit boundary, else the axis
    is rechunked to the storage units themselves.
    """
    out = []
    for blocks, units in zip(block_chunks, unit_sizes, strict=True):
        out.append(blocks if not units or _boundaries(blocks) <= _boundaries(units) else units)
    return tuple(out)


def from_dask(
    x: Any,
    store: Any,
    *,
    name: str | None = None,
    chunks: Any = "match",
    shards: Any = None,
    compute: bool = True,
    **create_kwargs: Any,
) -> Any:
    """Write the dask array ``x`` to a new array ``name`` in ``store``; returns the :class:`Array`, or with
    ``compute=False`` a ``dask.delayed.Delayed`` that writes when computed.

    ``chunks="match"`` stores one chunk per dask block (a rectilinear grid where the dask chunks are
    irregular); ``shards="match"`` stores one shard per dask block, ``chunks`` then giving the (regular)
    inner chunk shape. Any other ``chunks``/``shards`` are as for :func:`rectizarr.create_array`, and the
    dask array is rechunked along misaligned axes so that no storage unit is written by two tasks (see
    the module docstring). ``create_kwargs`` go to :func:`rectizarr.create_array` (``dtype`` defaults to
    the dask array's, ``overwrite``, ``fill_value``, ``dimension_names``, ``compressors``, ...).
    """
    da, _ = _dask()
    if not isinstance(x, da.Array):
        raise TypeError(f"from_dask expects a dask array, got {type(x).__name__}")
    if any(np.isnan(c) for axis in x.chunks for c in axis):
        raise MetadataError("the dask array has unknown chunk sizes; call compute_chunk_sizes() first")
    match_edges = [_edges(tuple(int(c) for c in axis), n) for axis, n in zip(x.chunks, x.shape, strict=True)]
    if shards == "match":
        if isinstance(chunks, str):
            raise MetadataError("with shards='match', chunks must give the regular inner chunk shape")
        shards = match_edges
    elif isinstance(chunks, str) and chunks == "match":
        chunks = match_edges
    create_kwargs.setdefault("dtype", x.dtype)
    arr = create_array(store, name=name, shape=x.shape, chunks=chunks, shards=shards, **create_kwargs)
    writes = store_dask(x, arr)
    if compute:
        cast(Any, writes).compute()
        return arr
    return writes


to_rectizarr = from_dask  # the dask-style spelling: ``to_rectizarr(x, store, ...)``


def store_dask(x: Any, array: Array) -> Delayed:
    """A ``Delayed`` writing the dask array ``x`` into all of ``array`` (same shape), one task per block,
    after rechunking ``x`` so that every task owns whole storage units; computing it gives the number of
    elements written."""
    # (graph not optimised here: computed together with other writes, work they share runs once)
    return cast("Delayed", write_tasks(x, array).sum().to_delayed(optimize_graph=False).item())


def _without_empty_blocks(x: Any) -> Any:
    """``x`` without its blocks of no elements. An elementwise operation on a dask array with an empty
    block on an axis other than the first loses blocks from its graph (dask 2026.7: ``x * 2`` of chunks
    ``((4,), (0, 1))`` computes to shape (4, 2)); such a graph is refused, naming the fix, rather than
    written (it failed with "could not broadcast" or dask's "Missing dependency")."""
    graph = x.__dask_graph__()
    missing = [k for k in _flat_keys(x.__dask_keys__()) if k not in graph]
    if missing:
        raise UnsupportedError(
            f"the dask array {x.name!r} has empty blocks (chunks {x.chunks}) and its graph lacks {len(missing)} "
            "of its blocks (a dask bug with empty blocks under elementwise operations): rechunk away the "
            "empty blocks before those operations"
        )
    if x.size == 0:
        return x
    for ax, sizes in enumerate(x.chunks):  # (dask's ``blocks`` takes one list at a time)
        if 0 in sizes:
            x = x.blocks[(slice(None),) * ax + ([i for i, n in enumerate(sizes) if n],)]
    return x


def _flat_keys(keys: Any) -> Iterator[Any]:
    if isinstance(keys, list):
        for k in keys:
            yield from _flat_keys(k)
    else:
        yield keys


def write_tasks(x: Any, array: Array) -> Any:
    """The write step of :func:`store_dask` as a dask array with one element per write task (the count of
    elements it wrote); its blocks are the (aligned) blocks of ``x`` and each owns whole storage units."""
    da, HighLevelGraph = _dask()
    x = da.asarray(x)
    if tuple(x.shape) != array.shape:
        raise MetadataError(
            f"cannot store a dask array of shape {x.shape} into an array of shape {array.shape}"
        )
    if any(0 in axis for axis in x.chunks):
        x = _without_empty_blocks(x)
    if x.dtype != array.dtype:
        x = x.astype(array.dtype)
    if array.size:
        target = aligned_chunks(x.chunks, array.write_chunk_sizes)
        if target != x.chunks:
            x = x.rechunk(target)
    ref = ArrayRef.of(array, "r+")
    name = f"rectizarr-write-{ref.token}"
    indices, regions = _regions(x.chunks)
    dsk = {
        (name, *idx): (_write_block, ref, (x.name, *idx), region)
        for idx, region in zip(indices, regions, strict=True)
    }
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=[x])
    return da.Array(
        graph,
        name,
        chunks=tuple((1,) * len(c) for c in x.chunks),
        dtype=np.int64,
        meta=np.empty((0,) * x.ndim, dtype=np.int64),
    )


# ------------------------------------------------------------------------------ path-taking helpers


def from_zarr(
    url: Any,
    component: str | None = None,
    *,
    chunks: Any = "storage",
    storage_options: dict[str, Any] | None = None,
    name: str | None = None,
) -> Any:
    """The array at ``url`` (a path, URL or store; ``component``: the node path inside it) as a lazy dask
    array, one block per storage chunk by default, like ``dask.array.from_zarr`` (see :func:`to_dask`
    for ``chunks``)."""
    array = open_array(url, path=component, mode="r", storage_options=storage_options)
    return to_dask(array, chunks=chunks, name=name)


def to_zarr(
    x: Any,
    url: Any,
    component: str | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    overwrite: bool = False,
    compute: bool = True,
    **create_kwargs: Any,
) -> Any:
    """Write the dask array ``x`` to a new array at ``url`` / ``component``, like ``dask.array.to_zarr``:
    one storage chunk per dask block (rectilinear where the blocks are irregular) unless ``chunks`` /
    ``shards`` say otherwise. Returns the :class:`Array`, or with ``compute=False`` the ``Delayed`` write."""
    from rectizarr.nodes import store_for

    store = store_for(url, "w" if overwrite else "a", storage_options)
    return from_dask(x, store, name=component, overwrite=overwrite, compute=compute, **create_kwargs)
