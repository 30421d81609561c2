"""Sharded I/O for :mod:`rectizarr.io.engine`: selections planned over the inner-chunk grid, grouped per shard.

Reads fetch each shard's index with one ranged request (cached) and only the inner chunks they need, or
the whole shard in one request when every inner chunk is needed; writes read a shard at most once,
re-encode only the inner chunks they change, reuse the other inner chunks' bytes as they are, and write
the shard once. Shared helpers (thread pool, locks, index cache, pasting) live in ``engine``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from rectizarr._util import Coords, Shape, prod
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.sharding import ShardIndex, is_fill
from rectizarr.errors import CodecError
from rectizarr.indexing import ChunkProjection, Plan
from rectizarr.indexing.plan import OrthogonalPlan
from rectizarr.io.engine import (
    _PIECEWISE_BYTES,
    Layout,
    _cache_key,
    _can_decode_into,
    _cheap_versions,
    _clear_outside,
    _decode_in_place,
    _encode_and_commit,
    _index_cache,
    _paste,
    _put,
    _replaces,
    _streams,
    _take,
    _workers_for,
)
from rectizarr.io.pool import _locks, pmap, pool_size
from rectizarr.stores.base import Buffer


@dataclass
class _Shard:
    coords: Coords  # outer grid coords
    key: str
    shape_t: Shape  # declared shard shape in the transposed (codec) space
    projections: list[tuple[Coords, ChunkProjection]]  # (inner coords in transposed space, projection)


def _group_by_shard(layout: Layout, projections: list[ChunkProjection]) -> list[_Shard]:
    assert layout.inner_shape is not None and layout.perm is not None
    perm = list(layout.perm)
    shards: dict[Coords, _Shard] = {}
    for start in range(0, len(projections), 4096):  # rows as Python ints, a block at a time
        block = projections[start : start + 4096]
        for p, row, local_row in zip(block, *_shard_rows(layout, block), strict=True):
            sc: Coords = tuple(row)
            shard = shards.get(sc)
            if shard is None:
                declared = layout.grid.chunk_shape(sc)
                shard = _Shard(sc, layout.key(sc), tuple(declared[a] for a in perm), [])
                shards[sc] = shard
            shard.projections.append((tuple(local_row), p))
    return list(shards.values())


def _shard_rows(layout: Layout, projections: list[ChunkProjection]) -> tuple[list[list[int]], list[list[int]]]:
    """Per projection, its shard's coords (array axes) and its inner chunk's coords inside the shard
    (transposed axes)."""
    assert layout.inner_shape is not None and layout.perm is not None
    sizes, dims = layout.inner_shape, layout.grid.dims
    if len(projections) <= 8:  # a small read: integer arithmetic costs less than arrays
        shard_rows, local_rows = [], []
        for p in projections:
            starts = [c * n for c, n in zip(p.coords, sizes, strict=True)]
            row = [d.chunk_of(x) for d, x in zip(dims, starts, strict=True)]
            shard_rows.append(row)
            here = [(x - d.offset(c)) // n for d, x, c, n in zip(dims, starts, row, sizes, strict=True)]
            local_rows.append([here[a] for a in layout.perm])
        return shard_rows, local_rows
    inner = np.array([p.coords for p in projections], dtype=np.int64).reshape(len(projections), -1)
    starts_a = inner * np.asarray(sizes, dtype=np.int64)
    shard_coords = np.empty_like(inner)
    local = np.empty_like(inner)
    for axis, d in enumerate(dims):
        along = d.chunks_of(starts_a[:, axis])
        shard_coords[:, axis] = along
        local[:, axis] = (starts_a[:, axis] - d.offsets_of(along)) // sizes[axis]
    return shard_coords.tolist(), local[:, list(layout.perm)].tolist()


def _inner_limit(layout: Layout, shard: _Shard) -> Coords:
    """Per transposed axis, how many inner chunks of ``shard`` overlap the array (the rest are never stored)."""
    assert layout.inner_shape is not None and layout.perm is not None
    per_axis = [-(-d.data_len(shard.coords[axis]) // layout.inner_shape[axis])
                for axis, d in enumerate(layout.grid.dims)]
    return tuple(per_axis[a] for a in layout.perm)


def _inner_in_extent(layout: Layout, shard: _Shard) -> int:
    return prod(_inner_limit(layout, shard))


def _to_array_axes(layout: Layout, chunk_t: np.ndarray) -> np.ndarray:
    perm = layout.perm
    if perm is None or list(perm) == list(range(len(perm))):
        return chunk_t
    return chunk_t.transpose(np.argsort(perm))


def _to_codec_axes(layout: Layout, chunk: np.ndarray) -> np.ndarray:
    perm = layout.perm
    if perm is None or list(perm) == list(range(len(perm))):
        return chunk
    return np.ascontiguousarray(chunk.transpose(perm))


def _inner_spec(layout: Layout, key: str) -> ChunkSpec:
    assert layout.sharding is not None
    return ChunkSpec(layout.sharding.chunk_shape, layout.dtype, layout.fill_value, key)


def _cached_index(layout: Layout, key: str) -> tuple[Any, ShardIndex | None]:
    version = layout.store.version(key) if _cheap_versions(layout.store) else 0
    if version is None:  # the shard does not exist
        return None, None
    return version, _index_cache.get(_cache_key(layout.store, key), version)


def _fetch_indexes(layout: Layout, shards: list[_Shard]) -> dict[str, ShardIndex | None]:
    """Decoded index per shard key (``None`` = no shard); one batched request for the misses."""
    sharding = layout.sharding
    assert sharding is not None
    out: dict[str, ShardIndex | None] = {}
    misses: list[tuple[_Shard, Any]] = []
    for s in shards:
        version, idx = _cached_index(layout, s.key)
        if version is None:
            out[s.key] = None
        elif idx is not None:
            out[s.key] = idx
        else:
            misses.append((s, version))
    if not misses:
        return out
    raw = layout.store.get_many([(s.key, sharding.index_byte_range(s.shape_t)) for s, _ in misses])
    for (s, version), data in zip(misses, raw, strict=True):
        if data is None:
            out[s.key] = None
            continue
        size = layout.store.getsize(s.key) if sharding.index_location == "start" else None
        idx = sharding.decode_index(data, s.shape_t, shard_nbytes=size, key=s.key)
        out[s.key] = idx
        _index_cache.put(_cache_key(layout.store, s.key), version, idx)
    return out


def read_sharded(layout: Layout, plan: Plan, projections: list[ChunkProjection], out: np.ndarray) -> None:
    sharding = layout.sharding
    assert sharding is not None
    shards = _group_by_shard(layout, projections)
    fill = layout.fill_value
    inner_spec = ChunkSpec(sharding.chunk_shape, layout.dtype, fill)
    # Large inner chunks of local data are read one by one, also from whole shards: one read of a
    # 64 MiB shard costs more (fresh memory) than its 64 ranged reads, and memory stays flat.
    piecewise = _streams(layout.store) and inner_spec.nbytes >= _PIECEWISE_BYTES
    whole = [] if piecewise else [s for s in shards
                                  if len({c for c, _ in s.projections}) == _inner_in_extent(layout, s)]
    partial = [s for s in shards if s not in whole]
    transposed = layout.perm is not None and list(layout.perm) != list(range(len(layout.perm)))
    specs = {s.key: _inner_spec(layout, s.key) for s in shards}  # one per shard: it names the shard
    workers = _workers_for(layout, sharding.codecs, inner_spec)

    into = not transposed and _can_decode_into(sharding.codecs, layout.dtype)

    def paste(s: _Shard, p: ChunkProjection, data: bytes | memoryview | None) -> None:
        if data is None:
            _paste(out, plan, p, None, fill)
            return
        if into and _decode_in_place(out, plan, p, sharding.codecs, data, specs[s.key], fill):
            return
        chunk_t = sharding.decode_inner(data, specs[s.key])
        _paste(out, plan, p, _to_array_axes(layout, chunk_t) if transposed else chunk_t, fill)

    def whole_shard(s: _Shard, value: bytes | memoryview | None) -> None:
        if value is None:
            for _, p in s.projections:
                _paste(out, plan, p, None, fill)
            return
        if not transposed and isinstance(plan, OrthogonalPlan):
            box = _shard_box(layout, plan, s)
            block = None if box is None else sharding.dense(value, s.shape_t, layout.dtype, key=s.key)
            if box is not None and block is not None:  # one copy for the whole shard
                nd = len(s.shape_t)
                target = out[box].reshape([n for pair in zip(block.shape[:nd], block.shape[nd:], strict=True)
                                           for n in pair])  # (shards-axis, inner-axis) pairs: a view
                if np.may_share_memory(target, out):
                    target[...] = block.transpose([i for a in range(nd) for i in (a, nd + a)])
                    return
        _, chunks = sharding.split(value, s.shape_t, key=s.key)
        for c, p in s.projections:
            paste(s, p, chunks.get(c))

    jobs: list[tuple[_Shard, ChunkProjection, bytes | memoryview | None]] = []
    n_threads = pool_size() if layout.workers is None else layout.workers
    if whole and _streams(layout.store) and (workers == 1 or len(whole) >= 2 * n_threads):
        # Shard by shard in the workers (read, split, decode, paste): at most one shard per worker in memory.
        get = layout.store._get_transient
        pmap(lambda s: whole_shard(s, get(s.key, None)), whole, workers)
    else:  # few shards: fetch them, then spread their inner chunks over the workers
        for s, value in zip(whole, layout.store.get_many([(s.key, None) for s in whole]), strict=True):
            if value is None:
                jobs.extend((s, p, None) for _, p in s.projections)
                continue
            _, chunks = sharding.split(value, s.shape_t, key=s.key)
            jobs.extend((s, p, chunks.get(c)) for c, p in s.projections)
    if partial:
        indexes = _fetch_indexes(layout, partial)

        def wanted_of(shards: list[_Shard]) -> list[tuple[_Shard, ChunkProjection, tuple[int, int] | None]]:
            wanted: list[tuple[_Shard, ChunkProjection, tuple[int, int] | None]] = []
            for s in shards:
                idx = indexes[s.key]
                wanted.extend((s, p, None if idx is None else idx.byte_range(c)) for c, p in s.projections)
            return wanted

        def checked(s: _Shard, r: tuple[int, int], data: bytes | memoryview | None) -> bytes | memoryview:
            if data is None or len(data) != r[1]:
                raise CodecError("shard is shorter than its index says (truncated or rewritten)",
                                 key=s.key, codec="sharding_indexed")
            return data

        def fetch(shards: list[_Shard]) -> Iterator[tuple[_Shard, ChunkProjection, bytes | memoryview | None]]:
            wanted = wanted_of(shards)
            fetched = iter(layout.store.get_many([(s.key, r) for s, _, r in wanted if r is not None]))
            for s, p, r in wanted:
                yield s, p, None if r is None else checked(s, r, next(fetched))

        def shard_task(s: _Shard) -> None:
            for job in fetch([s]):
                paste(*job)

        def inner_task(job: tuple[_Shard, ChunkProjection, tuple[int, int] | None]) -> None:
            s, p, r = job  # a range from a validated index: no coalescing into large reads
            paste(s, p, None if r is None else checked(s, r, layout.store._get_transient(s.key, r)))

        if piecewise:  # inner chunk by inner chunk in the workers: read, decode, paste
            pmap(inner_task, wanted_of(partial), workers)
        elif _streams(layout.store) and (workers == 1 or len(partial) >= 2 * n_threads):
            # Shard by shard in the workers (ranges of one shard coalesce alike): reads overlap decoding.
            pmap(shard_task, partial, workers)
        else:
            jobs.extend(fetch(partial))
    pmap(lambda job: paste(*job), jobs, workers)


def _shard_box(layout: Layout, plan: OrthogonalPlan, s: _Shard) -> tuple[slice, ...] | None:
    """The block of the output that shard ``s`` fills when the plan selects all of it, in order: along
    every axis its inner chunks are selected whole (``0:n``, inside the extent) and go to consecutive
    positions. None otherwise."""
    assert layout.inner_shape is not None
    box = []
    for axis, (a, d, inner) in enumerate(zip(plan.axes, layout.grid.dims, layout.inner_shape, strict=True)):
        first = d.offset(s.coords[axis]) // inner
        n = s.shape_t[axis] // inner
        j = int(np.searchsorted(a.chunks, first))
        if j + n > a.chunks.size or int(a.chunks[j]) != first or int(a.chunks[j + n - 1]) != first + n - 1:
            return None
        start = 0
        for k in range(n):
            e = a.entries[j + k]
            if not (isinstance(e.local, slice) and isinstance(e.out, slice) and e.out.step == 1
                    and e.local.start == 0 and e.local.stop == inner and e.local.step == 1):
                return None
            if k == 0:
                start = e.out.start
            elif e.out.start != start + k * inner:
                return None
        box.append(slice(start, start + n * inner))
    return tuple(box)


def write_sharded(layout: Layout, plan: Plan, projections: list[ChunkProjection], value: np.ndarray) -> None:
    sharding = layout.sharding
    assert sharding is not None and layout.inner_shape is not None
    inner_shape: Shape = layout.inner_shape
    shards = _group_by_shard(layout, projections)
    with _locks.hold(layout.store, [s.key for s in shards]):
        needs_read = []
        for s in shards:
            complete = {c for c, p in s.projections if p.complete}
            if len(complete) < _inner_in_extent(layout, s) or len(complete) < len({c for c, _ in s.projections}):
                needs_read.append(s)
        old = dict(zip([s.key for s in needs_read],
                       layout.store.get_many([(s.key, None) for s in needs_read]), strict=True))

        def work(s: _Shard) -> tuple[str, Buffer | None]:
            stored = old.get(s.key)
            existing: dict[Coords, memoryview] = {}
            if stored is not None:
                _, existing = sharding.split(stored, s.shape_t, key=s.key)
            groups: dict[Coords, list[ChunkProjection]] = defaultdict(list)
            for c, p in s.projections:
                groups[c].append(p)
            limit = _inner_limit(layout, s)
            chunks: dict[Coords, bytes | memoryview] = {
                c: v for c, v in existing.items() if all(x < n for x, n in zip(c, limit, strict=True))
            }
            spec = _inner_spec(layout, s.key)
            for c, group in groups.items():
                array_coords = group[0].coords
                if _replaces(plan, group, inner_shape):
                    chunk = value[(*group[0].out_sel, Ellipsis)]  # the caller's data as it is (0-d: a view too)
                else:
                    if all(p.complete for p in group) or c not in existing:
                        chunk = np.empty(inner_shape, layout.dtype)
                        chunk[...] = layout.fill_value
                    else:
                        chunk = np.array(_to_array_axes(layout, sharding.decode_inner(existing[c], spec)),
                                         copy=True)
                        _clear_outside(chunk, layout, array_coords)
                    for p in group:
                        _put(chunk, plan, p, _take(value, plan, p))
                if not layout.write_empty_chunks and is_fill(chunk, layout.fill_value):
                    chunks.pop(c, None)
                else:
                    chunks[c] = sharding.encode_inner(_to_codec_axes(layout, chunk), spec)
            return s.key, sharding.assemble(s.shape_t, chunks)

        workers = _workers_for(layout, sharding.codecs, ChunkSpec(inner_shape, layout.dtype, layout.fill_value))
        _encode_and_commit(layout, shards, work, {s.key for s in needs_read if old[s.key] is None}, workers)


# ------------------------------------------------------------------------------------ maintenance
