"""Virtual concatenation: one rectilinear array (or group) over many existing files, without copying.

:func:`concat` joins Zarr arrays or groups (v2 or v3, chunked or sharded, in any store with a URL) and
reference sets (fsspec's format, version 1) along one axis, and returns a reference set holding a Zarr v3
``zarr.json`` whose chunk edges along that axis are the sources' own, and one reference per stored chunk
into the sources' files (an inner chunk of a shard is a byte range of its shard). Open it with
``rectizarr.open_array("reference://", mode="r", storage_options={"fo": refs})`` or zarr-python (with
``zarr.config.set({"array.rectilinear_chunks": True})``).

Planning reads metadata only: each source's documents, one listing per unsharded source (a reference set lists
itself; a store that cannot list, HTTP, gets a one-byte read of each chunk: a reference to a missing file is
an error in fsspec, not a fill value), and each sharded source's shard indexes. Nothing is written before
every source has been checked. The one exception to "no chunk bytes": a source whose extent along the axis is
not a multiple of its chunk size stores its last chunk at the full chunk size, while the result's edge there
is shorter; such a chunk is re-encoded at its true size into ``side_store`` (raw ``bytes``-only chunks are
referenced as a byte prefix instead). The last chunk of the result keeps its stored size (a rectilinear grid
may overhang the extent)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import msgspec
import numpy as np

from rectizarr.arrays import Array
from rectizarr.core.dims import FixedDim
from rectizarr.core.grid import ChunkGrid
from rectizarr.core.metadata import ArrayMeta, GroupMeta, encode_node, node_to_json
from rectizarr.groups import Group
from rectizarr.nodes.records import inline
from rectizarr.virtual.arrays import OUT_KEYS, Part, Planned, part_of, plan_array, stored_chunks
from rectizarr.virtual.errors import ConcatError, SourceMismatchError, UnreferenceableError
from rectizarr.virtual.refs import encode_target, load_refs, write_refs
from rectizarr.virtual.rewrite import encode_edge, open_side
from rectizarr.virtual.sources import Source, open_source

__all__ = [
    "ConcatError",
    "Concatenation",
    "SourceMismatchError",
    "UnreferenceableError",
    "append",
    "build",
    "concat",
    "load_refs",
    "write_refs",
]


@dataclass(frozen=True)
class Concatenation:
    """What :func:`build` made: the reference set ``refs``, how many edge chunks were ``rewritten`` (into
    the side store, or inline), how many were referenced as a byte ``prefix`` of their stored value, and
    the paths of the ``joined`` arrays (``""``: the root array)."""

    refs: dict[str, Any]
    rewritten: int
    prefixes: int
    joined: tuple[str, ...]
    sources: int


def concat(sources: Sequence[Any], axis: int | str = 0, **options: Any) -> dict[str, Any]:
    """The reference set of ``sources`` joined along ``axis``; ``options`` are :func:`build`'s keywords (it
    also reports what it did)."""
    return build(sources, axis, **options).refs


def build(
    sources: Sequence[Any],
    axis: int | str = 0,
    *,
    side_store: Any = None,
    storage_options: Mapping[str, Any] | None = None,
    ref_options: Mapping[str, Any] | None = None,
    side_options: Mapping[str, Any] | None = None,
    identical_bytes: int = 1 << 20,
) -> Concatenation:
    """Join ``sources`` along ``axis`` into a reference set.

    ``sources``: paths or URLs of Zarr nodes, opened :class:`~rectizarr.Array` / :class:`~rectizarr.Group`
    objects, stores, reference sets (dicts) or reference-set files (``.json``, ``.parq``). All arrays, or
    all groups. Arrays join along ``axis`` (an int, or a dimension name). Groups join every array (at any
    depth) whose ``dimension_names`` hold ``axis`` (a dimension name) along it; every other array must be
    the same in every source (its metadata; and its values, when it is at most ``identical_bytes``) and
    is referenced from the first. ``side_store``: where rewritten edge chunks go (a path or URL; ``"inline"``
    embeds them in the reference set; None refuses when one is needed). ``storage_options`` open source
    paths and URLs, ``ref_options`` the reference filesystem of reference-set sources, ``side_options``
    the side store."""
    if not sources:
        raise ConcatError("no sources to concatenate", field="sources")
    opened = [
        open_source(s, i, storage_options=storage_options, ref_options=ref_options)
        for i, s in enumerate(sources)
    ]
    odd = next((s for s in opened if isinstance(s.node, Array) != isinstance(opened[0].node, Array)), None)
    if odd is not None:
        raise SourceMismatchError("sources mix arrays and groups", source=odd.name, field="node_type")
    if isinstance(opened[0].node, Array):
        parts = [part_of(s, s.node) for s in opened if isinstance(s.node, Array)]
        planned = {"": plan_array(parts, _axis_of(parts[0], axis), "")}
        groups: dict[str, GroupMeta] = {}
        joined: tuple[str, ...] = ("",)
    else:
        planned, groups, joined = _plan_groups(opened, axis, identical_bytes)
    needed = sum(len(p.rewrite) for p in planned.values())
    side = open_side(side_store, side_options, needed, opened[0].name)
    for p in planned.values():  # (everything is checked: from here on, rewritten chunks are written)
        if p.rewrite:
            for e, data in zip(p.rewrite, encode_edge(p.meta, p.rewrite), strict=True):
                p.refs[e.key] = side.put(data)
    refs = _assemble(planned, groups)
    return Concatenation(refs, needed, sum(p.prefixes for p in planned.values()), joined, len(opened))


def append(
    location: str | os.PathLike[str],
    new: Sequence[Any],
    axis: int | str = 0,
    *,
    side_store: Any = None,
    **kwargs: Any,
) -> Concatenation:
    """Add ``new`` sources to the end of the virtual array (or group) stored at ``location`` (a reference
    set file, rewritten in place): the daily/monthly workflow. The old last chunk, when it overhangs,
    is rewritten at its true size into ``side_store`` like any edge chunk."""
    result = build([os.fspath(location), *new], axis, side_store=side_store, **kwargs)
    write_refs(result.refs, location)
    return result


def _axis_of(part: Part, axis: int | str) -> int:
    if isinstance(axis, str):
        names = part.meta.dimension_names or ()
        if axis not in names:
            raise ConcatError(
                f"no dimension named {axis!r} (dimension_names: {list(names)})",
                source=part.source.name,
                field="dimension_names",
            )
        return names.index(axis)
    return axis


def _members(s: Source) -> tuple[dict[str, Array], dict[str, Group]]:
    members = list(cast(Group, s.node).members(max_depth=None))  # (build() checked the kinds)
    arrays = {path: child for path, child in members if isinstance(child, Array)}
    return arrays, {path: child for path, child in members if not isinstance(child, Array)}


def _plan_groups(
    opened: list[Source], axis: int | str, identical_bytes: int
) -> tuple[dict[str, Planned], dict[str, GroupMeta], tuple[str, ...]]:
    if not isinstance(axis, str):
        raise ConcatError(
            f"groups join along a dimension name (as in dimension_names), not {axis!r}", field="axis"
        )
    members = [_members(s) for s in opened]
    first_arrays, first_groups = members[0]
    for s, (arrays, grps) in zip(opened[1:], members[1:], strict=True):
        diff = sorted(set(arrays) ^ set(first_arrays) | set(grps) ^ set(first_groups))
        if diff:
            raise SourceMismatchError(
                f"members {diff} are not in every source", source=s.name, field="members"
            )
    planned: dict[str, Planned] = {}
    joined = []
    for path in sorted(first_arrays):
        parts = [part_of(s, m[0][path]) for s, m in zip(opened, members, strict=True)]
        names = parts[0].meta.dimension_names or ()
        if axis in names:
            planned[path] = plan_array(parts, names.index(axis), path)
            joined.append(path)
        else:
            _same(parts, path, identical_bytes)
            planned[path] = _copied(parts[0], path)
    found = {"": opened[0].node, **first_groups}
    groups = {path: GroupMeta(attributes=dict(g.metadata.attributes)) for path, g in found.items()}
    return planned, groups, tuple(joined)


def _copied(part: Part, path: str) -> Planned:
    """An array referenced as it is in one source (a group member without the axis)."""
    grid = ChunkGrid(
        part.dims, "regular" if all(isinstance(d, FixedDim) for d in part.dims) else "rectilinear"
    )
    out = Planned(msgspec.structs.replace(part.meta, chunk_key_encoding=OUT_KEYS, chunk_grid=grid))
    prefix = f"{path}/" if path else ""
    out.refs.update((prefix + OUT_KEYS.encode(coords), target) for coords, target in stored_chunks(part))
    return out


def _same(parts: list[Part], path: str, identical_bytes: int) -> None:
    """Refuse an array without the axis that differs between sources (metadata; small values too)."""
    first = parts[0]
    doc = node_to_json(msgspec.structs.replace(first.meta, chunk_key_encoding=OUT_KEYS))
    values = np.asarray(first.array[...]) if first.array.nbytes <= identical_bytes else None
    for p in parts[1:]:
        other = node_to_json(msgspec.structs.replace(p.meta, chunk_key_encoding=OUT_KEYS))
        for name in sorted(set(doc) | set(other)):
            if doc.get(name) != other.get(name):
                raise SourceMismatchError(
                    f"array {path!r} has no dimension to join along and its {name} "
                    f"{other.get(name)!r} differs from {doc.get(name)!r} in "
                    f"{first.source.name}",
                    source=p.source.name,
                    field=name,
                )
        if values is not None and not _equal(values, np.asarray(p.array[...])):
            raise SourceMismatchError(
                f"array {path!r} has no dimension to join along and its values differ "
                f"from those in {first.source.name}",
                source=p.source.name,
                field="values",
            )


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype.hasobject or b.dtype.hasobject:
        return bool(a.shape == b.shape and a.tolist() == b.tolist())
    return a.shape == b.shape and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def _doc(meta: ArrayMeta | GroupMeta) -> str:
    return encode_node(meta).decode()


def _assemble(planned: Mapping[str, Planned], groups: Mapping[str, GroupMeta]) -> dict[str, Any]:
    refs: dict[str, Any] = {}
    if groups:
        entries = {p: {**node_to_json(g), "consolidated_metadata": inline()} for p, g in groups.items() if p}
        entries.update({path: node_to_json(p.meta) for path, p in planned.items()})
        refs["zarr.json"] = _doc(msgspec.structs.replace(groups[""], consolidated_metadata=inline(entries)))
        refs.update({f"{path}/zarr.json": _doc(g) for path, g in groups.items() if path})
    for path, p in planned.items():
        refs[f"{path}/zarr.json" if path else "zarr.json"] = _doc(p.meta)
        for key, target in p.refs.items():
            refs[key] = encode_target(target)
    return {"version": 1, "refs": refs}
