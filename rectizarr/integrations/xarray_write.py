"""Writing xarray Datasets with ``Dataset.to_zarr``'s contract (:func:`to_rectizarr`).

Modes, ``append_dim``, ``region`` (slices or ``"auto"``), ``encoding`` and the checks on existing variables
behave as xarray's Zarr backend does, with xarray's error messages; the differences are rectizarr's: dask
chunks that are irregular become a rectilinear grid (xarray refuses them), and chunks read from a store
(``encoding["chunks"]``, rectilinear included) are kept on re-save.

Here the entry points and the order of the work; what is asked is checked in :mod:`.xarray_checks`, each
variable's write planned and made in :mod:`.xarray_plan`, an append published and the group consolidated in
:mod:`.xarray_publish`.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Hashable, Mapping
from typing import Any

from xarray import Dataset, conventions

from rectizarr import nodes
from rectizarr.api import open_array
from rectizarr.arrays import Array
from rectizarr.core.spec import check_zarr_format
from rectizarr.errors import NodeNotFoundError
from rectizarr.groups import Group, open_group
from rectizarr.integrations.xarray_checks import (
    NONE_NAME,
    check_attrs,
    check_dtype,
    check_names,
    check_new_sizes,
    choose_mode,
    encoding_of,
    existing_encodings,
    has_dim,
    resolve_region,
    stored_dims,
)
from rectizarr.integrations.xarray_layout import is_dask
from rectizarr.integrations.xarray_plan import planned, write_existing, write_new, write_staged
from rectizarr.integrations.xarray_publish import finish, locked, publish

__all__ = ["to_rectizarr"]


def _untyped(module: str) -> Any:
    return importlib.import_module(module)


def _target(
    store: Any,
    group: str | None,
    mode: str,
    storage_options: Mapping[str, Any] | None,
    zarr_format: int | None,
) -> Group:
    """The group written into: opened, or created in ``zarr_format`` (default 3) where ``mode`` creates."""
    if isinstance(store, Group):
        return store.require_group(group) if group else store
    if mode in ("w", "w-"):
        return open_group(
            store, path=group, mode=mode, storage_options=storage_options, zarr_format=zarr_format
        )
    try:  # a stored group, in whichever format it is
        return open_group(store, path=group, mode="r+", storage_options=storage_options)
    except NodeNotFoundError:
        if mode == "r+":
            raise
    return open_group(store, path=group, mode="a", storage_options=storage_options, zarr_format=zarr_format)


def to_rectizarr(
    dataset: Dataset,
    store: Any = None,
    *,
    mode: str | None = None,
    group: str | None = None,
    encoding: Mapping[Hashable, Mapping[str, Any]] | None = None,
    compute: bool = True,
    consolidated: bool | None = None,
    append_dim: Hashable | None = None,
    region: Mapping[Hashable, Any] | str | None = None,
    safe_chunks: bool = True,
    align_chunks: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    zarr_format: int | None = None,
    write_empty_chunks: bool | None = None,
) -> Any:
    """Write ``dataset`` as a Zarr group, with ``Dataset.to_zarr``'s arguments and behaviour.

    ``zarr_format``: 3 (default) or 2 for a new group; a stored group keeps its own (another one given is
    an error). In Zarr v2, as xarray writes it: dimensions in ``_ARRAY_DIMENSIONS``, the CF ``_FillValue``
    as the array's fill value (``null`` without one), regular chunks only.

    ``mode``: ``"w-"`` (default) creates and fails if the group exists, ``"w"`` replaces it, ``"a"`` adds
    or replaces variables (default with ``append_dim``), ``"a-"`` with ``append_dim`` appends to the stored
    variables having it and adds new ones, leaving the others (without it: as ``"a"``, as xarray does),
    ``"r+"`` writes into existing variables only
    (default with ``region``). ``append_dim`` grows every stored variable having that dimension (dask blocks
    along it become new chunks of a rectilinear axis; if a write fails, the arrays grown are shrunk back,
    with ``compute=True``); ``region`` maps dimensions to slices (or ``"auto"``: found from the stored
    coordinates) to write into. A stored variable's new values are transposed to its stored dimension
    order and cast to its dtype (as zarr-python casts: numbers into strings become text). ``encoding``
    per variable: xarray's CF keys (``dtype``, ``units``, ``scale_factor``, ``_FillValue``, ...) and
    ``chunks`` (an int or a list of edges per axis: rectilinear), ``shards``, ``compressors``, ``filters``,
    ``serializer`` (dicts, names, numcodecs or zarr-python codec objects), ``fill_value``. Without ``chunks``, the variable's own encoding (as read)
    or its dask chunks (irregular ones give a rectilinear grid) decide, else ~1 MiB regular chunks.
    ``safe_chunks``: refuse dask blocks that share a storage chunk (a shard, when sharded) of a new or an
    existing array (with ``False`` the write proceeds; rectizarr's partial chunk writes are
    compare-and-swap, so none is lost).
    ``align_chunks``: dask blocks rechunked first so that each ends on a boundary of the stored chunks
    (shards), about as long as the longest block was: such writes are safe whatever the dask chunks.
    ``consolidated`` (default None: consolidate a group that is not yet; a consolidated group is kept
    current by every write) or True (consolidate) or False (leave as is). Returns the :class:`~rectizarr.Group`,
    or with ``compute=False`` a ``dask.delayed`` that writes the data when computed (metadata is written now).
    """
    check_zarr_format(zarr_format, optional=True)
    mode = choose_mode(mode, append_dim, region)
    check_names(dataset)
    check_attrs(dataset)
    user_encoding = {NONE_NAME if k is None else k: encoding_of(k, v) for k, v in (encoding or {}).items()}
    if None in dataset.variables:  # stored under xarray's name for it (read back as None)
        dataset = dataset.rename({None: NONE_NAME})
    missing = set(user_encoding) - set(dataset.variables)
    if missing:
        raise KeyError(f"variables {sorted(map(str, missing))!r} in encoding are not in the dataset")
    g = _target(store, group, mode, storage_options, zarr_format)
    if zarr_format is not None and nodes.format_of(g.metadata) is not nodes.format_for(zarr_format):
        raise ValueError(
            f"zarr_format={zarr_format} was given, but the group {g.name!r} is stored in Zarr format "
            f"{g.metadata.zarr_format}"
        )
    existing: dict[str, Array] = {} if mode == "w" else dict(g.arrays())
    # An append: one update of all the arrays it grows, their data written first (past the stored ends,
    # unseen) and every document published at once (not for Zarr v2 on object stores: DocFormat.together)
    atomic = append_dim is not None and bool(existing) and nodes.format_of(g.metadata).together(g.store)
    with locked(g, existing, dataset.variables) if atomic else contextlib.nullcontext():
        return _to_group(
            dataset,
            g,
            existing,
            mode=mode,
            user_encoding=user_encoding,
            compute=compute,
            consolidated=consolidated,
            append_dim=append_dim,
            region=region,
            safe_chunks=safe_chunks,
            align_chunks=align_chunks,
            write_empty_chunks=write_empty_chunks,
            atomic=atomic,
        )


def _to_group(
    dataset: Dataset,
    g: Group,
    existing: dict[str, Array],
    *,
    mode: str,
    user_encoding: dict[Hashable, dict[str, Any]],
    compute: bool,
    consolidated: bool | None,
    append_dim: Hashable | None,
    region: Any,
    safe_chunks: bool,
    align_chunks: bool,
    write_empty_chunks: bool | None,
    atomic: bool,
) -> Any:
    """:func:`to_rectizarr` once the group and its arrays are known (under their locks when ``atomic``)."""
    if (
        atomic or write_empty_chunks is not None
    ):  # (as stored now; appends and regions write empty chunks too)
        existing = {
            n: open_array(g.store, path=a.path, mode="r+", write_empty_chunks=bool(write_empty_chunks))
            for n, a in existing.items()
        }
    if mode in ("a", "a-", "r+"):
        for name in user_encoding:
            if str(name) in existing:
                raise ValueError(f"variable {str(name)!r} already exists, but encoding was provided")
    ds, slices = (dataset, {}) if region is None else resolve_region(dataset, region, mode, append_dim, g)
    names = [str(k) for k in ds.variables]
    if mode == "r+" and (new := [n for n in names if n not in existing]):
        raise ValueError(
            f"dataset contains non-pre-existing variables {new!r}, which is not allowed in "
            "``xarray.Dataset.to_zarr()`` with ``mode='r+'``. To allow writing new variables, set "
            "``mode='a'``."
        )
    if mode == "a-" and append_dim is not None:  # stored variables without append_dim are left as they are
        ds = ds.drop_vars([n for n in names if n in existing and append_dim not in ds.variables[n].dims])
    grown: list[tuple[Array, tuple[int, ...]]] = []
    staged: dict[str, Array] | None = {} if atomic else None
    try:
        writes = _write_all(
            ds,
            g,
            existing,
            user_encoding,
            grown,
            mode=mode,
            append_dim=append_dim,
            region=slices,
            safe_chunks=safe_chunks,
            write_empty_chunks=write_empty_chunks,
            align_chunks=align_chunks,
            staged=staged,
        )
        if staged is None:
            return finish(g, writes, compute=compute, consolidated=consolidated)
        if compute:
            if writes:
                _untyped("dask").compute(*writes)
            publish(g, existing, staged)
            return finish(g, [], compute=True, consolidated=consolidated)
        return finish(
            g, writes, compute=False, consolidated=consolidated, before=lambda: publish(g, existing, staged)
        )
    except BaseException:
        for array, shape in grown:  # best effort: an append that failed leaves the group as it was, openable
            with contextlib.suppress(Exception):
                array.resize(shape)
        raise


def _write_all(
    ds: Dataset,
    g: Group,
    existing: dict[str, Array],
    user_encoding: dict[Hashable, dict[str, Any]],
    grown: list[tuple[Array, tuple[int, ...]]],
    *,
    mode: str,
    append_dim: Hashable | None,
    region: dict[Hashable, slice],
    safe_chunks: bool,
    write_empty_chunks: bool | None,
    align_chunks: bool = False,
    staged: dict[str, Array] | None = None,
) -> list[Any]:
    """Write the variables into ``g``; the arrays an append grows are added to ``grown`` (with their shapes
    before), for the caller to shrink back should a write fail; with ``staged``, they are not resized but
    staged (:meth:`Array.staged_resize`, the handles put there by name) for the caller to publish."""
    xz = _untyped("xarray.backends.zarr")
    if append_dim is not None and existing and not has_dim(existing, str(append_dim)):
        dims = stored_dims(existing)
        raise ValueError(f"append_dim={append_dim!r} does not match any existing dataset dimensions {dims}")
    if not region:
        check_new_sizes(ds, existing, append_dim)
    ds = ds.copy(deep=False)
    old_names = [n for n in map(str, ds.variables) if n in existing]
    stored = existing_encodings(g, old_names) if old_names else {}
    for key in ds.variables:
        name = str(key)
        if name in stored:
            check_dtype(name, stored[name], ds.variables[key])
            ds.variables[key].encoding = dict(stored[name].encoding)
        elif key in user_encoding:
            ds.variables[key].encoding = dict(user_encoding[key])
    variables, attrs = conventions.encode_dataset_coordinates(ds)
    fmt = g.metadata.zarr_format
    encoded = {
        key: xz.encode_zarr_variable(raw, name=str(key), zarr_format=fmt) for key, raw in variables.items()
    }
    plans = {
        str(key): planned(
            str(key), var, existing[str(key)], append_dim, region, safe_chunks, mode, align_chunks
        )
        for key, var in encoded.items()
        if str(key) in existing
    }  # every check and cast before any write
    if not region and mode != "r+":
        g.attrs.put(
            {str(k): xz.encode_zarr_attr_value(v) for k, v in attrs.items()}
        )  # replaced, as xarray does
    for name, plan in plans.items():  # every resize before any data is written
        if plan.shape != existing[name].shape:
            if staged is not None:
                staged[name] = existing[name].staged_resize(plan.shape, chunks=plan.edges)
                continue
            grown.append((existing[name], existing[name].shape))
            existing[name].resize(plan.shape, chunks=plan.edges)
    writes: list[Any] = []
    for key, var in encoded.items():
        name = str(key)
        if staged is not None and name in staged:
            writes += write_staged(staged[name], plans[name])
        elif name in plans:
            writes += write_existing(existing[name], plans[name])
        else:
            writes += write_new(
                name,
                var,
                g,
                strict=key in user_encoding,
                write_empty_chunks=write_empty_chunks,
                zarr_format=fmt,
                safe_chunks=safe_chunks,
                align_chunks=align_chunks,
            )
    return writes


def _tree_path(node: Any, tree: Any) -> str:
    """``node``'s path with ``tree`` as the root (``"/"``, ``"/a/b"``): a subtree is written as a tree."""
    rel = node.relative_to(tree)
    return "/" if rel == "." else "/" + rel


