"""The store over any fsspec filesystem; the subclasses for S3 and HTTP are in
:mod:`rectizarr.stores.fsspec`, which gathers them."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, TypeVar
from urllib.parse import quote, unquote

import fsspec
from fsspec.asyn import sync
from fsspec.implementations.local import LocalFileSystem
from fsspec.mapping import FSMap

from rectizarr.errors import RectizarrError, StoreError
from rectizarr.stores.keys import Buffer, ByteRange, resolve_range
from rectizarr.stores.limits import requests_in_flight
from rectizarr.stores.remote import TIMEOUT, RemoteStore, bucket_identity, is_empty

# the fields of a filesystem's info that change with its value (which of them it has)
_VERSION_FIELDS = tuple(
    "ETag etag md5 generation LastModified last_modified Last-Modified mtime created ino".split()
)
_KINDS: list[type[FsspecStore]] = []  # the subclasses for particular filesystems (see FsspecStore.serves)


_T = TypeVar("_T")


def gathered(fs: Any, call: Callable[..., Awaitable[_T]], requests: Iterable[tuple[Any, ...]]) -> list[_T]:
    """``await call(*request)`` for each request, in order, on the event loop of ``fs`` (an asynchronous
    filesystem), ``requests_in_flight()`` at a time."""

    async def run() -> list[_T]:
        gate = asyncio.Semaphore(requests_in_flight())

        async def bounded(request: tuple[Any, ...]) -> _T:
            async with gate:
                return await call(*request)

        return list(await asyncio.gather(*(bounded(r) for r in requests)))

    result: list[_T] = sync(fs.loop, run)
    return result


def _token(value: Any) -> Hashable:
    return value if isinstance(value, Hashable) else repr(value)


def _protocols(fs: fsspec.AbstractFileSystem) -> set[str]:
    return {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)


@functools.cache
def _with_kind(cls: type[FsspecStore], kind: type[FsspecStore]) -> type[FsspecStore]:
    """A subclass of ``cls`` (a user's subclass of FsspecStore) with ``kind``'s behaviour."""
    return type(cls.__name__, (cls, kind), {"__module__": cls.__module__})


def _opened(
    url_or_fs: Any, storage_options: dict[str, Any] | None, timeout: float | None
) -> tuple[fsspec.AbstractFileSystem, str, float | None]:
    """``(filesystem, root, timeout set)`` for what an FsspecStore is made from."""
    if isinstance(url_or_fs, FSMap):
        return url_or_fs.fs, url_or_fs.root, None
    if isinstance(url_or_fs, fsspec.AbstractFileSystem):
        return url_or_fs, "", None
    if not isinstance(url_or_fs, str | os.PathLike):
        raise StoreError(
            f"cannot make a store from {type(url_or_fs).__name__}: expected a URL or fsspec filesystem"
        )
    url, options, set_timeout = os.fspath(url_or_fs), dict(storage_options or {}), None
    for kind in (k for k in _KINDS if url.split("://", 1)[0].lower() in k.protocols):
        options, set_timeout = kind.url_options(url, options, timeout)
    fs, root = fsspec.core.url_to_fs(url, **options)
    return fs, root, set_timeout


class FsspecStore(RemoteStore):
    """A store under ``path`` of an fsspec filesystem: ``url_or_fs`` is a URL (``s3://bucket/x.zarr``,
    ``memory://a``, ``zip::file://data.zip`` ...; options in ``storage_options``), an
    ``AbstractFileSystem`` (``path`` is the root inside it) or an ``FSMap``.

    Batched reads use ``fs.cat_ranges`` and writes ``fs.pipe`` (concurrent on asynchronous filesystems).
    Suffix ranges are sent as negative starts; a range the backend refuses (a suffix, a start past the
    end) is read again as an absolute one once its size is known. Versions combine the backend's
    ETag/mtime/size with a counter of writes made through this store. Writes are as atomic as the
    backend makes them (object stores: yes; ``file://``: no, use :class:`LocalStore`). Pickles by
    filesystem and root. The store made for S3 and HTTP(S) filesystems is their subclass (see
    :mod:`rectizarr.stores.fsspec`)."""

    protocols: ClassVar[frozenset[str]] = frozenset()
    """A subclass's filesystems (what :meth:`serves` checks); it is then chosen for them."""
    _urls = False  # keys travel percent-encoded in URL paths
    _limits_reads = False  # (limits apply where a subclass honours them: S3, HTTP)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "protocols" in cls.__dict__:
            _KINDS.append(cls)

    @classmethod
    def serves(cls, fs: fsspec.AbstractFileSystem) -> bool:
        """Whether this subclass is the store for ``fs``."""
        return bool(_protocols(fs) & cls.protocols)

    @classmethod
    def url_options(
        cls, url: str, options: dict[str, Any], timeout: float | None
    ) -> tuple[dict[str, Any], float | None]:
        """``storage_options`` for a URL of this subclass's protocols and the timeout they set (or None)."""
        return options, None

    def __new__(cls, url_or_fs: Any = None, **kwargs: Any) -> FsspecStore:
        if url_or_fs is None:  # (unpickling)
            return super().__new__(cls)
        opened = _opened(url_or_fs, kwargs.get("storage_options"), kwargs.get("timeout", TIMEOUT))
        kind = next((k for k in _KINDS if k.serves(opened[0])), None)
        if kind is None or issubclass(cls, kind):
            target = cls
        else:  # (a user's subclass, made for a filesystem with a subclass of its own: both)
            target = kind if cls is FsspecStore else _with_kind(cls, kind)
        store = super().__new__(target)
        store.__dict__["_opened"] = opened  # (taken by __init__)
        return store

    def __init__(
        self,
        url_or_fs: str | os.PathLike[str] | fsspec.AbstractFileSystem | FSMap,
        *,
        path: str = "",
        storage_options: dict[str, Any] | None = None,
        read_only: bool = False,
        coalesce_gap: int | None = None,
        coalesce_max: int | None = None,
        timeout: float | None = TIMEOUT,
    ) -> None:
        fs, root, self.timeout = self.__dict__.pop("_opened")
        super().__init__(
            read_only=read_only or self._urls, coalesce_gap=coalesce_gap, coalesce_max=coalesce_max
        )
        self.fs: fsspec.AbstractFileSystem = fs
        root, path = root.rstrip("/"), path.rstrip("/")
        self.root = f"{root}/{path.lstrip('/')}" if root and path else root or path
        # Stripped form of root-relative paths, as listings return them.
        self._base = fs._strip_protocol(self._full("x"))[:-1]
        shared = (bucket_identity(p, self._base) for p in sorted(_protocols(fs)))
        self.lock_identity = next((s for s in shared if s), f"fsspec:{type(fs).__name__}:{self._base}")
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

    _where = _full

    @contextlib.contextmanager
    def _answered(self, what: str, url: str) -> Iterator[None]:
        """A StoreError naming ``url`` for a request that failed with any error but a missing file, or timed
        out (fsspec's HTTP ``info`` reports any failure as a missing file, the timeout its cause)."""
        try:
            yield
        except FileNotFoundError as exc:
            if isinstance(exc.__cause__, TimeoutError):
                raise self._fail(what, url, exc.__cause__) from exc
            raise
        except RectizarrError:
            raise
        except Exception as exc:  # the client's own (botocore's ConnectionClosedError, a 503 as OSError)
            raise self._fail(what, url, exc) from exc

    def _key_of(self, path: str) -> str | None:
        stripped = self.fs._strip_protocol(path).rstrip("/")
        if not stripped.startswith(self._base):
            return None
        key = stripped[len(self._base) :]
        return unquote(key) if self._urls else key

    # ---- reads ---------------------------------------------------------------------------------------

    def _get_batch(self, requests: Sequence[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        out: list[bytes | None] = [None] * len(requests)
        fetch: list[int] = []
        paths, starts, ends = [], [], []
        for i, (key, byte_range) in enumerate(requests):
            if is_empty(byte_range):
                out[i] = None if self._info(key) is None else b""
                continue
            fetch.append(i)
            paths.append(self._full(key))
            start, length = byte_range if byte_range is not None else (None, None)
            starts.append(start)
            ends.append(None if start is None or length is None else start + length)
        if not fetch:
            return out
        try:
            results = self._cat_ranges([requests[i][0] for i in fetch], paths, starts, ends)
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

    def _cat_ranges(
        self, keys: Sequence[str], paths: list[str], starts: list[int | None], ends: list[int | None]
    ) -> list[Any]:
        """Values (or the exception reading each raised) of a batch: fsspec's ``cat_ranges``."""
        return list(self.fs.cat_ranges(paths, starts, ends, on_error="return"))

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
        if isinstance(error, TimeoutError) or byte_range is None:
            raise self._fail(f"reading key {key!r} from", path, error) from error
        try:
            size = int(self.fs.size(path))
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise self._fail(f"reading key {key!r} range {byte_range} from", path, exc) from exc
        start, end = resolve_range(byte_range, size)
        return b"" if start >= end else self._read_span(key, path, start, end)

    def _read_span(self, key: str, path: str, start: int, end: int) -> bytes:
        """Bytes ``start:end`` of ``key`` (an absolute range, after a relative one was refused)."""
        try:
            return bytes(self.fs.cat_file(path, start=start, end=end))
        except Exception as exc:
            raise self._fail(f"reading key {key!r} range ({start}, {end - start}) from", path, exc) from exc

    def _info(self, key: str) -> tuple[int, Hashable] | None:
        info = self._asked(f"looking up key {key!r} at", self._full(key), self.fs.info)
        if info is None or info.get("type") == "directory":
            return None
        size = int(info["size"])
        token = tuple(_token(info[f]) for f in _VERSION_FIELDS if info.get(f) is not None)
        return size, (size, token, self._writes.get(key, 0))

    def _url_of(self, prefix: str) -> str:
        """The URL (or path) of the directory ``prefix``."""
        return self._full(prefix[:-1]) if prefix else self.root

    def _asked(self, what: str, url: str, call: Callable[[str], Any], missing: Any = None) -> Any:
        """``call(url)`` (a look-up, a listing), the client's error wrapped (:meth:`_answered`); ``missing``
        when nothing is at ``url``."""
        try:
            with self._answered(what, url):
                return call(url)
        except FileNotFoundError:
            return missing

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        for path in self._asked("listing", self._url_of(prefix), self.fs.find, []):
            key = self._key_of(path)
            if key and key.startswith(prefix):
                yield key

    def _list_dir(self, prefix: str) -> Iterable[str]:
        ls, n = functools.partial(self.fs.ls, detail=False), len(prefix)
        keys = (self._key_of(e) for e in self._asked("listing", self._url_of(prefix), ls, []))
        return [k[n:].split("/", 1)[0] for k in keys if k and k.startswith(prefix) and len(k) > n]

    # ---- writes --------------------------------------------------------------------------------------

    def _set_batch(self, items: Mapping[str, Buffer]) -> None:
        data = {self._full(k): v if isinstance(v, bytes) else bytes(v) for k, v in items.items()}
        with self._answered(f"writing {len(data)} value(s) to {self!r}, the first", next(iter(data))):
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
                    with contextlib.suppress(FileNotFoundError):
                        self.fs.rm_file(path)
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
        path = self._url_of(prefix)
        with self._answered("deleting everything under", path):
            if prefix:
                # (s3fs answers isdir from a listing of the parent it may have cached before another
                # client made the node: a delete would then remove nothing)
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
                if self._key_of(child["name"]):  # never the root itself (``ls`` of a file lists the file)
                    self.fs.rm(child["name"], recursive=child.get("type") == "directory")
