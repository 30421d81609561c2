"""The document format of a node, one interface (Zarr v3: :mod:`.v3`, v2: :mod:`.v2`): which keys hold a node,
how it is read, encoded, written and updated, and how its ancestors' consolidated entries are refreshed. A
node's format is chosen once (:func:`rectizarr.nodes.format_of`); nothing else asks which one it is."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol

from rectizarr import commit
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.core.metadata import ArrayMeta, GroupMeta, NodeMeta
from rectizarr.core.spec import ArraySpec, FormatRules
from rectizarr.nodes.paths import AncestorDocs, locked
from rectizarr.nodes.versions import Tracker
from rectizarr.stores import Store
from rectizarr.stores.base import inferred_landings

Change = Callable[[NodeMeta | None], NodeMeta]
Then = Callable[[NodeMeta | None, NodeMeta], None]
Published = tuple[dict[str, NodeMeta | None], dict[str, NodeMeta | None]]


class CreateCheck(Protocol):
    """What follows a create-only write of a node's document (:class:`rectizarr.nodes.beside.Beside`)."""

    taken_back: bool

    def after_write(self, ours: bool) -> None: ...

    def after_failed_write(self, key: str, value: bytes, exc: Exception) -> None: ...


def create_only(store: Store, key: str, value: bytes, path: str, check: CreateCheck | None = None) -> None:
    """Write ``key`` where it is not (NodeExistsError where it is); with ``check``, what the listing beside
    the write decides follows before anything else is written."""
    before = inferred_landings()
    try:
        created = store.set_if(key, value, None)
    except Exception as exc:
        if check is not None:
            check.after_failed_write(key, value, exc)
        raise
    if not created:
        raise commit.made_meanwhile(path)
    if check is not None:
        check.after_write(ours=inferred_landings() == before)