def to_rectizarr_tree(
    tree: Any,
    store: Any = None,
    *,
    mode: str = "w-",
    encoding: Mapping[str, Mapping[Hashable, Mapping[str, Any]]] | None = None,
    consolidated: bool | None = None,
    group: str | None = None,
    write_inherited_coords: bool = False,
    compute: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    zarr_format: int | None = None,
) -> Any:
    """Write an ``xarray.DataTree`` as nested groups, like ``DataTree.to_zarr``: each node's Dataset
    through :func:`to_rectizarr` at its path below ``tree`` (a node that is not the root is written as the
    root, with the coordinates it inherits); ``encoding`` maps those paths (``"/"``, ``"/a/b"``) to
    per-variable encodings. The dask data of all nodes is computed at once (what nodes share, once).
    Returns the root :class:`~rectizarr.Group` (or a ``Delayed``)."""
    if mode not in ("w", "w-", "a", "a-", "r+"):
        raise ValueError(
            f"The only supported options for mode are 'w', 'w-', 'a', 'a-', and 'r+', but mode={mode!r}"
        )
    encoding = dict(encoding or {})
    paths = {node.path: _tree_path(node, tree) for node in tree.subtree}  # relative to ``tree``: its root
    unknown = set(encoding) - set(paths.values())
    if unknown:
        raise ValueError(f"unexpected encoding group name(s) provided: {sorted(unknown)}")
    # Dask data is written by one computation for the whole tree, so work that nodes share runs once.
    lazy = compute and any(
        is_dask(v.data) for node in tree.subtree for v in node.to_dataset(inherit=False).variables.values()
    )
    root: Group | None = None
    delayed = []
    for node in tree.subtree:
        top = node is tree
        ds = node.to_dataset(inherit=write_inherited_coords or top)
        path = "/".join(p for p in ((group or "").strip("/"), paths[node.path].strip("/")) if p)
        node_mode = mode if top or mode not in ("w", "w-") else "w"
        result = to_rectizarr(
            ds,
            store if root is None else root.store,
            mode=node_mode,
            group=path or None,
            encoding=encoding.get(paths[node.path]),
            compute=compute and not lazy,
            consolidated=False,
            storage_options=storage_options if root is None else None,
            zarr_format=zarr_format,
        )
        if compute and not lazy:
            root = root or result
        else:
            delayed.append(result)
            root = root or open_group(store, path=group, mode="r+", storage_options=storage_options)
    assert root is not None
    return finish(root, delayed, compute=compute, consolidated=consolidated)
