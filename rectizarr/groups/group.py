"""The :class:`Group` handle, :func:`create_group` and :func:`open_group` (the package's description:
:mod:`rectizarr.groups`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any

import msgspec
import numpy as np

from rectizarr import nodes
from rectizarr.api import create_array, from_array, open_node
from rectizarr.arrays import Array, resize_together
from rectizarr.core.dtype import data_type_from_numpy
from rectizarr.core.metadata import ArrayMeta, GroupMeta, NodeMeta, check_attributes
from rectizarr.errors import MetadataError, NodeExistsError, NodeNotFoundError, NodeTypeError, ReadOnlyError
from rectizarr.groups.members import Consolidated
from rectizarr.stores import Store

__all__ = ["Group", "create_group", "open_group"]


class Group(nodes.Node):
    """A Zarr v3 (or v2) group. Create with :func:`create_group`, open with :func:`open_group`."""

    kind = "group"

    def __init__(
        self,
        store: Store,
        path: str,
        meta: GroupMeta,
        *,
        read_only: bool = False,
        use_consolidated: bool | None = None,
    ) -> None:
        self._store = store
        self._path = path
        self._meta = meta
        self._read_only = read_only or store.read_only
        self._use_consolidated = use_consolidated
        self._track(meta)
        # of zarr.json when self._meta was read (None: not known); where versions cost a request, what this
        # process wrote of it since (written by another handle of ours: read again)
        self._version: Hashable = None if store.capabilities.cheap_versions else self._stored_version()
        self._stale = False  # our own writes changed what is stored below: read zarr.json again
        # the members as the consolidated metadata of the GroupMeta read last lists them (checked once per
        # document, not per lookup)
        self._entries: Consolidated | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as store + path + options (what :func:`open_group` needs)."""
        return (_reopen, (self._store, self._path, self._read_only, self._use_consolidated))

    @property
    def metadata(self) -> GroupMeta:
        """The group's validated ``zarr.json`` (a :class:`~rectizarr.core.metadata.GroupMeta`)."""
        return self._current()

    def _update_attributes(self, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Apply ``change`` to the attributes as stored now (:meth:`nodes.DocFormat.update`)."""
        self._check_writable()

        def apply(fresh: Any) -> GroupMeta:
            if not isinstance(fresh, GroupMeta):
                raise NodeNotFoundError(f"{self.name!r} is no longer a group")
            return msgspec.structs.replace(fresh, attributes=change(dict(fresh.attributes)))

        fmt = nodes.format_of(self._meta)
        self._meta = fmt.update(self._store, self._path, apply)  # type: ignore[assignment]

    def refresh(self) -> None:
        """Read the group's ``zarr.json`` (attributes, consolidated metadata) again. Needed only on stores
        where versions cost a request (S3, GCS, Azure, HTTP) after *other* writers changed the group: this
        handle keeps what it read at open and re-reads after its own writes; on local directories and
        memory every use checks the version (one ``stat``)."""
        version = self._stored_version()
        meta = nodes.read_meta(self._store, self._path, self._meta.zarr_format)
        if not isinstance(meta, GroupMeta):
            raise NodeNotFoundError(f"{self.name!r} is no longer a group")
        self._meta, self._version, self._stale = meta, version, False

    def _current(self) -> GroupMeta:
        """The group's metadata, read again if it is known to have changed (see :meth:`refresh`)."""
        if self._stale or self._stored_version() != self._version:
            self.refresh()
        return self._meta

    def _consolidated(self) -> Consolidated | None:
        """The members as the consolidated metadata lists them; None when the group is not read through
        consolidated metadata."""
        if self._use_consolidated is False:
            return None
        meta = self._current()
        if self._entries is not None and self._entries.meta is meta:
            return self._entries
        if meta.consolidated_metadata is None:
            if self._use_consolidated:
                raise MetadataError(f"group {self.name!r} has no consolidated metadata", path="$")
            return None
        self._entries = Consolidated(meta, self._path)
        return self._entries

    def _child(self, rel: str, meta: NodeMeta, consolidated: bool = False) -> Array | Group:
        """The member at ``rel`` with ``meta`` (``consolidated``: an entry of the consolidated metadata)."""
        path = nodes.join(self._path, rel)
        if isinstance(meta, ArrayMeta):
            array = Array(self._store, path, meta, read_only=self._read_only)
            if consolidated:
                array._check_before_writing()
            return array
        return Group(self._store, path, meta, read_only=self._read_only, use_consolidated=False)

    def _member_metas(self) -> dict[str, NodeMeta]:
        consolidated = self._consolidated()
        if consolidated is not None:
            return {k: consolidated.meta_of(k) for k in sorted(consolidated.entries) if "/" not in k}
        prefix = nodes.prefix_of(self._path)
        names = [n for n in self._store.list_dir(prefix) if n != nodes.META]
        return nodes.read_children(self._store, self._path, names)

    def members(self, max_depth: int | None = 0) -> list[tuple[str, Array | Group]]:
        """Members as ``(relative path, node)`` pairs, sorted by path: immediate children with
        ``max_depth=0`` (default), down to ``max_depth`` levels below them, or all with ``None``."""
        consolidated = self._consolidated() is not None
        out = [(n, self._child(n, m, consolidated)) for n, m in sorted(self._member_metas().items())]
        if max_depth is not None and max_depth <= 0:
            return out
        deeper = None if max_depth is None else max_depth - 1
        for name, node in list(out):
            if isinstance(node, Group):
                out += [(f"{name}/{k}", v) for k, v in node.members(deeper)]
        return sorted(out, key=lambda kv: kv[0])

    def array_keys(self) -> list[str]:
        """Names of the immediate child arrays, sorted."""
        return sorted(k for k, m in self._member_metas().items() if isinstance(m, ArrayMeta))

    def group_keys(self) -> list[str]:
        """Names of the immediate child groups, sorted."""
        return sorted(k for k, m in self._member_metas().items() if not isinstance(m, ArrayMeta))

    def get(self, path: str, default: Any = None) -> Any:
        """The member at ``path``, or ``default`` when there is none (a mapping's ``get``)."""
        with contextlib.suppress(NodeNotFoundError):
            return self[path]
        return default

    def keys(self) -> list[str]:
        """Names of the immediate children, sorted."""
        return sorted(self._member_metas())

    def arrays(self) -> list[tuple[str, Array]]:
        """Immediate child arrays as ``(name, array)`` pairs, sorted by name."""
        return [(n, m) for n, m in self.members() if isinstance(m, Array)]

    def groups(self) -> list[tuple[str, Group]]:
        """Immediate child groups as ``(name, group)`` pairs, sorted by name."""
        return [(n, m) for n, m in self.members() if isinstance(m, Group)]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    @property
    def nmembers(self) -> int:
        """The number of direct members (zarr-python's name; ``len(g)``)."""
        return len(self.keys())

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self[name]
        except (NodeNotFoundError, MetadataError):
            return False
        return True

    def __getitem__(self, name: str) -> Array | Group:
        rel = nodes.normalize_path(name)
        if not rel:
            return self
        consolidated = self._consolidated()
        if consolidated is not None:
            if rel not in consolidated.entries:
                raise NodeNotFoundError(
                    f"no member {rel!r} in group {self.name!r} of {self._store!r} (consolidated metadata)"
                )
            return self._child(rel, consolidated.meta_of(rel), consolidated=True)
        return self._child(rel, nodes.read_meta(self._store, nodes.join(self._path, rel)))

    def __setitem__(self, name: str, value: Any) -> None:
        """``g[name] = data``: store ``data`` (a NumPy array-like or a rectizarr array) as a new array
        ``name`` in the group's Zarr format, replacing any member of that name (zarr-python's behaviour)."""
        path = self._new_member(name)
        from_array(self._store, value, name=path, overwrite=True, zarr_format=self._meta.zarr_format)

    def _new_member(self, name: str) -> str:
        """The path of ``name``, a member about to be written (the group's document is then read again)."""
        self._check_writable()
        self._stale = True
        rel = nodes.normalize_path(name)
        if not rel:
            raise MetadataError(f"member name must be non-empty, got {name!r}")
        return nodes.join(self._path, rel)

    def create_group(
        self, name: str, *, attributes: Mapping[str, Any] | None = None, overwrite: bool = False
    ) -> Group:
        """Create a child group (``name`` may be a path such as ``a/b``) and return it."""
        path, zarr_format = self._new_member(name), self._meta.zarr_format
        return create_group(
            self._store, path=path, attributes=attributes, overwrite=overwrite, zarr_format=zarr_format
        )

    def resize_arrays(self, shapes: Mapping[str, Any], *, chunks: Mapping[str, Any] | None = None) -> None:
        """Resize several arrays of the group (``{"temp": (40, 64), "time": 40}``; ``chunks``: per array, as
        :meth:`Array.resize` takes it) as one update: readers see every new shape or none, also after a
        writer was killed half-way (docs/guarantees.md); Zarr v2 arrays too, except on object stores
        (there one after the other)."""
        self._check_writable()
        arrays: dict[str, Array] = {}
        for name in shapes:
            node = self[name]
            if not isinstance(node, Array):
                raise NodeTypeError(f"{name!r} in the group {self.name!r} is a group, not an array")
            arrays[name] = node
        wanted = {n: (int(v),) if isinstance(v, int) else tuple(int(x) for x in v) for n, v in shapes.items()}
        for name, shape in wanted.items():
            if len(shape) != arrays[name].ndim or any(n < 0 for n in shape):
                raise MetadataError(
                    f"new shape {shape} does not fit the array {name!r} of {arrays[name].ndim} dimensions"
                )
        resize_together(self._path, arrays, wanted, dict(chunks or {}))

    def create_array(self, name: str, **kwargs: Any) -> Array:
        """Create an array below this group (same keywords as :func:`rectizarr.create_array`)."""
        path = self._new_member(name)
        kwargs.setdefault("zarr_format", self._meta.zarr_format)  # a v2 group's members are v2
        return create_array(self._store, name=path, **kwargs)

    def require_group(self, name: str, **kwargs: Any) -> Group:
        """Open the child group ``name``, creating it if it does not exist."""
        node = self._existing_or_made(name, lambda: self.create_group(name, **kwargs))
        if not isinstance(node, Group):
            raise NodeExistsError(f"{name!r} in {self.name!r} is an array, not a group")
        return node

    def require_array(
        self, name: str, *, shape: Any, dtype: Any = None, exact: bool = False, **kwargs: Any
    ) -> Array:
        """Open the child array ``name`` if it exists with this shape and a dtype that ``dtype`` can hold
        (``exact``: that very dtype), as zarr-python and h5py's ``require_dataset`` do; else create it
        with ``kwargs``. ``NodeExistsError`` when what exists does not fit."""
        given: dict[str, Any] = {} if dtype is None else {"dtype": dtype}
        node = self._existing_or_made(name, lambda: self.create_array(name, shape=shape, **given, **kwargs))
        if not isinstance(node, Array):
            raise NodeExistsError(f"{name!r} in {self.name!r} is a group, not an array")
        want_shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if node.shape != want_shape:
            raise NodeExistsError(f"array {name!r} exists with shape {node.shape}, not {want_shape}")
        if dtype is not None:
            want = np.dtype(data_type_from_numpy(dtype).numpy)
            if node.dtype != want and (exact or not np.can_cast(node.dtype, want)):
                raise NodeExistsError(
                    f"array {name!r} exists with dtype {node.dtype}, which "
                    f"{'is not' if exact else 'cannot be cast to'} {want}"
                )
        return node

    def _existing_or_made(self, name: str, make: Callable[[], Array | Group]) -> Array | Group:
        """``self[name]``, or ``make()`` when there is no such member; when another writer (thread, handle,
        process) makes it first, ``make`` fails with NodeExistsError and that member is opened."""
        with contextlib.suppress(NodeNotFoundError):
            return self[name]
        try:
            return make()
        except NodeExistsError:  # its own document, not the consolidated entry (which may not list it yet)
            self._stale = True
            rel = nodes.normalize_path(name)
            return self._child(rel, nodes.read_meta(self._store, nodes.join(self._path, rel)))

    def delete(self, name: str) -> None:
        """Remove the member ``name`` and its whole subtree."""
        self._check_writable()
        rel = nodes.normalize_path(name)
        path = nodes.join(self._path, rel)
        self._stale = True
        with nodes.locked(self._store, path):
            if not nodes.node_exists(self._store, path):
                raise NodeNotFoundError(f"no member {rel!r} in group {self.name!r}")
            nodes.delete_node(self._store, path)

    __delitem__ = delete

    def tree(self, *, max_depth: int | None = None) -> str:
        """The hierarchy as indented text with shapes, dtypes and grid kinds."""
        return "\n".join([self.name, *self._tree_lines("", 0, max_depth)])

    def _tree_lines(self, indent: str, depth: int, max_depth: int | None) -> Iterator[str]:
        """The lines of the members, below ``depth`` levels (down to ``max_depth``)."""
        if max_depth is not None and depth >= max_depth:
            return
        members = self.members()
        for i, (name, node) in enumerate(members):
            last = i == len(members) - 1
            branch = "└── " if last else "├── "
            if isinstance(node, Array):
                yield (
                    f"{indent}{branch}{name} {node.shape} {node.dtype} ({node.grid.kind}"
                    f"{', sharded' if node.is_sharded else ''})"
                )
            else:
                yield f"{indent}{branch}{name}/"
                yield from node._tree_lines(indent + ("    " if last else "│   "), depth + 1, max_depth)

    @property
    def info(self) -> str:
        """A human-readable summary: members, attributes, consolidation and store."""
        members = self._member_metas()
        narrays = sum(isinstance(m, ArrayMeta) for m in members.values())
        return "\n".join(
            [
                f"Name        : {self.name}",
                "Type        : Group",
                f"Members     : {len(members)} ({narrays} arrays, {len(members) - narrays} groups)",
                f"Attributes  : {len(self._meta.attributes)} keys",
                f"Consolidated: {self._meta.consolidated_metadata is not None}",
                f"Store       : {type(self._store).__name__}",
                f"Read-only   : {self._read_only}",
            ]
        )

    def __repr__(self) -> str:
        return f"<rectizarr.Group {self.name!r}>"


def create_group(
    store: Any,
    *,
    path: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    zarr_format: int = 3,
) -> Group:
    """Create a group (ancestors created as groups) and return it; ``zarr_format=2`` writes ``.zgroup``."""
    s = nodes.store_for(store, "w" if overwrite else "a", storage_options)
    if s.read_only:
        raise ReadOnlyError("cannot create a group in a read-only store")
    p = nodes.normalize_path(path)
    meta = GroupMeta(
        attributes=check_attributes(attributes or {}), zarr_format=nodes.format_for(zarr_format).zarr_format
    )
    with nodes.locked(s, p):
        docs = nodes.AncestorDocs(s)  # each ancestor's zarr.json read once for all that follows
        if not overwrite:
            nodes.create_new(s, p, meta, docs)
        else:
            if nodes.node_exists(s, p):
                nodes.delete_node(s, p, docs)
            nodes.create_node(s, p, meta, docs)
    return Group(s, p, meta)


def open_group(
    store: Any = None,
    *,
    path: str | None = None,
    mode: str = "a",
    use_consolidated: bool | None = None,
    storage_options: Mapping[str, Any] | None = None,
    attributes: Mapping[str, Any] | None = None,
    zarr_format: int | None = None,
) -> Group:
    """Open a group. ``use_consolidated``: ``None`` uses consolidated metadata when present, ``True``
    requires it, ``False`` always lists the store. ``mode``: ``"a"`` (default, as in zarr-python) opens
    read/write and creates the group when missing; ``"r"`` read-only, ``"r+"`` read/write (must exist),
    ``"w"`` creates (replacing), ``"w-"`` creates (failing if it exists)."""
    s = nodes.store_for(store, mode, storage_options)
    p = nodes.normalize_path(path)

    def new(overwrite: bool) -> Group:
        return create_group(
            s, path=p, attributes=attributes, overwrite=overwrite, zarr_format=zarr_format or 3
        )

    def opened(meta: NodeMeta) -> Group:
        if not isinstance(meta, GroupMeta):
            raise NodeTypeError(
                f"the node at {p or '/'!r} in {s!r} is an array, not a group: open it with "
                "open_array (or rectizarr.open, which opens either)"
            )
        return Group(s, p, meta, read_only=(mode == "r"), use_consolidated=use_consolidated)

    return open_node(s, p, mode, zarr_format, new, opened)


def _reopen(store: Store, path: str, read_only: bool, use_consolidated: bool | None) -> Group:
    return open_group(store, path=path, mode="r" if read_only else "r+", use_consolidated=use_consolidated)
