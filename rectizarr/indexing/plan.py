"""Chunk plans: a selection projected onto the chunks it touches (built by :mod:`rectizarr.indexing`).

Two layouts of the plan's *internal output* (``Plan.shape``), both a pure reshape of ``final_shape``:

* **orthogonal** — one axis per grid axis, integer-indexed axes kept with length 1 and an index array's
  shape flattened to its size. A projection holds one entry per axis in ``chunk_sel`` and ``out_sel``.
* **coordinate** — one flat axis of ``npoints`` in C order of ``final_shape``. A projection holds one
  chunk-local int64 array per axis (pointwise) and the flat output positions.

Every index tuple of a projection can be applied with plain numpy indexing and yields the axes in grid
order: when two or more entries of an orthogonal tuple are arrays, the tuple is given ``np.ix_`` shapes
(slices in it become shaped ``arange`` arrays), so ``chunk[p.chunk_sel]`` and ``out[p.out_sel]`` always
agree. Reads do ``out[p.out_sel] = chunk[p.chunk_sel]`` (coordinate: ``out.reshape(-1)[p.out_sel]``); writes
do the inverse from :meth:`Plan.value_to_internal`. Repeated indices keep their order inside a chunk (stable
sorts), so writes keep numpy's last-wins for basic, orthogonal and coordinate selections alike."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Literal, NamedTuple, TypeAlias

import numpy as np
import numpy.typing as npt

from rectizarr._util import Coords, Shape
from rectizarr._util import prod as _prod
from rectizarr.indexing.axis import AxisPlan, AxisSel, Dim, IntArray, group_starts
from rectizarr.pages import empty

WriteMode: TypeAlias = Literal["scalar", "view", "fancy", "mask"]
"""How numpy converts the value of ``a[sel] = value``: element, view, advanced, or whole-array mask
assignment (``a[mask] = v`` with ``mask.ndim == a.ndim`` takes only 0-d or 1-D values)."""

_SCALARS = (int, float, complex, bool, np.generic)
_KEY_LIMIT = 2**62


class ChunkProjection(NamedTuple):
    """One touched chunk: its coords, what to take inside it, and where that goes in the output. A named
    tuple: one is built per touched chunk (100,000 for a large read), cheaper than a frozen dataclass."""

    coords: Coords
    chunk_sel: tuple[AxisSel, ...]
    out_sel: tuple[AxisSel, ...] | IntArray
    complete: bool  # chunk_sel covers the chunk's whole valid region once: a write needs no read


@dataclass(frozen=True, slots=True)
class Plan(ABC):
    """A selection resolved against a grid; iterate it for one :class:`ChunkProjection` per touched chunk.
    ``chunk_coords[k]``: the coords of the ``k``-th projection (C order of the coords for orthogonal plans,
    increasing linear chunk id for coordinate plans)."""

    kind: Literal["orthogonal", "coordinate"]
    shape: Shape
    final_shape: Shape
    chunk_coords: IntArray
    write_mode: WriteMode

    @property
    def nchunks(self) -> int:
        return int(self.chunk_coords.shape[0])

    @abstractmethod
    def __iter__(self) -> Iterator[ChunkProjection]:
        """Yield the projections lazily, in the order of ``chunk_coords``."""

    def value_to_internal(self, value: npt.ArrayLike, dtype: npt.DTypeLike) -> npt.NDArray[np.generic]:
        """``value`` converted and broadcast as ``a[sel] = value`` would, then reshaped to ``shape``. Raises
        what numpy raises (ValueError for a shape mismatch or a sequence where an element is expected,
        OverflowError for a Python int out of range). The result may be a read-only view (of a scalar
        broadcast, or of ``value`` itself when it already has ``final_shape`` and ``dtype``)."""
        dt = np.dtype(dtype)
        if (
            isinstance(value, np.generic)
            and self.write_mode in ("fancy", "mask")
            and not (dt.kind in "SU" and isinstance(value, np.datetime64 | np.timedelta64))
        ):
            # numpy casts a scalar as an array there (NaN into int: no error), except a date or duration
            # into strings, which it sets as an element (its text cut to the width, where the cast raises)
            value = np.asarray(value)
        if dt.kind == "O" and isinstance(value, np.ndarray) and value.ndim == 0:
            value = value[()]  # a 0-d object array holds one element: store the element, as numpy does
        if (
            self.write_mode == "scalar"
            or isinstance(value, _SCALARS)
            or (isinstance(value, np.ndarray) and value.ndim == 0)
        ):
            one = np.empty((), dtype=dt)
            one[()] = value
            return np.broadcast_to(one, self.shape)
        if isinstance(value, np.ndarray) and value.dtype == dt and value.shape == self.final_shape:
            return value.reshape(self.shape)
        if self.write_mode == "mask":
            return _mask_value(np.asarray(value, dtype=dt), self.shape)
        if self.write_mode == "fancy" and not isinstance(value, np.ndarray):
            value = np.asarray(value, dtype=dt)
        out = empty(self.final_shape, dt)
        out[...] = value
        return out.reshape(self.shape)


def _mask_value(value: npt.NDArray[np.generic], shape: Shape) -> npt.NDArray[np.generic]:
    """numpy's rules for ``a[mask] = value`` (the mask has the array's ndim): 0-d, or 1-D of 1 or nnz."""
    if value.ndim > 1:
        raise TypeError(
            "NumPy boolean array indexing assignment requires a 0 or 1-dimensional input, "
            f"input has {value.ndim} dimensions"
        )
    n = _prod(shape)
    if value.size not in (1, n):
        raise ValueError(
            f"NumPy boolean array indexing assignment cannot assign {value.size} input values to "
            f"the {n} output values where the mask is true"
        )
    return np.broadcast_to(value, (n,)).reshape(shape)


def _arange(s: slice) -> IntArray:
    stop = -1 if s.stop is None else s.stop  # None only ends a negative-step slice at position 0
    return np.arange(s.start, stop, s.step, dtype=np.int64)


def _ix(sels: tuple[AxisSel, ...]) -> tuple[AxisSel, ...]:
    """``sels`` in ``np.ix_`` form (for two or more arrays in one tuple): slices become shaped aranges."""
    out = []
    for j, s in enumerate(sels):
        a = s if isinstance(s, np.ndarray) else _arange(s)
        shape = [1] * len(sels)
        shape[j] = a.size
        out.append(a.reshape(shape))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class OrthogonalPlan(Plan):
    axes: tuple[AxisPlan, ...]

    def __iter__(self) -> Iterator[ChunkProjection]:
        per_axis = [
            [(e.chunk, e.local, e.out, e.complete, isinstance(e.local, np.ndarray), isinstance(e.out, np.ndarray))
             for e in a.entries]
            for a in self.axes
        ]  # fmt: skip
        if per_axis and not any(e[4] or e[5] for a in per_axis for e in a):
            # Slices only (the common case): zip per-field products, no np.ix_ forms (100,000 chunks).
            fields = [product(*[[e[k] for e in a] for a in per_axis]) for k in range(4)]
            for coords, local, out, complete in zip(*fields, strict=True):
                yield ChunkProjection(coords, local, out, all(complete))
            return
        for combo in product(*per_axis):
            if not combo:  # a 0-d array: its single chunk
                yield ChunkProjection((), (), (), True)
                continue
            coords, local, out, complete, local_arrays, out_arrays = zip(*combo, strict=True)
            local = _ix(local) if sum(local_arrays) > 1 else local
            out = _ix(out) if sum(out_arrays) > 1 else out
            yield ChunkProjection(coords, local, out, all(complete))

    def projections_at(self, positions: Iterable[tuple[int, ...]]) -> Iterator[ChunkProjection]:
        """The projections of the given combinations of entry positions (``axes[i].entries[pos[i]]``),
        without iterating the others (a sparse read touches few of a huge number of chunks)."""
        entries = [a.entries for a in self.axes]
        for pos in positions:
            combo = [entries[i][j] for i, j in enumerate(pos)]
            local, out = tuple(e.local for e in combo), tuple(e.out for e in combo)
            local = _ix(local) if sum(isinstance(x, np.ndarray) for x in local) > 1 else local
            out = _ix(out) if sum(isinstance(x, np.ndarray) for x in out) > 1 else out
            yield ChunkProjection(tuple(e.chunk for e in combo), local, out, all(e.complete for e in combo))


def _cartesian(chunks: Sequence[IntArray]) -> IntArray:
    lens = [c.size for c in chunks]
    total = _prod(tuple(lens))
    if total <= 64:  # a few chunks (a small read): one array from Python ints, no numpy call per axis
        combos = list(product(*[c.tolist() for c in chunks]))
        return np.array(combos, dtype=np.int64).reshape(total, len(chunks))
    out = np.empty((total, len(chunks)), dtype=np.int64)
    for i, c in enumerate(chunks):
        out[:, i] = np.tile(np.repeat(c, _prod(tuple(lens[i + 1 :]))), _prod(tuple(lens[:i])))
    return out


def orthogonal(axes: Sequence[AxisPlan], final_shape: Shape, write_mode: WriteMode) -> OrthogonalPlan:
    shape = tuple(a.length for a in axes)
    coords = _cartesian([a.chunks for a in axes])
    return OrthogonalPlan("orthogonal", shape, final_shape, coords, write_mode, tuple(axes))


@dataclass(frozen=True, slots=True)
class CoordinatePlan(Plan):
    order: IntArray  # flat output positions, stably sorted by chunk
    bounds: IntArray  # projection g covers order[bounds[g]:bounds[g + 1]]
    local: tuple[IntArray, ...]  # per axis, chunk-local indices aligned with `order`
    complete: npt.NDArray[np.bool_]

    def __iter__(self) -> Iterator[ChunkProjection]:
        bounds, local, order = self.bounds.tolist(), self.local, self.order
        rows = zip(self.chunk_coords.tolist(), self.complete.tolist(), strict=True)
        for g, (coords, complete) in enumerate(rows):
            a, b = bounds[g], bounds[g + 1]
            yield ChunkProjection(tuple(coords), tuple([x[a:b] for x in local]), order[a:b], complete)


def _compress(a: IntArray) -> IntArray:
    """Dense ranks of ``a`` (same order, values in ``[0, number of distinct values)``)."""
    return np.unique(a, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _linear_key(chunks: Sequence[IntArray], npoints: int) -> IntArray:
    """A per-point int64 key ordered like the chunk coords (lexicographic), never overflowing."""
    key = np.zeros(npoints, dtype=np.int64)
    bound = 1  # key < bound
    for c in chunks:
        radix = int(np.max(c)) + 1
        if bound * radix > _KEY_LIMIT:  # astronomically many chunks: rank the values actually present
            key, c = _compress(key), _compress(c)
            bound, radix = int(np.max(key)) + 1, int(np.max(c)) + 1
        key = key * radix + c
        bound *= radix
    return key


def coordinate(
    dims: Sequence[Dim], arrays: Sequence[IntArray], final_shape: Shape, write_mode: WriteMode
) -> CoordinatePlan:
    """Pointwise plan of checked int64 index arrays (one per grid axis) broadcastable to ``final_shape``."""
    ndim, npoints = len(dims), _prod(final_shape)
    if npoints == 0:
        empty = np.zeros(0, dtype=np.int64)
        return CoordinatePlan(
            "coordinate", (0,), final_shape, np.zeros((0, ndim), dtype=np.int64), write_mode,
            empty, np.zeros(1, dtype=np.int64), tuple(empty for _ in dims), np.zeros(0, dtype=bool),
        )  # fmt: skip
    flat = [np.broadcast_to(a, final_shape).reshape(-1) for a in arrays]
    chunks = [d.chunks_of(f) for d, f in zip(dims, flat, strict=True)]
    key = _linear_key(chunks, npoints)
    order = np.argsort(key, kind="stable").astype(np.int64)
    starts = group_starts(key[order])
    bounds = np.append(starts, npoints)
    counts = np.diff(bounds)
    first = order[starts]
    coords = np.array([c[first] for c in chunks], dtype=np.int64).reshape(ndim, starts.size).T.copy()
    local, lin, sizes = [], np.zeros(npoints, dtype=np.int64), np.ones(starts.size, dtype=np.int64)
    for i, d in enumerate(dims):
        lens = d.data_lens_of(coords[:, i])
        loc = flat[i][order] - np.repeat(d.offsets_of(coords[:, i]), counts)
        lin = lin * np.repeat(lens, counts) + loc
        sizes *= lens
        local.append(loc)
    complete = counts == sizes  # then: no repeats
    for g in np.flatnonzero(complete).tolist():
        complete[g] = np.unique(lin[bounds[g] : bounds[g + 1]]).size == sizes[g]
    return CoordinatePlan(
        "coordinate", (npoints,), final_shape, coords, write_mode, order, bounds, tuple(local), complete
    )
