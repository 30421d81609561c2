"""Node paths and names: validation as the spec says (non-empty, no ``/``, not only periods, not
``zarr.json``), store keys of nodes, the locks of a node and its ancestors, and the ancestors' ``zarr.json``
values read once per operation."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

from rectizarr.errors import MetadataError
from rectizarr.stores import MemoryStore, Store, open_store

META = "zarr.json"
_MODES = ("r", "r+", "a", "w", "w-")


def store_for(store: Any, mode: str, storage_options: Mapping[str, Any] | None) -> Store:
    """The store a node function was given (path, URL, fsspec object or store; None: a new
    :class:`~rectizarr.MemoryStore`) opened for ``mode``."""
    if mode not in _MODES:
        raise MetadataError(f"mode must be one of {_MODES}, got {mode!r}")
    if store is None:  # zarr-python's default: a new in-memory store
        return MemoryStore()
    return open_store(store, mode=mode, storage_options=dict(storage_options) if storage_options else None)


def check_name(name: str) -> str:
    """Validate one node name; return it."""
    if not isinstance(name, str) or not name:
        raise MetadataError(f"node name must be a non-empty string, got {name!r}")
    if "/" in name:
        raise MetadataError(f"node name {name!r} must not contain '/'")
    if set(name) == {"."}:
        raise MetadataError(f"node name {name!r} must not consist only of periods")
    if name == META:
        raise MetadataError(f"node name {name!r} is reserved")
    if "\\" in name or "\x00" in name:
        raise MetadataError(f"node name {name!r} must not contain a backslash or NUL")
    try:  # (a lone surrogate: no store key, file name or lock's name can hold it)
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise MetadataError(f"node name {name!r} is not valid Unicode text (a lone surrogate)") from None
    return name


def member_path_problem(rel: Any) -> str | None:
    """Why ``rel`` (a path relative to a group, as in consolidated metadata) cannot name a node, or None
    when every name in it is valid (``""``, ``"a//b"`` or ``"a/.."`` cannot)."""
    if not isinstance(rel, str):
        return f"node path must be a string, got {rel!r}"
    try:
        for name in rel.split("/"):
            check_name(name)
    except MetadataError as exc:
        return exc.message
    return None


def normalize_path(path: str | None) -> str:
    """``"/a/b/"`` -> ``"a/b"``; ``None``/``""``/``"/"`` -> ``""`` (the root); each name validated."""
    if path is None:
        return ""
    if not isinstance(path, str):
        raise MetadataError(f"node path must be a string, got {type(path).__name__}")
    stripped = path.strip("/")
    if not stripped:
        return ""
    for name in stripped.split("/"):
        check_name(name)
    return stripped


def join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


def prefix_of(path: str) -> str:
    """Store key prefix of a node's children and chunks (``""`` for the root)."""
    return f"{path}/" if path else ""


def meta_key(path: str) -> str:
    return prefix_of(path) + META


def parent_paths(path: str) -> Iterator[str]:
    """Ancestors of ``path`` from the root down (excluding ``path`` itself)."""
    if not path:
        return
    names = path.split("/")
    for i in range(len(names)):
        yield "/".join(names[:i])


def relative(path: str, group: str) -> str:
    """``path`` relative to its ancestor (or itself) ``group``: its name in the group's consolidated entries."""
    return path[len(group) :].strip("/")


def locked(store: Store, path: str) -> AbstractContextManager[None]:
    """The locks of a node's ``zarr.json`` and its ancestors' (whose consolidated metadata a change of the
    node rewrites), taken at once: hold them around any read-modify-write of node documents."""
    return store.lock([meta_key(p) for p in (path, *parent_paths(path))])


def exists_message(path: str) -> str:
    return f"a node already exists at {path or '/'!r} (pass overwrite=True to replace it)"


class AncestorDocs:
    """The ``zarr.json`` values of the ancestors of a node being created or deleted, each read at most once
    (writes go through to the store and replace what was read)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._docs: dict[str, bytes | None] = {}

    def get(self, path: str) -> bytes | None:
        if path not in self._docs:
            self._docs[path] = self.store.get(meta_key(path))
        return self._docs[path]

    def forget(self, path: str, written: bytes | None = None) -> None:
        """``path``'s document is what was ``written`` there, or (None: made by someone else meanwhile) is
        read again when next asked."""
        if written is None:
            self._docs.pop(path, None)
        else:
            self._docs[path] = written
