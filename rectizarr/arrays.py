"""The user-facing :class:`Array`: open/create, NumPy-exact reads and writes, resize/append, info.

This module is the API surface only: plans come from :mod:`rectizarr.indexing`, I/O and codecs run in
:mod:`rectizarr.io.engine`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

import rectizarr.io as rio
from rectizarr import commit, nodes, tuning
from rectizarr._util import Shape, empty, prod, relocked_in_child
from rectizarr.codecs.build import build_pipeline
from rectizarr.codecs.pipeline import CodecPipeline, ShardingCodec
from rectizarr.core import dtype_optional
from rectizarr.core.codec_meta import ShardingMeta
from rectizarr.core.dims import VaryingDim
from rectizarr.core.dtype import as_strings, check_unit_cast
from rectizarr.core.grid import ChunkGrid, Runs, all_data_lens
from rectizarr.core.metadata import ArrayMeta, NodeMeta
from rectizarr.errors import (
    CastError,
    CodecError,
    ConflictError,
    IrregularChunksError,
    MetadataError,
    NodeNotFoundError,
    NodeTypeError,
    ReadOnlyError,
    SelectionError,
    SelectionValueError,
    UnsupportedError,
)
from rectizarr.indexing import Plan, basic_plan, block_plan, block_region, coordinate_plan, orthogonal_plan
from rectizarr.io import clear_appended as clear_appended_swapped
from rectizarr.io import clear_past_end as clear_past_end_swapped
from rectizarr.stores import Store
from rectizarr.summary import CodecSpec, StoredBytes, codec_roles, info_text, inner_counts

__all__ = ["Array"]


class _Indexer:
    def __init__(self, array: Array, kind: str) -> None:
        self._array = array
        self._kind = kind

    def __getitem__(self, selection: Any) -> Any:
        return self._array._read(lambda: self._array._plan(self._kind, selection), selection)

    def __setitem__(self, selection: Any, value: Any) -> None:
        self._array._write(lambda: self._array._plan(self._kind, selection), value)


class Array(nodes.Node):
    """A Zarr v3 (or v2) array in a store. Create with :func:`rectizarr.create_array`, open with
    :func:`rectizarr.open_array`."""

    kind = "array"

    def __init__(
        self,
        store: Store,
        path: str,
        meta: ArrayMeta,
        *,
        read_only: bool = False,
        write_empty_chunks: bool = False,
        workers: int | None = None,
        pipeline: CodecPipeline | None = None,
    ) -> None:
        self._store = store
        self._path = path
        self._read_only = read_only or store.read_only
        self._write_empty_chunks = write_empty_chunks
        self._workers = workers
        self._lock = threading.RLock()
        relocked_in_child(self)
        self._set_meta(meta, pipeline)
        # The version of the document taken before ``meta`` was read (nodes.version_before_read): one taken
        # now may be of a newer document (written since), and would let a write planned with ``meta`` pass
        # the check (an append's elements past its end were cleared: 0.5-2 % of them, with a writer of the
        # edge chunk beside an appender)
        before = nodes.version_before_read(store, nodes.doc_key(path, meta), meta)
        self._meta_version = self._stored_version() if before is None else before
        self._unchecked = False  # the metadata came from a consolidated entry: read zarr.json before a write

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as store + path + options; the lock and caches are rebuilt where it is unpickled
        (dask.distributed ships arrays to worker processes this way)."""
        return (_reopen, (self._store, self._path, self._read_only, self._write_empty_chunks, self._workers))

    # ------------------------------------------------------------------------------------ metadata
    def _set_meta(self, meta: ArrayMeta, pipeline: CodecPipeline | None = None) -> None:
        if pipeline is None:
            try:
                pipeline = build_pipeline(
                    meta.codecs,
                    meta.data_type.numpy,
                    [d.unique_edges() for d in meta.chunk_grid.dims],
                    "$.codecs",
                )
            except MetadataError as exc:  # name the document, like every other metadata error
                if exc.key is not None:
                    raise
                raise exc.with_key(nodes.doc_key(self._path, meta)) from exc
        if pipeline.metas != meta.codecs:  # defaults filled in at open (e.g. blosc typesize) are written back
            import msgspec

            meta = msgspec.structs.replace(meta, codecs=pipeline.metas)
        self._meta = meta
        self._track(meta)
        self._layout = rio.build_layout(
            self._store,
            nodes.prefix_of(self._path),
            meta.chunk_grid,
            meta.chunk_key_encoding,
            pipeline,
            meta.data_type.numpy,
            meta.fill_value,
            write_empty_chunks=self._write_empty_chunks,
            workers=self._workers,
        )

    def _check_before_writing(self) -> None:
        """The metadata came from a group's consolidated metadata, which may be older than the array's own
        document (a writer that did not consolidate again, a change that failed half-way): read that
        document before the first write (a stale shape would clip the write), and on stores where
        versions are cheap before the first use."""
        self._unchecked = True
        if self._store.capabilities.cheap_versions:
            self._meta_version = None

    def _still_at(self, version: Any, planned: ArrayMeta) -> bool:
        """Whether a write planned with ``planned`` (at ``version``) still fits the stored document: the same
        version, or another whose only changes leave the chunks as they were (attributes, set by another
        handle meanwhile: many of them made every write plan again until it gave up)."""
        if self._stored_version() == version:
            return True
        stored = nodes.try_read_meta(self._store, self._path, self._meta.zarr_format)
        return isinstance(stored, ArrayMeta) and _same_chunks(stored, planned)

    def _revalidated(self) -> Array:
        self._revalidate()
        return self

    def _revalidate(self) -> None:
        """Before each read or write: take up a ``zarr.json`` changed by another handle, thread or process
        (one version check, where versions are cheap: local files, memory)."""
        version = self._stored_version()
        if version != self._meta_version:
            with self._lock:
                self._take_up(nodes.read_meta(self._store, self._path))
                self._meta_version = version

    def _take_up(self, stored: Any) -> ArrayMeta:
        """Make ``stored`` (a document just read) the handle's metadata, if it changed."""
        if stored is None:
            raise NodeNotFoundError(f"no array at {self._path or '/'!r} in {self._store!r} any more")
        if not isinstance(stored, ArrayMeta):
            raise NodeTypeError(f"the node at {self._path or '/'!r} in {self._store!r} is now a group")
        if stored != self._meta:
            self._set_meta(stored)
        return self._meta

    def _change_meta(
        self,
        change: Callable[[ArrayMeta], ArrayMeta],
        then: Callable[[rio.Layout, ArrayMeta, ArrayMeta], None] | None = None,
        stage: Callable[[ArrayMeta, ArrayMeta], contextlib.AbstractContextManager[None]] | None = None,
    ) -> None:
        """A read-modify-write of ``zarr.json`` (:func:`nodes.update_meta`): ``change`` maps the document
            as stored now to the new one; ``then(old layout, old document, new document)`` does the chunk work
            after it is written (a shrink's clean-up, an append's data); ``stage(old document, new document)``,
        where writers hold the document's lock (no conditional writes), the chunk work before it is written
        (an append's data, invisible until then)."""
        self._check_writable()
        before: list[rio.Layout] = []

        def apply(stored: Any) -> Any:
            meta = self._take_up(stored)
            before[:] = [self._layout]
            return change(meta)

        def after(old: Any, new: Any) -> None:
            self._set_meta(
                new,
                self._layout.pipeline
                if new.codecs == self._meta.codecs and new.chunk_grid == self._meta.chunk_grid
                else None,
            )
            self._meta_version = self._stored_version()
            if then is not None:
                then(before[0], old, new)

        with self._lock:
            nodes.update_meta(
                self._store,
                self._path,
                apply,
                after,
                zarr_format=self._meta.zarr_format,
                stage=None if stage is None else lambda old, new: stage(old, new),  # type: ignore[arg-type]
            )

    def _update_attributes(self, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        import msgspec

        self._change_meta(lambda m: msgspec.structs.replace(m, attributes=change(dict(m.attributes))))

    # -------------------------------------------------------------------------------- properties
    @property
    def metadata(self) -> ArrayMeta:
        """The array's validated ``zarr.json`` (an :class:`~rectizarr.core.metadata.ArrayMeta`)."""
        return self._meta

    @property
    def shape(self) -> Shape:
        """The array's shape: one extent per axis."""
        return self._meta.shape

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of the elements."""
        return self._meta.data_type.numpy

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        """The size in bytes of the whole array once decoded (not what is stored)."""
        return self.size * self.dtype.itemsize

    @property
    def fill_value(self) -> Any:
        """The fill value (what never-written elements read as), as a NumPy scalar (``numpy.ma.masked`` for a
        missing value of the optional data type)."""
        if self._meta.data_type.name == "optional":
            return dtype_optional.to_masked(self._meta.fill_value, True)
        return self._meta.fill_value[()]

    @property
    def dimension_names(self) -> tuple[str | None, ...] | None:
        """The ``dimension_names`` of ``zarr.json`` (``None`` when absent)."""
        return self._meta.dimension_names

    @property
    def grid(self) -> ChunkGrid:
        """The chunk grid (:class:`~rectizarr.core.grid.ChunkGrid`) of the storage chunks, regular or rectilinear."""
        return self._meta.chunk_grid

    @property
    def chunks(self) -> Shape:
        """The read chunk shape (inner chunks when sharded) of a regular grid. A rectilinear grid has no
        single chunk shape: :class:`~rectizarr.IrregularChunksError` (also an ``AttributeError``, so
        ``getattr(a, "chunks", None)`` is None) points to :attr:`write_chunk_sizes` / :attr:`read_chunk_sizes`."""
        if self.inner_chunk_shape is not None:
            return self.inner_chunk_shape
        regular = self.grid.regular_chunk_shape
        if regular is None:
            raise IrregularChunksError(
                f"array {self.name!r} has a rectilinear chunk grid, so no single chunk shape: use "
                "write_chunk_sizes / read_chunk_sizes (per axis, the size of every chunk)"
            )
        return regular

    @property
    def inner_chunk_shape(self) -> Shape | None:
        """The inner chunk shape when inner chunks of shards are read and written one by one (the units
        of :attr:`chunks`); None for unsharded arrays, and for shards that are only read whole."""
        return self._layout.inner_shape if isinstance(self._layout, rio.ShardedLayout) else None

    @property
    def pipeline(self) -> CodecPipeline:
        """The array's codec chain, as built from its metadata."""
        return self._layout.pipeline

    @property
    def is_sharded(self) -> bool:
        """True when the storage chunks are shards (``sharding_indexed`` is the array -> bytes codec)."""
        return isinstance(self._layout.pipeline.array_bytes, ShardingCodec)

    @property
    def shards(self) -> Shape | None:
        """The shard shape of a regular sharded array (``None`` when not sharded)."""
        if not self.is_sharded:
            return None
        regular = self.grid.regular_chunk_shape
        if regular is None:
            raise IrregularChunksError(
                f"array {self.name!r} has rectilinear shards, so no single shard shape: use write_chunk_sizes"
            )
        return regular

    @property
    def write_chunk_sizes(self) -> tuple[tuple[int, ...], ...]:
        """Per axis, the sizes of the storage chunks (shards) covering the array (dask convention)."""
        return all_data_lens(self.grid.dims)

    @property
    def read_chunk_sizes(self) -> tuple[tuple[int, ...], ...]:
        """Per axis, the sizes of the smallest readable units: inner chunks when sharded."""
        if self.inner_chunk_shape is None:
            return self.write_chunk_sizes
        return all_data_lens(self._layout.dims)

    @property
    def write_chunk_runs(self) -> tuple[Runs, ...]:
        """:attr:`write_chunk_sizes` as ``(size, count)`` runs per axis, without listing every chunk."""
        return tuple(d.data_len_runs() for d in self.grid.dims)

    @property
    def read_chunk_runs(self) -> tuple[Runs, ...]:
        """:attr:`read_chunk_sizes` as ``(size, count)`` runs per axis, without listing every chunk."""
        return tuple(d.data_len_runs() for d in self._layout.dims)

    @property
    def nchunks(self) -> int:
        """The number of chunks in the grid: inner chunks when sharded, as in zarr-python (the shards
        are :attr:`nshards`)."""
        inner = self._inner_shape()
        return self.grid.nchunks if inner is None else inner_counts(self.shape, inner)

    @property
    def nshards(self) -> int:
        """The number of storage units (shards when sharded, else chunks) in the grid."""
        return self.grid.nchunks

    @property
    def cdata_shape(self) -> Shape:
        """The number of storage units (shards when sharded, else chunks) along each axis (zarr-python's
        name)."""
        return self.grid.grid_shape

    @property
    def nchunks_initialized(self) -> int:
        """The number of chunks stored (lists the store). When sharded, each stored shard counts its
        inner chunks at its full declared size, as zarr-python counts them."""
        inner = self._inner_shape()
        if inner is None:
            return self.nshards_initialized
        dims = self.grid.dims
        return sum(
            prod(tuple(-(-d.edge(c) // n) for d, c, n in zip(dims, coords, inner, strict=True)))
            for _, coords in rio.stored_chunk_keys(self._layout)
        )

    def stored_regions(self) -> Iterator[tuple[slice, ...]]:
        """The region of each storage unit (shard when sharded) that holds a stored value, in no particular
        order (lists the store): what a copy of sparse data has to visit."""
        dims = self.grid.dims
        for _, coords in rio.stored_chunk_keys(self._layout):
            yield tuple(
                slice(d.offset(c), d.offset(c) + d.data_len(c)) for d, c in zip(dims, coords, strict=True)
            )

    @property
    def nshards_initialized(self) -> int:
        """The number of storage units (shards when sharded) stored (lists the store)."""
        return sum(1 for _ in rio.stored_chunk_keys(self._layout))

    def _inner_shape(self) -> Shape | None:
        codec = self._layout.pipeline.array_bytes
        if not isinstance(codec, ShardingCodec) or len(codec.chunk_shape) != self.ndim:
            return None
        return self.inner_chunk_shape or codec.chunk_shape

    @property
    def nbytes_stored(self) -> StoredBytes:
        """The total size in bytes of the stored chunks (lists the store); an ``int`` that may also be
        called, as zarr-python's ``a.nbytes_stored()``."""
        return StoredBytes(rio.nbytes_stored(self._layout)[1])

    @property
    def filters(self) -> tuple[CodecSpec, ...]:
        """The array -> array codecs (of the inner chunks when sharded), as zarr-python reports them."""
        return codec_roles(self._meta.codecs, len(self.pipeline.array_array))[0]

    @property
    def serializer(self) -> CodecSpec:
        """The array -> bytes codec (of the inner chunks when sharded)."""
        return codec_roles(self._meta.codecs, len(self.pipeline.array_array))[1]

    @property
    def compressors(self) -> tuple[CodecSpec, ...]:
        """The bytes -> bytes codecs (of the inner chunks when sharded)."""
        return codec_roles(self._meta.codecs, len(self.pipeline.array_array))[2]

    @property
    def info(self) -> str:
        """A summary: name, shape, chunking, data type, fill value and codecs (reads no chunk)."""
        return info_text(self)

    def info_complete(self) -> str:
        """:attr:`info` plus what is stored: bytes, storage ratio and initialised chunks (lists the store)."""
        return info_text(self, complete=True)

    def __repr__(self) -> str:
        return f"<rectizarr.Array {self.name!r} shape={self.shape} dtype={self.dtype}>"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.asarray(self[...])
        return out if dtype is None else out.astype(dtype)

    # ------------------------------------------------------------------------------- selections
    def _plan(self, kind: str, selection: Any) -> Plan:
        self._revalidate()
        dims = self._layout.dims
        if kind == "basic":
            sel = selection if isinstance(selection, tuple) else (selection,)
            arrays = [s for s in sel if isinstance(s, np.ndarray | list)]
            if arrays and _pointwise(sel, self.ndim):
                return coordinate_plan(dims, selection)
            return basic_plan(dims, selection)
        if kind == "orthogonal":
            return orthogonal_plan(dims, selection)
        if kind == "coordinate":
            return coordinate_plan(dims, selection)
        if kind == "block":
            return (
                block_plan(self.grid.dims, selection)
                if self.inner_chunk_shape is None
                else _block_plan_sharded(self, selection)
            )
        raise SelectionError(f"unknown selection kind {kind!r}")

    def _planned(self, make_plan: Callable[[], Plan]) -> Plan:
        """``make_plan()``; a selection over more chunks than memory can list (2**40 per axis: numpy's
        MemoryError while planning) is a SelectionError."""
        try:
            return make_plan()
        except MemoryError as exc:
            raise SelectionError(
                f"the selection of the array {self._path or '/'!r} touches more chunks than "
                f"can be planned in memory ({exc}); select less"
            ) from exc

    def _read(self, make_plan: Callable[[], Plan], selection: Any, out: np.ndarray | None = None) -> Any:
        with self._lock:  # the plan with the layout it was made for (other threads revalidate)
            plan = self._planned(make_plan)
            layout = self._layout
        optional = self._meta.data_type.name == "optional"  # read as a numpy.ma.MaskedArray
        if out is not None:
            if optional:
                raise SelectionError("out= cannot take the masked values of an optional data type")
            if out.shape != plan.final_shape or out.dtype != self.dtype:
                raise SelectionError(
                    f"out has shape {out.shape} and dtype {out.dtype}; "
                    f"expected {plan.final_shape} and {self.dtype}"
                )
            internal = out.reshape(plan.shape)
            if not np.shares_memory(internal, out) and out.size:
                raise SelectionError("out must be C-contiguous")
            rio.read(layout, plan, internal)
            self._check_code_points(internal)
            return out
        nbytes = prod(plan.shape) * self.dtype.itemsize
        if nbytes > sys.maxsize:
            raise SelectionError(
                f"the selection has shape {plan.final_shape}: {nbytes} bytes, more than one "
                "numpy array can hold; select less"
            )
        result = empty(plan.shape, self.dtype)
        rio.read(layout, plan, result)
        self._check_code_points(result)
        result = result.reshape(plan.final_shape)
        if optional:
            return dtype_optional.to_masked(result, result.shape == () and not _has_ellipsis(selection))
        if result.shape == () and not _has_ellipsis(selection):
            return result[()]
        return result

    def _cast_error(self, exc: OverflowError) -> CastError:
        return CastError(
            f"a value written to the array {self._path or '/'!r} in {self._store!r} does not fit its "
            f"data type {self.dtype}: {exc}; nothing was written"
        )

    def _check_code_points(self, values: np.ndarray) -> None:
        """Fixed-length UTF-32 (NumPy ``U``) values read must be Unicode code points: a corrupt chunk's
        larger numbers make NumPy fail later, on any use, with ``SystemError``."""
        if self.dtype.kind == "U" and values.size:
            units = (
                np.ascontiguousarray(values)
                .reshape(-1)
                .view(np.dtype("u4").newbyteorder(values.dtype.byteorder))
            )
            if (units > 0x10FFFF).any():
                raise CodecError(
                    f"the array {self._path or '/'!r} in {self._store!r} holds a value that is not a "
                    "Unicode code point (corrupt data)"
                )

    def _write(self, make_plan: Callable[[], Plan], value: Any) -> None:
        """Plan (against the stored shape: ``make_plan`` revalidates) and write. Where versions are cheap,
        the write checks, once it holds its chunks' locks, that ``zarr.json`` is still the one it planned
        with; if another handle shrank or grew the array meanwhile, it plans again (a write never puts data
        past a shrink's new end, nor clears what an append just put past the old one)."""
        self._check_writable()
        if self._unchecked:
            with self._lock:
                if self._unchecked:
                    version = self._stored_version()
                    self._take_up(nodes.read_meta(self._store, self._path))
                    self._meta_version, self._unchecked = version, False
        # (a NumPy scalar stays one: numpy's rules for scalars apply, NaN into int raises)
        if hasattr(value, "__array__") and not isinstance(value, np.ndarray | np.generic):
            value = np.asarray(value)  # once (a dask array computed once), however often it is planned
        if self._meta.data_type.name == "optional":  # masked values (and plain ones, all present)
            try:
                value = dtype_optional.from_user(value, self._meta.data_type.numpy)
            except OverflowError as exc:
                raise self._cast_error(exc) from exc
        if (
            isinstance(value, np.ndarray)
            and value.dtype.kind in "Mm"
            and self._meta.data_type.name == "string"
        ):
            value = value.astype(
                np.dtypes.StringDType()
            )  # dates as numpy writes them into strings ('NaT', '1')
        for _ in range(tuning.current().conflict_retries):
            with self._lock:  # the plan, its layout and their version together (other threads revalidate)
                plan = self._planned(make_plan)
                layout, planned, meta = self._layout, self._meta_version, self._meta
            try:
                check_unit_cast(value, layout.dtype)
                internal = plan.value_to_internal(value, layout.dtype)
            except OverflowError as exc:  # (dates out of range of the unit, Python ints past the type)
                raise self._cast_error(exc) from exc
            if self._meta.data_type.name == "string":
                internal = as_strings(internal, one=plan.final_shape == ())
            guard = None if planned is None else functools.partial(self._still_at, planned, meta)
            try:
                rio.write(layout, plan, internal, guard)
                return
            except rio.LayoutChanged:
                continue
            except MemoryError as exc:  # a chunk (or a shard's index) the metadata makes too large to hold
                raise UnsupportedError(
                    f"writing to the array {self._path or '/'!r} in {self._store!r} needs a whole chunk (or a "
                    f"shard's index) in memory, more than this machine gives: storage chunks "
                    f"{self.grid.regular_chunk_shape or 'of varying shapes'}, inner chunks "
                    f"{self.inner_chunk_shape}, {self.dtype} ({exc})"
                ) from exc
        raise ConflictError(
            f"the array {self._path or '/'!r} in {self._store!r} was resized during each of "
            f"{tuning.current().conflict_retries} attempts to write to it; try again"
        )

    def __getitem__(self, selection: Any) -> Any:
        return self._read(lambda: self._plan("basic", selection), selection)

    def __setitem__(self, selection: Any, value: Any) -> None:
        self._write(lambda: self._plan("basic", selection), value)

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
        return self._read(lambda: self._plan("coordinate", _mask(mask, self._revalidated().shape)), mask, out)

    def set_mask_selection(self, mask: Any, value: Any) -> None:
        """Write ``value`` where a boolean mask of the array's shape is true."""
        self._write(lambda: self._plan("coordinate", _mask(mask, self._revalidated().shape)), value)

    def get_block_selection(self, selection: Any, *, out: np.ndarray | None = None) -> Any:
        """Read whole storage chunks by chunk index (what ``a.blocks[...]`` does)."""
        return self._read(lambda: self._plan("block", selection), selection, out)

    def set_block_selection(self, selection: Any, value: Any) -> None:
        """Write whole storage chunks by chunk index."""
        self._write(lambda: self._plan("block", selection), value)

    # ------------------------------------------------------------------------------ resize/append
    def resize(self, new_shape: Sequence[int] | int, *, chunks: Any = None) -> None:
        """Change the shape. Rectilinear axes grow by one new chunk covering the growth (default; a new
        shard is rounded up to whole inner chunks, reaching past the extent),
        ``chunks="repeat"`` (repeat the last edge), or explicit new edges per axis (``chunks=[None, [31, 30]]``).

        Shrinking deletes chunks wholly outside the new shape and resets the out-of-bounds part of the
        straddling chunks to the fill value, so a later grow shows the fill value, not stale data.
        """
        self._check_writable()
        new_shape = (int(new_shape),) if isinstance(new_shape, int) else tuple(int(s) for s in new_shape)
        if len(new_shape) != self.ndim or any(s < 0 for s in new_shape):
            raise MetadataError(f"new shape {new_shape} does not fit an array of {self.ndim} dimensions")

        def change(m: ArrayMeta) -> ArrayMeta:
            new = _resized(m, new_shape, chunks)
            if any(n > o for n, o in zip(new.shape, m.shape, strict=True)):
                self._clear_past_end(m, new)
            return new

        self._change_meta(change, self._clean_up_shrink)

    def _clean_up_shrink(self, old_layout: rio.Layout, old: ArrayMeta, new: ArrayMeta) -> None:
        """After a shrink: chunks outside the new grid deleted, boundary chunks cleared past the extent (on
        stores with conditional writes, past the extent as stored when each is rewritten)."""
        if not any(n < o for n, o in zip(new.shape, old.shape, strict=True)):
            return
        if not self._store.capabilities.conditional_writes:
            rio.delete_outside(old_layout, new.chunk_grid)
            return

        clear_past_end_swapped(old_layout, new.chunk_grid, self._grid_now)

    def _clear_past_end(self, old: ArrayMeta, new: ArrayMeta) -> None:
        """Before a grow from ``old`` to ``new``: what a shrink's clean-up left past the stored end (a
        killed writer; on stores with conditional writes, another client that grew first) cleared before
        the grow shows it (a corrupt chunk stays as it is; the others are cleared)."""
        with contextlib.suppress(CodecError):
            clear_past_end_swapped(
                dataclasses.replace(self._layout, grid=new.chunk_grid), old.chunk_grid, self._grid_now
            )

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
        axis_chunks = None
        if chunks is not None:
            axis_chunks = [None] * self.ndim
            axis_chunks[axis] = chunks

        def grow(m: ArrayMeta) -> ArrayMeta:  # from the end as stored now
            if data.ndim != len(m.shape) or any(
                d != s for i, (d, s) in enumerate(zip(data.shape, m.shape, strict=True)) if i != axis
            ):
                raise SelectionValueError(
                    f"cannot append data of shape {data.shape} to an array of shape "
                    f"{m.shape} along axis {axis}"
                )  # (a ValueError, as in zarr-python)
            new = _resized(
                m, tuple(s + data.shape[axis] if i == axis else s for i, s in enumerate(m.shape)), axis_chunks
            )
            if self._store.capabilities.conditional_writes:  # what a shrink's clean-up left where the rows go
                with contextlib.suppress(
                    CodecError
                ):  # (a corrupt chunk stays as it is: the data overwrites it)
                    clear_appended_swapped(
                        dataclasses.replace(self._layout, grid=new.chunk_grid),
                        m.chunk_grid,
                        axis,
                        self._grid_now,
                    )
            return new

        def region(old: ArrayMeta, new: ArrayMeta) -> tuple[slice, ...]:
            return tuple(
                slice(old.shape[axis], new.shape[axis]) if i == axis else slice(None)
                for i in range(self.ndim)
            )

        def write(
            _: rio.Layout, old: ArrayMeta, new: ArrayMeta
        ) -> None:  # the region reserved for this append
            self[region(old, new)] = data

        @contextlib.contextmanager
        def stage(old: ArrayMeta, new: ArrayMeta) -> Iterator[None]:  # seen once zarr.json is written
            # the chunks reaching past the stored end stay locked until then: a write planned with the
            # stored shape would clear what this put past it
            with self._store.lock(_edge_keys(self._layout)):
                self.staged(new).write_staged(region(old, new), data)
                yield

        if self._store.capabilities.conditional_writes:  # (no lock: the document reserves the region first)
            self._change_meta(grow, write)
        else:  # the data first: a writer killed before the document leaves the array as it was
            self._change_meta(grow, stage=stage)
        return self.shape

    def staged_resize(self, new_shape: Sequence[int], *, chunks: Any = None) -> Array:
        """A handle of this array resized as :meth:`resize` would (from the document as stored now), whose
        document is not written: its data goes in with :meth:`write_staged`, and is seen once the document
        is (:meth:`rectizarr.nodes.DocFormat.publish_many`; under the document's lock)."""
        self._check_writable()
        meta = self._take_up(nodes.read_for_write(self._store, self._path, self._meta.zarr_format))
        return self.staged(_resized(meta, tuple(int(n) for n in new_shape), chunks))

    def staged(self, meta: ArrayMeta) -> Array:
        """A handle for ``meta``, a document not yet written (:meth:`write_staged`)."""
        return Array(
            self._store, self._path, meta, write_empty_chunks=self._write_empty_chunks, workers=self._workers
        )

    def write_staged(self, selection: Any, value: Any) -> None:
        """Write ``value`` at the basic ``selection`` of this handle's shape, which the stored document does
        not have yet (an append or a dataset's update before its commit, under the document's lock): no
        check against the stored document."""
        if hasattr(value, "__array__") and not isinstance(value, np.ndarray | np.generic):
            value = np.asarray(value)
        plan = self._planned(lambda: basic_plan(self._layout.dims, selection))
        try:
            if self._meta.data_type.name == "optional":
                value = dtype_optional.from_user(value, self._meta.data_type.numpy)
            check_unit_cast(value, self._layout.dtype)
            internal = plan.value_to_internal(value, self._layout.dtype)
        except OverflowError as exc:
            raise self._cast_error(exc) from exc
        if self._meta.data_type.name == "string":
            internal = as_strings(internal, one=plan.final_shape == ())
        rio.write(self._layout, plan, internal, None)


def resize_together(
    group: str, arrays: Mapping[str, Array], shapes: Mapping[str, Sequence[int]], chunks: Mapping[str, Any]
) -> None:
    """Resize the ``arrays`` (members of the group at ``group``) as :meth:`Array.resize` would, as one
    update where writers lock (local directories, memory; Zarr v3): every new document published at once
    (:meth:`rectizarr.nodes.DocFormat.publish_many`), then each shrink's clean-up; elsewhere one after the other."""
    handles = list(arrays.items())
    if not handles:
        return
    store = handles[0][1].store
    formats = {nodes.format_of(a.metadata) for _, a in handles}
    fmt = formats.pop() if len(formats) == 1 else None  # (None: arrays of both formats)
    if store.capabilities.conditional_writes and fmt is not None and fmt.records:
        _resize_swapped(group, handles, shapes, chunks)
        return
    if store.capabilities.conditional_writes or fmt is None:
        for name, a in handles:
            a.resize(shapes[name], chunks=chunks.get(name))
        return
    paths = {group, *nodes.parent_paths(group), *(a.path for _, a in handles)}
    with store.lock([nodes.meta_key(p) for p in sorted(paths)]):
        steps = []
        for name, a in handles:
            a._check_writable()
            with a._lock:
                old = a._take_up(nodes.read_for_write(store, a.path, fmt.zarr_format))
                new = _resized(old, tuple(int(n) for n in shapes[name]), chunks.get(name))
                if any(n > o for n, o in zip(new.shape, old.shape, strict=True)):
                    a._clear_past_end(old, new)
                steps.append((a, a._layout, old, new))
        fmt.publish_many(store, group, {a.path: (old, new) for a, _, old, new in steps})
        for a, layout, old, new in steps:
            with a._lock:
                a._set_meta(new)
                a._meta_version = a._stored_version()
            a._clean_up_shrink(layout, old, new)


def _resize_swapped(
    group: str,
    handles: list[tuple[str, Array]],
    shapes: Mapping[str, Sequence[int]],
    chunks: Mapping[str, Any],
) -> None:
    """:func:`resize_together` on a store with conditional writes: one update
    (:func:`rectizarr.nodes.publish_swapped`) whose primary is the topmost consolidating ancestor, else the
    group; a grow first clears what a shrink's clean-up left past the stored end (as :meth:`Array.resize`
    does), each shrink's clean-up follows the commit."""
    store = handles[0][1].store
    by_path = {a.path: (name, a) for name, a in handles}
    before: dict[str, rio.Layout] = {}

    def change_of(path: str) -> Callable[[NodeMeta | None], NodeMeta | None]:
        name, a = by_path[path]

        def change(stored: NodeMeta | None) -> NodeMeta:
            if not isinstance(stored, ArrayMeta):
                raise NodeNotFoundError(f"no array at {path!r} in {store!r} any more")
            with a._lock:
                old = a._take_up(stored)
                before[path] = a._layout
            new = _resized(old, tuple(int(n) for n in shapes[name]), chunks.get(name))
            if any(n > o for n, o in zip(new.shape, old.shape, strict=True)):
                a._clear_past_end(old, new)
            return new

        return change

    primary = commit.primary_of(store, handles[0][1].path, nodes.AncestorDocs(store).get)
    olds, news = nodes.publish_swapped(
        store, group if primary is None else primary, {path: change_of(path) for path in by_path}
    )
    for path, (_, a) in by_path.items():
        old, new = olds[path], news[path]
        assert isinstance(old, ArrayMeta) and isinstance(new, ArrayMeta)
        with a._lock:
            a._set_meta(new)
            a._meta_version = a._stored_version()
        a._clean_up_shrink(before[path], old, new)


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
        return (
            _staged_target,
            (a.store, a.path, nodes.node_doc(a.metadata), a._write_empty_chunks, a._workers),
        )


def _staged_target(
    store: Store, path: str, doc: dict[str, Any], write_empty_chunks: bool, workers: int | None
) -> StagedTarget:
    meta = nodes.node_from_json(doc)
    assert isinstance(meta, ArrayMeta)
    return StagedTarget(Array(store, path, meta, write_empty_chunks=write_empty_chunks, workers=workers))


def _edge_keys(layout: rio.Layout) -> list[str]:
    """The keys of the chunks (shards) that reach past the array's extent (at most 65536 of them)."""
    grid = layout.grid
    counts = grid.grid_shape
    if not all(counts):
        return []
    # per axis, the chunk holding the last element (a rectilinear axis may have chunks past it)
    last = [d.chunk_of(n - 1) if n else 0 for d, n in zip(grid.dims, grid.shape, strict=True)]
    edge_axes = [a for a, (d, c) in enumerate(zip(grid.dims, last, strict=True)) if d.data_len(c) < d.edge(c)]
    keys: set[str] = set()
    for a in edge_axes:
        ranges = [range(n) if i != a else range(last[a], last[a] + 1) for i, n in enumerate(counts)]
        if prod(tuple(len(r) for r in ranges)) + len(keys) > 65536:
            break
        keys.update(layout.key(c) for c in itertools.product(*ranges))
    return sorted(keys)


def _resized(meta: ArrayMeta, new_shape: Shape, chunks: Any) -> ArrayMeta:
    """``meta`` with a new shape; rectilinear axes grown by ``chunks`` (see :meth:`Array.resize`)."""
    import msgspec

    new_grid = meta.chunk_grid.resize(
        new_shape, _whole_inner_chunks(meta, new_shape) if chunks is None else chunks
    )
    build_pipeline(
        meta.codecs, meta.data_type.numpy, [d.unique_edges() for d in new_grid.dims], "$.codecs"
    )  # e.g. a new edge not divisible by the inner chunk
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


def _same_chunks(a: ArrayMeta, b: ArrayMeta) -> bool:
    """Whether two documents of an array lay out and code its chunks alike (what a planned write relies on)."""
    return (a.shape, a.data_type, a.chunk_grid, a.chunk_key_encoding, a.codecs, a.storage_transformers) == (
        b.shape,
        b.data_type,
        b.chunk_grid,
        b.chunk_key_encoding,
        b.codecs,
        b.storage_transformers,
    ) and a.fill_value.tobytes() == b.fill_value.tobytes()


def _has_ellipsis(selection: Any) -> bool:
    items = selection if isinstance(selection, tuple) else (selection,)
    return any(s is Ellipsis for s in items)


def _pointwise(sel: tuple[Any, ...], ndim: int) -> bool:
    """NumPy's ``a[i, j]`` with several index arrays (or one full-shape mask) is pointwise."""
    arrays = [np.asarray(s) for s in sel if isinstance(s, np.ndarray | list)]
    if len(arrays) == 1 and arrays[0].dtype == bool and arrays[0].ndim == ndim and ndim > 1 and len(sel) == 1:
        return True
    return len(arrays) >= 2 and len(sel) == ndim and len(arrays) == ndim


def _mask(mask: Any, shape: Shape) -> Any:
    m = np.asarray(mask)
    if m.dtype != bool or m.shape != shape:
        raise SelectionError(f"mask must be a bool array of shape {shape}, got {m.dtype} {m.shape}")
    return m


def _block_plan_sharded(array: Array, selection: Any) -> Plan:
    """Blocks are storage chunks (shards): turn the block selection into an element selection (of a 0-d
    array, its one block: ``...``, as an unsharded array's block plan)."""
    region = block_region(array.grid.dims, selection)
    return basic_plan(array._layout.dims, region if region else Ellipsis)


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
