"""Opening what is at a path, an array or a group (:func:`open`), and consolidating a group's metadata
(:func:`consolidate_metadata`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rectizarr import nodes
from rectizarr.api import open_array, open_node
from rectizarr.core.metadata import ArrayMeta, NodeMeta
from rectizarr.errors import NodeTypeError
from rectizarr.groups.group import Group, open_group

__all__ = ["consolidate_metadata", "open"]


def consolidate_metadata(
    store: Any, path: str | None = None, *, storage_options: Mapping[str, Any] | None = None
) -> Group:
    """Write every descendant's metadata into the group's ``zarr.json`` (zarr-python's inline form)."""
    s = nodes.store_for(store, "r+", storage_options)
    p = nodes.normalize_path(path)
    return Group(s, p, nodes.format_of(nodes.read_meta(s, p)).consolidate(s, p))


def open(
    store: Any = None,
    *,
    path: str | None = None,
    mode: str = "a",
    storage_options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Any:
    """Open the array or group at ``path``, dispatching on its ``node_type``. As in zarr-python, the
    default ``mode="a"`` creates what is missing: an array when ``shape`` is given, else a group;
    ``"w"`` / ``"w-"`` create likewise; ``"r"`` / ``"r+"`` open what exists."""
    s = nodes.store_for(store, mode, storage_options)
    p = nodes.normalize_path(path)
    zarr_format = kwargs.pop("zarr_format", None)

    def new(overwrite: bool) -> Any:
        opener: Callable[..., Any] = open_array if "shape" in kwargs else open_group
        return opener(s, path=p, mode="w" if overwrite else "w-", zarr_format=zarr_format, **kwargs)

    def opened(meta: NodeMeta) -> Any:
        if isinstance(meta, ArrayMeta):
            return open_array(s, path=p, mode=mode, zarr_format=meta.zarr_format, **kwargs)
        unexpected = sorted(set(kwargs) - {"use_consolidated", "attributes"})
        if unexpected:
            raise NodeTypeError(
                f"the node at {p or '/'!r} in {s!r} is a group; keywords {unexpected} are for creating an array"
            )
        return open_group(s, path=p, mode=mode, zarr_format=meta.zarr_format, **kwargs)

    return open_node(s, p, mode, zarr_format, new, opened)
