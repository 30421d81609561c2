"""Creating nodes: explicit ancestor groups are written where none exist (never overwriting), then the
node's documents, with the consolidated metadata held by any ancestor kept current."""

from __future__ import annotations

from rectizarr import commit
from rectizarr.core.metadata import GroupMeta, NodeMeta
from rectizarr.errors import NodeExistsError, RectizarrError, StoreError
from rectizarr.nodes.base import Change, DocFormat
from rectizarr.nodes.beside import Beside
from rectizarr.nodes.formats import format_for, format_of, node_exists, try_read_meta
from rectizarr.nodes.paths import AncestorDocs, exists_message, meta_key, parent_paths
from rectizarr.nodes.records import publish
from rectizarr.stores import Store


def create_new(store: Store, path: str, meta: NodeMeta, docs: AncestorDocs) -> None:
    """:func:`create_node` where no node is (NodeExistsError where one is: a v3 or v2 one, whatever the new
    node's format). Where a listing costs a round trip and the store writes create-only (object stores),
    the listing that looks for another node's documents runs beside the creation, whose create-only write
    refuses a document of its own name: one round trip before the node is there, not two (a new array at
    20 ms per request: 20 ms sooner); see :class:`Beside` for what follows from the listing. Elsewhere
    the node is looked for first."""
    caps = store.capabilities
    recorded = format_of(meta).primary(store, path, docs) is not None
    if not (caps.conditional_reads and caps.conditional_writes) or recorded:
        if node_exists(store, path):
            raise NodeExistsError(exists_message(path))
        if not recorded and store.exists(meta_key(path)):  # a killed writer's uncommitted new node (under
            store.delete(meta_key(path))  # the caller's locks)
        create_node(store, path, meta, docs, exclusive=True)
        return
    check = Beside(store, path, meta)
    try:
        create_node(store, path, meta, docs, exclusive=True, check=check)
    except NodeExistsError:  # (refused create-only: there before, or made meanwhile, it is all one here)
        raise NodeExistsError(exists_message(path)) from None
    except RectizarrError as exc:  # an ancestor refused (a v2 group, an array): the node itself first
        if not check.tried and check.node_there():  # (a failed write of its own: its error)
            raise NodeExistsError(exists_message(path)) from exc
        raise
    finally:  # no request of this call left running (concurrent.futures: imported by the pool running it)
        from concurrent.futures import wait

        wait([check.listing])


def create_node(
    store: Store,
    path: str,
    meta: NodeMeta,
    docs: AncestorDocs | None = None,
    exclusive: bool = False,
    check: Beside | None = None,
) -> None:
    """Write a group (of the node's format) for each missing ancestor, then the new node's documents,
    keeping ancestors' consolidated metadata current. Ancestors first: a process killed in between leaves
    empty groups, never a node no reader can reach; if the node's document fails (a key the store refuses:
    a name too long for the file system) the groups made for it are removed again, but not when a node is
    there (NodeExistsError: the node another writer made may sit under them), nor on object stores once the
    document was sent (with its answer lost, it may have landed). ``exclusive``: that
    document is written only where none is (create-only on object stores, under the lock elsewhere), else
    NodeExistsError: of writers creating one node at once, in any process or client, one succeeds.
    ``check``: what follows the document's write on object stores (:class:`Beside`)."""
    docs = docs or AncestorDocs(store)
    fmt = format_of(meta)
    missing = missing_parents(store, path, fmt, docs)
    primary = fmt.primary(store, path, docs)
    if primary is not None and all(len(p) > len(primary) for p in missing):
        # the groups it needs and the node, in the consolidated copies too: one update (all or nothing)
        changes: dict[str, Change] = {p: _group_there for p in missing}
        changes[path] = lambda _: commit.stripped(meta)
        publish(store, primary, changes, frozenset({path}) if exclusive else frozenset())
        return
    made: list[str] = []
    started = False
    try:
        write_groups(store, missing, fmt, docs, made)
        started = True
        fmt.write(store, path, meta, docs, exclusive, check)
    except NodeExistsError:  # a node is there, made by another writer, maybe under the groups made here
        raise
    except BaseException:
        if started and store.capabilities.conditional_writes and not (check is not None and check.taken_back):
            raise  # (an answer lost: the node may stand, and so do the groups above it)
        for parent in reversed(made):  # only their documents (what another writer put below stays)
            try:
                store.delete_many(fmt.doc_keys(parent, GroupMeta()))
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
    docs, fmt = AncestorDocs(store), format_for(zarr_format)
    write_groups(store, missing_parents(store, path, fmt, docs), fmt, docs, [])


def missing_parents(store: Store, path: str, fmt: DocFormat, docs: AncestorDocs) -> list[str]:
    """The ancestors of ``path`` that hold no node, from the root down; StoreError if one is an array
    (:meth:`DocFormat.ancestor` refuses one a new group of ``fmt`` would hide)."""
    missing = []
    for parent in parent_paths(path):
        found = fmt.ancestor(store, parent, path, docs)
        if found is None:
            missing.append(parent)
        elif found.__class__ is not GroupMeta:
            raise StoreError(f"cannot create {path!r}: ancestor {parent or '/'!r} is an array, not a group")
    return missing


def write_groups(store: Store, paths: list[str], fmt: DocFormat, docs: AncestorDocs, made: list[str]) -> None:
    """Write an empty group at each of ``paths`` (from the root down), create-only: where another writer
    made a node meanwhile, it is kept (another group's attributes are not overwritten); an array there is a
    StoreError. ``made`` receives the paths where this call made the group, as it goes."""
    for parent in paths:
        try:
            fmt.write(store, parent, GroupMeta(zarr_format=fmt.zarr_format), docs, exclusive=True)
        except NodeExistsError:
            docs.forget(parent)
            if not isinstance(try_read_meta(store, parent, fmt.zarr_format), GroupMeta):
                raise StoreError(
                    f"cannot create below {parent or '/'!r}: another writer made an array there"
                ) from None
            continue
        except BaseException:  # after the group's document, maybe: it goes with the others made
            made.append(parent)
            raise
        made.append(parent)
