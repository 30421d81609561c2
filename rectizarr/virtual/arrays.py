"""Planning one virtual array: the sources' arrays checked against each other, the rectilinear grid of
their chunk edges, and one reference per stored chunk (inner chunks of shards included).

Only the last chunk of a source along the axis can be shorter than its edge (the source's extent is
not a multiple of its chunk size). It keeps its declared edge when it is the last chunk of the result
(a rectilinear grid may overhang the extent); elsewhere the result's edge is its true length and it
is an :class:`EdgeChunk`: a byte prefix of the stored chunk when the chain is ``bytes`` alone and the
axis is the outermost one the chunk spans, else rewritten at its true size (see ``rewrite``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any

import msgspec
import numpy as np

from rectizarr import nodes
from rectizarr.arrays import Array
from rectizarr.codecs.pipeline import ShardingCodec
from rectizarr.core import codec_meta as cm
from rectizarr.core.chunk_keys import ChunkKeyEncoding
from rectizarr.core.codec_meta import codecs_to_json
from rectizarr.core.dims import Dim, FixedDim, VaryingDim
from rectizarr.core.grid import ChunkGrid
from rectizarr.core.metadata import ArrayMeta, canonical_codecs
from rectizarr.virtual.errors import ConcatError, SourceMismatchError, UnreferenceableError
from rectizarr.virtual.refs import Target
from rectizarr.virtual.sources import Source

__all__ = ["OUT_KEYS", "EdgeChunk", "Part", "Planned", "part_of", "plan_array", "stored_chunks"]

OUT_KEYS = ChunkKeyEncoding("default", "/")


@dataclass(frozen=True)
class Part:
    """One source's array as the result sees it: its v3 ``meta`` (the inner chain when sharded, never
    sharded itself) and the grid of its readable chunks (inner chunks when sharded)."""

    source: Source
    array: Array
    meta: ArrayMeta
    dims: tuple[Dim, ...]
    sharding: cm.ShardingMeta | None


@dataclass(frozen=True)
class EdgeChunk:
    """A source chunk whose stored shape is longer than its edge in the result: rewritten at ``shape``."""

    part: Part
    region: tuple[slice, ...]  # the chunk's values in the source array
    shape: tuple[int, ...]  # its shape in the result (true length along the axis, declared edges elsewhere)
    key: str  # its key in the result


@dataclass
class Planned:
    """A planned array: its document, its references, and the edge chunks still to rewrite."""

    meta: ArrayMeta
    refs: dict[str, Target] = field(default_factory=dict)
    rewrite: list[EdgeChunk] = field(default_factory=list)
    prefixes: int = 0  # edge chunks referenced as a byte prefix of the stored chunk


def part_of(source: Source, array: Array) -> Part:
    meta, why = nodes.format_of(array.metadata).as_v3(array.metadata)
    if meta is None:
        raise UnreferenceableError(
            f"{why}: its chunks cannot be read by a Zarr v3 chain", source=source.name, field="codecs"
        )
    shard = next((c for c in meta.codecs if isinstance(c, cm.ShardingMeta)), None)
    if shard is None:
        return Part(source, array, meta, meta.chunk_grid.dims, None)
    if meta.codecs != (shard,) or any(isinstance(c, cm.ShardingMeta) for c in shard.codecs):
        raise UnreferenceableError(
            "inner chunks are referenced only where sharding_indexed is the whole chain "
            "(no codec before or after it, no nested sharding)",
            source=source.name,
            field="codecs",
        )
    dims = tuple(FixedDim(c, d.extent) for c, d in zip(shard.chunk_shape, meta.chunk_grid.dims, strict=True))
    meta = msgspec.structs.replace(meta, codecs=shard.codecs)
    return Part(source, array, meta, dims, shard)


def _edges(d: Dim) -> Any:
    return d.size if isinstance(d, FixedDim) else d.edges_of(np.arange(d.nchunks)).tolist()


def _check(first: Part, p: Part, axis: int) -> None:
    a, b = first.meta, p.meta

    def refuse(field_name: str, what: str, mine: Any, theirs: Any) -> None:
        raise SourceMismatchError(
            f"{what} {theirs!r} differs from {mine!r} in {first.source.name}",
            source=p.source.name,
            field=field_name,
        )

    if a.ndim != b.ndim:
        refuse("shape", f"{b.ndim} dimensions", a.ndim, b.ndim)
    if a.data_type != b.data_type:
        refuse("data_type", "data type", a.data_type.to_json(), b.data_type.to_json())
    fa, fb = a.data_type.fill_to_json(a.fill_value), b.data_type.fill_to_json(b.fill_value)
    if fa != fb:
        refuse("fill_value", "fill value", fa, fb)
    ca = codecs_to_json(canonical_codecs(a.codecs, a.data_type))
    cb = codecs_to_json(canonical_codecs(b.codecs, b.data_type))
    if ca != cb:
        refuse("codecs", "codec chain", ca, cb)
    if a.dimension_names != b.dimension_names:
        refuse("dimension_names", "dimension names", a.dimension_names, b.dimension_names)
    if a.attributes != b.attributes:  # (units, scale factors, a time encoding: the values' meaning)
        keys = sorted(
            k for k in set(a.attributes) | set(b.attributes) if a.attributes.get(k) != b.attributes.get(k)
        )
        mine, theirs = ({k: m.attributes.get(k) for k in keys} for m in (a, b))
        refuse("attributes", f"attributes {keys}", mine, theirs)
    for ax in (x for x in range(a.ndim) if x != axis):
        if a.shape[ax] != b.shape[ax]:
            refuse("shape", f"extent along axis {ax}", a.shape[ax], b.shape[ax])
        if _edges(first.dims[ax]) != _edges(p.dims[ax]):
            refuse("chunk_grid", f"chunk edges along axis {ax}", _edges(first.dims[ax]), _edges(p.dims[ax]))


def _axis_edges(parts: Sequence[Part], axis: int) -> tuple[list[int], list[int]]:
    """The result's edges along ``axis`` and where each part's chunks start among them."""
    edges: list[int] = []
    starts: list[int] = []
    last = max((i for i, p in enumerate(parts) if p.dims[axis].nchunks), default=-1)
    for i, p in enumerate(parts):
        starts.append(len(edges))
        d = p.dims[axis]
        lens = list(d.data_lens())
        if i == last:  # (a part with chunks)
            lens[-1] = d.edge(d.nchunks - 1)
        edges.extend(lens)
    return edges, starts


def plan_array(parts: Sequence[Part], axis: int, path: str) -> Planned:
    """The array at ``path`` of the result, joining ``parts`` along ``axis``."""
    first = parts[0]
    if not -first.meta.ndim <= axis < first.meta.ndim:
        raise ConcatError(
            f"axis {axis} is out of range for {first.meta.ndim} dimensions",
            source=first.source.name,
            field="axis",
        )
    axis %= first.meta.ndim
    for p in parts[1:]:
        _check(first, p, axis)
    edges, starts = _axis_edges(parts, axis)
    extent = sum(p.meta.shape[axis] for p in parts)
    dims = list(first.dims)
    dims[axis] = VaryingDim.from_edges(edges, extent) if edges else _empty(first.dims[axis])
    grid = ChunkGrid(tuple(dims), "rectilinear")
    shape = tuple(extent if ax == axis else n for ax, n in enumerate(first.meta.shape))
    meta = msgspec.structs.replace(first.meta, shape=shape, chunk_grid=grid, chunk_key_encoding=OUT_KEYS)
    out = Planned(meta)
    prefix = nodes.prefix_of(path)
    raw = _prefixable(meta, axis)
    for p, start in zip(parts, starts, strict=True):
        last_partial = _partial(p, axis, edges, start)
        for coords, target in stored_chunks(p):
            out_coords = (*coords[:axis], coords[axis] + start, *coords[axis + 1 :])
            key = prefix + OUT_KEYS.encode(out_coords)
            if last_partial is not None and coords[axis] == last_partial:
                shape_ = tuple(
                    edges[out_coords[axis]] if ax == axis else d.edge(c)
                    for ax, (d, c) in enumerate(zip(p.dims, coords, strict=True))
                )
                if raw is not None and prod(shape_[:axis]) == 1:
                    out.refs[key] = target.part(0, prod(shape_) * raw)
                    out.prefixes += 1
                    continue
                region = tuple(
                    slice(d.offset(c), d.offset(c) + d.data_len(c))
                    for d, c in zip(p.dims, coords, strict=True)
                )
                out.rewrite.append(EdgeChunk(p, region, shape_, key))
                continue
            out.refs[key] = target
    return out


def _empty(d: Dim) -> Dim:
    """The axis of a join of empty sources: no chunks, the first source's step (or first edge)."""
    return FixedDim(d.size if isinstance(d, FixedDim) else int(d.values[0]), 0)


