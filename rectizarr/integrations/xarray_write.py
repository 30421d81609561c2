"""Writing xarray Datasets with ``Dataset.to_zarr``'s contract (:func:`to_rectizarr`).

Modes, ``append_dim``, ``region`` (slices or ``"auto"``), ``encoding`` and the checks on existing variables
behave as xarray's Zarr backend does, with xarray's error messages; the differences are rectizarr's: dask
chunks that are irregular become a rectilinear grid (xarray refuses them), and chunks read from a store
(``encoding["chunks"]``, rectilinear included) are kept on re-save.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np
from xarray import Dataset, Variable, conventions

from rectizarr import commit, nodes
from rectizarr.api import open_array
from rectizarr.arrays import Array, StagedTarget
from rectizarr.core.dims import FixedDim
from rectizarr.core.dtype import as_strings
from rectizarr.core.grid import all_data_lens
from rectizarr.core.metadata import ArrayMeta, check_attributes
from rectizarr.core.spec import check_zarr_format
from rectizarr.errors import ConflictError, MetadataError, NodeNotFoundError
from rectizarr.groups import Group, consolidate_metadata, open_group
from rectizarr.integrations.dask import from_dask
from rectizarr.integrations.xarray_layout import (
    aligned_rechunk,
    array_kwargs,
    check_existing,
    check_safe_chunks,
    is_dask,
    storage_lengths,
    target_slices,
)
from rectizarr.integrations.xarray_read import RectizarrDataStore
from rectizarr.nodes import read_meta

__all__ = ["to_rectizarr"]

_MODES = ("w", "w-", "a", "a-", "r+")


def _untyped(module: str) -> Any:
    return importlib.import_module(module)


def _choose_mode(mode: str | None, append_dim: Hashable | None, region: Any) -> str:
    """xarray's defaults and checks of ``mode`` against ``append_dim`` and ``region``."""
    if mode is None:
        mode = "a" if append_dim is not None else "r+" if region is not None else "w-"
    if append_dim is not None and mode not in ("a", "a-"):
        raise ValueError("cannot set append_dim unless mode='a' or mode=None")
    if region is not None and mode not in ("a", "a-", "r+"):
        raise ValueError("cannot set region unless mode='a', mode='a-', mode='r+' or mode=None")
    if mode not in _MODES:
        raise ValueError(
            f"The only supported options for mode are 'w', 'w-', 'a', 'a-', and 'r+', but mode={mode!r}"
        )
    return mode


NONE_NAME = "__values__"
"""The stored name of a variable named None (xarray's, which its readers decode back to None)."""


def _check_names(ds: Dataset) -> None:
    """xarray's rule for the names of variables it writes: a non-empty string, or None."""
    for name in ds.variables:
        if isinstance(name, str) and not name:
            raise ValueError(
                f"Invalid name {name!r} for DataArray or Dataset key: string must be length 1 or greater "
                "for serialization to netCDF or zarr files"
            )
        if not isinstance(name, str) and name is not None:
            raise TypeError(
                f"Invalid name {name!r} for DataArray or Dataset key: must be either a string or None for "
                "serialization to netCDF or zarr files"
            )


def _check_attrs(ds: Dataset) -> None:
    """Every attribute of the dataset and its variables stored as JSON, checked before anything is written
    (xarray's TypeError, with the JSON path of the value that has no JSON form)."""
    xz = _untyped("xarray.backends.zarr")
    owners = [("Dataset", ds.attrs), *((f"variable {str(k)!r}", v.attrs) for k, v in ds.variables.items())]
    for owner, attrs in owners:
        try:
            check_attributes(
                {k: xz.encode_zarr_attr_value(v) if isinstance(k, str) else v for k, v in attrs.items()}
            )
        except (MetadataError, TypeError, ValueError) as exc:
            raise TypeError(f"Invalid attribute in Dataset.attrs. ({owner}): {exc}") from exc


def _encoding_of(name: Hashable, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"encoding for variable {name!r} must be castable to a dictionary, got {value!r}")
    return dict(value)


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


