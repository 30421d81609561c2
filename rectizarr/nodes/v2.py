"""Zarr v2 node documents: ``.zarray`` or ``.zgroup`` defines the node, ``.zattrs`` holds its attributes,
and a group consolidates into ``.zmetadata`` (every document at or below it, as zarr-python 2 writes it)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from rectizarr import commit
from rectizarr._util import LazyModule
from rectizarr.core import v2keys
from rectizarr.core.metadata import ArrayMeta, GroupMeta, NodeMeta, encode_json
from rectizarr.core.spec import RULES
from rectizarr.creation import build_v2
from rectizarr.errors import NodeNotFoundError, UnsupportedError
from rectizarr.nodes.base import Change, DocFormat, Published, Then
from rectizarr.nodes.paths import AncestorDocs, locked, meta_key, parent_paths, prefix_of, relative
from rectizarr.nodes.versions import Tracker, remember, version_now
from rectizarr.stores import Store, written
from rectizarr.stores.update import swapped

if TYPE_CHECKING:
    from rectizarr.core import v2meta
else:
    v2meta = LazyModule("rectizarr.core.v2meta")  # (v2's parsing: loaded on first use)

_ALL = (*v2keys.V2_KEYS, v2keys.V2_CONSOLIDATED)  # every document a v2 node reads: .zarray first


class V2Format(DocFormat):
    zarr_format: Literal[2, 3] = 2
    missing = "'.zarray' or '.zgroup'"
    migrates = True
    rules = RULES[2]
    build_array = staticmethod(build_v2)

    def has_fill(self, meta: ArrayMeta) -> bool:
        return (meta.v2 or {}).get("fill_value") is not None

    def v3_attributes(self, meta: ArrayMeta) -> dict[str, Any]:
        from rectizarr.core import v2migrate  # (for migrate, copy and virtual: loaded on first use)

        return v2migrate.v3_attributes(meta)

    def as_v3(self, meta: ArrayMeta) -> tuple[ArrayMeta | None, str]:
        from rectizarr.core import v2migrate

        codecs, why = v2migrate.v3_codecs(meta)
        if codecs is None:
            return None, why
        attributes = self.v3_attributes(meta)
        return msgspec.structs.replace(
            meta, codecs=codecs, zarr_format=3, v2=None, attributes=attributes
        ), why

    def defining_keys(self, path: str) -> list[str]:
        return [prefix_of(path) + v2keys.V2_ARRAY, prefix_of(path) + v2keys.V2_GROUP]

    def doc_keys(self, path: str, meta: NodeMeta) -> list[str]:
        defining = v2keys.V2_ARRAY if isinstance(meta, ArrayMeta) else v2keys.V2_GROUP
        return [prefix_of(path) + defining, prefix_of(path) + v2keys.V2_ATTRS]

    def consolidated_key(self, path: str) -> str:
        return prefix_of(path) + v2keys.V2_CONSOLIDATED

    def entry_path(self, rel: str, entry: Any = ...) -> str:
        array = isinstance(entry, dict) and entry.get("node_type") == "array"
        leaf = "..." if entry is ... else v2keys.V2_ARRAY if array else v2keys.V2_GROUP
        return f"$.metadata[{json.dumps(rel + '/' + leaf)}]"

    def tracker(self, store: Store, path: str, meta: NodeMeta) -> Tracker:
        """An array: its ``.zarray`` (versions), its ``.zarray`` and ``.zattrs`` (what this process wrote);
        a group: every document it reads."""
        if isinstance(meta, ArrayMeta):
            return Tracker(store, self.doc_keys(path, meta), checked=1)
        return Tracker(store, [prefix_of(path) + name for name in _ALL])

    def read(self, store: Store, path: str) -> tuple[bool, NodeMeta | None]:
        """``.zarray`` or ``.zgroup``, ``.zattrs``, a group's ``.zmetadata``."""
        keys = [prefix_of(path) + name for name in _ALL]
        before = version_now(store, keys[0])
        values = store.get_many([(k, None) for k in keys])
        if values[0] is not None and commit.MARK.encode() in values[0]:  # an update of several documents
            doc = commit.resolve_doc(store, keys[0], v2meta.load_json(values[0], keys[0]))
            values[0] = None if doc is None else encode_json(doc)
        meta = _from(values, keys)
        if isinstance(meta, ArrayMeta):
            remember(store, keys[0], meta, before)
        return meta is not None, meta

    def to_json(self, meta: NodeMeta) -> dict[str, Any]:
        return v2meta.v2_combined(meta)

    def from_json(self, obj: Mapping[str, Any], key: str | None = None) -> NodeMeta:
        return v2meta.v2_node_from_json(obj, key)

    def encode(self, path: str, meta: NodeMeta) -> dict[str, bytes]:
        return {prefix_of(path) + name: encode_json(doc) for name, doc in v2meta.v2_docs(meta).items()}

    def refresh(self, store: Store, path: str, meta: NodeMeta | None, docs: AncestorDocs | None) -> None:
        """Every ``.zmetadata`` at ``path`` or above it, each with :meth:`Store.swap`; the entry is the node's
        documents as read after ``.zmetadata`` at each try, not ``meta``: another client's later change of
        them may have reached ``.zmetadata`` first."""
        for group in (*parent_paths(path), path):
            key, rel = self.consolidated_key(group), relative(path, group)

            def make(data: bytes | None, key: str = key, rel: str = rel) -> bytes | None:
                current = v2meta.load_json(data, key)
                if not isinstance(current, dict) or not isinstance(current.get("metadata"), dict):
                    return data  # no consolidated metadata here: left as it is
                now = None if meta is None else self.read(store, path)[1] or meta
                return encode_json(v2meta.with_entries(current, rel, now))

            store.swap(key, make)  # (concurrent updates of .zmetadata all land)

    def _update(self, store: Store, path: str, change: Change, then: Then | None) -> NodeMeta:
        """Each document the change rewrites (``.zarray``: a resize or an append, ``.zattrs``: attributes)
        compare-and-swapped at the version read (on every store: one that lost a race is read again and the
        change applied again); a change of both writes them one after the other (not atomically)."""
        p = prefix_of(path)
        keys = [p + name for name in _ALL]
        rounds: list[tuple[NodeMeta | None, NodeMeta]] = []

        def make(stored: dict[str, bytes | None]) -> dict[str, bytes]:  # may run again on a conflict
            rest = [k for k in keys if k not in stored]  # (written in an earlier round: as stored now)
            now = {**dict(zip(rest, store.get_many([(k, None) for k in rest]), strict=True)), **stored}
            old = _from([now[k] for k in keys], keys)
            new = change(old)
            rounds.append((old, new))
            before = {} if old is None else v2meta.v2_docs(old)
            docs = v2meta.v2_docs(new).items()
            return {p + name: encode_json(doc) for name, doc in docs if before.get(name) != doc}

        swapped(store, keys, make)  # (no lock held while ``change`` runs: it may lock chunks)
        old, new = rounds[-1]
        self.refresh(store, path, new, None)
        if then is not None:
            then(old, new)
        return new

    def publish_many(self, store: Store, group: str, changes: Mapping[str, Change]) -> Published:
        """Under the locks of the group, its ancestors and the nodes (Zarr v2 has no compare-and-swap form of
        it): their ``.zarray``, the record in the group's ``.zmetadata`` (brought up to date) where it
        consolidates, else in its ``.zgroup`` (:func:`commit.publish_docs`)."""
        paths = sorted({group, *parent_paths(group), *changes})
        with store.lock([meta_key(q) for q in paths]):
            olds = {path: self.read(store, path)[1] for path in changes}
            news: dict[str, NodeMeta | None] = {path: change(olds[path]) for path, change in changes.items()}
            p = prefix_of(group)
            zmeta_key, zgroup_key = p + v2keys.V2_CONSOLIDATED, p + v2keys.V2_GROUP
            consolidated = commit.finish_doc(store, zmeta_key)
            if not (isinstance(consolidated, dict) and isinstance(consolidated.get("metadata"), dict)):
                consolidated = None
            record_key = zgroup_key if consolidated is None else zmeta_key
            record = commit.finish_doc(store, zgroup_key) if consolidated is None else consolidated
            if not isinstance(record, dict):
                raise NodeNotFoundError(f"no Zarr v2 group at {group or '/'!r} in {store!r}")
            members = {}
            for path, new in news.items():
                old = olds[path]
                assert old is not None and new is not None
                before, after = (v2meta.v2_docs(m)[v2keys.V2_ARRAY] for m in (old, new))
                members[prefix_of(path) + v2keys.V2_ARRAY] = (before, after)
                if consolidated is not None:
                    record = v2meta.with_entries(record, path[len(p) :], new)
            commit.publish_docs(store, record_key, record, members)
            written.mark(store.lock_identity, [*members, record_key])
        return olds, news

    def together(self, store: Store) -> bool:
        return not store.capabilities.conditional_writes  # (where other clients take no locks: none)

    def ancestor(self, store: Store, parent: str, path: str, docs: AncestorDocs) -> NodeMeta | None:
        found = self.read(store, parent)[1]
        # a new .zgroup beside a Zarr v3 node's zarr.json (one GET, only where a parent is missing)
        if found is None and docs.get(parent) is not None:
            raise UnsupportedError(
                f"cannot create the Zarr v2 node {path!r}: its ancestor {parent or '/'!r} "
                "is a Zarr v3 node (create it with zarr_format=3)"
            )
        return found

    def consolidate(self, store: Store, path: str) -> GroupMeta:
        """``.zmetadata``: every ``.zarray``/``.zgroup``/``.zattrs`` at or below the group, as zarr-python 2
        writes it; under the locks of the group and its ancestors."""
        prefix = prefix_of(path)

        def listed(_: bytes | None = None) -> bytes:
            keys = sorted(k for k in store.list_prefix(prefix) if k.rpartition("/")[2] in v2keys.V2_KEYS)
            values = store.get_many([(k, None) for k in keys])
            entries = {
                k[len(prefix) :]: v2meta.load_json(v, k)
                for k, v in zip(keys, values, strict=True)
                if v is not None
            }
            return encode_json({"metadata": entries, "zarr_consolidated_format": 1})

        with locked(store, path):  # (a change another client makes meanwhile lists again)
            store.swap(self.consolidated_key(path), listed)
            meta = self.read(store, path)[1]
        if not isinstance(meta, GroupMeta):
            raise NodeNotFoundError(f"the node at {path or '/'!r} is not a v2 group; only groups consolidate")
        return meta


def _from(values: list[bytes | None], keys: list[str]) -> NodeMeta | None:
    zarray, zgroup, zattrs, zmeta = (
        v2meta.load_json(data, key) for data, key in zip(values, keys, strict=True)
    )
    if zarray is not None:
        return v2meta.decode_v2_array(zarray, zattrs, keys[0])
    return v2meta.decode_v2_group(zgroup, zattrs, zmeta, keys[1]) if zgroup is not None else None


V2 = V2Format()
