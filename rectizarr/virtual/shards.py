"""The inner chunks of a sharded source: each shard's index is read (one ranged request per shard,
batched; a missing shard holds nothing) and each stored inner chunk becomes a byte range of its shard."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from rectizarr import nodes
from rectizarr.arrays import Array
from rectizarr.codecs.pipeline import ShardingCodec
from rectizarr.virtual.errors import UnreferenceableError
from rectizarr.virtual.refs import Target
from rectizarr.virtual.sources import Source

__all__ = ["inner_chunks"]


def inner_chunks(array: Array, source: Source) -> Iterator[tuple[tuple[int, ...], Target]]:
    """Each stored inner chunk of a sharded ``array`` of ``source`` (its coords in the inner-chunk grid,
    within the extent) and its target."""
    codec = array.pipeline.array_bytes
    if not isinstance(codec, ShardingCodec):  # (part_of checked the metadata)
        raise UnreferenceableError("not sharded", source=source.name, field="codecs")
    grid, enc = array.grid, array.metadata.chunk_key_encoding
    prefix = nodes.prefix_of(array.path)
    inner = codec.chunk_shape
    limits = tuple(-(-d.extent // n) for d, n in zip(grid.dims, inner, strict=True))
    shards = list(itertools.product(*(range(n) for n in grid.grid_shape)))
    keys = [prefix + enc.encode(c) for c in shards]
    if source.refs is not None:  # only the shards the reference set holds
        held = [i for i, k in enumerate(keys) if source.refs.get(k) is not None]
        shards, keys = [shards[i] for i in held], [keys[i] for i in held]
    ranges = [codec.index_byte_range(grid.chunk_shape(c)) for c in shards]
    values = array.store.get_many(list(zip(keys, ranges, strict=True)))
    for coords, key, data in zip(shards, keys, values, strict=True):
        if data is None or (target := source.target(key)) is None:
            continue
        index = codec.decode_index(data, grid.chunk_shape(coords), shard_nbytes=None, key=key)
        present = index.present()
        first = [d.offset(c) // n for d, c, n in zip(grid.dims, coords, inner, strict=True)]
        for local in np.argwhere(present).tolist():
            global_ = tuple(f + j for f, j in zip(first, local, strict=True))
            if any(g >= lim for g, lim in zip(global_, limits, strict=True)):
                continue
            t = tuple(local)
            yield global_, target.part(int(index.offsets[t]), int(index.nbytes[t]))
