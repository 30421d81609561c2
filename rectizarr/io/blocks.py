"""Dense reads of many small chunks of a local store, batch by batch, with no step per chunk in Python
beyond naming and opening its file. A step-1 block of a regular grid (every axis an integer or a step-1
slice: :attr:`AxisPlan.span`) is cut into batches: boxes of whole chunks that span the block's chunks
along every axis after a *split axis*, and ``m`` of them along it, so that a batch holds about
``t.batch_bytes`` decoded (whatever the rank). A batch's chunks are consecutive in the C order of their
coords, so its keys are a slice of the block's. Each batch:

1. rows: where its chunks are a contiguous run of the output in that order (a 1-D array; chunks small only
   along the first axis) and inside the selection, the output itself; else this thread's staging array;
2. read: raw chunk files straight into their rows, coded ones into slots of one buffer (one ``readv``
   each), then decoded with one batch call of the codec (zstd: one C call, the GIL released);
3. paste (staged rows only): one strided copy into the output, or two (through an image of the batch)
   for a batch at the border of the selection.

Missing chunks hold the fill value; a value the batch cannot decode is decoded on its own, which names its
key in the error. Memory: each worker holds at most one batch of decoded bytes (its staging array and
image) and one of coded bytes (slots a little larger than the decoded chunk)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

import numpy as np

from rectizarr._util import prod
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.batch import Frames
from rectizarr.core.dims import FixedDim
from rectizarr.indexing import OrthogonalPlan, Plan
from rectizarr.io.batch import batchable, decode_rows, decode_values, paste_block, stage
from rectizarr.io.chunk import decode
from rectizarr.io.layout import ChunkedLayout
from rectizarr.io.pool import on_worker, pmap, workers_for
from rectizarr.tuning import Tuning


@dataclass(frozen=True, slots=True)
class Block:
    """The geometry of a dense block read (see the module): the selection ``[lo, hi)`` per axis, the chunk
    shape, the first touched chunk and how many are touched per axis, the ``split`` axis and ``m``."""

    lo: tuple[int, ...]
    hi: tuple[int, ...]
    chunk: tuple[int, ...]
    first: tuple[int, ...]
    counts: tuple[int, ...]
    split: int
    m: int

    @classmethod
    def of(
        cls, spans: list[tuple[int, int]], chunk: tuple[int, ...], chunk_nbytes: int, batch_bytes: int
    ) -> Block:
        lo, hi = tuple(s for s, _ in spans), tuple(e for _, e in spans)
        first = tuple(s // c for s, c in zip(lo, chunk, strict=True))
        counts = tuple((e - 1) // c - f + 1 for e, c, f in zip(hi, chunk, first, strict=True))
        per = max(1, batch_bytes // max(1, chunk_nbytes))  # chunks per batch
        split, tail = len(counts) - 1, 1
        while split > 0 and tail * counts[split] <= per:  # whole along every axis after the split
            tail *= counts[split]
            split -= 1
        m = max(1, min(counts[split], per // tail))
        return cls(lo, hi, chunk, first, counts, split, m)

    def batches(self) -> Iterator[tuple[int, tuple[int, ...], tuple[int, ...]]]:
        """Each batch: its first chunk's position among the block's (C order) and coords, and its counts."""
        a, counts = self.split, self.counts
        tail = prod(counts[a + 1 :])
        for outer in np.ndindex(*counts[:a]):
            base = int(np.ravel_multi_index(outer, counts[:a]))
            for start in range(0, counts[a], self.m):
                box = (*(1,) * a, min(self.m, counts[a] - start), *counts[a + 1 :])
                offsets = (*outer, start, *(0,) * (len(counts) - a - 1))
                coords = tuple(f + o for f, o in zip(self.first, offsets, strict=True))
                yield (base * counts[a] + start) * tail, coords, box


def read_block(layout: ChunkedLayout, plan: Plan, out: np.ndarray, t: Tuning) -> bool:
    """Fill ``out`` batch by batch when the read is a dense step-1 block of at least
    ``t.block_min_chunks`` small chunks (raw, or coded below ``t.block_coded_bytes``) of a regular grid,
    from a store with no round trip (raw: one that reads straight into buffers); else False (nothing read)."""
    caps, raw = layout.store.capabilities, layout.pipeline.is_raw(layout.dtype)
    if (
        plan.nchunks < t.block_min_chunks
        or not isinstance(plan, OrthogonalPlan)
        or not (caps.native_read_into if raw else caps.low_latency and batchable(layout.dtype))
    ):
        return False
    dims = [d for d in layout.grid.dims if isinstance(d, FixedDim)]
    spans = [a.span for a in plan.axes if a.span is not None]
    if not dims or len(dims) < layout.grid.ndim or len(spans) < len(plan.axes):
        return False
    chunk = tuple(d.size for d in dims)
    spec = ChunkSpec(chunk, layout.dtype, layout.fill_value)
    threaded = workers_for(layout.workers, False, spec.nbytes, t) != 1
    if threaded if raw else spec.nbytes >= t.block_coded_bytes:
        return False  # large chunks: the threaded general way
    block = Block.of(spans, chunk, spec.nbytes, t.batch_bytes)
    _read(layout, block, layout.keys(plan.chunk_coords), out, spec)
    return True


def _read(layout: ChunkedLayout, block: Block, keys: list[str], out: np.ndarray, spec: ChunkSpec) -> None:
    raw, native = layout.pipeline.is_raw(spec.dtype), layout.store.capabilities.native_read_into
    get = partial(layout.store.get_transient, byte_range=None)
    batches = list(block.batches())

    def one(batch: tuple[int, tuple[int, ...], tuple[int, ...]]) -> None:
        start, coords, box = batch
        n = prod(box)
        batch_keys = keys[start : start + n]
        region, inside = _region(block, coords, box, out)
        rows = _as_rows(region, box, block.chunk) if inside else None
        direct = rows is not None
        if rows is None:
            rows = stage(n, block.chunk, spec.dtype)
        if raw:
            _read_raw(layout, batch_keys, rows, spec)
        elif native:
            _read_coded(layout, batch_keys, rows, spec, files)
        else:
            decode_values(layout.pipeline, get, batch_keys, spec, rows, layout.fill_value, 1)
        if not direct:
            _paste(block, coords, box, rows, region, inside)

    # Reading many small files is system calls, each handing the GIL over: two threads reading at once pass
    # it back and forth, which costs more than a second thread gains. So files are read by one thread at a
    # time (``files``), and a second thread pays only while the other decodes a batch without the GIL.
    files = threading.Lock()
    workers = layout.workers if not native or layout.pipeline.batch_releases_gil(spec.dtype) else 1
    if raw:
        pmap(one, batches, 1)
    elif workers == 1 or len(batches) == 1:  # on a worker thread (see on_worker)
        on_worker(lambda: pmap(one, batches, 1))
    else:
        pmap(one, batches, workers)


def _region(
    block: Block, coords: tuple[int, ...], box: tuple[int, ...], out: np.ndarray
) -> tuple[np.ndarray, bool]:
    """The part of ``out`` a batch fills, and whether the batch is inside the selection (then: its chunks)."""
    sel, inside = [], True
    for f, b, c, lo, hi in zip(coords, box, block.chunk, block.lo, block.hi, strict=True):
        start, stop = f * c, (f + b) * c
        inside = inside and lo <= start and stop <= hi
        sel.append(slice(max(start, lo) - lo, min(stop, hi) - lo))
    return out[tuple(sel)], inside


def _as_rows(region: np.ndarray, box: tuple[int, ...], chunk: tuple[int, ...]) -> np.ndarray | None:
    """``region`` (whole chunks: ``box * chunk``) as ``(n, *chunk)`` C-contiguous rows, one chunk each in
    the C order of their coords, when its memory is laid out so (a view); else None."""
    pairs = [(b, s * c) for b, c, s in zip(box, chunk, region.strides, strict=True)]
    pairs += [(c, s) for c, s in zip(chunk, region.strides, strict=True)]
    expect = region.itemsize
    for n, stride in reversed(pairs):
        if n != 1 and stride != expect:
            return None
        expect *= n
    n, item = prod(box), region.itemsize
    strides = [item * prod(chunk[i + 1 :]) for i in range(len(chunk))]
    return np.lib.stride_tricks.as_strided(region, (n, *chunk), (item * prod(chunk), *strides))


def _paste(
    block: Block,
    coords: tuple[int, ...],
    box: tuple[int, ...],
    rows: np.ndarray,
    region: np.ndarray,
    inside: bool,
) -> None:
    """Staged rows into the output: one strided copy for a batch inside the selection, else through an
    image of the batch's chunks cut to the selection."""
    chunks = rows.reshape(*box, *block.chunk)
    if inside and paste_block(region, chunks):
        return
    image = stage(1, tuple(b * c for b, c in zip(box, block.chunk, strict=True)), rows.dtype, "image")[0]
    paste_block(image, chunks)
    cut = tuple(
        slice(max(f * c, lo) - f * c, min((f + b) * c, hi) - f * c)
        for f, b, c, lo, hi in zip(coords, box, block.chunk, block.lo, block.hi, strict=True)
    )
    region[...] = image[cut]


