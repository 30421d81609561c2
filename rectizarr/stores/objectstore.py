"""A store over ``obstore`` (the Python binding of the Rust ``object_store`` crate): S3, GCS, Azure and
HTTP(S), with many requests in flight from one Python thread and conditional reads and writes.

Requests run as asyncio tasks on one event loop thread shared by every :class:`ObjectStore` of the
process; a batch keeps up to :func:`~rectizarr.stores.requests_in_flight` requests in flight (default 64,
set with :func:`rectizarr.set_requests_in_flight`). ``storage_options`` take fsspec/s3fs/gcsfs/adlfs names (``key``,
``secret``, ``token``, ``endpoint_url``, ``client_kwargs={"endpoint_url", "region_name"}``, ``anon``,
``account_name``, ``account_key``, ``sas_token``, ``headers``, ``timeout``) or obstore's own
configuration keys (``aws_*``, ``google_*``, ``azure_*``), which pass through unchanged.
"""

from __future__ import annotations

import asyncio
import importlib
import queue
import threading
from collections.abc import Awaitable, Coroutine, Hashable, Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit

from rectizarr.errors import StoreError, VersionChanged
from rectizarr.stores.base import (
    Buffer,
    ByteRange,
    Capabilities,
    Store,
    requests_in_flight,
    validate_key,
    validate_prefix,
    validate_range,
)
from rectizarr.stores.obstore_options import SCHEMES, client_config, handles

__all__ = ["ObjectStore", "handles"]

REMOTE_COALESCE_GAP = 1 << 20
REMOTE_COALESCE_MAX = 1 << 25
RETRIES = 3  # of a request answered 5xx, 429/503 (throttling) or cut off, with backoff
T = TypeVar("T")
_CLIENTS: dict[tuple[str, str, str], Any] = {}  # obstore clients by URL and options (insertion order: LRU-ish)
_CLIENTS_LOCK = threading.Lock()


def _obstore() -> Any:
    """The obstore module (imported on first use; typed loosely: its options are TypedDicts)."""
    return importlib.import_module("obstore")


