"""Executes chunk plans: batched store I/O, thread-pool codecs, grouped writes.

Knows stores and codecs, not the user API. Two layouts:

* **chunked** — the plan is made over the outer grid; one store value per chunk.
* **sharded** — the plan is made over the *inner* chunk grid, which is always regular: every shard edge
  is a multiple of the inner chunk size (validated at open), so inner chunk boundaries fall on multiples
  of the inner size along each axis whatever the outer (possibly rectilinear) grid. Projections are then
  grouped per shard: reads fetch each shard's index with one ranged request (cached) and only the inner
  chunks they need (neighbouring ranges coalesced by the store), or the whole shard in one request when
  every inner chunk is needed; writes read a shard at most once, re-encode only the inner chunks they
  change, reuse the other inner chunks' bytes as they are, and write the shard once.

Sharded arrays whose chain cannot be decoded piecewise (an array -> array codec other than ``transpose``
before ``sharding_indexed``, or a bytes -> bytes codec after it) use the chunked layout: whole shards.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import product
from typing import Any, TypeVar

import numpy as np

from rectizarr._index_plan import OrthogonalPlan
from rectizarr._stores.base import Buffer
from rectizarr._util import Coords, Shape, default_workers, prod
from rectizarr.chunk_keys import ChunkKeyEncoding
from rectizarr.codecs.array_to_array import TransposeCodec
from rectizarr.codecs.array_to_bytes import BytesCodec
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.bytes_to_bytes import BloscCodec, Crc32cCodec, GzipCodec, ZstdCodec
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.codecs.sharding import ShardIndex, ShardIndexCache, ShardingCodec, is_fill
from rectizarr.errors import CodecError
from rectizarr.grid import ChunkGrid, FixedDim
from rectizarr.indexing import ChunkProjection, Plan
from rectizarr.store import LocalStore, MemoryStore, Store, ZipStore

T = TypeVar("T")
R = TypeVar("R")

# ------------------------------------------------------------------------------------ thread pool

_pool: ThreadPoolExecutor | None = None
_pool_size = default_workers()
_pool_lock = threading.Lock()


def set_workers(n: int) -> None:
    """Set the process-wide number of codec threads (default: the number of usable cores)."""
    global _pool, _pool_size
    with _pool_lock:
        _pool_size = max(1, int(n))
        if _pool is not None:
            _pool.shutdown(wait=False)
            _pool = None


def _reset_after_fork() -> None:  # pragma: no cover - exercised by process-based tests
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()
    _locks.reset()


def pmap(fn: Callable[[T], R], items: Sequence[T], workers: int | None = None) -> list[R]:
    """``map`` over a thread pool when it pays (several items and more than one worker)."""
    n = _pool_size if workers is None else workers
    if n <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_pool_size, thread_name_prefix="rectizarr")
        pool = _pool
    # Batch small items so thread hand-off does not dominate (100,000 tiny chunks).
    per = max(1, len(items) // (4 * n))
    if per == 1:
        return list(pool.map(fn, items))
    batches = [items[i : i + per] for i in range(0, len(items), per)]
    out: list[R] = []
    for part in pool.map(lambda b: [fn(x) for x in b], batches):
        out.extend(part)
    return out


# --------------------------------------------------------------------------------- per-key locks


class _StripedLocks:
    """Locks for read-modify-write of store keys inside this process (no lost writes between threads)."""

    def __init__(self, n: int = 256) -> None:
        self.n = n
        self.reset()

    def reset(self) -> None:
        self._locks = [threading.Lock() for _ in range(self.n)]

    def hold(self, store: Store, keys: Iterable[str]) -> _Held:
        base = _lock_base(store)
        stripes = sorted({hash(base + k) % self.n for k in keys})
        return _Held([self._locks[s] for s in stripes])


def _lock_base(store: Store) -> str:
    """What the keys of ``store`` are relative to: two store objects on one directory (or fsspec path)
    share their locks, so separately opened arrays on the same data do not lose each other's writes."""
    inner = getattr(store, "inner", store)
    if isinstance(inner, LocalStore):  # a store on a subdirectory shares the locks of the parent's
        return f"local:{inner._real_root}/"
    base, fs = getattr(inner, "_base", None), getattr(inner, "fs", None)
    if isinstance(base, str) and fs is not None:
        return f"fsspec:{type(fs).__name__}:{base}"
    return f"id:{id(getattr(inner, '_data', inner))}:"