def _read_raw(layout: ChunkedLayout, keys: list[str], rows: np.ndarray, spec: ChunkSpec) -> None:
    """The raw chunk files of ``keys`` read straight into ``rows``; a chunk of another stored size goes the
    general way, which reports it (or finds it rewritten meanwhile)."""
    views = [memoryview(row) for row in rows.reshape(len(keys), -1).view(np.uint8)]
    for j, n in enumerate(layout.store.read_into(keys, views)):
        if n != spec.nbytes:
            rows[j] = layout.fill_value if n < 0 else _alone(layout, keys[j], spec)


def _read_coded(
    layout: ChunkedLayout, keys: list[str], rows: np.ndarray, spec: ChunkSpec, files: threading.Lock
) -> None:
    """The coded chunk files of ``keys`` read into slots of this thread's buffer (no ``fstat``: a slot holds
    any value up to a little over the decoded size) and decoded into ``rows`` with one batch call; a larger
    value is read and decoded on its own."""
    cap = spec.nbytes + spec.nbytes // 16 + 64  # above every codec's bound for data that does not shrink
    whole, views = _slots(len(keys), cap)
    with files:
        got = layout.store.read_into(keys, views)
    sizes = np.asarray(got, dtype=np.int64)
    present = np.flatnonzero((sizes >= 0) & (sizes <= cap))
    if present.size < len(keys):
        rows[sizes < 0] = layout.fill_value
        for j in np.flatnonzero(sizes > cap).tolist():
            rows[j] = _alone(layout, keys[j], spec)
    frames = Frames(whole, present.astype(np.uint64) * np.uint64(cap), sizes[present].astype(np.uint64))
    decode_rows(layout.pipeline, frames, present, spec, rows, lambda i: keys[int(present[i])], 1)


def _alone(layout: ChunkedLayout, key: str, spec: ChunkSpec) -> np.ndarray:
    """Chunk ``key`` read and decoded on its own (the fill value when it is not stored)."""
    value = layout.store.get(key)
    return layout.fill_value if value is None else decode(layout.pipeline, value, spec, key)


_local = threading.local()


def _slots(n: int, cap: int) -> tuple[memoryview, list[memoryview]]:
    """This thread's buffer of ``n`` slots of ``cap`` bytes and a view of each, made again only when a
    batch needs more or other slots (the views of one batch serve the next)."""
    made: tuple[int, int, memoryview, list[memoryview]] | None = getattr(_local, "slots", None)
    if made is None or made[1] != cap or made[0] < n:
        whole = memoryview(stage(n, (cap,), np.dtype(np.uint8), "coded").reshape(-1))
        made = _local.slots = (n, cap, whole, [whole[i * cap : (i + 1) * cap] for i in range(n)])
    return made[2], made[3][:n]
