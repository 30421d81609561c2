"""In-memory store and the request-counting wrapper used by tests."""

from __future__ import annotations

import itertools
import threading
import zlib
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any

from rectizarr._util import relocked_in_child
from rectizarr.errors import StoreError
from rectizarr.stores.base import Capabilities, Store
from rectizarr.stores.keys import Buffer, ByteRange, slice_range, validate_key


def _value_bytes(value: Any, key: str) -> bytes:
    """A value given in a dict as ``bytes``: any bytes-like object, or one of zarr-python's buffers (what it
    puts in a dict store); anything else is a :class:`StoreError` naming ``key``."""
    if isinstance(value, bytes):
        return value
    try:
        return bytes(memoryview(value))
    except TypeError:
        pass
    if type(value).__module__.startswith("zarr.") and callable(getattr(value, "to_bytes", None)):
        return bytes(value.to_bytes())
    raise StoreError(
        f"the value of {key!r} in the dict the store was made from is a {type(value).__name__}, not bytes"
    )


class _InDict:
    """A caller's dict as the contents of a :class:`MemoryStore` (``(value, version)`` pairs): values are
    written into it as ``bytes`` and read from any bytes-like value (:func:`_value_bytes`). A value keeps
    its version while the same object stays under its key, unchanged (a mutable one's CRC-32 compared)."""

    def __init__(self, data: dict[str, Any], counter: Iterator[int]) -> None:
        self.data, self._counter = data, counter
        # key -> (the object, its version, CRC-32 of a mutable one's contents): held, so ``is`` is safe
        self._seen: dict[str, tuple[Any, int, int | None]] = {}
        self._lock = threading.Lock()
        relocked_in_child(self)

    def get(self, key: str) -> tuple[bytes, int] | None:
        value = self.data.get(key)
        if value is None:
            return None
        content = _value_bytes(value, key)
        digest = None if isinstance(value, bytes) else zlib.crc32(content)
        with self._lock:
            seen = self._seen.get(key)
            if seen is None or seen[0] is not value or seen[2] != digest:
                seen = self._seen[key] = (value, next(self._counter), digest)
        return content, seen[1]

    def __setitem__(self, key: str, entry: tuple[bytes, int]) -> None:
        with self._lock:
            self.data[key] = entry[0]
            self._seen[key] = (entry[0], entry[1], None)

    def pop(self, key: str, default: None = None) -> None:
        with self._lock:
            self.data.pop(key, None)
            self._seen.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter([k for k in list(self.data) if isinstance(k, str)])  # (no other key can be a Zarr key)

    def __len__(self) -> int:
        return len(self.data)

    def items(self) -> Iterator[tuple[str, tuple[bytes, int]]]:
        return ((k, v) for k in list(self.data) if (v := self.get(k)) is not None)


