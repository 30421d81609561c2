"""Resizing an array: a grow, a shrink and its clean-up, an append, a staged resize (data written before
its document), and the resize of several arrays of a group as one update."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

import msgspec
import numpy as np

import rectizarr.io as rio
from rectizarr import nodes
from rectizarr._util import Shape
from rectizarr.arrays.access import ArrayAccess
from rectizarr.codecs.build import build_pipeline
from rectizarr.core import dtype_optional
from rectizarr.core.codec_meta import ShardingMeta
from rectizarr.core.dims import VaryingDim
from rectizarr.core.dtype import as_strings, check_unit_cast
from rectizarr.core.grid import ChunkGrid
from rectizarr.core.metadata import ArrayMeta, NodeMeta
from rectizarr.errors import CodecError, MetadataError, NodeNotFoundError, SelectionError, SelectionValueError
from rectizarr.indexing import basic_plan
from rectizarr.io import clear_appended, clear_past_end


class Resizable(ArrayAccess):
    """Resize, append and staged writes (see the module)."""

    def resize(self, new_shape: Sequence[int] | int, *, chunks: Any = None) -> None:
        """Change the shape. Rectilinear axes grow by one new chunk covering the growth (default; a new
        shard is rounded up to whole inner chunks, reaching past the extent), ``chunks="repeat"`` (repeat
        the last edge), or explicit new edges per axis (``chunks=[None, [31, 30]]``). Shrinking deletes
        chunks wholly outside the new shape and resets the out-of-bounds part of the straddling chunks to
        the fill value, so a later grow shows the fill value, not stale data."""
        self._check_writable()
        new_shape = (int(new_shape),) if isinstance(new_shape, int) else tuple(int(s) for s in new_shape)
        if len(new_shape) != self.ndim or any(s < 0 for s in new_shape):
            raise MetadataError(f"new shape {new_shape} does not fit an array of {self.ndim} dimensions")
        self._change_meta(lambda m: self._resized(m, new_shape, chunks), self._clean_up_shrink)

    def _resized(self, old: ArrayMeta, new_shape: Sequence[int], chunks: Any) -> ArrayMeta:
        """``old`` resized (:func:`_resized`); before a grow, what a shrink's clean-up left past the stored
        end (a killed writer, or another writer that grew first) is cleared before the grow shows it (a
        corrupt chunk stays as it is; the others are cleared)."""
        new = _resized(old, tuple(int(n) for n in new_shape), chunks)
        if any(n > o for n, o in zip(new.shape, old.shape, strict=True)):
            with contextlib.suppress(CodecError):
                grown = dataclasses.replace(self._layout, grid=new.chunk_grid)
                clear_past_end(grown, old.chunk_grid, self._grid_now)
        return new

    def _clean_up_shrink(self, old_layout: rio.Layout, old: ArrayMeta, new: ArrayMeta) -> None:
        """After a shrink: chunks outside the new grid deleted, boundary chunks cleared past the extent as
        stored when each is rewritten (:func:`rectizarr.io.delete_outside`)."""
        if any(n < o for n, o in zip(new.shape, old.shape, strict=True)):
            rio.delete_outside(old_layout, new.chunk_grid, self._grid_now)

    def _grid_now(self) -> ChunkGrid | None:
        """The array's grid as stored now (None: no array there any more)."""
        stored = nodes.try_read_meta(self._store, self._path, self._meta.zarr_format)
        return stored.chunk_grid if isinstance(stored, ArrayMeta) else None

    def append(self, data: Any, axis: int = 0, *, chunks: Any = None) -> Shape:
        """Append ``data`` along ``axis`` (grows the array, then writes the new region); returns the new
        shape, as zarr-python does. The data is cast to the array's dtype first (raising what NumPy raises),
        so data that cannot be written never grows the array."""
        try:
            if self._meta.data_type.name == "optional":  # masked values (and plain ones, all present)
                data = dtype_optional.from_user(data, self._meta.data_type.numpy)
            data = np.asarray(data)
            check_unit_cast(data, self.dtype)
            data = data.astype(self.dtype, copy=False)
        except OverflowError as exc:
            raise self._cast_error(exc) from exc
        if self._meta.data_type.name == "string":
            data = as_strings(data)
        if self.ndim == 0:
            raise SelectionError("cannot append to a 0-d array")
        axis = axis + self.ndim if axis < 0 else axis
        if not 0 <= axis < self.ndim:
            raise SelectionError(f"axis {axis} is out of range for {self.ndim} dimensions")
        axis_chunks = None if chunks is None else [chunks if i == axis else None for i in range(self.ndim)]

        def grow(m: ArrayMeta) -> ArrayMeta:  # from the end as stored now
            if data.ndim != len(m.shape) or any(
                d != s for i, (d, s) in enumerate(zip(data.shape, m.shape, strict=True)) if i != axis
            ):
                raise SelectionValueError(  # (a ValueError, as in zarr-python)
                    f"cannot append data of shape {data.shape} to an array of shape {m.shape} "
                    f"along axis {axis}"
                )
            shape = tuple(s + data.shape[axis] if i == axis else s for i, s in enumerate(m.shape))
            new = _resized(m, shape, axis_chunks)
            # what a shrink's clean-up left where the rows go (a corrupt chunk stays: the data overwrites it)
            with contextlib.suppress(CodecError):
                grown = dataclasses.replace(self._layout, grid=new.chunk_grid)
                clear_appended(grown, m.chunk_grid, axis, self._grid_now)
            return new

        def write(_: rio.Layout, old: ArrayMeta, new: ArrayMeta) -> None:  # the region reserved for it
            rows = slice(old.shape[axis], new.shape[axis])
            self[tuple(rows if i == axis else slice(None) for i in range(self.ndim))] = data

        # the document first: it reserves the region (no lock keeps other writers out of it on every store)
        self._change_meta(grow, write)
        return self.shape

    def staged_resize(self, new_shape: Sequence[int], *, chunks: Any = None) -> Self:
        """A handle of this array resized as :meth:`resize` would (from the document as stored now), whose
        document is not written: its data goes in with :meth:`write_staged`, and is seen once the document
        is (:meth:`rectizarr.nodes.DocFormat.publish_many`)."""
        self._check_writable()
        meta = self._take_up(nodes.try_read_meta(self._store, self._path, self._meta.zarr_format))
        return self.staged(_resized(meta, tuple(int(n) for n in new_shape), chunks))

    def staged(self, meta: ArrayMeta) -> Self:
        """A handle for ``meta``, a document not yet written (:meth:`write_staged`)."""
        return type(self)(
            self._store, self._path, meta, write_empty_chunks=self._write_empty_chunks, workers=self._workers
        )

    def write_staged(self, selection: Any, value: Any) -> None:
        """Write ``value`` at the basic ``selection`` of this handle's shape, which the stored document does
        not have yet (a dataset's append before its commit, under the documents' locks): no
        check against the stored document."""
        value = self._prepared(value)
        plan = self._planned(lambda: basic_plan(self._layout.dims, selection))
        rio.write(self._layout, plan, self._internal(plan, self._layout, value), None)


