"""Writes to stores with round trips stream: window by window, each window uploaded while the next one is
encoded, so memory holds a few windows of encoded chunks, not the whole array's."""

from __future__ import annotations

import multiprocessing
import secrets
import tracemalloc
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

import numpy as np
import pytest

import rectizarr
from rectizarr import tuning
from rectizarr.stores import Buffer, ByteRange, FsspecStore, MemoryStore, Store

MiB = 1 << 20


class Sink(Store):
    """A remote-like store (no capabilities) that keeps documents and only counts chunk bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.docs = MemoryStore()
        self.uploads: list[int] = []  # values per upload call

    def _get_batch(self, requests: Sequence[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        return [self.docs.get(k, r) for k, r in requests]

    def _set_batch(self, items: Mapping[str, Buffer]) -> None:
        self.docs.set_many({k: v for k, v in items.items() if k.endswith("zarr.json")})
        self.uploads.append(len(items))

    def _delete_batch(self, keys: Sequence[str]) -> None:
        self.docs.delete_many(keys)

    def _delete_prefix(self, prefix: str) -> None:
        self.docs.delete_prefix(prefix)

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        return self.docs.list_prefix(prefix)

    def _list_dir(self, prefix: str) -> Iterable[str]:
        return self.docs.list_dir(prefix)

    def _info(self, key: str) -> tuple[int, Hashable] | None:
        size = self.docs.getsize(key)
        return None if size is None else (size, self.docs.version(key))


def _streamed_write(shards: tuple[int, int] | None) -> tuple[list[int], int]:
    """Write 8 MiB to a :class:`Sink` in 1 MiB windows: the uploads (values per call) and the peak of memory
    traced while writing. Run in a fresh process (see the test): tracemalloc counts every thread's
    allocations, and threads left by earlier tests (servers, clusters) are not part of this write."""
    data = np.random.default_rng(1).integers(0, 2**16, size=(4096, 1024), dtype="u2")  # 8 MiB, incompressible
    sink = Sink()
    a = rectizarr.create_array(sink, name="x", shape=data.shape, dtype="u2", chunks=(64, 1024), shards=shards)
    sink.uploads.clear()
    tracemalloc.start()
    try:
        with tuning.use(replace(tuning.current(), window_bytes=1 * MiB)):
            a[...] = data
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return sink.uploads, peak


@pytest.mark.parametrize("shards", [None, (256, 1024)])
def test_a_remote_write_streams_in_windows(shards: tuple[int, int] | None) -> None:
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as fresh:
        uploads, peak = fresh.submit(_streamed_write, shards).result()
    assert len(uploads) == 8 and sum(uploads) == (64 if shards is None else 16)  # 1 MiB windows
    assert peak < 4 * MiB, peak  # encoded values held at once: a few windows, never the whole 8 MiB

    data = np.random.default_rng(1).integers(0, 2**16, size=(4096, 1024), dtype="u2")
    t = replace(tuning.current(), window_bytes=1 * MiB)
    store = FsspecStore(f"memory://stream-{secrets.token_hex(6)}")  # the same path, read back
    b = rectizarr.create_array(
        store, name="x", shape=data.shape, dtype="u2", chunks=(64, 1024), shards=shards
    )
    with tuning.use(t):
        b[...] = data
    assert np.array_equal(rectizarr.open_array(store, path="x", mode="r")[...], data)
    store.delete_prefix("")


def test_a_few_large_shards_upload_while_others_encode() -> None:
    """8 shards of 1 MiB fit one 64 MiB window, but a window is at most an eighth of the write (and no
    fewer values than the workers): the first uploads start after the first shards are encoded."""
    data = np.random.default_rng(2).integers(0, 2**16, size=(4096, 1024), dtype="u2")
    sink = Sink()
    a = rectizarr.create_array(
        sink, name="x", shape=data.shape, dtype="u2", chunks=(64, 1024), shards=(512, 1024), workers=2
    )
    sink.uploads.clear()
    a[...] = data
    assert sink.uploads == [2, 2, 2, 2]
