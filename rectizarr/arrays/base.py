"""The state of an array handle (:class:`~rectizarr.arrays.Array`): its document and the layout built from
it, how it takes up a document changed elsewhere, and what it tells about itself (shape, chunks, codecs,
info)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, Self

import msgspec
import numpy as np

import rectizarr.io as rio
from rectizarr import nodes
from rectizarr._util import Shape, prod, relocked_in_child
from rectizarr.codecs.build import build_pipeline
from rectizarr.codecs.pipeline import CodecPipeline, ShardingCodec
from rectizarr.core import dtype_optional
from rectizarr.core.grid import ChunkGrid, Runs, all_data_lens
from rectizarr.core.metadata import ArrayMeta
from rectizarr.errors import IrregularChunksError, MetadataError, NodeNotFoundError, NodeTypeError
from rectizarr.stores import Store
from rectizarr.summary import CodecSpec, StoredBytes, codec_roles, info_text, inner_counts


class ArrayBase(nodes.Node):
    """What an array handle holds and tells (see the module)."""

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

    def _set_meta(self, meta: ArrayMeta, pipeline: CodecPipeline | None = None) -> None:
        if pipeline is None:
            try:
                edges = [d.unique_edges() for d in meta.chunk_grid.dims]
                pipeline = build_pipeline(meta.codecs, meta.data_type.numpy, edges, "$.codecs")
            except MetadataError as exc:  # name the document, like every other metadata error
                if exc.key is not None:
                    raise
                raise exc.with_key(nodes.doc_key(self._path, meta)) from exc
        if pipeline.metas != meta.codecs:  # defaults filled in at open (e.g. blosc typesize) are written back
            meta = msgspec.structs.replace(meta, codecs=pipeline.metas)
        self._meta = meta
        self._track(meta)
        self._layout = rio.build_layout(
            self._store, nodes.prefix_of(self._path), meta, pipeline, self._write_empty_chunks, self._workers
        )

    def _adopt(self, meta: ArrayMeta, pipeline: CodecPipeline | None = None) -> None:
        """Make ``meta``, just written, the handle's document, at the version stored now."""
        self._set_meta(meta, pipeline)
        self._meta_version = self._stored_version()

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

    def _revalidate(self) -> Self:
        """Before each read or write: take up a ``zarr.json`` changed by another handle, thread or process
        (one version check, where versions are cheap: local files, memory); the handle."""
        version = self._stored_version()
        if version != self._meta_version:
            with self._lock:
                self._take_up(nodes.read_meta(self._store, self._path))
                self._meta_version = version
        return self

    def _take_up(self, stored: Any) -> ArrayMeta:
        """Make ``stored`` (a document just read) the handle's metadata, if it changed."""
        if stored is None:
            raise NodeNotFoundError(f"no array at {self._path or '/'!r} in {self._store!r} any more")
        if not isinstance(stored, ArrayMeta):
            raise NodeTypeError(f"the node at {self._path or '/'!r} in {self._store!r} is now a group")
        if stored != self._meta:
            self._set_meta(stored)
        return self._meta

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
        return self._regular(
            "a rectilinear chunk grid, so no single chunk shape: use write_chunk_sizes / read_chunk_sizes "
            "(per axis, the size of every chunk)"
        )

    def _regular(self, why: str) -> Shape:
        """The grid's one chunk shape; a rectilinear grid has none: IrregularChunksError saying ``why``."""
        regular = self.grid.regular_chunk_shape
        if regular is None:
            raise IrregularChunksError(f"array {self.name!r} has {why}")
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
        return self._regular("rectilinear shards, so no single shard shape: use write_chunk_sizes")

    @property
    def write_chunk_sizes(self) -> tuple[tuple[int, ...], ...]:
        """Per axis, the sizes of the storage chunks (shards) covering the array (dask convention)."""
        return all_data_lens(self.grid.dims)

    @property
    def read_chunk_sizes(self) -> tuple[tuple[int, ...], ...]:
        """Per axis, the sizes of the smallest readable units: inner chunks when sharded."""
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
        """The number of storage units (shards, or chunks) along each axis (zarr-python's name)."""
        return self.grid.grid_shape

    @property
    def nchunks_initialized(self) -> int:
        """The number of chunks stored (lists the store). When sharded, each stored shard counts its
        inner chunks at its full declared size, as zarr-python counts them."""
        inner = self._inner_shape()
        if inner is None:
            return self.nshards_initialized
        return sum(
            inner_counts(self.grid.chunk_shape(coords), inner)
            for _, coords in rio.stored_chunk_keys(self._layout)
        )

    def stored_regions(self) -> Iterator[tuple[slice, ...]]:
        """The region of each storage unit (shard when sharded) that holds a stored value, in no particular
        order (lists the store): what a copy of sparse data has to visit."""
        return (self.grid.chunk_region(coords) for _, coords in rio.stored_chunk_keys(self._layout))

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
        return StoredBytes(rio.nbytes_stored(self._layout))

    @property
    def filters(self) -> tuple[CodecSpec, ...]:
        """The array -> array codecs (of the inner chunks when sharded), as zarr-python reports them."""
        return codec_roles(self._meta.codecs, self.pipeline)[0]

    @property
    def serializer(self) -> CodecSpec:
        """The array -> bytes codec (of the inner chunks when sharded)."""
        return codec_roles(self._meta.codecs, self.pipeline)[1]

    @property
    def compressors(self) -> tuple[CodecSpec, ...]:
        """The bytes -> bytes codecs (of the inner chunks when sharded)."""
        return codec_roles(self._meta.codecs, self.pipeline)[2]

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


def _same_chunks(a: ArrayMeta, b: ArrayMeta) -> bool:
    """Whether two documents of an array lay out and code its chunks alike (what a planned write relies on)."""

    def layout(m: ArrayMeta) -> tuple[Any, ...]:
        return (m.shape, m.data_type, m.chunk_grid, m.chunk_key_encoding, m.codecs, m.storage_transformers)

    return layout(a) == layout(b) and a.fill_value.tobytes() == b.fill_value.tobytes()
