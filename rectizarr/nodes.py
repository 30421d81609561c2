"""Node paths and node metadata I/O shared by arrays and groups.

* Node names are validated as the spec says (non-empty, no ``/``, not only periods, no ``__`` prefix,
  not ``zarr.json``).
* Creating a node writes explicit ancestor group documents where none exist (never overwriting).
* Every metadata write or node deletion made through rectizarr refreshes the consolidated metadata held
  by any ancestor group, so our own writes never leave a stale listing behind.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Self

from rectizarr import commit, tuning
from rectizarr.core import v2meta
from rectizarr.core.metadata import (
    ArrayMeta,
    GroupMeta,
    NodeMeta,
    check_attributes,
    decode_node,
    encode_json,
    node_to_json,
)
from rectizarr.core.metadata import node_from_json as _v3_node_from_json
from rectizarr.errors import (
    ConflictError,
    LenientMetadataWarning,
    MetadataError,
    NodeExistsError,
    NodeNotFoundError,
    ReadOnlyError,
    RectizarrError,
    StoreError,
    UnsupportedError,
)
from rectizarr.io.pool import beside
from rectizarr.stores import Store, open_store, validate_key, written
from rectizarr.stores.base import back_off, inferred_landings

META = "zarr.json"
_MODES = ("r", "r+", "a", "w", "w-")


def store_for(store: Any, mode: str, storage_options: Mapping[str, Any] | None) -> Store:
    """The store a node function was given (path, URL, fsspec object or store; None: a new
    :class:`~rectizarr.MemoryStore`) opened for ``mode``."""
    if mode not in _MODES:
        raise MetadataError(f"mode must be one of {_MODES}, got {mode!r}")
    if store is None:  # zarr-python's default: a new in-memory store
        from rectizarr.stores import MemoryStore

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
    if not _is_text(name):
        raise MetadataError(f"node name {name!r} is not valid Unicode text (a lone surrogate)")
    return name


def _is_text(name: str) -> bool:
    """Whether ``name`` encodes to UTF-8 (no lone surrogate): a store key, a file name, a lock's name."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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


def read_meta(store: Store, path: str, zarr_format: int | None = None) -> NodeMeta:
    """The node at ``path``: its ``zarr.json``, else its Zarr v2 documents (``zarr_format`` forces one)."""
    meta = try_read_meta(store, path, zarr_format)
    if meta is None:
        names = {2: "'.zarray' or '.zgroup'", 3: repr(meta_key(path))}.get(
            zarr_format or 0, f"{meta_key(path)!r}, '.zarray' or '.zgroup'"
        )
        raise NodeNotFoundError(
            f"no Zarr node at {path or '/'!r} in {store!r}: it does not exist (no {names} in the store)"
        )
    return meta


def try_read_meta(store: Store, path: str, zarr_format: int | None = None) -> NodeMeta | None:
    """Like :func:`read_meta`, None when there is no node."""
    if zarr_format not in (None, 2, 3):
        raise MetadataError(f"zarr_format must be 2, 3 or None, got {zarr_format!r}")
    if zarr_format != 2:
        before = store.version(meta_key(path)) if store.capabilities.cheap_versions else None
        data = store.get(meta_key(path))
        if data is not None or zarr_format == 3:
            meta = None if data is None else decoded(store, path, data)
            _remember(store, meta_key(path), meta, before)
            return meta
    return read_v2_meta(store, path)


_versions = threading.local()  # per thread: doc key -> (the meta read, the version taken before reading it)


def _remember(store: Store, key: str, meta: NodeMeta | None, version: Any) -> None:
    if meta is None or version is None:
        return
    seen: dict[str, tuple[NodeMeta, Any]] = _versions.__dict__.setdefault("seen", {})
    seen[store.lock_identity + key] = (meta, version)
    if len(seen) > 64:
        del seen[next(iter(seen))]


def version_before_read(store: Store, key: str, meta: NodeMeta) -> Any:
    """The version of the document at ``key`` taken just before ``meta`` was read from it by this thread
    (where versions are cheap), or None: a handle made from ``meta`` checks writes against it, and one taken
    later may be of a newer document."""
    seen: dict[str, tuple[NodeMeta, Any]] = _versions.__dict__.setdefault("seen", {})
    entry = seen.get(store.lock_identity + key)
    if entry is None or entry[0] is not meta:
        return None
    del seen[store.lock_identity + key]
    return entry[1]


def decoded(store: Store, path: str, data: bytes) -> NodeMeta | None:
    """A node's ``zarr.json`` as readers see it: a marker of an update in progress (or of one a killed
    writer left) decided by its commit record (:mod:`rectizarr.commit`; None: the node is not there)."""
    meta = decode_node(data, meta_key(path))
    return commit.resolve(store, path, meta) if commit.MARK in meta.extra_fields else meta


def read_v2_meta(store: Store, path: str) -> NodeMeta | None:
    """The Zarr v2 node at ``path`` (``.zarray`` or ``.zgroup``, ``.zattrs``, a group's ``.zmetadata``)."""
    p = prefix_of(path)
    keys = [p + name for name in (*v2meta.V2_KEYS, v2meta.V2_CONSOLIDATED)]
    before = store.version(keys[0]) if store.capabilities.cheap_versions else None
    values = store.get_many([(k, None) for k in keys])
    if values[0] is not None and commit.MARK.encode() in values[0]:  # an update of several documents
        doc = commit.resolve_doc(store, keys[0], v2meta.load_json(values[0], keys[0]))
        values[0] = None if doc is None else encode_json(doc)
    meta = _v2_from(values, keys)
    if isinstance(meta, ArrayMeta):
        _remember(store, keys[0], meta, before)
    return meta