def _prefixable(meta: ArrayMeta, axis: int) -> int | None:
    """The item size when a chunk's first rows along ``axis`` are a byte prefix of its stored value."""
    raw = len(meta.codecs) == 1 and isinstance(meta.codecs[0], cm.BytesMeta)
    return int(meta.data_type.numpy.itemsize) if raw and not meta.data_type.variable_length else None


def _partial(p: Part, axis: int, edges: list[int], start: int) -> int | None:
    """The part's last chunk along ``axis`` when the result declares it shorter than stored."""
    d = p.dims[axis]
    if not d.nchunks:
        return None
    i = d.nchunks - 1
    return i if edges[start + i] < d.edge(i) else None


def stored_chunks(p: Part) -> Iterator[tuple[tuple[int, ...], Target]]:
    """Each stored (inner) chunk of the part's array in its grid, with its target."""
    if p.sharding is not None:
        yield from _inner_chunks(p)
        return
    grid, enc = p.array.grid, p.array.metadata.chunk_key_encoding
    prefix = nodes.prefix_of(p.array.path)
    listed = p.source.stored(prefix)
    if listed is None:  # a store that cannot list (HTTP): a one-byte read of each chunk, batched
        every, keys = _every_key(p.array)
        found = p.array.store.get_many([(k, (0, 1)) for k in keys])
        for coords, key, data in zip(every, keys, found, strict=True):
            if data is not None:
                yield _with_target(p, coords, key)
        return
    for key in listed:
        decoded = enc.decode(key[len(prefix) :], grid.ndim)
        if decoded is None and p.source.refs is None:
            continue  # (a file that is no chunk: the store's own, or a stray one)
        if decoded is None:  # a reference set holds exactly its array's keys: one that does not map
            raise UnreferenceableError(
                f"stored key {key!r} is not a chunk key of the {enc.name!r} encoding "
                f"(separator {enc.separator!r})",
                source=p.source.name,
                field="chunk_key_encoding",
            )
        if grid.is_in_grid(decoded):
            yield _with_target(p, decoded, key)


