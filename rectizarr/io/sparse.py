"""Which chunks are stored: listings of an array, and reads of very many chunks of a mostly empty array
that list what is stored and visit only that (when the store's listing is consistent and not dense)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import product

import numpy as np

from rectizarr._util import Coords, prod
from rectizarr.indexing import ChunkProjection, OrthogonalPlan, Plan
from rectizarr.io.layout import ChunkedLayout, Layout, ShardedLayout
from rectizarr.tuning import Tuning


def stored_chunk_keys(layout: Layout) -> Iterator[tuple[str, Coords]]:
    """Every stored chunk key of the array that lies inside the grid, with its coords."""
    grid_shape = layout.grid.grid_shape
    for key in layout.store.list_prefix(layout.prefix):
        rel = key[len(layout.prefix) :]
        if rel == "zarr.json" or "/zarr.json" in rel:
            continue
        coords = layout.key_encoding.decode(rel, len(grid_shape))
        if coords is None or len(coords) != len(grid_shape):
            continue
        if all(0 <= c < n for c, n in zip(coords, grid_shape, strict=True)):
            yield key, coords


def stored_projections(layout: Layout, plan: Plan, t: Tuning) -> list[ChunkProjection] | None:
    """The projections of ``plan`` whose chunk (or shard) is stored, found with one listing of the array,
    or ``None`` when that does not pay (more stored chunks than ``t.sparse_max_fraction`` of the touched
    ones, a plan that is not orthogonal, or a store whose listing may lag or be unavailable). For plans of
    at least ``t.sparse_min_chunks``."""
    if not isinstance(plan, OrthogonalPlan) or not layout.store.capabilities.consistent_listing:
        return None
    match layout:
        case ShardedLayout():  # shards are few next to their inner chunks: compare with the touched shards
            per_axis = [
                layout.grid.dims[axis].chunks_of(a.chunks * layout.inner_shape[axis])
                for axis, a in enumerate(plan.axes)
            ]
            touched = prod(tuple(int(np.unique(k).size) for k in per_axis))
            limit = max(1, int(touched * t.sparse_max_fraction))
        case ChunkedLayout():
            if _mostly_stored(layout, plan, t):  # a dense read: a few existence checks instead of a listing
                return None
            per_axis = [a.chunks for a in plan.axes]
            limit = int(plan.nchunks * t.sparse_max_fraction)
    present: list[Coords] = []
    for _, coords in stored_chunk_keys(layout):
        if len(present) >= limit:
            return None
        present.append(coords)
    combos: list[tuple[int, ...]] = []
    for coords in sorted(present):  # per axis, the plan entries inside the stored chunk (plans are sorted)
        spans = [
            range(int(np.searchsorted(k, c, "left")), int(np.searchsorted(k, c, "right")))
            for k, c in zip(per_axis, coords, strict=True)
        ]
        if all(spans):
            combos.extend(product(*spans))
    return list(plan.projections_at(combos))


def _mostly_stored(layout: ChunkedLayout, plan: OrthogonalPlan, t: Tuning) -> bool:
    """True when at least a quarter of a few touched chunks spread over the plan are stored: a dense read,
    for which listing the array (one file per chunk) would not pay."""
    picks = np.linspace(0, plan.nchunks - 1, t.sparse_probes).astype(np.int64)
    keys = set(layout.keys(plan.chunk_coords[picks]))
    return sum(layout.store.exists(k) for k in keys) >= t.sparse_max_fraction * len(keys)
