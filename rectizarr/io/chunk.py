"""Where every strategy ends: one chunk decoded and pasted into the output, or merged with a written value,
and encoded chunks committed to the store. A projection's ``chunk_sel`` indexes the chunk, its ``out_sel``
the plan's internal output (flat for coordinate plans, see :mod:`rectizarr.indexing.plan`)."""

from __future__ import annotations

import contextvars
import functools
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from rectizarr import threads
from rectizarr._util import Coords, Shape, prod
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.errors import CodecError
from rectizarr.indexing import ChunkProjection, Plan
from rectizarr.io import cache
from rectizarr.io.layout import Layout
from rectizarr.io.pool import pmap, pool_size
from rectizarr.pages import empty
from rectizarr.stores import Buffer, Store, requests_in_flight
from rectizarr.tuning import Tuning

if TYPE_CHECKING:
    from concurrent.futures import Future


T = TypeVar("T")
Data = bytes | memoryview
# a write's check, once it holds its chunks' locks, that its plan still holds
Guard = Callable[[], bool] | None


class LayoutChanged(Exception):
    """A write's plan no longer holds: the array's ``zarr.json`` changed (another handle's shrink or
    append) while the write waited for its chunks' locks. Nothing was written: plan it again."""


def check(guard: Guard) -> None:
    """Raise :class:`LayoutChanged` when ``guard`` says the plan no longer holds (called with the locks)."""
    if guard is not None and not guard():
        raise LayoutChanged


Encoded = tuple[str, Buffer | None]  # (key, value); None: the chunk is empty (delete it)


def paste(out: np.ndarray, plan: Plan, p: ChunkProjection, src: np.ndarray | None, fill: np.ndarray) -> None:
    """Put the part of chunk ``src`` that ``p`` selects (the fill value when ``src`` is None) into ``out``."""
    if src is None and fill.dtype.kind == "O":
        fill = fill[()]  # the element: ``out[()] = <0-d object array>`` would nest the array inside out
    if plan.kind == "coordinate":
        flat = out.reshape(-1)
        flat[p.out_sel] = fill if src is None else src[p.chunk_sel]
    else:
        out[p.out_sel] = fill if src is None else src[p.chunk_sel]


def whole(sel: tuple[Any, ...], shape: Shape) -> bool:
    """True when ``sel`` is ``0:n0, 0:n1, ...`` for ``shape``: the whole chunk, in order."""
    return len(sel) == len(shape) and all(
        isinstance(s, slice) and s.start == 0 and s.stop == n and s.step == 1
        for s, n in zip(sel, shape, strict=True)
    )


def merge(
    layout: Layout,
    plan: Plan,
    group: list[ChunkProjection],
    value: np.ndarray,
    shape: Shape,
    stored: Callable[[], np.ndarray] | None,
    keep: bool = False,
) -> np.ndarray:
    """The new content of one chunk: ``group``'s part of ``value`` written over the stored chunk (decoded
    by ``stored``; None: not stored) or over the fill value. When one orthogonal projection covers the
    whole chunk in order, the selected data is the new chunk as it is (no chunk to fill and copy into).
    ``keep``: an edge chunk that others may be extending (nothing locks the shape): everything stored is
    kept, also past the extent this handle knows (a stored chunk the write replaces within the extent and
    that cannot be decoded holds nothing to keep: another array's, one replaced under the write)."""
    if plan.kind == "orthogonal" and len(group) == 1 and whole(group[0].chunk_sel, shape):
        return value[(*group[0].out_sel, Ellipsis)]  # the caller's data as it is (0-d: a view too)
    complete = all(p.complete for p in group)
    chunk = None
    if stored is not None and (keep or not complete):
        try:
            chunk = np.array(stored(), copy=True)
        except CodecError:
            if not complete:
                raise
        if chunk is not None and not keep:
            clear_outside(chunk, layout, group[0].coords)
    if chunk is None:
        chunk = empty(shape, layout.dtype)
        chunk[...] = layout.fill_value
    for p in group:
        chunk[p.chunk_sel] = value.reshape(-1)[p.out_sel] if plan.kind == "coordinate" else value[p.out_sel]
    return chunk


def decode(pipeline: CodecPipeline, value: Data, spec: ChunkSpec, key: str) -> np.ndarray:
    """Decode one chunk; an error names ``key`` (specs shared between chunks carry no key)."""
    try:
        return pipeline.decode(value, spec)
    except CodecError as exc:
        if exc.key is not None:
            raise
        raise exc.with_key(key) from exc