def _v2_from(values: list[bytes | None], keys: list[str]) -> NodeMeta | None:
    zarray, zgroup, zattrs, zmeta = (
        v2meta.load_json(data, key) for data, key in zip(values, keys, strict=True)
    )
    if zarray is not None:
        return v2meta.decode_v2_array(zarray, zattrs, keys[0])
    if zgroup is not None:
        return v2meta.decode_v2_group(zgroup, zattrs, zmeta, keys[1])
    return None


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


def read_children(store: Store, path: str, names: list[str]) -> dict[str, NodeMeta]:
    """The nodes among the children ``names`` of ``path`` (listing order kept; non-nodes left out)."""
    p = prefix_of(path)
    names = [n for n in names if _listable(p, n)]
    cheap = store.capabilities.cheap_versions
    before = [store.version(p + n + "/" + META) for n in names] if cheap else [None] * len(names)
    docs = store.get_many([(p + n + "/" + META, None) for n in names])
    found = {n: decoded(store, join(path, n), d) for n, d in zip(names, docs, strict=True) if d is not None}
    for n, version in zip(names, before, strict=True):
        if isinstance(found.get(n), ArrayMeta):
            _remember(store, p + n + "/" + META, found[n], version)
    out: dict[str, NodeMeta] = {n: meta for n, meta in found.items() if meta is not None}
    for n in names:
        if n not in found and not n.startswith("."):
            meta = read_v2_meta(store, join(path, n))
            if meta is not None:
                out[n] = meta
    return out


def node_exists(store: Store, path: str) -> bool:
    """Whether a node (v3 or v2) is stored at ``path``."""
    p = prefix_of(path)
    keys = (meta_key(path), p + v2meta.V2_ARRAY, p + v2meta.V2_GROUP)
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
    if meta.zarr_format == 2:
        return prefix_of(path) + (v2meta.V2_ARRAY if isinstance(meta, ArrayMeta) else v2meta.V2_GROUP)
    return meta_key(path)


def node_from_json(obj: Mapping[str, Any], key: str | None = None) -> NodeMeta:
    """A node from a consolidated entry: a ``zarr.json`` object, or a combined Zarr v2 document."""
    if isinstance(obj, Mapping) and obj.get("zarr_format") == 2:
        return v2meta.v2_node_from_json(obj, key)
    return _v3_node_from_json(obj, key)


def node_doc(meta: NodeMeta) -> dict[str, Any]:
    """The JSON object of a node as consolidated metadata holds it (v3, or combined v2)."""
    return v2meta.v2_combined(meta) if meta.zarr_format == 2 else node_to_json(meta)


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

    def set(self, path: str, data: bytes) -> None:
        self.store.set(meta_key(path), data)
        self._docs[path] = data

    def forget(self, path: str, written: bytes | None = None) -> None:
        """``path``'s document is what was ``written`` there, or (None: made by someone else meanwhile) is
        read again when next asked."""
        if written is None:
            self._docs.pop(path, None)
        else:
            self._docs[path] = written


def check_format(zarr_format: Any) -> Any:
    """``zarr_format`` if it is 2 or 3 (for creation)."""
    if zarr_format not in (2, 3) or isinstance(zarr_format, bool):
        raise MetadataError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
    return zarr_format


def create_new(store: Store, path: str, meta: NodeMeta, docs: AncestorDocs) -> None:
    """:func:`create_node` where no node is (NodeExistsError where one is: a v3 or v2 one, whatever the new
    node's format). Where a listing costs a round trip and the store writes create-only (object stores),
    the listing that looks for another node's documents runs beside the creation, whose create-only write
    refuses a document of its own name: one round trip before the node is there, not two (a new array at
    20 ms per request: 20 ms sooner); see :class:`_Beside` for what follows from the listing. Elsewhere
    the node is looked for first."""
    caps = store.capabilities
    swapped = (
        caps.conditional_writes and meta.zarr_format == 3 and primary_swapped(store, path, docs) is not None
    )
    if not (caps.conditional_reads and caps.conditional_writes) or swapped:
        if node_exists(store, path):
            raise NodeExistsError(_exists(path))
        if not swapped and store.exists(
            meta_key(path)
        ):  # a killed writer's uncommitted new node (under the caller's locks)
            store.delete(meta_key(path))
        create_node(store, path, meta, docs, exclusive=True)
        return
    check = _Beside(store, path, meta)
    try:
        create_node(store, path, meta, docs, exclusive=True, check=check)
    except NodeExistsError:  # (refused create-only: there before, or made meanwhile, it is all one here)
        raise NodeExistsError(_exists(path)) from None
    except (
        RectizarrError
    ) as exc:  # an ancestor refused (a v2 group, an array): the node itself first, as elsewhere
        if not check.written and check.node_there():
            raise NodeExistsError(_exists(path)) from exc
        raise
    finally:  # no request of this call left running (concurrent.futures: imported by the pool running it)
        from concurrent.futures import wait

        wait([check.listing])


def _exists(path: str) -> str:
    return f"a node already exists at {path or '/'!r} (pass overwrite=True to replace it)"


