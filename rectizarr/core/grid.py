"""Chunk grids, rectilinear first.

A grid is a tuple of per-dimension objects: :class:`FixedDim` (one chunk size, O(1) memory whatever the
chunk count) or :class:`VaryingDim` (explicit edges with precomputed prefix sums). "Regular" is only a
serialisation choice (:attr:`ChunkGrid.kind`): every regular grid is an all-``FixedDim`` grid.

Vocabulary: *extent* = array length along an axis; *edge* = a chunk's declared (codec) length; *data_len*
= the part of an edge inside the extent; *offset* = array index where a chunk starts. Explicit edges may
run past the extent: only the chunks that overlap ``[0, extent)`` are addressable (``nchunks``), but every
declared edge is kept, serialised and reported by ``unique_edges``.

:func:`rectizarr.core.grid_json.parse_chunk_grid` reads the ``chunk_grid`` JSON object, either decoded or
as raw bytes, with the checks at the end of this module; :meth:`ChunkGrid.to_json` writes it.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from rectizarr._util import Shape, ceildiv, is_int, json_path, prod
from rectizarr.errors import MetadataError, SelectionError, UnsupportedError

__all__ = [
    "AxisResizePolicy",
    "all_data_lens",
    "ChunkGrid",
    "Dim",
    "FixedDim",
    "ResizePolicy",
    "Runs",
    "VaryingDim",
    "as_extents",
    "check_edge_count",
    "check_positive",
    "compress_rle",
    "edge_array",
    "expand_rle",
    "positive_int",
    "rle_runs",
    "runs_of",
]

IntArray: TypeAlias = npt.NDArray[np.int64]
ResizePolicy: TypeAlias = Literal["new_chunk", "repeat"]
Runs: TypeAlias = tuple[tuple[int, int], ...]  # (value, count) pairs
AxisResizePolicy: TypeAlias = ResizePolicy | Sequence[int] | npt.NDArray[np.integer[Any]] | None

INT64_MAX = 2**63 - 1
MAX_EDGES = 10**8  # explicit edges per dimension (800 MB as int64)
_RESIZE_POLICIES = ("new_chunk", "repeat")


def _listable(n: int) -> int:
    """``n`` when that many chunks along one axis can be listed one by one, else ``UnsupportedError``."""
    if n > MAX_EDGES:
        raise UnsupportedError(f"{n} chunks along one axis are too many to list one by one (at most {MAX_EDGES})")
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
        raise UnsupportedError(f"{n} explicit chunk edges along one axis; at most {MAX_EDGES} are supported",
                               path=path)


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
            raise MetadataError(f"chunk edges must be a flat sequence of integers, got {a.dtype} "
                                f"with shape {a.shape}", path=path)
        check_edge_count(a.size, path)
        if a.size and (int(a.min()) < 1 or int(a.max()) > INT64_MAX):
            raise MetadataError("chunk edges must be integers in [1, 2**63)", path=path)
        a = a.astype(np.int64)
        firsts = np.flatnonzero(np.concatenate(([True], a[1:] != a[:-1]))) if a.size else a
        return cls._build(a[firsts], np.diff(np.append(firsts, a.size)), extent, path)

    @classmethod
    def from_runs(cls, values: npt.ArrayLike, counts: npt.ArrayLike, extent: int, *,
                  path: str | None = None) -> VaryingDim:
        """Edge ``values[r]`` repeated ``counts[r]`` times (integers >= 1 each), summing to >= ``extent``."""
        v, c = np.asarray(values), np.asarray(counts)
        if v.ndim != 1 or v.shape != c.shape or (v.size and not (v.dtype.kind in "iu" and c.dtype.kind in "iu")):
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
            raise MetadataError(f"chunk edges sum to {int(offsets[-1])}, less than the extent {extent}",
                                path=path)
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
        return (self.extent == other.extent and np.array_equal(self.values, other.values)
                and np.array_equal(self.counts, other.counts))

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

    def _offsets(self, c: Any) -> Any:
        r = np.searchsorted(self.starts, c, side="right") - 1
        return self.offsets[r] + (c - self.starts[r]) * self.values[r]

    def _chunks(self, idx: Any) -> Any:
        r = np.searchsorted(self.offsets, idx, side="right") - 1
        return self.starts[r] + (idx - self.offsets[r]) // self.values[r]

    def _edges(self, c: Any) -> Any:
        return self.values[np.searchsorted(self.starts, c, side="right") - 1]

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
        return np.unique(self.values)

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
        return [v if n == 1 else [v, n] for v, n in zip(self.values.tolist(), self.counts.tolist(), strict=True)]


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
        raise UnsupportedError(f"{total} chunks in total across the axes are too many to list one by one (at "
                               f"most {MAX_EDGES}); ask for their runs instead")
    return tuple(d.data_lens() for d in dims)


@dataclass(frozen=True, slots=True)
class ChunkGrid:
    """The chunk grid of an array: one :class:`FixedDim`/:class:`VaryingDim` per axis. ``kind`` is how
    the grid is written to ``zarr.json``; ``"regular"`` requires every dimension to be fixed."""

    dims: tuple[Dim, ...]
    kind: Literal["regular", "rectilinear"]

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", tuple(self.dims))
        if self.kind not in ("regular", "rectilinear"):
            raise MetadataError(f"grid kind must be 'regular' or 'rectilinear', got {self.kind!r}")
        if self.kind == "regular" and self.regular_chunk_shape is None:
            raise MetadataError("a regular grid needs a fixed chunk size on every axis")

    @property
    def shape(self) -> Shape:
        return tuple(d.extent for d in self.dims)

    @property
    def ndim(self) -> int:
        return len(self.dims)

    @property
    def grid_shape(self) -> tuple[int, ...]:
        return tuple(d.nchunks for d in self.dims)

    @property
    def nchunks(self) -> int:
        return prod(self.grid_shape)

    @property
    def regular_chunk_shape(self) -> Shape | None:
        """The chunk shape when every dimension is fixed (whatever ``kind``), else None."""
        sizes = [d.size for d in self.dims if isinstance(d, FixedDim)]
        return tuple(sizes) if len(sizes) == len(self.dims) else None

    def _coords(self, coords: Sequence[int]) -> Sequence[int]:
        if len(coords) != len(self.dims):
            raise SelectionError(f"chunk coords {tuple(coords)} do not have {len(self.dims)} entries")
        return coords

    def chunk_shape(self, coords: Sequence[int]) -> Shape:
        """Declared (codec) shape of a chunk, also for chunks overhanging the extent."""
        return tuple(d.edge(c) for d, c in zip(self.dims, self._coords(coords), strict=True))

    def chunk_region(self, coords: Sequence[int]) -> tuple[slice, ...]:
        """The array region a chunk holds, clipped to the extent."""
        out = []
        for d, c in zip(self.dims, self._coords(coords), strict=True):
            start = d.offset(c)
            out.append(slice(start, start + d.data_len(c)))
        return tuple(out)

    def is_in_grid(self, coords: Sequence[int]) -> bool:
        return len(coords) == len(self.dims) and all(
            is_int(c) and 0 <= c < d.nchunks for d, c in zip(self.dims, coords, strict=True))

    def to_json(self) -> dict[str, Any]:
        shape = self.regular_chunk_shape
        if self.kind == "regular" and shape is not None:
            return {"name": "regular", "configuration": {"chunk_shape": list(shape)}}
        specs = [d.size if isinstance(d, FixedDim) else d.runs_json() for d in self.dims]
        return {"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": specs}}

    def resize(self, new_shape: Shape,
               policy: ResizePolicy | Sequence[AxisResizePolicy] = "new_chunk") -> ChunkGrid:
        """The grid for ``new_shape``. Fixed dimensions only change their extent. An explicit-edge axis
        keeps its edges when it shrinks or stays within them; when it grows past them its policy adds
        edges: ``"new_chunk"`` one edge for the whole growth (zarr-python), ``"repeat"`` copies of the last
        edge until covered, or a sequence of new edges that must cover the growth. ``policy`` is one
        string for all axes or one entry per axis (None: the default, ``"new_chunk"``)."""
        extents = as_extents(new_shape, "new_shape")
        if len(extents) != self.ndim:
            raise MetadataError(f"new shape {extents} has {len(extents)} dimensions, the grid {self.ndim}")
        policies = [policy] * self.ndim if isinstance(policy, str) else list(policy)
        if len(policies) != self.ndim:
            raise MetadataError(f"{len(policies)} resize policies for {self.ndim} dimensions")
        dims = tuple(_resize_dim(d, e, p, f"policy[{axis}]")
                     for axis, (d, e, p) in enumerate(zip(self.dims, extents, policies, strict=True)))
        return ChunkGrid(dims, self.kind)

    @classmethod
    def regular(cls, shape: Shape, chunk_shape: Sequence[int]) -> ChunkGrid:
        extents = as_extents(shape, "shape")
        if len(chunk_shape) != len(extents):
            raise MetadataError(f"chunk shape {tuple(chunk_shape)} does not match {len(extents)} dimensions")
        sizes = [positive_int(s, json_path("chunk_shape", axis)) for axis, s in enumerate(chunk_shape)]
        return cls(tuple(FixedDim(s, e) for s, e in zip(sizes, extents, strict=True)), "regular")

    @classmethod
    def from_chunks(cls, shape: Shape, chunks: Sequence[int | Sequence[int] | npt.NDArray[Any]]) -> ChunkGrid:
        """Grid from user-facing ``chunks``: per axis an int (fixed size) or a sequence of edges (>= 1
        each, summing to >= the extent; dask-style tuples of tuples work). All ints -> a regular grid;
        any sequence -> rectilinear, with int axes kept as bare-int steps."""
        extents = as_extents(shape, "shape")
        if not isinstance(chunks, Sequence | np.ndarray) or isinstance(chunks, str | bytes) \
                or len(chunks) != len(extents):
            raise MetadataError(f"chunks {chunks!r} do not give one entry for each of {len(extents)} dimensions")
        dims: list[Dim] = []
        for axis, (spec, extent) in enumerate(zip(chunks, extents, strict=True)):
            path = json_path("chunks", axis)
            if is_int(spec):
                dims.append(FixedDim(positive_int(spec, path), extent))
            elif isinstance(spec, Sequence | np.ndarray) and not isinstance(spec, str | bytes) and len(spec):
                dims.append(VaryingDim.from_edges(edge_array(spec, path), extent, path=path))
            else:
                raise MetadataError(f"expected a chunk size or a non-empty sequence of edges, got {spec!r}",
                                    path=path)
        return cls(tuple(dims), "rectilinear" if any(isinstance(d, VaryingDim) for d in dims) else "regular")


def _resize_dim(d: Dim, extent: int, policy: AxisResizePolicy, path: str) -> Dim:
    policy = "new_chunk" if policy is None else policy
    if isinstance(policy, str) and policy not in _RESIZE_POLICIES:
        raise MetadataError(f"unknown resize policy {policy!r}; use one of {_RESIZE_POLICIES} or a list of "
                            "edges", path=path)
    if isinstance(d, FixedDim):
        if not isinstance(policy, str):
            raise MetadataError("explicit edges given for an axis with a fixed chunk size", path=path)
        return FixedDim(d.size, extent)
    growth = extent - d.total
    if growth <= 0:  # a policy only acts on an axis that grows past its edges
        return VaryingDim.from_runs(d.values, d.counts, extent, path=path)
    if not isinstance(policy, str):
        new = edge_array(policy, path)
        if int(new.sum()) < growth:
            raise MetadataError(f"new edges {new.tolist()} do not cover the growth of {growth}", path=path)
        counts = np.ones(new.size, dtype=np.int64)
    elif policy == "repeat":
        if not d.values.size:
            raise MetadataError("cannot repeat the last edge of an axis without edges", path=path)
        last = int(d.values[-1])
        new, counts = np.array([last], dtype=np.int64), np.array([ceildiv(growth, last)], dtype=np.int64)
    else:
        new, counts = np.array([growth], dtype=np.int64), np.ones(1, dtype=np.int64)
    return VaryingDim.from_runs(np.concatenate([d.values, new]), np.concatenate([d.counts, counts]), extent,
                                path=path)


# --- JSON helpers ---------------------------------------------------------------------------------


def positive_int(x: Any, path: str) -> int:
    """``x`` as an int when it is an integer in ``[1, 2**63)``, else ``MetadataError`` at ``path``."""
    if not (is_int(x) and 1 <= x <= INT64_MAX):
        raise MetadataError(f"expected an integer >= 1, got {x!r}", path=path)
    return int(x)


def as_extents(shape: Shape, path: str) -> Shape:
    """``shape`` as a tuple of ints when every one is an integer >= 0, else ``MetadataError`` at ``path[axis]``."""
    for axis, e in enumerate(shape):
        if not (is_int(e) and e >= 0):
            raise MetadataError(f"expected an integer >= 0, got {e!r}", path=json_path(path, axis))
    return tuple(int(e) for e in shape)


def check_positive(a: IntArray, path: str) -> IntArray:
    """``a`` when every edge is >= 1, else ``MetadataError`` at ``path[k]`` of the first that is not."""
    bad = np.flatnonzero(a < 1)
    if bad.size:
        k = int(bad[0])
        raise MetadataError(f"expected an integer >= 1, got {int(a[k])}", path=json_path(path, k))
    return a


def edge_array(spec: Sequence[Any] | npt.NDArray[Any], path: str) -> IntArray:
    """A flat sequence of integer edges (each >= 1) as int64, errors naming the offending item."""
    if isinstance(spec, np.ndarray):
        if spec.ndim != 1 or (spec.size and spec.dtype.kind not in "iu"):
            raise MetadataError(f"expected a flat sequence of integers, got dtype {spec.dtype}", path=path)
        if spec.size and int(spec.max()) > INT64_MAX:
            k = int(np.argmax(spec))
            raise MetadataError(f"edge {int(spec[k])} is too large", path=json_path(path, k))
        return check_positive(spec.astype(np.int64), path)
    items = list(spec)
    if not set(map(type, items)) <= {int}:  # bools, floats, lists or numpy scalars: check one by one
        items = [positive_int(x, json_path(path, k)) for k, x in enumerate(items)]
    try:
        a = np.array(items, dtype=np.int64)
    except OverflowError:  # some item is outside int64: report the first invalid item
        a = np.array([positive_int(x, json_path(path, k)) for k, x in enumerate(items)], dtype=np.int64)
    return check_positive(a, path)


def rle_runs(spec: Sequence[Any], path: str = "$") -> tuple[IntArray, IntArray]:
    """A rectilinear dim-spec list of bare edges and ``[edge, count]`` pairs as ``(values, counts)``."""
    values = np.empty(len(spec), dtype=np.int64)
    counts = np.ones(len(spec), dtype=np.int64)
    for k, item in enumerate(spec):
        p = json_path(path, k)
        if isinstance(item, list | tuple):
            if len(item) != 2:
                raise MetadataError(f"a run must be [edge, count], got {list(item)!r}", path=p)
            values[k] = positive_int(item[0], json_path(p, 0))
            counts[k] = positive_int(item[1], json_path(p, 1))
        else:
            values[k] = positive_int(item, p)
    return values, counts


def expand_rle(spec: Sequence[Any], path: str = "$") -> IntArray:
    """Expand a rectilinear dim-spec list of bare edges and ``[edge, count]`` pairs into int64 edges."""
    values, counts = rle_runs(spec, path)
    if counts.size:
        check_edge_count(int(np.max(counts)), path)
        check_edge_count(int(counts.sum()), path)
    return np.repeat(values, counts)


def runs_of(values: npt.ArrayLike) -> Runs:
    """``(value, count)`` runs of equal neighbours."""
    a = np.asarray(values, dtype=np.int64)
    if a.size == 0:
        return ()
    starts = np.flatnonzero(np.concatenate(([True], a[1:] != a[:-1])))
    counts = np.diff(np.append(starts, a.size)).tolist()
    return tuple(zip(a[starts].tolist(), counts, strict=True))


def compress_rle(edges: npt.ArrayLike) -> list[int | list[int]]:
    """Edges as written to JSON: ``[edge, count]`` runs (runs of 1 as bare ints) when that is shorter
    than the plain list, else the plain list."""
    a = np.asarray(edges, dtype=np.int64)
    runs = runs_of(a)
    if len(runs) == a.size:
        return a.tolist()  # type: ignore[no-any-return]
    return [v if n == 1 else [v, n] for v, n in runs]
