"""Multi-document updates that readers see whole or not at all, and that a killed writer cannot leave half
made (stores without conditional writes, where writers hold the documents' locks: local directories,
memory).

One update changes the documents of several nodes under one *primary* group (the topmost ancestor that
consolidates, else the group the update is made in). It goes in three steps:

1. **prepare**: each changed node's ``zarr.json`` (the primary's excepted) is written with its new content
   and a marker ``"rectizarr_commit": {"id", "primary", "before"}`` holding the document as it was
   (``null``: the node is new; ``"gone": true``: the node is being deleted);
2. **commit**: the primary's ``zarr.json`` is written with its new content (its consolidated metadata
   brought up to date) and the record ``"rectizarr_commit": {"id", "members"}``: one atomic write;
3. **clean-up**: the markers are dropped (deleted nodes' keys removed), then the record.

A reader that meets a marker asks the primary: a record of that id means committed (the new content);
otherwise the document is read again, and if it still holds the same marker the update was never
committed (the content before). (A committed update's record stays until its markers are gone, and a
writer finishing another's update drops the markers before the record.) Every writer first finishes an
update it finds committed (clean-up) and writes over an uncommitted one from the content before. Both
fields are extension fields with ``"must_understand": false``: zarr-python reads such documents (it sees
the new content).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import msgspec

from rectizarr.core.metadata import (
    GroupMeta,
    NodeMeta,
    decode_node,
    encode_json,
    node_from_json,
    node_to_json,
)
from rectizarr.errors import ConflictError, NodeExistsError
from rectizarr.stores import Store

MARK = "rectizarr_commit"
_MAX_ROUNDS = 8


def mark_of(meta: NodeMeta | None) -> dict[str, Any] | None:
    """The marker (a member's) or record (a primary's) a document holds, if any."""
    if meta is None or meta.zarr_format != 3:
        return None
    value = meta.extra_fields.get(MARK)
    return value if isinstance(value, dict) and isinstance(value.get("id"), str) else None


def stripped(meta: NodeMeta) -> NodeMeta:
    """``meta`` without a marker or record."""
    if MARK not in meta.extra_fields:
        return meta
    extra = {k: v for k, v in meta.extra_fields.items() if k != MARK}
    return msgspec.structs.replace(meta, extra_fields=extra)


def _with(meta: NodeMeta, mark: dict[str, Any]) -> bytes:
    doc = node_to_json(stripped(meta))
    doc[MARK] = {"must_understand": False, **mark}
    return encode_json(doc)


def _key(path: str) -> str:
    return f"{path}/zarr.json" if path else "zarr.json"


def read_raw(store: Store, path: str) -> NodeMeta | None:
    """The node's ``zarr.json`` as stored, markers and all (None: none)."""
    data = store.get(_key(path))
    return None if data is None else decode_node(data, _key(path))


def resolve(store: Store, path: str, meta: NodeMeta | None) -> NodeMeta | None:
    """The node at ``path`` as readers see it, given its document ``meta`` as just read: a member's marker
    decided by its primary (see the module's description); None where the node does not exist."""
    for _ in range(_MAX_ROUNDS):
        mark = mark_of(meta)
        if meta is None or mark is None or "before" not in mark:
            return meta if meta is None or mark is None else stripped(meta)  # (a primary's record: content)
        primary = mark.get("primary")
        record = mark_of(read_raw(store, primary)) if isinstance(primary, str) else None
        if record is not None and record.get("id") == mark["id"] and "members" in record:
            return None if mark.get("gone") else stripped(meta)
        again = read_raw(store, path)
        again_mark = mark_of(again)
        if again_mark is not None and again_mark.get("id") == mark["id"]:  # never committed
            before = mark.get("before")
            if not isinstance(before, dict):
                return None
            return node_from_json(before, _key(path))
        meta = again
    raise ConflictError(f"{_key(path)!r}: changed by other writers during each of {_MAX_ROUNDS} reads; try again")


def finish(store: Store, path: str, meta: NodeMeta) -> NodeMeta:
    """Under the locks of the group at ``path`` and its members: if its document (``meta``) holds the
    record of a committed update, do that update's clean-up and drop the record; return the content."""
    record = mark_of(meta)
    if record is None or "members" not in record:
        return meta
    for member in record["members"]:
        if not isinstance(member, str):
            continue
        raw = read_raw(store, member)
        mark = mark_of(raw)
        if raw is None or mark is None or mark.get("id") != record["id"]:
            continue
        if mark.get("gone"):
            store.delete_prefix(f"{member}/")
        else:
            store.set(_key(member), encode_json(node_to_json(stripped(raw))))
    clean = stripped(meta)
    store.set(_key(path), encode_json(node_to_json(clean)))
    return clean


