"""The entry points of the I/O layer: :func:`read` and :func:`write` of a chunk plan, each taking the
active :mod:`rectizarr.tuning` once and choosing a strategy (see :mod:`rectizarr.io`; a shrink's
clean-up: :mod:`.clear`)."""

from __future__ import annotations

import functools
import weakref
from typing import assert_never

import numpy as np

from rectizarr import tuning
from rectizarr.indexing import Plan
from rectizarr.io import batch, blocks
from rectizarr.io.chunk import Guard
from rectizarr.io.chunked import read_chunked, write_chunked
from rectizarr.io.layout import ChunkedLayout, Layout, ShardedLayout
from rectizarr.io.pool import when_idle
from rectizarr.io.sharded import read_sharded, write_sharded
from rectizarr.io.sparse import stored_chunk_keys, stored_projections
from rectizarr.pages import populate


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
        case ShardedLayout():  # (whole shards, batch.read_shards: no projections)
            if sparse is not None or not batch.read_shards(layout, plan, out, t):
                read_sharded(layout, plan, list(plan) if sparse is None else sparse, out, t)
        case ChunkedLayout():
            if sparse is not None:
                coords = np.array([p.coords for p in sparse], dtype=np.int64)
                read_chunked(layout, plan, sparse, coords.reshape(len(sparse), layout.grid.ndim), out, t)
            elif not blocks.read_block(layout, plan, out, t):
                read_chunked(layout, plan, list(plan), plan.chunk_coords, out, t)
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
    if isinstance(layout, ShardedLayout) and batch.write_shards(layout, plan, value, t, guard):
        return  # (whole shards)
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


def nbytes_stored(layout: Layout) -> int:
    """The total size in bytes of the stored chunks."""
    return sum(layout.store.getsize(key) or 0 for key, _ in stored_chunk_keys(layout))
