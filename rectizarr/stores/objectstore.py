"""A store over ``obstore`` (the Python binding of the Rust ``object_store`` crate): S3, GCS, Azure and
HTTP(S), with many requests in flight from one Python thread and conditional reads and writes.

Every request is one of obstore's blocking calls, which wait without the GIL: a lone request on the
caller's thread, a batch's on a pool of :func:`~rectizarr.stores.requests_in_flight` threads shared by
every :class:`ObjectStore` of the process. ``storage_options`` take fsspec/s3fs/gcsfs/adlfs names
(:mod:`~rectizarr.stores.obstore_options`) or obstore's configuration keys (``aws_*``, ``google_*``,
``azure_*``), which pass through unchanged."""

from __future__ import annotations

import contextvars
import functools
import importlib
import itertools
import queue
import re
import threading
import uuid
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, wait
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from rectizarr import threads
from rectizarr._util import in_forked_child
from rectizarr.errors import StoreError, VersionChanged
from rectizarr.stores.base import Capabilities, Store
from rectizarr.stores.keys import Buffer, ByteRange, validate_key, validate_prefix, validate_range
from rectizarr.stores.limits import requests_in_flight
from rectizarr.stores.obstore_options import connect, handles, split_root
from rectizarr.stores.remote import SCHEMES, TIMEOUT, EtagStore, bucket_identity, is_empty
from rectizarr.stores.update import WRITE_TOKEN

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["ObjectStore", "handles"]

T = TypeVar("T")


@in_forked_child
def _relock() -> None:  # pragma: no cover - runs in forked children (where obstore itself cannot work)
    _Requests._lock, _Requests._size = threading.Lock(), 0  # (rectizarr.threads forgets the pools)


@functools.cache
def _obstore() -> Any:
    """The obstore module, imported on first use and kept (asked per request); typed loosely (TypedDicts)."""
    return importlib.import_module("obstore")


class _Requests:
    """The :func:`requests_in_flight` threads that make a batch's requests. On a loopback S3 server, 256
    GETs took 41 ms this way and 63 ms as asyncio tasks on an event loop thread (each request's ends
    crossed threads through the loop's wake-up pipe). (obstore does not work in a forked child.)"""

    _lock = threading.Lock()
    _size = 0  # the size of the pool last handed out

    @classmethod
    def pool(cls) -> ThreadPoolExecutor:
        """The kept pool of ``requests_in_flight()`` threads (one of another size let go, its work done)."""
        size = requests_in_flight()
        with cls._lock:
            if cls._size != size:
                threads.drop("rectizarr-objectstore", keep=size)
                cls._size = size
            return threads.kept("rectizarr-objectstore", size)

    @classmethod
    def each(cls, calls: Sequence[Callable[[], T]]) -> list[T]:
        """Every call's result, in order, the calls made on the pool (the first error is raised once all
        are done, so none is left running against a store the caller may go on to change). When they are
        no more than the pool's threads, the first one is made on this thread, which would only wait:
        it starts at once (a 4-chunk window at 20 ms per request: 2 % sooner)."""
        pool = cls.pool()
        here = calls[0] if 1 < len(calls) <= cls._size else None
        futures = [pool.submit(c) for c in (calls[1:] if here is not None else calls)]
        try:
            first = [] if here is None else [here()]
        finally:
            wait(futures)
        return [*first, *[f.result() for f in futures]]


def _unanswered(exc: BaseException) -> bool:
    """:meth:`RemoteStore._unanswered` for obstore's errors: a 4xx names its status in the message."""
    from obstore import exceptions as e

    refusals = (e.InvalidPathError, e.NotSupportedError, e.PermissionDeniedError, e.UnauthenticatedError)
    if isinstance(exc, (*refusals, e.UnknownConfigurationKeyError)):
        return False
    status = re.search(r"status(?: code)?:? (\d{3})\b", str(exc))
    return status is None or int(status.group(1)) >= 500