class _Beside:
    """The listing made beside a node's create-only write (:func:`create_new`), and what it decides once
    the write is answered (:func:`_create_only` calls it):

    * it shows nothing but the new document: the node is made;
    * it shows more (a listing of three keys, a directory marker left out, is complete only when at most one
      is left): the documents of another node (of the other kind or format) are asked for; if one is
      there, the new document is deleted again and NodeExistsError raised;
    * the write was only taken as done because the key held its bytes after a retry
      (:func:`~rectizarr.stores.base.inferred_landings`: another writer's identical document, for all this
      writer knows) and the listing showed anything at all: it is left as it is, NodeExistsError;
    * the write failed (no answer came): if another node is there and the key holds the new document's
      bytes, they are deleted again and NodeExistsError raised, else the write's error.
    A listing that fails has the new document deleted again and its error raised."""

    def __init__(self, store: Store, path: str, meta: NodeMeta) -> None:
        self.store, self.path, self.own = store, path, doc_key(path, meta)
        self.listing = beside(lambda: store.keys_under(prefix_of(path), 3))
        self.written = self.taken_back = False

    def _take_back(self) -> None:
        _delete_made(self.store, self.own)
        self.taken_back = True

    def _more_listed(self) -> bool:
        listed = self.listing.result()
        return not (len(listed) <= 1 and set(listed) <= {self.own})

    def _other_node(self) -> bool:
        p = prefix_of(self.path)
        keys = [k for k in (meta_key(self.path), p + v2meta.V2_ARRAY, p + v2meta.V2_GROUP) if k != self.own]
        return any(v is not None for v in self.store.get_many([(k, None) for k in keys]))

    def node_there(self) -> bool:
        """Before any write of the node's own: whether a node (v3 or v2) is there."""
        try:
            listed = self.listing.result()
            return bool(listed) and (
                self.own in listed or self._other_node() or self.store.get(self.own) is not None
            )
        except RectizarrError:
            return False

    def after_write(self, ours: bool) -> None:
        """The create-only write of the node's document was answered: raise NodeExistsError if another node
        is there (``ours``: the write made the document, not only found its bytes there; else it is this
        writer's only if the listing saw nothing at all, its own document not yet landed)."""
        self.written = True
        try:
            listed = self.listing.result()
            more = self._more_listed()
            other = more and self._other_node()
        except BaseException:  # the listing (or a look-up) failed: nothing is known, the document goes again
            if ours:
                self._take_back()
            raise
        if other:  # a node of another kind or format: the document here can only hide it
            self._take_back()
            raise NodeExistsError(_exists(self.path))
        if not ours and listed:  # maybe another writer's very same document, maybe with data below: as it is
            raise NodeExistsError(_exists(self.path))

    def after_failed_write(self, key: str, value: bytes, exc: Exception) -> None:
        """The create-only write of ``key`` failed with ``exc`` (it may have landed all the same)."""
        try:
            there = self._more_listed() and self._other_node()
        except RectizarrError:
            return
        if there:
            stored = self.store.get(key)
            if stored is not None and bytes(stored) == value:
                self._take_back()
            raise NodeExistsError(_exists(self.path)) from exc


def _delete_made(store: Store, key: str) -> None:
    """Delete ``key``, a document this writer made and must take back; a failure says what is left."""
    try:
        store.delete(key)
    except RectizarrError as exc:
        raise StoreError(
            f"{key!r} was written, then found not to belong there (another node at its path, or "
            f"nothing known of it), and could not be deleted again ({exc}); delete it"
        ) from exc


def create_node(
    store: Store,
    path: str,
    meta: NodeMeta,
    docs: AncestorDocs | None = None,
    exclusive: bool = False,
    check: _Beside | None = None,
) -> None:
    """Write a group (of the node's format) for each missing ancestor, then the new node's documents,
    keeping ancestors' consolidated metadata current. Ancestors first: a process killed in between leaves
    empty groups, never a node no reader can reach; if the node's document fails (a key the store refuses:
    a name too long for the file system) the groups made for it are removed again, but not when a node is
    there (NodeExistsError: the node another writer made may sit under them), nor on object stores once the
    document was sent (with its answer lost, it may have landed). ``exclusive``: that
    document is written only where none is (create-only on object stores, under the lock elsewhere), else
    NodeExistsError: of writers creating one node at once, in any process or client, one succeeds.
    ``check``: what follows the document's write on object stores (:class:`_Beside`)."""
    docs = docs or AncestorDocs(store)
    missing = _missing_parents(store, path, meta.zarr_format, docs)
    primary = None if meta.zarr_format == 2 else commit.primary_of(store, path, docs.get)
    if (
        primary is not None
        and all(len(p) > len(primary) for p in missing)
        and store.capabilities.conditional_writes
    ):
        # the groups it needs and the node, in the consolidated copies too: one update (all or nothing)
        changes: dict[str, Callable[[NodeMeta | None], NodeMeta | None]] = {p: _group_there for p in missing}
        changes[path] = lambda _: commit.stripped(meta)
        publish_swapped(store, primary, changes, frozenset({path}) if exclusive else frozenset())
        return
    if primary is not None and all(len(p) > len(primary) for p in missing):
        new: dict[str, tuple[NodeMeta | None, NodeMeta | None]] = {p: (None, GroupMeta()) for p in missing}
        new[path] = (None, commit.stripped(meta))
        publish(store, primary, new, docs, exclusive=exclusive)
        return
    made: list[str] = []
    started = False
    try:
        _write_groups(store, missing, meta.zarr_format, docs, made)
        started = True
        write_meta(store, path, meta, docs, exclusive, check)
    except NodeExistsError:  # a node is there, made by another writer, maybe under the groups made here
        raise
    except BaseException:
        if started and store.capabilities.conditional_writes and not (check is not None and check.taken_back):
            raise  # (an answer lost: the node may stand, and so do the groups above it)
        for parent in reversed(
            made
        ):  # only their documents (what another writer put below stays; best effort)
            names = (v2meta.V2_GROUP, v2meta.V2_ATTRS) if meta.zarr_format == 2 else (META,)
            try:
                store.delete_many([prefix_of(parent) + n for n in names])
            except Exception:  # pragma: no cover - a store failing twice: the node's own error is raised
                break
        raise


