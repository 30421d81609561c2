"""Groups and hierarchies, with consolidated metadata kept current under our own writes.

Consolidated metadata uses zarr-python's inline form: the group's ``zarr.json`` holds
``{"consolidated_metadata": {"kind": "inline", "must_understand": false, "metadata": {rel_path: doc}}}``
with every descendant's document under its path relative to the group. When present it answers listings
and member opens without touching the store; every node rectizarr creates, deletes, resizes or
re-attributes refreshes it (:mod:`rectizarr.nodes`), so our own writes never leave it stale.

The package: :mod:`.group` (:class:`Group`, :func:`create_group`, :func:`open_group`), :mod:`.members` (the
members the consolidated metadata lists), :mod:`.opening` (:func:`open`, :func:`consolidate_metadata`)."""

from __future__ import annotations

from rectizarr.groups.group import Group as Group
from rectizarr.groups.group import create_group as create_group
from rectizarr.groups.group import open_group as open_group
from rectizarr.groups.opening import consolidate_metadata as consolidate_metadata
from rectizarr.groups.opening import open as open

__all__ = ["Group", "consolidate_metadata", "create_group", "open", "open_group"]