def _get_options(byte_range: ByteRange | None, etag: Hashable) -> dict[str, Any]:
    """obstore's options for a GET of ``byte_range`` (if any) at ``etag`` (if any)."""
    options: dict[str, Any] = {} if etag is None else {"if_match": etag}
    if byte_range is not None:
        start, length = byte_range
        whole = {"offset": start} if length is None else (start, start + length)
        options["range"] = {"suffix": -start} if start < 0 else whole
    return options


class ObjectStore(EtagStore):
    """A store under an object store URL (``s3://bucket/prefix``, ``gs://``, ``az://`` / ``abfs://``,
    ``http(s)://``) through obstore: one ``GET`` per value (a missing key too), ETags as versions
    (:class:`EtagStore`). Requests answered 5xx or 429/503 are retried ``RETRIES`` times with backoff, then
    raise :class:`StoreError` naming the URL, as does a server silent for ``timeout`` seconds. HTTP(S)
    stores are read-only. Pickles by URL and options. A read through :meth:`limited` or of a metadata
    document refuses an answer longer than its limit from its ``Content-Length``, unread."""

    def __init__(
        self,
        url: str,
        *,
        storage_options: Mapping[str, Any] | None = None,
        read_only: bool = False,
        coalesce_gap: int | None = None,
        coalesce_max: int | None = None,
    ) -> None:
        scheme = urlsplit(url).scheme.lower()
        kind = SCHEMES.get(scheme)
        if kind is None:
            raise StoreError(
                f"cannot open {url!r} with the obstore backend: unknown scheme {scheme!r} "
                f"(expected one of {', '.join(sorted(SCHEMES))})"
            )
        super().__init__(
            read_only=read_only or kind == "http", coalesce_gap=coalesce_gap, coalesce_max=coalesce_max
        )
        self.url, self.kind = url.rstrip("/"), kind
        self.storage_options = dict(storage_options or {})
        self.capabilities = Capabilities(
            conditional_writes=kind != "http",
            hashed_versions=kind != "http",
            conditional_reads=True,
            requests_on_threads=True,
            unlisted=kind == "http",
        )
        location = self.url.split("://", 1)[1]
        self.lock_identity = bucket_identity(scheme, location) or f"objectstore:{self.url}/"
        client = self.storage_options.get("client_kwargs") or {}
        timeout = self.storage_options.get("timeout", client.get("timeout", TIMEOUT))
        self.timeout = None if timeout is None else float(timeout)
        self._root, self._prefix = split_root(self.url, kind)
        self._store = connect(self.url, kind, self._root, self.storage_options)
        self._lister: Store | None = None

    def _listing(self) -> Store | None:
        """Over HTTP(S), listings come from the server's index pages through fsspec (obstore asks for
        WebDAV, which plain web servers do not speak); None elsewhere."""
        if self.kind != "http":
            return None
        if self._lister is None:
            from rectizarr.stores.fsspec import FsspecStore

            self._lister = FsspecStore(self.url, storage_options=self.storage_options, read_only=True)
        return self._lister

    def __repr__(self) -> str:
        return f"ObjectStore({self.url!r}, read_only={self.read_only})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_store"]
        state["_lister"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._store = connect(self.url, self.kind, self._root, self.storage_options)

    def _where(self, key: str) -> str:
        return f"{self.url}/{key}"

    def _path(self, key: str) -> str:
        """``key`` (or a prefix) as a path of the client's bucket or server."""
        return f"{self._prefix}/{key}" if self._prefix else key

    def _under(self, prefix: str) -> str | None:
        """A listing's prefix for the client (None: everything it holds)."""
        return self._path(prefix) if prefix else (self._prefix or None)

    def _key_of(self, path: str) -> str:
        """A listed path as a key of this store."""
        return path[len(self._prefix) + 1 :] if self._prefix else path

    _unanswered = staticmethod(_unanswered)

    # ---- one request ----------------------------------------------------------------------------------

    def _get_failed(
        self, key: str, byte_range: ByteRange | None, etag: Hashable, exc: Exception
    ) -> tuple[Any, Hashable] | None:
        """What a failed GET says: ``(None, None)`` missing; None when a range may start past the end (the
        caller asks :meth:`_past_end`); else raises (:class:`VersionChanged`, :class:`StoreError`)."""
        from obstore.exceptions import NotFoundError, PreconditionError

        if isinstance(exc, NotFoundError | FileNotFoundError):
            if etag is not None:
                raise VersionChanged(key) from None
            return None, None
        if isinstance(exc, PreconditionError):
            raise VersionChanged(key) from None
        if byte_range is not None and "range" in str(exc).lower():
            return None
        raise self._fail("reading", self._where(key), exc) from exc

    def _fetch_span(self, key: str, start: int, end: int, etag: Hashable) -> Any:
        """The whole value, cut here (a server that ignores ``Range`` or refuses suffixes with a 416)."""
        body = self._fetch(key, None, etag)[0]
        return None if body is None else memoryview(body)[start:end]

    def _fetch(self, key: str, byte_range: ByteRange | None, etag: Hashable = None) -> tuple[Any, Hashable]:
        """One GET: ``(value, ETag)``, the value as obstore's buffer (no copy: a shard is megabytes);
        ``(None, None)`` if missing; with ``etag``, ``If-Match`` it."""
        if is_empty(byte_range):
            return self._empty_answer(key, etag)
        limit, size = self.value_limit(key), 0
        try:
            result = _obstore().get(self._store, self._path(key), options=_get_options(byte_range, etag))
            start, end = result.range  # from the answer's headers: the body is not read yet
            size = end - start
            tag = result.meta.get("e_tag")
            body = None if limit is not None and size > limit else result.bytes()
        except Exception as exc:
            failed = self._get_failed(key, byte_range, etag, exc)
            if failed is not None:
                return failed
            assert byte_range is not None  # (only a range is refused as such)
            meta = self._meta(key)
            answer = None if meta is None else self._refused_range(key, byte_range, etag, meta)
            if answer is None or answer[0] is None:
                raise self._fail("reading", self._where(key), exc) from exc
            return answer
        if body is None:  # (object_store needs a Content-Length, and reads no more than it says)
            raise self._too_large(key, size, limit or 0, self._where(key))
        if etag is not None and tag is not None and tag != etag:  # (plain HTTP ignores If-Match)
            raise VersionChanged(key)
        return body, tag

    def _get(
        self, key: str, byte_range: ByteRange | None, etag: Hashable = None
    ) -> tuple[bytes | None, Hashable]:
        """:meth:`_fetch` as ``bytes``."""
        body, tag = self._fetch(key, byte_range, etag)
        return (None if body is None else bytes(body)), tag

    def _looked_up(self, key: str, call: Callable[[Any, str], T]) -> T | None:
        """``call(client, path)`` (a ``HEAD``), the client's error wrapped; None when ``key`` is missing."""
        from obstore.exceptions import NotFoundError

        try:
            return call(self._store, self._path(key))
        except Exception as exc:
            if not isinstance(exc, NotFoundError | FileNotFoundError):
                raise self._fail("looking up", self._where(key), exc) from exc
            return None

    def _meta(self, key: str) -> tuple[int, Hashable] | None:
        meta = self._looked_up(key, _obstore().head)
        return None if meta is None else (int(meta["size"]), meta.get("e_tag"))

    _info = _meta

    def _put(self, key: str, value: Buffer, mode: Any = None) -> bool:
        """One PUT (``mode``: obstore's, for conditional writes, whose value is kept with a token of this
        write: :data:`~rectizarr.stores.base.WRITE_TOKEN`); False when a condition refused it."""
        from obstore.exceptions import AlreadyExistsError, NotFoundError, PreconditionError

        conditional = mode is not None and mode != "overwrite"
        token = uuid.uuid4().hex
        body = value if isinstance(value, bytes) else bytes(value)
        attributes = {WRITE_TOKEN: token} if conditional else None
        try:
            _obstore().put(self._store, self._path(key), body, mode=mode, attributes=attributes)
        except Exception as exc:  # (object_store sends a PUT that timed out only once: it may have landed)
            refused = conditional and isinstance(
                exc,
                AlreadyExistsError | PreconditionError | FileExistsError | NotFoundError | FileNotFoundError,
            )  # refused, or If-Match: deleted (an unconditional write refused is an error)
            retried = re.search(r"after ([1-9]\d*) retries", str(exc)) is not None
            sent = token if conditional else None
            return self._settle(key, value, sent, exc, refused=refused, resent=retried, maybe_resent=False)
        return True

    def _write_token(self, key: str) -> str | None:
        result = self._looked_up(key, functools.partial(_obstore().get, options={"head": True}))
        if result is None:
            return None
        token = (result.attributes or {}).get(WRITE_TOKEN)
        return token if isinstance(token, str) else None

    # ---- backend primitives -------------------------------------------------------------------------

    def _gets(
        self, requests: Sequence[tuple[str, ByteRange | None, Hashable]]
    ) -> list[tuple[bytes | None, Hashable]]:
        """GETs (each at its ETag, if given), one on this thread, several on the pool."""
        if len(requests) == 1:
            return [self._get(*requests[0])]
        return _Requests.each([functools.partial(self._get, k, r, e) for k, r, e in requests])

    def iter_many(
        self, requests: Sequence[tuple[str, ByteRange | None]], ahead: int | None = None
    ) -> Iterator[tuple[int, bytes | memoryview | None]]:
        """Requests on the pool's threads, each value handed over as it arrives; with ``ahead``, a request
        starts only while fewer than ``ahead`` values are in flight or waiting to be taken."""
        checked = [(validate_key(k), validate_range(k, r)) for k, r in requests]
        if len(checked) == 1:  # one request: on this thread
            yield 0, self._get(*checked[0])[0]
            return
        arrived: queue.SimpleQueue[tuple[int, bytes | memoryview | None] | BaseException] = (
            queue.SimpleQueue()
        )

        def one(i: int, key: str, byte_range: ByteRange | None) -> None:
            try:
                body = self._fetch(key, byte_range)[0]
                arrived.put((i, None if body is None else memoryview(body)))
            except BaseException as exc:  # handed to the caller's thread
                arrived.put(exc)

        pool, waiting = _Requests.pool(), iter(enumerate(checked))
        futures: list[Future[None]] = []

        def start_next() -> None:
            for i, (key, byte_range) in itertools.islice(waiting, 1):
                futures.append(pool.submit(one, i, key, byte_range))

        for _ in range(len(checked) if ahead is None else min(len(checked), max(1, ahead))):
            start_next()
        try:
            for _ in checked:
                item = arrived.get()
                if isinstance(item, BaseException):
                    raise item
                start_next()
                yield item
        finally:  # the caller stopped early (an error, or it needs no more): no request left to start
            for f in futures:
                f.cancel()

    def each_arrival(
        self,
        requests: Sequence[tuple[str, ByteRange | None]],
        fn: Callable[[int, bytes | memoryview | None], object],
    ) -> None:
        """Each request and then ``fn`` on its value on one of the pool's threads (in the caller's context):
        a small read's chunks decode as they arrive, with no hand-off to another thread (4 chunks at 20 ms
        per request: 0.3-0.4 ms sooner)."""
        context = contextvars.copy_context()

        def one(i: int, key: str, byte_range: ByteRange | None) -> None:
            body = self._fetch(key, byte_range)[0]
            context.copy().run(fn, i, None if body is None else memoryview(body))

        _Requests.each(
            [
                functools.partial(one, i, validate_key(k), validate_range(k, r))
                for i, (k, r) in enumerate(requests)
            ]
        )

    def get_transient(
        self, key: str, byte_range: ByteRange | None = None, size_hint: int | None = None
    ) -> bytes | memoryview | None:
        """One GET, its value a view of obstore's buffer (no copy)."""
        body = self._fetch(key, validate_range(key, byte_range))[0]
        return None if body is None else memoryview(body)

    def get_versioned(self, key: str) -> tuple[bytes | None, Hashable]:
        return self._get(validate_key(key), None)

    def _put_if(self, key: str, value: Buffer, version: Hashable) -> bool:
        return self._put(key, value, "create" if version is None else {"e_tag": version})

    def _delete_at(self, key: str, version: Hashable) -> bool:
        """Not atomic: obstore's ``delete`` takes paths only (object_store has no conditional delete, though
        S3 and GCS can make one), so the ETag is checked, then the key deleted (a writer between the two is
        not seen; see docs/guarantees.md)."""
        info = self._info(key)
        if info is None or info[1] != version:
            return False
        self._delete_batch([key])
        return True

    def _set_batch(self, items: Mapping[str, Buffer]) -> None:
        if len(items) == 1:
            self._put(*next(iter(items.items())))
            return
        _Requests.each([functools.partial(self._put, k, v) for k, v in items.items()])

    def _delete_batch(self, keys: Sequence[str]) -> None:
        try:
            _obstore().delete(self._store, [self._path(k) for k in keys])
        except Exception as exc:
            if "not found" not in str(exc).lower():
                raise self._fail("deleting", self._where(keys[0]), exc) from exc

    def _delete_prefix(self, prefix: str) -> None:
        keys = list(self._list_prefix(prefix))
        for start in range(0, len(keys), 1000):
            self._delete_batch(keys[start : start + 1000])

    def _listed(self, prefix: str, call: Callable[[], T], missing: T) -> T:
        """A listing's answer (``missing`` when nothing is there), the client's error wrapped."""
        try:
            return call()
        except (FileNotFoundError, NotADirectoryError):
            return missing
        except Exception as exc:
            raise self._fail("listing", self._where(prefix), exc) from exc

    def _keys(self, prefix: str, metas: Iterable[Any]) -> Iterator[str]:
        keys = (self._key_of(m["path"]) for m in metas)
        return (k for k in keys if k.startswith(prefix) and k != prefix.rstrip("/"))

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        lister = self._listing()
        if lister is not None:
            yield from lister.list_prefix(prefix)
            return
        under = self._under(prefix)
        batches: list[Any] = self._listed(
            prefix, lambda: list(_obstore().list(self._store, under, chunk_size=1000)), []
        )
        for batch in batches:
            yield from self._keys(prefix, batch)

    def keys_under(self, prefix: str, limit: int) -> list[str]:
        validate_prefix(prefix)
        lister = self._listing()
        if lister is not None:
            return lister.keys_under(prefix, limit)
        if limit < 1:
            return []
        under = self._under(prefix)  # (the first batch is the listing's first page: one request)
        first: list[Any] = self._listed(
            prefix, lambda: next(iter(_obstore().list(self._store, under, chunk_size=limit)), []), []
        )
        return list(self._keys(prefix, first))[:limit]

    def _list_dir(self, prefix: str) -> Iterable[str]:
        lister = self._listing()
        if lister is not None:
            return lister.list_dir(prefix)
        under = self._under(prefix.rstrip("/"))
        result = self._listed(prefix, lambda: _obstore().list_with_delimiter(self._store, under), None)
        if result is None:
            return []
        objects = [m["path"] for m in result["objects"] if self._key_of(m["path"]).startswith(prefix)]
        names = [p.rstrip("/").rsplit("/", 1)[-1] for p in result["common_prefixes"]]
        return [n for n in names + [p.rsplit("/", 1)[-1] for p in objects] if n]
