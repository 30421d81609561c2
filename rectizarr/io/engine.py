"""The entry points of the I/O layer: :func:`read` and :func:`write` of a chunk plan, and the upkeep of
a shrink (:func:`delete_outside`). A read or write takes the active :mod:`rectizarr.tuning` once and
hands the plan to the strategy of its layout: chunked (:mod:`.chunked`, :mod:`.blocks`) or sharded
(:mod:`.sharded`); a read of very many chunks may first list which are stored (:mod:`.sparse`).
"""

from __future__ import annotations

import functools
import itertools
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import TypeVar, assert_never

import numpy as np

from rectizarr import threads, tuning
from rectizarr._util import Coords, empty, populate
from rectizarr.core.grid import ChunkGrid
from rectizarr.errors import CodecError
from rectizarr.indexing import Plan, orthogonal_plan
from rectizarr.io import batch, blocks, cache
from rectizarr.io.chunk import Guard
from rectizarr.io.chunked import read_chunked, write_chunked
from rectizarr.io.layout import ChunkedLayout, Layout, ShardedLayout
from rectizarr.io.pool import when_idle
from rectizarr.io.sharded import read_sharded, write_sharded
from rectizarr.io.sparse import stored_chunk_keys, stored_projections

__all__ = ["delete_outside", "each_cleared", "nbytes_stored", "read", "write"]

T = TypeVar("T")


def read(layout: Layout, plan: Plan, out: np.ndarray) -> None:
    """Fill ``out`` (shape ``plan.shape``) with the selected data."""
    t = tuning.current()
    if not plan.nchunks:  # an empty selection (with thresholds tuned down to 0 the strategies would look)
        return
    if not layout.store.capabilities.low_latency and out.nbytes >= t.prefault_bytes:
        # the output's pages made while the requests are in flight, not by the first pastes after the data
        # arrives (a remote read of 32 MiB: 5 ms of page faults there); not once the read is over (the
        # array is then let go of, or filled), however long the idle thread waits for a core
        when_idle(functools.partial(_populate_while_read, weakref.ref(out)))
    sparse = stored_projections(layout, plan, t) if plan.nchunks >= t.sparse_min_chunks else None
    if sparse is not None:  # few chunks stored: fill first, then visit only the stored ones
        out[...] = layout.fill_value
    match layout:
        case ShardedLayout():
            if sparse is not None or not batch.read_shards(
                layout, plan, out, t
            ):  # whole shards: no projections
                read_sharded(layout, plan, list(plan) if sparse is None else sparse, out, t)
        case ChunkedLayout():
            if sparse is None and not blocks.read_block(layout, plan, out, t):
                read_chunked(layout, plan, list(plan), plan.chunk_coords, out, t)
            elif sparse is not None:
                coords = np.array([p.coords for p in sparse], dtype=np.int64).reshape(
                    len(sparse), layout.grid.ndim
                )
                read_chunked(layout, plan, sparse, coords, out, t)
        case _:
            assert_never(layout)


def _populate_while_read(ref: weakref.ref[np.ndarray]) -> None:
    out = ref()
    if out is not None:
        populate(out)


def write(layout: Layout, plan: Plan, value: np.ndarray, guard: Guard = None) -> None:
    """Write ``value`` (shape ``plan.shape``) into the selection. ``guard``: called once the write holds its
    chunks' locks, False when the plan no longer holds (:class:`LayoutChanged` is raised, nothing written)."""
    t = tuning.current()
    if isinstance(layout, ShardedLayout) and batch.write_shards(
        layout, plan, value, t, guard
    ):  # whole shards
        return
    projections = list(plan)
    if not projections:
        return
    match layout:
        case ShardedLayout():
            write_sharded(layout, plan, projections, value, t, guard)
        case ChunkedLayout():
            write_chunked(layout, plan, projections, value, t, guard)
        case _:
            assert_never(layout)


