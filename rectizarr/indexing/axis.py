"""One axis of a chunk plan: checking an axis's index values and mapping them to chunks.

Everything here is vectorised over the selected indices or over the touched chunks; the per-chunk
:class:`AxisChunk` objects are built lazily, only for the chunks a read or write visits. A slice never
materialises its indices unless it selects fewer elements than the chunks its range spans."""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, overload

import numpy as np
import numpy.typing as npt

from rectizarr import tuning
from rectizarr._util import is_int
from rectizarr.errors import SelectionError, SelectionValueError

IntArray: TypeAlias = npt.NDArray[np.int64]
_MAX_PLANNED = sys.maxsize // 64  # chunks (or elements) of one axis: past this numpy cannot hold their arrays
AxisSel: TypeAlias = slice | IntArray
"""A per-axis selection inside a chunk or the output: a slice or a 1-D int64 index array."""


class Dim(Protocol):
    """One axis of a chunk grid, as consumed by the indexers (``rectizarr.core.grid`` implements it)."""

    @property
    def extent(self) -> int: ...
    @property
    def nchunks(self) -> int: ...
    def offset(self, i: int) -> int: ...
    def edge(self, i: int) -> int: ...
    def data_len(self, i: int) -> int: ...
    def chunk_of(self, idx: int) -> int: ...
    def chunks_of(self, idx: IntArray) -> IntArray: ...
    def offsets_of(self, chunks: IntArray) -> IntArray: ...
    def data_lens_of(self, chunks: IntArray) -> IntArray: ...


@dataclass(frozen=True, slots=True)
class AxisChunk:
    """One touched chunk along one axis: where its selected elements sit in the chunk and the output."""

    chunk: int
    local: AxisSel  # positive-step slice or int64 array, inside [0, data_len)
    out: AxisSel  # slice (any step) or int64 array of positions along the output axis
    complete: bool  # local covers [0, data_len) exactly once


class AxisEntries(Sequence[AxisChunk]):
    """The :class:`AxisChunk` of each touched chunk, built only when asked for: a sparse read of a huge
    selection looks at the few stored chunks and never builds the millions of others."""

    __slots__ = ("_built", "_make", "_n")

    def __init__(self, n: int, make: Callable[[int], AxisChunk]) -> None:
        self._n = n
        self._make = make
        self._built: dict[int, AxisChunk] = {}  # visited entries, shared by every projection using them

    def _get(self, j: int) -> AxisChunk:
        entry = self._built.get(j)
        if entry is None:
            entry = self._built[j] = self._make(j)
        return entry

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> AxisChunk: ...
    @overload
    def __getitem__(self, i: slice) -> list[AxisChunk]: ...
    def __getitem__(self, i: int | slice) -> AxisChunk | list[AxisChunk]:
        if isinstance(i, slice):
            return [self._get(j) for j in range(*i.indices(self._n))]
        if not -self._n <= i < self._n:
            raise IndexError(i)
        return self._get(i % self._n)

    def __iter__(self) -> Iterator[AxisChunk]:
        return (self._get(j) for j in range(self._n))


@dataclass(frozen=True, slots=True)
class AxisPlan:
    """The chunks one axis touches (``chunks``, increasing), how to build each one's :class:`AxisChunk`
    (``entries``, lazily), and the axis's internal output length. ``span``: the array range ``[start,
    stop)`` when the axis selects it whole, in order (an integer, a step-1 slice): batch strategies then
    work out every chunk's part by arithmetic, with no entry built."""

    length: int
    chunks: IntArray
    entries: Sequence[AxisChunk]
    span: tuple[int, int] | None = None


def out_of_bounds(value: int, axis: int, extent: int) -> SelectionError:
    return SelectionError(f"index {value} is out of bounds for axis {axis} with extent {extent}")


def check_index(value: object, axis: int, extent: int) -> int:
    """An integer index (negatives wrap), checked against ``extent``."""
    if not is_int(value):
        raise bad_index(value, axis)
    i = operator.index(value)  # type: ignore[arg-type]
    if not -extent <= i < extent:
        raise out_of_bounds(i, axis, extent)
    return i + extent if i < 0 else i


def bad_index(value: object, axis: int) -> SelectionError:
    if isinstance(value, float | np.floating):
        what = f"non-integer (float) index {value!r}"
    elif isinstance(value, bool | np.bool_):
        what = f"boolean scalar index {value!r} (not supported; use a boolean array)"
    else:
        what = f"unsupported index {value!r} of type {type(value).__name__}"
    return SelectionError(f"{what} for axis {axis}: use integers, slices, integer arrays or boolean masks")


