"""The process-wide LRU of decoded shard indexes, each kept with the version it was read at: served at that
version where versions are cheap to check (local files, memory), or as the version that reads through it
are conditioned on (S3 and obstore: ``If-Match``); see ``shards.fetch_indexes``."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable

from rectizarr._util import relocked_in_child
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
        with self._lock:
            entry = self._entries.get((store.cache_token, key))
            if entry is None or entry[0] != version:
                return None
            self._entries.move_to_end((store.cache_token, key))
            return entry[1]

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