def _every_key(array: Array) -> tuple[list[tuple[int, ...]], list[str]]:
    """The coords of every chunk (shard) in ``array``'s grid, and their store keys."""
    every = list(itertools.product(*(range(n) for n in array.grid.grid_shape)))
    enc, prefix = array.metadata.chunk_key_encoding, nodes.prefix_of(array.path)
    return every, [prefix + enc.encode(c) for c in every]


def _inner_chunks(p: Part) -> Iterator[tuple[tuple[int, ...], Target]]:
    """Each stored inner chunk of a sharded part (its coords in the inner-chunk grid, within the extent) and
    its target, a byte range of its shard: each shard's index is read (one ranged request per shard,
    batched; a missing shard holds nothing)."""
    array, source = p.array, p.source
    codec = array.pipeline.array_bytes
    if not isinstance(codec, ShardingCodec):  # (part_of checked the metadata)
        raise UnreferenceableError("not sharded", source=source.name, field="codecs")
    grid, inner = array.grid, codec.chunk_shape
    limits = tuple(-(-d.extent // n) for d, n in zip(grid.dims, inner, strict=True))
    shards, keys = _every_key(array)
    if source.refs is not None:  # only the shards the reference set holds
        held = [i for i, k in enumerate(keys) if source.refs.get(k) is not None]
        shards, keys = [shards[i] for i in held], [keys[i] for i in held]
    ranges = [codec.index_byte_range(grid.chunk_shape(c)) for c in shards]
    values = array.store.get_many(list(zip(keys, ranges, strict=True)))
    for coords, key, data in zip(shards, keys, values, strict=True):
        if data is None or (target := source.target(key)) is None:
            continue
        index = codec.decode_index(data, grid.chunk_shape(coords), shard_nbytes=None, key=key)
        first = [d.offset(c) // n for d, c, n in zip(grid.dims, coords, inner, strict=True)]
        for local in np.argwhere(index.present()).tolist():
            global_ = tuple(f + j for f, j in zip(first, local, strict=True))
            if any(g >= lim for g, lim in zip(global_, limits, strict=True)):
                continue
            t = tuple(local)
            yield global_, target.part(int(index.offsets[t]), int(index.nbytes[t]))


def _with_target(p: Part, coords: tuple[int, ...], key: str) -> tuple[tuple[int, ...], Target]:
    target = p.source.target(key)
    if target is None:  # (a reference set lists only what it holds)
        raise UnreferenceableError(f"no reference for {key!r}", source=p.source.name, field="refs")
    return tuple(coords), target
