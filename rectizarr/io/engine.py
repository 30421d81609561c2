"""The entry points of the I/O layer: :func:`read` and :func:`write` of a chunk plan.

Each takes the active :mod:`rectizarr.tuning` once and hands the plan to the strategy of the layout:
chunked (:mod:`rectizarr.io.chunked`, with the slab reads of :mod:`rectizarr.io.slabs`) or sharded
(:mod:`rectizarr.io.sharded`). A read of very many chunks may first list which are stored
(:mod:`rectizarr.io.sparse`).
"""

from __future__ import annotations

from typing import assert_never

import numpy as np

from rectizarr import tuning
from rectizarr.indexing import Plan
from rectizarr.io import slabs
from rectizarr.io.chunked import read_chunked, write_chunked
from rectizarr.io.layout import ChunkedLayout, Layout, ShardedLayout
from rectizarr.io.sharded import read_sharded, write_sharded
from rectizarr.io.sparse import stored_projections

__all__ = ["read", "write"]


def read(layout: Layout, plan: Plan, out: np.ndarray) -> None:
    """Fill ``out`` (shape ``plan.shape``) with the selected data."""
    t = tuning.current()
    sparse = stored_projections(layout, plan, t) if plan.nchunks >= t.sparse_min_chunks else None
    if sparse is None and isinstance(layout, ChunkedLayout) and slabs.read_slabs(layout, plan, out, t):
        return
    if sparse is not None:  # few chunks stored: fill first, then visit only the stored ones
        out[...] = layout.fill_value
        projections = sparse
        coords = np.array([p.coords for p in sparse], dtype=np.int64).reshape(len(sparse), layout.grid.ndim)
    else:
        projections, coords = list(plan), plan.chunk_coords
    if not projections:
        return
    match layout:
        case ShardedLayout():
            read_sharded(layout, plan, projections, out, t)
        case ChunkedLayout():
            read_chunked(layout, plan, projections, coords, out, t)
        case _:
            assert_never(layout)


def write(layout: Layout, plan: Plan, value: np.ndarray) -> None:
    """Write ``value`` (shape ``plan.shape``) into the selection."""
    t = tuning.current()
    projections = list(plan)
    if not projections:
        return
    match layout:
        case ShardedLayout():
            write_sharded(layout, plan, projections, value, t)
        case ChunkedLayout():
            write_chunked(layout, plan, projections, value, t)
        case _:
            assert_never(layout)
