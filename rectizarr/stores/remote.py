"""What an object store means, said once for both remote transports (fsspec's and obstore's): URL schemes,
bucket names, byte ranges and their edge cases, conditional writes' outcomes, and a client's errors as
:class:`~rectizarr.errors.StoreError`. A transport subclasses :class:`RemoteStore` (or :class:`EtagStore`)
and only makes the requests and says how its client reports a refusal, a lost answer or a timeout."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from rectizarr.errors import RectizarrError, StoreError, VersionChanged
from rectizarr.stores.base import Store
from rectizarr.stores.keys import Buffer, ByteRange, resolve_range, validate_key, validate_range
from rectizarr.stores.update import count_landing

TIMEOUT = 30.0
"""Seconds a remote request waits to connect and for each part of its answer, unless the options say."""

SCHEMES = {
    **dict.fromkeys(("s3", "s3a"), "s3"),
    **dict.fromkeys(("gs", "gcs"), "gcs"),
    **dict.fromkeys(("az", "abfs", "abfss", "azure", "adl"), "azure"),
    **dict.fromkeys(("http", "https"), "http"),
}
"""URL schemes of object stores and web servers, and the kind of service each names."""


def bucket_identity(scheme: str, location: str) -> str | None:
    """The name of the data under ``location`` (``bucket/prefix``) of a bucket (S3, GCS), the same whichever
    transport opened it (locks, :mod:`rectizarr.stores.written`); None for other services."""
    kind = SCHEMES.get(scheme.lower())
    return f"{kind}://{location.rstrip('/')}/" if kind in ("s3", "gcs") else None


def is_empty(byte_range: ByteRange | None) -> bool:
    """Whether ``byte_range`` asks for no bytes: HTTP cannot say so (a ``Range`` is never empty), so it is
    answered by a look-up (``b""`` when the key exists)."""
    return byte_range is not None and byte_range[1] == 0


def http_range(byte_range: ByteRange) -> str:
    """An HTTP ``Range`` header value for a non-empty (start, length) range."""
    start, length = byte_range
    if start < 0:
        return f"bytes={start}"
    return f"bytes={start}-" if length is None else f"bytes={start}-{start + length - 1}"


class RemoteStore(Store):
    """A store reached through a client library: remote coalescing defaults (a round trip costs more than
    the bytes between two ranges), the client's errors wrapped, and the settling of a conditional write
    whose answer was a refusal or was lost. ``timeout``: the seconds the client waits (None: its own)."""

    _limits_reads = True
    _round_trips = True
    timeout: float | None = None

    def _fail(self, what: str, where: str, exc: BaseException) -> StoreError:
        """The :class:`StoreError` for a request (``what`` ``where``: "reading s3://b/k") that failed with
        the client's ``exc``: one that timed out says so and names the limit."""
        full = str(exc)
        text = full.split("\n", 1)[0][:300]
        if isinstance(exc, TimeoutError) or "TimedOut" in full or "timed out" in full.lower():
            limit = f"{self.timeout:g} s" if self.timeout is not None else "the client's timeout"
            return StoreError(
                f"{what} {where} timed out: no answer within {limit} ({type(exc).__name__}: {text})"
            )
        return StoreError(f"{what} {where} failed: {type(exc).__name__}: {text}")

    def _unanswered(self, exc: BaseException) -> bool:
        """Whether the client's ``exc`` may follow a request that the server carried out: no answer was
        read (a reset connection, a timeout) or the answer was a 5xx; a 4xx is the server's refusal."""
        return True

    def _settle(
        self,
        key: str,
        value: Buffer,
        token: str | None,
        exc: Exception,
        *,
        refused: bool,
        resent: bool,
        maybe_resent: bool,
    ) -> bool:
        """The outcome of a write of ``value`` (conditional: carrying ``token``) that raised ``exc``: False
        when a condition ``refused`` it, unless it may have been sent twice (``maybe_resent``: a client
        that resends unseen; ``resent``: known) and its first send landed (:meth:`_ours`); True when it got
        no answer but landed all the same; else raises."""
        if refused:
            return (resent or maybe_resent) and token is not None and self._ours(key, value, token, resent)
        if self._unanswered(exc) and self._landed_unanswered(key, value, token):
            return True
        raise self._fail("writing", self._where(key), exc) from exc

    def _landed(self, key: str, value: Buffer) -> bool:
        """Whether ``key`` holds ``value`` now, asked of a conditional write sent again (its first answer
        lost: a 5xx, a reset, a timeout) and then refused, or never answered, where the stored value
        carries no write token (:meth:`_ours`): the first send landed and the condition refused the retry,
        unless another writer stored the very same bytes then. Without it an append would apply twice."""
        landed = self._holds(key, value)
        if landed:
            count_landing()
        return landed

    def _holds(self, key: str, value: Buffer) -> bool:
        stored = self.get(key)
        return stored is not None and memoryview(stored) == memoryview(value).cast("B")

    def _write_token(self, key: str) -> str | None:
        """The :data:`WRITE_TOKEN` kept with ``key``'s value (None: missing, or none). Object stores read it
        (a ``HEAD``); elsewhere conditional writes are made under a lock and need none."""
        return None

    def _ours(self, key: str, value: Buffer, token: str, resent: bool) -> bool:
        """Whether the conditional write of ``value`` carrying ``token`` (refused, or unanswered) landed: the
        stored value carries its token. One that carries none (no user metadata kept, a writer without
        tokens) is taken for it only if the request may have been sent twice (``resent``) and the key
        holds exactly ``value`` (:meth:`_landed`)."""
        stored = self._write_token(key)
        if stored is not None:
            return stored == token
        return resent and self._landed(key, value)

    def _landed_unanswered(self, key: str, value: Buffer, token: str | None) -> bool:
        """Whether a write of ``key`` unanswered past the client's retries (a reset, a timeout, a 5xx) landed:
        a conditional one's (``token``) by :meth:`_ours`, else if the key holds ``value``; False when the
        key cannot be read either (the write's own error is then raised)."""
        try:
            return self._ours(key, value, token, True) if token is not None else self._holds(key, value)
        except RectizarrError:
            return False

    def _where(self, key: str) -> str:
        """``key``'s URL (or path) in messages."""
        return key