def delete_outside(layout: Layout, new_grid: ChunkGrid) -> None:
    """After a shrink: delete chunks wholly outside ``new_grid`` and clear the straddling chunks' tails.

    Clearing means a later grow shows the fill value instead of stale data (a deliberate difference from
    zarr-python and tensorstore, which keep the old values).
    """
    # Every chunk not wholly inside the new extent, locked: a write that planned with the old shape and
    # holds some of them finishes first (one that takes them later sees the new zarr.json and plans again),
    # so the listing below sees what it wrote.
    with layout.store.lock(_keys_past(layout, new_grid.shape)):
        _delete_outside_held(layout, new_grid)


def _keys_past(layout: Layout, extent: tuple[int, ...]) -> Iterator[str]:
    """The keys of the chunks of ``layout``'s grid that reach past ``extent`` on some axis (each once)."""
    grid = layout.grid.grid_shape
    inside = [
        n if e >= d.extent else d.chunk_of(e) for d, e, n in zip(layout.grid.dims, extent, grid, strict=True)
    ]
    for axis in range(len(grid)):  # past on this axis, inside on the axes before it: disjoint boxes
        ranges = (
            [range(k) for k in inside[:axis]]
            + [range(inside[axis], grid[axis])]
            + [range(n) for n in grid[axis + 1 :]]
        )
        yield from (layout.key(coords) for coords in itertools.product(*ranges))


def _delete_outside_held(layout: Layout, new_grid: ChunkGrid) -> None:
    doomed: list[str] = []
    straddling: list[Coords] = []
    for key, coords in stored_chunk_keys(layout):
        if not all(c < n for c, n in zip(coords, new_grid.grid_shape, strict=True)):
            doomed.append(key)
        elif any(r.stop > e for r, e in zip(layout.grid.chunk_region(coords), new_grid.shape, strict=True)):
            straddling.append(coords)
    if doomed:
        layout.store.delete_many(doomed)
        cache.invalidate(layout.store, doomed)
    new_layout = replace(layout, grid=new_grid)

    def clear(coords: Coords) -> None:
        # Re-write the in-bounds part of the chunk under the new extent: the write path resets
        # everything beyond the extent to the fill value.
        region = layout.grid.chunk_region(coords)
        clipped = tuple(slice(r.start, min(r.stop, e)) for r, e in zip(region, new_grid.shape, strict=True))
        if any(s.stop <= s.start for s in clipped):
            return
        rplan = orthogonal_plan(layout.dims, clipped)
        data = empty(rplan.shape, layout.dtype)
        with layout.store.lock([layout.key(coords)]):  # no write to the chunk between reading and rewriting
            read(layout, rplan, data)
            write(new_layout, orthogonal_plan(new_layout.dims, clipped), data)  # complete: no old value read

    each_cleared(straddling, layout.key, clear)


def each_cleared(
    items: Iterable[T], key_of: Callable[[T], str], clear: Callable[[T], object], low_latency: bool = True
) -> None:
    """``clear`` each item of a shrink's clean-up; one that cannot be read (a corrupt chunk) does not stop
    the others: once all are done, a CodecError names every one left uncleared (the shape has changed)."""
    failed: list[tuple[str, CodecError]] = []

    def one(item: T) -> None:
        try:
            clear(item)
        except CodecError as exc:
            failed.append((key_of(item), exc))

    items = list(items)
    if len(items) > 1 and not low_latency:  # each a round trip or two: side by side
        with threads.once("rectizarr-clear", min(len(items), 16)) as pool:
            for done in [pool.submit(one, item) for item in items]:
                done.result()
    else:
        for item in items:
            one(item)
    if failed:
        keys = [k for k, _ in failed]
        raise CodecError(
            f"the array was resized, but {len(keys)} chunk(s) reaching past its new end could not be "
            f"cleared and may show old values if it grows again: {keys[:8]}; {failed[0][1]}",
            key=keys[0],
        )


def nbytes_stored(layout: Layout) -> tuple[int, int]:
    """(number of stored chunks, their total size in bytes)."""
    n = total = 0
    for key, _ in stored_chunk_keys(layout):
        n += 1
        total += layout.store.getsize(key) or 0
    return n, total
