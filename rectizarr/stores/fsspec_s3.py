"""The fsspec store of an S3 bucket (s3fs): reads that carry ETags, conditional writes and deletes, and the
s3fs/botocore details behind them (what a refusal looks like, which sends may have landed)."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import uuid
import weakref
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import fsspec

from rectizarr.errors import StoreError, VersionChanged
from rectizarr.stores.base import Capabilities
from rectizarr.stores.fsspec_base import FsspecStore, gathered
from rectizarr.stores.keys import Buffer, ByteRange, validate_key, validate_prefix
from rectizarr.stores.limits import requests_in_flight
from rectizarr.stores.remote import EtagStore, http_range, is_empty
from rectizarr.stores.update import WRITE_TOKEN

_BODY_ATTEMPTS = 3  # reads of an S3 value whose body was cut short


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


def _refused(exc: BaseException, version: Hashable) -> bool:
    """Whether ``exc`` is a conditional ``PUT``'s condition refusing it. s3fs: FileExistsError
    (If-None-Match), EINVAL "pre-conditions" (If-Match), FileNotFoundError (If-Match on a key another
    writer deleted: 404), 409 ConditionalRequestConflict (two conditional writes of one key at once)."""
    return isinstance(exc, OSError) and (
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
    """Make ``fs``'s S3 client (made here, with no request, if s3fs has none yet) count the sends of a
    ``PutObject`` (:data:`_SENDS`) and send uploads without ``Expect: 100-continue``: aiohttp waits for
    ``100 Continue`` with no timeout, so a server that takes the connection and never answers held a
    write past 500 s, where with the body sent at once it fails after the read timeout (41 s with a 2 s
    read timeout and s3fs's retries; fuzz fz34). A ``PUT`` refused then has uploaded its value for nothing."""
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


class S3FsspecStore(EtagStore, FsspecStore):
    """An :class:`FsspecStore` of an S3 bucket through s3fs: one GET per value, ETags as versions,
    ``If-Match`` / ``If-None-Match`` writes, atomic ``If-Match`` deletes, a pool of
    ``requests_in_flight()`` connections."""

    protocols: ClassVar[frozenset[str]] = frozenset({"s3", "s3a"})
    capabilities = Capabilities(conditional_writes=True, hashed_versions=True, conditional_reads=True)
    _limits_reads = True  # (the answer's ``ContentLength``)

    @classmethod
    def serves(cls, fs: fsspec.AbstractFileSystem) -> bool:
        return super().serves(fs) and hasattr(fs, "call_s3")  # (s3fs, and the moto server's)

    @classmethod
    def url_options(
        cls, url: str, options: dict[str, Any], timeout: float | None
    ) -> tuple[dict[str, Any], float | None]:
        """Room for ``requests_in_flight()`` requests (aiobotocore's pool: 10), unless the options say."""
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("max_pool_connections", requests_in_flight())
        return {**options, "config_kwargs": config}, None

    def _unanswered(self, exc: BaseException) -> bool:
        response = next(_responses(exc), None)
        status = None if response is None else response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return not isinstance(status, int) or status >= 500

    def _s3_path(self, key: str) -> tuple[str, str]:
        bucket, _, name = self.fs._strip_protocol(self._full(key)).partition("/")
        return bucket, name

    def keys_under(self, prefix: str, limit: int) -> list[str]:
        if limit < 1:
            return super().keys_under(prefix, limit)
        bucket, name = self._s3_path(validate_prefix(prefix) + "x")
        try:
            with self._answered("listing", self._full(prefix)):
                answer = self.fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=name[:-1], MaxKeys=limit)
        except FileNotFoundError:
            return []
        keys = (self._key_of(f"{bucket}/{entry['Key']}") for entry in answer.get("Contents") or ())
        return [k for k in keys if k and k.startswith(prefix)][:limit]

    # ---- reads ---------------------------------------------------------------------------------------

    def get_versioned(self, key: str) -> tuple[bytes | None, Hashable]:
        meta = self._meta(validate_key(key))  # first: a newer value only makes the conditional write retry
        data = None if meta is None else self.get(key)
        return (None, None) if meta is None or data is None else (data, meta[1])

    async def _get_one(
        self, key: str, byte_range: ByteRange | None, etag: Hashable
    ) -> tuple[bytes | None, Hashable] | Exception:
        """One GET (with ``If-Match``: 412, or a key gone, :class:`VersionChanged`); a refusal of the range
        is returned, for :meth:`_gets`."""
        bucket, name = self._s3_path(key)
        kw: dict[str, Any] = {} if etag is None else {"IfMatch": etag}
        if byte_range is not None:
            kw["Range"] = http_range(byte_range)
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
                return self._fail("reading", self._full(key), exc)
            try:
                limit, length = self.value_limit(key), int(resp.get("ContentLength") or 0)
                if limit is not None and length > limit:  # refused before its body is read
                    return self._too_large(key, length, limit, self._full(key))
                return bytes(await resp["Body"].read()), resp["ETag"]
            except Exception as exc:  # a body cut short (aiohttp's payload errors): ask again
                if attempt == _BODY_ATTEMPTS - 1:
                    return StoreError(
                        f"reading {self._full(key)}: the answer was cut short {_BODY_ATTEMPTS} times ({exc!r})"
                    )
            finally:
                resp["Body"].close()
        raise AssertionError("unreachable")

    def _gets(self, requests: Sequence[tuple[str, ByteRange | None, Hashable]]) -> list[tuple[Any, Hashable]]:
        """GETs of S3 (key, range, ETag or None) concurrently, each answered with its bytes and ETag. An
        empty range, or one the server refuses (past the end), is answered after the batch."""
        with self._answered("reading from", self.root):
            fetched = gathered(self.fs, self._get_one, [r for r in requests if not is_empty(r[1])])
        answers = iter(fetched)
        out: list[tuple[bytes | None, Hashable]] = []
        for key, byte_range, etag in requests:
            answer = None if is_empty(byte_range) else next(answers)
            if isinstance(answer, StoreError):
                raise answer
            if answer is None:
                answer = self._empty_answer(key, etag)
            elif isinstance(answer, Exception):
                answer = self._after_refusal(key, byte_range, etag, answer)
            out.append(answer)
        return out

    def _after_refusal(
        self, key: str, byte_range: ByteRange | None, etag: Hashable, error: Exception
    ) -> tuple[Any, Hashable]:
        """The answer to a GET that S3 refused (a range past the end) or that failed, from a HEAD."""
        meta = self._meta(key)
        if meta is None or (etag is not None and meta[1] != etag):
            if etag is not None:
                raise VersionChanged(key)
            return None, None
        if byte_range is None or isinstance(error, TimeoutError):
            raise self._fail(f"reading key {key!r} from", self._full(key), error) from error
        return self._refused_range(key, byte_range, etag, meta)

    def _fetch_span(self, key: str, start: int, end: int, etag: Hashable) -> Any:
        return self._read_span(key, self._full(key), start, end)

    def _meta(self, key: str) -> tuple[int, Hashable] | None:
        """A ``HEAD`` past s3fs's cache."""
        info = self._asked(
            f"looking up key {key!r} at", self._full(key), functools.partial(self.fs.info, refresh=True)
        )
        return None if info is None else (int(info["size"]), info["ETag"])

    # ---- writes --------------------------------------------------------------------------------------

    def _put_if(self, key: str, value: Buffer, version: Hashable) -> bool:
        """A conditional ``PUT`` carrying a token of this write (:data:`WRITE_TOKEN`), which a refusal looks
        for: aiohttp sends a ``PUT`` again, unseen, on a reset connection, and s3fs as a new call on a
        timeout, so a refusal may answer the write's own first send (that landed)."""
        bucket, name = self._s3_path(key)
        condition = {"IfNoneMatch": "*"} if version is None else {"IfMatch": version}
        token = uuid.uuid4().hex
        _prepare_client(self.fs)
        sends = [0]
        counting = _SENDS.set(sends)
        try:
            try:
                body, metadata = bytes(value), {WRITE_TOKEN: token}
                self.fs.call_s3(
                    "put_object", Bucket=bucket, Key=name, Body=body, Metadata=metadata, **condition
                )
            finally:
                _SENDS.reset(counting)
        except Exception as exc:  # (botocore's own too: a connection reset past its retries)
            resent = sends[0] > 1 or _retried(exc)
            if not self._settle(
                key, value, token, exc, refused=_refused(exc, version), resent=resent, maybe_resent=True
            ):
                return False
        self._written(key)
        return True

    def _written(self, key: str) -> None:
        self.fs.invalidate_cache(self._full(key))
        self._writes[key] = next(self._counter)

    def _write_token(self, key: str) -> str | None:
        bucket, name = self._s3_path(key)
        try:
            with self._answered(f"looking up key {key!r} at", self._full(key)):
                head = self.fs.call_s3("head_object", Bucket=bucket, Key=name)
        except FileNotFoundError:
            return None
        token = (head.get("Metadata") or {}).get(WRITE_TOKEN)
        return token if isinstance(token, str) else None

    def _delete_at(self, key: str, version: Hashable) -> bool:
        """A ``DELETE`` with ``If-Match``: atomic."""
        bucket, name = self._s3_path(key)
        try:
            self.fs.call_s3("delete_object", Bucket=bucket, Key=name, IfMatch=version)
        except Exception as exc:
            if isinstance(exc, FileNotFoundError) or (
                isinstance(exc, OSError) and "pre-condition" in str(exc)
            ):
                return False
            raise self._fail("deleting", self._full(key), exc) from exc
        self._written(key)
        return True

    def _set_batch(self, items: Mapping[str, Buffer]) -> None:
        _prepare_client(self.fs)
        super()._set_batch(items)
