"""Rewriting edge chunks at their true size into a side store (or inline into the reference set).

A rewritten chunk is named by a hash of its bytes (``edges/<sha256>``): writing it again (an append that
rebuilds the references) changes nothing, and two results never overwrite each other's chunks."""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Mapping, Sequence
from math import prod
from typing import Any

import numpy as np

from rectizarr import tuning
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.build import build_pipeline
from rectizarr.core.metadata import ArrayMeta
from rectizarr.stores import Store, open_store
from rectizarr.virtual.arrays import EdgeChunk
from rectizarr.virtual.errors import UnreferenceableError
from rectizarr.virtual.refs import Inline, Target, Url
from rectizarr.virtual.sources import store_url

__all__ = ["SideStore", "encode_edge", "open_side"]


class SideStore:
    """Where rewritten chunks go: a store with a URL, or ``None`` (inline in the reference set)."""

    def __init__(self, store: Store | None) -> None:
        self.store = store
        self.base = None if store is None else store_url(store, "side store")

    def put(self, data: bytes) -> Target:
        if self.store is None:
            return Inline(data)
        key = "edges/" + hashlib.sha256(data).hexdigest()
        if not self.store.exists(key):
            self.store.set(key, data)
        return Url(f"{self.base}/{key}")


def open_side(
    side: Any, storage_options: Mapping[str, Any] | None, needed: int, first: str | None
) -> SideStore:
    """The side store for ``needed`` rewritten chunks, refused before anything is written when none
    was given (``side="inline"`` puts them in the reference set)."""
    if side == "inline" or (side is None and not needed):
        return SideStore(None)
    if side is None:
        raise UnreferenceableError(
            f"{needed} edge chunk(s) must be rewritten at their true size (a source's extent along the axis "
            "is not a multiple of its chunk size) but no side store was given: pass side_store=PATH (or "
            "'inline' to embed them in the reference set)",
            source=first,
            field="side_store",
        )
    if isinstance(side, str | os.PathLike) and "://" not in os.fspath(side):
        os.makedirs(side, exist_ok=True)
    return SideStore(open_store(side, mode="a", storage_options=dict(storage_options or {}) or None))


def encode_edge(meta: ArrayMeta, chunks: Sequence[EdgeChunk]) -> list[bytes]:
    """The stored values of edge chunks of the array ``meta``: read through the source, cut to their true
    length along the axis, padded with the fill value on the other axes as any edge chunk is."""
    dtype = meta.data_type.numpy
    pipeline = build_pipeline(meta.codecs, dtype, [d.unique_edges() for d in meta.chunk_grid.dims])
    limit = tuning.current().window_bytes  # (memory: a larger row is read one chunk at a time)
    slabs: dict[int, tuple[tuple[int, ...], np.ndarray]] = {}
    # one read per source: the box around its edge chunks (one row; plan_array lists a source's together)
    for part_chunks in (list(g) for _, g in itertools.groupby(chunks, key=lambda e: id(e.part))):
        box = tuple(
            slice(min(r.start for r in rs), max(r.stop for r in rs))
            for rs in zip(*(e.region for e in part_chunks), strict=True)
        )
        if prod(b.stop - b.start for b in box) * dtype.itemsize <= limit:
            slab = np.asarray(part_chunks[0].part.array[box])
            for e in part_chunks:
                slabs[id(e)] = (tuple(b.start for b in box), slab)
    out = []
    for e in chunks:
        starts, slab = slabs.get(id(e)) or (
            tuple(r.start for r in e.region),
            np.asarray(e.part.array[e.region]),
        )
        values = slab[tuple(slice(r.start - s, r.stop - s) for r, s in zip(e.region, starts, strict=True))]
        chunk = np.full(e.shape, meta.fill_value, dtype=dtype)
        chunk[tuple(slice(0, n) for n in values.shape)] = values
        out.append(bytes(pipeline.encode(chunk, ChunkSpec(e.shape, dtype, meta.fill_value, e.key))))
    return out