def _group_there(old: NodeMeta | None) -> NodeMeta:
    """A group an update needs at a path: the one there (another writer's, kept), else a new one."""
    if old is None:
        return GroupMeta()
    if not isinstance(old, GroupMeta):
        raise StoreError(
            "cannot create a node below an array: another writer made an array where a group goes"
        )
    return old


def create_parents(store: Store, path: str, zarr_format: int = 3) -> None:
    """Write a group for each missing ancestor of ``path`` (not the node itself)."""
    docs = AncestorDocs(store)
    _write_groups(store, _missing_parents(store, path, zarr_format, docs), zarr_format, docs)


def _missing_parents(store: Store, path: str, zarr_format: int, docs: AncestorDocs) -> list[str]:
    """The ancestors of ``path`` that hold no node, from the root down; StoreError if one is an array."""
    missing = []
    for parent in parent_paths(path):
        if zarr_format == 2:
            found = read_v2_meta(store, parent)
            # a new .zgroup beside a Zarr v3 node's zarr.json (one GET, only where a parent is missing)
            if found is None and docs.get(parent) is not None:
                raise UnsupportedError(
                    f"cannot create the Zarr v2 node {path!r}: its ancestor {parent or '/'!r} "
                    "is a Zarr v3 node (create it with zarr_format=3)"
                )
        else:
            existing = docs.get(parent)
            found = None if existing is None else decode_node(existing, meta_key(parent))
            # a new zarr.json would hide a Zarr v2 node there (one round trip, only where a parent is missing)
            v2 = (
                []
                if found is not None
                else store.get_many(
                    [(prefix_of(parent) + name, None) for name in (v2meta.V2_GROUP, v2meta.V2_ARRAY)]
                )
            )
            if v2 and v2[1] is not None:
                raise StoreError(
                    f"cannot create {path!r}: ancestor {parent or '/'!r} is a Zarr v2 array, not a group"
                )
            if v2 and v2[0] is not None:
                raise UnsupportedError(
                    f"cannot create the Zarr v3 node {path!r}: its ancestor {parent or '/'!r} "
                    "is a Zarr v2 node (create it with zarr_format=2, or migrate the v2 data)"
                )
        if found is None:
            missing.append(parent)
        elif found.__class__ is not GroupMeta:
            raise StoreError(f"cannot create {path!r}: ancestor {parent or '/'!r} is an array, not a group")
    return missing


def _write_groups(
    store: Store, paths: list[str], zarr_format: int, docs: AncestorDocs, made: list[str] | None = None
) -> None:
    """Write an empty group at each of ``paths`` (from the root down), create-only: where another writer
    made a node meanwhile, it is kept (another group's attributes are not overwritten); an array there is a
    StoreError. ``made`` receives the paths where this call made the group, as it goes."""
    made = [] if made is None else made
    for parent in paths:
        try:
            if zarr_format == 2:
                write_meta(store, parent, GroupMeta(zarr_format=2), exclusive=True)
            else:
                write_meta(store, parent, GroupMeta(), docs, exclusive=True)
                docs.forget(parent, encode_json(node_to_json(GroupMeta())))
        except NodeExistsError:
            docs.forget(parent)
            if not isinstance(try_read_meta(store, parent, zarr_format), GroupMeta):
                raise StoreError(
                    f"cannot create below {parent or '/'!r}: another writer made an array there"
                ) from None
            continue
        except BaseException:  # after the group's document, maybe: it goes with the others made
            made.append(parent)
            raise
        made.append(parent)


def consolidate_v2(store: Store, path: str) -> GroupMeta:
    """Write the v2 group at ``path``'s ``.zmetadata`` (every ``.zarray``/``.zgroup``/``.zattrs`` at or
    below it, as zarr-python 2 does) and return the group as read back."""
    prefix = prefix_of(path)

    def listed(_: bytes | None = None) -> bytes:
        keys = sorted(k for k in store.list_prefix(prefix) if k.rpartition("/")[2] in v2meta.V2_KEYS)
        values = store.get_many([(k, None) for k in keys])
        entries = {
            k[len(prefix) :]: v2meta.load_json(v, k)
            for k, v in zip(keys, values, strict=True)
            if v is not None
        }
        return encode_json({"metadata": entries, "zarr_consolidated_format": 1})

    if store.capabilities.conditional_writes:  # a compare-and-swap: a change another client makes meanwhile
        store.swap(prefix + v2meta.V2_CONSOLIDATED, listed)  # (its own .zmetadata update) lists again
    else:  # under the caller's locks
        store.set(prefix + v2meta.V2_CONSOLIDATED, listed())
    meta = read_v2_meta(store, path)
    if not isinstance(meta, GroupMeta):
        raise NodeNotFoundError(f"the node at {path or '/'!r} is not a v2 group; only groups consolidate")
    return meta


