"""Where an array's chunks live and how they are coded: a :data:`Layout` is one of two shapes.

* :class:`ChunkedLayout` — one store value per chunk of the grid; selections are planned over the grid.
* :class:`ShardedLayout` — ``sharding_indexed`` whose inner chunks can be read and written in place:
  selections are planned over the *inner* chunk grid, which is always regular (every shard edge is a
  multiple of the inner chunk, validated at open, so inner chunk boundaries fall on multiples of the inner
  size along each axis whatever the outer grid). A ``transpose`` before the sharding codec is handled by
  permuting axes; any other array -> array codec before it, or a bytes -> bytes codec after it, makes the
  shards plain chunks (a :class:`ChunkedLayout` of whole shards)."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from functools import cached_property
from typing import TypeAlias

import numpy as np

from rectizarr._util import Coords, Shape, relocked_in_child
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.pipeline import CodecPipeline, ShardingCodec
from rectizarr.core.chunk_keys import ChunkKeyEncoding
from rectizarr.core.dims import Dim, FixedDim
from rectizarr.core.grid import ChunkGrid
from rectizarr.core.metadata import ArrayMeta
from rectizarr.stores import Store


class IndexBudget:
    """What one array handle may spend on reading shard indexes ahead (stores with round trips, where
    indexes are cached): the indexes a reader without a cache would have read by now (one per shard per
    read) less those this handle read. Reading ahead never makes more index requests than that."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        relocked_in_child(self)
        self._touched = 0
        self._read = 0
        self.maybe_uncached = True  # False once a look for uncached indexes found none (until the next miss)
        self._recent: deque[str] = deque(maxlen=8)  # the first shard of each of the last reads

    def spread(self, keys: list[str]) -> bool:
        """Note a read of the shards at ``keys``; whether reads lately went to more than one shard (a loop
        over one shard's elements never needs another shard's index: it reads none ahead)."""
        with self._lock:
            self._recent.append(keys[0])
            return len(keys) > 1 or len(set(self._recent)) > 1

    def spend(self, touched: int, read: int, most: int) -> int:
        """Count a read that touched ``touched`` shards and read ``read`` indexes; how many more indexes it
        may read ahead (at most ``most``), counted as read."""
        with self._lock:
            self._touched += touched
            self._read += read
            extra = max(0, min(most, self._touched - self._read))
            self._read += extra
            return extra

    def refund(self, n: int) -> None:
        """``n`` indexes granted by :meth:`spend` were not read after all."""
        with self._lock:
            self._read -= n


@dataclass(frozen=True)
class LayoutCommon:
    """What both layouts have: everything needed to move chunks between a store and numpy arrays."""

    store: Store
    prefix: str  # node path + "/" ("" for the root)
    grid: ChunkGrid
    key_encoding: ChunkKeyEncoding
    pipeline: CodecPipeline
    dtype: np.dtype
    fill_value: np.ndarray
    write_empty_chunks: bool = False
    workers: int | None = None

    def key(self, coords: Coords) -> str:
        """The store key of the chunk (shard) at ``coords`` of the outer grid."""
        return self.prefix + self.key_encoding.encode(coords)

    def keys(self, coords: np.ndarray) -> list[str]:
        """The store keys of the chunks at the rows of ``coords`` (one vectorised encoding)."""
        keys = self.key_encoding.encode_many(coords)
        return [self.prefix + k for k in keys] if self.prefix else keys

    def at_edge(self, coords: Coords) -> bool:
        """Whether the chunk (shard) at ``coords`` of the outer grid reaches past the array's extent."""
        return any(d.data_len(c) < d.edge(c) for d, c in zip(self.grid.dims, coords, strict=True))

    def spec(self, coords: Coords) -> ChunkSpec:
        """The spec of the chunk at ``coords`` of the outer grid, naming its key."""
        return ChunkSpec(self.grid.chunk_shape(coords), self.dtype, self.fill_value, self.key(coords))

    def specs(self, coords: np.ndarray) -> list[ChunkSpec]:
        """The spec of each chunk at the rows of ``coords``: one shared object per distinct shape and no
        key (a decode error is given the key by the caller)."""
        edges = [d.edges_of(coords[:, i]).tolist() for i, d in enumerate(self.grid.dims)]
        shapes = zip(*edges, strict=True) if edges else [()] * coords.shape[0]
        cache: dict[Shape, ChunkSpec] = {}
        return [
            cache.get(s) or cache.setdefault(s, ChunkSpec(s, self.dtype, self.fill_value)) for s in shapes
        ]


