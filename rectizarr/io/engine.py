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

import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import product
from typing import Any, TypeVar

import numpy as np

from rectizarr._util import Coords, Shape, prod
from rectizarr.codecs.array_to_array import TransposeCodec
from rectizarr.codecs.array_to_bytes import BytesCodec
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.bytes_to_bytes import BloscCodec, Crc32cCodec, GzipCodec, ZstdCodec
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.codecs.sharding import ShardIndexCache, ShardingCodec, is_fill
from rectizarr.core.chunk_keys import ChunkKeyEncoding
from rectizarr.core.grid import ChunkGrid, FixedDim
from rectizarr.indexing import ChunkProjection, Plan
from rectizarr.indexing.plan import OrthogonalPlan
from rectizarr.io.pool import _locks, pmap, pool_size
from rectizarr.stores import LocalStore, MemoryStore, Store, ZipStore
from rectizarr.stores.base import Buffer

T = TypeVar("T")

_index_cache = ShardIndexCache()


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

    @cached_property
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
    if sparse is None and _read_slabs(layout, plan, out):
        return
    if sparse is not None:  # few chunks stored: fill first, then visit only the stored ones
        out[...] = layout.fill_value
        projections = sparse
    else:
        projections = list(plan)
    if not projections:
        return
    if layout.sharding is not None:
        from rectizarr.io.sharded import read_sharded

        read_sharded(layout, plan, projections, out)
        return
    coords = plan.chunk_coords if sparse is None else _coords_of(projections, layout.grid.ndim)
    keys = _chunk_keys(layout, coords)
    specs = _chunk_specs(layout, coords)
    pipeline, fill = layout.pipeline, layout.fill_value
    into = _can_decode_into(pipeline, layout.dtype)
    raw = _is_raw(pipeline, layout.dtype)

    def work(i: int, value: bytes | memoryview | None) -> None:
        p, spec = projections[i], specs[i]
        if value is None:
            _paste(out, plan, p, None, fill)
        elif raw and len(value) == spec.nbytes:  # stored as the chunk's own bytes: a view, pasted from
            _paste(out, plan, p, np.frombuffer(value, spec.dtype).reshape(spec.shape), fill)
        elif not (into and _decode_in_place(out, plan, p, pipeline, value, spec, fill)):
            _paste(out, plan, p, _decode(pipeline, value, spec, keys[i]), fill)

    n = len(projections)
    if _streams(layout.store):  # read, decode and paste chunk by chunk in the workers: memory stays flat
        get = layout.store._get_transient  # keys made by the key encoding need no validation
        # raw chunks: the stored size is known (no fstat per file)
        pmap(lambda i: work(i, get(keys[i], None, specs[i].nbytes if raw else None)), range(n),  # type: ignore[arg-type]
             _workers_for(layout, pipeline, specs[0]))
        return
    step = max(1, _WINDOW_BYTES // max(1, specs[0].nbytes))  # a bounded window of values in memory
    for start in range(0, n, step):
        stop = min(n, start + step)
        values = layout.store.get_many([(k, None) for k in keys[start:stop]])
        pmap(lambda i, start=start, values=values: work(i, values[i - start]),  # type: ignore[misc]
             range(start, stop), layout.workers)  # type: ignore[arg-type]


_SLAB_MIN = 64  # small raw chunks from which a dense local read goes slab by slab (engine_raw)


def _read_slabs(layout: Layout, plan: Plan, out: np.ndarray) -> bool:
    """A dense block of many small raw chunks of a local directory, slab by slab (:mod:`_engine_raw`);
    False when the read is not one."""
    if layout.sharding is not None or plan.nchunks < _SLAB_MIN or not isinstance(plan, OrthogonalPlan) \
            or not _is_raw(layout.pipeline, layout.dtype) or not _streams(layout.store):
        return False
    coords = plan.chunk_coords
    spec = layout.spec(tuple(int(c) for c in coords[0]))
    if _workers_for(layout, layout.pipeline, spec) != 1:  # large chunks: the threaded general way
        return False
    from rectizarr.io.slabs import read_raw_slabs

    keys = _chunk_keys(layout, coords)

    def reread(i: int) -> np.ndarray | None:
        value = layout.store.get(keys[i])
        return None if value is None else _decode(layout.pipeline, value, spec, keys[i])

    return read_raw_slabs(layout, plan, out, keys, spec.with_key(None), reread)


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


def _is_raw(pipeline: CodecPipeline, dtype: np.dtype) -> bool:
    """Whether chunks are stored as their own bytes in native order (only the ``bytes`` codec)."""
    return (not pipeline.array_array and not pipeline.bytes_bytes and not dtype.hasobject
            and isinstance(pipeline.array_bytes, BytesCodec) and pipeline.array_bytes._wire(dtype) == dtype)


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
    prefix = _prefix_bytes(plan, p, spec) if spec.nbytes >= _PREFIX_MIN else None
    if not pipeline.decode_into(value, spec, chunk, prefix):
        return False
    _paste(out, plan, p, chunk, fill)
    return True


_PREFIX_MIN = 64 << 10  # decoded chunk size from which a read that needs only its start may stop there
_PREFIX_MAX = 0.85  # ... when it needs at most this fraction (beyond, a whole decode costs no more)


def _prefix_bytes(plan: Plan, p: ChunkProjection, spec: ChunkSpec) -> int | None:
    """The leading bytes of the C-order chunk that hold every element ``p`` takes from it, when that is at
    most :data:`_PREFIX_MAX` of the chunk; else None."""
    shape = spec.shape
    if plan.kind == "coordinate":
        last = int(np.ravel_multi_index(p.chunk_sel, shape).max())  # type: ignore[arg-type]
    else:  # orthogonal: every combination is taken, so the last element is at each axis's largest index
        last, stride = 0, 1
        for sel, n in zip(reversed(p.chunk_sel), reversed(shape), strict=True):
            if isinstance(sel, slice):
                r = range(*sel.indices(n))
                if not r:
                    return None
                top = max(r[0], r[-1])
            elif sel.size:
                top = int(np.max(sel))
            else:
                return None
            last += top * stride
            stride *= n
    needed = (last + 1) * spec.dtype.itemsize
    return needed if needed <= _PREFIX_MAX * spec.nbytes else None


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
        from rectizarr.io.sharded import write_sharded

        write_sharded(layout, plan, projections, value)
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
    n_threads = pool_size() if workers is None else workers
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
