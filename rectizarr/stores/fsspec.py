"""A store over any fsspec filesystem (s3, gcs, http, memory, file, zip:: chains, caches ...)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import itertools
import os
import uuid
import weakref
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote

import fsspec
from fsspec.asyn import sync
from fsspec.implementations.local import LocalFileSystem
from fsspec.mapping import FSMap

from rectizarr.errors import RectizarrError, StoreError, VersionChanged
from rectizarr.stores.base import (
    WRITE_TOKEN,
    Buffer,
    ByteRange,
    Capabilities,
    Store,
    requests_in_flight,
    validate_key,
    validate_prefix,
    validate_range,
)

__all__ = ["FsspecStore"]

REMOTE_COALESCE_GAP = 1 << 20
REMOTE_COALESCE_MAX = 1 << 25
HTTP_TIMEOUT = 30.0
_BODY_ATTEMPTS = 3  # reads of an S3 value whose body was cut short
_VERSION_FIELDS = (
    "ETag",
    "etag",
    "md5",
    "generation",
    "LastModified",
    "last_modified",
    "Last-Modified",
    "mtime",
    "created",
    "ino",
)
_URL_PROTOCOLS = {"http", "https"}


def _http_range(byte_range: ByteRange) -> str:
    """An HTTP ``Range`` header value for a non-empty (start, length) range."""
    start, length = byte_range
    if start < 0:
        return f"bytes={start}"
    return f"bytes={start}-" if length is None else f"bytes={start}-{start + length - 1}"


def _s3_options(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """``storage_options`` for an s3:// URL with room for ``requests_in_flight()`` requests in flight
    (aiobotocore's pool holds 10 by default), unless the options say otherwise."""
    if url.split("://", 1)[0].lower() not in ("s3", "s3a"):
        return options
    config = dict(options.get("config_kwargs") or {})
    config.setdefault("max_pool_connections", requests_in_flight())
    return {**options, "config_kwargs": config}


def _token(value: Any) -> Hashable:
    return value if isinstance(value, Hashable) else repr(value)


def _http_options(
    url: str, options: dict[str, Any] | None, timeout: float | None
) -> tuple[dict[str, Any], float | None]:
    """``storage_options`` for an http(s) URL, and the timeout in effect: bounded waits (``timeout``
    seconds to connect and between bytes; a ``timeout`` option wins, a ``client_kwargs`` timeout wins over
    both) and bodies as sent, never inflated (``Accept-Encoding: identity``, and no decompression if a
    server compresses anyway), unless the options say otherwise."""
    options = dict(options or {})
    if url.split("://", 1)[0].lower() not in _URL_PROTOCOLS:
        return options, None
    import aiohttp  # fsspec's HTTP client

    timeout = options.pop("timeout", timeout)
    client = dict(options.get("client_kwargs") or {})
    if "timeout" in client:
        timeout = None
    elif timeout is not None:
        client["timeout"] = aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout)
    client.setdefault("auto_decompress", False)
    options["client_kwargs"] = client
    options["headers"] = {"Accept-Encoding": "identity", **(options.get("headers") or {})}
    return options, timeout


def _responses(exc: BaseException) -> Iterator[dict[str, Any]]:
    """The botocore responses along ``exc``'s chain (s3fs's translation of botocore's error, and its cause)."""
    seen: BaseException | None = exc
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            yield response
        seen = seen.__cause__ or seen.__context__


def _retried(exc: BaseException) -> bool:
    """Whether botocore sent the request that ``exc`` answers more than once (its ``RetryAttempts``)."""
    response = next(_responses(exc), None)
    return response is not None and bool(response.get("ResponseMetadata", {}).get("RetryAttempts"))


def _unanswered(exc: BaseException) -> bool:
    """Whether ``exc`` may follow a request that the server carried out: no answer was read (a reset or
    closed connection, a timeout) or the answer was a 5xx. A 4xx is the server's refusal of it."""
    response = next(_responses(exc), None)
    status = None if response is None else response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return not isinstance(status, int) or status >= 500


