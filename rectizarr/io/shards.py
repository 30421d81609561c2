"""Planning over shards: the projections of a plan (made over inner chunks) grouped per shard, and the
shard indexes that say where each inner chunk lies (cached by version, :mod:`rectizarr.io.cache`)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from rectizarr._util import Coords, Shape, prod
from rectizarr.codecs.sharding import ShardIndex
from rectizarr.indexing import ChunkProjection
from rectizarr.io.cache import index_cache
from rectizarr.io.layout import ShardedLayout
from rectizarr.tuning import Tuning

__all__ = ["Shard", "fetch_indexes", "group_by_shard"]


@dataclass
class Shard:
    """The projections of one read or write that fall in one shard."""

    coords: Coords  # outer grid coords
    key: str
    shape_t: Shape  # declared shard shape in the transposed (codec) space
    projections: list[tuple[Coords, ChunkProjection]]  # (inner coords in transposed space, projection)

    def inner_limit(self, layout: ShardedLayout) -> Coords:
        """Per transposed axis, how many inner chunks of the shard overlap the array (no others are stored)."""
        per_axis = [-(-d.data_len(self.coords[axis]) // layout.inner_shape[axis])
                    for axis, d in enumerate(layout.grid.dims)]
        return tuple(per_axis[a] for a in layout.perm)

    def inner_in_extent(self, layout: ShardedLayout) -> int:
        """How many inner chunks of the shard overlap the array."""
        return prod(self.inner_limit(layout))

    def touches_all(self, layout: ShardedLayout) -> bool:
        """Whether the projections touch every inner chunk that overlaps the array."""
        return len({c for c, _ in self.projections}) == self.inner_in_extent(layout)


def group_by_shard(layout: ShardedLayout, projections: list[ChunkProjection], t: Tuning) -> list[Shard]:
    """The shards that ``projections`` touch, each with its projections, in first-touch order."""
    shards: dict[Coords, Shard] = {}
    block = t.shard_group_block
    for start in range(0, len(projections), block):  # rows as Python ints, a block at a time
        part = projections[start : start + block]
        rows = _shard_rows_few(layout, part) if len(part) <= t.small_read_projections else _shard_rows(layout, part)
        for p, row, local_row in zip(part, *rows, strict=True):
            sc: Coords = tuple(row)
            shard = shards.get(sc)
            if shard is None:
                declared = layout.grid.chunk_shape(sc)
                shard = shards[sc] = Shard(sc, layout.key(sc), tuple(declared[a] for a in layout.perm), [])
            shard.projections.append((tuple(local_row), p))
    return list(shards.values())


def _shard_rows_few(layout: ShardedLayout, projections: list[ChunkProjection]) -> tuple[list[list[int]], list[list[int]]]:
    """:func:`_shard_rows` in integer arithmetic, which costs less than arrays for a few projections."""
    sizes, dims = layout.inner_shape, layout.grid.dims
    shard_rows, local_rows = [], []
    for p in projections:
        starts = [c * n for c, n in zip(p.coords, sizes, strict=True)]
        row = [d.chunk_of(x) for d, x in zip(dims, starts, strict=True)]
        shard_rows.append(row)
        here = [(x - d.offset(c)) // n for d, x, c, n in zip(dims, starts, row, sizes, strict=True)]
        local_rows.append([here[a] for a in layout.perm])
    return shard_rows, local_rows


def _shard_rows(layout: ShardedLayout, projections: list[ChunkProjection]) -> tuple[list[list[int]], list[list[int]]]:
    """Per projection, its shard's coords (array axes) and its inner chunk's coords inside the shard
    (transposed axes)."""
    sizes, dims = layout.inner_shape, layout.grid.dims
    inner = np.array([p.coords for p in projections], dtype=np.int64).reshape(len(projections), -1)
    starts_a = inner * np.asarray(sizes, dtype=np.int64)
    shard_coords = np.empty_like(inner)
    local = np.empty_like(inner)
    for axis, d in enumerate(dims):
        along = d.chunks_of(starts_a[:, axis])
        shard_coords[:, axis] = along
        local[:, axis] = (starts_a[:, axis] - d.offsets_of(along)) // sizes[axis]
    return shard_coords.tolist(), local[:, list(layout.perm)].tolist()


def fetch_indexes(layout: ShardedLayout, shards: list[Shard]) -> dict[str, ShardIndex | None]:
    """The decoded index of each shard (None: no shard), from the cache or one batched request for the
    misses. On stores with cheap versions a cached index is used only at the shard's current version."""
    out: dict[str, ShardIndex | None] = {}
    misses: list[tuple[Shard, Hashable]] = []
    cheap = layout.store.capabilities.cheap_versions
    for s in shards:
        version = layout.store.version(s.key) if cheap else 0
        idx = None if version is None else index_cache().get_for(layout.store, s.key, version)
        if version is None:
            out[s.key] = None
        elif idx is not None:
            out[s.key] = idx
        else:
            misses.append((s, version))
    if not misses:
        return out
    sharding = layout.sharding
    raw = layout.store.get_many([(s.key, sharding.index_byte_range(s.shape_t)) for s, _ in misses])
    for (s, version), data in zip(misses, raw, strict=True):
        if data is None:
            out[s.key] = None
            continue
        size = layout.store.getsize(s.key) if sharding.index_location == "start" else None
        idx = out[s.key] = sharding.decode_index(data, s.shape_t, shard_nbytes=size, key=s.key)
        index_cache().put_for(layout.store, s.key, version, idx)
    return out
