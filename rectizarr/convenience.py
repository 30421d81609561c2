"""zarr-python's convenience names, with zarr-python's semantics: ``zeros``, ``ones``, ``full``, ``empty``,
their ``*_like`` forms, ``array``, ``group``, ``open_consolidated``, ``save`` and ``load``.

Where zarr-python takes a store keyword (``store=None``: a new in-memory store) and a ``path``, so do
these; every other keyword goes to :func:`rectizarr.create_array`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rectizarr.api import create_array
from rectizarr.arrays import Array
from rectizarr.core.spec import check_zarr_format
from rectizarr.errors import IrregularChunksError, MetadataError
from rectizarr.groups import Group, open_group
from rectizarr.groups import open as open_node


def _create(shape: Any, fill_value: Any, kwargs: dict[str, Any]) -> Array:
    kwargs.setdefault("dtype", np.float64)
    return _create_array(kwargs, shape=shape, fill_value=fill_value)


def _create_array(kwargs: dict[str, Any], **given: Any) -> Array:
    """:func:`create_array` in zarr-python's words: ``store`` (``None``: in memory), ``path``, ``chunks``
    ``True`` or ``None`` for ``"auto"``."""
    check_zarr_format(kwargs.get("zarr_format"), optional=True)
    store = kwargs.pop("store", None)
    name = kwargs.pop("path", None) or kwargs.pop("name", None)
    if kwargs.get("chunks") in (True, None):
        kwargs["chunks"] = "auto"
    return create_array(store, name=name, **given, **kwargs)


def create(shape: Any, **kwargs: Any) -> Array:
    """zarr-python's ``zarr.create``: a new array of ``shape`` (``store``, ``path``, ``chunks``, ``dtype``
    (float64 unless given), ``fill_value``, ``overwrite``, ``zarr_format``, ... as :func:`create_array`)."""
    return _create(shape, kwargs.pop("fill_value", None), kwargs)


def zeros(shape: Any, **kwargs: Any) -> Array:
    """A new array of ``shape`` reading as zeros (``dtype`` float64 by default; ``store=None``: in memory)."""
    return _create(shape, 0, kwargs)


def ones(shape: Any, **kwargs: Any) -> Array:
    """A new array of ``shape`` reading as ones (its fill value is 1; nothing is written)."""
    return _create(shape, 1, kwargs)


def full(shape: Any, fill_value: Any, **kwargs: Any) -> Array:
    """A new array of ``shape`` reading as ``fill_value`` everywhere."""
    return _create(shape, fill_value, kwargs)


def empty(shape: Any, **kwargs: Any) -> Array:
    """A new array of ``shape`` with the data type's default fill value (its contents are unspecified
    in zarr-python; here they read as that fill value)."""
    return _create(shape, kwargs.pop("fill_value", None), kwargs)


def _like(a: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Shape, dtype and (where ``a`` has them) chunks, codecs, fill value of ``a`` under ``kwargs``."""
    out: dict[str, Any] = {"shape": np.shape(a), "dtype": getattr(a, "dtype", np.asarray(a).dtype)}
    if isinstance(a, Array):
        try:
            out["chunks"] = a.chunks
        except IrregularChunksError:
            out["chunks"] = [list(s) for s in a.write_chunk_sizes]
        if a.is_sharded and a.inner_chunk_shape is not None:
            out["chunks"], out["shards"] = a.inner_chunk_shape, a.shards
        out.update(
            filters=a.filters,
            serializer=a.serializer,
            compressors=a.compressors,
            fill_value=a.fill_value,
            dimension_names=a.dimension_names,
        )
        v2 = a.metadata.v2
        if v2 is not None:  # a v2 array's like is v2 (as zarr-python makes it), with its .zarray's codecs
            del out["serializer"]
            out.update(zarr_format=2, compressors=v2.get("compressor"), filters=v2.get("filters"))
    else:
        chunks = getattr(a, "chunks", None)
        if isinstance(chunks, tuple) and all(isinstance(c, int) for c in chunks):
            out["chunks"] = chunks
    out.update(kwargs)
    return out


def zeros_like(a: Any, **kwargs: Any) -> Array:
    """:func:`zeros` with the shape, dtype and chunking of ``a``."""
    return _create_array(_like(a, {**kwargs, "fill_value": 0}))


def ones_like(a: Any, **kwargs: Any) -> Array:
    """:func:`ones` with the shape, dtype and chunking of ``a``."""
    return _create_array(_like(a, {**kwargs, "fill_value": 1}))


def full_like(a: Any, **kwargs: Any) -> Array:
    """:func:`full` with the shape, dtype and chunking of ``a`` (and its fill value unless given)."""
    return _create_array(_like(a, kwargs))


def empty_like(a: Any, **kwargs: Any) -> Array:
    """:func:`empty` with the shape, dtype and chunking of ``a``."""
    return _create_array(_like(a, kwargs))


def array(data: Any, **kwargs: Any) -> Array:
    """A new array holding a copy of ``data`` (``store=None``: in memory; ``dtype`` converts)."""
    values = data if isinstance(data, Array) else np.asarray(data, dtype=kwargs.pop("dtype", None))
    if isinstance(data, Array) and "dtype" in kwargs:
        values = np.asarray(data[...], dtype=kwargs.pop("dtype"))
    return _create_array(kwargs, data=values)


def group(
    store: Any = None,
    *,
    overwrite: bool = False,
    path: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    zarr_format: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Group:
    """Open the group at ``path``, creating it if missing; ``overwrite=True`` replaces what is there."""
    check_zarr_format(zarr_format, optional=True)
    return open_group(
        store,
        path=path,
        mode="w" if overwrite else "a",
        attributes=attributes,
        storage_options=storage_options,
        zarr_format=zarr_format,
    )


def open_consolidated(store: Any = None, *, use_consolidated: bool = True, **kwargs: Any) -> Group:
    """:func:`rectizarr.open_group` requiring consolidated metadata (zarr-python's ``open_consolidated``):
    a group without it is a MetadataError (a ValueError) here, at open, as in zarr-python."""
    g = open_group(store, use_consolidated=use_consolidated, **kwargs)
    if use_consolidated:
        g._consolidated()  # checked now, not at the first lookup
    return g


def save(
    store: Any,
    *args: Any,
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> None:
    """Save one array (``save(store, a)``) or several, positional ones as ``arr_0``, ``arr_1``, ... and
    keyword ones by name, in a new group (zarr-python's ``save``). One array is refused (NodeExistsError)
    where a node exists, as zarr-python does; a group of several replaces what is there."""
    check_zarr_format(zarr_format, optional=True)
    if not args and not kwargs:
        raise MetadataError("save needs at least one array")
    if len(args) == 1 and not kwargs:
        create_array(
            store, name=path, data=args[0], storage_options=storage_options, zarr_format=zarr_format or 3
        )
        return
    g = open_group(store, path=path, mode="w", storage_options=storage_options, zarr_format=zarr_format)
    for name, value in [*((f"arr_{i}", v) for i, v in enumerate(args)), *kwargs.items()]:
        g[name] = value


def load(
    store: Any,
    path: str | None = None,
    zarr_format: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Any:
    """The array at ``path`` as a NumPy array, or, for a group, a dict of its arrays as NumPy arrays
    (zarr-python's ``load``; the group's arrays are read when this is called)."""
    check_zarr_format(zarr_format, optional=True)
    node = open_node(store, path=path, mode="r", storage_options=storage_options, zarr_format=zarr_format)
    return node[...] if isinstance(node, Array) else {name: a[...] for name, a in node.arrays()}