def _auto_region(ds: Dataset, region: dict[Hashable, Any], g: Group) -> dict[Hashable, Any]:
    """``"auto"`` entries found by looking the dataset's coordinate values up in the stored ones."""
    pd = _untyped("pandas")

    for dim, value in list(region.items()):
        if not (isinstance(value, str) and value == "auto"):
            continue
        if dim not in ds.variables:
            region[dim] = slice(0, ds.sizes[dim])
            continue
        stored = _existing_encodings(g, [str(dim)])[str(dim)]
        idxs = pd.Index(np.asarray(stored.values)).get_indexer(ds[dim].values)
        if (idxs == -1).any():
            raise KeyError(
                f"Not all values of coordinate '{dim}' in the new array were found in the original store. "
                "Writing to a zarr region slice requires that no dimensions or metadata are changed by "
                "the write."
            )
        if len(idxs) and (np.diff(idxs) != 1).any():
            raise ValueError(
                f"The auto-detected region of coordinate '{dim}' for writing new data to the original "
                "store had non-contiguous indices. Writing to a zarr region slice requires that the new "
                "data constitute a contiguous subset of the original store."
            )
        region[dim] = slice(int(idxs[0]), int(idxs[-1]) + 1) if len(idxs) else slice(0, 0)
    return region


def _region(
    ds: Dataset, region: Any, mode: str, append_dim: Hashable | None, g: Group
) -> tuple[Dataset, dict[Hashable, slice]]:
    """xarray's region checks (``"auto"`` resolved from the stored coordinates); index variables dropped."""
    if region == "auto":
        region = dict.fromkeys(ds.dims, "auto")
    if not isinstance(region, dict):
        raise TypeError(f"``region`` must be a dict, got {type(region)}")
    region = dict(region)
    if any(isinstance(v, str) and v == "auto" for v in region.values()):
        if mode not in ("r+", "a"):
            raise ValueError(f"``mode`` must be 'r+' or 'a' when using ``region='auto'``, got {mode!r}")
        region = _auto_region(ds, region, g)
    for k, v in region.items():
        if k not in ds.dims:
            raise ValueError(
                f"all keys in ``region`` are not in Dataset dimensions, got {list(region)} and "
                f"{list(ds.dims)}"
            )
        if not isinstance(v, slice):
            raise TypeError(f"all values in ``region`` must be slice objects, got region={region}")
        if v.step not in (1, None):
            raise ValueError(f"step on all slices in ``region`` must be 1 or None, got region={region}")
    unmatched = [k for k, v in ds.variables.items() if not set(region).intersection(v.dims)]
    if region and unmatched:
        raise ValueError(
            "when setting `region` explicitly in to_zarr(), all variables in the dataset to write must have at "
            f"least one dimension in common with the region's dimensions {list(region)}, but that is not the "
            f"case for some variables here. To drop these variables from this dataset before exporting to zarr, "
            f"write: .drop_vars({unmatched!r})"
        )
    if append_dim is not None and append_dim in region:
        raise ValueError(
            "cannot list the same dimension in both ``append_dim`` and ``region`` with to_zarr(), "
            f"got {append_dim} in both"
        )
    return ds.drop_vars(list(ds.indexes)), region


def _existing_encodings(g: Group, names: list[str]) -> dict[str, Variable]:
    """The stored variables, CF-decoded, so new values are encoded exactly as the stored ones."""
    reader = RectizarrDataStore(g, unnamed_dims="dim_n")
    raw = {n: reader.open_store_variable(n, g[n]) for n in names}  # type: ignore[arg-type]
    decoded, _, _ = conventions.decode_cf_variables(raw, {})
    return dict(decoded)


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
    mode = _choose_mode(mode, append_dim, region)
    _check_names(dataset)
    _check_attrs(dataset)
    user_encoding = {NONE_NAME if k is None else k: _encoding_of(k, v) for k, v in (encoding or {}).items()}
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
    # unseen) and every document published at once (not for Zarr v2 on object stores)
    swapped = g.store.capabilities.conditional_writes
    atomic = (
        append_dim is not None
        and bool(existing)
        and not (swapped and not nodes.format_of(g.metadata).records)
    )
    with _locked(g, existing, dataset.variables) if atomic and not swapped else contextlib.nullcontext():
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


def _locked(
    g: Group, existing: Mapping[str, Array], names: Iterable[Any] = ()
) -> contextlib.AbstractContextManager[None]:
    """The locks of the group's document, its ancestors', its arrays' and those of the arrays of ``names``
    that an append may create (taken at once: a hold takes no more locks)."""
    paths = {g.path, *nodes.parent_paths(g.path), *(a.path for a in existing.values())}
    paths.update(nodes.join(g.path, str(name)) for name in names)
    return g.store.lock([nodes.meta_key(p) for p in sorted(paths)])


