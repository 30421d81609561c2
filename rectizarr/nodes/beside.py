"""The listing made beside a new node's create-only write on object stores (:class:`Beside`)."""

from __future__ import annotations

from rectizarr.core.metadata import NodeMeta
from rectizarr.errors import NodeExistsError, RectizarrError, StoreError
from rectizarr.io.pool import beside
from rectizarr.nodes.formats import FORMATS, doc_key
from rectizarr.nodes.paths import exists_message, prefix_of
from rectizarr.stores import Store


class Beside:
    """The listing made beside a node's create-only write (:func:`rectizarr.nodes.create.create_new`), and
    what it decides once the write is answered (:func:`rectizarr.nodes.base.create_only` calls it):

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
        self.tried = self.taken_back = False  # tried: the node's own write was answered, or failed

    def _take_back(self) -> None:
        """Delete the document this writer made and must take back; a failure says what is left."""
        try:
            self.store.delete(self.own)
        except RectizarrError as exc:
            raise StoreError(
                f"{self.own!r} was written, then found not to belong there (another node at its path, or "
                f"nothing known of it), and could not be deleted again ({exc}); delete it"
            ) from exc
        self.taken_back = True

    def _more_listed(self) -> bool:
        listed = self.listing.result()
        return not (len(listed) <= 1 and set(listed) <= {self.own})

    def _other_node(self) -> bool:
        keys = [k for fmt in FORMATS.values() for k in fmt.defining_keys(self.path) if k != self.own]
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
        self.tried = True
        try:
            listed = self.listing.result()
            other = self._more_listed() and self._other_node()
        except BaseException:  # the listing (or a look-up) failed: nothing is known, the document goes again
            if ours:
                self._take_back()
            raise
        if other:  # a node of another kind or format: the document here can only hide it
            self._take_back()
            raise NodeExistsError(exists_message(self.path))
        if not ours and listed:  # maybe another writer's very same document, maybe with data below: as it is
            raise NodeExistsError(exists_message(self.path))

    def after_failed_write(self, key: str, value: bytes, exc: Exception) -> None:
        """The create-only write of ``key`` failed with ``exc`` (it may have landed all the same)."""
        self.tried = True
        try:
            there = self._more_listed() and self._other_node()
        except RectizarrError:
            return
        if there:
            stored = self.store.get(key)
            if stored is not None and bytes(stored) == value:
                self._take_back()
            raise NodeExistsError(exists_message(self.path)) from exc
