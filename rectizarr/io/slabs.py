"""Dense reads of many small uncompressed chunks from a local directory, slab by slab.

A read of a block of an array stored as thousands of small raw chunks (one file each) spends its time on
the system calls and on per-chunk Python. Here each chunk file is read straight into its place in a staging
buffer (``readv``: no bytes object, no decode, no projection), and a whole slab of chunks (every touched
chunk that shares its first-axis index) is pasted into the output with two NumPy copies. Used only when
the selection is a step-1 block of a regular grid (every chunk has the same stored shape); anything
else, or a chunk of the wrong size, goes the general way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from rectizarr._util import prod
from rectizarr.codecs.base import ChunkSpec
from rectizarr.core.grid import FixedDim
from rectizarr.indexing.plan import OrthogonalPlan

if TYPE_CHECKING:
    from rectizarr.io.engine import Layout

__all__ = ["read_raw_slabs"]

_SLAB_MAX = 64 << 20  # staging bytes per slab


def read_raw_slabs(layout: Layout, plan: OrthogonalPlan, out: np.ndarray, keys: list[str], spec: ChunkSpec,
                   reread: Callable[[int], np.ndarray | None]) -> bool:
    """Fill ``out`` from the raw chunks at ``keys`` (C order of ``plan.chunk_coords``), all of ``spec``;
    False (nothing read) when the selection is not a step-1 block of a regular grid. ``reread(i)`` reads
    and decodes the i-th chunk the general way, for a chunk whose stored size is not the expected one
    (it raises the usual error, or returns the chunk if it changed meanwhile; None: it is gone)."""
    read_into = getattr(layout.store, "_read_into", None)
    dims = layout.grid.dims
    if read_into is None or not dims or not all(isinstance(d, FixedDim) for d in dims):
        return False
    starts = []  # per axis: where the selection starts inside its first touched chunk
    for axis, (a, d) in enumerate(zip(plan.axes, dims, strict=True)):
        assert isinstance(d, FixedDim)
        expect, at = 0, None  # next output position; where the previous entry ended in the array
        for e in a.entries:
            if not (isinstance(e.local, slice) and e.local.step == 1 and isinstance(e.out, slice)
                    and e.out.step == 1 and e.out.start == expect):
                return False
            begin = e.chunk * d.size + e.local.start
            if axis and at is not None and begin != at:  # later axes are pasted whole: no gaps
                return False
            expect, at = e.out.stop, e.chunk * d.size + e.local.stop
        first = a.entries[0].local
        assert isinstance(first, slice)
        starts.append(first.start)
    counts = [int(a.chunks.size) for a in plan.axes]
    per_slab = prod(tuple(counts[1:]))
    nbytes = spec.nbytes
    if per_slab * nbytes > _SLAB_MAX:
        return False
    inner = spec.shape
    stage = np.empty((per_slab, nbytes), np.uint8)
    views = [memoryview(row) for row in stage]
    blocks = stage.view(spec.dtype).reshape(*counts[1:], *inner)
    nd = len(inner)
    # staging axes (n1.., c0, c1..) -> image axes (c0, n1, c1, n2, c2, ...)
    order = [nd - 1] + [i for a in range(1, nd) for i in (a - 1, nd - 1 + a)]
    image = np.empty([inner[0]] + [n * c for n, c in zip(counts[1:], inner[1:], strict=True)], spec.dtype)
    image_split = image.reshape([inner[0]] + [x for n, c in zip(counts[1:], inner[1:], strict=True) for x in (n, c)])
    sel_rest = tuple(slice(s, s + a.length) for s, a in zip(starts[1:], plan.axes[1:], strict=True))
    flat = blocks.reshape(per_slab, *inner)
    for j0, e0 in enumerate(plan.axes[0].entries):
        base = j0 * per_slab
        sizes = read_into(keys[base : base + per_slab], views)
        for j, n in enumerate(sizes):
            if n == nbytes:
                continue
            chunk = None if n < 0 else reread(base + j)  # another size: the general way reports it
            flat[j] = layout.fill_value if chunk is None else chunk
        image_split[...] = blocks.transpose(order)
        assert isinstance(e0.local, slice) and isinstance(e0.out, slice)
        out[(e0.out, *(slice(None),) * (nd - 1))] = image[(e0.local, *sel_rest)]
    return True
