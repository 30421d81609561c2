"""Updates of several node documents at once through commit records (:mod:`rectizarr.commit`): a node
and the consolidated copies of it held by its ancestor groups, published as one update (all or nothing)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rectizarr import commit
from rectizarr.core.metadata import GroupMeta, NodeMeta, decode_node, node_to_json
from rectizarr.nodes.paths import AncestorDocs, meta_key, parent_paths, relative
from rectizarr.stores import Store


def decoded(store: Store, path: str, data: bytes) -> NodeMeta | None:
    """A node's ``zarr.json`` as readers see it: a marker of an update in progress (or of one a killed
    writer left) decided by its commit record (:mod:`rectizarr.commit`; None: the node is not there)."""
    meta = decode_node(data, meta_key(path))
    return commit.resolve(store, path, meta) if commit.MARK in meta.extra_fields else meta


def inline(entries: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Inline consolidated metadata holding ``entries`` (None: none), shallowest first, then by name."""
    ordered = dict(sorted((entries or {}).items(), key=lambda kv: (kv[0].count("/"), kv[0])))
    return {"kind": "inline", "must_understand": False, "metadata": ordered}


def with_entry_meta(meta: NodeMeta | None, rel: str, doc: dict[str, Any] | None) -> GroupMeta | None:
    """The group ``meta`` with its consolidated entry ``rel`` set to ``doc`` (None: removed, with its
    descendants); None when ``meta`` does not consolidate."""
    if not isinstance(meta, GroupMeta) or meta.consolidated_metadata is None:
        return None
    entries = dict(meta.consolidated_metadata.get("metadata") or {})
    if doc is None:
        entries = {k: v for k, v in entries.items() if k != rel and not k.startswith(rel + "/")}
    else:
        entry = dict(doc)
        entry.pop(commit.MARK, None)
        if entry.get("node_type") == "group":
            entry.pop("consolidated_metadata", None)
            entry["consolidated_metadata"] = inline()
        entries[rel] = entry
    updated = {**meta.consolidated_metadata, "metadata": entries}
    return GroupMeta(
        attributes=meta.attributes, consolidated_metadata=updated, extra_fields=meta.extra_fields
    )


def primary_for(store: Store, path: str, docs: AncestorDocs | None = None) -> str | None:
    """The group whose document commits a change of the v3 node at ``path`` (:func:`commit.update`): its
    topmost consolidating ancestor; None where none is (a plain compare-and-swap of its own document)."""
    return commit.primary_of(store, path, (docs or AncestorDocs(store)).get) if path else None


def publish(
    store: Store,
    primary: str,
    changes: Mapping[str, Callable[[NodeMeta | None], NodeMeta | None]],
    create_only: frozenset[str] = frozenset(),
) -> tuple[dict[str, NodeMeta | None], dict[str, NodeMeta | None]]:
    """Changes of nodes below the group ``primary`` as one update (:func:`commit.update`): each
    ``changes[path]`` maps the node's content as stored (None: none) to its new one (None: deleted; it
    may run again after a conflict), the consolidated metadata of ``primary`` and of every group between
    brought up to date. Returns the contents before and after, by path."""
    paths: list[str] = []
    for path in changes:
        for parent in (*parent_paths(path), path):
            below = len(parent) > len(primary) and (not primary or parent.startswith(primary + "/"))
            if below and parent not in paths:
                paths.append(parent)

    def plan(
        p_meta: NodeMeta, olds: dict[str, NodeMeta | None]
    ) -> tuple[NodeMeta, dict[str, NodeMeta | None]]:
        news = {path: change(olds[path]) for path, change in changes.items()}
        groups: dict[str, Any] = {primary: p_meta}
        for path, after in list(news.items()):
            doc = None if after is None else node_to_json(after)
            for parent in parent_paths(path):
                if parent not in groups and parent not in paths:
                    continue  # (above the primary)
                if parent not in groups:
                    groups[parent] = news[parent] if parent in news else olds.get(parent)
                # the group with path's entry brought up to date (None: not there, or not consolidating)
                updated = with_entry_meta(groups[parent], relative(path, parent), doc)
                if updated is not None:
                    groups[parent] = updated
                    if parent != primary:
                        news[parent] = updated
        return groups[primary], news

    return commit.update(store, primary, paths, plan, create_only)