class _Held:
    def __init__(self, locks: list[threading.Lock]) -> None:
        self.locks = locks

    def __enter__(self) -> None:
        for lock in self.locks:
            lock.acquire()

    def __exit__(self, *exc: object) -> None:
        for lock in reversed(self.locks):
            lock.release()


_locks = _StripedLocks()
_index_cache = ShardIndexCache()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def index_cache() -> ShardIndexCache:
    """The process-wide cache of decoded shard indexes."""
    return _index_cache


# ------------------------------------------------------------------------------------------ layout


@dataclass(frozen=True)
class Layout:
    """Everything needed to move chunk data between a store and numpy arrays."""

    store: Store
    prefix: str  # node path + "/" ("" for the root)
    grid: ChunkGrid
    key_encoding: ChunkKeyEncoding
    pipeline: CodecPipeline
    dtype: np.dtype
    fill_value: np.ndarray
    write_empty_chunks: bool = False
    workers: int | None = None
    # Derived for the sharded layout:
    sharding: ShardingCodec | None = field(default=None)
    inner_shape: Shape | None = None  # inner chunk shape in ARRAY axis order
    perm: tuple[int, ...] | None = None  # transposed axis i = array axis perm[i]

    @classmethod
    def build(cls, store: Store, prefix: str, grid: ChunkGrid, key_encoding: ChunkKeyEncoding,
              pipeline: CodecPipeline, dtype: np.dtype, fill_value: np.ndarray, *,
              write_empty_chunks: bool = False, workers: int | None = None) -> Layout:
        sharding, inner_shape, perm = _partial_sharding(pipeline, grid.ndim)
        return cls(store, prefix, grid, key_encoding, pipeline, dtype, fill_value, write_empty_chunks,
                   workers, sharding, inner_shape, perm)

    @property
    def dims(self) -> tuple[Any, ...]:
        """The grid selections are planned over: inner chunks when sharded, else the chunk grid."""
        if self.inner_shape is None:
            return self.grid.dims
        return tuple(FixedDim(c, d.extent) for c, d in zip(self.inner_shape, self.grid.dims, strict=True))

    def key(self, coords: Coords) -> str:
        return self.prefix + self.key_encoding.encode(coords)

    def spec(self, coords: Coords) -> ChunkSpec:
        return ChunkSpec(self.grid.chunk_shape(coords), self.dtype, self.fill_value, self.key(coords))


def _partial_sharding(pipeline: CodecPipeline, ndim: int) -> tuple[ShardingCodec | None, Shape | None,
                                                                  tuple[int, ...] | None]:
    sharding = pipeline.sharding
    if sharding is None:
        return None, None, None
    perm = list(range(ndim))
    for codec in pipeline.array_array:
        if not isinstance(codec, TransposeCodec):
            return None, None, None
        perm = [perm[o] for o in codec.order]
    inner = [0] * ndim
    for t_axis, a_axis in enumerate(perm):
        inner[a_axis] = sharding.chunk_shape[t_axis]
    return sharding, tuple(inner), tuple(perm)


# -------------------------------------------------------------------------------------- chunked I/O


def _paste(out: np.ndarray, plan: Plan, p: ChunkProjection, src: np.ndarray | None, fill: np.ndarray) -> None:
    if plan.kind == "coordinate":
        flat = out.reshape(-1)
        flat[p.out_sel] = fill if src is None else src[p.chunk_sel]
    else:
        out[p.out_sel] = fill if src is None else src[p.chunk_sel]


def _take(value: np.ndarray, plan: Plan, p: ChunkProjection) -> np.ndarray:
    if plan.kind == "coordinate":
        return value.reshape(-1)[p.out_sel]
    return value[p.out_sel]


def _put(chunk: np.ndarray, plan: Plan, p: ChunkProjection, data: np.ndarray) -> None:
    chunk[p.chunk_sel] = data