def _publish(g: Group, existing: Mapping[str, Array], staged: Mapping[str, Array], check: bool) -> None:
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
    with _locked(g, existing):
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
    """:func:`_publish` on a store with conditional writes (:func:`rectizarr.nodes.publish_swapped`): each
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
    ds, slices = (dataset, {}) if region is None else _region(dataset, region, mode, append_dim, g)
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
            return _finish(g, writes, compute=compute, consolidated=consolidated)
        if compute:
            if writes:
                _untyped("dask").compute(*writes)
            _publish(g, existing, staged, check=False)
            return _finish(g, [], compute=True, consolidated=consolidated)
        return _finish(
            g,
            writes,
            compute=False,
            consolidated=consolidated,
            before=lambda: _publish(g, existing, staged, check=True),
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
    if append_dim is not None and existing and not _has_dim(existing, str(append_dim)):
        dims = _stored_dims(existing)
        raise ValueError(f"append_dim={append_dim!r} does not match any existing dataset dimensions {dims}")
    if not region:
        _check_new_sizes(ds, existing, append_dim)
    ds = ds.copy(deep=False)
    old_names = [n for n in map(str, ds.variables) if n in existing]
    stored = _existing_encodings(g, old_names) if old_names else {}
    for key in ds.variables:
        name = str(key)
        if name in stored:
            _check_dtype(name, stored[name], ds.variables[key])
            ds.variables[key].encoding = dict(stored[name].encoding)
        elif key in user_encoding:
            ds.variables[key].encoding = dict(user_encoding[key])
    variables, attrs = conventions.encode_dataset_coordinates(ds)
    fmt = g.metadata.zarr_format
    encoded = {
        key: xz.encode_zarr_variable(raw, name=str(key), zarr_format=fmt) for key, raw in variables.items()
    }
    plans = {
        str(key): _planned(
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
            writes += _write_staged(staged[name], plans[name])
        elif name in plans:
            writes += _write_existing(existing[name], plans[name])
        else:
            writes += _write_new(
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


def _check_new_sizes(ds: Dataset, existing: Mapping[str, Array], append_dim: Hashable | None) -> None:
    """A new variable must fit the dimensions as they will be stored (xarray writes it anyway, and the
    group then opens with no engine: "conflicting sizes for dimension")."""
    stored = _stored_dims(existing)
    for key, var in ds.variables.items():
        if str(key) in existing:
            continue
        for d, n in zip(map(str, var.dims), var.shape, strict=True):
            if d not in stored:
                continue
            want = stored[d] + (ds.sizes[d] if d == str(append_dim) else 0)
            if n != want:
                raise ValueError(
                    f"conflicting sizes for dimension {d!r}: new variable {str(key)!r} has length {n}, "
                    f"but the stored dataset will have length {want} (writing it would leave a group "
                    "that no engine opens)"
                )


def _has_dim(existing: Mapping[str, Array], dim: str) -> bool:
    return any(dim in (a.dimension_names or ()) for a in existing.values())


def _stored_dims(existing: Mapping[str, Array]) -> dict[str, int]:
    dims: dict[str, int] = {}
    for a in existing.values():
        for d, n in zip(a.dimension_names or (), a.shape, strict=False):
            if d is not None:
                dims.setdefault(d, n)
    return dims


def _check_dtype(name: str, stored: Variable, new: Variable) -> None:
    """xarray's rule: numbers, datetimes, bools and objects append freely; fixed-width strings must match."""
    if (
        np.issubdtype(new.dtype, np.number)
        or np.issubdtype(new.dtype, np.datetime64)
        or np.issubdtype(new.dtype, np.bool_)
        or new.dtype == object
        or (new.dtype.kind in ("S", "U") and stored.dtype == object)
    ):
        return
    if new.dtype != stored.dtype:
        raise ValueError(
            f"Mismatched dtypes for variable {name} between Zarr store on disk and dataset to append. "
            f"Store has dtype {stored.dtype} but dataset to append has dtype {new.dtype}."
        )


class _Plan(NamedTuple):
    """A checked write into a stored array: the values (in the stored dimension order and dtype), the shape
    (grown by an append) with the new edges of a rectilinear append axis, and the target region."""

    data: Any
    shape: tuple[int, ...]
    edges: list[Any] | None
    target: tuple[slice, ...]