def check_index_array(arr: npt.NDArray[Any], axis: int, extent: int) -> IntArray:
    """An integer array of any shape (negatives wrap) as int64, every entry checked against ``extent``."""
    if arr.dtype.kind not in "iu":
        raise SelectionError(
            f"index array of dtype {arr.dtype} for axis {axis}: arrays used as indices must be of integer "
            "or boolean type"
        )
    if arr.size == 0:
        return arr.astype(np.int64)
    lo, hi = int(np.min(arr)), int(np.max(arr))
    if hi >= extent:
        raise out_of_bounds(hi, axis, extent)
    if lo < -extent:
        raise out_of_bounds(lo, axis, extent)
    out = arr.astype(np.int64)  # a copy: never alias the caller's array
    if lo < 0:
        out[out < 0] += extent
    return out


def check_slice(sl: slice, axis: int, extent: int) -> tuple[int, int, int]:
    """``slice.indices(extent)`` with SelectionErrors for non-integer bounds and a zero step."""
    for part in (sl.start, sl.stop, sl.step):
        if part is not None and not is_int(part):
            raise SelectionError(
                f"slice bound {part!r} for axis {axis}: slice indices must be integers or None"
            )
    if sl.step is not None and sl.step == 0:
        raise SelectionValueError(f"slice step cannot be zero (axis {axis})")
    return sl.indices(extent)


def empty_axis(length: int = 0) -> AxisPlan:
    """An axis that touches no chunk (of ``length`` when another axis selects nothing)."""
    return AxisPlan(length, np.empty(0, dtype=np.int64), ())


def axis_from_int(dim: Dim, i: int) -> AxisPlan:
    """An already checked integer: one chunk, one element, the output axis kept with length 1."""
    c = dim.chunk_of(i)
    local = i - dim.offset(c)
    entry = AxisChunk(c, slice(local, local + 1, 1), slice(0, 1, 1), dim.data_len(c) == 1)
    return AxisPlan(1, np.array([c], dtype=np.int64), (entry,), (i, i + 1))


def reversed_positions(top: int, count: int) -> slice:
    """The output positions ``top, top - 1, ..., top - count + 1`` as a slice."""
    stop = top - count
    return slice(top, stop if stop >= 0 else None, -1)