def read(layout: Layout, plan: Plan, out: np.ndarray) -> None:
    """Fill ``out`` (shape ``plan.shape``) with the selected data."""
    sparse = _stored_projections(layout, plan) if plan.nchunks >= _SPARSE_MIN else None
    if sparse is not None:  # few chunks stored: fill first, then visit only the stored ones
        out[...] = layout.fill_value
        projections = sparse
    else:
        projections = list(plan)
    if not projections:
        return
    if layout.sharding is not None:
        _read_sharded(layout, plan, projections, out)
        return
    coords = plan.chunk_coords if sparse is None else _coords_of(projections, layout.grid.ndim)
    keys = _chunk_keys(layout, coords)
    specs = _chunk_specs(layout, coords)
    pipeline, fill = layout.pipeline, layout.fill_value
    into = _can_decode_into(pipeline, layout.dtype)

    def work(i: int, value: bytes | None) -> None:
        p = projections[i]
        if value is None:
            _paste(out, plan, p, None, fill)
        elif not (into and _decode_in_place(out, plan, p, pipeline, value, specs[i], fill)):
            _paste(out, plan, p, _decode(pipeline, value, specs[i], keys[i]), fill)

    n = len(projections)
    if _streams(layout.store):  # read, decode and paste chunk by chunk in the workers: memory stays flat
        batch = layout.store._get_batch  # keys made by the key encoding need no validation
        pmap(lambda i: work(i, batch([(keys[i], None)])[0]), range(n),  # type: ignore[arg-type]
             _workers_for(layout, pipeline, specs[0]))
        return
    step = max(1, _WINDOW_BYTES // max(1, specs[0].nbytes))  # a bounded window of values in memory
    for start in range(0, n, step):
        stop = min(n, start + step)
        values = layout.store.get_many([(k, None) for k in keys[start:stop]])
        pmap(lambda i, start=start, values=values: work(i, values[i - start]),  # type: ignore[misc]
             range(start, stop), layout.workers)  # type: ignore[arg-type]


_WINDOW_BYTES = 64 << 20  # decoded bytes of the chunks a read fetches at once from a remote store
_THREADED_BYTES = 256 << 10  # decoded chunk size from which threads pay (64 KiB with a compressor)


def _workers_for(layout: Layout, pipeline: CodecPipeline, spec: ChunkSpec) -> int | None:
    """Threads for per-chunk work on local data: one for small chunks, whose work is mostly Python
    holding the GIL (two threads would only hand it back and forth), else the layout's setting."""
    threshold = _THREADED_BYTES // 4 if pipeline.bytes_bytes else _THREADED_BYTES
    return layout.workers if spec.nbytes >= threshold else 1


def _streams(store: Store) -> bool:
    """Local files and memory are read chunk by chunk inside the workers (a read costs no round trip);
    other stores get batched requests, which they run concurrently and coalesce."""
    return isinstance(getattr(store, "inner", store), LocalStore | MemoryStore)


def _coords_of(projections: Sequence[ChunkProjection], ndim: int) -> np.ndarray:
    return np.array([p.coords for p in projections], dtype=np.int64).reshape(len(projections), ndim)


def _chunk_keys(layout: Layout, coords: np.ndarray) -> list[str]:
    """The store keys of the chunks at the rows of ``coords`` (one vectorised encoding)."""
    keys = layout.key_encoding.encode_many(coords)
    return [layout.prefix + k for k in keys] if layout.prefix else keys


def _chunk_specs(layout: Layout, coords: np.ndarray) -> list[ChunkSpec]:
    """The spec of each chunk at the rows of ``coords``, one shared object per distinct shape and no key
    (:func:`_decode` names the key when decoding fails)."""
    n = coords.shape[0]
    dims = layout.grid.dims
    shapes = zip(*[d.edges_of(coords[:, i]).tolist() for i, d in enumerate(dims)], strict=True) if dims else [()] * n
    cache: dict[Shape, ChunkSpec] = {}
    out = []
    for shape in shapes:
        spec = cache.get(shape)
        if spec is None:
            spec = cache[shape] = ChunkSpec(shape, layout.dtype, layout.fill_value)
        out.append(spec)
    return out


_SCRATCH_MAX = 16 << 20  # largest chunk decoded through a per-thread scratch buffer
_PIECEWISE_BYTES = 64 << 10  # decoded inner chunk size from which local shards are read chunk by chunk
_scratch = threading.local()


def _can_decode_into(pipeline: CodecPipeline, dtype: np.dtype) -> bool:
    """Whether chunks may decode into a given buffer (one compressor then ``bytes``, fixed-size data, see
    :meth:`CodecPipeline.decode_into`): checked once per read, so other chains pay nothing per chunk."""
    return (len(pipeline.bytes_bytes) == 1 and not pipeline.array_array and not dtype.hasobject
            and isinstance(pipeline.array_bytes, BytesCodec))


def _whole(sel: tuple[Any, ...], shape: Shape) -> bool:
    """True when ``sel`` is ``0:n0, 0:n1, ...`` for ``shape``: the whole chunk, in order."""
    return len(sel) == len(shape) and all(
        isinstance(s, slice) and s.start == 0 and s.stop == n and s.step == 1 for s, n in zip(sel, shape, strict=True))


def _decode_in_place(out: np.ndarray, plan: Plan, p: ChunkProjection, pipeline: CodecPipeline,
                     value: bytes | memoryview, spec: ChunkSpec, fill: np.ndarray) -> bool:
    """Decode a chunk with no temporary array: straight into ``out`` when the whole chunk is a
    C-contiguous block of it, else into a per-thread scratch chunk (reused, so no fresh memory per chunk)
    pasted from. False when the codecs cannot (the caller then decodes the usual way)."""
    if plan.kind == "orthogonal" and _whole(p.chunk_sel, spec.shape) \
            and all(isinstance(s, slice) for s in p.out_sel):
        region = out[(*p.out_sel, Ellipsis)]  # with the Ellipsis, a view even of a 0-d array
        if region.shape == spec.shape and region.flags.c_contiguous and np.may_share_memory(region, out):
            return pipeline.decode_into(value, spec, region)
    if spec.nbytes > _SCRATCH_MAX:
        return False
    buf: np.ndarray | None = getattr(_scratch, "buf", None)
    if buf is None or buf.nbytes < spec.nbytes:
        buf = _scratch.buf = np.empty(spec.nbytes, np.uint8)
    chunk = buf[: spec.nbytes].view(spec.dtype).reshape(spec.shape)
    if not pipeline.decode_into(value, spec, chunk):
        return False
    _paste(out, plan, p, chunk, fill)
    return True


def _decode(pipeline: CodecPipeline, value: bytes | memoryview, spec: ChunkSpec, key: str) -> np.ndarray:
    try:
        return pipeline.decode(value, spec)
    except Exception:  # decode again with the key in the spec: the same error, naming the key
        return pipeline.decode(value, spec.with_key(key))


_SPARSE_MIN = 4096  # touched chunks from which a read first lists which of them are stored


def _stored_projections(layout: Layout, plan: Plan) -> list[ChunkProjection] | None:
    """The projections of ``plan`` whose chunk (or shard) is stored, found with one listing of the array,
    or ``None`` when that does not pay (more stored chunks than a quarter of the touched ones, a plan
    that is not orthogonal, or a store whose listing may lag or be unavailable)."""
    if not isinstance(plan, OrthogonalPlan) or not isinstance(getattr(layout.store, "inner", layout.store),
                                                               LocalStore | MemoryStore | ZipStore):
        return None
    per_axis = []  # per axis, the stored-grid index of each plan entry (non-decreasing: plans are sorted)
    for axis, a in enumerate(plan.axes):
        chunks = a.chunks
        if layout.inner_shape is not None:
            chunks = layout.grid.dims[axis].chunks_of(chunks * layout.inner_shape[axis])
        per_axis.append(chunks)
    if layout.inner_shape is None:
        if _mostly_stored(layout, plan):  # a dense read: a few existence checks instead of a listing
            return None
        limit = plan.nchunks // 4
    else:  # shards are few next to their inner chunks: compare with the touched shards
        limit = max(1, prod(tuple(int(np.unique(k).size) for k in per_axis)) // 4)
    present: list[Coords] = []
    for _, coords in stored_chunk_keys(layout):
        if len(present) >= limit:
            return None
        present.append(coords)
    combos: list[tuple[int, ...]] = []
    for coords in sorted(present):
        spans = [range(int(np.searchsorted(k, c, "left")), int(np.searchsorted(k, c, "right")))
                 for k, c in zip(per_axis, coords, strict=True)]
        if all(spans):
            combos.extend(product(*spans))
    return list(plan.projections_at(combos))


_PROBES = 16


def _mostly_stored(layout: Layout, plan: Plan) -> bool:
    """True when at least a quarter of a few touched chunks spread over the plan are stored: a dense read,
    for which listing the array (one file per chunk) would not pay."""
    keys = set(_chunk_keys(layout, plan.chunk_coords[np.linspace(0, plan.nchunks - 1, _PROBES).astype(np.int64)]))
    return 4 * sum(layout.store.exists(k) for k in keys) >= len(keys)


def _clear_outside(chunk: np.ndarray, layout: Layout, coords: Coords) -> None:
    """Reset the part of an edge chunk beyond the extent to the current fill value.

    ``coords`` are in the planning grid (``layout.dims``): chunks, or inner chunks when sharded.
    """
    for axis, d in enumerate(layout.dims):
        n = d.data_len(coords[axis])
        if n < chunk.shape[axis]:
            idx: list[slice] = [slice(None)] * chunk.ndim
            idx[axis] = slice(n, None)
            chunk[tuple(idx)] = layout.fill_value


def write(layout: Layout, plan: Plan, value: np.ndarray) -> None:
    """Write ``value`` (shape ``plan.shape``) into the selection."""
    projections = list(plan)
    if not projections:
        return
    if layout.sharding is not None:
        _write_sharded(layout, plan, projections, value)
        return
    by_key: dict[str, list[ChunkProjection]] = defaultdict(list)
    for p in projections:
        by_key[layout.key(p.coords)].append(p)
    keys = list(by_key)
    with _locks.hold(layout.store, keys):
        partial = [k for k in keys if not all(p.complete for p in by_key[k])]
        old = dict(zip(partial, layout.store.get_many([(k, None) for k in partial]), strict=True))

        def work(key: str) -> tuple[str, bytes | None]:
            group = by_key[key]
            coords = group[0].coords
            spec = layout.spec(coords)
            stored = old.get(key)
            if stored is None and _replaces(plan, group, spec.shape):
                chunk = value[(*group[0].out_sel, Ellipsis)]  # the caller's data as it is (0-d: a view too)
            else:
                if stored is None:
                    chunk = spec.fill_chunk()
                else:
                    chunk = np.array(layout.pipeline.decode(stored, spec), copy=True)
                    _clear_outside(chunk, layout, coords)
                for p in group:
                    _put(chunk, plan, p, _take(value, plan, p))
            if not layout.write_empty_chunks and is_fill(chunk, layout.fill_value):
                return key, None
            return key, layout.pipeline.encode(chunk, spec)

        workers = _workers_for(layout, layout.pipeline, layout.spec(by_key[keys[0]][0].coords))
        _encode_and_commit(layout, keys, work, {k for k in partial if old[k] is None}, workers)


def _replaces(plan: Plan, group: list[ChunkProjection], shape: Shape) -> bool:
    """True when one orthogonal projection covers the whole chunk in order (``chunk[0:n0, 0:n1, ...]``):
    the selected data then is the new chunk as it is, with no chunk to fill and copy into."""
    return plan.kind == "orthogonal" and len(group) == 1 and _whole(group[0].chunk_sel, shape)


def _encode_and_commit(layout: Layout, items: Sequence[T], work: Callable[[T], tuple[str, Buffer | None]],
                       known_absent: set[str], workers: int | None) -> None:
    """Encode with ``work`` (item -> key and value, ``None`` for an empty chunk) on the workers and store
    the results. Local data whose encoding cannot fail is written batch by batch in the workers as it is
    encoded (writes overlap encoding; memory stays flat); otherwise everything is encoded first and
    written at once, so an encoding error writes nothing."""
    if not (_streams(layout.store) and _cannot_fail(layout.pipeline, layout.dtype)):
        _commit(layout.store, pmap(work, items, workers), known_absent)
        return
    n_threads = _pool_size if workers is None else workers
    per = max(1, -(-len(items) // (4 * n_threads)))

    def run(batch: Sequence[T]) -> list[str]:
        results = [work(item) for item in batch]
        to_set = {k: v for k, v in results if v is not None}
        if to_set:
            layout.store.set_many(to_set)
        for k in to_set:
            _index_cache.invalidate(_cache_key(layout.store, k))
        return [k for k, v in results if v is None]

    empty = [k for part in pmap(run, [items[i : i + per] for i in range(0, len(items), per)], workers)
             for k in part]
    _commit(layout.store, [(k, None) for k in empty], known_absent)


_SAFE_CODECS = (BytesCodec, TransposeCodec, ZstdCodec, BloscCodec, GzipCodec, Crc32cCodec)


def _cannot_fail(pipeline: CodecPipeline, dtype: np.dtype) -> bool:
    """True when encoding valid chunks of ``dtype`` cannot fail: fixed-size data and built-in codecs."""
    if dtype.hasobject:
        return False
    for codec in (*pipeline.array_array, pipeline.array_bytes, *pipeline.bytes_bytes):
        if isinstance(codec, ShardingCodec):
            if not (_cannot_fail(codec.codecs, dtype) and _cannot_fail(codec.index_codecs, np.dtype(np.uint64))):
                return False
        elif not isinstance(codec, _SAFE_CODECS):
            return False
    return True


def _commit(store: Store, results: Iterable[tuple[str, Buffer | None]], known_absent: set[str] = frozenset()) -> None:  # type: ignore[assignment]
    to_set = {k: v for k, v in results if v is not None}
    to_delete = [k for k, v in results if v is None and k not in known_absent]
    if to_set:
        store.set_many(to_set)
    if to_delete:
        store.delete_many(to_delete)
    for k in (*to_set, *to_delete):
        _index_cache.invalidate(_cache_key(store, k))


# -------------------------------------------------------------------------------------- sharded I/O


@dataclass
class _Shard:
    coords: Coords  # outer grid coords
    key: str
    shape_t: Shape  # declared shard shape in the transposed (codec) space
    projections: list[tuple[Coords, ChunkProjection]]  # (inner coords in transposed space, projection)


def _group_by_shard(layout: Layout, projections: list[ChunkProjection]) -> list[_Shard]:
    assert layout.inner_shape is not None and layout.perm is not None
    inner = np.array([p.coords for p in projections], dtype=np.int64).reshape(len(projections), -1)
    starts = inner * np.asarray(layout.inner_shape, dtype=np.int64)
    shard_coords = np.empty_like(inner)
    local = np.empty_like(inner)
    for axis, d in enumerate(layout.grid.dims):
        along = d.chunks_of(starts[:, axis])
        shard_coords[:, axis] = along
        local[:, axis] = (starts[:, axis] - d.offsets_of(along)) // layout.inner_shape[axis]
    perm = list(layout.perm)
    shards: dict[Coords, _Shard] = {}
    local = local[:, perm]
    for start in range(0, len(projections), 4096):  # rows as Python ints, a block at a time
        stop = start + 4096
        for p, row, local_row in zip(projections[start:stop], shard_coords[start:stop].tolist(),
                                     local[start:stop].tolist(), strict=True):
            sc: Coords = tuple(row)
            shard = shards.get(sc)
            if shard is None:
                declared = layout.grid.chunk_shape(sc)
                shard = _Shard(sc, layout.key(sc), tuple(declared[a] for a in perm), [])
                shards[sc] = shard
            shard.projections.append((tuple(local_row), p))
    return list(shards.values())


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


def _cache_key(store: Store, key: str) -> str:
    """Index-cache key: the store's identity (shared by its read-only views) plus the store key."""
    token = getattr(store, "_rectizarr_token", None)
    if token is None:
        token = uuid.uuid4().hex
        store._rectizarr_token = token  # type: ignore[attr-defined]
    return f"{token}\x00{key}"


def _cheap_versions(store: Store) -> bool:
    """Local files and memory can say cheaply whether a value changed (size/mtime/inode, write counter);
    elsewhere (S3, HTTP, zip) a version check would cost a request, so only our own writes invalidate."""
    return isinstance(getattr(store, "inner", store), LocalStore | MemoryStore)


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


def _read_sharded(layout: Layout, plan: Plan, projections: list[ChunkProjection], out: np.ndarray) -> None:
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

    def whole_shard(s: _Shard, value: bytes | None) -> None:
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
    n_threads = _pool_size if layout.workers is None else layout.workers
    if whole and _streams(layout.store) and (workers == 1 or len(whole) >= 2 * n_threads):
        # Shard by shard in the workers (read, split, decode, paste): at most one shard per worker in memory.
        batch = layout.store._get_batch
        pmap(lambda s: whole_shard(s, batch([(s.key, None)])[0]), whole, workers)
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

        def checked(s: _Shard, r: tuple[int, int], data: bytes | None) -> bytes:
            if data is None or len(data) != r[1]:
                raise CodecError("shard is shorter than its index says (truncated or rewritten)",
                                 key=s.key, codec="sharding_indexed")
            return data

        def fetch(shards: list[_Shard]) -> Iterator[tuple[_Shard, ChunkProjection, bytes | None]]:
            wanted = wanted_of(shards)
            fetched = iter(layout.store.get_many([(s.key, r) for s, _, r in wanted if r is not None]))
            for s, p, r in wanted:
                yield s, p, None if r is None else checked(s, r, next(fetched))

        def shard_task(s: _Shard) -> None:
            for job in fetch([s]):
                paste(*job)

        def inner_task(job: tuple[_Shard, ChunkProjection, tuple[int, int] | None]) -> None:
            s, p, r = job  # a range from a validated index: no coalescing into large reads
            paste(s, p, None if r is None else checked(s, r, layout.store._get_batch([(s.key, r)])[0]))

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


def _write_sharded(layout: Layout, plan: Plan, projections: list[ChunkProjection], value: np.ndarray) -> None:
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


def stored_chunk_keys(layout: Layout) -> Iterator[tuple[str, Coords]]:
    """Every stored chunk key of the array that lies inside the grid, with its coords."""
    grid_shape = layout.grid.grid_shape
    for key in layout.store.list_prefix(layout.prefix):
        rel = key[len(layout.prefix):]
        if rel == "zarr.json" or "/zarr.json" in rel:
            continue
        coords = layout.key_encoding.decode(rel, len(grid_shape))
        if coords is None or len(coords) != len(grid_shape):
            continue
        if all(0 <= c < n for c, n in zip(coords, grid_shape, strict=True)):
            yield key, coords


def delete_outside(layout: Layout, new_grid: ChunkGrid) -> None:
    """After a shrink: delete chunks wholly outside ``new_grid`` and clear the straddling chunks' tails.

    Clearing means a later grow shows the fill value instead of stale data (a deliberate difference from
    zarr-python and tensorstore, which keep the old values).
    """
    old_grid = layout.grid
    doomed: list[str] = []
    straddling: list[Coords] = []
    new_shape = new_grid.grid_shape
    for key, coords in stored_chunk_keys(layout):
        if not all(c < n for c, n in zip(coords, new_shape, strict=True)):
            doomed.append(key)
            continue
        region = old_grid.chunk_region(coords)
        if any(r.stop > e for r, e in zip(region, new_grid.shape, strict=True)):
            straddling.append(coords)
    if doomed:
        layout.store.delete_many(doomed)
        for k in doomed:
            _index_cache.invalidate(_cache_key(layout.store, k))
    if not straddling:
        return
    from rectizarr.indexing import orthogonal_plan  # local: only needed after a shrink

    for coords in straddling:
        region = old_grid.chunk_region(coords)
        clipped = tuple(slice(r.start, min(r.stop, e)) for r, e in zip(region, new_grid.shape, strict=True))
        # Re-write the in-bounds part of the chunk under the new extent: the write path resets
        # everything beyond the extent to the fill value.
        new_layout = Layout.build(layout.store, layout.prefix, new_grid, layout.key_encoding, layout.pipeline,
                                  layout.dtype, layout.fill_value, write_empty_chunks=layout.write_empty_chunks,
                                  workers=layout.workers)
        if any(s.stop <= s.start for s in clipped):
            continue
        rplan = orthogonal_plan(layout.dims, clipped)
        data = np.empty(rplan.shape, layout.dtype)
        read(layout, rplan, data)
        wplan = orthogonal_plan(new_layout.dims, clipped)
        _rewrite_full(new_layout, wplan, data)


def _rewrite_full(layout: Layout, plan: Plan, value: np.ndarray) -> None:
    """Write treating every touched chunk as incomplete-but-replaced: old data outside the plan is dropped."""
    forced = _ForcedComplete(plan)
    write(layout, forced, value)  # type: ignore[arg-type]


class _ForcedComplete:
    """A plan whose projections all claim to be complete (the chunk is rebuilt from fill + data)."""

    def __init__(self, plan: Plan) -> None:
        self._plan = plan
        self.kind = plan.kind
        self.shape = plan.shape

    def __iter__(self) -> Iterator[ChunkProjection]:
        for p in self._plan:
            yield ChunkProjection(p.coords, p.chunk_sel, p.out_sel, True)


def nbytes_stored(layout: Layout) -> tuple[int, int]:
    """(number of stored chunks, their total size in bytes)."""
    n = total = 0
    for key, _ in stored_chunk_keys(layout):
        n += 1
        total += layout.store.getsize(key) or 0
    return n, total


def chunk_count(grid: ChunkGrid) -> int:
    return prod(grid.grid_shape)