def locked(store: Store, path: str) -> AbstractContextManager[None]:
    """The locks of a node's ``zarr.json`` and its ancestors' (whose consolidated metadata a change of the
    node rewrites), taken at once: hold them around any read-modify-write of node documents."""
    return store.lock([meta_key(p) for p in (path, *parent_paths(path))])


def write_meta(
    store: Store,
    path: str,
    meta: NodeMeta,
    docs: AncestorDocs | None = None,
    exclusive: bool = False,
    check: _Beside | None = None,
    before: Any = ...,
) -> None:
    """Write a node's ``zarr.json`` (v2: ``.zarray``/``.zgroup`` and ``.zattrs``) and keep ancestors'
    consolidated metadata current (``exclusive``: see :func:`create_node`; ``check``: see
    :func:`_create_only`)."""
    if meta.zarr_format == 2:
        p = prefix_of(path)
        items = {p + name: encode_json(doc) for name, doc in v2meta.v2_docs(meta).items()}
        if exclusive:  # the .zarray / .zgroup first
            first = next(iter(items))
            _create_only(store, first, items.pop(first), path, check)
        store.set_many(items)
        _refresh_v2_consolidated(store, path, meta)
        return
    meta = commit.stripped(meta)
    primary = primary_swapped(store, path, docs)
    if primary is not None:  # the node and the consolidated copies above it: one update
        publish_swapped(
            store, primary, {path: lambda _: meta}, frozenset({path}) if exclusive else frozenset()
        )
        return
    if not store.capabilities.conditional_writes:
        docs = docs or AncestorDocs(store)
        primary = commit.primary_of(store, path, docs.get)
        if primary is not None:  # the node and the consolidated copies above it: one update
            if before is ...:
                before = None if exclusive else try_read_meta(store, path, 3)
            publish(store, primary, {path: (before, meta)}, docs, exclusive=exclusive)
            return
    doc = node_to_json(meta)
    if exclusive:
        _create_only(store, meta_key(path), encode_json(doc), path, check)
    else:
        store.set(meta_key(path), encode_json(doc))
    _refresh_consolidated(store, path, doc, docs)


def publish(
    store: Store,
    primary: str,
    changes: Mapping[str, tuple[NodeMeta | None, NodeMeta | None]],
    docs: AncestorDocs | None = None,
    exclusive: bool = False,
    primary_meta: NodeMeta | None = None,
) -> None:
    """Write the v3 documents ``changes`` (path -> (before, after; None: deleted)) of nodes below the group
    ``primary`` as one update (:mod:`rectizarr.commit`), with the consolidated metadata of ``primary`` and
    of every group between brought up to date; under the caller's locks of all of them (stores without
    conditional writes). ``primary_meta``: the primary's own new content (attributes), else as stored.
    ``exclusive``: the changed nodes are new (create-only)."""
    docs = docs or AncestorDocs(store)
    data = docs.get(primary)
    raw = None if data is None else decode_node(data, meta_key(primary))
    if not isinstance(raw, GroupMeta):
        raise NodeNotFoundError(f"no group at {primary or '/'!r} in {store!r}")
    stored = commit.finish(store, primary, raw)  # an update a killed writer committed: finished first
    groups: dict[str, NodeMeta] = {primary: primary_meta or stored}
    members = dict(changes)
    for path, (_, after) in changes.items():
        for parent in parent_paths(path):
            if len(parent) < len(primary) or (primary and not (parent + "/").startswith(primary + "/")):
                continue  # (above the primary)
            if parent not in groups:
                if parent in members:
                    groups[parent] = members[parent][1] or GroupMeta()
                else:
                    data = docs.get(parent)
                    found = None if data is None else decoded(store, parent, data)
                    if found is None:
                        continue
                    groups[parent] = found
            rel = path[len(parent) + 1 :] if parent else path
            current = groups[parent]
            updated = _with_entry_meta(current, rel, None if after is None else node_to_json(after))
            if updated is None:
                continue
            groups[parent] = updated
            if parent != primary:
                members[parent] = (members[parent][0] if parent in members else current, updated)
    final = commit.publish(
        store, primary, groups[primary], members, frozenset(changes) if exclusive else frozenset()
    )
    for path in (primary, *members):
        docs.forget(path, final.get(path))


def primary_swapped(store: Store, path: str, docs: AncestorDocs | None = None) -> str | None:
    """On a store with conditional writes, the group whose document commits a change of the v3 node at
    ``path`` (:func:`commit.update_swapped`): its topmost consolidating ancestor; None where there is none
    (a plain compare-and-swap of the node's own document)."""
    if not path or not store.capabilities.conditional_writes:
        return None
    return commit.primary_of(store, path, (docs or AncestorDocs(store)).get)


