"""Shape-changing ``array -> array`` codecs that keep the elements' C order: ``reshape`` (zarr-extensions)
and ``zarrs.squeeze`` (zarrs: drops the axes of length 1).

Neither moves data: the encoded chunk is the decoded one with another shape, so the stored bytes are those
of the chunk raveled in C order. A rectilinear grid gives chunks of several shapes; every combination of
axis lengths is checked when the array is opened (:meth:`map_axes`)."""

from __future__ import annotations

import itertools
from abc import abstractmethod
from collections.abc import Sequence
from math import prod
from typing import Any

import numpy as np

from rectizarr._util import Shape
from rectizarr.codecs.base import ArrayArrayCodec, ChunkSpec
from rectizarr.errors import MetadataError, UnsupportedError

#: at most this many distinct chunk shapes are checked at open (a rectilinear grid's per-axis lengths combined)
MAX_SHAPE_COMBINATIONS = 1 << 14


def _shapes(per_axis: Sequence[object]) -> list[tuple[int, ...]]:
    lengths = [sorted({int(e) for e in np.asarray(edges).reshape(-1).tolist()}) for edges in per_axis]
    if prod(len(x) for x in lengths) > MAX_SHAPE_COMBINATIONS:
        raise UnsupportedError(
            f"more than {MAX_SHAPE_COMBINATIONS} distinct chunk shapes to check for a shape-changing codec"
        )
    return [tuple(s) for s in itertools.product(*lengths)]


class _Reshaping(ArrayArrayCodec):
    infallible = True

    @abstractmethod
    def out_shape(self, shape: Shape) -> tuple[int, ...]:
        """The encoded shape of a chunk of ``shape`` (``MetadataError`` where there is none)."""

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        return spec.with_shape(self.out_shape(spec.shape))

    def map_axes(self, per_axis: Sequence[object]) -> list[object]:
        """The per-axis sets of lengths of the encoded chunks, over every chunk shape of ``per_axis``."""
        outs = [self.out_shape(s) for s in _shapes(per_axis)]
        ndims = {len(o) for o in outs}
        if len(ndims) > 1:
            raise MetadataError(
                f"{self.name} gives chunks of {sorted(ndims)} dimensions on this grid (its chunks "
                "have length 1 along an axis in some places only)"
            )
        ndim = ndims.pop() if ndims else 0
        return [np.unique(np.array([o[i] for o in outs], dtype=np.int64)) for i in range(ndim)]

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        return np.reshape(np.asarray(chunk), self.out_shape(spec.shape))

    def decode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        chunk = np.asarray(chunk)
        if chunk.size != spec.size:
            raise self.error(f"got {chunk.size} elements, the chunk has {spec.size}", spec.key)
        return np.reshape(chunk, spec.shape)


class ReshapeCodec(_Reshaping):
    """``reshape``: output axis ``i`` has a fixed length, the product of the lengths of some input axes
    (``[0, 1]``), or (``-1``, at most once) whatever makes the element counts equal."""

    name = "reshape"

    def __init__(self, shape: Sequence[int | Sequence[int]]) -> None:
        self.shape: tuple[int | tuple[int, ...], ...] = tuple(
            s if isinstance(s, int) else tuple(s) for s in shape
        )
        if sum(1 for s in self.shape if s == -1) > 1:
            raise MetadataError("-1 may stand for at most one output length")
        for s in self.shape:
            if isinstance(s, int) and s != -1 and s < 1:
                raise MetadataError(f"an output length must be positive or -1, not {s}")
        flat = [d for s in self.shape if isinstance(s, tuple) for d in s]
        if any(d < 0 for d in flat) or flat != sorted(set(flat)):
            raise MetadataError(f"the input axes named must increase strictly across the shape, got {flat}")

    def out_shape(self, shape: Shape) -> tuple[int, ...]:
        ndim = len(shape)
        total = prod(shape)
        out: list[int] = []
        for s in self.shape:
            if isinstance(s, tuple):
                if s and s[-1] >= ndim:
                    raise MetadataError(f"reshape names input axis {s[-1]} of a {ndim}-dimensional chunk")
                out.append(prod(shape[d] for d in s))
            else:
                out.append(s)
        if -1 in out:
            i = out.index(-1)
            known = prod(o for j, o in enumerate(out) if j != i)
            if known == 0 or total % known:
                raise MetadataError(
                    f"reshape {self._json()} cannot hold the {total} elements of a {list(shape)} chunk"
                )
            out[i] = total // known
        if prod(out) != total:
            raise MetadataError(
                f"reshape {self._json()} gives {out} ({prod(out)} elements) for a {list(shape)} "
                f"chunk ({total})"
            )
        for i, s in enumerate(self.shape):  # input axes named keep their place in the C order
            if (
                isinstance(s, tuple)
                and s
                and (prod(out[:i]) != prod(shape[: s[0]]) or prod(out[i + 1 :]) != prod(shape[s[-1] + 1 :]))
            ):
                raise MetadataError(
                    f"reshape output axis {i} ({list(s)}) does not line up with those input axes for "
                    f"a {list(shape)} chunk (output {out})"
                )
        return tuple(out)

    def _json(self) -> list[Any]:
        return [list(s) if isinstance(s, tuple) else s for s in self.shape]


class SqueezeCodec(_Reshaping):
    """``zarrs.squeeze``: the chunk without its axes of length 1."""

    name = "zarrs.squeeze"

    def out_shape(self, shape: Shape) -> tuple[int, ...]:
        return tuple(int(s) for s in shape if s != 1)