class _Loop:
    """One asyncio event loop in a daemon thread, running every ObjectStore request of the process."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def _get(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or cls._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="rectizarr-objectstore", daemon=True).start()
                cls._loop = loop
            return cls._loop

    @classmethod
    def run(cls, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, cls._get()).result()

    @classmethod
    def submit(cls, coro: Coroutine[Any, Any, T]) -> None:
        """Start ``coro`` on the loop without waiting for it."""
        asyncio.run_coroutine_threadsafe(coro, cls._get())


async def _bounded(coros: Iterable[Awaitable[T]]) -> list[T]:
    """Await ``coros`` with at most :func:`requests_in_flight` of them running at once, in order."""
    gate = asyncio.Semaphore(requests_in_flight())

    async def one(c: Awaitable[T]) -> T:
        async with gate:
            return await c

    return list(await asyncio.gather(*(one(c) for c in coros)))


def _range_option(byte_range: ByteRange) -> Any:
    start, length = byte_range
    if start < 0:
        return {"suffix": -start}
    return {"offset": start} if length is None else (start, start + length)


class ObjectStore(Store):
    """A store under an object store URL (``s3://bucket/prefix``, ``gs://``, ``az://`` / ``abfs://``,
    ``http(s)://``) through obstore.

    One whole value is one ``GET`` (a missing key is one request too); ranges of one key closer than
    ``coalesce_gap`` bytes are one ranged ``GET``; a batch keeps :func:`requests_in_flight` requests in
    flight. Versions are ETags: ``set_if`` is a conditional ``PUT`` (``If-Match``, or create-only), and
    reads at a version carry ``If-Match`` (:class:`~rectizarr.errors.VersionChanged` on 412). Requests
    answered 5xx or 429/503 are retried ``RETRIES`` times with backoff, then raise :class:`StoreError`
    naming the URL, as does a server that does not answer within ``timeout`` seconds. HTTP(S) stores are
    read-only. Pickles by URL and options."""

    def __init__(self, url: str, *, storage_options: Mapping[str, Any] | None = None, read_only: bool = False,
                 coalesce_gap: int = REMOTE_COALESCE_GAP, coalesce_max: int = REMOTE_COALESCE_MAX) -> None:
        scheme = urlsplit(url).scheme.lower()
        kind = SCHEMES.get(scheme)
        if kind is None:
            raise StoreError(f"cannot open {url!r} with the obstore backend: unknown scheme {scheme!r} "
                             f"(expected one of {', '.join(sorted(SCHEMES))})")
        super().__init__(read_only=read_only or kind == "http", coalesce_gap=coalesce_gap, coalesce_max=coalesce_max)
        self.url, self.kind = url.rstrip("/"), kind
        self.storage_options = dict(storage_options or {})
        self.capabilities = Capabilities(conditional_writes=kind != "http", conditional_reads=True)
        self.lock_identity = f"objectstore:{self.url}/"
        self._store = self._connect()
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

    def _connect(self) -> Any:
        """The obstore client for this URL and these options, shared by every ObjectStore of the process
        opened the same way (making one costs milliseconds; it pools connections and is thread-safe)."""
        config, client_options = client_config(self.kind, self.storage_options)
        if self.kind == "http":
            client_options["allow_http"] = self.url.lower().startswith("http://")
        key = (self.url, repr(sorted(config.items())), repr(sorted(client_options.items())))
        with _CLIENTS_LOCK:
            client = _CLIENTS.get(key)
            if client is None:
                client = _CLIENTS[key] = self._make_client(config, client_options)
                while len(_CLIENTS) > 64:
                    del _CLIENTS[next(iter(_CLIENTS))]
            return client

    def _make_client(self, config: dict[str, Any], client_options: dict[str, Any]) -> Any:
        try:
            from_url: Any = importlib.import_module("obstore.store").from_url
        except ImportError as exc:
            raise StoreError("the obstore backend needs the 'obstore' package: pip install 'rectizarr[cloud]'") from exc
        retry = {"max_retries": RETRIES, "retry_timeout": timedelta(seconds=60),
                 "backoff": {"init_backoff": timedelta(milliseconds=50), "max_backoff": timedelta(seconds=2),
                             "base": 2}}
        try:
            if self.kind == "http":
                return from_url(self.url, client_options=client_options, retry_config=retry)
            return from_url(self.url, config=config, client_options=client_options, retry_config=retry)
        except Exception as exc:
            raise StoreError(f"cannot open {self.url!r} with the obstore backend: {exc}") from exc

    def __repr__(self) -> str:
        return f"ObjectStore({self.url!r}, read_only={self.read_only})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_store"]
        state["_lister"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._store = self._connect()

    def _url(self, key: str) -> str:
        return f"{self.url}/{key}"

    def _fail(self, what: str, key: str, exc: BaseException) -> StoreError:
        full = str(exc)
        text = full.split("\n", 1)[0]
        if isinstance(exc, TimeoutError) or "TimedOut" in full or "timed out" in full.lower():
            return StoreError(f"{what} {self._url(key)} timed out (no answer within the timeout): {text[:300]}")
        return StoreError(f"{what} {self._url(key)} failed: {type(exc).__name__}: {text[:300]}")

    # ---- one request ----------------------------------------------------------------------------------
    # Each comes as a coroutine (for batches, many in flight on the loop thread) and as a call made on the
    # caller's thread (one request: obstore's blocking call releases the GIL, and skips the two thread
    # hand-offs of the loop, 0.7 ms of a 1.3 ms request to a loopback server).

    @staticmethod
    def _get_options(byte_range: ByteRange | None, etag: Hashable) -> dict[str, Any]:
        options: dict[str, Any] = {} if etag is None else {"if_match": etag}
        if byte_range is not None:
            options["range"] = _range_option(byte_range)
        return options

    def _get_failed(self, key: str, byte_range: ByteRange | None, etag: Hashable, exc: Exception
                    ) -> tuple[bytes | None, Hashable] | None:
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
        raise self._fail("reading", key, exc) from exc

    def _past_end(self, key: str, etag: Hashable, meta: tuple[int, Hashable] | None, exc: Exception
                  ) -> tuple[bytes | None, Hashable]:
        """A range refused: empty when the key exists (at ``etag``, if given), else the error."""
        if meta is not None and (etag is None or meta[1] == etag):
            return b"", meta[1]
        raise self._fail("reading", key, exc) from exc

    async def _get(self, key: str, byte_range: ByteRange | None, etag: Hashable = None
                   ) -> tuple[bytes | None, Hashable]:
        """One GET: ``(bytes, ETag)``, ``(None, None)`` if missing; with ``etag``, ``If-Match`` it."""
        body, tag = await self._fetch(key, byte_range, etag)
        return (None if body is None else bytes(body)), tag

    async def _fetch(self, key: str, byte_range: ByteRange | None, etag: Hashable = None) -> tuple[Any, Hashable]:
        """:meth:`_get` with the value as obstore's buffer (no copy: a whole shard is megabytes)."""
        if byte_range is not None and byte_range[1] == 0:  # an empty range cannot be asked for
            meta = await self._head(key)
            return (None, None) if meta is None else (b"", meta[1])
        try:
            result = await _obstore().get_async(self._store, key, options=self._get_options(byte_range, etag))
            return await result.bytes_async(), result.meta.get("e_tag")
        except Exception as exc:
            failed = self._get_failed(key, byte_range, etag, exc)
            return self._past_end(key, etag, await self._head(key), exc) if failed is None else failed

    def _get_now(self, key: str, byte_range: ByteRange | None, etag: Hashable = None
                 ) -> tuple[bytes | None, Hashable]:
        """:meth:`_get` on this thread."""
        if byte_range is not None and byte_range[1] == 0:
            meta = self._head_now(key)
            return (None, None) if meta is None else (b"", meta[1])
        try:
            result = _obstore().get(self._store, key, options=self._get_options(byte_range, etag))
            return bytes(result.bytes()), result.meta.get("e_tag")
        except Exception as exc:
            failed = self._get_failed(key, byte_range, etag, exc)
            return self._past_end(key, etag, self._head_now(key), exc) if failed is None else failed

    def _head_failed(self, key: str, exc: Exception) -> None:
        from obstore.exceptions import NotFoundError

        if not isinstance(exc, NotFoundError | FileNotFoundError):
            raise self._fail("looking up", key, exc) from exc

    async def _head(self, key: str) -> tuple[int, Hashable] | None:
        try:
            meta = await _obstore().head_async(self._store, key)
        except Exception as exc:
            self._head_failed(key, exc)
            return None
        return int(meta["size"]), meta.get("e_tag")

    def _head_now(self, key: str) -> tuple[int, Hashable] | None:
        try:
            meta = _obstore().head(self._store, key)
        except Exception as exc:
            self._head_failed(key, exc)
            return None
        return int(meta["size"]), meta.get("e_tag")

    def _put_failed(self, key: str, exc: Exception) -> bool:
        """False for a conditional write refused; raises otherwise."""
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        if isinstance(exc, AlreadyExistsError | PreconditionError | FileExistsError):
            return False
        raise self._fail("writing", key, exc) from exc

    async def _put(self, key: str, value: Buffer, mode: Any = None) -> bool:
        try:
            await _obstore().put_async(self._store, key, value if isinstance(value, bytes) else bytes(value),
                                       mode=mode)
        except Exception as exc:
            return self._put_failed(key, exc)
        return True

    def _put_now(self, key: str, value: Buffer, mode: Any = None) -> bool:
        try:
            _obstore().put(self._store, key, value if isinstance(value, bytes) else bytes(value), mode=mode)
        except Exception as exc:
            return self._put_failed(key, exc)
        return True

    # ---- backend primitives -------------------------------------------------------------------------

    def _get_batch(self, requests: Sequence[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        return [data for data, _ in self._gets(requests, {})]

    def _gets(self, requests: Sequence[tuple[str, ByteRange | None]], versions: Mapping[str, Hashable]
              ) -> list[tuple[bytes | None, Hashable]]:
        """GETs (at ``versions``), one on this thread, several on the loop."""
        if len(requests) == 1:
            key, byte_range = requests[0]
            return [self._get_now(key, byte_range, versions.get(key))]
        return _Loop.run(_bounded(self._get(k, r, versions.get(k)) for k, r in requests))

    def iter_many(self, requests: Sequence[tuple[str, ByteRange | None]]
                  ) -> Iterator[tuple[int, bytes | memoryview | None]]:
        checked = [(validate_key(k), validate_range(k, r)) for k, r in requests]
        if len(checked) == 1:  # one request: on this thread
            yield 0, self._get_now(*checked[0])[0]
            return
        arrived: queue.SimpleQueue[tuple[int, bytes | memoryview | None] | BaseException] = queue.SimpleQueue()

        async def one(i: int, key: str, byte_range: ByteRange | None) -> None:
            try:
                body = (await self._fetch(key, byte_range))[0]
                arrived.put((i, None if body is None else memoryview(body)))
            except BaseException as exc:  # handed to the caller's thread
                arrived.put(exc)

        _Loop.submit(_bounded(one(i, k, r) for i, (k, r) in enumerate(checked)))
        for _ in checked:
            item = arrived.get()
            if isinstance(item, BaseException):
                raise item
            yield item

    def _get_batch_at(self, requests: Sequence[tuple[str, ByteRange | None]],
                      versions: Mapping[str, Hashable]) -> list[bytes | None]:
        return [data for data, _ in self._gets(requests, versions)]

    def get_many_versioned(self, requests: Sequence[tuple[str, ByteRange | None]]
                           ) -> list[tuple[bytes | None, Hashable]]:
        return self._gets([(validate_key(k), validate_range(k, r)) for k, r in requests], {})

    def get_versioned(self, key: str) -> tuple[bytes | None, Hashable]:
        return self._get_now(validate_key(key), None)

    def set_if(self, key: str, value: Buffer, version: Hashable) -> bool:
        validate_key(key)
        self._check_writable("set")
        return self._put_now(key, value, "create" if version is None else {"e_tag": version})

    def delete_if(self, key: str, version: Hashable) -> bool:
        """Object stores offer no conditional delete through obstore: the ETag is checked, then the key
        deleted (a writer between the two is not seen; see docs/guarantees.md)."""
        validate_key(key)
        self._check_writable("delete")
        info = self._info(key)
        if (None if info is None else info[1]) != version:
            return False
        if info is not None:
            self._delete_batch([key])
        return True

    def _set_batch(self, items: Mapping[str, Buffer]) -> None:
        if len(items) == 1:
            self._put_now(*next(iter(items.items())))
            return
        _Loop.run(_bounded(self._put(k, v) for k, v in items.items()))

    def _delete_batch(self, keys: Sequence[str]) -> None:
        try:
            _obstore().delete(self._store, list(keys))
        except Exception as exc:
            if "not found" not in str(exc).lower():
                raise self._fail("deleting", keys[0], exc) from exc

    def _delete_prefix(self, prefix: str) -> None:
        keys = list(self._list_prefix(prefix))
        for start in range(0, len(keys), 1000):
            self._delete_batch(keys[start : start + 1000])

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        obstore = _obstore()

        lister = self._listing()
        if lister is not None:
            yield from lister.list_prefix(prefix)
            return
        try:
            batches = list(obstore.list(self._store, prefix or None, chunk_size=1000))
        except (FileNotFoundError, NotADirectoryError):
            return
        except Exception as exc:
            raise self._fail("listing", prefix, exc) from exc
        for batch in batches:
            for meta in batch:
                path = meta["path"]
                if path.startswith(prefix) and path != prefix.rstrip("/"):
                    yield path

    def any_under(self, prefix: str) -> bool:
        validate_prefix(prefix)
        lister = self._listing()
        if lister is not None:
            return lister.any_under(prefix)
        obstore = _obstore()
        try:
            first: list[Any] = next(iter(obstore.list(self._store, prefix or None, chunk_size=1)), [])
            return any(m["path"].startswith(prefix) for m in first)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except Exception as exc:
            raise self._fail("listing", prefix, exc) from exc

    def _list_dir(self, prefix: str) -> Iterable[str]:
        obstore = _obstore()

        lister = self._listing()
        if lister is not None:
            return lister.list_dir(prefix)
        try:
            result = obstore.list_with_delimiter(self._store, prefix.rstrip("/") or None)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except Exception as exc:
            raise self._fail("listing", prefix, exc) from exc
        names = [p.rstrip("/").rsplit("/", 1)[-1] for p in result["common_prefixes"]]
        names += [m["path"].rsplit("/", 1)[-1] for m in result["objects"] if m["path"].startswith(prefix)]
        return [n for n in names if n]

    def _info(self, key: str) -> tuple[int, Hashable] | None:
        return self._head_now(key)
