"""The node formats (:data:`FORMATS`: Zarr v3, then v2) and what is done to a node through its format:
reading (from the stored documents, or the format asked for), writing, updating and deleting it."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from rectizarr.core.metadata import ArrayMeta, NodeMeta
from rectizarr.core.spec import check_zarr_format
from rectizarr.errors import LenientMetadataWarning, NodeNotFoundError, StoreError
from rectizarr.nodes.base import DocFormat
from rectizarr.nodes.paths import META, AncestorDocs, join, meta_key, prefix_of
from rectizarr.nodes.records import decoded, primary_for, publish
from rectizarr.nodes.v2 import V2
from rectizarr.nodes.v3 import V3
from rectizarr.nodes.versions import remember, version_now
from rectizarr.stores import Store, validate_key

FORMATS: dict[Any, DocFormat] = {3: V3, 2: V2}  # looked for in this order where no format is asked for


def format_of(meta: NodeMeta) -> DocFormat:
    """The format of the node ``meta``."""
    return FORMATS[meta.zarr_format]


def format_for(zarr_format: Any) -> DocFormat:
    """The format ``zarr_format`` (2 or 3: :func:`check_zarr_format`) asks for, for a new node."""
    return FORMATS[check_zarr_format(zarr_format)]


def _formats(zarr_format: Any) -> tuple[DocFormat, ...]:
    """The formats to look for a node in: ``zarr_format``'s, or (None) each in turn."""
    fmt = check_zarr_format(zarr_format, optional=True)
    return tuple(FORMATS.values()) if fmt is None else (FORMATS[fmt],)


def read_meta(store: Store, path: str, zarr_format: int | None = None) -> NodeMeta:
    """The node at ``path``: its ``zarr.json``, else its Zarr v2 documents (``zarr_format`` forces one)."""
    meta = try_read_meta(store, path, zarr_format)
    if meta is None:
        names = ", ".join(f.missing.format(key=meta_key(path)) for f in _formats(zarr_format))
        raise NodeNotFoundError(
            f"no Zarr node at {path or '/'!r} in {store!r}: it does not exist (no {names} in the store)"
        )
    return meta


def try_read_meta(store: Store, path: str, zarr_format: int | None = None) -> NodeMeta | None:
    """Like :func:`read_meta`, None when there is no node."""
    for fmt in _formats(zarr_format):
        there, meta = fmt.read(store, path)
        if there:
            return meta
    return None


def read_children(store: Store, path: str, names: list[str]) -> dict[str, NodeMeta]:
    """The nodes among the children ``names`` of ``path`` (listing order kept; non-nodes left out)."""
    p = prefix_of(path)
    names = [n for n in names if _listable(p, n)]
    keys = [meta_key(join(path, n)) for n in names]
    before = [version_now(store, k) for k in keys]
    docs = store.get_many([(k, None) for k in keys])
    found = {n: decoded(store, join(path, n), d) for n, d in zip(names, docs, strict=True) if d is not None}
    for n, key, version in zip(names, keys, before, strict=True):
        if isinstance(found.get(n), ArrayMeta):
            remember(store, key, found[n], version)
    out: dict[str, NodeMeta] = {n: meta for n, meta in found.items() if meta is not None}
    for n in names:
        if n not in found and not n.startswith("."):
            meta = V2.read(store, join(path, n))[1]
            if meta is not None:
                out[n] = meta
    return out


def _listable(prefix: str, name: str) -> bool:
    """Whether a listed child ``name`` can be a node here; a name that cannot be a store key (``pct%2F``:
    percent-encoding that decodes to a '/', which zarr-python writes as a plain file name) is left out of
    the listing with a warning, rather than failing the whole group's."""
    try:
        validate_key(prefix + name + "/" + META)
    except StoreError as exc:
        warnings.warn(
            f"{prefix or '/'}: the member {name!r} is left out: {exc}", LenientMetadataWarning, stacklevel=4
        )
        return False
    return True


def node_exists(store: Store, path: str) -> bool:
    """Whether a node (v3 or v2) is stored at ``path``."""
    keys = [k for fmt in FORMATS.values() for k in fmt.defining_keys(path)]  # zarr.json first
    if store.capabilities.low_latency:
        if store.exists(keys[0]):  # (one left by an update a killed writer never committed is not there)
            return try_read_meta(store, path, 3) is not None
        return any(store.exists(k) for k in keys[1:])
    values = store.get_many([(k, None) for k in keys])  # one round trip
    if values[0] is not None:
        return decoded(store, path, values[0]) is not None
    return any(v is not None for v in values[1:])


def doc_key(path: str, meta: NodeMeta) -> str:
    """The key of the document that defines the node: ``zarr.json``, ``.zarray`` or ``.zgroup``."""
    return format_of(meta).doc_keys(path, meta)[0]


def node_from_json(obj: Mapping[str, Any], key: str | None = None) -> NodeMeta:
    """A node from a consolidated entry: a ``zarr.json`` object, or a combined Zarr v2 document."""
    fmt = V2 if isinstance(obj, Mapping) and V2.holds(obj) else V3  # (v3 says what is wrong with others)
    return fmt.from_json(obj, key)


def node_doc(meta: NodeMeta) -> dict[str, Any]:
    """The JSON object of a node as consolidated metadata holds it (v3, or combined v2)."""
    return format_of(meta).to_json(meta)


def delete_node(store: Store, path: str, docs: AncestorDocs | None = None) -> None:
    """Remove a node and its whole subtree; ancestors' consolidated metadata drop it too."""
    primary = primary_for(store, path, docs)
    if primary is not None and try_read_meta(store, path, 3) is not None:
        publish(store, primary, {path: lambda _: None})  # (its keys removed at the clean-up)
        if store.capabilities.process_locks:  # what no listing shows (a killed writer's temporary files)
            store.delete_prefix(prefix_of(path))  # goes too, where the caller's locks keep all writers out
        return
    store.delete_prefix(prefix_of(path))
    for fmt in FORMATS.values() if path else ():  # (the root: no group above it)
        fmt.refresh(store, path, None, docs)