def publish_swapped(
    store: Store,
    primary: str,
    changes: Mapping[str, Callable[[NodeMeta | None], NodeMeta | None]],
    create_only: frozenset[str] = frozenset(),
) -> tuple[dict[str, NodeMeta | None], dict[str, NodeMeta | None]]:
    """:func:`publish` on a store with conditional writes: each ``changes[path]`` maps the node's content
    as stored (None: none) to its new one (None: deleted; it may run again after a conflict); the
    consolidated metadata of ``primary`` and of every group between brought up to date, all as one update
    (:func:`commit.update_swapped`). Returns the contents before and after, by path."""
    paths: list[str] = []
    for path in changes:
        for parent in (*parent_paths(path), path):
            if (
                len(parent) > len(primary)
                and (not primary or parent.startswith(primary + "/"))
                and parent not in paths
            ):
                paths.append(parent)

    def plan(
        p_meta: NodeMeta, olds: dict[str, NodeMeta | None]
    ) -> tuple[NodeMeta, dict[str, NodeMeta | None]]:
        news = {path: change(olds[path]) for path, change in changes.items()}
        groups: dict[str, NodeMeta | None] = {primary: p_meta}
        for path, after in list(news.items()):
            for parent in parent_paths(path):
                if parent not in groups and parent not in paths:
                    continue  # (above the primary)
                if parent not in groups:
                    groups[parent] = news[parent] if parent in news else olds.get(parent)
                current = groups[parent]
                if current is None:
                    continue
                rel = path[len(parent) + 1 :] if parent else path
                updated = _with_entry_meta(current, rel, None if after is None else node_to_json(after))
                if updated is None:
                    continue
                groups[parent] = updated
                if parent != primary:
                    news[parent] = updated
        return groups[primary], news  # type: ignore[return-value]

    return commit.update_swapped(store, primary, paths, plan, create_only)


class _Marked(Exception):
    """A document met by a plain compare-and-swap holds a marker or record of an update of several
    documents (:mod:`rectizarr.commit`): the change goes through that update's primary instead."""

    def __init__(self, primary: str | None) -> None:
        self.primary = primary


def _create_only(store: Store, key: str, value: bytes, path: str, check: _Beside | None = None) -> None:
    """Write ``key`` where it is not (NodeExistsError where it is); with ``check``, what the listing beside
    the write decides follows before anything else is written (:class:`_Beside`)."""
    before = inferred_landings()
    try:
        created = store.set_if(key, value, None)
    except Exception as exc:
        if check is not None:
            check.after_failed_write(key, value, exc)
        raise
    if not created:
        raise NodeExistsError(
            f"a node already exists at {path or '/'!r}: another writer created it meanwhile "
            "(pass overwrite=True to replace it)"
        )
    if check is None:
        return
    check.after_write(ours=inferred_landings() == before)


def _refresh_v2_consolidated(store: Store, path: str, meta: NodeMeta | None) -> None:
    """Update (or drop, ``meta`` None) ``path``'s entries in every ``.zmetadata`` at it or above it."""
    for group in (*parent_paths(path), path):
        key = prefix_of(group) + v2meta.V2_CONSOLIDATED
        rel = path[len(group) :].strip("/")

        def make(data: bytes | None, key: str = key, rel: str = rel) -> bytes | None:
            current = v2meta.load_json(data, key)
            if not isinstance(current, dict) or not isinstance(current.get("metadata"), dict):
                return data  # no consolidated metadata here: left as it is
            now = meta
            if meta is not None and store.capabilities.conditional_writes:
                # the node's documents as stored now (read after .zmetadata, at each try), not this writer's:
                # another client's later change of them may have reached .zmetadata first
                now = read_v2_meta(store, path) or meta
            return encode_json(v2meta.with_entries(current, rel, now))

        if store.capabilities.conditional_writes:
            store.swap(key, make)  # a compare-and-swap: concurrent updates of .zmetadata all land
        else:  # under the caller's locks
            stored = store.get(key)
            new = make(stored)
            if new is not stored and new is not None:
                store.set(key, new)


def update_meta(
    store: Store,
    path: str,
    change: Callable[[NodeMeta | None], NodeMeta],
    then: Callable[[NodeMeta | None, NodeMeta], None] | None = None,
    zarr_format: int = 3,
    stage: Callable[[NodeMeta | None, NodeMeta], AbstractContextManager[None]] | None = None,
) -> NodeMeta:
    """A read-modify-write of a node's ``zarr.json``: ``change`` maps the document as stored now (None:
    missing) to the new one, which is written; then ``then(old, new)`` runs (chunk work). Under the
    document's locks where the store has no conditional writes (``then`` inside them, and the document
    written inside ``with stage(old, new)``: data readers cannot see until it is); else a conditional
    write, re-read and re-applied on conflict (``change`` may run again; ``then`` runs once, after it;
    ``stage`` is not used)."""
    key = meta_key(path)
    if store.capabilities.conditional_writes and zarr_format == 2:
        return _update_v2(store, path, change, then)
    if not store.capabilities.conditional_writes or zarr_format == 2:
        with locked(store, path):  # v2: two documents (.zarray, .zattrs), written under the lock
            old = read_for_write(store, path, zarr_format)
            new = change(old)
            with nullcontext() if stage is None else stage(old, new):
                write_meta(store, path, new, before=old)
            if then is not None:
                then(old, new)
            return new
    rounds: list[tuple[NodeMeta | None, NodeMeta]] = []

    def make(data: bytes | None) -> bytes:  # may run again on a conflict
        old = None if data is None else decode_node(data, key)
        mark = commit.mark_of(old)
        if mark is not None and ("before" in mark or "members" in mark):
            raise _Marked(mark.get("primary") if "before" in mark else None)
        rounds.append((old, commit.restamped(old, change(old))))
        return encode_json(node_to_json(rounds[-1][1]))

    docs = AncestorDocs(store)
    primary = primary_swapped(store, path, docs)
    for _ in range(tuning.current().conflict_retries):
        try:
            if primary is not None:  # the node and the consolidated copies above it: one update
                olds, news = publish_swapped(store, primary, {path: change})
                old, new = olds[path], news[path]  # type: ignore[assignment]
                break
            store.swap(key, make)
            old, new = rounds[-1]
            _refresh_consolidated(store, path, node_to_json(new), docs)
            break
        except _Marked as marked:
            if marked.primary is None:  # (this group's own record of a committed update: finished first)
                commit.finish_swapped(store, path)
            elif isinstance(marked.primary, str):
                primary = marked.primary
    else:
        raise ConflictError(
            f"{key!r}: changed by other writers during each of "
            f"{tuning.current().conflict_retries} attempts to update it; try again"
        )
    assert new is not None
    old, new = (None if old is None else commit.stripped(old)), commit.stripped(new)
    if then is not None:
        then(old, new)
    return new


