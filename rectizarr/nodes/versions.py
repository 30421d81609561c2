"""Version tracking of node documents, shared by arrays and groups: a document's version taken just before a
reader read it (:func:`remember`, :func:`version_before_read`), and :class:`Tracker`."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from typing import Any

from rectizarr.core.metadata import NodeMeta
from rectizarr.stores import Store

_versions = threading.local()  # per thread: doc key -> (the meta read, the version taken before reading it)


def version_now(store: Store, key: str) -> Any:
    """The version of ``key`` where versions are cheap, else None (taken before a document is read)."""
    return store.version(key) if store.capabilities.cheap_versions else None


def remember(store: Store, key: str, meta: NodeMeta | None, version: Any) -> None:
    """``meta`` was read from ``key`` by this thread, whose version was ``version`` just before."""
    if meta is None or version is None:
        return
    seen: dict[str, tuple[NodeMeta, Any]] = _versions.__dict__.setdefault("seen", {})
    seen[store.lock_identity + key] = (meta, version)
    if len(seen) > 64:
        del seen[next(iter(seen))]


def version_before_read(store: Store, key: str, meta: NodeMeta) -> Any:
    """The version of ``key`` taken just before ``meta`` was read from it by this thread (where versions are
    cheap), or None: a handle made from ``meta`` checks writes against it (one taken later may be newer)."""
    seen: dict[str, tuple[NodeMeta, Any]] = _versions.__dict__.setdefault("seen", {})
    entry = seen.get(store.lock_identity + key)
    if entry is None or entry[0] is not meta:
        return None
    del seen[store.lock_identity + key]
    return entry[1]


class Tracker:
    """The documents ``keys`` of one node (defining one first): :meth:`now` changes whenever one is rewritten.
    Where versions are cheap (local files, memory) it is the versions of the first ``checked`` keys (None:
    all); elsewhere what this process wrote of them (:meth:`~rectizarr.stores.Store.written`, no request)."""

    def __init__(self, store: Store, keys: Sequence[str], checked: int | None = None) -> None:
        self.store = store
        self.keys = list(keys)
        self.checked = self.keys if checked is None else self.keys[:checked]

    def now(self) -> Hashable:
        if not self.store.capabilities.cheap_versions:
            return self.store.written(self.keys)
        if len(self.checked) == 1:
            return self.store.version(self.checked[0])
        return tuple(self.store.version(k) for k in self.checked)
