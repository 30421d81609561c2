"""The clean-up after a shrink on stores with conditional writes (S3, GCS, Azure), where no lock keeps other
clients out: another client may append as soon as the new ``zarr.json`` is written, into the very chunks
the clean-up is clearing.

Each chunk reaching past the new end is read with its version, then the array's grid as stored *now* is
read: an append writes its ``zarr.json`` before its data, so a chunk that holds an append's data was read
after that append's ``zarr.json`` was. The chunk is cleared past that extent (deleted when it lies wholly
past it, left as it is when an append filled it) with a conditional write, read again on a conflict.
Where the current grid's chunks are not the shrink's (a rectilinear axis that grew new edges since), the
chunk is left as it is.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace

from rectizarr._util import empty
from rectizarr.core.grid import ChunkGrid
from rectizarr.indexing import orthogonal_plan
from rectizarr.io import Layout, each_cleared, read, stored_chunk_keys, write
from rectizarr.io.cache import invalidate
from rectizarr.stores import MemoryStore

__all__ = ["clear_appended_swapped", "clear_past_end_swapped"]


def clear_past_end_swapped(
    layout: Layout, new_grid: ChunkGrid, grid_now: Callable[[], ChunkGrid | None]
) -> None:
    """After a shrink to ``new_grid`` (``layout``: the array before it), with conditional writes: every
    stored chunk reaching past the new end cleared past the extent stored when it is rewritten
    (``grid_now``: the array's grid read afresh; None when the array is gone)."""
    past = []
    for key, coords in list(stored_chunk_keys(layout)):
        region = layout.grid.chunk_region(coords)
        if not (
            all(c < n for c, n in zip(coords, new_grid.grid_shape, strict=True))
            and all(r.stop <= e for r, e in zip(region, new_grid.shape, strict=True))
        ):
            past.append((key, coords))  # not wholly inside the new extent
    _clear_each(layout, new_grid, grid_now, past)


def clear_appended_swapped(
    layout: Layout, grid: ChunkGrid, axis: int, grid_now: Callable[[], ChunkGrid | None]
) -> None:
    """Before an append's ``zarr.json`` (``layout``: the array grown; ``grid``: as stored now) on a store with
    conditional writes: the chunks the appended rows fall in, cleared past the stored extent, so that
    what a shrink's clean-up has not reached yet (or a killed one left) never shows between the new
    document and the append's data. No listing: one read per chunk (a write only where something is
    there to clear)."""
    grown = layout.grid
    start, stop = grid.shape[axis], grown.shape[axis]
    if stop <= start or not all(grown.shape):
        return
    dim = grown.dims[axis]
    ranges = [
        range(n) if i != axis else range(dim.chunk_of(start), dim.chunk_of(stop - 1) + 1)
        for i, n in enumerate(grown.grid_shape)
    ]
    _clear_each(layout, grid, grid_now, [(layout.key(c), c) for c in itertools.product(*ranges)])


def _clear_each(
    layout: Layout,
    new_grid: ChunkGrid,
    grid_now: Callable[[], ChunkGrid | None],
    past: list[tuple[str, tuple[int, ...]]],
) -> None:
    """Each chunk of ``past`` cleared past the extent stored when it is rewritten (see the module)."""

    def clear(item: tuple[str, tuple[int, ...]]) -> None:
        key, coords = item

        def make(stored: bytes | None) -> bytes | None:
            if stored is None:
                return None
            grid = grid_now()
            if grid is None or not _same_chunks(grid, new_grid):
                return stored
            if any(c >= n for c, n in zip(coords, grid.grid_shape, strict=True)):
                return None  # wholly past the end as stored now
            return _cleared(layout, grid, key, coords, stored)

        try:
            layout.store.swap(key, make)
        finally:
            invalidate(layout.store, [key])

    each_cleared(past, lambda item: item[0], clear, layout.store.capabilities.low_latency)


def _same_chunks(grid: ChunkGrid, other: ChunkGrid) -> bool:
    """Whether chunk ``i`` covers the same positions in both grids (regular ones with one chunk shape)."""
    shape = grid.regular_chunk_shape
    return grid == other or (shape is not None and shape == other.regular_chunk_shape)


def _cleared(
    layout: Layout, grid: ChunkGrid, key: str, coords: tuple[int, ...], stored: bytes
) -> bytes | None:
    """``stored`` (chunk ``coords``) with everything past ``grid``'s extent reset to the fill value (the
    write path of a store of its own does that to a chunk written whole); None when nothing else is left;
    ``stored`` itself when nothing lies past it."""
    region = grid.chunk_region(coords)  # clipped to the extent
    if all(r.stop - r.start == n for r, n in zip(region, grid.chunk_shape(coords), strict=True)):
        return stored
    scratch = MemoryStore()
    scratch.set(key, stored)
    now = replace(layout, store=scratch, grid=grid)
    plan = orthogonal_plan(now.dims, region)
    data = empty(plan.shape, layout.dtype)
    read(now, plan, data)
    write(now, plan, data)
    cleared = scratch.get(key)
    return stored if cleared == stored else cleared  # (nothing there to clear: no write)
