"""Chunk grids, rectilinear first.

A grid is a tuple of per-dimension objects (:mod:`rectizarr.core.dims`): :class:`FixedDim` (one chunk size,
O(1) memory whatever the chunk count) or :class:`VaryingDim` (explicit edges, kept as runs). "Regular" is only a
serialisation choice (:attr:`ChunkGrid.kind`): every regular grid is an all-``FixedDim`` grid.

Vocabulary: *extent* = array length along an axis; *edge* = a chunk's declared (codec) length; *data_len*
= the part of an edge inside the extent; *offset* = array index where a chunk starts. Explicit edges may
run past the extent: only the chunks that overlap ``[0, extent)`` are addressable (``nchunks``), but every
declared edge is kept, serialised and reported by ``unique_edges``.

:func:`rectizarr.core.grid_json.parse_chunk_grid` reads the ``chunk_grid`` JSON object, either decoded or
as raw bytes, with the checks at the end of this module; :meth:`ChunkGrid.to_json` writes it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from rectizarr._util import Shape, ceildiv, is_int, json_path, prod
from rectizarr.core.dims import (
    INT64_MAX,
    Dim,
    FixedDim,
    IntArray,
    Runs,
    VaryingDim,
    all_data_lens,
    check_edge_count,
)
from rectizarr.errors import MetadataError, SelectionError

__all__ = ["FixedDim", "Runs", "VaryingDim", "all_data_lens"]  # re-exported from core.dims

ResizePolicy: TypeAlias = Literal["new_chunk", "repeat"]
AxisResizePolicy: TypeAlias = ResizePolicy | Sequence[int] | npt.NDArray[np.integer[Any]] | None
_RESIZE_POLICIES = ("new_chunk", "repeat")


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
            is_int(c) and 0 <= c < d.nchunks for d, c in zip(self.dims, coords, strict=True)
        )

    def to_json(self) -> dict[str, Any]:
        shape = self.regular_chunk_shape
        if self.kind == "regular" and shape is not None:
            return {"name": "regular", "configuration": {"chunk_shape": list(shape)}}
        return {
            "name": "rectilinear",
            "configuration": {"kind": "inline", "chunk_shapes": declared_sizes(self)},
        }

    def resize(
        self, new_shape: Shape, policy: ResizePolicy | Sequence[AxisResizePolicy] = "new_chunk"
    ) -> ChunkGrid:
        """The grid for ``new_shape``. Fixed dimensions only change their extent. An explicit-edge axis
        keeps its edges when it shrinks or stays within them; when it grows past them its policy adds
        edges: ``"new_chunk"`` one edge for the whole growth (zarr-python), ``"repeat"`` copies of the last
        edge until covered, or a sequence of new edges that must cover the growth. ``policy`` is one
        string for all axes or one entry per axis (None: the default, ``"new_chunk"``)."""
        extents = as_extents(new_shape, "new_shape")
        if len(extents) != self.ndim:
            raise MetadataError(f"new shape {extents} has {len(extents)} dimensions, the grid {self.ndim}")
        if not isinstance(policy, str | Sequence | np.ndarray) or isinstance(policy, bytes):
            raise MetadataError(
                f"chunks {policy!r} for a resize must be 'new_chunk', 'repeat' or one entry per "
                "axis (None, a policy name, or a list of new edges)"
            )
        policies = [policy] * self.ndim if isinstance(policy, str) else list(policy)
        if len(policies) != self.ndim:
            raise MetadataError(f"{len(policies)} resize policies for {self.ndim} dimensions")
        dims = tuple(
            _resize_dim(d, e, p, f"policy[{axis}]")
            for axis, (d, e, p) in enumerate(zip(self.dims, extents, policies, strict=True))
        )
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
        each, summing to >= the extent; dask-style tuples of tuples work), where ``[edge, count]`` pairs
        stand for ``count`` edges (the run-length form of the JSON: ``[[10, 10**8], 3]``, kept as runs).
        All ints -> a regular grid; any sequence -> rectilinear, with int axes kept as bare-int steps."""
        extents = as_extents(shape, "shape")
        if (
            not isinstance(chunks, Sequence | np.ndarray)
            or isinstance(chunks, str | bytes)
            or len(chunks) != len(extents)
        ):
            raise MetadataError(
                f"chunks {chunks!r} do not give one entry for each of {len(extents)} dimensions"
            )
        dims: list[Dim] = []
        for axis, (spec, extent) in enumerate(zip(chunks, extents, strict=True)):
            path = json_path("chunks", axis)
            if is_int(spec):
                dims.append(FixedDim(positive_int(spec, path), extent))
            elif isinstance(spec, Sequence) and any(isinstance(x, list | tuple) for x in spec):
                dims.append(VaryingDim.from_runs(*rle_runs(spec, path), extent, path=path))
            elif isinstance(spec, Sequence | np.ndarray) and not isinstance(spec, str | bytes) and len(spec):
                dims.append(VaryingDim.from_edges(edge_array(spec, path), extent, path=path))
            else:
                raise MetadataError(
                    f"expected a chunk size or a non-empty sequence of edges, got {spec!r}", path=path
                )
        return cls(tuple(dims), "rectilinear" if any(isinstance(d, VaryingDim) for d in dims) else "regular")


