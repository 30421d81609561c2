"""The user-facing :class:`Array` (the API surface: the rest of the handle is in the package's other
modules), its indexers, pickling, and :func:`create`."""

from __future__ import annotations

from typing import Any

import numpy as np

from rectizarr import nodes
from rectizarr._util import Shape
from rectizarr.arrays.resize import Resizable
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.core.metadata import ArrayMeta
from rectizarr.errors import NodeTypeError, ReadOnlyError, SelectionError
from rectizarr.stores import Store

__all__ = ["Array", "StagedTarget", "create"]


class _Indexer:
    def __init__(self, array: Array, kind: str) -> None:
        self._array, self._kind = array, kind

    def __getitem__(self, selection: Any) -> Any:
        return self._array._read(lambda: self._array._plan(self._kind, selection), selection)

    def __setitem__(self, selection: Any, value: Any) -> None:
        self._array._write(lambda: self._array._plan(self._kind, selection), value)


class Array(Resizable):
    """A Zarr v3 (or v2) array in a store. Create with :func:`rectizarr.create_array`, open with
    :func:`rectizarr.open_array`."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as store + path + options; the lock and caches are rebuilt where it is unpickled
        (dask.distributed ships arrays to worker processes this way)."""
        return (_reopen, (self._store, self._path, self._read_only, self._write_empty_chunks, self._workers))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.asarray(self[...])
        return out if dtype is None else out.astype(dtype)

    @property
    def oindex(self) -> _Indexer:
        """Orthogonal (outer) indexing: per axis an int, slice, int array or bool mask."""
        return _Indexer(self, "orthogonal")

    @property
    def vindex(self) -> _Indexer:
        """Coordinate (vectorised) indexing: broadcast int arrays, or one full-shape bool mask."""
        return _Indexer(self, "coordinate")

    @property
    def blocks(self) -> _Indexer:
        """Selection in units of storage chunks (shards), on rectilinear grids too."""
        return _Indexer(self, "block")

    def get_basic_selection(self, selection: Any = Ellipsis, *, out: np.ndarray | None = None) -> Any:
        """Read a basic (NumPy slicing) selection; ``out`` receives the result when given."""
        return self._read(lambda: self._plan("basic", selection), selection, out)

    def set_basic_selection(self, selection: Any, value: Any) -> None:
        """Write ``value`` (broadcast as NumPy does) to a basic selection."""
        self._write(lambda: self._plan("basic", selection), value)

    def get_orthogonal_selection(self, selection: Any, *, out: np.ndarray | None = None) -> Any:
        """Read an orthogonal selection: integer or boolean arrays applied to each axis independently."""
        return self._read(lambda: self._plan("orthogonal", selection), selection, out)

    def set_orthogonal_selection(self, selection: Any, value: Any) -> None:
        """Write ``value`` to an orthogonal selection."""
        self._write(lambda: self._plan("orthogonal", selection), value)

    def get_coordinate_selection(self, selection: Any, *, out: np.ndarray | None = None) -> Any:
        """Read the points given by one integer array per axis (pointwise)."""
        return self._read(lambda: self._plan("coordinate", selection), selection, out)

    def set_coordinate_selection(self, selection: Any, value: Any) -> None:
        """Write ``value`` at the points given by one integer array per axis."""
        self._write(lambda: self._plan("coordinate", selection), value)

    def get_mask_selection(self, mask: Any, *, out: np.ndarray | None = None) -> Any:
        """Read the elements where a boolean mask of the array's shape is true."""
        # the shape the mask must have is the stored one
        return self._read(lambda: self._plan("coordinate", _mask(mask, self._revalidate().shape)), mask, out)

    def set_mask_selection(self, mask: Any, value: Any) -> None:
        """Write ``value`` where a boolean mask of the array's shape is true."""
        self._write(lambda: self._plan("coordinate", _mask(mask, self._revalidate().shape)), value)

    def get_block_selection(self, selection: Any, *, out: np.ndarray | None = None) -> Any:
        """Read whole storage chunks by chunk index (what ``a.blocks[...]`` does)."""
        return self._read(lambda: self._plan("block", selection), selection, out)

    def set_block_selection(self, selection: Any, value: Any) -> None:
        """Write whole storage chunks by chunk index."""
        self._write(lambda: self._plan("block", selection), value)


class StagedTarget:
    """The target of ``dask.array.store`` for a staged handle (:meth:`Array.staged_resize`): writes go
    through :meth:`Array.write_staged`; pickled with its document (not read again where unpickled)."""

    def __init__(self, array: Array) -> None:
        self.array = array
        self.shape, self.dtype, self.ndim = array.shape, array.dtype, array.ndim

    def __setitem__(self, selection: Any, value: Any) -> None:
        self.array.write_staged(selection, value)

    def __reduce__(self) -> tuple[Any, ...]:
        a = self.array
        args = (a.store, a.path, nodes.node_doc(a.metadata), a._write_empty_chunks, a._workers)
        return (_staged_target, args)


def _staged_target(
    store: Store, path: str, doc: dict[str, Any], write_empty_chunks: bool, workers: int | None
) -> StagedTarget:
    meta = nodes.node_from_json(doc)
    assert isinstance(meta, ArrayMeta)
    return StagedTarget(Array(store, path, meta, write_empty_chunks=write_empty_chunks, workers=workers))


def _mask(mask: Any, shape: Shape) -> Any:
    m = np.asarray(mask)
    if m.dtype != bool or m.shape != shape:
        raise SelectionError(f"mask must be a bool array of shape {shape}, got {m.dtype} {m.shape}")
    return m


def _reopen(store: Store, path: str, read_only: bool, write_empty_chunks: bool, workers: int | None) -> Array:
    meta = nodes.read_meta(store, path)
    if not isinstance(meta, ArrayMeta):
        raise NodeTypeError(f"the node at {path or '/'!r} in {store!r} is a group, not an array")
    return Array(
        store, path, meta, read_only=read_only, write_empty_chunks=write_empty_chunks, workers=workers
    )


def create(
    store: Store,
    path: str,
    meta: ArrayMeta,
    pipeline: CodecPipeline,
    *,
    overwrite: bool,
    write_empty_chunks: bool = False,
    workers: int | None = None,
) -> Array:
    """Write a new array node (ancestors created as groups) and return it."""
    if store.read_only:
        raise ReadOnlyError("cannot create an array in a read-only store")
    with nodes.locked(store, path):
        docs = nodes.AncestorDocs(store)
        if overwrite:
            nodes.delete_node(store, path, docs)
            nodes.create_node(store, path, meta, docs)
        else:
            nodes.create_new(store, path, meta, docs)
    return Array(store, path, meta, write_empty_chunks=write_empty_chunks, workers=workers, pipeline=pipeline)
