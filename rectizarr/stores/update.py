"""The rounds of :meth:`~rectizarr.stores.Store.update`, the one read-modify-write of stored values: under
the keys' locks where writers lock, else compare-and-swaps with bounded retries."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Final, Protocol, TypeAlias, TypeVar

from rectizarr import tuning
from rectizarr.errors import ConflictError
from rectizarr.stores import written
from rectizarr.stores.keys import Buffer, ByteRange

WRITE_TOKEN = "rectizarrwrite"
"""The user metadata (``x-amz-meta-rectizarrwrite`` on S3) that object stores keep with the value of a
conditional write: a token of that write alone, by which a write whose answer was lost is told apart from
another writer's of the very same bytes (``RemoteStore._ours``). A name valid on S3, GCS and Azure."""
_inferred = threading.local()


def inferred_landings() -> int:
    """How many conditional writes made on this thread were taken as done because the key held their very
    bytes after their retry was refused (``RemoteStore._landed``): a caller that must know it made a key
    compares the count before and after its write."""
    return int(getattr(_inferred, "count", 0))


def count_landing() -> None:
    """Count one write taken as done on this thread (:func:`inferred_landings`)."""
    _inferred.count = inferred_landings() + 1


_R = TypeVar("_R")
Make: TypeAlias = Callable[[dict[str, bytes | None]], Mapping[str, Buffer | None]]
"""What :meth:`Store.update` calls: the stored values of its keys -> the new values."""


class Unread(bytes):
    """The type of :data:`UNREAD` (empty bytes, told apart by identity)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNREAD"


UNREAD: Final[bytes] = Unread()
"""What ``make`` gets for a key of ``unread`` (:meth:`Store.update`) that holds a value (or may: under a
lock, such a key is not even looked up): its value was not read. Test it with ``is``."""


class Each(Protocol):
    """How :meth:`Store.update` runs one request per key: ``each(fn, keys)`` -> ``[fn(k) for k in keys]``."""

    def __call__(self, fn: Callable[[str], _R], keys: Sequence[str], /) -> list[_R]: ...


class Values(Protocol):
    """What the rounds ask of a store (:class:`~rectizarr.stores.Store` has it all)."""

    lock_identity: str

    def lock(self, keys: Iterable[str], /) -> AbstractContextManager[None]: ...
    def get_many(self, requests: Sequence[tuple[str, ByteRange | None]], /) -> list[bytes | None]: ...
    def set_many(self, items: Mapping[str, Buffer], /) -> None: ...
    def delete_many(self, keys: Iterable[str], /) -> None: ...
    def get_versioned(self, key: str, /) -> tuple[bytes | None, Hashable]: ...
    def get_version(self, key: str, /) -> Hashable: ...
    def set_if(self, key: str, value: Buffer, version: Hashable, /) -> bool: ...
    def delete_if(self, key: str, version: Hashable, /) -> bool: ...


def one_by_one(fn: Callable[[str], _R], keys: Sequence[str]) -> list[_R]:
    """The default :class:`Each`: one request after the other."""
    return [fn(k) for k in keys]


def back_off(attempt: int) -> None:
    """Wait before compare-and-swap attempt ``attempt`` (1, 2, ...) after lost races: a random time of up to
    2 ms x 2**attempt (at most 0.25 s), so writers that keep colliding on one key spread out instead of
    racing again at once and losing together until their retries run out."""
    import random  # (only after a lost race)

    time.sleep(random.uniform(0, min(0.25, 0.002 * 2**attempt)))


def locked(
    store: Values,
    keys: Sequence[str],
    make: Make,
    before: Callable[[], object] | None,
    unread: Collection[str],
) -> None:
    """:meth:`Store.update` where writers lock (a key of ``unread`` that ``make`` deletes is deleted
    whether or not it holds a value)."""
    with store.lock(keys):
        read = [k for k in keys if k not in unread]
        values = iter(store.get_many([(k, None) for k in read]) if read else ())
        stored = {k: UNREAD if k in unread else next(values) for k in keys}
        new = make(stored)
        if before is not None:
            before()
        to_set = {k: v for k, v in new.items() if v is not None and v is not stored[k]}
        to_delete = [k for k, v in new.items() if v is None and stored[k] is not None]
        if to_set:
            store.set_many(to_set)
        if to_delete:
            store.delete_many(to_delete)


def swapped(
    store: Values,
    keys: Sequence[str],
    make: Make,
    each: Each | None = None,
    before: Callable[[], object] | None = None,
    unread: Collection[str] = (),
) -> None:
    """:meth:`Store.update` as compare-and-swaps: rounds of versioned reads, ``make`` and conditional
    writes of the keys not yet written, a random wait (:func:`back_off`) between rounds."""
    each = each or one_by_one
    read_one = functools.partial(_read, store, unread)
    todo, retries = list(keys), tuning.current().conflict_retries
    for attempt in range(retries):
        if attempt:
            back_off(attempt)
        read = dict(zip(todo, each(read_one, todo), strict=True))
        new = make({k: v for k, (v, _) in read.items()})
        if before is not None and attempt == 0:
            before()
        done = each(functools.partial(_write_at, store, new, read), todo)
        todo = [k for k, ok in zip(todo, done, strict=True) if not ok]
        if not todo:
            return
    raise ConflictError(
        f"{', '.join(map(repr, todo[:3]))} changed by other writers during each of {retries} attempts "
        "to update them; try again"
    )


def _read(store: Values, unread: Collection[str], key: str) -> tuple[bytes | None, Hashable]:
    """``key``'s value and version; for a key of ``unread``, :data:`UNREAD` (None: missing) and its version."""
    if key not in unread:
        return store.get_versioned(key)
    version = store.get_version(key)
    return (None, None) if version is None else (UNREAD, version)


def _write_at(
    store: Values,
    new: Mapping[str, Buffer | None],
    read: Mapping[str, tuple[bytes | None, Hashable]],
    key: str,
) -> bool:
    """Write ``key``'s new value (left out, or the stored one itself: nothing to write) only if the key is
    still at the version it was ``read`` at; False, writing nothing, when it is not."""
    stored, version = read[key]
    value = new.get(key, stored)
    if value is stored:
        return True
    done = store.delete_if(key, version) if value is None else store.set_if(key, value, version)
    if done:
        written.mark(store.lock_identity, [key])
    return done
