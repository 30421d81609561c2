"""Multi-document updates that readers see whole or not at all, and that a killed writer cannot leave half
made, on every store: each write a compare-and-swap (the backend's own on object stores, under the key's
lock elsewhere; see the section on them below).

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
the new content)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from rectizarr import tuning
from rectizarr._util import process_alive, this_host
from rectizarr.core.metadata import (
    GroupMeta,
    NodeMeta,
    decode_node,
    encode_json,
    node_from_json,
    node_to_json,
)
from rectizarr.errors import ConflictError, NodeExistsError, NodeNotFoundError
from rectizarr.stores import Store
from rectizarr.stores.base import back_off

MARK = "rectizarr_commit"
_MAX_ROUNDS = 8


def mark_of(meta: NodeMeta | None) -> dict[str, Any] | None:
    """The marker (a member's) or record (a primary's) a document holds, if any."""
    if meta is None:  # (a Zarr v2 node has no extra fields: its markers are in its JSON, resolve_doc)
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
    return encode_json({**node_to_json(stripped(meta)), MARK: {"must_understand": False, **mark}})


def _marked(ident: str, primary: str, before: NodeMeta | None, after: NodeMeta | None) -> bytes:
    """A member's document while the update ``ident`` is under way: its new content (a node being deleted:
    the content before) and the marker, which says when and by which process of which machine."""
    old = None if before is None else node_to_json(stripped(before))
    mark: dict[str, Any] = {"id": ident, "primary": primary, "t": round(time.time(), 3)}
    mark.update(by=f"{os.getpid()}-{this_host()}", before=old)
    if after is None:
        mark["gone"] = True
    return _with(before if after is None else after, mark)  # type: ignore[arg-type]


def _key(path: str) -> str:
    return f"{path}/zarr.json" if path else "zarr.json"


def made_meanwhile(path: str) -> NodeExistsError:
    """The refusal of a create-only write of the node at ``path``."""
    return NodeExistsError(
        f"a node already exists at {path or '/'!r}: another writer created it meanwhile "
        "(pass overwrite=True to replace it)"
    )


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
        if (mark_of(again) or {}).get("id") == mark["id"]:  # the same marker: never committed
            before = mark.get("before")
            return node_from_json(before, _key(path)) if isinstance(before, dict) else None
        meta = again
    raise ConflictError(
        f"{_key(path)!r}: changed by other writers during each of {_MAX_ROUNDS} reads; try again"
    )


def primary_of(store: Store, path: str, get: Any) -> str | None:
    """The topmost ancestor of ``path`` whose document consolidates (``get(ancestor)``: its bytes)."""
    names = path.split("/") if path else []
    for parent in ("/".join(names[:i]) for i in range(len(names))):
        data = get(parent)
        meta = None if data is None else decode_node(data, _key(parent))
        if isinstance(meta, GroupMeta) and meta.consolidated_metadata is not None:
            return parent
    return None


# ---------------------------------------------------------------------------------- compare-and-swaps
# No writer holds a lock through an update, so a writer meeting another's uncommitted marker cannot tell a
# writer at work from a killed one (but for one of its own machine: the marker names its process). Each
# step is a compare-and-swap, with two more rules:
#
# * the commit is a conditional write of the primary at the version read *before* the members were
#   prepared, so any change of the primary after a marker was written makes that marker's update
#   impossible to commit; a writer that must write over another's uncommitted marker first changes the
#   primary (an *abort*: a fresh id in its record field), then the member. Every write of the primary by
#   these steps leaves a fresh id in it, so its bytes never come back to what an aborted writer read (an
#   ETag is a hash of the bytes);
# * a marker younger than LEASE seconds is waited for (its writer is most likely at work) before it is
#   aborted, unless its writer was a process of this machine that no longer runs: time only decides how
#   long a writer waits, never what readers see.

LEASE = 5.0
DONE = 8  # committed updates a primary names after their clean-up (see update)


def _versioned(store: Store, path: str) -> tuple[NodeMeta | None, Any]:
    data, version = store.get_versioned(_key(path))
    return (None if data is None else decode_node(data, _key(path))), version


def _done(meta: NodeMeta | None, add: str | None = None) -> list[str]:
    """The ids of the last updates committed through the primary ``meta`` (``add``: one more)."""
    done = [i for i in (mark_of(meta) or {}).get("done") or () if isinstance(i, str)]
    return (done + ([add] if add else []))[-DONE:]


def _stamped(store: Store, meta: NodeMeta, add: str | None = None) -> bytes:
    """A primary's document without a record of an update under way: its content, a fresh id and the ids
    of the last updates committed (``add``: the one just cleaned up)."""
    if not store.capabilities.hashed_versions:  # (every write makes a new version: no id needed)
        return encode_json(node_to_json(stripped(meta)))
    return _with(stripped(meta), {"id": uuid.uuid4().hex, "done": _done(meta, add)})


def _young(mark: Mapping[str, Any]) -> bool:
    """Whether the writer of ``mark`` is most likely at work: the marker is younger than LEASE, and was not
    written by a process of this machine that no longer runs (a killed one's is not waited for)."""
    at, by = mark.get("t"), mark.get("by")
    if isinstance(by, str) and by.count("-") == 1:
        pid, host = by.split("-")
        if host == this_host() and pid.isdigit() and not process_alive(int(pid)):
            return False
    return isinstance(at, int | float) and 0 <= time.time() - at < LEASE


def _differs(before: NodeMeta | None, after: NodeMeta | None) -> bool:
    if before is None or after is None:
        return before is not after
    return node_to_json(stripped(before)) != node_to_json(stripped(after))


def update(
    store: Store,
    primary: str,
    paths: Sequence[str],
    plan: Callable[[NodeMeta, dict[str, NodeMeta | None]], tuple[NodeMeta, dict[str, NodeMeta | None]]],
    create_only: frozenset[str] = frozenset(),
) -> tuple[dict[str, NodeMeta | None], dict[str, NodeMeta | None]]:
    """One update of the documents at ``paths`` (nodes below the group ``primary``), by compare-and-swaps
    (:meth:`Store.set_if`): ``plan(primary's content, {path: content now (None: no node)})`` gives the
    primary's new content and each path's (None: deleted; may run again, after a conflict). A document
    at a path of ``create_only`` must not exist (NodeExistsError from ``plan``'s caller's checks, or from
    here). Returns (contents before, contents after) of the round that committed. ConflictError when
    other writers kept changing the documents through ``tuning.conflict_retries`` rounds."""
    retries = tuning.current().conflict_retries
    settled: set[str] = set()  # ids of updates that can no longer commit (this call's, or aborted)
    mine: dict[str, tuple[dict[str, NodeMeta | None], dict[str, NodeMeta | None], list[str]]] = {}
    patience = time.monotonic() + LEASE
    attempt = 0
    while attempt < retries:
        if attempt:
            back_off(attempt)
        attempt += 1
        p_meta, p_version = _versioned(store, primary)
        if not isinstance(p_meta, GroupMeta):
            raise NodeNotFoundError(f"no group at {primary or '/'!r} in {store!r}")
        record = mark_of(p_meta)
        ours = [ident for ident in _done(p_meta) if ident in mine]
        if record is not None and "members" in record and record["id"] in mine:
            ours = [record["id"]]  # our commit landed, its answer lost (a retry refused): cleaned up here
            _clean_up(store, primary, ours[0], mine[ours[0]][2], mine[ours[0]][1])
        if ours:  # (else cleaned up by another writer, who names it in the primary's "done")
            was, now, _ = mine[ours[0]]
            return was, {path: now.get(path, was[path]) for path in paths}
        if record is not None and "members" in record:  # committed by a writer that did not clean up
            _finish(store, primary, p_meta, p_version)
            continue
        olds: dict[str, NodeMeta | None] = {}
        versions: dict[str, Any] = {}
        foreign: list[str] = []
        for path in paths:
            meta, versions[path] = _versioned(store, path)
            mark = mark_of(meta)
            if meta is not None and mark is not None and "before" in mark:  # uncommitted (no record above)
                if mark["id"] not in settled:
                    foreign.append(mark["id"])
                    if _young(mark) and time.monotonic() < patience:
                        break
                before = mark.get("before")
                meta = node_from_json(before, _key(path)) if isinstance(before, dict) else None
            olds[path] = None if meta is None else stripped(meta)
        else:
            if foreign:  # abort them: once the primary changes, they cannot commit
                if store.set_if(_key(primary), _stamped(store, p_meta), p_version):
                    settled.update(foreign)
                continue
            for path in create_only:
                if olds.get(path) is not None:
                    raise made_meanwhile(path)
            p_new, news = plan(stripped(p_meta), dict(olds))
            ident = uuid.uuid4().hex
            settled.add(ident)
            members = [path for path in paths if _differs(olds[path], news.get(path, olds[path]))]
            mine[ident] = (olds, news, members)
            commit_doc = _with(p_new, {"id": ident, "members": members, "done": _done(p_meta)})
            if all(
                store.set_if(_key(path), _marked(ident, primary, olds[path], news[path]), versions[path])
                for path in members
            ) and store.set_if(_key(primary), commit_doc, p_version):
                _clean_up(store, primary, ident, members, news)
                return olds, {path: news.get(path, olds[path]) for path in paths}
            continue
        attempt -= 1  # a young marker: its writer is most likely at work (not a conflict)
        time.sleep(0.05)
    raise ConflictError(
        f"{_key(primary)!r} and its members were changed by other writers during each of {retries} "
        "attempts to update them; try again"
    )


def _clean_up(
    store: Store, primary: str, ident: str, members: Sequence[str], news: Mapping[str, NodeMeta | None]
) -> None:
    """After the commit: each member's marker dropped (a deleted node's keys removed), then the record."""
    for path in members:
        _unmark(store, path, ident, gone=news.get(path) is None)

    def unrecorded(data: bytes | None) -> bytes | None:
        meta = None if data is None else decode_node(data, _key(primary))
        record = mark_of(meta) or {}
        if meta is None or record.get("id") != ident or "members" not in record:
            return data
        return _stamped(store, meta, add=ident)

    store.swap(_key(primary), unrecorded)


def _unmark(store: Store, path: str, ident: str, gone: bool) -> None:
    """A member's marker of the committed update ``ident`` dropped; a committed deletion (``gone``): the
    node's other keys removed, then its document if it still holds the marker."""
    if gone:
        store.delete_many([k for k in store.list_prefix(f"{path}/" if path else "") if k != _key(path)])

    def make(data: bytes | None) -> bytes | None:
        meta = None if data is None else decode_node(data, _key(path))
        if meta is None or (mark_of(meta) or {}).get("id") != ident:
            return data  # (written over since, or cleaned by another writer)
        return None if gone else encode_json(node_to_json(stripped(meta)))

    store.swap(_key(path), make)


def finish(store: Store, path: str) -> None:
    """The clean-up of a committed update whose record the group at ``path`` holds, if it holds one."""
    meta, version = _versioned(store, path)
    if meta is not None and "members" in (mark_of(meta) or {}):
        _finish(store, path, meta, version)


def restamped(store: Store, old: NodeMeta | None, new: NodeMeta) -> NodeMeta:
    """``new``, written over a primary's document ``old`` by a plain compare-and-swap (its attributes, its
    consolidation): where ``old`` held an id (see above), a fresh one, so its bytes never repeat (none
    where versions are not hashes of the bytes)."""
    if mark_of(old) is None:
        return new
    if not store.capabilities.hashed_versions:
        return stripped(new)
    mark = {"must_understand": False, "id": uuid.uuid4().hex, "done": _done(old)}
    return msgspec.structs.replace(new, extra_fields={**stripped(new).extra_fields, MARK: mark})


def _finish(store: Store, primary: str, meta: NodeMeta, version: Any) -> None:
    """The clean-up of a committed update whose writer stopped before it (another writer's turn)."""
    record = mark_of(meta)
    assert record is not None
    ident = record["id"]
    for path in record.get("members") or ():
        if not isinstance(path, str):
            continue
        data = store.get(_key(path))
        mark = mark_of(None if data is None else decode_node(data, _key(path)))
        if mark is not None and mark.get("id") == ident:
            _unmark(store, path, ident, gone=bool(mark.get("gone")))
    store.set_if(_key(primary), _stamped(store, meta, add=ident), version)


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
    try:
        return None if data is None else json.loads(data)
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


def publish_docs(
    store: Store,
    record_key: str,
    record_doc: dict[str, Any],
    members: Mapping[str, tuple[dict[str, Any], dict[str, Any]]],
) -> None:
    """Write the v2 documents ``members`` (key -> (before, after)) and ``record_doc`` at ``record_key`` as
    one update, under the caller's locks."""
    ident = uuid.uuid4().hex
    for key, (before, after) in members.items():
        mark = {"must_understand": False, "id": ident, "record": record_key, "before": before}
        store.set(key, encode_json({**after, MARK: mark}))
    record = {"must_understand": False, "id": ident, "members": list(members)}
    store.set(record_key, encode_json({**record_doc, MARK: record}))
    for key, (_, after) in members.items():
        store.set(key, encode_json(after))
    store.set(record_key, encode_json(record_doc))
