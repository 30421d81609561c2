"""One chunk between its bytes and the caller's array: decode, paste into the output, take from a value.

Every strategy of the read and write paths ends here. A projection's ``chunk_sel`` indexes the chunk and
its ``out_sel`` the plan's internal output (flat for coordinate plans, see :mod:`rectizarr.indexing.plan`).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from rectizarr._util import Coords, Shape
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.errors import CodecError
from rectizarr.indexing import ChunkProjection, Plan
from rectizarr.io.layout import Layout
from rectizarr.tuning import Tuning

__all__ = ["clear_outside", "decode", "decode_in_place", "paste", "prefix_bytes", "put", "replaces", "take",
           "whole"]

Data = bytes | memoryview


def paste(out: np.ndarray, plan: Plan, p: ChunkProjection, src: np.ndarray | None, fill: np.ndarray) -> None:
    """Put the part of chunk ``src`` that ``p`` selects (the fill value when ``src`` is None) into ``out``."""
    if plan.kind == "coordinate":
        flat = out.reshape(-1)
        flat[p.out_sel] = fill if src is None else src[p.chunk_sel]
    else:
        out[p.out_sel] = fill if src is None else src[p.chunk_sel]


def take(value: np.ndarray, plan: Plan, p: ChunkProjection) -> np.ndarray:
    """The part of the value being written that goes to ``p``'s chunk."""
    if plan.kind == "coordinate":
        return value.reshape(-1)[p.out_sel]
    return value[p.out_sel]


def put(chunk: np.ndarray, p: ChunkProjection, data: np.ndarray) -> None:
    """Write ``data`` (from :func:`take`) into ``p``'s part of ``chunk``."""
    chunk[p.chunk_sel] = data


def whole(sel: tuple[Any, ...], shape: Shape) -> bool:
    """True when ``sel`` is ``0:n0, 0:n1, ...`` for ``shape``: the whole chunk, in order."""
    return len(sel) == len(shape) and all(
        isinstance(s, slice) and s.start == 0 and s.stop == n and s.step == 1 for s, n in zip(sel, shape, strict=True))


def replaces(plan: Plan, group: list[ChunkProjection], shape: Shape) -> bool:
    """True when one orthogonal projection covers the whole chunk in order (``chunk[0:n0, 0:n1, ...]``):
    the selected data then is the new chunk as it is, with no chunk to fill and copy into."""
    return plan.kind == "orthogonal" and len(group) == 1 and whole(group[0].chunk_sel, shape)


def decode(pipeline: CodecPipeline, value: Data, spec: ChunkSpec, key: str) -> np.ndarray:
    """Decode one chunk; an error names ``key`` (specs shared between chunks carry no key)."""
    try:
        return pipeline.decode(value, spec)
    except CodecError as exc:
        if exc.key is not None:
            raise
        raise exc.with_key(key) from exc


_scratch = threading.local()


def _scratch_chunk(spec: ChunkSpec) -> np.ndarray:
    """This thread's reused scratch buffer, as a chunk of ``spec`` (no fresh memory per chunk)."""
    buf: np.ndarray | None = getattr(_scratch, "buf", None)
    if buf is None or buf.nbytes < spec.nbytes:
        buf = _scratch.buf = np.empty(spec.nbytes, np.uint8)
    return buf[: spec.nbytes].view(spec.dtype).reshape(spec.shape)


def decode_in_place(out: np.ndarray, plan: Plan, p: ChunkProjection, pipeline: CodecPipeline, value: Data,
                    spec: ChunkSpec, fill: np.ndarray, t: Tuning) -> bool:
    """Decode a chunk with no temporary array: straight into ``out`` when the whole chunk is a
    C-contiguous block of it, else into a per-thread scratch chunk pasted from, decoding only the prefix
    the projection needs (:func:`prefix_bytes`). False when the codecs cannot (the caller then decodes
    the usual way, which also reports invalid data)."""
    if plan.kind == "orthogonal" and whole(p.chunk_sel, spec.shape) \
            and all(isinstance(s, slice) for s in p.out_sel):
        region = out[(*p.out_sel, Ellipsis)]  # with the Ellipsis, a view even of a 0-d array
        if region.shape == spec.shape and region.flags.c_contiguous and np.may_share_memory(region, out):
            return pipeline.decode_into(value, spec, region)
    if spec.nbytes > t.scratch_max_bytes:
        return False
    chunk = _scratch_chunk(spec)
    prefix = prefix_bytes(plan, p, spec, t) if spec.nbytes >= t.prefix_min_bytes else None
    done = pipeline.decode_into(value, spec, chunk) if prefix is None \
        else pipeline.decode_prefix(value, spec, chunk, prefix)
    if done:
        paste(out, plan, p, chunk, fill)
    return done


def prefix_bytes(plan: Plan, p: ChunkProjection, spec: ChunkSpec, t: Tuning) -> int | None:
    """The leading bytes of the C-order chunk that hold every element ``p`` takes from it, when that is at
    most ``t.prefix_max_fraction`` of the chunk; else None."""
    shape = spec.shape
    if plan.kind == "coordinate":
        last = int(np.ravel_multi_index(p.chunk_sel, shape).max())  # type: ignore[arg-type]
    else:  # orthogonal: every combination is taken, so the last element is at each axis's largest index
        last, stride = 0, 1
        for sel, n in zip(reversed(p.chunk_sel), reversed(shape), strict=True):
            if isinstance(sel, slice):
                r = range(*sel.indices(n))
                if not r:
                    return None
                top = max(r[0], r[-1])
            elif sel.size:
                top = int(np.max(sel))
            else:
                return None
            last += top * stride
            stride *= n
    needed = (last + 1) * spec.dtype.itemsize
    return needed if needed <= t.prefix_max_fraction * spec.nbytes else None


def clear_outside(chunk: np.ndarray, layout: Layout, coords: Coords) -> None:
    """Reset the part of an edge chunk beyond the extent to the fill value; ``coords`` are in the planning
    grid (``layout.dims``: chunks, or inner chunks when sharded)."""
    for axis, d in enumerate(layout.dims):
        n = d.data_len(coords[axis])
        if n < chunk.shape[axis]:
            idx: list[slice] = [slice(None)] * chunk.ndim
            idx[axis] = slice(n, None)
            chunk[tuple(idx)] = layout.fill_value
