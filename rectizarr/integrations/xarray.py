"""xarray integration: ``xarray.open_dataset(path, engine="rectizarr")`` and :func:`to_rectizarr`.

Reading: a group's arrays become the variables of a Dataset; dimensions come from each array's
``dimension_names``; attributes and CF decoding (times, scale/offset, ``_FillValue``, the ``coordinates``
attribute) follow xarray's Zarr v3 conventions, so stores written by ``Dataset.to_zarr(zarr_format=3)``
open identically. Data loads lazily, one orthogonal selection per access; with ``chunks={}`` the dask
chunks are the storage chunks (shards when sharded; rectilinear grids give irregular dask chunks).
Backend arrays hold a picklable :class:`~rectizarr.integrations.dask.ArrayRef`, so datasets run on distributed workers.

Arrays without ``dimension_names`` raise (0-d ones need none), as xarray's own Zarr backend does; pass
``unnamed_dims="dim_n"`` to name their missing dimensions ``dim_0``, ``dim_1``, ... by axis instead.

Groups: ``xarray.open_datatree(path, engine="rectizarr")`` and ``xarray.open_groups`` read every group.

Writing: :func:`to_rectizarr` (``Dataset.to_zarr``'s arguments: modes, ``append_dim``, ``region``,
``encoding``, ``consolidated``, ``safe_chunks``), also as ``ds.rectizarr.to_zarr(...)`` and
``tree.rectizarr.to_zarr(...)`` once :mod:`rectizarr.xarray` is imported (see :mod:`.xarray_write`).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from xarray import Dataset
from xarray.backends import BackendEntrypoint
from xarray.backends.store import StoreBackendEntrypoint

from rectizarr.core.spec import check_zarr_format
from rectizarr.errors import MetadataError
from rectizarr.groups import Group, open_group
from rectizarr.integrations.xarray_read import RectizarrBackendArray, RectizarrDataStore
from rectizarr.integrations.xarray_write import to_rectizarr, to_rectizarr_tree
from rectizarr.stores import Store

__all__ = [
    "RectizarrBackendArray",
    "RectizarrBackendEntrypoint",
    "RectizarrDataStore",
    "to_rectizarr",
    "to_rectizarr_tree",
]


def _open_group(
    obj: Any,
    group: str | None,
    storage_options: Mapping[str, Any] | None,
    consolidated: bool | None = None,
    zarr_format: int | None = None,
) -> Group:
    check_zarr_format(zarr_format, optional=True)
    if isinstance(obj, Group):
        node = obj[group] if group else obj
        if not isinstance(node, Group):
            raise MetadataError(f"{group!r} in {obj.name!r} is an array, not a group")
        return node
    g = open_group(obj, path=group, mode="r", storage_options=storage_options, use_consolidated=consolidated)
    if (
        consolidated is None
        and g.metadata.consolidated_metadata is None
        and (not g.path or open_group(g.store, mode="r").metadata.consolidated_metadata is None)
    ):
        warnings.warn(
            "Failed to open Zarr store with consolidated metadata, but successfully read with "
            "non-consolidated metadata (rectizarr lists the store). This is typically much slower for "
            "opening a dataset. To silence this warning, consolidate the metadata "
            "(rectizarr.consolidate_metadata) or pass consolidated=False; consolidated=True raises "
            "instead.",
            RuntimeWarning,
            stacklevel=4,
        )
    return g


class RectizarrBackendEntrypoint(BackendEntrypoint):
    """``xarray.open_dataset(path, engine="rectizarr")``: a Zarr v3 group as a Dataset, read by rectizarr.

    ``filename_or_obj`` is anything :func:`rectizarr.open_group` takes (a directory, an fsspec URL, a
    rectizarr store) or a :class:`~rectizarr.Group`; ``group`` selects a sub-group; ``storage_options``
    go to fsspec; ``unnamed_dims`` is ``"raise"`` (xarray's behaviour) or ``"dim_n"``.
    """

    description = "Open Zarr v3 groups (rectilinear chunk grids and sharding included) with rectizarr"
    url = "https://github.com/rectizarr/rectizarr"
    open_dataset_parameters = (
        "filename_or_obj",
        "mask_and_scale",
        "decode_times",
        "concat_characters",
        "decode_coords",
        "drop_variables",
        "use_cftime",
        "decode_timedelta",
        "group",
        "storage_options",
        "unnamed_dims",
        "consolidated",
        "zarr_format",
        "use_zarr_fill_value_as_mask",
        "mode",
    )
    supports_groups = True

    def open_dataset(
        self,
        filename_or_obj: Any,
        *,
        mask_and_scale: bool = True,
        decode_times: Any = True,
        concat_characters: bool = True,
        decode_coords: Any = True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime: bool | None = None,
        decode_timedelta: Any = None,
        group: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        unnamed_dims: str = "raise",
        consolidated: bool | None = None,
        zarr_format: int | None = None,
        use_zarr_fill_value_as_mask: bool | None = None,
        mode: str = "r",
    ) -> Dataset:
        """``consolidated``: None uses consolidated metadata when present, True requires it, False lists
        the store; ``zarr_format`` is checked, not needed (the stored documents say which);
        ``use_zarr_fill_value_as_mask`` as xarray's (None: for Zarr v2 arrays, as xarray writes them);
        ``mode`` as xarray's Zarr engine takes it: the group is read only, whichever of ``"r"``, ``"r+"``
        or ``"a"`` is given."""
        _check_read_mode(mode)
        g = _open_group(filename_or_obj, group, storage_options, consolidated, zarr_format)
        store = RectizarrDataStore(
            g, unnamed_dims=unnamed_dims, use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask
        )
        return _decode(
            store,
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
            drop_variables=drop_variables,
            use_cftime=use_cftime,
            decode_timedelta=decode_timedelta,
        )

    def open_groups_as_dict(
        self,
        filename_or_obj: Any,
        *,
        drop_variables: str | Iterable[str] | None = None,
        group: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        consolidated: bool | None = None,
        zarr_format: int | None = None,
        unnamed_dims: str = "raise",
        use_zarr_fill_value_as_mask: bool | None = None,
        mode: str = "r",
        **decode: Any,
    ) -> dict[str, Dataset]:
        """Every group below ``group`` (itself included) as a Dataset, keyed ``"/"``, ``"/a"``, ``"/a/b"``."""
        _check_read_mode(mode)
        root = _open_group(filename_or_obj, group, storage_options, consolidated, zarr_format)
        tree = {
            "/": root,
            **{"/" + path: node for path, node in root.members(max_depth=None) if isinstance(node, Group)},
        }
        return {
            path: _decode(
                RectizarrDataStore(
                    g, unnamed_dims=unnamed_dims, use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask
                ),
                drop_variables=drop_variables,
                **decode,
            )
            for path, g in tree.items()
        }

    def open_datatree(
        self, filename_or_obj: Any, *, drop_variables: str | Iterable[str] | None = None, **kwargs: Any
    ) -> Any:
        """The hierarchy below ``group`` as an ``xarray.DataTree`` (same keywords as :meth:`open_groups_as_dict`)."""
        from xarray import DataTree

        return DataTree.from_dict(
            self.open_groups_as_dict(filename_or_obj, drop_variables=drop_variables, **kwargs)
        )

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """Only a local Zarr v3 (or v2) directory, and only when zarr-python (xarray's own Zarr engine) is absent,
        so that installing rectizarr never changes which engine ``open_dataset`` picks by default."""
        if isinstance(filename_or_obj, Group | Store):
            return True
        if not isinstance(filename_or_obj, str | os.PathLike) or importlib.util.find_spec("zarr") is not None:
            return False
        root = os.fspath(filename_or_obj)
        return any(os.path.isfile(os.path.join(root, name)) for name in ("zarr.json", ".zgroup", ".zarray"))


def _check_read_mode(mode: str) -> None:
    if mode not in ("r", "r+", "a"):
        raise ValueError(
            f"mode={mode!r}: opening a dataset reads it; give 'r' (or 'r+' / 'a', which read too)"
        )


def _decode(store: RectizarrDataStore, **kwargs: Any) -> Dataset:
    ds: Dataset = StoreBackendEntrypoint().open_dataset(store, **kwargs)
    return ds