def _planned(
    name: str,
    var: Variable,
    array: Array,
    append_dim: Hashable | None,
    region: dict[Hashable, slice],
    safe_chunks: bool,
    mode: str,
    align_chunks: bool = False,
) -> _Plan:
    """Check a write into a stored array (xarray's checks; safe chunks against the grid as the write leaves
    it) and cast its values to the stored dtype, so that values that do not fit fail before any resize."""
    var = check_existing(name, var, array, append_dim, region)
    dims = tuple(str(d) for d in var.dims)
    data = _as_stored(var.data if is_dask(var.data) else np.asarray(var.data), array)
    shape, edges, grid = array.shape, None, array.grid
    if append_dim is not None and str(append_dim) in dims:
        axis = dims.index(str(append_dim))
        shape = tuple(n + var.shape[axis] if i == axis else n for i, n in enumerate(shape))
        if is_dask(data) and not isinstance(grid.dims[axis], FixedDim):  # the (non-empty) blocks: new chunks
            edges = [[c for c in data.chunks[axis] if c] if i == axis else None for i in range(array.ndim)]
        grid = grid.resize(shape, "new_chunk" if edges is None else edges)
        target = tuple(slice(array.shape[axis], n) if i == axis else slice(0, n) for i, n in enumerate(shape))
    else:
        target = target_slices(dims, shape, region)
    if align_chunks and is_dask(data):
        data = aligned_rechunk(data, target, all_data_lens(grid.dims))
    if safe_chunks and is_dask(data):
        # dask blocks must not share a stored chunk; with mode "r+" (xarray's rule) a region must also
        # start and end on chunk boundaries, where "a" lets its first and last blocks write part of one
        check_safe_chunks(
            name, data.chunks, target, all_data_lens(grid.dims), edges=bool(region) and mode == "r+"
        )
    return _Plan(data, shape, edges, target)


def _as_stored(data: Any, array: Array) -> Any:
    """``data`` (NumPy or dask) cast to the stored dtype as zarr-python casts it (numbers and bytes written
    into a string array become text: :meth:`Array.__setitem__`'s cast, done here before any resize)."""
    data = data.astype(array.dtype, copy=False)
    if array.metadata.data_type.name != "string":
        return data
    return data.map_blocks(as_strings, dtype=object) if is_dask(data) else as_strings(data)


def _write_existing(array: Array, plan: _Plan) -> list[Any]:
    """Append to, overwrite, or write a region of a stored array (checked, and grown, already)."""
    if is_dask(plan.data):
        da = _untyped("dask.array")
        return [da.store(plan.data, array, regions=plan.target, lock=False, compute=False)]
    if plan.data.size:
        array[plan.target] = plan.data
    return []


def _write_staged(array: Array, plan: _Plan) -> list[Any]:
    """Write an append's data into a staged array (its document not yet published)."""
    if is_dask(plan.data):
        da = _untyped("dask.array")
        return [da.store(plan.data, StagedTarget(array), regions=plan.target, lock=False, compute=False)]
    if plan.data.size:
        array.write_staged(plan.target, plan.data)
    return []


def _write_new(
    name: str,
    var: Variable,
    g: Group,
    *,
    strict: bool,
    write_empty_chunks: bool | None,
    zarr_format: int,
    safe_chunks: bool,
    align_chunks: bool = False,
) -> list[Any]:
    """Create the array of a new variable (chunks from the encoding, else dask blocks, else auto)."""
    data = var.data
    kwargs = array_kwargs(
        name, var, strict=strict, dask_chunks=data.chunks if is_dask(data) else None, zarr_format=zarr_format
    )
    if write_empty_chunks is not None:
        kwargs["write_empty_chunks"] = write_empty_chunks
    if is_dask(data):
        storage = storage_lengths(kwargs.get("chunks"), kwargs.get("shards"), tuple(var.shape))
        if align_chunks and storage is not None:
            data = aligned_rechunk(data, tuple(slice(0, n) for n in var.shape), storage)
        if safe_chunks and storage is not None:  # dask blocks that share a chunk (shard) would race
            check_safe_chunks(name, data.chunks, tuple(slice(0, n) for n in var.shape), storage, edges=False)
        path = f"{g.path}/{name}" if g.path else name
        return [
            from_dask(
                data, g.store, name=path, compute=False, overwrite=True, zarr_format=zarr_format, **kwargs
            )
        ]
    values = np.asarray(data)
    array = g.create_array(name, shape=values.shape, overwrite=True, zarr_format=zarr_format, **kwargs)
    if values.size:
        array[...] = values
    return []


def _finish(
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
    return _finish(root, delayed, compute=compute, consolidated=consolidated)