_scratch = threading.local()


def _scratch_chunk(spec: ChunkSpec) -> np.ndarray:
    """This thread's reused scratch buffer, as a chunk of ``spec`` (no fresh memory per chunk)."""
    buf: np.ndarray | None = getattr(_scratch, "buf", None)
    if buf is None or buf.nbytes < spec.nbytes:
        buf = _scratch.buf = empty(spec.nbytes, np.uint8)
    return buf[: spec.nbytes].view(spec.dtype).reshape(spec.shape)


def decode_in_place(
    out: np.ndarray,
    plan: Plan,
    p: ChunkProjection,
    pipeline: CodecPipeline,
    value: Data,
    spec: ChunkSpec,
    fill: np.ndarray,
    t: Tuning,
) -> bool:
    """Decode a chunk with no temporary array: straight into ``out`` when the whole chunk is a C-contiguous
    block of it, else into a per-thread scratch chunk pasted from, decoding only the prefix the projection
    needs (:func:`prefix_bytes`). False when the codecs cannot (the caller decodes the usual way)."""
    if (
        plan.kind == "orthogonal"
        and whole(p.chunk_sel, spec.shape)
        and all(isinstance(s, slice) for s in p.out_sel)
    ):
        region = out[(*p.out_sel, Ellipsis)]  # with the Ellipsis, a view even of a 0-d array
        if region.shape == spec.shape and region.flags.c_contiguous and np.may_share_memory(region, out):
            return pipeline.decode_into(value, spec, region)
    if spec.nbytes > t.scratch_max_bytes:
        return False
    chunk = _scratch_chunk(spec)
    prefix = prefix_bytes(plan, p, spec, t) if spec.nbytes >= t.prefix_min_bytes else None
    if prefix is None:
        done = pipeline.decode_into(value, spec, chunk)
    else:
        done = pipeline.decode_prefix(value, spec, chunk, prefix)
    if done:
        paste(out, plan, p, chunk, fill)
    return done


def prefix_bytes(plan: Plan, p: ChunkProjection, spec: ChunkSpec, t: Tuning) -> int | None:
    """The leading bytes of the C-order chunk that hold every element ``p`` takes from it, when that is at
    most ``t.prefix_max_fraction`` of the chunk; else None."""
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
    return needed if needed <= t.prefix_max_fraction * spec.nbytes else None


def clear_outside(chunk: np.ndarray, layout: Layout, coords: Coords) -> None:
    """Reset the part of an edge chunk beyond the extent to the fill value; ``coords`` are in the planning
    grid (``layout.dims``: chunks, or inner chunks when sharded)."""
    for axis, d in enumerate(layout.dims):
        n = d.data_len(coords[axis])
        if n < chunk.shape[axis]:
            chunk[(*(slice(None),) * axis, slice(n, None))] = layout.fill_value


class _ValueBuffers(threading.local):
    """One buffer per thread for the values of one write (see :func:`value_buffer`)."""

    buf: np.ndarray | None = None

    def take(self, nbytes: int) -> np.ndarray:
        if self.buf is None or self.buf.nbytes < nbytes:
            self.buf = empty(nbytes, np.uint8)
        return self.buf[:nbytes]


_value_buffers: contextvars.ContextVar[_ValueBuffers | None] = contextvars.ContextVar(
    "rectizarr_value_buffers", default=None
)


def value_buffer(nbytes: int) -> np.ndarray:
    """``nbytes`` of ``uint8`` memory to make a value in (contents undefined). During a write that stores
    each value before making the next one on the same thread, in a store that keeps no reference to it
    (:func:`encode_and_commit`), it is this thread's buffer for the whole write, so values of many
    megabytes do not each take fresh memory (the kernel zeroes every new page); else it is new."""
    buffers = _value_buffers.get()
    return empty(nbytes, np.uint8) if buffers is None else buffers.take(nbytes)


def _largest_value_nbytes(layout: Layout) -> int:
    """The decoded size of the layout's largest chunk (shard): its dtype's size times the largest edges."""
    largest = tuple(int(max(d.unique_edges(), default=1)) for d in layout.grid.dims)
    return layout.dtype.itemsize * prod(largest)


