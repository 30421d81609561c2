"""Validation of a Zarr v2 hierarchy (``.zarray``, ``.zgroup``, ``.zattrs``, ``.zmetadata``), reported
through the checker of :mod:`rectizarr.validate` (which dispatches here when the root is a v2 node).

Checked: every document decodes and validates (the JSON path of each problem), ancestors of a node are
groups with a ``.zgroup`` (zarr-python 2 reads implicit groups, so a missing one is tolerated), nothing
lives inside an array, every key of an array is a chunk key inside the grid, every chunk decodes, and a
``.zmetadata`` matches the documents it consolidates.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from rectizarr import nodes
from rectizarr.arrays import Array
from rectizarr.core import v2meta
from rectizarr.core.metadata import ArrayMeta, NodeMeta
from rectizarr.errors import ChecksumError, CodecError, RectizarrError
from rectizarr.stores import Store

__all__ = ["Reporter", "check_v2"]

T = TypeVar("T")


class Reporter(Protocol):
    """What the v2 checks need of the validator: report errors and tolerated deviations, run a parse."""

    store: Store

    def error(self, key: str, path: str, rule: str, message: str) -> None: ...
    def tolerated(self, key: str, path: str, rule: str, message: str) -> None: ...
    def run(self, key: str, path: str, rule: str, fn: Callable[[], T]) -> T | None: ...
    def count(self, nodes_checked: int = 0, chunks_checked: int = 0) -> None: ...


def _doc(check: Reporter, key: str) -> Any:
    data = check.store.get(key)
    if data is None:
        return None
    try:
        return json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        check.error(key, "$", "json.syntax", f"not valid JSON: {exc}")
        return None


def _node(check: Reporter, path: str, leaf: str) -> NodeMeta | None:
    p = nodes.prefix_of(path)
    key = p + leaf
    doc, attrs = _doc(check, key), _doc(check, p + v2meta.V2_ATTRS)
    if doc is None:
        return None
    if leaf == v2meta.V2_ARRAY:
        return check.run(key, "$", "metadata", lambda: v2meta.decode_v2_array(doc, attrs, key))
    return check.run(key, "$", "metadata", lambda: v2meta.decode_v2_group(doc, attrs, None, key))


def check_v2(check: Reporter, root: str, keys: list[str]) -> None:
    """Check the v2 hierarchy at ``root`` whose store keys are ``keys``."""
    prefix = nodes.prefix_of(root)
    found: dict[str, NodeMeta | None] = {}
    for key in keys:
        head, _, leaf = key.rpartition("/")
        if leaf in (v2meta.V2_ARRAY, v2meta.V2_GROUP) and key.startswith(prefix):
            found[head] = _node(check, head, leaf)
            check.count(nodes_checked=1)
    arrays = {p: m for p, m in found.items() if isinstance(m, ArrayMeta)}
    for path in found:
        for parent in nodes.parent_paths(path):
            if len(parent) < len(root):
                continue
            if parent in arrays:
                check.error(
                    nodes.prefix_of(path) + v2meta.V2_ARRAY,
                    "",
                    "hierarchy.inside_array",
                    f"a node inside the array {parent or '/'!r}",
                )
            elif parent not in found:
                check.tolerated(
                    nodes.prefix_of(parent) + v2meta.V2_GROUP,
                    "",
                    "hierarchy.implicit_group",
                    f"ancestor {parent or '/'!r} of {path!r} has no .zgroup",
                )
    _chunks(check, prefix, keys, found, arrays)
    zmeta_key = prefix + v2meta.V2_CONSOLIDATED
    if zmeta_key in keys:
        _consolidated(check, zmeta_key, prefix, keys)


def _chunks(
    check: Reporter,
    prefix: str,
    keys: list[str],
    found: dict[str, NodeMeta | None],
    arrays: dict[str, ArrayMeta],
) -> None:
    owners = sorted((nodes.prefix_of(p) for p in found), key=len, reverse=True)
    owned: dict[str, list[str]] = {p: [] for p in arrays}
    for key in keys:
        if key.rpartition("/")[2] in (*v2meta.V2_KEYS, v2meta.V2_CONSOLIDATED):
            continue
        owner = next((p for p in owners if key.startswith(p)), None)
        path = owner.rstrip("/") if owner is not None else None
        if path is not None and path in arrays:
            owned[path].append(key)
        else:
            check.tolerated(
                key, "", "hierarchy.stray_key", "a key that belongs to no array; readers ignore it"
            )
    for path, meta in arrays.items():
        _array_chunks(check, path, meta, owned[path])


def _array_chunks(check: Reporter, path: str, meta: ArrayMeta, keys: list[str]) -> None:
    try:
        arr = Array(check.store, path, meta, read_only=True)
    except RectizarrError as exc:
        check.error(nodes.prefix_of(path) + v2meta.V2_ARRAY, "$", "codecs.invalid", str(exc))
        return
    grid, cke, prefix = meta.chunk_grid, meta.chunk_key_encoding, nodes.prefix_of(path)
    for key in keys:
        coords = cke.decode(key[len(prefix) :], grid.ndim)
        if coords is None or not grid.is_in_grid(coords):
            check.tolerated(
                key,
                "",
                "chunks.stray_key",
                f"not a chunk key inside the grid {grid.grid_shape} (separator {cke.separator!r})",
            )
            continue
        check.count(chunks_checked=1)
        try:
            arr[grid.chunk_region(coords)]
        except ChecksumError as exc:
            check.error(key, "", "chunks.checksum", str(exc))
        except CodecError as exc:
            check.error(key, "", "chunks.decode", str(exc))
        except RectizarrError as exc:
            check.error(key, "", "chunks.read", f"{type(exc).__name__}: {exc}")


def _consolidated(check: Reporter, key: str, prefix: str, keys: list[str]) -> None:
    doc = _doc(check, key)
    if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
        check.error(key, "$.metadata", "consolidated.form", '.zmetadata must be {"metadata": {...}}')
        return
    entries = doc["metadata"]
    stored = {k[len(prefix) :] for k in keys if k.rpartition("/")[2] in v2meta.V2_KEYS}
    for rel in sorted(set(entries) | stored):
        if rel not in entries:
            check.tolerated(key, "$.metadata", "consolidated.stale", f"{rel!r} is missing from .zmetadata")
        elif rel not in stored:
            check.tolerated(
                key, "$.metadata", "consolidated.stale", f"entry {rel!r} names no stored document"
            )
        elif _doc(check, prefix + rel) != _without_own_listing(entries[rel]):
            check.tolerated(key, "$.metadata", "consolidated.stale", f"entry {rel!r} differs from the store")


def _without_own_listing(entry: Any) -> Any:
    """zarr-python 3 adds an empty ``consolidated_metadata`` to the ``.zgroup`` entries it consolidates."""
    if isinstance(entry, dict) and "consolidated_metadata" in entry:
        return {k: v for k, v in entry.items() if k != "consolidated_metadata"}
    return entry