def axis_from_slice(dim: Dim, start: int, stop: int, step: int) -> AxisPlan:
    """A normalised slice (``slice.indices`` output), in O(chunks touched) arithmetic."""
    n = len(range(start, stop, step))
    if n == 0:
        return empty_axis()
    span = (start, start + n) if step == 1 else None
    first, s = (start, step) if step > 0 else (start + (n - 1) * step, -step)
    c0, c1 = dim.chunk_of(first), dim.chunk_of(first + (n - 1) * s)
    if c0 == c1:  # one chunk (a small read): plain integers
        local = first - dim.offset(c0)
        out = slice(0, n, 1) if step > 0 else reversed_positions(n - 1, n)
        entry = AxisChunk(c0, slice(local, local + (n - 1) * s + 1, s), out, n == dim.data_len(c0))
        return AxisPlan(n, np.array([c0], dtype=np.int64), (entry,), span)
    if c1 - c0 < tuning.current().few_chunks:  # a few chunks (a window): plain integers, no numpy call
        return _axis_few(dim, first, s, n, step, c0, c1, span)
    if min(n, c1 - c0 + 1) > _MAX_PLANNED:
        raise SelectionError(
            f"the selection of {n} elements along axis of extent {dim.extent} touches "
            f"{c1 - c0 + 1} chunks: too many to plan; select less"
        )
    if s == 1 or n > c1 - c0 + 1:
        chunks = np.arange(c0, c1 + 1, dtype=np.int64)
        offs, lens = dim.offsets_of(chunks), dim.data_lens_of(chunks)
        k_lo = np.clip(-((first - offs) // s), 0, n)  # first selected element at or after the chunk start
        k_hi = np.clip(-((first - offs - lens) // s), 0, n)
        keep = k_hi > k_lo
        chunks, offs, lens, k_lo, k_hi = chunks[keep], offs[keep], lens[keep], k_lo[keep], k_hi[keep]
    else:  # sparse steps: fewer elements than chunks in range
        ch = dim.chunks_of(first + np.arange(n, dtype=np.int64) * s)
        k_lo = group_starts(ch)
        k_hi = np.append(k_lo[1:], n)
        chunks = ch[k_lo]
        offs, lens = dim.offsets_of(chunks), dim.data_lens_of(chunks)
    counts = k_hi - k_lo
    local_start = first + k_lo * s - offs

    def make(j: int) -> AxisChunk:
        ls, cnt, kl = int(local_start[j]), int(counts[j]), int(k_lo[j])
        out = slice(kl, kl + cnt, 1) if step > 0 else reversed_positions(n - 1 - kl, cnt)
        return AxisChunk(int(chunks[j]), slice(ls, ls + (cnt - 1) * s + 1, s), out, cnt == int(lens[j]))

    return AxisPlan(n, chunks, AxisEntries(chunks.size, make), span)


def _axis_few(
    dim: Dim, first: int, s: int, n: int, step: int, c0: int, c1: int, span: tuple[int, int] | None
) -> AxisPlan:
    """:func:`axis_from_slice` over the few chunks ``c0..c1`` (``s`` > 0: the ascending step)."""
    chunks: list[int] = []
    entries: list[AxisChunk] = []
    k = 0  # selected elements before the chunk
    for c in range(c0, c1 + 1):
        off, length = dim.offset(c), dim.data_len(c)
        lo = max(k, -((first - off) // s))  # the first selected element at or after the chunk's start
        hi = min(n, -((first - off - length) // s))
        if hi <= lo:
            continue
        cnt, ls = hi - lo, first + lo * s - off
        out = slice(lo, hi, 1) if step > 0 else reversed_positions(n - 1 - lo, cnt)
        chunks.append(c)
        entries.append(AxisChunk(c, slice(ls, ls + (cnt - 1) * s + 1, s), out, cnt == length))
        k = hi
    return AxisPlan(n, np.array(chunks, dtype=np.int64), tuple(entries), span)


def group_starts(keys: IntArray) -> IntArray:
    """Start positions of the runs of equal values in a non-empty sorted array."""
    return np.concatenate(([0], np.flatnonzero(keys[1:] != keys[:-1]) + 1)).astype(np.int64)


def positions(pos: IntArray) -> AxisSel:
    """Output positions as a slice when they form an arithmetic progression, else as the array."""
    if pos.size == 1:
        p = int(pos[0])
        return slice(p, p + 1, 1)
    d = int(pos[1] - pos[0])
    if d != 0 and bool(np.all(np.diff(pos) == d)):
        stop = int(pos[-1]) + d
        return slice(int(pos[0]), stop if stop >= 0 else None, d)
    return pos


def axis_from_array(dim: Dim, idx: IntArray) -> AxisPlan:
    """A checked 1-D int64 array (any order, repeats allowed): sorted once, grouped per chunk. The sort is
    stable, so repeated indices keep their order and a write keeps numpy's last-wins."""
    n = idx.size
    if n == 0:
        return empty_axis()
    order = np.argsort(idx, kind="stable").astype(np.int64)
    sidx = idx[order]
    ch = dim.chunks_of(sidx)
    starts = group_starts(ch)
    ends = np.append(starts[1:], n)
    counts = ends - starts
    chunks = ch[starts]
    lens = dim.data_lens_of(chunks)
    local = sidx - np.repeat(dim.offsets_of(chunks), counts)
    repeat = np.zeros(n, dtype=np.int64)
    repeat[1:] = sidx[1:] == sidx[:-1]
    distinct = np.add.reduceat(repeat, starts) == 0  # a run never straddles chunks, so no boundary fix
    run = distinct & (local[ends - 1] - local[starts] + 1 == counts)
    complete = distinct & (counts == lens)

    def make(g: int) -> AxisChunk:
        a, b = int(starts[g]), int(ends[g])
        loc: AxisSel = slice(int(local[a]), int(local[a]) + b - a, 1) if run[g] else local[a:b]
        return AxisChunk(int(chunks[g]), loc, positions(order[a:b]), bool(complete[g]))

    return AxisPlan(n, chunks, AxisEntries(chunks.size, make))


def axis_from_mask(mask: npt.NDArray[np.bool_], axis: int, extent: int) -> IntArray:
    """A 1-D boolean mask of length ``extent`` as the sorted int64 indices it selects."""
    if mask.ndim != 1 or mask.shape[0] != extent:
        raise SelectionError(
            f"boolean index of shape {mask.shape} does not match axis {axis} with extent {extent}"
        )
    return np.flatnonzero(mask).astype(np.int64)
