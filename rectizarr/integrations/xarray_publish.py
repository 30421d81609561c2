"""An append's end: the documents of the arrays it grew published as one update (:func:`publish`; the
locks of every document it may write, taken at once, held while its data is written: :func:`locked`),
then the dask writes run and the group consolidated (:func:`finish`; :mod:`.xarray_write`)."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterable, Mapping
from typing import Any

from rectizarr import nodes
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


def publish(g: Group, existing: Mapping[str, Array], staged: Mapping[str, Array]) -> None:
    """Publish the documents of the staged arrays as one update
    (:meth:`rectizarr.nodes.DocFormat.publish_many`): each array's document as stored must still have the
    shape and grid its data was staged against, else ConflictError (nothing published; the staged data
    stays past the stored ends, unseen)."""

    def change_of(path: str, old: ArrayMeta, new: ArrayMeta) -> Any:
        def change(now: Any) -> ArrayMeta:
            if not isinstance(now, ArrayMeta) or (now.shape, now.chunk_grid) != (old.shape, old.chunk_grid):
                raise ConflictError(
                    f"the array {path!r} was changed by another writer while this append's data "
                    "was written; its documents were not published"
                )
            return new

        return change

    changes = {
        existing[n].path: change_of(existing[n].path, existing[n].metadata, a.metadata)
        for n, a in staged.items()
    }
    if changes:
        nodes.format_of(g.metadata).publish_many(g.store, g.path, changes)


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
