"""Dense reads of many small chunks of a local store, slab by slab: each slab (the touched chunks sharing
a first-axis index) staged in one buffer, then pasted with two NumPy copies (no projection per chunk).
Raw chunk files are read straight into their place in the staging buffer (no bytes object or decode; a
chunk of another stored size goes the general way); coded chunks are read and decoded with one batch call
per slab (:mod:`.batch`). Only for a step-1 block of a regular grid."""

from __future__ import annotations

import threading
from functools import partial

import numpy as np

from rectizarr._util import prod
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.batch import Frames
from rectizarr.core.grid import FixedDim
from rectizarr.indexing import OrthogonalPlan, Plan
from rectizarr.io.batch import batchable, decode_rows, decode_values, stage
from rectizarr.io.chunk import decode
from rectizarr.io.layout import ChunkedLayout
from rectizarr.io.pool import on_worker, pmap, workers_for
from rectizarr.tuning import Tuning

__all__ = ["read_slabs"]


def read_slabs(layout: ChunkedLayout, plan: Plan, out: np.ndarray, t: Tuning) -> bool:
    """Fill ``out`` slab by slab when the read is a dense step-1 block of at least ``t.slab_min_chunks``
    small chunks (raw, or coded below ``t.slab_coded_bytes``) of a regular grid, from a store that reads
    straight into buffers; False (nothing read) when it is not such a read."""
    caps, raw = layout.store.capabilities, layout.pipeline.is_raw(layout.dtype)
    if plan.nchunks < t.slab_min_chunks or not isinstance(plan, OrthogonalPlan) \
            or not (caps.native_read_into if raw else caps.low_latency and batchable(layout.dtype)):
        return False
    coords = plan.chunk_coords
    spec = layout.spec(tuple(int(c) for c in coords[0])).with_key(None)
    if (workers_for(layout.workers, False, spec.nbytes, t) != 1) if raw else spec.nbytes >= t.slab_coded_bytes:
        return False  # large chunks: the threaded general way
    dims = layout.grid.dims
    if not dims or not all(isinstance(d, FixedDim) for d in dims):
        return False
    starts = _block_starts(plan, dims)  # type: ignore[arg-type]
    if starts is None:
        return False
    counts = [int(a.chunks.size) for a in plan.axes]
    if prod(tuple(counts[1:])) * spec.nbytes > t.slab_max_bytes:
        return False
    _read_block(layout, plan, out, layout.keys(coords), spec, starts, counts)
    return True


def _block_starts(plan: OrthogonalPlan, dims: list[FixedDim]) -> list[int] | None:
    """Per axis, where the selection starts inside its first touched chunk; None unless the selection is
    a step-1 block (later axes with no gaps, since their chunks are pasted whole)."""
    starts = []
    for axis, (a, d) in enumerate(zip(plan.axes, dims, strict=True)):
        expect, at = 0, None  # next output position; where the previous entry ended in the array
        for e in a.entries:
            if not (isinstance(e.local, slice) and e.local.step == 1 and isinstance(e.out, slice)
                    and e.out.step == 1 and e.out.start == expect):
                return None
            begin = e.chunk * d.size + e.local.start
            if axis and at is not None and begin != at:
                return None
            expect, at = e.out.stop, e.chunk * d.size + e.local.stop
        first = a.entries[0].local
        assert isinstance(first, slice)
        starts.append(first.start)
    return starts