def publish_v2(store: Store, group: str, changes: Mapping[str, tuple[NodeMeta, NodeMeta]]) -> None:
    """:func:`publish` for Zarr v2 arrays of the group at ``group`` (their ``.zarray``; the record in the
    group's ``.zmetadata`` when it consolidates, brought up to date, else its ``.zgroup``)."""
    p = prefix_of(group)
    zmeta_key, zgroup_key = p + v2meta.V2_CONSOLIDATED, p + v2meta.V2_GROUP
    consolidated = commit.finish_doc(store, zmeta_key)
    if not (isinstance(consolidated, dict) and isinstance(consolidated.get("metadata"), dict)):
        consolidated = None
    record_key = zgroup_key if consolidated is None else zmeta_key
    record = commit.finish_doc(store, zgroup_key) if consolidated is None else consolidated
    if not isinstance(record, dict):
        raise NodeNotFoundError(f"no Zarr v2 group at {group or '/'!r} in {store!r}")
    members = {}
    for path, (old, new) in changes.items():
        members[prefix_of(path) + v2meta.V2_ARRAY] = (
            v2meta.v2_docs(old)[v2meta.V2_ARRAY],
            v2meta.v2_docs(new)[v2meta.V2_ARRAY],
        )
        if consolidated is not None:
            record = v2meta.with_entries(record, path[len(p) :], new)
    commit.publish_docs(store, record_key, record, members)
    written.mark(store.lock_identity, [*members, record_key])


def read_for_write(store: Store, path: str, zarr_format: int | None = None) -> NodeMeta | None:
    """:func:`try_read_meta` for a writer holding the node's locks and its ancestors': a committed update
    a killed writer left half cleaned up at this group is finished first (:func:`commit.finish`)."""
    meta = try_read_meta(store, path, zarr_format)
    if isinstance(meta, GroupMeta) and not store.capabilities.conditional_writes:
        raw = commit.read_raw(store, path)
        if raw is not None and commit.MARK in raw.extra_fields and "members" in (commit.mark_of(raw) or {}):
            return commit.finish(store, path, raw)
    return meta


def _update_v2(
    store: Store,
    path: str,
    change: Callable[[NodeMeta | None], NodeMeta],
    then: Callable[[NodeMeta | None, NodeMeta], None] | None,
) -> NodeMeta:
    """:func:`update_meta` of a Zarr v2 node on a store with conditional writes: its documents read with
    their versions, and each document the change rewrites (``.zarray`` for a resize or an append,
    ``.zattrs`` for attributes) written only at the version read; on a conflict all is read and the change
    applied again, up to ``tuning.conflict_retries`` times, then :class:`ConflictError`. A change of both
    documents at once writes them one after the other (not atomically)."""
    p = prefix_of(path)
    keys = [p + name for name in (*v2meta.V2_KEYS, v2meta.V2_CONSOLIDATED)]
    retries = tuning.current().conflict_retries
    for attempt in range(retries):
        if attempt:
            back_off(attempt)
        read = store.get_many_versioned([(k, None) for k in keys])
        old = _v2_from([data for data, _ in read], keys)
        new = change(old)
        before = {} if old is None else v2meta.v2_docs(old)
        versions = {k: version for k, (_, version) in zip(keys, read, strict=True)}
        changed = {p + name: doc for name, doc in v2meta.v2_docs(new).items() if before.get(name) != doc}
        ok = all(store.set_if(k, encode_json(doc), versions[k]) for k, doc in changed.items())
        written.mark(store.lock_identity, changed)  # (a refused write marks too: a handle reads once more)
        if ok:
            _refresh_v2_consolidated(store, path, new)
            if then is not None:
                then(old, new)
            return new
    raise ConflictError(
        f"{prefix_of(path) or '/'!r}: the Zarr v2 documents were changed by other writers during "
        f"each of {retries} attempts to update them; try again"
    )


def delete_node(store: Store, path: str, docs: AncestorDocs | None = None) -> None:
    """Remove a node and its whole subtree; ancestors' consolidated metadata drop it too."""
    if path and store.capabilities.conditional_writes:
        primary = primary_swapped(store, path, docs)
        if primary is not None and try_read_meta(store, path, 3) is not None:
            publish_swapped(store, primary, {path: lambda _: None})  # (its keys removed at the clean-up)
            return
    if path and not store.capabilities.conditional_writes:
        docs = docs or AncestorDocs(store)
        primary = commit.primary_of(store, path, docs.get)
        before = try_read_meta(store, path, 3) if primary is not None else None
        if before is not None and primary is not None:  # the deletion and the consolidated copies: one update
            publish(store, primary, {path: (before, None)}, docs)
            store.delete_prefix(prefix_of(path))  # (a v2 node's documents, a prefix without a node)
            _refresh_v2_consolidated(store, path, None)
            return
    if path:
        store.delete_prefix(prefix_of(path))
    else:
        store.delete_prefix("")
    _refresh_consolidated(store, path, None, docs)
    if path:
        _refresh_v2_consolidated(store, path, None)


