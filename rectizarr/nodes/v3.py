"""Zarr v3 node documents: one ``zarr.json`` per node; a group consolidates inline (its
``consolidated_metadata``), a change below it published with those copies as one update (:mod:`.records`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from rectizarr import commit, tuning
from rectizarr.core import v2keys
from rectizarr.core.metadata import (
    GroupMeta,
    NodeMeta,
    decode_node,
    encode_json,
    node_from_json,
    node_to_json,
)
from rectizarr.core.spec import RULES
from rectizarr.creation import build_v3
from rectizarr.errors import ConflictError, NodeNotFoundError, StoreError, UnsupportedError
from rectizarr.nodes.base import Change, CreateCheck, DocFormat, Published, Then, create_only
from rectizarr.nodes.paths import META, AncestorDocs, join, meta_key, parent_paths, prefix_of, relative
from rectizarr.nodes.records import decoded, inline, primary_for, publish, with_entry_meta
from rectizarr.nodes.versions import remember, version_now
from rectizarr.stores import Store


class _Marked(Exception):
    """A document met by a plain compare-and-swap holds a marker or record of an update of several
    documents (:mod:`rectizarr.commit`): the change goes through that update's primary instead."""

    def __init__(self, primary: str | None) -> None:
        self.primary = primary


class V3Format(DocFormat):
    zarr_format: Literal[2, 3] = 3
    missing = "{key!r}"
    migrates = False
    rules = RULES[3]
    build_array = staticmethod(build_v3)
    to_json = staticmethod(node_to_json)
    from_json = staticmethod(node_from_json)

    def defining_keys(self, path: str) -> list[str]:
        return [meta_key(path)]

    def consolidated_key(self, path: str) -> str:
        return meta_key(path)

    def entry_path(self, rel: str, entry: Any = ...) -> str:
        return f"$.consolidated_metadata.metadata[{json.dumps(rel)}]"

    def read(self, store: Store, path: str) -> tuple[bool, NodeMeta | None]:
        key = meta_key(path)
        before = version_now(store, key)
        data = store.get(key)
        if data is None:
            return False, None
        meta = decoded(store, path, data)
        remember(store, key, meta, before)
        return True, meta

    def encode(self, path: str, meta: NodeMeta) -> dict[str, bytes]:
        return {meta_key(path): encode_json(node_to_json(meta))}

    def write(
        self,
        store: Store,
        path: str,
        meta: NodeMeta,
        docs: AncestorDocs | None = None,
        exclusive: bool = False,
        check: CreateCheck | None = None,
    ) -> None:
        meta = commit.stripped(meta)
        primary = primary_for(store, path, docs)
        if primary is not None:  # the node and the consolidated copies above it: one update
            publish(store, primary, {path: lambda _: meta}, frozenset({path}) if exclusive else frozenset())
            return
        ((key, value),) = self.encode(path, meta).items()
        if exclusive:
            create_only(store, key, value, path, check)
        else:
            store.set(key, value)
        if docs is not None:
            docs.forget(path, value)
        self.refresh(store, path, meta, docs)

    def refresh(self, store: Store, path: str, meta: NodeMeta | None, docs: AncestorDocs | None) -> None:
        """Each consolidating ancestor's document rewritten with :meth:`Store.swap`; the entry is the node's
        document as read after the ancestor's, not ``meta``: of two clients changing the node at once, the
        one whose refresh lands last may hold the older document, and would put it back."""
        docs = docs or AncestorDocs(store)
        for parent in parent_paths(path):
            seen = docs.get(parent)  # read once per operation: most ancestors don't consolidate
            group = None if seen is None else decode_node(seen, meta_key(parent))
            if not isinstance(group, GroupMeta) or group.consolidated_metadata is None:
                continue
            docs.forget(parent, _refreshed(store, parent, path))

    def _update(self, store: Store, path: str, change: Change, then: Then | None) -> NodeMeta:
        """A conditional write of ``zarr.json`` (through the primary's commit record where an ancestor
        consolidates), re-read and re-applied on conflict."""
        key = meta_key(path)
        rounds: list[tuple[NodeMeta | None, NodeMeta]] = []

        def make(data: bytes | None) -> bytes:  # may run again on a conflict
            old = None if data is None else decode_node(data, key)
            mark = commit.mark_of(old)
            if mark is not None and ("before" in mark or "members" in mark):
                raise _Marked(mark.get("primary") if "before" in mark else None)
            rounds.append((old, commit.restamped(store, old, change(old))))
            return encode_json(node_to_json(rounds[-1][1]))

        docs = AncestorDocs(store)
        primary = primary_for(store, path, docs)
        retries = tuning.current().conflict_retries
        for _ in range(retries):
            try:
                if primary is not None:  # the node and the consolidated copies above it: one update
                    olds, news = publish(store, primary, {path: change})
                    old, new = olds[path], news[path]
                    break
                store.swap(key, make)
                old, new = rounds[-1]
                self.refresh(store, path, new, docs)
                break
            except _Marked as marked:
                if marked.primary is None:  # (this group's own record of a committed update: finished first)
                    commit.finish(store, path)
                elif isinstance(marked.primary, str):
                    primary = marked.primary
        else:
            raise ConflictError(
                f"{key!r}: changed by other writers during each of {retries} attempts to update it; try again"
            )
        assert new is not None
        old, new = (None if old is None else commit.stripped(old)), commit.stripped(new)
        if then is not None:
            then(old, new)
        return new

    def publish_many(self, store: Store, group: str, changes: Mapping[str, Change]) -> Published:
        """Through the commit record of the topmost consolidating ancestor, else of ``group``."""
        primary = commit.primary_of(store, next(iter(changes)), AncestorDocs(store).get)
        return publish(store, group if primary is None else primary, changes)

    def primary(self, store: Store, path: str, docs: AncestorDocs) -> str | None:
        return commit.primary_of(store, path, docs.get)

    def ancestor(self, store: Store, parent: str, path: str, docs: AncestorDocs) -> NodeMeta | None:
        existing = docs.get(parent)
        if existing is not None:
            return decode_node(existing, meta_key(parent))
        # a new zarr.json would hide a Zarr v2 node there (one round trip, only where a parent is missing)
        p = prefix_of(parent)
        zgroup, zarray = store.get_many([(p + v2keys.V2_GROUP, None), (p + v2keys.V2_ARRAY, None)])
        if zarray is not None:
            raise StoreError(
                f"cannot create {path!r}: ancestor {parent or '/'!r} is a Zarr v2 array, not a group"
            )
        if zgroup is not None:
            raise UnsupportedError(
                f"cannot create the Zarr v3 node {path!r}: its ancestor {parent or '/'!r} "
                "is a Zarr v2 node (create it with zarr_format=2, or migrate the v2 data)"
            )
        return None

    def consolidate(self, store: Store, path: str) -> GroupMeta:
        """A read-modify-write of the group's document: what another client changes meanwhile (an
        attribute, a member's entry) makes it list and write again, rather than be lost."""
        new = self.update(store, path, lambda stored: _listed(store, path, stored))
        assert isinstance(new, GroupMeta)
        return new