def _read_block(layout: ChunkedLayout, plan: OrthogonalPlan, out: np.ndarray, keys: list[str], spec: ChunkSpec,
                starts: list[int], counts: list[int]) -> None:
    """Each slab (the touched chunks sharing a first-axis index): its chunks staged, then pasted with two
    NumPy copies. Raw files are read into the staging buffer in one thread (a chunk of another stored size
    goes the general way, which reports it, or finds it rewritten meanwhile); coded slabs are read and
    batch-decoded on the workers, each with its own staging buffers."""
    per_slab, inner, nd = prod(tuple(counts[1:])), spec.shape, len(spec.shape)
    # staging axes (n1.., c0, c1..) -> image axes (c0, n1, c1, n2, c2, ...)
    order = [nd - 1] + [i for a in range(1, nd) for i in (a - 1, nd - 1 + a)]
    image_shape = tuple([inner[0]] + [n * c for n, c in zip(counts[1:], inner[1:], strict=True)])
    split_shape = [inner[0]] + [x for n, c in zip(counts[1:], inner[1:], strict=True) for x in (n, c)]
    sel_rest = tuple(slice(s, s + a.length) for s, a in zip(starts[1:], plan.axes[1:], strict=True))
    raw, native = layout.pipeline.is_raw(spec.dtype), layout.store.capabilities.native_read_into
    get = partial(layout.store.get_transient, byte_range=None)
    entries = plan.axes[0].entries

    def one(j0: int) -> None:
        flat = stage(per_slab, inner, spec.dtype)
        base, e0 = j0 * per_slab, entries[j0]
        slab = keys[base : base + per_slab]
        if raw:
            _read_raw(layout, slab, flat, spec)
        elif native:
            _read_coded(layout, slab, flat, spec, files)
        else:
            decode_values(layout.pipeline, get, slab, spec, flat, layout.fill_value, 1)
        image = stage(1, image_shape, spec.dtype, "image")[0]
        image.reshape(split_shape)[...] = flat.reshape(*counts[1:], *inner).transpose(order)
        assert isinstance(e0.local, slice) and isinstance(e0.out, slice)
        out[(e0.out, *(slice(None),) * (nd - 1))] = image[(e0.local, *sel_rest)]

    # Reading many small files is system calls, each handing the GIL over: two threads reading at once pass
    # it back and forth, which costs more than a second thread gains. So files are read by one thread at a
    # time (``files``), and a second thread pays only while the other decodes a batch without the GIL.
    files = threading.Lock()
    workers = layout.workers if not native or layout.pipeline.batch_releases_gil(spec.dtype) else 1
    if raw:
        pmap(one, range(len(entries)), 1)
    elif workers == 1:  # on a worker thread (see on_worker)
        on_worker(lambda: pmap(one, range(len(entries)), 1))
    else:
        pmap(one, range(len(entries)), workers)


def _read_raw(layout: ChunkedLayout, keys: list[str], flat: np.ndarray, spec: ChunkSpec) -> None:
    """The raw chunk files of ``keys`` read straight into the rows of ``flat``."""
    views = [memoryview(row) for row in flat.reshape(len(keys), -1).view(np.uint8)]
    for j, n in enumerate(layout.store.read_into(keys, views)):
        if n != spec.nbytes:
            value = None if n < 0 else layout.store.get(keys[j])
            chunk = None if value is None else decode(layout.pipeline, value, spec, keys[j])
            flat[j] = layout.fill_value if chunk is None else chunk


def _read_coded(layout: ChunkedLayout, keys: list[str], flat: np.ndarray, spec: ChunkSpec,
                files: threading.Lock) -> None:
    """The coded chunk files of ``keys`` read into slots of this thread's staging buffer (one ``readv``
    each, no ``fstat``: a slot holds any value up to a little over the decoded size) and decoded into the
    rows of ``flat`` with one batch call; a larger value is read and decoded on its own."""
    cap = spec.nbytes + spec.nbytes // 16 + 64  # above every codec's bound for data that does not shrink
    slots = stage(len(keys), (cap,), np.dtype(np.uint8), "coded")
    whole = memoryview(slots.reshape(-1))
    with files:
        got = layout.store.read_into(keys, [whole[i * cap : (i + 1) * cap] for i in range(len(keys))])
    sizes = np.asarray(got, dtype=np.int64)
    rows = np.flatnonzero((sizes >= 0) & (sizes <= cap))
    if rows.size < len(keys):
        flat[sizes < 0] = layout.fill_value
        for j in np.flatnonzero(sizes > cap).tolist():
            value = layout.store.get(keys[j])
            chunk = None if value is None else decode(layout.pipeline, value, spec, keys[j])
            flat[j] = layout.fill_value if chunk is None else chunk
    frames = Frames(whole, rows.astype(np.uint64) * np.uint64(cap), sizes[rows].astype(np.uint64))
    decode_rows(layout.pipeline, frames, rows, spec, flat, lambda i: keys[int(rows[i])], 1)
