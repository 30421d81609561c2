"""The process-wide cache of decoded shard indexes, keyed by store and key and checked against versions.

An entry is served only when the version it was read at matches the shard's current one, so a shard
rewritten by someone else is never read through a stale index. Stores whose versions are cheap (local
files, memory) are checked on every use; elsewhere a version costs a request, so only our own writes
invalidate entries (the consistency work of issue 16 conditions those reads on the version instead).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable

from rectizarr.codecs.shard_index import ShardIndex
from rectizarr.stores import Store

__all__ = ["ShardIndexCache", "index_cache", "invalidate"]


class ShardIndexCache:
    """A thread-safe LRU of decoded shard indexes, keyed by a string and checked against a version token."""

    def __init__(self, maxsize: int = 1024) -> None:
        self.maxsize = maxsize
        self._entries: OrderedDict[str, tuple[Hashable, ShardIndex]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str, version: Hashable) -> ShardIndex | None:
        """The index cached for ``key`` at ``version``; None when absent or cached at another version."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != version:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: str, version: Hashable, index: ShardIndex) -> None:
        with self._lock:
            self._entries[key] = (version, index)
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)

    def invalidate(self, key: str) -> None:
        with self._lock:
            self._entries.pop(key, None)

    # ---- by store --------------------------------------------------------------------------------------

    def get_for(self, store: Store, key: str, version: Hashable) -> ShardIndex | None:
        return self.get(_name(store, key), version)

    def put_for(self, store: Store, key: str, version: Hashable, index: ShardIndex) -> None:
        self.put(_name(store, key), version, index)


def _name(store: Store, key: str) -> str:
    return f"{store.cache_token}\x00{key}"


_cache = ShardIndexCache()


def index_cache() -> ShardIndexCache:
    """The process-wide cache of decoded shard indexes."""
    return _cache


def invalidate(store: Store, keys: Iterable[str]) -> None:
    """Forget the cached indexes of ``keys`` of ``store`` (after writing or deleting them)."""
    for key in keys:
        _cache.invalidate(_name(store, key))
