"""Minimal test dims and a reference executor for chunk plans (``rectizarr.indexing``), shared by the unit
tables (tests/unit/indexing/test_selection.py) and the property tests (tests/property/test_indexing_props.py):
the array lives as a dict of numpy chunks of their declared edge shape (fill outside the extent), and plans
are executed exactly as an engine would (``out[out_sel] = chunk[chunk_sel]`` and the inverse for writes)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from rectizarr.indexing import ChunkProjection, Plan

FILL = -1  # chunk tails outside the extent
UNSET = -7  # output slots no projection wrote

# ------------------------------------------------------------------------------------ minimal dims


class FixedDim:
    """One chunk size; strict: any out-of-range index or chunk id fails the test."""

    def __init__(self, size: int, extent: int) -> None:
        self.size, self.extent = size, extent
        self.nchunks = -(-extent // size)

    def _c(self, c: Any) -> npt.NDArray[np.int64]:
        a = np.asarray(c, dtype=np.int64)
        assert a.size == 0 or (a.min() >= 0 and a.max() < self.nchunks), (c, self.nchunks)
        return a

    def _i(self, i: Any) -> npt.NDArray[np.int64]:
        a = np.asarray(i, dtype=np.int64)
        assert a.size == 0 or (a.min() >= 0 and a.max() < self.extent), (i, self.extent)
        return a

    def offset(self, i: int) -> int:
        return int(self._c(i)) * self.size

    def edge(self, i: int) -> int:
        self._c(i)
        return self.size

    def data_len(self, i: int) -> int:
        return min(self.size, self.extent - self.offset(i))

    def chunk_of(self, idx: int) -> int:
        return int(self._i(idx)) // self.size

    def chunks_of(self, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return self._i(idx) // self.size

    def offsets_of(self, chunks: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return self._c(chunks) * self.size

    def data_lens_of(self, chunks: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return np.minimum(self.size, self.extent - self._c(chunks) * self.size)


class VaryingDim(FixedDim):
    """Explicit edges (they may run past the extent); only chunks overlapping the extent exist."""

    def __init__(self, edges: Sequence[int], extent: int) -> None:
        assert sum(edges) >= extent
        self.edges = np.asarray(edges, dtype=np.int64)
        self.cum = np.concatenate(([0], np.cumsum(self.edges)))
        self.extent = extent
        self.nchunks = int(np.count_nonzero(self.cum[:-1] < extent))

    def offset(self, i: int) -> int:
        return int(self.cum[self._c(i)])

    def edge(self, i: int) -> int:
        return int(self.edges[self._c(i)])

    def data_len(self, i: int) -> int:
        return min(self.edge(i), self.extent - self.offset(i))

    def chunk_of(self, idx: int) -> int:
        return int(np.searchsorted(self.cum, self._i(idx), side="right")) - 1

    def chunks_of(self, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return np.searchsorted(self.cum, self._i(idx), side="right").astype(np.int64) - 1

    def offsets_of(self, chunks: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return self.cum[self._c(chunks)]

    def data_lens_of(self, chunks: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        c = self._c(chunks)
        out: npt.NDArray[np.int64] = np.minimum(self.edges[c], self.extent - self.cum[c])
        return out


# ------------------------------------------------------------------------------------ reference executor


class ChunkStore:
    """An array stored as a dict of chunks of their declared edge shape, FILL outside the extent."""

    def __init__(self, dims: Sequence[FixedDim], data: npt.NDArray[np.int64]) -> None:
        self.dims = dims
        self.chunks: dict[tuple[int, ...], npt.NDArray[np.int64]] = {}
        for coords in itertools.product(*(range(d.nchunks) for d in dims)):
            chunk = np.full([d.edge(c) for d, c in zip(dims, coords, strict=True)], FILL, dtype=np.int64)
            chunk[self.valid(coords)] = data[self.region(coords)]
            self.chunks[coords] = chunk

    def region(self, coords: tuple[int, ...]) -> tuple[slice, ...]:
        return tuple(
            slice(d.offset(c), d.offset(c) + d.data_len(c)) for d, c in zip(self.dims, coords, strict=True)
        )

    def valid(self, coords: tuple[int, ...]) -> tuple[slice, ...]:
        return tuple(slice(0, d.data_len(c)) for d, c in zip(self.dims, coords, strict=True))

    def to_array(self) -> npt.NDArray[np.int64]:
        out = np.full([d.extent for d in self.dims], UNSET, dtype=np.int64)
        for coords, chunk in self.chunks.items():
            out[self.region(coords)] = chunk[self.valid(coords)]
            tail = np.ones(chunk.shape, dtype=bool)
            tail[self.valid(coords)] = False
            assert (chunk[tail] == FILL).all(), f"chunk {coords}: the tail outside the extent was written"
        return out


def read(store: ChunkStore, plan: Plan) -> npt.NDArray[np.int64]:
    out = np.full(plan.shape, UNSET, dtype=np.int64)
    for p in plan:
        chunk = store.chunks[p.coords]
        if plan.kind == "coordinate":
            out.reshape(-1)[p.out_sel] = chunk[p.chunk_sel]
        else:
            out[p.out_sel] = chunk[p.chunk_sel]
    return out.reshape(plan.final_shape)


def write(store: ChunkStore, plan: Plan, value: Any, *, trash_complete: bool = False) -> None:
    """Write ``value``; with ``trash_complete`` complete chunks start as garbage (as if never read)."""
    internal = plan.value_to_internal(value, np.dtype(np.int64))
    assert internal.shape == plan.shape
    for p in plan:
        chunk = store.chunks[p.coords]
        if trash_complete and p.complete:
            chunk[store.valid(p.coords)] = -99
        if plan.kind == "coordinate":
            chunk[p.chunk_sel] = internal.reshape(-1)[p.out_sel]
        else:
            chunk[p.chunk_sel] = internal[p.out_sel]


def as_indices(sel: slice | npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    if isinstance(sel, slice):
        assert sel.step > 0 and sel.start >= 0 and sel.stop is not None, sel
        return np.arange(sel.start, sel.stop, sel.step)
    assert sel.dtype == np.int64, sel.dtype
    return sel


def check_projections(dims: Sequence[FixedDim], plan: Plan) -> list[ChunkProjection]:
    """Every chunk_sel stays inside [0, data_len); `complete` is exact; chunk_coords lists the projections."""
    projections = list(plan)
    assert plan.nchunks == len(projections)
    assert plan.chunk_coords.dtype == np.int64 and plan.chunk_coords.shape == (len(projections), len(dims))
    assert [p.coords for p in projections] == [tuple(r) for r in plan.chunk_coords.tolist()]
    assert len({p.coords for p in projections}) == len(projections)
    for p in projections:
        lens = [d.data_len(c) for d, c in zip(dims, p.coords, strict=True)]
        assert len(p.chunk_sel) == len(dims)
        for sel, n in zip(p.chunk_sel, lens, strict=True):
            idx = as_indices(sel)
            assert idx.size == 0 or (np.min(idx) >= 0 and np.max(idx) < n), (sel, n)
        if plan.kind == "coordinate":
            assert isinstance(p.out_sel, np.ndarray) and p.out_sel.dtype == np.int64
        hits = np.zeros(lens, dtype=np.int64)
        np.add.at(hits, p.chunk_sel, 1)
        assert p.complete == bool((hits == 1).all()), (p, hits)
    return projections


def touched(dims: Sequence[FixedDim], select: Callable[[npt.NDArray[np.int64]], Any]) -> set[tuple[int, ...]]:
    """The chunks holding at least one element numpy selects."""
    if not dims:
        return {()}
    planes = np.meshgrid(*(d.chunks_of(np.arange(d.extent)) for d in dims), indexing="ij")
    picked = [np.asarray(select(p)).reshape(-1).tolist() for p in planes]
    return set(zip(*picked, strict=True))


def roundtrip(
    dims: Sequence[FixedDim],
    plan: Plan,
    select: Callable[[npt.NDArray[Any]], Any],
    assign: Callable[[npt.NDArray[np.int64], Any], None],
    value: Any,
) -> None:
    """Read and write through the plan and compare with numpy on the full array."""
    data = np.arange(int(np.prod([d.extent for d in dims], dtype=np.int64))).reshape([d.extent for d in dims])
    store = ChunkStore(dims, data)
    check_projections(dims, plan)
    expected = np.asarray(select(data))
    got = read(store, plan)
    assert got.shape == expected.shape == plan.final_shape
    np.testing.assert_array_equal(got, expected)
    assert {p.coords for p in plan} == touched(dims, select)
    want = data.copy()
    try:
        assign(want, value)
    except (ValueError, TypeError) as e:  # numpy rejects the value: so must value_to_internal
        with pytest.raises(type(e)):
            plan.value_to_internal(value, np.dtype(np.int64))
        return
    for trash in (False, True):
        store = ChunkStore(dims, data)
        write(store, plan, value, trash_complete=trash)
        np.testing.assert_array_equal(store.to_array(), want)


def values_for(shape: tuple[int, ...], seed: int = 0) -> npt.NDArray[np.int64]:
    return np.random.default_rng(seed).integers(1000, 2000, size=shape)
