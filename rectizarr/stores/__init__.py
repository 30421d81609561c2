"""The store layer: every byte rectizarr reads or writes goes through a :class:`Store`.

A store maps keys (``"/"``-separated, validated on every call, see :func:`validate_key`) to bytes::

    store.get(key, byte_range=None) -> bytes | None     missing -> None; ranges past the end truncate
    store.get_many([(key, range), ...])                 concurrent; neighbouring ranges coalesced
    store.set / set_many / delete / delete_many / delete_prefix
    store.exists / getsize / version / list_prefix / list_dir
    store.with_read_only() / close()

A byte range is ``(start, length)``: ``length`` None reads to the end, ``(-n, None)`` the last ``n``
bytes. Mutating a read-only store raises :class:`~rectizarr.errors.ReadOnlyError`; invalid keys and
backend failures raise :class:`~rectizarr.errors.StoreError`. Stores pickle (for dask workers).
Backends: :class:`LocalStore`, :class:`MemoryStore`, :class:`FsspecStore`, :class:`ObjectStore`,
:class:`ZipStore` and :class:`CountingStore` (counts what reaches a wrapped store); :func:`open_store`."""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

from rectizarr.errors import StoreError
from rectizarr.stores.base import Capabilities, Store
from rectizarr.stores.keys import Buffer, ByteRange, validate_key, validate_prefix
from rectizarr.stores.limits import (
    max_document_bytes,
    requests_in_flight,
    set_max_document_bytes,
    set_requests_in_flight,
)
from rectizarr.stores.local import LocalStore
from rectizarr.stores.memory import CountingStore, MemoryStore

if TYPE_CHECKING:
    import fsspec
    from fsspec.mapping import FSMap

    from rectizarr.stores.fsspec import FsspecStore
    from rectizarr.stores.zip import ZipStore


_LAZY = {"FsspecStore": "fsspec", "ObjectStore": "objectstore", "ZipStore": "zip"}


def __getattr__(name: str) -> Any:  # fsspec, obstore and zipfile (slow to import): when such a store is used
    if name in _LAZY:
        return getattr(importlib.import_module(f"rectizarr.stores.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Buffer",
    "ByteRange",
    "Capabilities",
    "CountingStore",
    "FsspecStore",
    "LocalStore",
    "MemoryStore",
    "ObjectStore",
    "Store",
    "ZipStore",
    "max_document_bytes",
    "open_store",
    "requests_in_flight",
    "set_max_document_bytes",
    "set_requests_in_flight",
    "validate_key",
    "validate_prefix",
]

_MODES = ("r", "r+", "a", "w", "w-")


def open_store(
    obj: str | os.PathLike[str] | Store | fsspec.AbstractFileSystem | FSMap,
    *,
    mode: str = "r+",
    storage_options: dict[str, Any] | None = None,
    backend: str | None = None,
) -> Store:
    """Make a store from a path, URL, fsspec filesystem or mapper, or pass a store through.

    A reference set (fsspec's format, version 1: a dict, or a ``.json`` file) is a read-only
    :class:`FsspecStore` over ``reference://``. A plain path (or ``file://`` URL) ending in ``.zip`` is a
    :class:`ZipStore`, any other a :class:`LocalStore` (one directory, one store, however it is named);
    another URL, a ``file://`` URL with ``storage_options`` or ``backend="fsspec"``, or an fsspec object
    is an :class:`FsspecStore`. ``mode="r"`` gives a read-only store, the others a writable one (whether
    a node may be overwritten is decided above the store layer; ``"w"`` truncates only a zip archive).

    ``backend`` chooses how a URL is opened: ``"obstore"`` (an :class:`ObjectStore`: ``s3://``, ``gs://``,
    ``az://``, ``abfs://``, ``http(s)://``), ``"fsspec"`` (an :class:`FsspecStore`: any fsspec URL), or None:
    obstore for those schemes when it is installed (``rectizarr[cloud]``) and the ``storage_options`` map onto
    it, else fsspec. ``storage_options`` take fsspec's names either way."""
    if mode not in _MODES:
        raise StoreError(f"invalid mode {mode!r} for {obj!r}: expected one of {', '.join(_MODES)}")
    read_only = mode == "r"
    if isinstance(obj, Store):
        return obj.with_read_only() if read_only and not obj.read_only else obj
    loaded = sys.modules.get("fsspec")  # an fsspec object exists only once fsspec is imported
    if loaded is not None and isinstance(obj, loaded.AbstractFileSystem | loaded.FSMap):
        from rectizarr.stores.fsspec import FsspecStore

        return FsspecStore(obj, read_only=read_only)
    if isinstance(obj, dict) and obj.get("version") == 1 and isinstance(obj.get("refs"), dict):
        # an fsspec reference set (what rectizarr.virtual builds): the store it describes
        return _url_store("reference://", {"fo": obj, **(storage_options or {})}, True, "fsspec")
    if isinstance(obj, dict):  # as zarr-python: the dict holds the store's contents
        return MemoryStore.in_dict(obj, read_only=read_only)
    if not isinstance(obj, str | os.PathLike):
        raise StoreError(
            f"cannot open a store from {type(obj).__name__}: expected a path, URL, fsspec object, "
            "dict or Store"
        )
    return _path_store(os.fspath(obj), mode, storage_options, backend)


def _path_store(text: str, mode: str, storage_options: dict[str, Any] | None, backend: str | None) -> Store:
    """:func:`open_store` of a path or URL."""
    read_only = mode == "r"
    if text.startswith("file://") and "::" not in text and not storage_options and backend is None:
        text = text.removeprefix("file://")
    if text.endswith(".json") and "://" not in text and "::" not in text and os.path.isfile(text):
        # a reference set (fsspec's JSON, what rectizarr.virtual writes): the store it describes
        return _url_store("reference://", {"fo": text, **(storage_options or {})}, True, "fsspec")
    if "://" in text or "::" in text:
        return _url_store(text, storage_options, read_only, backend)
    if backend is not None:
        raise StoreError(f"backend={backend!r} given for the local path {text!r}: it applies to URLs only")
    if storage_options:
        raise StoreError(f"storage_options given for the local path {text!r}: they apply to fsspec URLs only")
    if text.endswith(".zip"):
        from rectizarr.stores.zip import ZipStore

        return ZipStore(text, mode="r" if read_only else "w" if mode == "w" else "a")
    return LocalStore(text, read_only=read_only)


def _url_store(
    url: str, storage_options: dict[str, Any] | None, read_only: bool, backend: str | None
) -> Store:
    from rectizarr.stores.obstore_options import handles

    if backend not in (None, "obstore", "fsspec"):
        raise StoreError(f"unknown backend {backend!r} for {url!r}: expected 'obstore', 'fsspec' or None")
    if backend == "obstore" or (backend is None and handles(url, storage_options)):
        from rectizarr.stores.objectstore import ObjectStore

        return ObjectStore(url, storage_options=storage_options, read_only=read_only)
    from rectizarr.stores.fsspec import FsspecStore

    return FsspecStore(url, storage_options=storage_options, read_only=read_only)
