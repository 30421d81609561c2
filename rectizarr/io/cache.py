"""The process-wide LRU of decoded shard indexes, each kept with the version it was read at: served at that
version where versions are cheap to check (local files, memory), or as the version that reads through it
are conditioned on (S3 and obstore: ``If-Match``); see ``shards.fetch_indexes``. And the hand-over of
chunks decoded by a check that left them as stored to the write that follows (:func:`hand_over`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable

import numpy as np

from rectizarr import tuning
from rectizarr._util import relocked_in_child
from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.codecs.shard_index import ShardIndex
from rectizarr.stores import Store


class ShardIndexCache:
    """A thread-safe LRU of shard indexes by ``(store, key)``, each valid at one version token."""

    def __init__(self, maxsize: int = 1024) -> None:
        self.maxsize = maxsize
        self._entries: OrderedDict[tuple[str, str], tuple[Hashable, ShardIndex]] = OrderedDict()
        self._lock = threading.Lock()
        relocked_in_child(self)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, store: Store, key: str, version: Hashable) -> ShardIndex | None:
        """The index of ``key`` cached at ``version``; None when absent or cached at another version."""
        entry = self.get_any(store, key)
        return None if entry is None or entry[0] != version else entry[1]

    def get_any(self, store: Store, key: str) -> tuple[Hashable, ShardIndex] | None:
        """``(version, index)`` cached for ``key`` at whatever version (for reads conditioned on it)."""
        with self._lock:
            entry = self._entries.get((store.cache_token, key))
            if entry is not None:
                self._entries.move_to_end((store.cache_token, key))
            return entry

    def put(self, store: Store, key: str, version: Hashable, index: ShardIndex) -> None:
        with self._lock:
            self._entries[store.cache_token, key] = (version, index)
            self._entries.move_to_end((store.cache_token, key))
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)

    def invalidate(self, store: Store, keys: Iterable[str]) -> None:
        with self._lock:
            for key in keys:
                self._entries.pop((store.cache_token, key), None)


_cache = ShardIndexCache()


def index_cache() -> ShardIndexCache:
    """The process-wide cache of decoded shard indexes."""
    return _cache


def invalidate(store: Store, keys: Iterable[str]) -> None:
    """Forget the cached indexes of ``keys`` of ``store`` (after writing or deleting them)."""
    _cache.invalidate(store, keys)


class _Handover:
    """Chunks decoded by a check that left them as stored, each kept for one write that decodes the same
    bytes (:func:`hand_over`), newest first, at most ``Tuning.handover_bytes`` decoded bytes."""

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[str, str], tuple[bytes, tuple[object, ...], np.ndarray]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()
        relocked_in_child(self)

    def put(self, store: Store, key: str, value: bytes, pipeline: CodecPipeline, chunk: np.ndarray) -> None:
        limit = tuning.current().handover_bytes
        with self._lock:
            self._entries[store.cache_token, key] = (value, (pipeline.metas, chunk.shape, chunk.dtype), chunk)
            self._entries.move_to_end((store.cache_token, key), last=False)
            while sum(e[2].nbytes for e in self._entries.values()) > limit:
                self._entries.popitem()

    def take(
        self, store: Store, key: str, value: bytes | memoryview, pipeline: CodecPipeline, spec: ChunkSpec
    ) -> np.ndarray | None:
        with self._lock:
            entry = self._entries.pop((store.cache_token, key), None)
        if entry is None or len(entry[0]) != len(value) or entry[0] != value:
            return None
        same = entry[1] == (pipeline.metas, spec.shape, spec.dtype)
        return entry[2] if same else None


_handover = _Handover()


def hand_over(store: Store, key: str, value: bytes, pipeline: CodecPipeline, chunk: np.ndarray) -> None:
    """Keep ``chunk``, ``value`` (chunk ``key`` of ``store``) decoded with ``pipeline``, for the write that
    follows (an append's: :func:`rectizarr.io.clear_appended` decodes its edge chunks, then the data write
    decodes them again); ``chunk`` is not changed by anyone afterwards."""
    _handover.put(store, key, value, pipeline, chunk)


def decoded(
    store: Store, key: str, value: bytes | memoryview, pipeline: CodecPipeline, spec: ChunkSpec
) -> np.ndarray:
    """``value`` (chunk ``key`` of ``store``) decoded: as handed over (:func:`hand_over`, taken once) when
    it was the same bytes decoded with the same codecs to the same chunk shape and dtype, else afresh."""
    chunk = _handover.take(store, key, value, pipeline, spec)
    return pipeline.decode(value, spec) if chunk is None else chunk