@dataclass(frozen=True)
class ChunkedLayout(LayoutCommon):
    """One store value per chunk of the grid."""

    @property
    def dims(self) -> tuple[Dim, ...]:
        """The grid selections are planned over: the chunk grid."""
        return self.grid.dims


@dataclass(frozen=True, kw_only=True)
class ShardedLayout(LayoutCommon):
    """Shards whose inner chunks are read and written in place (see the module docstring)."""

    sharding: ShardingCodec
    inner_shape: Shape  # inner chunk shape in ARRAY axis order
    perm: tuple[int, ...]  # transposed axis i = array axis perm[i]

    @cached_property
    def dims(self) -> tuple[Dim, ...]:
        """The grid selections are planned over: inner chunks."""
        return tuple(FixedDim(c, d.extent) for c, d in zip(self.inner_shape, self.grid.dims, strict=True))

    @cached_property
    def index_budget(self) -> IndexBudget:
        """This handle's budget for reading shard indexes ahead (``shards.fetch_indexes``)."""
        return IndexBudget()

    @cached_property
    def transposed(self) -> bool:
        """Whether inner chunks are coded in another axis order than the array's."""
        return list(self.perm) != list(range(len(self.perm)))

    def inner_spec(self, key: str | None) -> ChunkSpec:
        """The spec of an inner chunk (in the codec's axis order) of the shard at ``key``."""
        return ChunkSpec(self.sharding.chunk_shape, self.dtype, self.fill_value, key)

    def to_array_axes(self, chunk_t: np.ndarray) -> np.ndarray:
        """An inner chunk decoded in the codec's axis order, in the array's (a view)."""
        return chunk_t.transpose(np.argsort(self.perm)) if self.transposed else chunk_t

    def to_codec_axes(self, chunk: np.ndarray) -> np.ndarray:
        """An inner chunk in the array's axis order, in the codec's (C-contiguous)."""
        return np.ascontiguousarray(chunk.transpose(self.perm)) if self.transposed else chunk


Layout: TypeAlias = ChunkedLayout | ShardedLayout
"""The two layouts, matched with ``match``."""


def build_layout(
    store: Store,
    prefix: str,
    meta: ArrayMeta,
    pipeline: CodecPipeline,
    write_empty_chunks: bool,
    workers: int | None,
) -> Layout:
    """The layout of the array ``meta`` (coded by ``pipeline``): sharded when the chain allows inner chunks
    in place, else chunked. Its store reads chunks (shards) through :meth:`Store.limited` to the most bytes
    a valid one takes (the chain's bound for a chunk as large as the largest edge on every axis; None for
    variable-length data): a zip entry or a remote answer larger than that is refused before it is read."""
    grid, dtype, fill_value = meta.chunk_grid, meta.data_type.numpy, meta.fill_value
    largest = tuple(int(np.max(e)) if e.size else 1 for e in (d.unique_edges() for d in grid.dims))
    store = store.limited(pipeline.stored_bound(ChunkSpec(largest, dtype, fill_value)))
    key_encoding = meta.chunk_key_encoding
    common = (store, prefix, grid, key_encoding, pipeline, dtype, fill_value, write_empty_chunks, workers)
    sharding, perm = pipeline.sharding, pipeline.sharding_axes(grid.ndim)
    if sharding is None or perm is None:
        return ChunkedLayout(*common)
    inner = tuple(sharding.chunk_shape[perm.index(axis)] for axis in range(grid.ndim))  # in the array's order
    return ShardedLayout(*common, sharding=sharding, inner_shape=inner, perm=perm)
