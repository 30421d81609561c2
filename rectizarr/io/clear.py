"""The clean-up after a shrink, one for every store: the stored chunks reaching past the new end cleared
past it (deleted when they lie wholly past it), so that a later grow shows the fill value, not the values
the shrink cut (a deliberate difference from zarr-python and tensorstore, which keep them).

Each chunk is rewritten with :meth:`~rectizarr.stores.Store.update` (another writer may append as soon as
the new ``zarr.json`` is written). The chunks are read first, then the array's grid as stored *now*: an
append writes its ``zarr.json`` before its data, so a chunk that holds an append's data was read after that
append's ``zarr.json`` was. A chunk is cleared past that extent (deleted when it lies wholly past it, left
as it is when an append filled it); where the current grid's chunks are not the shrink's (a rectilinear
axis that grew new edges since), it is left as it is."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TypeVar

import numpy as np

from rectizarr import threads
from rectizarr._util import Coords
from rectizarr.core.grid import ChunkGrid
from rectizarr.errors import CodecError
from rectizarr.indexing import orthogonal_plan
from rectizarr.io import cache
from rectizarr.io.chunk import decode
from rectizarr.io.engine import read, write
from rectizarr.io.layout import ChunkedLayout, Layout
from rectizarr.io.sparse import stored_chunk_keys
from rectizarr.pages import empty
from rectizarr.stores import Buffer, MemoryStore, Store
from rectizarr.stores.update import UNREAD, Each, Make, one_by_one

__all__ = ["clear_appended", "clear_past_end", "delete_outside"]

R = TypeVar("R")
GridNow = Callable[[], ChunkGrid | None]  # the array's grid read afresh; None when the array is gone


def delete_outside(layout: Layout, new_grid: ChunkGrid, grid_now: GridNow) -> None:
    """After a shrink to ``new_grid`` (``layout``: the array before it): :func:`clear_past_end` once every
    chunk not wholly inside the new extent is locked, so that a write (of this process, or machine where
    locks are the OS's) that planned with the old shape and holds some finishes first and the listing sees
    what it wrote (one that takes them later sees the new ``zarr.json`` and plans again)."""
    with layout.store.lock(_keys_past(layout, new_grid.shape)):
        clear_past_end(layout, new_grid, grid_now)


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


def clear_past_end(layout: Layout, new_grid: ChunkGrid, grid_now: GridNow) -> None:
    """After a shrink to ``new_grid`` (``layout``: the array before it), or before a grow from it
    (``layout``: the array grown): every stored chunk reaching past its end cleared past the extent stored
    when it is rewritten (see the module)."""
    past = []
    for key, coords in list(stored_chunk_keys(layout)):
        region = layout.grid.chunk_region(coords)
        if not (
            all(c < n for c, n in zip(coords, new_grid.grid_shape, strict=True))
            and all(r.stop <= e for r, e in zip(region, new_grid.shape, strict=True))
        ):
            past.append((key, coords))  # not wholly inside the new extent
    _clear_each(layout, new_grid, grid_now, past)


def clear_appended(layout: Layout, grid: ChunkGrid, axis: int, grid_now: GridNow) -> None:
    """Before an append's ``zarr.json`` (``layout``: the array grown; ``grid``: as stored now): the chunks
    the appended rows fall in, cleared past the stored extent, so that what a shrink's clean-up has not
    reached yet (or a killed one left) never shows between the new document and the append's data. No
    listing: one read per chunk (a write only where something is there to clear)."""
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
    layout: Layout, new_grid: ChunkGrid, grid_now: GridNow, past: Sequence[tuple[str, Coords]]
) -> None:
    """Each chunk of ``past`` cleared past the extent stored when it is rewritten. The chunks wholly past
    ``new_grid`` first, in one update that never reads their values (deleted under the locks; with
    conditional writes, at the version a ``HEAD`` gave), except those the extent stored now reaches
    (another client grew the array): read and cleared with the others (:func:`_clear_read`). A corrupt
    chunk does not stop the others: once all are done, a CodecError names every one left uncleared."""
    beyond = [key for key, coords in past if _wholly_past(coords, new_grid)]
    reached: list[str] = []  # of ``beyond``: inside the extent stored now, to be read
    failed: list[tuple[str, CodecError]] = []
    make = _maker(layout, new_grid, grid_now, dict(past), reached, failed)
    store, outside = layout.store, set(beyond)
    with _requests(store, len(past)) as each:
        if beyond:
            try:
                store.update(beyond, make, each, unread=beyond)
            finally:
                cache.invalidate(store, beyond)
        _clear_read(store, make, each, [key for key, _ in past if key not in outside] + reached)
    if failed:
        names = [k for k, _ in failed]
        raise CodecError(
            f"the array was resized, but {len(names)} chunk(s) reaching past its new end could not be "
            f"cleared and may show old values if it grows again: {names[:8]}; {failed[0][1]}",
            key=names[0],
        )


def _maker(
    layout: Layout,
    new_grid: ChunkGrid,
    grid_now: GridNow,
    coords_of: dict[str, Coords],
    reached: list[str],
    failed: list[tuple[str, CodecError]],
) -> Make:
    """The ``make`` of :func:`_clear_each`'s updates: each stored chunk cleared past the grid read after
    it; an unread one deleted when it lies wholly past that grid, else left for a read (``reached``); one
    that cannot be decoded left as it is (``failed``)."""

    def make(stored: dict[str, bytes | None]) -> dict[str, Buffer | None]:
        grid = grid_now() if any(v is not None for v in stored.values()) else None  # read after the chunks
        if grid is None or not _same_chunks(grid, new_grid):
            return {}  # no array any more, or other chunks: each left as it is
        new: dict[str, Buffer | None] = {}
        for key, value in stored.items():
            if value is None:
                continue
            if value is UNREAD:
                if _wholly_past(coords_of[key], grid):
                    new[key] = None
                elif key not in reached:
                    reached.append(key)
                continue
            try:
                new[key] = _cleared(layout, grid, key, coords_of[key], value)
            except CodecError as exc:
                failed.append((key, exc))
        return new

    return make


def _clear_read(store: Store, make: Make, each: Each, keys: list[str]) -> None:
    """``keys`` read and made anew (:func:`_maker`): one by one where a read costs no round trip, else 16
    per update (as many chunks in memory)."""
    per = 1 if store.capabilities.low_latency else 16
    for i in range(0, len(keys), per):
        batch = keys[i : i + per]
        try:
            store.update(batch, make, each)
        finally:
            cache.invalidate(store, batch)


@contextlib.contextmanager
def _requests(store: Store, n: int) -> Iterator[Each]:
    """How :func:`_clear_each`'s updates (``n`` chunks) run single keys' requests: as :func:`_clear_read`
    reads them, on a pool for the call."""
    workers = 1 if store.capabilities.low_latency else min(n, 16)
    if workers <= 1:
        yield one_by_one
        return
    with threads.once("rectizarr-clear", workers) as pool:

        def each(fn: Callable[[str], R], some: Sequence[str]) -> list[R]:
            return list(pool.map(fn, some))

        yield each


def _wholly_past(coords: Coords, grid: ChunkGrid) -> bool:
    """Whether chunk ``coords`` lies wholly past ``grid``'s extent (outside its chunk grid)."""
    return any(c >= n for c, n in zip(coords, grid.grid_shape, strict=True))


def _same_chunks(grid: ChunkGrid, other: ChunkGrid) -> bool:
    """Whether chunk ``i`` covers the same positions in both grids (regular ones with one chunk shape)."""
    shape = grid.regular_chunk_shape
    return grid == other or (shape is not None and shape == other.regular_chunk_shape)


class _Scratch(MemoryStore):
    """One chunk's value in memory, for :func:`_cleared` alone: it takes no locks, which its caller's hold
    would make nested ones (see :mod:`rectizarr.stores.locks`)."""

    def lock(self, keys: Iterable[str]) -> AbstractContextManager[None]:
        return contextlib.nullcontext()


def _only(chunk: np.ndarray, axis: int, n: int, fill: np.ndarray) -> bool:
    """Whether ``chunk`` holds the fill value (``fill``: its bytes) from ``n`` on along ``axis``."""
    if n >= chunk.shape[axis]:
        return True
    part = np.ascontiguousarray(np.moveaxis(chunk, axis, 0)[n:]).reshape(-1)
    if fill.size in (1, 2, 4, 8):  # one integer comparison per element
        as_int = np.dtype(f"u{fill.size}")
        return bool((part.view(as_int) == fill.view(as_int)[0]).all())
    return bool((part.view(np.uint8).reshape(-1, fill.size) == fill).all())


def _cleared(layout: Layout, grid: ChunkGrid, key: str, coords: Coords, stored: bytes) -> bytes | None:
    """``stored`` (chunk ``coords``) with everything past ``grid``'s extent reset to the fill value (the
    write path of a store of its own does that to a chunk written whole); None when nothing else is left
    (or the chunk lies wholly past the extent); ``stored`` itself when nothing lies past it."""
    if _wholly_past(coords, grid):
        return None  # wholly past the end as stored now
    region = grid.chunk_region(coords)  # clipped to the extent
    if all(r.stop - r.start == n for r, n in zip(region, grid.chunk_shape(coords), strict=True)):
        return stored
    if isinstance(layout, ChunkedLayout) and not layout.dtype.hasobject:  # nothing there to clear: no encode
        whole = replace(layout, grid=grid)
        chunk = decode(whole.pipeline, stored, whole.spec(coords), key)
        fill = np.full(1, layout.fill_value, chunk.dtype).view(np.uint8)
        if all(_only(chunk, axis, r.stop - r.start, fill) for axis, r in enumerate(region)):
            cache.hand_over(layout.store, key, stored, whole.pipeline, chunk)  # the append's write decodes it
            return stored
    scratch, out = _Scratch(), _Scratch()
    scratch.set(key, stored)
    now = replace(layout, store=scratch, grid=grid)
    plan = orthogonal_plan(now.dims, region)
    data = empty(plan.shape, layout.dtype)
    read(now, plan, data)
    write(replace(now, store=out), plan, data)  # into no stored chunk: the fill value past the extent
    cleared = out.get(key)
    return stored if cleared == stored else cleared  # (nothing there to clear: no write)
