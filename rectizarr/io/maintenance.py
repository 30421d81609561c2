"""Whole-array upkeep: what a shrink leaves behind, and what is stored."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from rectizarr._util import Coords
from rectizarr.core.grid import ChunkGrid
from rectizarr.indexing import ChunkProjection, Plan, orthogonal_plan
from rectizarr.io import cache
from rectizarr.io.engine import read, write
from rectizarr.io.layout import Layout
from rectizarr.io.sparse import stored_chunk_keys

__all__ = ["delete_outside", "nbytes_stored"]


def delete_outside(layout: Layout, new_grid: ChunkGrid) -> None:
    """After a shrink: delete chunks wholly outside ``new_grid`` and clear the straddling chunks' tails.

    Clearing means a later grow shows the fill value instead of stale data (a deliberate difference from
    zarr-python and tensorstore, which keep the old values).
    """
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
    for coords in straddling:
        # Re-write the in-bounds part of the chunk under the new extent: the write path resets
        # everything beyond the extent to the fill value.
        region = layout.grid.chunk_region(coords)
        clipped = tuple(slice(r.start, min(r.stop, e)) for r, e in zip(region, new_grid.shape, strict=True))
        if any(s.stop <= s.start for s in clipped):
            continue
        rplan = orthogonal_plan(layout.dims, clipped)
        data = np.empty(rplan.shape, layout.dtype)
        read(layout, rplan, data)
        write(new_layout, _Replacing(orthogonal_plan(new_layout.dims, clipped)), data)  # type: ignore[arg-type]


class _Replacing:
    """A plan whose projections all claim to be complete: each chunk is rebuilt from the fill value and
    the data, dropping whatever else it held."""

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