def publish(store: Store, primary: str, primary_meta: NodeMeta,
            members: Mapping[str, tuple[NodeMeta | None, NodeMeta | None]], create_only: frozenset[str] = frozenset()
            ) -> dict[str, bytes | None]:
    """Write ``primary_meta`` at ``primary`` and each member's new document (``members``: path ->
    (document before, document after; None: deleted)) as one update, under the caller's locks of them
    all. ``create_only``: members whose document must not exist (NodeExistsError from the store's
    create-only write, before anything else is written). Returns what each document is now (None: gone)."""
    ident = uuid.uuid4().hex
    prepared = []
    for path, (before, after) in members.items():
        mark: dict[str, Any] = {"id": ident, "primary": primary,
                                "before": None if before is None else node_to_json(stripped(before))}
        if after is None:
            if before is None:
                continue
            mark["gone"] = True
        value = _with(before if after is None else after, mark)  # type: ignore[arg-type]
        if path in create_only:
            if not store.set_if(_key(path), value, None):
                raise NodeExistsError(f"a node already exists at {path or '/'!r}: another writer created it "
                                      "meanwhile (pass overwrite=True to replace it)")
        else:
            store.set(_key(path), value)
        prepared.append(path)
    store.set(_key(primary), _with(primary_meta, {"id": ident, "members": prepared}))  # the commit
    final: dict[str, bytes | None] = {}
    for path in prepared:
        after = members[path][1]
        if after is None:
            store.delete_prefix(f"{path}/")
            final[path] = None
        else:
            final[path] = encode_json(node_to_json(stripped(after)))
            store.set(_key(path), final[path])  # type: ignore[arg-type]
    final[primary] = encode_json(node_to_json(stripped(primary_meta)))
    store.set(_key(primary), final[primary])  # type: ignore[arg-type]
    return final


def primary_of(store: Store, path: str, get: Any) -> str | None:
    """The topmost ancestor of ``path`` whose document consolidates (``get(ancestor)``: its bytes), or
    None."""
    names = path.split("/") if path else []
    for parent in ("/".join(names[:i]) for i in range(len(names))):
        data = get(parent)
        meta = None if data is None else decode_node(data, _key(parent))
        if isinstance(meta, GroupMeta) and meta.consolidated_metadata is not None:
            return parent
    return None


# ------------------------------------------------------------------------------------------ Zarr v2
# The same steps on JSON documents: a member's ``.zarray`` holds the marker (``"record"``: the key of the
# primary's document, its ``.zmetadata`` when it consolidates, else its ``.zgroup``), and the record is a
# top-level field of that document.


def resolve_doc(store: Store, key: str, doc: Any) -> Any:
    """A v2 document (JSON, as just read at ``key``) as readers see it: a marker decided by its record
    (None: the node is not there)."""
    for _ in range(_MAX_ROUNDS):
        mark = doc.get(MARK) if isinstance(doc, dict) else None
        if not isinstance(mark, dict) or not isinstance(mark.get("record"), str):
            return doc
        record = _json(store, mark["record"])
        held = record.get(MARK) if isinstance(record, dict) else None
        if isinstance(held, dict) and held.get("id") == mark.get("id") and "members" in held:
            return {k: v for k, v in doc.items() if k != MARK}
        again = _json(store, key)
        again_mark = again.get(MARK) if isinstance(again, dict) else None
        if isinstance(again_mark, dict) and again_mark.get("id") == mark.get("id"):
            return mark.get("before")
        doc = again
    raise ConflictError(f"{key!r}: changed by other writers during each of {_MAX_ROUNDS} reads; try again")


def _json(store: Store, key: str) -> Any:
    import json

    data = store.get(key)
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def finish_doc(store: Store, record_key: str) -> Any:
    """Under the locks of the v2 group and its members: the record document at ``record_key`` with a
    committed update's clean-up done and its record dropped (rewritten only if it held one); its JSON."""
    record_doc = _json(store, record_key)
    held = record_doc.get(MARK) if isinstance(record_doc, dict) else None
    if not isinstance(held, dict) or "members" not in held:
        return record_doc
    for member in held["members"]:
        doc = _json(store, member) if isinstance(member, str) else None
        mark = doc.get(MARK) if isinstance(doc, dict) else None
        if isinstance(doc, dict) and isinstance(mark, dict) and mark.get("id") == held.get("id"):
            store.set(member, encode_json({k: v for k, v in doc.items() if k != MARK}))
    clean = {k: v for k, v in record_doc.items() if k != MARK}
    store.set(record_key, encode_json(clean))
    return clean


def publish_docs(store: Store, record_key: str, record_doc: dict[str, Any],
                 members: Mapping[str, tuple[dict[str, Any], dict[str, Any]]]) -> None:
    """Write the v2 documents ``members`` (key -> (before, after)) and ``record_doc`` at ``record_key`` as
    one update, under the caller's locks."""
    ident = uuid.uuid4().hex
    for key, (before, after) in members.items():
        store.set(key, encode_json({**after, MARK: {"must_understand": False, "id": ident, "record": record_key,
                                                    "before": before}}))
    store.set(record_key, encode_json({**record_doc, MARK: {"must_understand": False, "id": ident,
                                                             "members": list(members)}}))
    for key, (_, after) in members.items():
        store.set(key, encode_json(after))
    store.set(record_key, encode_json(record_doc))
