"""Sources of a virtual concatenation: a Zarr node (v2 or v3) in a store that has a URL, or a reference
set. Each gives its node, opened read-only, and the target of each of its store keys."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from rectizarr import nodes
from rectizarr.api import naming_store
from rectizarr.arrays import Array
from rectizarr.core.metadata import ArrayMeta
from rectizarr.groups import Group
from rectizarr.stores import LocalStore, Store, open_store
from rectizarr.virtual.errors import UnreferenceableError
from rectizarr.virtual.refs import PARQUET_SUFFIXES, Target, Url, is_refs, load_refs, normalized, target_of

__all__ = ["Source", "open_node", "open_source", "store_url"]

_META_NAMES = frozenset({nodes.META, ".zarray", ".zattrs", ".zgroup", ".zmetadata"})


@dataclass(frozen=True)
class Source:
    """One source: ``name`` (for messages), its ``node``, and where its keys are: ``refs`` (a reference
    set's references) or ``base`` (the URL of its store's root)."""

    name: str
    node: Array | Group
    refs: Mapping[str, Any] | None = None
    base: str | None = None

    def target(self, key: str) -> Target | None:
        """Where the value of store ``key`` is (None: a reference set without it)."""
        if self.refs is None:
            return Url(f"{self.base}/{key}")
        value = self.refs.get(key)
        return None if value is None else target_of(value, key, self.name)

    def stored(self, prefix: str) -> Iterator[str] | None:
        """The keys stored under ``prefix`` except documents (None: the store cannot list)."""
        store = self.node.store
        if self.refs is None and store.capabilities.unlisted:
            return None
        keys = store.list_prefix(prefix) if self.refs is None else self.refs
        return (k for k in keys if k.startswith(prefix) and k.rsplit("/", 1)[-1] not in _META_NAMES)


def store_url(store: Store, name: str) -> str:
    """The URL (or absolute local path) of a store's root, which references can point into."""
    if isinstance(store, LocalStore):
        return store.root
    inner = getattr(store, "inner", None)  # a wrapper (CountingStore): the store it wraps
    if isinstance(inner, Store):
        return store_url(inner, name)
    fs = getattr(store, "fs", None)
    root = getattr(store, "root", None)
    if fs is not None and isinstance(root, str):
        protocol = fs.protocol[0] if isinstance(fs.protocol, tuple) else fs.protocol
        if protocol == "reference":
            raise UnreferenceableError(
                "give a reference set as its dict or file, not as a reference:// store",
                source=name,
                field="store",
            )
        return root.rstrip("/") if protocol in ("http", "https") else fs.unstrip_protocol(root).rstrip("/")
    url = getattr(store, "url", None)
    if isinstance(url, str) and "://" in url:
        return url.rstrip("/")
    raise UnreferenceableError(
        f"{store!r} has no URL that references could point to (use a local directory, "
        "a file:// / s3:// / http(s):// URL or a reference set)",
        source=name,
        field="store",
    )


def open_node(obj: Any, storage_options: Mapping[str, Any] | None = None) -> Array | Group:
    """The array or group at the root of ``obj`` (a path, URL or store), read-only, from one read of its
    document (``rectizarr.open`` reads an array's twice)."""
    store = nodes.store_for(obj, "r", storage_options)
    with naming_store(store):
        meta = nodes.read_meta(store, "")
    if isinstance(meta, ArrayMeta):
        return Array(store, "", meta, read_only=True)
    return Group(store, "", meta, read_only=True)


def _describe(obj: Any) -> str:
    if isinstance(obj, str | os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, Array | Group):
        return f"{obj.store!r}:{obj.path or '/'}"
    return type(obj).__name__


def open_source(
    obj: Any,
    index: int,
    *,
    storage_options: Mapping[str, Any] | None = None,
    ref_options: Mapping[str, Any] | None = None,
) -> Source:
    """Source number ``index`` from a path, URL, store, opened array or group, or reference set (a dict,
    or a ``.json`` / ``.parq`` file). ``storage_options`` open paths and URLs; ``ref_options`` are given
    to the reference filesystem that reads reference sets (``remote_protocol``, ``remote_options``)."""
    name = f"#{index} ({_describe(obj)})"
    if isinstance(obj, Mapping) and is_refs(obj):
        return _from_refs(normalized(obj, name), name, ref_options)
    if isinstance(obj, str | os.PathLike):
        text = os.fspath(obj).rstrip("/")
        if text.endswith((".json", *PARQUET_SUFFIXES)):
            return _from_refs(load_refs(text, storage_options), name, ref_options)
    node = obj if isinstance(obj, Array | Group) else open_node(obj, storage_options)
    return Source(name, node, base=store_url(node.store, name))


def _from_refs(refs: dict[str, Any], name: str, ref_options: Mapping[str, Any] | None) -> Source:
    node = open_node(
        open_store("reference://", mode="r", storage_options={"fo": refs, **dict(ref_options or {})})
    )
    return Source(name, node, refs=refs["refs"])