def _refused(exc: BaseException, version: Hashable) -> bool:
    """Whether ``exc`` is a conditional ``PUT``'s condition refusing it. s3fs: FileExistsError
    (If-None-Match), EINVAL "pre-conditions" (If-Match), FileNotFoundError (If-Match on a key another
    writer deleted: 404), 409 ConditionalRequestConflict (two conditional writes of one key at once)."""
    if not isinstance(exc, OSError):
        return False
    return (
        isinstance(exc, FileExistsError)
        or (isinstance(exc, FileNotFoundError) and version is not None)
        or "pre-condition" in str(exc)
        or "ConditionalRequestConflict" in str(exc)
    )


# The sends of the conditional PUT being made (set around the call: fsspec runs it as a task on its loop,
# which copies the caller's context). s3fs sends a request again on a reset connection or a timeout itself,
# as a new botocore call whose answer says no retry: a refusal that follows such a send is counted here.
_SENDS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("rectizarr_s3_sends", default=None)


def _count_send(**kwargs: Any) -> None:
    sends = _SENDS.get()
    if sends is not None:
        sends[0] += 1


_PREPARED: weakref.WeakSet[Any] = weakref.WeakSet()  # s3fs clients made ready for our writes


def _prepare_client(fs: Any) -> None:
    """Make ``fs``'s S3 client (s3fs: made here if it has none yet, with no request) count the sends of a
    ``PutObject`` (:data:`_SENDS`) and send uploads without ``Expect: 100-continue``. botocore asks for it
    on every ``PUT`` with a body, and aiohttp waits for the server's ``100 Continue`` with no timeout: a
    server that takes the connection and never answers held a write past 500 s, where with the body sent
    at once it fails after the read timeout (``StoreError``, 41 s with a 2 s read timeout and s3fs's
    retries; fuzz fz34). The body is then sent whatever the answer (a ``PUT`` refused for its credentials
    uploads its value for nothing)."""
    client = getattr(fs, "s3", None)
    if client is None:
        with contextlib.suppress(Exception):  # no client can be made: the write reports why
            fs.connect()
        client = getattr(fs, "s3", None)
    if client is None or client in _PREPARED:
        return
    handlers = importlib.import_module("botocore.handlers")  # (installed with s3fs)
    client.meta.events.unregister("before-call.s3", handlers.add_expect_header)
    client.meta.events.register("before-send.s3.PutObject", _count_send)
    _PREPARED.add(client)


