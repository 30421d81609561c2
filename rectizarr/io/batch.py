"""Many small coded chunks at once, for whole shards of small inner chunks (:func:`decode_shard`) and
batches of small chunk files (:mod:`.blocks`): decoded with one batch call of the codec pipeline into the
rows of a staging array (an absent chunk's row holds the fill value; a value the batch cannot decode is
decoded again on its own, which names its key), then pasted with a few strided copies."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from itertools import product

import numpy as np

from rectizarr import tuning
from rectizarr._util import Shape, prod, region_of
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.batch import Frames
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.codecs.shard_index import EMPTY, fill_rows, is_fill
from rectizarr.core.dims import Dim
from rectizarr.indexing import OrthogonalPlan, Plan
from rectizarr.indexing.axis import AxisPlan
from rectizarr.io.chunk import Data, Encoded, Guard, check, decode, encode_and_commit, value_buffer
from rectizarr.io.layout import ShardedLayout
from rectizarr.io.pool import each_as_ready, on_worker, pmap, pool_size
from rectizarr.pages import empty
from rectizarr.stores import requests_in_flight
from rectizarr.tuning import Tuning

_local = threading.local()


def batchable(dtype: np.dtype) -> bool:
    """Whether chunks of ``dtype`` decode in batches: fixed-size data (a row of the staging array each)."""
    return not dtype.hasobject


def stage(n: int, shape: Shape, dtype: np.dtype, slot: str = "stage") -> np.ndarray:
    """This thread's reused staging array ``slot`` of ``n`` chunks of ``shape`` (C-contiguous, undefined)."""
    nbytes = n * prod(shape) * dtype.itemsize
    buf: np.ndarray | None = getattr(_local, slot, None)
    if buf is None or buf.nbytes < nbytes:
        buf = empty(max(nbytes, 1), np.uint8)
        setattr(_local, slot, buf)
    return buf[:nbytes].view(dtype).reshape((n, *shape))


def decode_rows(
    pipeline: CodecPipeline,
    frames: Frames,
    rows: np.ndarray,
    spec: ChunkSpec,
    out: np.ndarray,
    key_of: Callable[[int], str],
    threads: int,
) -> None:
    """Decode value ``i`` of ``frames`` into ``out[rows[i]]`` in one batch (see the module; an error names
    ``key_of(i)``)."""
    if not len(frames):
        return
    done = pipeline.decode_many(frames, spec, out, rows, threads)
    for i in np.flatnonzero(~done).tolist():
        out[int(rows[i])] = decode(pipeline, frames[i], spec, key_of(i))


def gather(get: Callable[[str], Data | None], keys: Sequence[str]) -> tuple[Frames, np.ndarray]:
    """The stored values of ``keys`` (``get``: a read whose value may be reused by the next read) copied
    into one buffer as they come, and the positions of the stored ones."""
    buf, sizes, rows = bytearray(), [], []
    for i, key in enumerate(keys):
        value = get(key)
        if value is not None:
            buf += value
            sizes.append(len(value))
            rows.append(i)
    sizes_a = np.asarray(sizes, dtype=np.uint64)
    offsets = np.zeros(len(sizes), dtype=np.uint64)
    if len(sizes) > 1:
        np.cumsum(sizes_a[:-1], out=offsets[1:])
    return Frames(memoryview(buf), offsets, sizes_a), np.asarray(rows, dtype=np.int64)


def decode_values(
    pipeline: CodecPipeline,
    get: Callable[[str], Data | None],
    keys: Sequence[str],
    spec: ChunkSpec,
    out: np.ndarray,
    fill: np.ndarray,
    threads: int,
) -> None:
    """Read the chunks of ``keys`` with ``get``; decode chunk ``i`` into ``out[i]`` (or fill) in one call."""
    frames, rows = gather(get, keys)
    if rows.size < len(keys):
        missing = np.ones(len(keys), dtype=bool)
        missing[rows] = False
        out[missing] = fill
    decode_rows(pipeline, frames, rows, spec, out, lambda i: keys[int(rows[i])], threads)


