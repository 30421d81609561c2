"""What arrays and groups share (:class:`Node`), their documents' versions tracked by a :class:`Tracker`."""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, MutableMapping
from typing import Any, Self

from rectizarr.core.metadata import NodeMeta, check_attributes
from rectizarr.errors import ReadOnlyError
from rectizarr.nodes.formats import format_of
from rectizarr.nodes.versions import Tracker
from rectizarr.stores import Store


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

    def _track(self, meta: NodeMeta) -> None:
        """Track the documents of the node ``meta`` (its format's, :meth:`DocFormat.tracker`)."""
        self._tracker: Tracker = format_of(meta).tracker(self._store, self._path, meta)

    def _stored_version(self) -> Hashable:
        """What changes whenever the node's documents are rewritten (:meth:`Tracker.now`)."""
        return self._tracker.now()
