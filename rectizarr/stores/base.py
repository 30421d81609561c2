"""The :class:`Store` base class: key validation, read-only checks and coalesced batch reads.

Every public method is implemented here once; a backend implements a handful of private primitives
(``_get_batch``, ``_set_batch``, ``_delete_batch``, ``_delete_prefix``, ``_list_prefix``, ``_list_dir``,
``_info``) that receive keys which are already validated, and batches which are already coalesced."""

from __future__ import annotations

import itertools
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Self

from rectizarr import threads, tuning
from rectizarr._util import relocked_in_child
from rectizarr.errors import ConflictError, ReadOnlyError, StoreError, VersionChanged
from rectizarr.stores import locks, ranges, written
from rectizarr.stores.keys import Buffer, ByteRange, validate_key, validate_prefix, validate_range
from rectizarr.stores.limits import is_document, max_document_bytes
from rectizarr.stores.update import Each, Make, back_off, inferred_landings, locked, swapped

__all__ = ["Capabilities", "Store", "back_off", "inferred_landings"]  # the last two: for nodes, commit


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the I/O layer may ask of a store beyond values; False means "not cheaply" or "not at all"."""

    low_latency: bool = False  # a read costs no round trip (local, memory): read value by value in workers
    native_read_into: bool = False  # read_into() fills the caller's buffers directly (else copies from get)
    cheap_versions: bool = False  # version() costs no request: caches may check it on every use
    consistent_listing: bool = False  # a listing shows every completed write at once and never fails
    conditional_writes: bool = False  # set_if() is a compare-and-swap of the backend itself (S3 If-Match)
    hashed_versions: bool = False  # a version hashes the bytes (an ETag): bytes written again, same version
    conditional_reads: bool = False  # get_many(versions=) and get_many_versioned() cost no extra request
    process_locks: bool = False  # lock() excludes other processes too (an OS lock), not only threads
    values_consumed: bool = False  # set_many() keeps no reference to a value once it returns (may reuse it)
    requests_on_threads: bool = False  # each request runs on a thread of its own: each_arrival() works there
    unlisted: bool = False  # listings show nothing (HTTP): a hierarchy is known by its consolidated metadata


class Store(ABC):
    """Abstract key/value store of bytes (:mod:`rectizarr.stores`). ``coalesce_gap``: ranges of one key
    closer than this many bytes are read with one request, which never spans more than ``coalesce_max``."""

    read_only: bool
    coalesce_gap: int
    coalesce_max: int
    capabilities: Capabilities = Capabilities()  # what this store can do (see Capabilities)
    lock_identity: str
    """Where the keys live, as a prefix of the key: ``lock_identity + key`` names a value wherever it was
    opened from, so store objects on the same data (opened twice, a subdirectory, a view) share locks."""
    _is_view: bool = False
    _limits_reads = False  # the backend honours value_limit() (see limited())
    _round_trips = False  # each request is a round trip (RemoteStore): Tuning's remote coalescing defaults
    _max_value: int | None = None

    def __init__(
        self, *, read_only: bool = False, coalesce_gap: int | None = None, coalesce_max: int | None = None
    ) -> None:
        t = tuning.current()  # None: the tuning's (remote_coalesce_* for a store with round trips)
        if coalesce_gap is None:
            coalesce_gap = t.remote_coalesce_gap if self._round_trips else t.coalesce_gap
        if coalesce_max is None:
            coalesce_max = t.remote_coalesce_max if self._round_trips else t.coalesce_max
        if coalesce_gap < 0 or coalesce_max < 0:
            raise StoreError(f"coalesce_gap ({coalesce_gap}) and coalesce_max ({coalesce_max}) must be >= 0")
        self.read_only = read_only
        self.coalesce_gap = coalesce_gap
        self.coalesce_max = coalesce_max
        self.cache_token = uuid.uuid4().hex  # this store (and its views) in process-wide caches
        self.lock_identity = f"object:{self.cache_token}:"

    # ---- backend primitives -------------------------------------------------------------------------

    @abstractmethod
    def _get_batch(self, requests: Sequence[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        """Read every request (concurrently where the backend allows); missing keys give None."""

    @abstractmethod
    def _set_batch(self, items: Mapping[str, Buffer]) -> None:
        """Write every item."""

    @abstractmethod
    def _delete_batch(self, keys: Sequence[str]) -> None:
        """Delete every key; missing keys are ignored."""

    @abstractmethod
    def _delete_prefix(self, prefix: str) -> None:
        """Delete every key under ``prefix`` (``""`` = everything)."""

    @abstractmethod
    def _list_prefix(self, prefix: str) -> Iterator[str]:
        """Yield every key under ``prefix``."""

    def _list_dir(self, prefix: str) -> Iterable[str]:
        """Immediate child names of ``prefix`` (any order, duplicates allowed); here from :meth:`_list_prefix`."""
        return (k[len(prefix) :].split("/", 1)[0] for k in self._list_prefix(prefix))

    @abstractmethod
    def _info(self, key: str) -> tuple[int, Hashable] | None:
        """``(size, version token)`` of a key, None if missing."""

    def _close(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release backend resources (nothing by default)."""

    # ---- public API ---------------------------------------------------------------------------------

    def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """The value of ``key`` (or the given byte range of it); None if the key is missing."""
        validate_key(key)
        return self._get_batch([(key, validate_range(key, byte_range))])[0]

    def get_many(
        self, requests: Sequence[tuple[str, ByteRange | None]], versions: Mapping[str, Hashable] | None = None
    ) -> list[bytes | None]:
        """Read many (key, range) pairs at once, in request order, coalesced (:func:`ranges.coalesce`:
        ``coalesce_gap``, ``coalesce_max``). With ``versions``, each key named there is read only at that
        version (as :meth:`get_many_versioned` gave it): :class:`VersionChanged` if it has another."""
        backend, slots = ranges.coalesce(requests, self.coalesce_gap, self.coalesce_max)
        if not backend:
            return []
        results = self._get_batch_at(backend, versions) if versions else self._get_batch(backend)
        return ranges.split(results, slots)

    def iter_many(
        self, requests: Sequence[tuple[str, ByteRange | None]], ahead: int | None = None
    ) -> Iterator[tuple[int, bytes | memoryview | None]]:
        """``(index in requests, value)`` pairs in the order they arrive (stores with concurrent round
        trips), else :meth:`get_many`'s order; a value may be a read-only view. With ``ahead``, at most
        about that many values are fetched before the caller takes them: here :meth:`get_many` of
        ``ahead // 2`` requests at a time, the next batch fetched on another thread meanwhile."""
        n = len(requests)
        if ahead is None or n <= ahead:
            yield from enumerate(self.get_many(requests))
            return
        step = max(1, ahead // 2)  # this batch and the next one: ``ahead`` in all
        with threads.once("rectizarr-fetch", 1) as fetcher:
            following = fetcher.submit(self.get_many, requests[:step])
            for start in range(0, n, step):
                values = following.result()
                if start + step < n:
                    following = fetcher.submit(self.get_many, requests[start + step : start + 2 * step])
                yield from enumerate(values, start)

    def each_arrival(
        self,
        requests: Sequence[tuple[str, ByteRange | None]],
        fn: Callable[[int, bytes | memoryview | None], object],
    ) -> None:
        """``fn(index in requests, value)`` for every request as its value arrives: on the thread that
        received it where ``capabilities.requests_on_threads``, else here as :meth:`iter_many` hands the
        values over. The first error is raised once no call is under way."""
        for i, value in self.iter_many(requests):
            fn(i, value)

    def _get_batch_at(
        self, requests: Sequence[tuple[str, ByteRange | None]], versions: Mapping[str, Hashable]
    ) -> list[bytes | None]:
        """:meth:`_get_batch` of keys that must be at ``versions``: here, read, then compare each version
        (values are replaced whole, so bytes read between two equal versions are that version's)."""
        results = self._get_batch(requests)
        for key in {k for k, _ in requests if k in versions}:
            if self.version(key) != versions[key]:
                raise VersionChanged(key)
        return results

    def get_many_versioned(
        self, requests: Sequence[tuple[str, ByteRange | None]]
    ) -> list[tuple[bytes | None, Hashable]]:
        """:meth:`get_many` with the version each result was read from (None: missing), for later
        ``get_many(..., versions=)``; a key rewritten during each of ``tuning.conflict_retries`` attempts:
        ConflictError."""
        keys = {validate_key(k) for k, _ in requests}
        got: dict[int, tuple[bytes | None, Hashable]] = {}
        todo = list(range(len(requests)))  # only the keys rewritten meanwhile are read again
        for _ in range(tuning.current().conflict_retries):
            before = {k: self.version(k) for k in {requests[i][0] for i in todo}}
            data = self.get_many([requests[i] for i in todo])
            changed = {k for k, v in before.items() if self.version(k) != v}
            for i, d in zip(todo, data, strict=True):
                if requests[i][0] not in changed:
                    got[i] = (d, before[requests[i][0]])
            todo = [i for i in todo if requests[i][0] in changed]
            if not todo:
                return [got[i] for i in range(len(requests))]
        raise ConflictError(f"{sorted(keys)[:3]} kept being rewritten while read; try again")

    def get_transient(
        self, key: str, byte_range: ByteRange | None = None, size_hint: int | None = None
    ) -> bytes | memoryview | None:
        """One value (or range), maybe a view of a per-thread buffer that this thread's next read
        overwrites. ``size_hint``: the likely size of a whole value (a backend may read that much first).
        ``key`` is not validated: it must come from a chunk key encoding."""
        return self._get_batch([(key, byte_range)])[0]

    def get_versioned(self, key: str) -> tuple[bytes | None, Hashable]:
        """The value of ``key`` and its version no later than the read (for :meth:`set_if`: a write in
        between makes the swap fail, never succeed on a stale value); missing: (None, None)."""
        version = self.version(key)
        return self.get(key), version

    def get_version(self, key: str) -> Hashable:
        """The version :meth:`get_versioned` gives with the value (for :meth:`set_if`, :meth:`delete_if`),
        read without the value (a ``HEAD`` on object stores); None when the key is missing."""
        return self.version(key)

    def set_if(self, key: str, value: Buffer, version: Hashable) -> bool:
        """Store ``value`` only if ``key`` is still at ``version`` (None: missing); else False, writing
        nothing. A compare-and-swap under :meth:`lock` (the backend's own where
        ``capabilities.conditional_writes``); inside a hold of other keys it does not wait for the key's
        lock (:func:`locks.attempt`): False when another holds it."""
        return self._locked_if(key, version, "set", lambda: self._set_batch({key: value}))

    def delete_if(self, key: str, version: Hashable) -> bool:
        """Delete ``key`` only if it is still at ``version``; False, deleting nothing, when it is not (or,
        as :meth:`set_if`, when its lock is another's inside a hold)."""
        return self._locked_if(key, version, "delete", lambda: self._delete_batch([key]))

    def _locked_if(self, key: str, version: Hashable, what: str, write: Callable[[], object]) -> bool:
        validate_key(key)
        self._check_writable(what)
        with locks.attempt(self.lock_identity, [key], self.capabilities.process_locks) as taken:
            if not taken or self.version(key) != version:
                return False
            write()
            return True

    def update(
        self,
        keys: Sequence[str],
        make: Make,
        each: Each | None = None,
        before: Callable[[], object] | None = None,
        unread: Iterable[str] = (),
    ) -> None:
        """The one read-modify-write: ``make(stored)`` gets the value of every key of ``keys`` (None:
        missing) and gives the new ones (None: delete; a key left out, or given its stored value, stays),
        written only if no key changed since it was read. Where writers lock (no
        ``capabilities.conditional_writes``): the keys' locks held, one batched read, one ``make``, batched
        writes; elsewhere compare-and-swaps per key, the keys that lost a race read and made again up to
        ``tuning.conflict_retries`` times, then :class:`ConflictError`. ``before()`` runs once, after the
        first ``make`` and before any write (a ``make`` that raises writes nothing). ``each(fn, keys)`` runs
        single-key requests (concurrently; default: one by one). ``unread``: keys whose value ``make`` does
        not need (gets :data:`~rectizarr.stores.update.UNREAD`): not looked up under the locks, their
        version alone read by a compare-and-swap (:meth:`get_version`; None: missing)."""
        skip = frozenset(unread)
        if self.capabilities.conditional_writes:
            swapped(self, keys, make, each, before, skip)
        else:
            locked(self, keys, make, before, skip)

    def swap(self, key: str, make: Callable[[bytes | None], Buffer | None]) -> None:
        """:meth:`update` of one key as compare-and-swaps on every store: ``make(stored)`` gives the new
        value (None: delete it; ``stored`` itself: leave it)."""
        swapped(self, [key], lambda stored: {key: make(stored[key])})

    def lock(self, keys: Iterable[str]) -> AbstractContextManager[None]:
        """Hold exclusive locks on ``keys`` (a ``with`` block) against every thread of this process and,
        where ``capabilities.process_locks``, every process, whichever store object they use on the same
        data. Re-read what you change inside; take no more locks there (holds never wait in a circle)."""
        return locks.hold(self.lock_identity, keys, self.capabilities.process_locks)

    def read_into(self, keys: Sequence[str], views: Sequence[memoryview]) -> list[int]:
        """Read each key's value into the view beside it. Per key: the bytes it has up to the view's
        size plus one (a larger number than the view holds means a larger value, whose first bytes are
        in the view), or -1 when it is missing. Keys are not validated (chunk keys only)."""
        sizes = []
        for view, value in zip(views, self._get_batch([(k, None) for k in keys]), strict=True):
            if value is None:
                sizes.append(-1)
                continue
            n = min(len(value), len(view))
            view[:n] = memoryview(value)[:n]
            sizes.append(len(value) if len(value) <= len(view) else len(view) + 1)
        return sizes

    def set(self, key: str, value: Buffer) -> None:
        """Store ``value`` under ``key``, replacing any previous value."""
        self.set_many({key: value})

    def set_many(self, items: Mapping[str, Buffer]) -> None:
        """Store many values at once (concurrently where the backend allows)."""
        for key, value in items.items():
            validate_key(key)
            if not isinstance(value, bytes | bytearray | memoryview):
                raise StoreError(f"cannot store {type(value).__name__} at key {key!r}: expected bytes-like")
        self._check_writable("set")
        if items:
            self._set_batch(items)
            written.mark(self.lock_identity, items)

    def delete(self, key: str) -> None:
        """Delete ``key``; deleting a missing key does nothing."""
        self.delete_many([key])

    def delete_many(self, keys: Iterable[str]) -> None:
        """Delete every key in ``keys``; missing keys are ignored."""
        checked = [validate_key(k) for k in keys]
        self._check_writable("delete")
        if checked:
            self._delete_batch(checked)
            written.mark(self.lock_identity, checked)

    def delete_prefix(self, prefix: str) -> None:
        """Delete every key under ``prefix`` (``""`` = the whole store; otherwise it must end with '/')."""
        validate_prefix(prefix)
        self._check_writable("delete_prefix")
        try:
            self._delete_prefix(prefix)
        finally:
            written.forget()

    def exists(self, key: str) -> bool:
        """True if ``key`` holds a value."""
        return self._info(validate_key(key)) is not None

    def getsize(self, key: str) -> int | None:
        """Size of the value in bytes, None if missing."""
        info = self._info(validate_key(key))
        return None if info is None else info[0]

    def written(self, keys: Iterable[str]) -> tuple[int, ...]:
        """What changes whenever this process (through any store object on the same data) writes or deletes
        one of the documents ``keys`` (:mod:`rectizarr.stores.written`): costs no request."""
        return written.token(self.lock_identity, keys)

    def version(self, key: str) -> Hashable | None:
        """A cheap token that changes whenever the value is rewritten; None if missing."""
        info = self._info(validate_key(key))
        return None if info is None else info[1]

    def list_prefix(self, prefix: str) -> Iterator[str]:
        """Every full key under ``prefix`` (recursive, in no particular order)."""
        return self._list_prefix(validate_prefix(prefix))

    def any_under(self, prefix: str) -> bool:
        """Whether any key lies under ``prefix`` (one listing request where the backend can stop early)."""
        return bool(self.keys_under(prefix, 1))

    def keys_under(self, prefix: str, limit: int) -> list[str]:
        """At most ``limit`` keys under ``prefix``, the listing's first (one request where it can stop)."""
        return list(itertools.islice(self.list_prefix(prefix), max(0, limit)))

    def list_dir(self, prefix: str) -> list[str]:
        """Sorted names of the keys and sub-prefixes directly under ``prefix``, without a trailing '/'."""
        return sorted(set(self._list_dir(validate_prefix(prefix))))

    def limited(self, max_value: int | None) -> Store:
        """A view whose reads refuse a value (or range) of more than ``max_value`` bytes (an array's chunks:
        what a valid chunk or shard can take) with :class:`StoreError` naming the key: before it is read
        where the backend can tell (a zip entry's header, a remote answer's ``Content-Length``), else once
        one byte more came. Metadata documents keep :func:`max_document_bytes`. Stores that hold values as
        they are (no inflating, no server to send more) are their own view, as is ``max_value`` None."""
        if max_value is None or not self._limits_reads or max_value == self._max_value:
            return self
        return self._view(_max_value=int(max_value))

    def value_limit(self, key: str) -> int | None:
        """The most bytes a read of ``key`` may bring (None: no limit): :func:`max_document_bytes` for a
        metadata document, else what :meth:`limited` set."""
        return max_document_bytes() if is_document(key) else self._max_value

    def _too_large(self, key: str, size: int | None, limit: int, where: str) -> StoreError:
        """The error of a read of ``key`` that would bring ``size`` bytes (None: more than ``limit`` came)."""
        what = "a chunk or shard of the array can take"
        if is_document(key):
            what = "a metadata document may take (rectizarr.stores.set_max_document_bytes)"
        amount = "came with" if size is None else f"is {size} bytes,"
        return StoreError(
            f"key {key!r} in {where} {amount} more than the {limit} bytes {what} (corrupt or "
            "crafted data): refused"
        )

    def with_read_only(self) -> Store:
        """A read-only view of the same storage (closing the view leaves the storage open)."""
        return self._view(read_only=True)

    def _view(self, **changed: object) -> Store:
        """A view of the same storage with ``changed`` attributes; closing it leaves the storage open."""
        view = object.__new__(type(self))  # shares every attribute; bypasses the pickling hooks
        view.__dict__.update(self.__dict__, **changed, _is_view=True)
        if "_lock" in view.__dict__:
            relocked_in_child(view)  # (its lock stays the store's in a forked child)
        return view

    def close(self) -> None:
        """Release resources; a read-only view's close does nothing."""
        if not self._is_view:
            self._close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_writable(self, operation: str) -> None:
        if self.read_only:
            raise ReadOnlyError(f"cannot {operation} on read-only store {self!r}")
