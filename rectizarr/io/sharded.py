"""Reads and writes of a :class:`~rectizarr.io.layout.ShardedLayout`, planned over inner chunks.

Read: projections grouped per shard (:mod:`.shards`) -> requests (whole shards, or each shard's index,
cached by version, then the byte ranges of the inner chunks it needs) -> fetch -> decode -> paste, by a
strategy :func:`read_sharded` chooses per read. Write: each shard read at most once (under its lock),
only the inner chunks the write touches re-encoded, the shard written once (:func:`write_sharded`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from functools import partial
from types import EllipsisType

import numpy as np

from rectizarr._util import Coords, prod, region_of
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.shard_index import is_fill
from rectizarr.errors import CodecError, ConflictError, VersionChanged
from rectizarr.indexing import ChunkProjection, OrthogonalPlan, Plan
from rectizarr.io.batch import batchable, decode_shard, encode_shard, paste_block
from rectizarr.io.cache import invalidate
from rectizarr.io.chunk import Data, Encoded, Guard, decode_in_place, merge, paste, update_chunks
from rectizarr.io.layout import ShardedLayout
from rectizarr.io.pool import each_as_ready, pmap, pool_size, workers_for
from rectizarr.io.shards import (
    Ahead,
    Bodies,
    Indexes,
    Shard,
    Versions,
    checked_versions,
    fetch_indexes,
    group_by_shard,
)
from rectizarr.stores import requests_in_flight
from rectizarr.tuning import Tuning

Job = tuple[Shard, ChunkProjection, Data | None]  # an inner chunk to paste: its shard, projection, bytes
Wanted = tuple[Shard, ChunkProjection, tuple[int, int] | None]  # ... and where it lies (None: not stored)


class _Read:
    """One sharded read: where to paste and how to decode an inner chunk."""

    def __init__(self, layout: ShardedLayout, plan: Plan, out: np.ndarray, t: Tuning) -> None:
        self.layout, self.plan, self.out, self.t = layout, plan, out, t
        self.aheads: list[Ahead] = []  # shard indexes being read ahead, joined before the read returns
        codecs, spec = layout.sharding.codecs, layout.inner_spec(None)
        self.workers = workers_for(layout.workers, bool(codecs.bytes_bytes), spec.nbytes, t)
        self.threads = pool_size() if layout.workers is None else layout.workers
        self.into = not layout.transposed and codecs.can_decode_into(layout.dtype)
        self.streams = layout.store.capabilities.low_latency
        self.piecewise = self.streams and spec.nbytes >= t.piecewise_bytes
        # whole shards batch-decoded: small inner chunks of local shards, and any that came whole from a store
        # with round trips (16 shards of 16 x 128 KiB over S3: 68 vs 82 ms of CPU at 0 ms)
        self.batched = batchable(layout.dtype) and (spec.nbytes < t.piecewise_bytes or not self.streams)

    def in_workers(self, n: int) -> bool:
        """Whether ``n`` shards of local data go shard by shard in the workers (reads overlap decoding)."""
        return self.streams and (self.workers == 1 or n >= self.t.whole_shards_per_thread * self.threads)

    def paste(self, s: Shard, p: ChunkProjection, data: Data | None) -> None:
        """Decode one inner chunk of shard ``s`` and paste its selected part (fill value when None)."""
        layout, fill = self.layout, self.layout.fill_value
        if data is None:
            paste(self.out, self.plan, p, None, fill)
            return
        spec = layout.inner_spec(s.key)
        if self.into and decode_in_place(
            self.out, self.plan, p, layout.sharding.codecs, data, spec, fill, self.t
        ):
            return
        chunk_t = layout.sharding.decode_inner(data, spec)
        paste(self.out, self.plan, p, layout.to_array_axes(chunk_t), fill)

    def whole(self, s: Shard, value: Data | None) -> None:
        """Paste every projection of shard ``s`` from its whole value."""
        if value is None:
            for _, p in s.projections:
                paste(self.out, self.plan, p, None, self.layout.fill_value)
            return
        if paste_dense(self, s, value) or (self.batched and paste_batched(self, s, value)):
            return
        _, chunks = self.layout.sharding.split(value, s.shape_t, key=s.key)
        for c, p in s.projections:
            self.paste(s, p, chunks.get(c))


def read_sharded(
    layout: ShardedLayout, plan: Plan, projections: list[ChunkProjection], out: np.ndarray, t: Tuning
) -> None:
    """Fill ``out`` with the inner chunks of ``projections``, choosing a strategy per group of shards."""
    if not projections:
        return
    r = _Read(layout, plan, out, t)
    shards = group_by_shard(layout, projections, t)
    # Large inner chunks of local data are read one by one, also from whole shards: one read of a
    # 64 MiB shard costs more (fresh memory) than its 64 ranged reads, and memory stays flat.
    whole = [] if r.piecewise else [s for s in shards if s.touches_all(layout)]
    partial = [s for s in shards if s not in whole]
    jobs: list[Job] = []
    if whole and r.in_workers(len(whole)):
        read_whole_streamed(r, whole)
    elif whole and not r.streams:
        read_whole_arriving(r, whole)
    elif whole:
        jobs.extend(read_whole_fetched(r, whole))
    try:
        if partial:
            jobs.extend(_read_partial(r, partial))
        pmap(lambda job: r.paste(*job), jobs, r.workers)
    finally:
        for ahead in r.aheads:
            ahead.join()


def _read_partial(r: _Read, shards: list[Shard]) -> list[Job]:
    """Read the inner chunks of ``shards`` through their indexes; again, with fresh indexes, when a shard
    was rewritten between the reads of its index and its inner chunks (never a stale index's ranges)."""
    retries = r.t.conflict_retries
    for attempt in range(retries):
        indexes, versions, bodies, ahead = fetch_indexes(r.layout, shards)
        try:
            try:
                return _read_partial_at(r, shards, indexes, versions, bodies)
            except CodecError:  # bytes that are not what the index says: stale, or corrupt
                checked_versions(r.layout, shards, versions)
                raise
        except VersionChanged as exc:  # that shard's index is read again; from the second conflict on, every
            # index this read used (another writer rewrote many shards: each would cost a retry of its own)
            invalidate(r.layout.store, [exc.key] if attempt == 0 else [exc.key, *versions])
        finally:
            if ahead is not None:  # indexes read ahead beside the inner chunks: joined once they are pasted
                r.aheads.append(ahead)
    raise ConflictError(
        f"shards of {r.layout.store!r} were rewritten during each of {retries} reads; try again"
    )


def _read_partial_at(
    r: _Read, shards: list[Shard], indexes: Indexes, versions: Versions, bodies: Bodies
) -> list[Job]:
    if not bodies and r.piecewise:
        read_inner_streamed(r, _wanted(shards, indexes))
        checked_versions(r.layout, shards, versions)
    elif not bodies and r.in_workers(len(shards)):
        read_partial_streamed(r, shards, indexes, versions)
    else:  # (bodies come only from stores with round trips: their inner chunks are cut out of them)
        return list(read_partial_fetched(r, _wanted(shards, indexes), versions, bodies))
    return []


def read_whole_streamed(r: _Read, shards: list[Shard]) -> None:
    """Shard by shard in the workers (read, split, decode, paste): at most one shard per worker in memory."""
    get = r.layout.store.get_transient
    # a batch-decoded shard is one call without the GIL: worth a thread however small its inner chunks
    pmap(lambda s: r.whole(s, get(s.key, None)), shards, r.threads if r.batched else r.workers)


def read_whole_arriving(r: _Read, shards: list[Shard]) -> None:
    """Stores with round trips: the shards requested at once, each split, decoded and pasted in the workers
    as soon as it arrives (decoding overlaps the transfers of the others); at most a window of them
    (``t.window_bytes`` decoded, twice the requests in flight, no fewer than the workers) fetched ahead."""
    store, t = r.layout.store, r.t
    shard_nbytes = r.layout.dtype.itemsize * max(prod(s.shape_t) for s in shards)
    ahead = max(r.threads, min(t.window_bytes // max(1, shard_nbytes), 2 * requests_in_flight()))
    arriving = store.iter_many([(s.key, None) for s in shards], ahead=ahead)
    each_as_ready(lambda item: r.whole(shards[item[0]], item[1]), arriving, r.threads)


def read_whole_fetched(r: _Read, shards: list[Shard]) -> Iterator[Job]:
    """Fetch the shards with one batched request and split them into inner chunks for the workers."""
    for s, value in zip(shards, r.layout.store.get_many([(s.key, None) for s in shards]), strict=True):
        if value is None:
            yield from ((s, p, None) for _, p in s.projections)
            continue
        _, chunks = r.layout.sharding.split(value, s.shape_t, key=s.key)
        yield from ((s, p, chunks.get(c)) for c, p in s.projections)


def read_inner_streamed(r: _Read, wanted: list[Wanted]) -> None:
    """Inner chunk by inner chunk in the workers: read its range (from a valid index), decode, paste."""
    get = r.layout.store.get_transient
    pmap(
        lambda w: r.paste(w[0], w[1], None if w[2] is None else _checked(w[0], w[2], get(w[0].key, w[2]))),
        wanted,
        r.workers,
    )


def read_partial_streamed(r: _Read, shards: list[Shard], indexes: Indexes, versions: Versions) -> None:
    """Shard by shard in the workers: each shard's ranges in one batched request (they coalesce), then
    decoded and pasted by the same worker, so reads overlap decoding."""

    def one(s: Shard) -> None:
        for job in read_partial_fetched(r, _wanted([s], indexes), versions, {}):
            r.paste(*job)

    pmap(one, shards, r.workers)


def read_partial_fetched(r: _Read, wanted: list[Wanted], versions: Versions, bodies: Bodies) -> Iterator[Job]:
    """The wanted inner chunks' bytes: cut out of the shards in ``bodies``, the others fetched with one
    batched request (neighbouring ranges coalesce), each shard's at the version of its index."""
    requests = [(s.key, rng) for s, _, rng in wanted if rng is not None and s.key not in bodies]
    at = {k: versions[k] for k, _ in requests if k in versions}
    fetched = iter(r.layout.store.get_many(requests, versions=at) if requests else [])
    for s, p, rng in wanted:
        if rng is None:
            yield s, p, None
        else:
            body = bodies.get(s.key)
            data = next(fetched) if body is None else memoryview(body)[rng[0] : rng[0] + rng[1]]
            yield s, p, _checked(s, rng, data)


def _wanted(shards: list[Shard], indexes: Indexes) -> list[Wanted]:
    """Each projection of ``shards`` with the byte range of its inner chunk (None: not stored)."""
    out: list[Wanted] = []
    for s in shards:
        idx = indexes[s.key]
        out.extend((s, p, None if idx is None else idx.byte_range(c)) for c, p in s.projections)
    return out


def _checked(s: Shard, rng: tuple[int, int], data: Data | None) -> Data:
    if data is None or len(data) != rng[1]:
        message = "shard is shorter than its index says (truncated or rewritten)"
        raise CodecError(message, key=s.key, codec="sharding_indexed")
    return data


def paste_dense(r: _Read, s: Shard, value: Data) -> bool:
    """Paste a whole shard as one block with one copy, when the plan selects all of it in order (and its
    inner chunks decode into one dense array); False when it cannot."""
    box = _shard_box(r.layout, r.plan, s)
    if box is None:
        return False
    block = r.layout.sharding.dense(value, s.shape_t, r.layout.dtype, key=s.key)
    return block is not None and paste_block(region_of(r.out, box), block)


def paste_batched(r: _Read, s: Shard, value: Data) -> bool:
    """Decode every inner chunk of a whole shard with one batch call (:mod:`.batch`) and paste them: one
    strided copy when the plan selects all of the shard in order, else one paste per projection. False
    (nothing done) when the decoded shard would exceed ``t.scratch_max_bytes``."""
    if prod(s.shape_t) * r.layout.dtype.itemsize > r.t.scratch_max_bytes:
        return False
    block = decode_shard(r.layout, s.key, s.shape_t, value, 1)
    plan = r.plan
    box = _shard_box(r.layout, plan, s)
    if box is not None and paste_block(region_of(r.out, box), block):
        return True
    for c, p in s.projections:
        where: tuple[int | EllipsisType, ...] = (*c, Ellipsis)  # a view, also of a 0-d chunk
        paste(r.out, plan, p, r.layout.to_array_axes(block[where]), r.layout.fill_value)
    return True


def _shard_box(layout: ShardedLayout, plan: Plan, s: Shard) -> tuple[slice, ...] | None:
    """The block of the output shard ``s`` fills when an orthogonal plan selects all of it in order (along
    each axis its inner chunks whole, ``0:n`` inside the extent, to consecutive positions); else None."""
    if layout.transposed or not isinstance(plan, OrthogonalPlan):
        return None
    box = []
    for axis, (a, d, inner) in enumerate(zip(plan.axes, layout.grid.dims, layout.inner_shape, strict=True)):
        first = d.offset(s.coords[axis]) // inner
        n = s.shape_t[axis] // inner
        j = int(np.searchsorted(a.chunks, first))
        if j + n > a.chunks.size or int(a.chunks[j]) != first or int(a.chunks[j + n - 1]) != first + n - 1:
            return None
        start, unit = 0, slice(0, inner, 1)
        for k in range(n):
            e = a.entries[j + k]
            if not isinstance(e.local, slice) or e.local != unit:
                return None
            if not isinstance(e.out, slice) or e.out.step != 1:
                return None
            if k == 0:
                start = e.out.start
            elif e.out.start != start + k * inner:
                return None
        box.append(slice(start, start + n * inner))
    return tuple(box)


def write_sharded(
    layout: ShardedLayout,
    plan: Plan,
    projections: list[ChunkProjection],
    value: np.ndarray,
    t: Tuning,
    guard: Guard = None,
) -> None:
    """Write ``value`` into the inner chunks of ``projections``, each touched shard read at most once and
    written once, under its lock (``guard`` checked once the locks are held)."""
    shards = group_by_shard(layout, projections, t)
    # what lies past the extent stays: another writer may be appending there (nothing locks the shape)
    edges = {s.key for s in shards if layout.at_edge(s.coords)}
    needs_read = {s.key for s in shards if s.key in edges or not _replaced_whole(layout, s)}

    spec = layout.inner_spec(None)
    in_blocks = batchable(layout.dtype) and not layout.transposed and isinstance(plan, OrthogonalPlan)
    batched = in_blocks and spec.nbytes < t.piecewise_bytes

    def work(s: Shard, stored: Data | None) -> Encoded:
        box = _shard_box(layout, plan, s) if in_blocks and stored is None and s.key not in edges else None
        if box is not None:  # the whole shard from one block of the value, encoded at once (io/batch.py)
            return s.key, encode_shard(layout, s.shape_t, region_of(value, box), 1)
        try:
            chunks = _merged_inner(layout, plan, s, value, stored, s.key in edges)
        except CodecError:
            if s.key not in edges or not _replaced_whole(layout, s):
                raise
            # an edge shard this write replaces within the extent, not decodable: nothing there to keep
            chunks = _merged_inner(layout, plan, s, value, None, True)
        return s.key, layout.sharding.assemble(s.shape_t, chunks)

    # a batch-encoded shard is one codec call without the GIL: worth a thread however small its inner chunks
    coded = bool(layout.sharding.codecs.bytes_bytes)
    workers = layout.workers if batched else workers_for(layout.workers, coded, spec.nbytes, t)
    update_chunks(layout, shards, lambda s: s.key, work, lambda s: s.key in needs_read, workers, t, guard)


def _replaced_whole(layout: ShardedLayout, s: Shard) -> bool:
    """Whether the write replaces every inner chunk of the shard inside the extent (no read needed)."""
    complete = {c for c, p in s.projections if p.complete}
    return len(complete) >= s.inner_in_extent(layout) and len(complete) >= len({c for c, _ in s.projections})


def _inner(layout: ShardedLayout, data: Data, spec: ChunkSpec) -> np.ndarray:
    return layout.to_array_axes(layout.sharding.decode_inner(data, spec))


def _merged_inner(
    layout: ShardedLayout, plan: Plan, s: Shard, value: np.ndarray, stored: Data | None, keep: bool = False
) -> dict[Coords, Data]:
    """The inner chunks' bytes of the shard after the write: untouched ones as stored, touched ones merged
    and re-encoded, empty ones dropped (unless ``write_empty_chunks``). ``keep``: see :func:`chunk.merge`
    (inner chunks past the extent this handle knows are kept too)."""
    sharding, inner_shape = layout.sharding, layout.inner_shape
    existing: dict[Coords, memoryview] = (
        {} if stored is None else sharding.split(stored, s.shape_t, key=s.key)[1]
    )
    groups: dict[Coords, list[ChunkProjection]] = defaultdict(list)
    for c, p in s.projections:
        groups[c].append(p)
    limit = s.inner_limit(layout)
    chunks: dict[Coords, Data] = {
        c: v for c, v in existing.items() if keep or all(x < n for x, n in zip(c, limit, strict=True))
    }
    spec = layout.inner_spec(s.key)
    for c, group in groups.items():
        old = existing.get(c)
        stored_chunk = None if old is None else partial(_inner, layout, old, spec)
        chunk = merge(layout, plan, group, value, inner_shape, stored_chunk, keep)
        if not layout.write_empty_chunks and is_fill(chunk, layout.fill_value):
            chunks.pop(c, None)
        else:
            chunks[c] = sharding.encode_inner(layout.to_codec_axes(chunk), spec)
    return chunks