class EtagStore(RemoteStore):
    """A remote store whose versions are ETags: a read may carry ``If-Match`` (:class:`VersionChanged`)
    and answers with its ETag; ``set_if`` is a conditional ``PUT``; ``delete_if`` as atomic as the
    transport can make it. A transport implements the abstract methods below."""

    @abstractmethod
    def _gets(self, requests: Sequence[tuple[str, ByteRange | None, Hashable]]) -> list[tuple[Any, Hashable]]:
        """``(value, ETag)`` for each ``(key, range, ETag or None)``; ``(None, None)`` for a missing key."""

    @abstractmethod
    def _meta(self, key: str) -> tuple[int, Hashable] | None:
        """``(size, ETag)`` of ``key`` as the server has it now (a ``HEAD``); None if missing."""

    @abstractmethod
    def _put_if(self, key: str, value: Buffer, version: Hashable) -> bool:
        """The conditional ``PUT`` of :meth:`set_if` (``version`` validated, the store writable)."""

    @abstractmethod
    def _delete_at(self, key: str, version: Hashable) -> bool:
        """Delete ``key`` if its ETag is ``version`` (not None); False when it is not (or it is missing)."""

    @abstractmethod
    def _fetch_span(self, key: str, start: int, end: int, etag: Hashable) -> Any:
        """Bytes ``start:end`` of ``key`` after the server refused a range (a suffix; ranges it ignores)."""

    def _get_batch(self, requests: Sequence[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        return [data for data, _ in self._gets([(k, r, None) for k, r in requests])]

    def _get_batch_at(
        self, requests: Sequence[tuple[str, ByteRange | None]], versions: Mapping[str, Hashable]
    ) -> list[bytes | None]:
        return [data for data, _ in self._gets([(k, r, versions.get(k)) for k, r in requests])]

    def get_many_versioned(
        self, requests: Sequence[tuple[str, ByteRange | None]]
    ) -> list[tuple[bytes | None, Hashable]]:
        return self._gets([(validate_key(k), validate_range(k, r), None) for k, r in requests])

    def get_version(self, key: str) -> Hashable:
        meta = self._meta(validate_key(key))  # (a HEAD: the ETag, without the value)
        return None if meta is None else meta[1]

    def set_if(self, key: str, value: Buffer, version: Hashable) -> bool:
        validate_key(key)
        self._check_writable("set")
        return self._put_if(key, value, version)

    def delete_if(self, key: str, version: Hashable) -> bool:
        validate_key(key)
        self._check_writable("delete")
        if version is None:  # "only if missing": nothing to delete
            return not self.exists(key)
        return self._delete_at(key, version)

    def _empty_answer(self, key: str, etag: Hashable) -> tuple[Any, Hashable]:
        """The answer to an empty range of ``key`` (at ``etag``, if given), from its :meth:`_meta`."""
        meta = self._meta(key)
        version = None if meta is None else meta[1]
        if etag is not None and version != etag:
            raise VersionChanged(key)
        return (None, None) if meta is None else (b"", version)

    def _refused_range(
        self, key: str, byte_range: ByteRange, etag: Hashable, meta: tuple[int, Hashable]
    ) -> tuple[Any, Hashable]:
        """The answer to a range the server refused, from the key's ``meta`` looked up since: empty past
        the end, else :meth:`_fetch_span`."""
        size, version = meta
        if etag is not None and version != etag:
            raise VersionChanged(key)
        start, end = resolve_range(byte_range, size)
        return (b"", version) if start >= end else (self._fetch_span(key, start, end, etag), version)
