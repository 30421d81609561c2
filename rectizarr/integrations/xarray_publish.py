"""An append's end: the documents of the arrays it grew published as one update (under the locks of every
document it may write, taken at once, or by conditional writes), then the dask writes run and the group
consolidated (:func:`finish`; :mod:`.xarray_write`)."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterable, Mapping
from typing import Any

from rectizarr import commit, nodes
from rectizarr.arrays import Array
from rectizarr.core.metadata import ArrayMeta
from rectizarr.errors import ConflictError
from rectizarr.groups import Group, consolidate_metadata
from rectizarr.nodes import read_meta

__all__ = ["finish", "locked", "publish"]


def _untyped(module: str) -> Any:
    return importlib.import_module(module)


def locked(
    g: Group, existing: Mapping[str, Array], names: Iterable[Any] = ()
) -> contextlib.AbstractContextManager[None]:
    """The locks of the group's document, its ancestors', its arrays' and those of the arrays of ``names``
    that an append may create (taken at once: a hold takes no more locks)."""
    paths = {g.path, *nodes.parent_paths(g.path), *(a.path for a in existing.values())}
    paths.update(nodes.join(g.path, str(name)) for name in names)
    return g.store.lock([nodes.meta_key(p) for p in sorted(paths)])


def publish(g: Group, existing: Mapping[str, Array], staged: Mapping[str, Array], check: bool) -> None:
    """Publish the documents of the staged arrays as one update (:meth:`rectizarr.nodes.DocFormat.publish_many`), under the
    primary of the group (its topmost consolidating ancestor, else itself); ``check``: the stored documents
    must still be those the data was staged against (ConflictError), the locks having been let go since."""
    store = g.store
    changes: dict[str, tuple[Any, Any]] = {
        existing[n].path: (existing[n].metadata, a.metadata) for n, a in staged.items()
    }
    if not changes:
        return
    if (
        store.capabilities.conditional_writes
    ):  # (Zarr v3) no locks: the documents must be those staged against
        _publish_swapped(g, changes)
        return
    with locked(g, existing):
        if check:
            for path, (old, _) in changes.items():
                now = nodes.read_for_write(store, path)
                if not isinstance(now, ArrayMeta) or (now.shape, now.chunk_grid) != (
                    old.shape,
                    old.chunk_grid,
                ):
                    raise ConflictError(
                        f"the array {path!r} was changed by another writer while this append's "
                        "data was written (compute=False); its documents were not published"
                    )
        nodes.format_of(g.metadata).publish_many(store, g.path, changes)


def _publish_swapped(g: Group, changes: Mapping[str, tuple[Any, Any]]) -> None:
    """:func:`publish` on a store with conditional writes (:func:`rectizarr.nodes.publish_swapped`): each
    array's document as stored must still have the shape and grid its data was staged against, else
    ConflictError (nothing published; the staged data stays past the stored ends, unseen)."""

    def change_of(path: str, old: ArrayMeta, new: ArrayMeta) -> Any:
        def change(now: Any) -> ArrayMeta:
            if not isinstance(now, ArrayMeta) or (now.shape, now.chunk_grid) != (old.shape, old.chunk_grid):
                raise ConflictError(
                    f"the array {path!r} was changed by another writer while this append's data "
                    "was written; its documents were not published"
                )
            return new

        return change

    store = g.store
    primary = commit.primary_of(store, next(iter(changes)), nodes.AncestorDocs(store).get)
    nodes.publish_swapped(
        store,
        g.path if primary is None else primary,
        {path: change_of(path, old, new) for path, (old, new) in changes.items()},
    )


def finish(
    g: Group, writes: list[Any], *, compute: bool, consolidated: bool | None, before: Any = None
) -> Any:
    """Run (or return as one ``Delayed``) the dask writes, then ``before()`` (an append's publication),
    then consolidate: where the group is not yet consolidated (``None`` or ``True``); a consolidated group
    is kept current by every metadata write."""

    def done(*_: Any) -> Group:
        if before is not None:
            before()
        stored = read_meta(g.store, g.path)
        if consolidated is True or (
            consolidated is None and getattr(stored, "consolidated_metadata", None) is None
        ):
            consolidate_metadata(g.store, g.path)
        return g

    if not writes:
        return done() if compute else _untyped("dask").delayed(done)()
    dask = _untyped("dask")
    if compute:
        dask.compute(*writes)
        return done()
    return dask.delayed(done)(*writes)
