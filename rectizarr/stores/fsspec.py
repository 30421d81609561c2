"""A store over any fsspec filesystem (s3, gcs, http, memory, file, zip:: chains, caches ...):
:class:`FsspecStore`, made as the subclass for S3 (:class:`S3FsspecStore`: conditional writes) and HTTP(S)
(:class:`HttpFsspecStore`: read-only URLs, bounded waits, bodies read to at most their limit)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rectizarr.errors import RectizarrError
from rectizarr.stores.base import Capabilities, Store
from rectizarr.stores.fsspec_base import FsspecStore, gathered
from rectizarr.stores.fsspec_s3 import S3FsspecStore

__all__ = ["FsspecStore", "HttpFsspecStore", "S3FsspecStore"]


class HttpFsspecStore(FsspecStore):
    """An :class:`FsspecStore` of an ``http(s)://`` filesystem: read-only; keys percent-encoded into URLs,
    listings (the server's index pages) decoded. Made from a URL, a request waits at most ``timeout``
    seconds (:meth:`url_options`) to connect and for each part of the answer, then raises
    :class:`StoreError` naming the URL, and bodies are kept as stored, never inflated. A directory URL
    answered with an index page cannot be told apart from a key: ``exists`` is True for it."""

    protocols: ClassVar[frozenset[str]] = frozenset({"http", "https"})
    capabilities = Capabilities(unlisted=True)
    _urls = True
    _limits_reads = True  # (where fsspec's HTTP filesystem is used: see limited())

    @classmethod
    def url_options(
        cls, url: str, options: dict[str, Any], timeout: float | None
    ) -> tuple[dict[str, Any], float | None]:
        """Bounded waits (``timeout`` seconds, default 30, to connect and between bytes; a ``timeout`` option
        wins, a ``client_kwargs`` timeout over both) and bodies as sent (``Accept-Encoding: identity``, no
        decompression: ``client_kwargs={"auto_decompress": True}`` allows it), unless the options say."""
        import aiohttp  # fsspec's HTTP client

        options = dict(options)
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

    def _http(self) -> bool:
        """Whether reads go through :meth:`_http_cat` (fsspec's HTTP filesystem)."""
        return hasattr(self.fs, "set_session") and hasattr(self.fs, "_process_limits")

    def limited(self, max_value: int | None) -> Store:
        """Limits apply to fsspec's HTTP filesystem (:meth:`_http_cat`)."""
        return Store.limited(self, max_value) if self._http() else self

    def _cat_ranges(
        self, keys: Sequence[str], paths: list[str], starts: list[int | None], ends: list[int | None]
    ) -> list[Any]:
        if self._http():
            return self._http_cat(keys, paths, starts, ends)
        return super()._cat_ranges(keys, paths, starts, ends)

    def _read_span(self, key: str, path: str, start: int, end: int) -> bytes:
        if self._http():
            got = self._http_cat([key], [path], [start], [end])[0]
            if isinstance(got, RectizarrError):
                raise got
            if not isinstance(got, BaseException):
                return got
        return super()._read_span(key, path, start, end)

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

        async def caught(*request: Any) -> bytes | BaseException:
            try:
                return await one(*request)
            except Exception as exc:  # answered in its place, as cat_ranges(on_error="return")
                return exc

        return gathered(fs, caught, zip(keys, paths, starts, ends, strict=True))