class FsspecStore(Store):
    """A store under ``path`` of an fsspec filesystem.

    ``url_or_fs`` is a URL (``s3://bucket/x.zarr``, ``memory://a``, ``zip::file://data.zip`` ...; options
    in ``storage_options``), an ``AbstractFileSystem`` (then ``path`` is the root inside it) or an
    ``FSMap``. Batched reads use ``fs.cat_ranges`` and batched writes ``fs.pipe``, which run
    concurrently on asynchronous filesystems (s3, gcs, http). Suffix ranges are sent as negative starts;
    if a backend refuses a range (a suffix it cannot do, or a start past the end), the store asks for
    the size and retries with an absolute range. Versions combine the backend's ETag/mtime/size with a
    counter of writes made through this store. Writes are as atomic as the backend makes them (object
    stores: yes; ``file://``: no, use :class:`LocalStore`).

    HTTP(S) stores are always read-only; keys are percent-encoded into URLs and listings (from the
    server's index pages) decoded. A request waits at most ``timeout`` seconds (default 30; also the
    ``timeout`` storage option) to connect and for each part of the answer, then raises
    :class:`StoreError` naming the URL; bodies are asked for and kept as stored (``Accept-Encoding:
    identity``): a server that compresses them anyway is never inflated (``client_kwargs=
    {"auto_decompress": True}`` in ``storage_options`` allows it). Both apply to stores made from a URL. Over HTTP a directory URL that the server answers with an index
    page cannot be told apart from a key, so ``exists`` is True for it. Pickles by filesystem and root.
    """

    def __init__(
        self,
        url_or_fs: str | os.PathLike[str] | fsspec.AbstractFileSystem | FSMap,
        *,
        path: str = "",
        storage_options: dict[str, Any] | None = None,
        read_only: bool = False,
        coalesce_gap: int = REMOTE_COALESCE_GAP,
        coalesce_max: int = REMOTE_COALESCE_MAX,
        timeout: float | None = HTTP_TIMEOUT,
    ) -> None:
        self.timeout: float | None = None  # seconds, when this store set the HTTP timeout
        if isinstance(url_or_fs, FSMap):
            fs, root = url_or_fs.fs, url_or_fs.root
        elif isinstance(url_or_fs, fsspec.AbstractFileSystem):
            fs, root = url_or_fs, ""
        elif isinstance(url_or_fs, str | os.PathLike):
            url = os.fspath(url_or_fs)
            options, self.timeout = _http_options(url, storage_options, timeout)
            fs, root = fsspec.core.url_to_fs(url, **_s3_options(url, options))
        else:
            raise StoreError(
                f"cannot make a store from {type(url_or_fs).__name__}: expected a URL or fsspec filesystem"
            )
        protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
        self._urls = bool(protocols & _URL_PROTOCOLS)  # keys travel percent-encoded in URL paths
        if protocols & {"s3", "s3a"} and hasattr(fs, "call_s3"):  # S3 (and the moto server): If-Match writes
            self.capabilities = Capabilities(conditional_writes=True, conditional_reads=True)
        elif protocols & {"http", "https"}:
            self.capabilities = Capabilities(unlisted=True)
        super().__init__(
            read_only=read_only or self._urls, coalesce_gap=coalesce_gap, coalesce_max=coalesce_max
        )
        self.fs: fsspec.AbstractFileSystem = fs
        root, path = root.rstrip("/"), path.rstrip("/")
        self.root = f"{root}/{path.lstrip('/')}" if root and path else root or path
        # Stripped form of root-relative paths, as listings return them.
        self._base = fs._strip_protocol(self._full("x"))[:-1]
        shared = "s3" if protocols & {"s3", "s3a"} else "gcs" if protocols & {"gs", "gcs"} else None
        # buckets: the data's name, shared with the obstore backend's stores (locks, written.py)
        self.lock_identity = (
            f"{shared}://{self._base}" if shared else f"fsspec:{type(fs).__name__}:{self._base}"
        )
        self._counter = itertools.count(1)
        self._writes: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"FsspecStore({self.fs.protocol!r}, {self.root!r}, read_only={self.read_only})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_counter"], state["_writes"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._counter = itertools.count(1)
        self._writes = {}

    def _full(self, key: str) -> str:
        if self._urls:
            key = quote(key, safe="/")
        return f"{self.root}/{key}" if self.root else key

    @contextlib.contextmanager
    def _answered(self, what: str, url: str) -> Iterator[None]:
        """Turns a request that timed out (fsspec's HTTP ``info`` reports any failure as a missing file, the
        timeout being its cause), or failed with any error but a missing file, into a StoreError naming
        ``url``."""
        try:
            yield
        except TimeoutError as exc:
            raise self._timed_out(what, url, exc) from exc
        except FileNotFoundError as exc:
            if isinstance(exc.__cause__, TimeoutError):
                raise self._timed_out(what, url, exc.__cause__) from exc
            raise
        except RectizarrError:
            raise
        except (
            Exception
        ) as exc:  # the client's own errors (botocore's ConnectionClosedError, a 503 as OSError)
            raise StoreError(f"{what} {url} failed: {type(exc).__name__}: {exc}") from exc

    def _timed_out(self, what: str, url: str, error: BaseException) -> StoreError:
        limit = f"{self.timeout:g} s" if self.timeout is not None else "the client's timeout"
        return StoreError(f"{what} {url} timed out: no answer within {limit} ({error!r})")

    def _key_of(self, path: str) -> str | None:
        stripped = self.fs._strip_protocol(path).rstrip("/")
        if not stripped.startswith(self._base):
            return None
        key = stripped[len(self._base) :]
        return unquote(key) if self._urls else key

    # ---- reads ---------------------------------------------------------------------------------------

    def _get_batch(self, requests: Sequence[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        if self.capabilities.conditional_reads:  # S3: one GET per value (s3fs sends a HEAD first)
            return [data for data, _ in self._s3_get([(k, r, None) for k, r in requests])]
        out: list[bytes | None] = [None] * len(requests)
        fetch: list[int] = []
        for i, (key, byte_range) in enumerate(requests):
            if byte_range is not None and byte_range[1] == 0:  # HTTP ranges cannot be empty
                out[i] = None if self._info(key) is None else b""
            else:
                fetch.append(i)
        if not fetch:
            return out
        paths, starts, ends = [], [], []
        for i in fetch:
            key, byte_range = requests[i]
            paths.append(self._full(key))
            start, length = byte_range if byte_range is not None else (None, None)
            starts.append(start)
            ends.append(None if start is None or length is None else start + length)
        try:
            results = (
                self._http_cat([requests[i][0] for i in fetch], paths, starts, ends)
                if self._http()
                else self.fs.cat_ranges(paths, starts, ends, on_error="return")
            )
        except FileNotFoundError:  # a filesystem whose cat_ranges raises for one missing path (simplecache::)
            results = [self._cat_one(p, a, b) for p, a, b in zip(paths, starts, ends, strict=True)]
        for i, path, result in zip(fetch, paths, results, strict=True):
            if isinstance(result, RectizarrError):  # a body longer than its limit
                raise result
            if isinstance(result, BaseException):
                out[i] = self._fallback(path, requests[i], result)
            else:
                out[i] = self._cut(requests[i], result if isinstance(result, bytes) else bytes(result))
        return out

    def _http(self) -> bool:
        """Whether reads go through :meth:`_http_cat` (fsspec's HTTP filesystem)."""
        return self._urls and hasattr(self.fs, "set_session") and hasattr(self.fs, "_process_limits")

    _limits_reads = True

    def limited(self, max_value: int | None) -> Store:
        """Limits apply on S3 (the answer's ``ContentLength``) and HTTP (:meth:`_http_cat`); other
        filesystems read as they are."""
        return super().limited(max_value) if self.capabilities.conditional_reads or self._http() else self

    def _http_cat(
        self,
        keys: Sequence[str],
        paths: Sequence[str],
        starts: Sequence[int | None],
        ends: Sequence[int | None],
    ) -> list[bytes | BaseException]:
        """fsspec's HTTP ``cat_ranges`` (the same requests and errors, ``requests_in_flight()`` at a time),
        each body read in pieces to at most its key's :meth:`value_limit`: an answer whose
        ``Content-Length`` says more is refused unread, one that sends more (no length, or chunks) once one
        byte more came (a :class:`StoreError` in its place)."""
        fs = self.fs

        async def one(key: str, path: str, start: int | None, end: int | None) -> bytes:
            kw = fs.kwargs.copy()
            if start is not None or end is not None:
                headers = dict(kw.pop("headers", None) or {})
                headers["Range"] = await fs._process_limits(path, start, end)
                kw["headers"] = headers
            limit = self.value_limit(key)
            session = await fs.set_session()
            async with session.get(fs.encode_url(path), **kw) as r:
                fs._raise_not_found_for_status(r, path)
                if limit is not None and r.content_length is not None and r.content_length > limit:
                    raise self._too_large(key, r.content_length, limit, path)
                parts, got = [], 0
                async for part in r.content.iter_chunked(1 << 20):
                    got += len(part)
                    if limit is not None and got > limit:
                        raise self._too_large(key, None, limit, path)
                    parts.append(part)
            return parts[0] if len(parts) == 1 else b"".join(parts)

        async def run() -> list[bytes | BaseException]:
            gate = asyncio.Semaphore(requests_in_flight())

            async def bounded(*request: Any) -> bytes | BaseException:
                async with gate:
                    try:
                        return await one(*request)
                    except Exception as exc:  # answered in its place, as cat_ranges(on_error="return")
                        return exc

            return list(
                await asyncio.gather(*(bounded(*r) for r in zip(keys, paths, starts, ends, strict=True)))
            )

        result: list[bytes | BaseException] = sync(fs.loop, run)
        return result

    def _cat_one(self, path: str, start: int | None, end: int | None) -> bytes | BaseException:
        """One value (or its range), or the exception reading it raised (for :meth:`_fallback`)."""
        try:
            return bytes(self.fs.cat_file(path, start=start, end=end))
        except Exception as exc:
            return exc

    def _cut(self, request: tuple[str, ByteRange | None], got: bytes) -> bytes:
        """The range asked for, from what a server sent: all of the value when it ignores ``Range`` (as
        ``python -m http.server`` and some static servers do)."""
        key, byte_range = request
        if byte_range is None:
            return got
        start, length = byte_range
        if start < 0:
            return got[start:] if len(got) > -start else got
        if length is not None:
            return got[start : start + length] if len(got) > length else got
        if start:  # to the end: all of it came if it is as long as the value
            info = self._info(key)
            if info is not None and len(got) == info[0] > 0:
                return got[start:]
        return got

    def _fallback(
        self, path: str, request: tuple[str, ByteRange | None], error: BaseException
    ) -> bytes | None:
        """A failed read: missing key, or a range the backend refused (past the end, or a suffix)."""
        key, byte_range = request
        if isinstance(error, FileNotFoundError):
            return None
        if isinstance(error, TimeoutError):
            raise self._timed_out(f"reading key {key!r} from", path, error) from error
        if byte_range is None:
            raise StoreError(f"reading key {key!r} from {path} failed: {error!r}") from error
        try:
            size = int(self.fs.size(path))
        except FileNotFoundError:
            return None
        except TimeoutError as exc:
            raise self._timed_out(f"reading key {key!r} from", path, exc) from exc
        except Exception as exc:
            raise StoreError(f"reading key {key!r} range {byte_range} from {path} failed: {error!r}") from exc
        start, length = byte_range
        start = max(0, size + start) if start < 0 else min(start, size)
        end = size if length is None else min(size, start + length)
        if start >= end:
            return b""
        if self._http():
            got = self._http_cat([key], [path], [start], [end])[0]
            if isinstance(got, RectizarrError):
                raise got
            if not isinstance(got, BaseException):
                return got
        try:
            return bytes(self.fs.cat_file(path, start=start, end=end))
        except Exception as exc:
            raise StoreError(f"reading key {key!r} range {byte_range} from {path} failed: {exc!r}") from exc

    def _info(self, key: str) -> tuple[int, Hashable] | None:
        url = self._full(key)
        try:
            with self._answered(f"looking up key {key!r} at", url):
                info = self.fs.info(url)
        except FileNotFoundError:
            return None
        if info.get("type") == "directory":
            return None
        size = int(info["size"])
        token = tuple(_token(info[f]) for f in _VERSION_FIELDS if info.get(f) is not None)
        return size, (size, token, self._writes.get(key, 0))

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        url = self._full(prefix[:-1]) if prefix else self.root
        try:
            with self._answered("listing", url):
                paths = self.fs.find(url)
        except FileNotFoundError:
            return
        for path in paths:
            key = self._key_of(path)
            if key and key.startswith(prefix):
                yield key

    def keys_under(self, prefix: str, limit: int) -> list[str]:
        if not self.capabilities.conditional_reads or limit < 1:  # not S3
            return super().keys_under(prefix, limit)
        bucket, name = self._s3_path(validate_prefix(prefix) + "x")
        try:
            with self._answered("listing", self._full(prefix)):
                answer = self.fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=name[:-1], MaxKeys=limit)
        except FileNotFoundError:
            return []
        keys = (self._key_of(f"{bucket}/{entry['Key']}") for entry in answer.get("Contents") or ())
        return [k for k in keys if k and k.startswith(prefix)][:limit]

    def _list_dir(self, prefix: str) -> Iterable[str]:
        url = self._full(prefix[:-1]) if prefix else self.root
        try:
            with self._answered("listing", url):
                entries = self.fs.ls(url, detail=False)
        except FileNotFoundError:
            return []
        names = []
        for entry in entries:
            key = self._key_of(entry)
            if key and key.startswith(prefix) and len(key) > len(prefix):
                names.append(key[len(prefix) :].split("/", 1)[0])
        return names

    # ---- writes --------------------------------------------------------------------------------------

    def _s3_path(self, key: str) -> tuple[str, str]:
        bucket, _, name = self.fs._strip_protocol(self._full(key)).partition("/")
        return bucket, name

    def get_versioned(self, key: str) -> tuple[bytes | None, Hashable]:
        if not self.capabilities.conditional_writes:
            return super().get_versioned(key)
        etag = self._etag(key)  # first: a value newer than it only makes the conditional write fail and retry
        data = None if etag is None else self.get(key)
        return (None, None) if data is None else (data, etag)

    def get_many_versioned(
        self, requests: Sequence[tuple[str, ByteRange | None]]
    ) -> list[tuple[bytes | None, Hashable]]:
        if not self.capabilities.conditional_reads:
            return super().get_many_versioned(requests)
        checked = [(validate_key(k), validate_range(k, r)) for k, r in requests]
        return self._s3_get([(k, r, None) for k, r in checked])

    def _get_batch_at(
        self, requests: Sequence[tuple[str, ByteRange | None]], versions: Mapping[str, Hashable]
    ) -> list[bytes | None]:
        if not self.capabilities.conditional_reads:
            return super()._get_batch_at(requests, versions)
        return [data for data, _ in self._s3_get([(k, r, versions.get(k)) for k, r in requests])]

    def _s3_get(
        self, requests: Sequence[tuple[str, ByteRange | None, Hashable]]
    ) -> list[tuple[bytes | None, Hashable]]:
        """GETs of S3 (key, range, ETag or None) concurrently, each answered with its bytes and ETag; a
        request with an ETag is sent with ``If-Match`` (412, or a key gone: :class:`VersionChanged`). An
        empty range, or one the server refuses (past the end), is answered after the batch."""

        async def one(
            key: str, byte_range: ByteRange | None, etag: Hashable
        ) -> tuple[bytes | None, Hashable] | Exception:
            bucket, name = self._s3_path(key)
            kw: dict[str, Any] = {} if etag is None else {"IfMatch": etag}
            if byte_range is not None:
                kw["Range"] = _http_range(byte_range)
            for attempt in range(_BODY_ATTEMPTS):
                try:
                    resp = await self.fs._call_s3("get_object", Bucket=bucket, Key=name, **kw)
                except FileNotFoundError:
                    if etag is not None:
                        raise VersionChanged(key) from None
                    return None, None
                except OSError as exc:
                    if "pre-condition" in str(exc):
                        raise VersionChanged(key) from exc
                    return exc
                except Exception as exc:  # botocore's own (a connection reset past its retries)
                    return StoreError(f"reading {self._full(key)} failed: {type(exc).__name__}: {exc}")
                try:
                    limit, length = self.value_limit(key), int(resp.get("ContentLength") or 0)
                    if limit is not None and length > limit:  # refused before its body is read
                        return self._too_large(key, length, limit, self._full(key))
                    return bytes(await resp["Body"].read()), resp["ETag"]
                except Exception as exc:  # a body cut short (aiohttp's payload errors): ask again
                    if attempt == _BODY_ATTEMPTS - 1:
                        return StoreError(
                            f"reading {self._full(key)}: the answer was cut short {_BODY_ATTEMPTS} "
                            f"times ({exc!r})"
                        )
                finally:
                    resp["Body"].close()
            raise AssertionError("unreachable")

        async def run() -> list[tuple[bytes | None, Hashable] | Exception]:
            gate = asyncio.Semaphore(requests_in_flight())

            async def bounded(
                r: tuple[str, ByteRange | None, Hashable],
            ) -> tuple[bytes | None, Hashable] | Exception:
                async with gate:
                    return await one(*r)

            return list(await asyncio.gather(*(bounded(r) for r in requests if r[1] is None or r[1][1] != 0)))

        with self._answered("reading from", self.root):
            fetched: list[tuple[bytes | None, Hashable] | Exception] = sync(self.fs.loop, run)
        answers = iter(fetched)
        out: list[tuple[bytes | None, Hashable]] = []
        for key, byte_range, etag in requests:
            answer = (b"", None) if byte_range is not None and byte_range[1] == 0 else next(answers)
            if isinstance(answer, StoreError):
                raise answer
            if isinstance(answer, Exception) or (answer[0] == b"" and answer[1] is None):
                version = self._etag(key)
                if etag is not None and version != etag:
                    raise VersionChanged(key)
                data = b"" if version is not None and not isinstance(answer, Exception) else None
                if isinstance(answer, Exception) and version is not None:  # a range past the end
                    data = self._fallback(self._full(key), (key, byte_range), answer)
                answer = (data, version)
            out.append(answer)
        return out

    def _etag(self, key: str) -> Hashable:
        url = self._full(validate_key(key))
        try:
            with self._answered(f"looking up key {key!r} at", url):
                etag: Hashable = self.fs.info(url, refresh=True)["ETag"]
            return etag
        except FileNotFoundError:
            return None

    def set_if(self, key: str, value: Buffer, version: Hashable) -> bool:
        """A conditional ``PUT`` on S3 (:meth:`Store.set_if` elsewhere), its value kept with a token of this
        write (:data:`~rectizarr.stores.base.WRITE_TOKEN`). A refusal is asked whether the key holds this
        write's token: aiohttp sends a ``PUT`` again, unseen, when its connection is reset, and s3fs as a
        new call on a timeout, so a refusal may answer the write's own first send (that landed)."""
        if not self.capabilities.conditional_writes:
            return super().set_if(key, value, version)
        validate_key(key)
        self._check_writable("set")
        bucket, name = self._s3_path(key)
        condition = {"IfNoneMatch": "*"} if version is None else {"IfMatch": version}
        token = uuid.uuid4().hex
        _prepare_client(self.fs)
        sends = [0]
        counting = _SENDS.set(sends)
        try:
            try:
                self.fs.call_s3(
                    "put_object",
                    Bucket=bucket,
                    Key=name,
                    Body=bytes(value),
                    Metadata={WRITE_TOKEN: token},
                    **condition,
                )
            finally:
                _SENDS.reset(counting)
        except Exception as exc:  # (botocore's own too: a connection reset past its retries)
            if _refused(exc, version):  # a lost race, retried by the caller; or its own first send landed
                if not self._ours(key, value, token, resent=sends[0] > 1 or _retried(exc)):
                    return False
            elif not (_unanswered(exc) and self._landed_unanswered(key, value, token)):
                raise StoreError(f"cannot write {key!r} to {self!r}: {type(exc).__name__}: {exc}") from exc
        self.fs.invalidate_cache(self._full(key))
        self._writes[key] = next(self._counter)
        return True

    def _write_token(self, key: str) -> str | None:
        if not self.capabilities.conditional_writes:
            return None
        bucket, name = self._s3_path(key)
        try:
            with self._answered(f"looking up key {key!r} at", self._full(key)):
                head = self.fs.call_s3("head_object", Bucket=bucket, Key=name)
        except FileNotFoundError:
            return None
        token = (head.get("Metadata") or {}).get(WRITE_TOKEN)
        return token if isinstance(token, str) else None

    def delete_if(self, key: str, version: Hashable) -> bool:
        if not self.capabilities.conditional_writes:
            return super().delete_if(key, version)
        validate_key(key)
        self._check_writable("delete")
        if version is None:
            return not self.exists(key)
        bucket, name = self._s3_path(key)
        try:
            self.fs.call_s3("delete_object", Bucket=bucket, Key=name, IfMatch=version)
        except FileNotFoundError:
            return False
        except OSError as exc:
            if "pre-condition" in str(exc):
                return False
            raise StoreError(f"cannot delete {key!r} from {self!r}: {exc}") from exc
        except Exception as exc:
            raise StoreError(f"cannot delete {key!r} from {self!r}: {type(exc).__name__}: {exc}") from exc
        self.fs.invalidate_cache(self._full(key))
        self._writes[key] = next(self._counter)
        return True

    def _set_batch(self, items: Mapping[str, Buffer]) -> None:
        data = {self._full(k): v if isinstance(v, bytes) else bytes(v) for k, v in items.items()}
        first = next(iter(data))
        if self.capabilities.conditional_writes:  # S3
            _prepare_client(self.fs)
        with self._answered(f"writing {len(data)} value(s) to {self!r}, the first", first):
            try:
                self.fs.pipe(data)
            except FileNotFoundError:  # filesystems without implicit directories (file://)
                for parent in {self.fs._parent(p) for p in data}:
                    self.fs.makedirs(parent, exist_ok=True)
                self.fs.pipe(data)
        for key in items:
            self._writes[key] = next(self._counter)

    def _delete_batch(self, keys: Sequence[str]) -> None:
        for key in keys:
            self._writes[key] = next(self._counter)
        paths = [self._full(k) for k in keys]
        with self._answered(f"deleting {len(paths)} value(s) from {self!r}, the first", paths[0]):
            try:
                self.fs.rm(paths)
            except FileNotFoundError:
                for path in paths:
                    try:
                        self.fs.rm_file(path)
                    except FileNotFoundError:
                        pass
        self._prune(paths)

    def _prune(self, paths: Iterable[str]) -> None:
        """Remove directories left empty by a delete (only local disks have real, empty directories)."""
        if not isinstance(self.fs, LocalFileSystem):
            return
        root = self.fs._strip_protocol(self.root)
        for parent in sorted({self.fs._parent(p) for p in paths}, key=len, reverse=True):
            while parent.startswith(root + "/"):
                try:
                    self.fs.rmdir(parent)
                except OSError:
                    break
                parent = self.fs._parent(parent)

    def _delete_prefix(self, prefix: str) -> None:
        with self._answered("deleting everything under", self._full(prefix[:-1]) if prefix else self.root):
            self._delete_under(prefix)

    def _delete_under(self, prefix: str) -> None:
        if prefix:
            path = self._full(prefix[:-1])
            # (s3fs answers isdir from a listing of the parent it may have cached before another client
            # made the node: a delete would then remove nothing)
            self.fs.invalidate_cache(path)
            if self.fs.isdir(path):
                self.fs.rm(path, recursive=True)
                self._prune([path])
            return
        try:
            children = self.fs.ls(self.root, detail=True)
        except FileNotFoundError:
            return
        for child in children:
            key = self._key_of(child["name"])
            if key:  # never the root itself (``ls`` of a file lists the file)
                self.fs.rm(child["name"], recursive=child.get("type") == "directory")
