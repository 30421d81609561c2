"""What ``Dataset.to_zarr`` is asked, checked as xarray checks it before anything is written: the mode, the
names and attributes of the variables, their encodings, the region (``"auto"`` found from the stored
coordinates), the sizes of new variables and the dtypes of appended ones (:mod:`.xarray_write`)."""

from __future__ import annotations

import importlib
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
from xarray import Dataset, Variable, conventions

from rectizarr.arrays import Array
from rectizarr.core.metadata import check_attributes
from rectizarr.errors import MetadataError
from rectizarr.groups import Group
from rectizarr.integrations.xarray_read import RectizarrDataStore

__all__ = [
    "NONE_NAME",
    "check_attrs",
    "check_dtype",
    "check_names",
    "check_new_sizes",
    "choose_mode",
    "encoding_of",
    "existing_encodings",
    "has_dim",
    "resolve_region",
    "stored_dims",
]

_MODES = ("w", "w-", "a", "a-", "r+")


def _untyped(module: str) -> Any:
    return importlib.import_module(module)


def choose_mode(mode: str | None, append_dim: Hashable | None, region: Any) -> str:
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


def check_names(ds: Dataset) -> None:
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


def check_attrs(ds: Dataset) -> None:
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


def encoding_of(name: Hashable, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"encoding for variable {name!r} must be castable to a dictionary, got {value!r}")
    return dict(value)


def _auto_region(ds: Dataset, region: dict[Hashable, Any], g: Group) -> dict[Hashable, Any]:
    """``"auto"`` entries found by looking the dataset's coordinate values up in the stored ones."""
    pd = _untyped("pandas")

    for dim, value in list(region.items()):
        if not (isinstance(value, str) and value == "auto"):
            continue
        if dim not in ds.variables:
            region[dim] = slice(0, ds.sizes[dim])
            continue
        stored = existing_encodings(g, [str(dim)])[str(dim)]
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


def resolve_region(
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


def existing_encodings(g: Group, names: list[str]) -> dict[str, Variable]:
    """The stored variables, CF-decoded, so new values are encoded exactly as the stored ones."""
    reader = RectizarrDataStore(g, unnamed_dims="dim_n")
    raw = {n: reader.open_store_variable(n, g[n]) for n in names}  # type: ignore[arg-type]
    decoded, _, _ = conventions.decode_cf_variables(raw, {})
    return dict(decoded)


def check_new_sizes(ds: Dataset, existing: Mapping[str, Array], append_dim: Hashable | None) -> None:
    """A new variable must fit the dimensions as they will be stored (xarray writes it anyway, and the
    group then opens with no engine: "conflicting sizes for dimension")."""
    stored = stored_dims(existing)
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


def has_dim(existing: Mapping[str, Array], dim: str) -> bool:
    return any(dim in (a.dimension_names or ()) for a in existing.values())


def stored_dims(existing: Mapping[str, Array]) -> dict[str, int]:
    dims: dict[str, int] = {}
    for a in existing.values():
        for d, n in zip(a.dimension_names or (), a.shape, strict=False):
            if d is not None:
                dims.setdefault(d, n)
    return dims


def check_dtype(name: str, stored: Variable, new: Variable) -> None:
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
