"""Which shards a read or write of a :class:`~rectizarr.io.layout.ShardedLayout` touches
(:func:`group_by_shard`: its projections grouped per shard) and their indexes (:func:`fetch_indexes`: from
the cache where a version check allows, else read, with the whole shard when it is small and the store
has round trips), with the versions the inner chunks' reads are checked against."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from rectizarr import threads
from rectizarr._util import Coords, Shape, prod
from rectizarr.codecs.shard_index import ShardIndex
from rectizarr.errors import CodecError, VersionChanged
from rectizarr.indexing import ChunkProjection
from rectizarr.io.cache import index_cache
from rectizarr.io.chunk import Data
from rectizarr.io.layout import IndexBudget, ShardedLayout
from rectizarr.stores import requests_in_flight
from rectizarr.tuning import Tuning


@dataclass
class Shard:
    """The projections of one read or write that fall in one shard."""

    coords: Coords  # outer grid coords
    key: str
    shape_t: Shape  # declared shard shape in the transposed (codec) space
    projections: list[tuple[Coords, ChunkProjection]]  # (inner coords in transposed space, projection)

    @classmethod
    def at(cls, layout: ShardedLayout, coords: Coords) -> Shard:
        """The shard at ``coords`` of the outer grid, with no projections yet."""
        declared = layout.grid.chunk_shape(coords)
        return cls(coords, layout.key(coords), tuple(declared[a] for a in layout.perm), [])

    def inner_limit(self, layout: ShardedLayout) -> Coords:
        """Per transposed axis, how many inner chunks of the shard overlap the array (no others are stored)."""
        per_axis = [
            -(-d.data_len(self.coords[axis]) // layout.inner_shape[axis])
            for axis, d in enumerate(layout.grid.dims)
        ]
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
        few = len(part) <= t.small_read_projections
        rows = _shard_rows_few(layout, part) if few else _shard_rows(layout, part)
        for p, row, local_row in zip(part, *rows, strict=True):
            sc: Coords = tuple(row)
            shard = shards.get(sc)
            if shard is None:
                shard = shards[sc] = Shard.at(layout, sc)
            shard.projections.append((tuple(local_row), p))
    return list(shards.values())


def _shard_rows_few(
    layout: ShardedLayout, projections: list[ChunkProjection]
) -> tuple[list[list[int]], list[list[int]]]:
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


def _shard_rows(
    layout: ShardedLayout, projections: list[ChunkProjection]
) -> tuple[list[list[int]], list[list[int]]]:
    """Per projection, its shard's coords (array axes) and its inner chunk's (transposed axes)."""
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


Indexes = dict[str, ShardIndex | None]
Versions = dict[str, Hashable]  # the version each shard's index was read at, where reads can be checked
Bodies = dict[str, Data]  # whole shards that came with their index (small shards of stores with round trips)


def fetch_indexes(
    layout: ShardedLayout, shards: list[Shard]
) -> tuple[Indexes, Versions, Bodies, Ahead | None]:
    """The decoded index of each shard (None: no shard), from the cache or one batched request for the
    misses, with the version each was read at, which its inner chunks' reads are checked against
    (:func:`checked_versions`, or ``If-Match``). A cached index serves where versions are cheap at the
    shard's current version; with conditional reads (S3, obstore) while the ranged reads it leads to pass
    ``If-Match`` on its ETag (a 412 reads it again), never for a read it leads to no range of (absence is
    never stale); elsewhere (fsspec's GCS, HTTP) it is read every time. With round trips, a small shard's
    index comes with the whole shard (:func:`_index_reach`, in ``Bodies``): no second request. Where
    indexes are cached on conditional reads, a read also reads ahead the uncached indexes of the shards
    nearest its first one, as many as the handle's :class:`~rectizarr.io.layout.IndexBudget` allows
    (never more index requests than a reader without a cache), so element-by-element reads over a few
    shards wait for a handful of index reads, not one per shard: a miss beside its own index reads; an
    all-cached read beside its inner chunks when the handle's reads lately spread over several shards (the
    last value is then an :class:`Ahead` under way, which the caller joins)."""
    store, sharding = layout.store, layout.sharding
    bodies: Bodies = {}
    cheap, conditional = store.capabilities.cheap_versions, store.capabilities.conditional_reads
    out, versions, misses = _lookup(layout, shards)
    at_end = sharding.index_location == "end"
    budget = layout.index_budget if conditional and not cheap and at_end else None
    if not misses:
        return out, versions, bodies, None if budget is None else _ahead_of_hits(layout, budget, shards)
    if budget is not None:
        budget.spread([s.key for s in shards])
        budget.maybe_uncached = True
    reach = _index_reach(layout, misses)  # small shards come whole: an index read ahead would save nothing
    most = 0 if reach else requests_in_flight() - len(misses)
    extra = 0 if budget is None else budget.spend(len(shards), len(misses), most)
    requests = [
        (s.key, ((-reach, None) if at_end else (0, reach)) if reach else sharding.index_byte_range(s.shape_t))
        for s in misses
    ]
    checked = cheap or conditional
    ahead = None if not extra else _ahead(layout, budget, misses, extra)  # (extra: a budget)
    try:
        raw = store.get_many_versioned(requests) if checked else [(d, None) for d in store.get_many(requests)]
    finally:
        if ahead is not None:
            ahead.join()
    for s, (data, version) in zip(misses, raw, strict=True):
        idx = out[s.key] = None if data is None else _decoded(layout, s, data, reach, bodies)
        if checked and idx is not None:
            versions[s.key] = version
            index_cache().put(store, s.key, version, idx)
    return out, versions, bodies, None


def _lookup(layout: ShardedLayout, shards: list[Shard]) -> tuple[Indexes, Versions, list[Shard]]:
    """:func:`fetch_indexes`'s cache look-ups: the indexes known (None: no shard, where versions are cheap)
    with their versions, and the shards whose index must be read."""
    store = layout.store
    out: Indexes = {}
    versions: Versions = {}
    misses: list[Shard] = []
    cheap, conditional = store.capabilities.cheap_versions, store.capabilities.conditional_reads
    for s in shards:
        version = store.version(s.key) if cheap else 0
        hit = None if version is None else _cached(layout, s, version, cheap, conditional)
        if version is None:
            out[s.key] = None
        elif hit is not None:
            out[s.key], versions[s.key] = hit[1], hit[0]
        else:
            misses.append(s)
    return out, versions, misses


def _decoded(layout: ShardedLayout, s: Shard, data: bytes, reach: int, bodies: Bodies) -> ShardIndex:
    """The index of shard ``s`` from ``data``, its index as read (with up to ``reach`` bytes before it: a
    shorter answer is the whole shard, kept in ``bodies``)."""
    sharding, at_end = layout.sharding, layout.sharding.index_location == "end"
    size, index_bytes = None, memoryview(data)
    if reach:
        n = sharding.index_nbytes(s.shape_t)
        if len(data) < reach:  # the whole shard (a range past either end gives what there is)
            size = len(data)
            bodies[s.key] = data
        index_bytes = index_bytes[max(0, len(data) - n) :] if at_end else index_bytes[:n]
    if size is None and not at_end:
        size = layout.store.getsize(s.key)
    return sharding.decode_index(index_bytes, s.shape_t, shard_nbytes=size, key=s.key)


def _ahead_of_hits(layout: ShardedLayout, budget: IndexBudget, shards: list[Shard]) -> Ahead | None:
    """For a read whose indexes were all cached: the indexes it may read ahead, under way (see
    :func:`fetch_indexes`), unless the last look found every index cached."""
    most = 0
    if budget.spread([s.key for s in shards]) and budget.maybe_uncached and not _index_reach(layout, shards):
        most = requests_in_flight()
    extra = budget.spend(len(shards), 0, most)
    return _ahead(layout, budget, shards, extra) if extra else None


def _ahead(layout: ShardedLayout, budget: IndexBudget | None, near: list[Shard], n: int) -> Ahead | None:
    """Up to ``n`` indexes the budget granted, of the uncached shards nearest to ``near``, read ahead."""
    assert budget is not None
    found, everywhere = _nearest_uncached(layout, near, n)
    budget.refund(n - len(found))
    budget.maybe_uncached = bool(found) or not everywhere
    return Ahead(layout, found) if found else None


class Ahead:
    """Shard indexes read ahead, on a thread of their own, into the cache; :meth:`join` waits for them. A
    read ahead never changes a read's outcome: an index that fails, is not there or does not decode is
    left out (the errors of the read's own requests are raised as they come)."""

    def __init__(self, layout: ShardedLayout, shards: list[Shard]) -> None:
        self._thread = threads.start("rectizarr-index-ahead", self._read, layout, shards)

    @staticmethod
    def _read(layout: ShardedLayout, shards: list[Shard]) -> None:
        store, sharding = layout.store, layout.sharding
        try:
            got = store.get_many_versioned([(s.key, sharding.index_byte_range(s.shape_t)) for s in shards])
        except Exception:  # an index read ahead is only a guess: the read goes on without it
            return
        for s, (data, version) in zip(shards, got, strict=True):
            if data is None:
                continue
            try:
                idx = sharding.decode_index(memoryview(data), s.shape_t, shard_nbytes=None, key=s.key)
            except CodecError:
                continue
            index_cache().put(store, s.key, version, idx)

    def join(self) -> None:
        self._thread.join()


def _nearest_uncached(layout: ShardedLayout, near: list[Shard], n: int) -> tuple[list[Shard], bool]:
    """Up to ``n`` shards of the array, nearest to the first of ``near`` in C order of the shard grid (after
    it first), that are not among ``near`` and have no cached index, at most ``8 n`` looked at; and
    whether every other shard was looked at."""
    shape = layout.grid.grid_shape
    total = prod(shape)
    centre = int(np.ravel_multi_index(near[0].coords, shape))
    taken, cache, found = {s.key for s in near}, index_cache(), []
    looked = 0
    for step in range(1, total):
        for flat in (centre + step, centre - step):
            if not 0 <= flat < total:
                continue
            looked += 1
            shard = Shard.at(layout, tuple(int(c) for c in np.unravel_index(flat, shape)))
            if shard.key not in taken and cache.get_any(layout.store, shard.key) is None:
                found.append(shard)
                taken.add(shard.key)
                if len(found) == n:
                    return found, False
        if centre + step >= total and centre - step < 0:
            return found, True
        if looked >= 8 * n:
            break
    return found, total <= 1


def _index_reach(layout: ShardedLayout, shards: list[Shard]) -> int:
    """How many bytes to read from a shard's index end to have its index: 0 for the index alone; on stores
    with round trips, the store's coalescing gap (the bytes worth reading rather than making another request)
    when the shards decode to no more than that with their index (so any of their inner chunks would be
    coalesced with the index anyway) and all these reads stay within the store's largest coalesced read."""
    store = layout.store
    if store.capabilities.low_latency or not shards:
        return 0
    gap, index_nbytes = store.coalesce_gap, layout.sharding.index_nbytes
    biggest = max(prod(s.shape_t) * layout.dtype.itemsize + index_nbytes(s.shape_t) for s in shards)
    return gap if biggest <= gap and len(shards) * gap <= store.coalesce_max else 0


def _cached(
    layout: ShardedLayout, s: Shard, version: Hashable, cheap: bool, conditional: bool
) -> tuple[Hashable, ShardIndex] | None:
    """``(version, index)`` of shard ``s`` from the cache when it may be used (see :func:`fetch_indexes`)."""
    # an index cached by another layout of the same key (another handle's stale metadata, a consolidated
    # entry that disagrees with the array's own) is not this one's
    shape = layout.sharding.chunks_per_shard(s.shape_t)
    if cheap:
        idx = index_cache().get(layout.store, s.key, version)
        return None if idx is None or idx.offsets.shape != shape else (version, idx)
    if not conditional:
        return None
    entry = index_cache().get_any(layout.store, s.key)
    if (
        entry is None
        or entry[1].offsets.shape != shape
        or all(entry[1].byte_range(c) is None for c, _ in s.projections)
    ):
        return None
    return entry


def checked_versions(layout: ShardedLayout, shards: list[Shard], versions: Versions) -> None:
    """After reading inner chunks of ``shards`` by ranges of their indexes: :class:`VersionChanged` if
    a shard is no longer at the version its index was read at (its bytes may be another index's)."""
    for s in shards:
        if s.key in versions and layout.store.version(s.key) != versions[s.key]:
            raise VersionChanged(s.key)
