"""Reads and writes of a :class:`~rectizarr.io.layout.ChunkedLayout`: one store value per chunk. Read:
plan -> keys and specs -> fetch -> decode -> paste, streamed (:func:`read_streamed`) or windowed
(:func:`read_windowed`). Write: :func:`write_chunked`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from functools import partial

import numpy as np

from rectizarr.codecs.shard_index import is_fill
from rectizarr.indexing import ChunkProjection, Plan
from rectizarr.io import cache
from rectizarr.io.chunk import Data, Encoded, Guard, decode, decode_in_place, merge, paste, update_chunks
from rectizarr.io.layout import ChunkedLayout
from rectizarr.io.pool import each_as_ready, pmap, pool_size, workers_for
from rectizarr.stores import requests_in_flight
from rectizarr.tuning import Tuning


class _Chunks:
    """The chunks of one read: their projections, keys and specs, and how one is pasted."""

    def __init__(
        self,
        layout: ChunkedLayout,
        plan: Plan,
        projections: Sequence[ChunkProjection],
        coords: np.ndarray,
        out: np.ndarray,
        t: Tuning,
    ) -> None:
        self.layout, self.plan, self.projections, self.out, self.t = layout, plan, projections, out, t
        self.keys = layout.keys(coords)
        self.specs = layout.specs(coords)
        self.into = layout.pipeline.can_decode_into(layout.dtype)
        self.raw = layout.pipeline.is_raw(layout.dtype)
        self.workers = workers_for(layout.workers, bool(layout.pipeline.bytes_bytes), self.specs[0].nbytes, t)

    def paste(self, i: int, value: Data | None) -> None:
        """Decode chunk ``i`` and paste its selected part (the fill value when it is not stored)."""
        p, spec, layout, fill = self.projections[i], self.specs[i], self.layout, self.layout.fill_value
        if value is None:
            paste(self.out, self.plan, p, None, fill)
        elif self.raw and len(value) == spec.nbytes:  # stored as the chunk's own bytes: a view, pasted from
            paste(self.out, self.plan, p, np.frombuffer(value, spec.dtype).reshape(spec.shape), fill)
        elif not (
            self.into and decode_in_place(self.out, self.plan, p, layout.pipeline, value, spec, fill, self.t)
        ):
            paste(self.out, self.plan, p, decode(layout.pipeline, value, spec, self.keys[i]), fill)


def read_chunked(
    layout: ChunkedLayout,
    plan: Plan,
    projections: Sequence[ChunkProjection],
    coords: np.ndarray,
    out: np.ndarray,
    t: Tuning,
) -> None:
    """Fill ``out`` with the chunks of ``projections`` (whose chunk coords are the rows of ``coords``)."""
    if not projections:
        return
    chunks = _Chunks(layout, plan, projections, coords, out, t)
    if layout.store.capabilities.low_latency:
        read_streamed(chunks)
    else:
        read_windowed(chunks)


def read_streamed(chunks: _Chunks) -> None:
    """Stores with no round trip (local files, memory): read, decode and paste chunk by chunk in the
    workers, so memory stays flat; a raw chunk is read with no size look-up."""
    get, keys, specs = chunks.layout.store.get_transient, chunks.keys, chunks.specs
    sizes = [s.nbytes for s in specs] if chunks.raw else [None] * len(keys)
    pmap(lambda i: chunks.paste(i, get(keys[i], None, sizes[i])), range(len(keys)), chunks.workers)


def read_windowed(chunks: _Chunks) -> None:
    """Stores with round trips: the chunks requested through :meth:`~rectizarr.stores.Store.iter_many`,
    each decoded and pasted in the workers as it arrives, with at most a window of values (``t.window_bytes``
    decoded, and twice the store's requests in flight) fetched ahead of the workers (bounded memory)."""
    keys, t, store = chunks.keys, chunks.t, chunks.layout.store
    if len(keys) == 1:  # one request and one decode: on this thread (a hand-off costs more than either)
        chunks.paste(0, store.get_transient(keys[0]))
        return
    if store.capabilities.requests_on_threads and len(keys) <= 2 * pool_size() and chunks.layout.workers != 1:
        # A few chunks: each decoded on the thread its answer arrives on (a hand-off to a worker costs more
        # than it saves; with more chunks than that, as many decodes at once as requests cost more).
        store.each_arrival([(k, None) for k in keys], chunks.paste)
        return
    ahead = max(1, min(t.window_bytes // max(1, chunks.specs[0].nbytes), 2 * requests_in_flight()))
    arriving = store.iter_many([(k, None) for k in keys], ahead=ahead)
    each_as_ready(lambda item: chunks.paste(item[0], item[1]), arriving, chunks.layout.workers)


def write_chunked(
    layout: ChunkedLayout,
    plan: Plan,
    projections: Sequence[ChunkProjection],
    value: np.ndarray,
    t: Tuning,
    guard: Guard = None,
) -> None:
    """Write ``value`` into the chunks of ``projections``: each chunk read once (if partly written) under
    its lock, merged, encoded and stored once (``guard`` checked once the locks are held)."""
    by_key: dict[str, list[ChunkProjection]] = defaultdict(list)
    for p in projections:
        by_key[layout.key(p.coords)].append(p)
    keys = list(by_key)
    # what lies past the extent stays: another writer may be appending there (nothing locks the shape)
    edges = {k for k in keys if layout.at_edge(by_key[k][0].coords)}
    partly = {k for k in keys if k in edges or not all(p.complete for p in by_key[k])}

    def work(key: str, stored: Data | None) -> Encoded:
        group = by_key[key]
        spec = layout.spec(group[0].coords)
        old = (
            None
            if stored is None
            else partial(cache.decoded, layout.store, key, stored, layout.pipeline, spec)
        )
        chunk = merge(layout, plan, group, value, spec.shape, old, key in edges)
        if not layout.write_empty_chunks and is_fill(chunk, layout.fill_value):
            return key, None
        return key, layout.pipeline.encode(chunk, spec)

    spec = layout.spec(by_key[keys[0]][0].coords)
    workers = workers_for(layout.workers, bool(layout.pipeline.bytes_bytes), spec.nbytes, t)
    update_chunks(layout, keys, lambda k: k, work, partly.__contains__, workers, t, guard)