class DocFormat(ABC):
    """One Zarr format's documents (see the module's description)."""

    zarr_format: Literal[2, 3]
    missing: str  # what a reader looked for, in the message of a node not found (``{key}``: zarr.json's)
    migrates: bool  # whether its nodes are migrated to Zarr v3 (``rectizarr migrate``)
    rules: FormatRules  # what its arrays may be (sharded, rectilinear, with a null fill value, ...)

    def holds(self, obj: Mapping[str, Any]) -> bool:
        """Whether the JSON object ``obj`` (a consolidated entry) declares this format."""
        return obj.get("zarr_format") == self.zarr_format

    @abstractmethod
    def build_array(self, spec: ArraySpec) -> tuple[ArrayMeta, CodecPipeline]:
        """The document and the codec pipeline of a new array of this format (:mod:`rectizarr.creation`)."""

    def has_fill(self, meta: ArrayMeta) -> bool:
        """Whether the array ``meta`` has a fill value (not a null one, where :attr:`rules` allow that)."""
        return True

    def v3_attributes(self, meta: ArrayMeta) -> dict[str, Any]:
        """The attributes of the array ``meta`` as a Zarr v3 array holds them (by default: its own)."""
        return dict(meta.attributes)

    def as_v3(self, meta: ArrayMeta) -> tuple[ArrayMeta | None, str]:
        """The array ``meta`` as a Zarr v3 array that reads its stored chunks as they are (by default
        ``meta`` itself; None where no v3 codec chain reads them), and why."""
        return meta, "a Zarr v3 array"

    @abstractmethod
    def defining_keys(self, path: str) -> list[str]:
        """The keys whose document, where one is, makes a node of this format at ``path``."""

    def doc_keys(self, path: str, meta: NodeMeta) -> list[str]:
        """The keys of every document of the node ``meta``, the one that defines it first (default: one)."""
        return self.defining_keys(path)

    @abstractmethod
    def consolidated_key(self, path: str) -> str:
        """The key of the document that holds the consolidated metadata of the group at ``path``."""

    @abstractmethod
    def entry_path(self, rel: str, entry: Any = ...) -> str:
        """The JSON path of member ``rel``'s entry in :meth:`consolidated_key` (``...``: any entry)."""

    def tracker(self, store: Store, path: str, meta: NodeMeta) -> Tracker:
        """What a handle of the node ``meta`` checks to know its documents changed (default: all)."""
        return Tracker(store, self.doc_keys(path, meta))

    @abstractmethod
    def read(self, store: Store, path: str) -> tuple[bool, NodeMeta | None]:
        """(whether a document of this format is there, the node as readers see it: None if none)."""

    @abstractmethod
    def to_json(self, meta: NodeMeta) -> dict[str, Any]:
        """The node's JSON object as consolidated metadata holds it in memory."""

    @abstractmethod
    def from_json(self, obj: Mapping[str, Any], key: str | None = None) -> NodeMeta:
        """The node of a JSON object that :meth:`to_json` makes (``key``: where it was read, for errors)."""

    @abstractmethod
    def encode(self, path: str, meta: NodeMeta) -> dict[str, bytes]:
        """The documents of the node ``meta`` at ``path``, by key (its defining document first)."""

    def write(
        self,
        store: Store,
        path: str,
        meta: NodeMeta,
        docs: AncestorDocs | None = None,
        exclusive: bool = False,
        check: CreateCheck | None = None,
    ) -> None:
        """Write the node's documents, its ancestors' consolidated metadata kept current (``exclusive``: the
        defining document create-only; ``docs``: the ``zarr.json`` values of this operation, kept current)."""
        items = self.encode(path, meta)
        if exclusive:  # the defining document first
            first = next(iter(items))
            create_only(store, first, items.pop(first), path, check)
        store.set_many(items)
        self.refresh(store, path, meta, docs)

    @abstractmethod
    def refresh(self, store: Store, path: str, meta: NodeMeta | None, docs: AncestorDocs | None) -> None:
        """Update (``meta``) or remove (None) ``path``'s entries in every consolidating ancestor."""

    @abstractmethod
    def publish_many(self, store: Store, group: str, changes: Mapping[str, Change]) -> Published:
        """The documents of nodes below the group at ``group`` as one update (all or nothing, also for a
        writer killed midway): ``changes[path]`` maps the node as stored now to its new content (it may run
        again; it raises to refuse). Returns (contents before, after) by path; where :meth:`together` says."""

    def together(self, store: Store) -> bool:
        """Whether :meth:`publish_many` makes one update on ``store`` (else: each node by itself)."""
        return True

    def primary(self, store: Store, path: str, docs: AncestorDocs) -> str | None:
        """The group whose commit record publishes a change of the node with its consolidated copies
        (:mod:`rectizarr.commit`; under the caller's locks), None where there is none (by default: the node
        is written, then its consolidated copies refreshed)."""
        return None

    @abstractmethod
    def ancestor(self, store: Store, parent: str, path: str, docs: AncestorDocs) -> NodeMeta | None:
        """The node at ``parent``, an ancestor of a new node at ``path`` (None: none); refuses one that a
        new group of this format would hide."""

    @abstractmethod
    def consolidate(self, store: Store, path: str) -> GroupMeta:
        """Write the consolidated metadata of the group at ``path`` and return the group."""

    def update(self, store: Store, path: str, change: Change, then: Then | None = None) -> NodeMeta:
        """A read-modify-write of the node's documents: ``change`` maps the node as stored now (None:
        missing) to the new one (it may run again: the documents are compare-and-swapped, and re-read
        after another writer changed them); then ``then(old, new)`` runs once (chunk work). The locks of
        the node's and its ancestors' documents are held meanwhile, so the writers of this process (this
        machine, where the locks are the OS's) take turns."""
        with locked(store, path):
            return self._update(store, path, change, then)

    @abstractmethod
    def _update(self, store: Store, path: str, change: Change, then: Then | None) -> NodeMeta:
        """:meth:`update` inside the locks."""