def _refresh_consolidated(
    store: Store, path: str, doc: dict[str, Any] | None, docs: AncestorDocs | None = None
) -> None:
    """Update (``doc``) or remove (``None``) ``path``'s entry in each consolidating ancestor group: under
    the ancestors' locks (:func:`locked`, held by the caller), or as conditional writes where the store
    has them (re-read and re-applied on conflict). There, the entry is the node's document as stored when
    the ancestor is rewritten (read after the ancestor), not ``doc``: of two clients changing the node at
    once, the one whose refresh lands last may hold the older document, and would put it back."""
    docs = docs or AncestorDocs(store)
    for parent in parent_paths(path):
        rel = path[len(parent) + 1 :] if parent else path
        if not store.capabilities.conditional_writes:
            data = docs.get(parent)
            new = None if data is None else _with_entry(decode_node(data, meta_key(parent)), rel, doc)
            if new is not None:
                docs.set(parent, new)
            continue
        key = meta_key(parent)
        seen = docs.get(parent)  # read once per operation: most ancestors don't consolidate
        if seen is None or _with_entry(decode_node(seen, key), rel, doc) is None:
            continue
        store.swap(
            key,
            lambda data, key=key, rel=rel: (
                data
                if data is None  # type: ignore[misc]
                else _with_entry(decode_node(data, key), rel, _stored_doc(store, path)) or data
            ),
        )


def _stored_doc(store: Store, path: str) -> dict[str, Any] | None:
    """The v3 document of the node at ``path`` as stored now (None: there is none)."""
    key = meta_key(path)
    data = store.get(key)
    return None if data is None else node_to_json(decode_node(data, key))


def _with_entry(meta: NodeMeta, rel: str, doc: dict[str, Any] | None) -> bytes | None:
    """The encoded group ``meta`` with its consolidated entry ``rel`` set to ``doc`` (None: removed, with
    its descendants); None when ``meta`` does not consolidate."""
    new = _with_entry_meta(meta, rel, doc)
    return None if new is None else encode_json(node_to_json(new))


def _with_entry_meta(meta: NodeMeta, rel: str, doc: dict[str, Any] | None) -> GroupMeta | None:
    """:func:`_with_entry`, not encoded."""
    if not isinstance(meta, GroupMeta) or meta.consolidated_metadata is None:
        return None
    entries = dict(meta.consolidated_metadata.get("metadata") or {})
    if doc is None:
        entries = {k: v for k, v in entries.items() if k != rel and not k.startswith(rel + "/")}
    else:
        entry = dict(doc)
        entry.pop(commit.MARK, None)
        if entry.get("node_type") == "group":
            entry.pop("consolidated_metadata", None)
            entry["consolidated_metadata"] = {"kind": "inline", "must_understand": False, "metadata": {}}
        entries[rel] = entry
    updated = dict(meta.consolidated_metadata)
    updated["metadata"] = entries
    return GroupMeta(
        attributes=meta.attributes, consolidated_metadata=updated, extra_fields=meta.extra_fields
    )


class Attributes(MutableMapping[str, Any]):
    """A node's attributes; every change is written through to its ``zarr.json``."""

    def __init__(self, owner: Any) -> None:
        self._owner = owner

    def _get(self) -> dict[str, Any]:
        return dict(self._owner.metadata.attributes)

    def __getitem__(self, key: str) -> Any:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def __delitem__(self, key: str) -> None:
        if key not in self._get():
            raise KeyError(key)
        self._owner._update_attributes(lambda attrs: {k: v for k, v in attrs.items() if k != key})

    def update(self, other: Any = (), /, **kwargs: Any) -> None:  # one metadata write for many keys
        """Set these keys, keeping the others as stored now (changes by other handles are merged)."""
        changes = check_attributes(dict(other, **kwargs))
        self._owner._update_attributes(lambda attrs: {**attrs, **changes})

    def put(self, attrs: Mapping[str, Any]) -> None:
        """Replace all attributes at once."""
        new = check_attributes(attrs)
        self._owner._update_attributes(lambda _: new)

    def asdict(self) -> dict[str, Any]:
        """A plain ``dict`` copy of the attributes."""
        return self._get()

    def __repr__(self) -> str:
        return f"Attributes({self._get()!r})"


class Node:
    """What arrays and groups share: where they live, read-only-ness and write-through attributes."""

    kind = "node"
    _store: Store
    _path: str
    _read_only: bool

    @property
    def store(self) -> Store:
        """The store holding the node."""
        return self._store

    @property
    def path(self) -> str:
        """The node path inside the store (``""`` for the root)."""
        return self._path

    @property
    def name(self) -> str:
        """The absolute node name (``/a/b``)."""
        return "/" + self._path

    @property
    def basename(self) -> str:
        """The last part of the node's name (``"b"`` for ``/a/b``; ``""`` for the root)."""
        return self._path.rpartition("/")[2]

    @property
    def read_only(self) -> bool:
        """True when the node was opened read-only or lives in a read-only store."""
        return self._read_only

    def update_attributes(self, new: Mapping[str, Any]) -> Self:
        """Merge ``new`` into the attributes (one read-modify-write) and return the node, as zarr-python's."""
        self.attrs.update(new)
        return self

    @property
    def attrs(self) -> Attributes:
        """The attributes; every change is written through to ``zarr.json``."""
        return Attributes(self)

    def _check_writable(self) -> None:
        if self._read_only:
            raise ReadOnlyError(f"{self.kind} {self.name!r} is read-only")