def _resize_dim(d: Dim, extent: int, policy: AxisResizePolicy, path: str) -> Dim:
    policy = "new_chunk" if policy is None else policy
    if isinstance(policy, str) and policy not in _RESIZE_POLICIES:
        raise MetadataError(
            f"unknown resize policy {policy!r}; use one of {_RESIZE_POLICIES} or a list of edges", path=path
        )
    if isinstance(d, FixedDim):
        if not isinstance(policy, str):
            raise MetadataError("explicit edges given for an axis with a fixed chunk size", path=path)
        return FixedDim(d.size, extent)
    growth = extent - d.total
    if growth <= 0:  # a policy only acts on an axis that grows past its edges
        return VaryingDim.from_runs(d.values, d.counts, extent, path=path)
    if not isinstance(policy, str):
        if not isinstance(policy, Sequence | np.ndarray) or isinstance(policy, bytes):
            raise MetadataError(
                f"expected a policy name or a list of new edges for a growing axis, got {policy!r}", path=path
            )
        if any(isinstance(x, list | tuple) for x in policy):  # run-length pairs, as create_array takes them
            new, counts = rle_runs(list(policy), path)
        else:
            new = edge_array(policy, path)
            counts = np.ones(new.size, dtype=np.int64)
        if int((new * counts).sum()) < growth:
            raise MetadataError(
                f"new edges {np.repeat(new, counts).tolist()} do not cover the growth of {growth}", path=path
            )
    elif policy == "repeat":
        if not d.values.size:
            raise MetadataError("cannot repeat the last edge of an axis without edges", path=path)
        last = int(d.values[-1])
        new, counts = np.array([last], dtype=np.int64), np.array([ceildiv(growth, last)], dtype=np.int64)
    else:
        new, counts = np.array([growth], dtype=np.int64), np.ones(1, dtype=np.int64)
    return VaryingDim.from_runs(
        np.concatenate([d.values, new]), np.concatenate([d.counts, counts]), extent, path=path
    )


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
    """Edges as written to JSON: ``[edge, count]`` runs, those of one edge as bare ints."""
    return [v if n == 1 else [v, n] for v, n in runs_of(edges)]


def declared_sizes(grid: ChunkGrid) -> list[Any]:
    """The grid's chunk sizes as ``create_array`` takes them, as declared (an overhanging edge kept): an int
    per regular axis, and edges as ``[edge, count]`` runs where they repeat (never expanded)."""
    return [d.size if isinstance(d, FixedDim) else d.runs_json() for d in grid.dims]