def resize_together(
    group: str,
    arrays: Mapping[str, Resizable],
    shapes: Mapping[str, Sequence[int]],
    chunks: Mapping[str, Any],
) -> None:
    """Resize the ``arrays`` (members of the group at ``group``) as :meth:`Array.resize` would, as one
    update (:meth:`rectizarr.nodes.DocFormat.publish_many`, where the arrays' format makes one on the
    store; else one after the other): a grow first clears what a shrink's clean-up left past the stored
    end, each shrink's clean-up follows the update."""
    if not arrays:
        return
    for a in arrays.values():
        a._check_writable()
    store = next(iter(arrays.values())).store
    formats = {nodes.format_of(a.metadata) for a in arrays.values()}
    fmt = formats.pop() if len(formats) == 1 else None  # (None: arrays of both formats)
    if fmt is None or not fmt.together(store):
        for name, a in arrays.items():
            a.resize(shapes[name], chunks=chunks.get(name))
        return
    by_path = {a.path: (name, a) for name, a in arrays.items()}
    before: dict[str, rio.Layout] = {}

    def change_of(path: str) -> Callable[[NodeMeta | None], NodeMeta]:
        name, a = by_path[path]

        def change(stored: NodeMeta | None) -> NodeMeta:
            if not isinstance(stored, ArrayMeta):
                raise NodeNotFoundError(f"no array at {path!r} in {store!r} any more")
            with a._lock:
                old = a._take_up(stored)
                before[path] = a._layout
            return a._resized(old, shapes[name], chunks.get(name))

        return change

    olds, news = fmt.publish_many(store, group, {path: change_of(path) for path in by_path})
    for path, (_, a) in by_path.items():
        old, new = olds[path], news[path]
        assert isinstance(old, ArrayMeta) and isinstance(new, ArrayMeta)
        with a._lock:
            a._adopt(new)
        a._clean_up_shrink(before[path], old, new)


def _resized(meta: ArrayMeta, new_shape: Shape, chunks: Any) -> ArrayMeta:
    """``meta`` with a new shape; rectilinear axes grown by ``chunks`` (see :meth:`Array.resize`)."""
    policy = _whole_inner_chunks(meta, new_shape) if chunks is None else chunks
    new_grid = meta.chunk_grid.resize(new_shape, policy)
    # checked: e.g. a new edge not divisible by the inner chunk
    build_pipeline(meta.codecs, meta.data_type.numpy, [d.unique_edges() for d in new_grid.dims], "$.codecs")
    return msgspec.structs.replace(meta, shape=new_shape, chunk_grid=new_grid)


def _whole_inner_chunks(meta: ArrayMeta, new_shape: Shape) -> Any:
    """The default growth policy: one new chunk per growing rectilinear axis, of the growth; for shards
    (sharding first in the chain), rounded up to whole inner chunks (the last shard then reaches past the
    extent, as a regular grid's last chunk does), since a shard's edge must divide into inner chunks."""
    first = meta.codecs[0] if meta.codecs else None
    if not isinstance(first, ShardingMeta):
        return "new_chunk"
    policy: list[Any] = []
    for d, n, inner in zip(meta.chunk_grid.dims, new_shape, first.chunk_shape, strict=True):
        grow = n - d.total if isinstance(d, VaryingDim) else 0
        policy.append([-(-grow // inner) * inner] if grow > 0 else None)
    return policy
