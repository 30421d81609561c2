"""The two kinds of grid axis: :class:`FixedDim` (one chunk size, O(1) memory whatever the chunk count)
and :class:`VaryingDim` (explicit edges, kept as runs so ``[[1, 10**8]]`` costs two numbers). Both answer
the ``Dim`` protocol of :mod:`rectizarr.indexing.axis` arithmetically; nothing here lists every chunk
unless asked to (``data_lens``, ``edges``), and that is refused past ``MAX_EDGES``."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from rectizarr import tuning
from rectizarr._util import ceildiv, is_int
from rectizarr.errors import MetadataError, SelectionError, UnsupportedError

IntArray: TypeAlias = npt.NDArray[np.int64]
Runs: TypeAlias = tuple[tuple[int, int], ...]  # (value, count) pairs

INT64_MAX = 2**63 - 1
MAX_EDGES = 10**8  # explicit edges per dimension (800 MB as int64)


def _listable(n: int) -> int:
    """``n`` when that many chunks along one axis can be listed one by one, else ``UnsupportedError``."""
    if n > MAX_EDGES:
        raise UnsupportedError(
            f"{n} chunks along one axis are too many to list one by one (at most {MAX_EDGES})"
        )
    return n


def _chunk(i: int, stop: int, what: str = "chunk index") -> int:
    i = operator.index(i)
    if not 0 <= i < stop:
        raise SelectionError(f"{what} {i} is out of range [0, {stop})")
    return i


def _int_array(values: npt.ArrayLike, stop: int, what: str) -> IntArray:
    """``values`` as int64, every one checked to lie in ``[0, stop)``."""
    a = np.asarray(values)
    if a.size == 0:
        return a.astype(np.int64)
    if a.dtype.kind not in "iu":
        raise SelectionError(f"{what} must be integers, got dtype {a.dtype}")
    lo, hi = int(a.min()), int(a.max())
    if lo < 0 or hi >= stop:
        raise SelectionError(f"{what} {lo if lo < 0 else hi} is out of range [0, {stop})")
    return a.astype(np.int64, copy=False)


def check_edge_count(n: int, path: str | None) -> None:
    """Refuse (``UnsupportedError`` at ``path``) more than ``MAX_EDGES`` explicit edges along one axis."""
    if n > MAX_EDGES:
        raise UnsupportedError(
            f"{n} explicit chunk edges along one axis; at most {MAX_EDGES} are supported", path=path
        )


@dataclass(frozen=True, slots=True)
class FixedDim:
    """A dimension with one chunk size (regular grid, or a rectilinear bare-int step); the last chunk
    may overhang the extent and is still encoded at ``size``."""

    size: int
    extent: int

    def __post_init__(self) -> None:
        if not (is_int(self.size) and 1 <= self.size <= INT64_MAX):
            raise MetadataError(f"chunk size must be an integer in [1, 2**63), got {self.size!r}")
        if not (is_int(self.extent) and self.extent >= 0):
            raise MetadataError(f"extent must be an integer >= 0, got {self.extent!r}")
        object.__setattr__(self, "size", int(self.size))
        object.__setattr__(self, "extent", int(self.extent))

    @property
    def nchunks(self) -> int:
        return ceildiv(self.extent, self.size)

    def offset(self, i: int) -> int:
        return _chunk(i, self.nchunks) * self.size

    def edge(self, i: int) -> int:
        _chunk(i, self.nchunks)
        return self.size

    def data_len(self, i: int) -> int:
        return min(self.size, self.extent - _chunk(i, self.nchunks) * self.size)

    def chunk_of(self, idx: int) -> int:
        return _chunk(idx, self.extent, "array index") // self.size

    def chunks_of(self, idx: npt.ArrayLike) -> IntArray:
        return _int_array(idx, self.extent, "array index") // self.size

    def offsets_of(self, chunks: npt.ArrayLike) -> IntArray:
        return _int_array(chunks, self.nchunks, "chunk index") * self.size

    def edges_of(self, chunks: npt.ArrayLike) -> IntArray:
        return np.full(_int_array(chunks, self.nchunks, "chunk index").shape, self.size, dtype=np.int64)

    def data_lens_of(self, chunks: npt.ArrayLike) -> IntArray:
        c = _int_array(chunks, self.nchunks, "chunk index")
        out = np.full(c.shape, self.size, dtype=np.int64)
        if c.size:  # only the last chunk can be short; no arithmetic on a possibly huge extent
            last = self.nchunks - 1
            out[c == last] = self.data_len(last)
        return out

    def unique_edges(self) -> IntArray:
        return np.array([self.size], dtype=np.int64)

    def data_lens(self) -> tuple[int, ...]:
        return tuple(self.data_lens_of(np.arange(_listable(self.nchunks))).tolist())

    def data_len_runs(self) -> Runs:
        """``(data_len, count)`` runs of the chunks in order, in O(1) whatever the chunk count."""
        n = self.nchunks
        last = self.data_len(n - 1) if n else self.size
        if last == self.size:
            return ((self.size, n),) if n else ()
        return ((self.size, n - 1), (last, 1)) if n > 1 else ((last, 1),)


@dataclass(frozen=True, slots=True, eq=False)
class VaryingDim:
    """A dimension with explicit edges kept as runs: edge ``values[r]`` repeated ``counts[r]`` times
    (neighbouring runs differ), so ``[[1, 10**8]]`` costs two numbers, not 10**8 edges. ``starts`` and
    ``offsets`` (one more entry than runs) are the chunk index and the array index where each run starts
    and the last one ends. Build it with :meth:`from_edges` or :meth:`from_runs`. Edges may sum past the
    extent; :attr:`edges` and :attr:`cumsum` expand them (at most ``MAX_EDGES``)."""

    values: IntArray
    counts: IntArray
    extent: int
    starts: IntArray
    offsets: IntArray
    nchunks: int

    @classmethod
    def from_edges(cls, edges: npt.ArrayLike, extent: int, *, path: str | None = None) -> VaryingDim:
        """Validate ``edges`` (integers >= 1 summing to >= ``extent``) and keep them as runs."""
        a = np.asarray(edges)
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
            raise MetadataError(
                f"chunk edges must be a flat sequence of integers, got {a.dtype} with shape {a.shape}",
                path=path,
            )
        check_edge_count(a.size, path)
        if a.size and (int(a.min()) < 1 or int(a.max()) > INT64_MAX):
            raise MetadataError("chunk edges must be integers in [1, 2**63)", path=path)
        a = a.astype(np.int64)
        firsts = np.flatnonzero(np.concatenate(([True], a[1:] != a[:-1]))) if a.size else a
        return cls._build(a[firsts], np.diff(np.append(firsts, a.size)), extent, path)

    @classmethod
    def from_runs(
        cls, values: npt.ArrayLike, counts: npt.ArrayLike, extent: int, *, path: str | None = None
    ) -> VaryingDim:
        """Edge ``values[r]`` repeated ``counts[r]`` times (integers >= 1 each), summing to >= ``extent``."""
        v, c = np.asarray(values), np.asarray(counts)
        if (
            v.ndim != 1
            or v.shape != c.shape
            or (v.size and not (v.dtype.kind in "iu" and c.dtype.kind in "iu"))
        ):
            raise MetadataError("chunk edge runs must be two flat integer sequences of one length", path=path)
        if v.size and (min(int(v.min()), int(c.min())) < 1 or max(int(v.max()), int(c.max())) > INT64_MAX):
            raise MetadataError("chunk edges and their counts must be integers in [1, 2**63)", path=path)
        return cls._build(v.astype(np.int64), c.astype(np.int64), extent, path)

    @classmethod
    def _build(cls, v: IntArray, c: IntArray, extent: int, path: str | None) -> VaryingDim:
        if not (is_int(extent) and extent >= 0):
            raise MetadataError(f"extent must be an integer >= 0, got {extent!r}", path=path)
        starts = _checked_cumsum(c, "there are 2**63 chunk edges or more", path)
        if v.size > 1 and bool(np.any(v[1:] == v[:-1])):  # merge equal neighbours: one form per edge list
            firsts = np.flatnonzero(np.concatenate(([True], v[1:] != v[:-1])))
            v, c = v[firsts], np.diff(starts[np.append(firsts, v.size)])
            starts = _checked_cumsum(c, "", path)
        if v.size and bool(np.any(v > INT64_MAX // c)):
            raise MetadataError("chunk edges sum to 2**63 or more", path=path)
        offsets = _checked_cumsum(v * c, "chunk edges sum to 2**63 or more", path)
        if int(offsets[-1]) < extent:
            raise MetadataError(
                f"chunk edges sum to {int(offsets[-1])}, less than the extent {extent}", path=path
            )
        for a in (v, c, starts, offsets):
            a.flags.writeable = False
        extent = int(extent)
        n = 0
        if extent:
            r = int(np.searchsorted(offsets, extent - 1, side="right")) - 1
            n = int(starts[r]) + (extent - 1 - int(offsets[r])) // int(v[r]) + 1
        return cls(v, c, extent, starts, offsets, n)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, VaryingDim):
            return NotImplemented
        return (
            self.extent == other.extent
            and np.array_equal(self.values, other.values)
            and np.array_equal(self.counts, other.counts)
        )

    def __hash__(self) -> int:
        return hash((self.extent, self.values.tobytes(), self.counts.tobytes()))

    @property
    def total(self) -> int:
        """The sum of every declared edge (>= the extent)."""
        return int(self.offsets[-1])

    @property
    def edges(self) -> IntArray:
        """Every declared edge, expanded (read-only; ``UnsupportedError`` past ``MAX_EDGES``)."""
        _listable(int(self.starts[-1]))
        out = np.repeat(self.values, self.counts)
        out.flags.writeable = False
        return out

    @property
    def cumsum(self) -> IntArray:
        """The offsets ``[0, e0, e0+e1, ...]`` of every declared edge, expanded (read-only)."""
        out = np.concatenate(([0], np.cumsum(self.edges))).astype(np.int64)
        out.flags.writeable = False
        return out

    def _run(self, c: Any) -> Any:
        """The run of chunk ``c``: ``c`` itself when every run has one edge (a plain edge list)."""
        return c if self.values.size == self.starts[-1] else np.searchsorted(self.starts, c, side="right") - 1

    def _offsets(self, c: Any) -> Any:
        r = self._run(c)
        return self.offsets[r] + (c - self.starts[r]) * self.values[r]

    def _chunks(self, idx: Any) -> Any:
        r = np.searchsorted(self.offsets, idx, side="right") - 1
        return self.starts[r] + (idx - self.offsets[r]) // self.values[r]

    def _edges(self, c: Any) -> Any:
        return self.values[self._run(c)]

    def offset(self, i: int) -> int:
        return int(self._offsets(_chunk(i, self.nchunks)))

    def edge(self, i: int) -> int:
        return int(self._edges(_chunk(i, self.nchunks)))

    def data_len(self, i: int) -> int:
        i = _chunk(i, self.nchunks)
        return min(int(self._edges(i)), self.extent - int(self._offsets(i)))

    def chunk_of(self, idx: int) -> int:
        return int(self._chunks(_chunk(idx, self.extent, "array index")))

    def chunks_of(self, idx: npt.ArrayLike) -> IntArray:
        return np.asarray(self._chunks(_int_array(idx, self.extent, "array index")), dtype=np.int64)

    def offsets_of(self, chunks: npt.ArrayLike) -> IntArray:
        return np.asarray(self._offsets(_int_array(chunks, self.nchunks, "chunk index")), dtype=np.int64)

    def edges_of(self, chunks: npt.ArrayLike) -> IntArray:
        return np.asarray(self._edges(_int_array(chunks, self.nchunks, "chunk index")), dtype=np.int64)

    def data_lens_of(self, chunks: npt.ArrayLike) -> IntArray:
        c = _int_array(chunks, self.nchunks, "chunk index")
        return np.asarray(np.minimum(self._edges(c), self.extent - self._offsets(c)), dtype=np.int64)

    def unique_edges(self) -> IntArray:
        values = self.values
        if values.size > tuning.current().bincount_edges and int(np.max(values)) <= 4 * values.size:
            return np.flatnonzero(np.bincount(values)).astype(np.int64)
        return np.unique(values)

    def data_lens(self) -> tuple[int, ...]:
        return tuple(self.data_lens_of(np.arange(_listable(self.nchunks))).tolist())

    def data_len_runs(self) -> Runs:
        """``(data_len, count)`` runs of the chunks in order, in O(runs)."""
        n = self.nchunks
        if not n:
            return ()
        r = int(np.searchsorted(self.starts, n - 1, side="right"))  # runs up to the last chunk's
        values, counts = self.values[:r].tolist(), self.counts[:r].tolist()
        counts[-1] = n - int(self.starts[r - 1])
        last = self.data_len(n - 1)
        if last != values[-1]:
            counts[-1] -= 1
            values.append(last)
            counts.append(1)
        out: list[tuple[int, int]] = []
        for v, c in zip(values, counts, strict=True):
            if out and out[-1][0] == v:
                out[-1] = (v, out[-1][1] + c)
            elif c:
                out.append((v, c))
        return tuple(out)

    def runs_json(self) -> list[int | list[int]]:
        """The edges as written to JSON (see :func:`compress_rle`), without expanding them."""
        if bool(np.all(self.counts == 1)):
            return self.values.tolist()  # type: ignore[no-any-return]
        return [
            v if n == 1 else [v, n] for v, n in zip(self.values.tolist(), self.counts.tolist(), strict=True)
        ]


def _checked_cumsum(a: IntArray, message: str, path: str | None) -> IntArray:
    """``[0, a0, a0+a1, ...]`` of positive int64 values, ``MetadataError(message)`` when it overflows."""
    out = np.zeros(a.size + 1, dtype=np.int64)
    np.cumsum(a, out=out[1:])
    if a.size > 1 and bool(np.any(out[1:] <= out[:-1])):  # each step adds < 2**63: the first wrap decreases
        raise MetadataError(message, path=path)
    return out


Dim: TypeAlias = FixedDim | VaryingDim


def all_data_lens(dims: Sequence[Dim]) -> tuple[tuple[int, ...], ...]:
    """Every chunk's data_len, per axis; ``UnsupportedError`` past ``MAX_EDGES`` chunks in total across
    the axes (four axes of ``[[1, 10**8]]`` would be 3 GB of Python tuples: use ``data_len_runs``)."""
    total = sum(d.nchunks for d in dims)
    if total > MAX_EDGES:
        raise UnsupportedError(
            f"{total} chunks in total across the axes are too many to list one by one (at "
            f"most {MAX_EDGES}); ask for their runs instead"
        )
    return tuple(d.data_lens() for d in dims)