def decode_shard(layout: ShardedLayout, key: str, shape_t: Shape, value: Data, threads: int) -> np.ndarray:
    """Every inner chunk of a shard decoded with one batch call, as an array of shape ``chunks_per_shard
    + chunk_shape`` in the codec's axis order (absent inner chunks hold the fill value): a view of this
    thread's staging buffer, valid until its next use."""
    sharding = layout.sharding
    index = sharding.index_of(value, shape_t, key=key)
    cps = index.offsets.shape
    spec = layout.inner_spec(key)
    out = stage(prod(cps), spec.shape, spec.dtype)
    present = index.present().reshape(-1)
    rows = np.flatnonzero(present)
    if rows.size < present.size:
        out[~present] = layout.fill_value
    frames = Frames(value, index.offsets.reshape(-1)[rows], index.nbytes.reshape(-1)[rows])
    decode_rows(sharding.codecs, frames, rows, spec, out, lambda i: key, threads)
    return out.reshape((*cps, *spec.shape))


def paste_block(target: np.ndarray, block: np.ndarray) -> bool:
    """Paste ``block`` (shape ``counts + chunk_shape``: whole chunks in C order of their coords) into
    ``target`` (shape ``counts * chunk_shape``, a view of the output) with one strided copy; False when
    ``target`` is not a view that can be split so."""
    nd = block.ndim // 2
    split = target.reshape([n for pair in zip(block.shape[:nd], block.shape[nd:], strict=True) for n in pair])
    if not np.may_share_memory(split, target):
        return False
    split[...] = block.transpose([i for a in range(nd) for i in (a, nd + a)])
    return True