class MemoryStore(Store):
    """A store held in a dict of bytes. ``data`` is copied: instances never share state (a read-only view
    does). Versions come from a per-store write counter. Pickling copies the contents. :meth:`in_dict`
    makes one whose contents are a caller's dict instead."""

    def __init__(
        self,
        data: Mapping[str, Buffer] | None = None,
        *,
        read_only: bool = False,
        coalesce_gap: int | None = None,
        coalesce_max: int | None = None,
    ) -> None:
        super().__init__(read_only=read_only, coalesce_gap=coalesce_gap, coalesce_max=coalesce_max)
        self._lock = threading.Lock()
        relocked_in_child(self)
        self._counter = itertools.count(1)
        self._data: dict[str, tuple[bytes, int]] = {}
        self.lock_identity = f"memory:{id(self._data)}:"
        for key, value in (data or {}).items():
            self._data[validate_key(key)] = (_value_bytes(value, key), next(self._counter))

    @classmethod
    def in_dict(cls, data: dict[str, Any], *, read_only: bool = False) -> MemoryStore:
        """A store whose contents are ``data`` itself, as zarr-python's ``MemoryStore`` over a dict: what is
        written appears in it (as ``bytes``), and another store over the same dict sees it (and takes the
        same locks). Its values must be bytes-like; a value changed there by other code is a new version."""
        for key in data:
            validate_key(key)
        store = cls(read_only=read_only)
        store._data = _InDict(data, store._counter)  # type: ignore[assignment]
        store.lock_identity = f"memory:{id(data)}:"
        return store

    capabilities = Capabilities(
        low_latency=True, cheap_versions=True, consistent_listing=True, values_consumed=True
    )  # set_many copies

    def __repr__(self) -> str:
        return f"MemoryStore(<{len(self._data)} keys>, read_only={self.read_only})"

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            return {
                "data": {k: v for k, (v, _) in self._data.items()},
                "read_only": self.read_only,
                "coalesce_gap": self.coalesce_gap,
                "coalesce_max": self.coalesce_max,
            }

    def __setstate__(self, state: dict[str, Any]) -> None:
        data = state.pop("data")
        self.__init__(data, **state)  # type: ignore[misc]

    def _get_batch(self, requests: Sequence[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        out: list[bytes | None] = []
        for key, byte_range in requests:
            entry = self._data.get(key)
            out.append(None if entry is None else slice_range(entry[0], byte_range))
        return out

    def _set_batch(self, items: Mapping[str, Buffer]) -> None:
        copies = {key: bytes(value) for key, value in items.items()}
        with self._lock:
            for key, value in copies.items():
                self._data[key] = (value, next(self._counter))

    def _delete_batch(self, keys: Sequence[str]) -> None:
        with self._lock:
            for key in keys:
                self._data.pop(key, None)

    def _delete_prefix(self, prefix: str) -> None:
        with self._lock:
            for key in [k for k in self._data if k.startswith(prefix)]:
                self._data.pop(key, None)

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        with self._lock:
            keys = list(self._data)
        return (k for k in keys if k.startswith(prefix))

    def _info(self, key: str) -> tuple[int, Hashable] | None:
        entry = self._data.get(key)
        return None if entry is None else (len(entry[0]), entry[1])


class _Counts:
    """The counters of a CountingStore, shared with its read-only views."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, ByteRange | None]] = []
        self.writes = self.deletes = self.lists = self.infos = 0


def _forward(name: str) -> Any:
    """A method that shows its call to :meth:`ForwardingStore._saw`, then makes it on the wrapped store."""

    def forward(self: ForwardingStore, *args: Any, **kwargs: Any) -> Any:
        self._saw(name, args, kwargs)
        return getattr(self.inner, name)(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = name
    return forward


class ForwardingStore(Store):
    """A store that hands every backend primitive and every method backends override to ``inner``, showing
    each call to :meth:`_saw` first; coalescing, read-only-ness, capabilities and locks follow ``inner``."""

    def __init__(self, inner: Store) -> None:
        super().__init__(
            read_only=inner.read_only, coalesce_gap=inner.coalesce_gap, coalesce_max=inner.coalesce_max
        )
        self.inner = inner
        self.capabilities, self.lock_identity = inner.capabilities, inner.lock_identity

    def _saw(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Called with each forwarded call's method name and arguments before it is made."""

    _get_batch = _forward("_get_batch")
    _get_batch_at = _forward("_get_batch_at")
    get_many_versioned = _forward("get_many_versioned")
    get_versioned = _forward("get_versioned")
    get_version = _forward("get_version")
    get_transient = _forward("get_transient")
    read_into = _forward("read_into")
    set_if = _forward("set_if")
    delete_if = _forward("delete_if")
    _set_batch = _forward("_set_batch")
    _delete_batch = _forward("_delete_batch")
    _delete_prefix = _forward("_delete_prefix")
    _list_prefix = _forward("_list_prefix")
    _list_dir = _forward("_list_dir")
    keys_under = _forward("keys_under")
    _info = _forward("_info")

    def _close(self) -> None:
        self.inner.close()


def _tally(counts: _Counts, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Record one call that reaches the wrapped store (see :class:`CountingStore`)."""
    if name in ("_get_batch", "_get_batch_at", "get_many_versioned"):
        counts.requests.extend(args[0])
    elif name in ("get_versioned", "get_transient"):
        counts.requests.append((args[0], args[1] if len(args) > 1 else kwargs.get("byte_range")))
    elif name == "read_into":
        counts.requests.extend((k, None) for k in args[0])
    elif name in ("set_if", "_set_batch"):
        counts.writes += 1 if name == "set_if" else len(args[0])
    elif name in ("delete_if", "_delete_prefix", "_delete_batch"):
        counts.deletes += len(args[0]) if name == "_delete_batch" else 1
    elif name in ("_list_prefix", "_list_dir", "keys_under"):
        counts.lists += 1
    elif name in ("_info", "get_version"):
        counts.infos += 1


def _count(name: str, doc: str) -> Any:
    """A read-only property: the counter ``name`` of a CountingStore's :class:`_Counts`."""

    def get(self: CountingStore) -> Any:
        return getattr(self._counts, name)

    get.__doc__ = doc  # (the property's doc, and its getter's: what the docstring test reads)
    return property(get)


class CountingStore(ForwardingStore):
    """Wraps any store and records what reaches its backend, after coalescing (:meth:`reset` zeroes the
    counts). A read-only view (``open_array(spy, mode="r")``) counts into the same counters."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self._counts = _Counts()

    def __repr__(self) -> str:
        return f"CountingStore({self.inner!r})"

    def _saw(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if name in ("set_if", "delete_if"):  # (a read-only view over a writable store)
            self._check_writable("set" if name == "set_if" else "delete")
        _tally(self._counts, name, args, kwargs)

    requests: list[tuple[str, ByteRange | None]] = _count(
        "requests", "One ``(key, byte_range)`` per read that reached the wrapped store."
    )
    writes: int = _count("writes", "The number of values written.")
    deletes: int = _count("deletes", "The number of keys deleted, plus one per ``delete_prefix``.")
    lists: int = _count("lists", "The number of listing calls.")
    infos: int = _count("infos", "The number of exists/getsize/version/get_version look-ups.")

    def reset(self) -> None:
        """Forget everything recorded so far (in this store and its views)."""
        self._counts.__init__()  # type: ignore[misc]
