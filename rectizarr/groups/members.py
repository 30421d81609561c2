"""What a group lists: its members as its consolidated metadata holds them (:class:`Consolidated`)."""

from __future__ import annotations

import warnings
from typing import Any

from rectizarr import nodes
from rectizarr.core.metadata import GroupMeta, NodeMeta
from rectizarr.errors import LenientMetadataWarning, MetadataError

__all__ = ["Consolidated"]


class Consolidated:
    """The members of the group ``meta`` at ``path`` as its consolidated metadata lists them: ``entries``,
    those whose path can name a node, and their metadata parsed once (:meth:`meta_of`). Other entries
    (``""``, ``"a//b"``, ``".."``: no stored node can have such a path, and listing the store ignores such
    names too) are skipped with a warning rather than refusing the group: consolidated metadata is an
    optional cache of the hierarchy."""

    def __init__(self, meta: GroupMeta, path: str) -> None:
        cm = meta.consolidated_metadata
        if cm is None or cm.get("kind") != "inline" or not isinstance(cm.get("metadata"), dict):
            raise MetadataError(
                "consolidated_metadata must be {'kind': 'inline', 'metadata': {...}}",
                path="$.consolidated_metadata",
                key=nodes.meta_key(path),
            )
        self.meta = meta
        self.format = nodes.format_of(meta)
        self.key = self.format.consolidated_key(path)  # (zarr.json, or Zarr v2's .zmetadata)
        self.entries: dict[str, Any] = {}
        self._parsed: dict[str, NodeMeta] = {}
        for rel, doc in cm["metadata"].items():
            problem = nodes.member_path_problem(rel)
            if problem is None:
                self.entries[rel] = doc
            else:
                warnings.warn(
                    f"{self.key}: {self.format.entry_path(rel)}: {problem}; entry ignored",
                    LenientMetadataWarning,
                    stacklevel=4,
                )

    def meta_of(self, rel: str) -> NodeMeta:
        """Member ``rel``'s metadata (it must be among the entries), parsed once."""
        meta = self._parsed.get(rel)
        if meta is None:
            try:
                meta = self._parsed[rel] = nodes.node_from_json(self.entries[rel])
            except MetadataError as exc:  # named where it is: in this group's consolidated metadata
                where = self.format.entry_path(rel, self.entries[rel])
                inner = exc.path[1:] if exc.path and exc.path.startswith("$") else ""
                raise type(exc)(exc.message, path=where + inner, key=self.key) from exc
        return meta