def _refreshed(store: Store, parent: str, path: str) -> bytes | None:
    """The consolidating group at ``parent`` rewritten with ``path``'s entry as stored now
    (:meth:`Store.swap`); the group's document as written (None: the group is gone)."""
    key, rel = meta_key(parent), relative(path, parent)
    made: list[bytes | None] = [None]

    def make(data: bytes | None) -> bytes | None:
        if data is None:
            return None
        group = decode_node(data, key)
        stored = store.get(meta_key(path))  # the node's document as stored now (None: there is none)
        doc = None if stored is None else node_to_json(decode_node(stored, meta_key(path)))
        new = with_entry_meta(group, rel, doc)
        made[0] = data if new is None else encode_json(node_to_json(new))
        return made[0]

    store.swap(key, make)
    return made[0]


def _listed(s: Store, p: str, meta: NodeMeta | None) -> GroupMeta:
    """The group at ``p`` (``meta``: as stored) with every descendant's document as stored now inline."""
    if meta is None:
        raise NodeNotFoundError(f"no group at {p or '/'!r} in {s!r}")
    if not isinstance(meta, GroupMeta):
        raise NodeNotFoundError(f"the node at {p or '/'!r} is an array; only groups consolidate")
    prefix = prefix_of(p)
    keys = [k for k in s.list_prefix(prefix) if k.endswith("/" + META) and k != prefix + META]
    rels = [k[len(prefix) : -len(META) - 1] for k in keys]
    entries: dict[str, Any] = {}
    for rel, data in zip(rels, s.get_many([(k, None) for k in keys]), strict=True):
        node = None if data is None else decoded(s, join(p, rel), data)
        if node is None:  # (gone, or a new node a killed writer never committed)
            continue
        doc = node_to_json(node)
        if doc.get("node_type") == "group":
            doc["consolidated_metadata"] = inline()
        entries[rel] = doc
    # A prefix without zarr.json is not a node: drop documents below one.
    entries = {
        rel: doc for rel, doc in entries.items() if all(q in entries for q in [*parent_paths(rel)][1:])
    }
    return GroupMeta(
        attributes=meta.attributes, extra_fields=meta.extra_fields, consolidated_metadata=inline(entries)
    )


V3 = V3Format()