def encode_shard(layout: ShardedLayout, shape_t: Shape, region: np.ndarray, threads: int) -> Data | None:
    """A whole shard's value from ``region`` (its data, shape ``shape_t``, in the array's axis order,
    which must be the codec's): the inner chunks cut out with one copy, the empty ones (equal to the fill
    value, unless ``write_empty_chunks``) found at once, the others encoded with one batch call and
    assembled with no step per inner chunk. None: nothing to store."""
    inner = layout.sharding.chunk_shape
    cps = tuple(s // c for s, c in zip(shape_t, inner, strict=True))
    spec = layout.inner_spec(None)
    codecs, t = layout.sharding.codecs, tuning.current()
    if (codecs.bytes_bytes or codecs.is_raw(spec.dtype)) and spec.nbytes >= t.threaded_bytes_coded:
        return encode_shard_each(layout, shape_t, region, cps, spec)
    nd = len(inner)
    split = region.reshape([x for pair in zip(cps, inner, strict=True) for x in pair])
    chunks = np.ascontiguousarray(split.transpose([*range(0, 2 * nd, 2), *range(1, 2 * nd, 2)]))
    chunks = chunks.reshape((prod(cps), *inner))
    keep = np.ones(chunks.shape[0], dtype=bool)
    if not layout.write_empty_chunks:
        keep = ~fill_rows(chunks, layout.fill_value)
    rows = np.flatnonzero(keep)
    if not rows.size:
        return None
    frames = codecs.encode_many(chunks[rows] if rows.size < keep.size else chunks, spec, threads)
    return layout.sharding.assemble_frames(shape_t, frames, rows)


def encode_shard_each(
    layout: ShardedLayout, shape_t: Shape, region: np.ndarray, cps: Shape, spec: ChunkSpec
) -> Data | None:
    """:func:`encode_shard` for large inner chunks that are compressed or raw. A compressed one is copied
    into this thread's scratch chunk, checked and encoded there while it is in cache (no copy of the whole
    shard in inner chunk order, no second pass over it for empty chunks), and its encoding copied at once
    into the shard's buffer and let go (so the next one reuses its memory: fresh memory per encoding cost
    0.2 ms of page faults per 1 MiB chunk). A raw one is copied straight to its place in the shard's
    buffer and checked there (one copy in all). The buffer is sized for the decoded data, and only what is
    written of it is ever touched. A 64 MiB shard of 1 MiB blosc chunks: 115 -> 65 ms on one thread."""
    sharding, codecs = layout.sharding, layout.sharding.codecs
    inner, n, index_n = spec.shape, prod(cps), sharding.index_nbytes(shape_t)
    at_start = sharding.index_location == "start"
    raw = codecs.is_raw(spec.dtype)
    scratch = None if raw else stage(1, inner, spec.dtype, slot="encode")[0, ...]
    per = max(1, spec.nbytes + tuning.current().encoded_slack_bytes)  # room per inner chunk
    buf = value_buffer(n * per + index_n)  # during a local write, this thread's buffer for every shard
    table = np.full((n, 2), EMPTY, dtype=np.uint64)
    position = index_n if at_start else 0
    for row, coords in enumerate(product(*(range(c) for c in cps))):
        block = region_of(region, [slice(c * k, (c + 1) * k) for c, k in zip(coords, inner, strict=True)])
        if raw:  # in place: an empty one is overwritten by the next
            if position + spec.nbytes + index_n > buf.size:
                buf = np.concatenate(
                    [buf[:position], empty(spec.nbytes + index_n + (n - row) * per, np.uint8)]
                )
            target = buf[position : position + spec.nbytes].view(spec.dtype).reshape(inner)
            target[...] = block
            if layout.write_empty_chunks or not is_fill(target, layout.fill_value):
                table[row] = (position, spec.nbytes)
                position += spec.nbytes
            continue
        assert scratch is not None
        scratch[...] = block
        if not layout.write_empty_chunks and is_fill(scratch, layout.fill_value):
            continue
        encoded = memoryview(codecs.encode(scratch, spec)).cast("B")  # a compressor's output, not the scratch
        size = len(encoded)
        if not size:
            continue  # a zero-length encoding is an absent inner chunk
        if position + size + index_n > buf.size:  # data that grew when encoded: room for the rest too
            buf = np.concatenate([buf[:position], empty(size + index_n + (n - row) * per, np.uint8)])
        buf[position : position + size] = encoded
        table[row] = (position, size)
        position += size
        del encoded
    if not (table[:, 1] != EMPTY).any():
        return None
    index = sharding.encode_index(table, cps)
    if at_start:
        buf[:index_n] = np.frombuffer(index, np.uint8)
        return memoryview(buf)[:position]
    buf[position : position + index_n] = np.frombuffer(index, np.uint8)
    return memoryview(buf)[: position + index_n]


def read_shards(layout: ShardedLayout, plan: Plan, out: np.ndarray, t: Tuning) -> bool:
    """Fill ``out`` shard by shard, with no step per inner chunk, when the read selects whole shards (each
    inside the extent, its inner chunks in order; of a store with no round trip: small inner chunks): each
    shard's inner chunks decoded with one batch call and pasted with one strided copy, in the pool (with
    round trips: as each shard arrives, a window fetched ahead as in ``sharded.read_whole_arriving``).
    False (nothing read) when it is not such a read."""
    store = layout.store
    local = store.capabilities.low_latency
    shards = _whole_shard_boxes(layout, plan, t, small_inner=local)
    if not shards:
        return False
    largest = max(prod(layout.grid.chunk_shape(coords)) for coords, _ in shards) * layout.dtype.itemsize
    if largest > t.scratch_max_bytes:
        return False
    fill = layout.fill_value

    def one(shard: tuple[tuple[int, ...], tuple[slice, ...]], value: Data | None) -> None:
        coords, box = shard
        if value is None:
            out[box] = fill
            return
        key = layout.key(coords)
        shape = layout.grid.chunk_shape(coords)
        block = layout.sharding.dense(value, shape, layout.dtype, key=key)  # raw, back to back: no decode
        if not paste_block(
            region_of(out, box), decode_shard(layout, key, shape, value, 1) if block is None else block
        ):
            raise AssertionError("an orthogonal block of the output is a view")  # pragma: no cover

    if local:
        get = store.get_transient
        pmap(lambda shard: one(shard, get(layout.key(shard[0]), None)), shards, layout.workers)
        return True
    threads = pool_size() if layout.workers is None else layout.workers
    ahead = max(threads, min(t.window_bytes // max(1, largest), 2 * requests_in_flight()))
    arriving = store.iter_many([(layout.key(coords), None) for coords, _ in shards], ahead=ahead)
    each_as_ready(lambda item: one(shards[item[0]], item[1]), arriving, threads)
    return True


def write_shards(
    layout: ShardedLayout, plan: Plan, value: np.ndarray, t: Tuning, guard: Guard = None
) -> bool:
    """Write ``value`` shard by shard when it covers whole shards of small inner chunks (each inside the
    extent, in order): each shard batch-encoded (:func:`encode_shard`) and stored, no old value read; over
    the pool when the codec's batch lets other threads run, else on one pool thread (per-value codec calls
    from two threads would pass the GIL back and forth). False (nothing written) when it is not such a
    write; ``guard`` is checked once the shards' locks are held."""
    shards = _whole_shard_boxes(layout, plan, t)
    if not shards:
        return False
    keys = [layout.key(coords) for coords, _ in shards]

    def work(i: int) -> Encoded:
        coords, box = shards[i]
        return keys[i], encode_shard(layout, layout.grid.chunk_shape(coords), region_of(value, box), 1)

    spread = layout.sharding.codecs.batch_releases_gil(layout.dtype)
    with layout.store.lock(keys):
        check(guard)
        if spread:
            encode_and_commit(layout, range(len(shards)), work, layout.workers, t)
        else:
            on_worker(lambda: encode_and_commit(layout, range(len(shards)), work, 1, t))
    return True


def _whole_shard_boxes(
    layout: ShardedLayout, plan: Plan, t: Tuning, small_inner: bool = True
) -> list[tuple[tuple[int, ...], tuple[slice, ...]]]:
    """Each shard of a selection of whole shards (of small inner chunks, with ``small_inner``; none reaching
    past the extent), with the block of the output or value it covers; else empty."""
    spec = layout.inner_spec(None)
    if (
        not isinstance(plan, OrthogonalPlan)
        or layout.transposed
        or not batchable(layout.dtype)
        or (small_inner and spec.nbytes >= t.piecewise_bytes)
        or not plan.axes
    ):
        return []
    per_axis = [_whole_shards(a, d) for a, d in zip(plan.axes, layout.grid.dims, strict=True)]
    axes = [p for p in per_axis if p is not None]
    if len(axes) < len(per_axis):
        return []
    return [(tuple(c for c, _ in s), tuple(b for _, b in s)) for s in product(*axes)]


def _whole_shards(a: AxisPlan, d: Dim) -> list[tuple[int, slice]] | None:
    """Along one axis: each touched shard with the output positions it fills, when the axis selects a run
    of whole shards in order, all inside the extent; else None. No step per inner chunk."""
    if a.span is None:
        return None
    lo, hi = a.span
    first, last = d.chunk_of(lo), d.chunk_of(hi - 1)
    if d.offset(first) != lo or d.offset(last) + d.edge(last) != hi or d.data_len(last) != d.edge(last):
        return None
    shards = np.arange(first, last + 1, dtype=np.int64)
    starts = (d.offsets_of(shards) - lo).tolist()
    return [(s, slice(b, e)) for s, b, e in zip(shards.tolist(), starts, [*starts[1:], hi - lo], strict=True)]