def encode_and_commit(
    layout: Layout, items: Sequence[T], work: Callable[[T], Encoded], workers: int | None, t: Tuning
) -> None:
    """Encode with ``work`` (item -> key and value, ``None`` for an empty chunk) on the workers and store
    the results. Local data whose encoding cannot fail is written batch by batch in the workers as it is
    encoded (writes overlap encoding; memory stays flat); otherwise everything is encoded first and
    written at once, so a CodecError writes nothing."""
    if not layout.pipeline.encode_cannot_fail(layout.dtype):
        commit(layout.store, pmap(work, items, workers))
        return
    if not layout.store.capabilities.low_latency:
        _stream_remote(layout, items, work, workers, t)
        return
    n_threads = pool_size() if workers is None else workers
    per = max(1, -(-len(items) // (t.batches_per_thread * n_threads)))
    consumed = layout.store.capabilities.values_consumed
    reuse = consumed and _largest_value_nbytes(layout) >= t.reused_value_bytes
    if reuse:  # each value stored before the thread makes its next: value_buffer() may reuse its memory
        per = 1

    def run(batch: Sequence[T]) -> list[str]:
        results = [work(item) for item in batch]
        to_set = {k: v for k, v in results if v is not None}
        if to_set:
            layout.store.set_many(to_set)
        cache.invalidate(layout.store, to_set)
        return [k for k, v in results if v is None]

    token = _value_buffers.set(_ValueBuffers()) if reuse else None
    try:
        batches = [items[i : i + per] for i in range(0, len(items), per)]
        absent = [k for part in pmap(run, batches, workers) for k in part]
    finally:
        if token is not None:
            _value_buffers.reset(token)  # the buffers go with the write
    commit(layout.store, [(k, None) for k in absent])


def _stream_remote(
    layout: Layout, items: Sequence[T], work: Callable[[T], Encoded], workers: int | None, t: Tuning
) -> None:
    """Encode window by window and upload each window while the next ones are encoded. A window is at
    most half of ``requests_in_flight()`` values and ``t.window_bytes`` of them before encoding, and at
    most an eighth of the write (so that even a few large values, shards, upload while others encode),
    but no fewer than the workers. Windows upload at once up to ``requests_in_flight()`` values and
    ``2 * t.window_bytes``, and at least two: at most that plus one window of values is held at once."""
    item_nbytes = _largest_value_nbytes(layout)
    n_workers, in_flight = pool_size() if workers is None else workers, requests_in_flight()
    per = max(1, min(in_flight // 2, t.window_bytes // max(1, item_nbytes)))
    per = max(min(per, n_workers), min(per, -(-len(items) // 8)))
    if len(items) <= per:  # one window (a small write): no uploading threads to start
        commit(layout.store, pmap(work, items, workers))
        return
    uploading = max(2, min(in_flight // per, 2 * t.window_bytes // max(1, per * item_nbytes)))
    with threads.once("rectizarr-upload", uploading) as uploader:
        pending: deque[Future[None]] = deque()
        for start in range(0, len(items), per):
            results = pmap(work, items[start : start + per], workers)
            if len(pending) == uploading:
                pending.popleft().result()
            pending.append(uploader.submit(commit, layout.store, results))
        for f in pending:
            f.result()


def update_chunks(
    layout: Layout,
    items: Sequence[T],
    key_of: Callable[[T], str],
    work: Callable[[T, Data | None], Encoded],
    reads: Callable[[T], bool],
    workers: int | None,
    t: Tuning,
    guard: Guard = None,
) -> None:
    """Write the value ``work`` makes of each item (chunk or shard) under its key, all under their locks
    (``guard`` checked once they are held). The items that ``reads`` the stored value are made from it with
    one :meth:`~rectizarr.stores.Store.update`: all made first (a corrupt stored value raises with nothing
    written), then the others encoded and written (:func:`encode_and_commit`), then these written."""
    store, read = layout.store, {key_of(x): x for x in items if reads(x)}
    others = [x for x in items if key_of(x) not in read]

    def make(stored: dict[str, bytes | None]) -> dict[str, Buffer | None]:
        return dict(pmap(lambda k: work(read[k], stored[k]), list(stored), workers))

    def before() -> None:
        encode_and_commit(layout, others, lambda x: work(x, None), workers, t)

    with store.lock([key_of(x) for x in items]):
        check(guard)
        try:
            store.update(list(read), make, functools.partial(pmap, workers=workers), before)
        finally:
            cache.invalidate(store, read)


def commit(store: Store, results: Iterable[Encoded]) -> None:
    """Store every value of ``results`` and delete every key whose value is None."""
    results = list(results)
    to_set = {k: v for k, v in results if v is not None}
    to_delete = [k for k, v in results if v is None]
    if to_set:
        store.set_many(to_set)
    if to_delete:
        store.delete_many(to_delete)
    cache.invalidate(store, (*to_set, *to_delete))
