"""``rectizarr migrate``: convert a Zarr v2 array or hierarchy to Zarr v3, in place or to a new root.

Per array, the cheapest faithful way is chosen (``--dry-run`` prints the plan):

- **reuse** — the v2 codecs have v3 equivalents (compressors, ``order: "F"`` as ``transpose``, the byte order
  of the dtype, ``vlen-utf8``/``vlen-bytes``, numcodecs filters on little-endian data): only ``zarr.json``
  is written (the ``v2`` chunk key encoding keeps every chunk key), and the chunk bytes are reused — left
  where they are in place, copied byte for byte to a new root. Filters are checked on one stored chunk:
  if the v3 chain does not decode it to the same values, the array is re-encoded instead;
- **re-encode** — otherwise (object codecs without a v3 codec, big-endian data under filters, a dtype with no
  v3 form, or ``--chunks``): a v3 array (``bytes`` + ``zstd``, or the default for its type) is written
  region by region under the default chunk keys (``c/...``), its ``zarr.json`` last.

In place, nothing of the v2 hierarchy changes until every v3 document and chunk is written: then the v2
documents (and the old chunks of re-encoded arrays) are deleted (``--keep-v2`` keeps them). An error or an
interruption before that removes what was added, so the source stays as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rectizarr import nodes
from rectizarr.api import copy_region
from rectizarr.arrays import Array
from rectizarr.cli.util import Progress, plan_regions, stored_members
from rectizarr.codecs.build import build_pipeline
from rectizarr.core.metadata import ArrayMeta, GroupMeta
from rectizarr.core.spec import ArraySpec
from rectizarr.core.v2keys import V2_CONSOLIDATED, V2_KEYS
from rectizarr.errors import MetadataError, NodeExistsError, RectizarrError, UnsupportedError
from rectizarr.groups import Group, consolidate_metadata
from rectizarr.stores import Store

__all__ = ["MigrateOptions", "Step", "migrate", "plan_migration"]


@dataclass(frozen=True)
class MigrateOptions:
    chunks: list[Any] | None = None  # rechunk every array (regular or rectilinear), forcing a re-encode
    keep_v2: bool = False  # in place: keep the v2 documents next to the v3 ones
    overwrite: bool = False  # to a new root: replace an existing destination node
    budget: int = 64 << 20


@dataclass
class Step:
    """One node of the plan: ``kind`` is ``group``, ``reuse`` or ``reencode``; ``why`` says why."""

    path: str
    kind: str
    why: str
    meta: Any = None  # the v3 document (reuse, group)
    source: Any = None  # the v2 node
    written: list[str] = field(default_factory=list)  # keys this step added (for a roll-back)

    def describe(self) -> str:
        name = "/" + self.path
        if self.kind == "group":
            return f"group {name}: zarr.json (attributes kept)"
        if self.kind == "reuse":
            return f"array {name}: metadata only, chunk bytes reused ({self.why})"
        return f"array {name}: re-encode ({self.why})"


# ------------------------------------------------------------------------------------------- planning


def _verified(src: Array, meta: ArrayMeta) -> bool:
    """Whether the v3 chain decodes one stored chunk of ``src`` to the values the v2 chain gives."""
    grid = meta.chunk_grid
    prefix = nodes.prefix_of(src.path)
    for key in src.store.list_prefix(prefix):
        coords = meta.chunk_key_encoding.decode(key[len(prefix) :], grid.ndim)
        if coords is None or not grid.is_in_grid(coords):
            continue
        data = src.store.get(key)
        if data is None:
            continue
        v3 = build_pipeline(meta.codecs, meta.data_type.numpy, [d.unique_edges() for d in grid.dims])
        from rectizarr.codecs.base import ChunkSpec

        spec = ChunkSpec(grid.chunk_shape(coords), meta.data_type.numpy, meta.fill_value)
        try:
            mine, theirs = v3.decode(data, spec), src.pipeline.decode(data, spec)
        except RectizarrError:
            return False
        if mine.dtype.hasobject:
            return bool(mine.tolist() == theirs.tolist())
        return bool(np.ascontiguousarray(mine).tobytes() == np.ascontiguousarray(theirs).tobytes())
    return True  # nothing stored: nothing to misread


def _array_step(src: Array, opts: MigrateOptions) -> Step:
    meta = src.metadata
    if opts.chunks is not None:
        return Step(src.path, "reencode", "--chunks rechunks it", source=src)
    v3, why = nodes.format_of(meta).as_v3(meta)
    if v3 is None:
        return Step(src.path, "reencode", why, source=src)
    if v3.codecs != meta.codecs and not _verified(src, v3):
        return Step(src.path, "reencode", f"{why} decode a stored chunk differently", source=src)
    return Step(src.path, "reuse", why, meta=v3, source=src)


def _walk(node: Array | Group) -> Iterator[Array | Group]:
    yield node
    if isinstance(node, Group):
        for _, child in stored_members(node):
            yield from _walk(child)


def plan_migration(src: Array | Group, opts: MigrateOptions) -> list[Step]:
    """The steps that migrate ``src`` (a v2 array or group) and everything below it, top-down."""
    steps = []
    for node in _walk(src):
        if not nodes.format_of(node.metadata).migrates:
            raise MetadataError(f"{node.name!r} is already a Zarr v3 node; only v2 hierarchies migrate")
        if isinstance(node, Group):
            steps.append(
                Step(
                    node.path,
                    "group",
                    "",
                    meta=GroupMeta(attributes=dict(node.metadata.attributes)),
                    source=node,
                )
            )
        else:
            name = node.metadata.data_type.name
            if name.startswith("v2:") or name == "object":
                what = "Python objects" if name == "object" else name[3:]
                raise UnsupportedError(
                    f"array {node.name!r} holds {what}, which no Zarr v3 data type can hold; "
                    "it cannot be migrated (nothing was changed)"
                )
            if opts.chunks is not None and len(opts.chunks) != node.ndim:
                raise MetadataError(
                    f"--chunks gives {len(opts.chunks)} axes; array {node.name!r} has {node.ndim}"
                )
            steps.append(_array_step(node, opts))
    return steps


# ------------------------------------------------------------------------------------------- running


def _dest(step: Step, src_root: str, dst_root: str) -> str:
    rel = step.path[len(src_root) :].strip("/")
    return nodes.join(dst_root, rel)


def _copy_chunks(step: Step, store: Store, path: str, in_place: bool) -> None:
    if in_place:
        return
    src: Array = step.source
    prefix, out = nodes.prefix_of(src.path), nodes.prefix_of(path)
    keys = [
        k for k in src.store.list_prefix(prefix) if k.rpartition("/")[2] not in (*V2_KEYS, V2_CONSOLIDATED)
    ]
    bar = Progress(f"copy chunks {src.name}", len(keys))
    for i in range(0, len(keys), 256):
        batch = keys[i : i + 256]
        values = src.store.get_many([(k, None) for k in batch])
        items = {out + k[len(prefix) :]: v for k, v in zip(batch, values, strict=True) if v is not None}
        step.written.extend(items)
        store.set_many(items)
        bar.advance(len(batch))
    bar.close()


def _reencode(step: Step, store: Store, path: str, opts: MigrateOptions) -> None:
    src: Array = step.source
    m = src.metadata
    dtype = m.data_type
    chunks = opts.chunks if opts.chunks is not None else list(src.chunks)
    meta, pipeline = nodes.format_for(3).build_array(
        ArraySpec.from_keywords(
            shape=m.shape,
            dtype=dtype,
            chunks=chunks,
            fill_value=m.fill_value,
            dimension_names=m.dimension_names,
            attributes=nodes.format_of(m).v3_attributes(m),
        )
    )
    dst = Array(store, path, meta, pipeline=pipeline)  # its zarr.json is written once the data is
    step.meta = meta
    regions = plan_regions(
        m.shape, dst.write_chunk_sizes, src.read_chunk_sizes, max(1, dtype.itemsize or 16), opts.budget
    )
    bar = Progress(f"re-encode {src.name}", len(regions))
    try:
        for region in regions:
            copy_region(dst, src, region)
            bar.advance()
    finally:
        bar.close()
        prefix, cke = nodes.prefix_of(path), meta.chunk_key_encoding  # the default encoding: c/...
        step.written.extend(
            k for k in store.list_prefix(prefix) if cke.decode(k[len(prefix) :], meta.ndim) is not None
        )


def _run(
    steps: list[Step], store: Store, src_root: str, dst_root: str, in_place: bool, opts: MigrateOptions
) -> None:
    for i, step in enumerate(steps):
        path = _dest(step, src_root, dst_root)
        if i == 0:
            nodes.create_parents(store, path)
        if step.kind == "reencode":
            _reencode(step, store, path, opts)
        elif step.kind == "reuse":
            _copy_chunks(step, store, path, in_place)
        nodes.format_of(step.meta).write(store, path, step.meta)
        step.written.append(nodes.meta_key(path))


def _roll_back(steps: list[Step], store: Store) -> None:
    keys = [k for s in steps for k in s.written]
    if keys:
        store.delete_many(keys)


def _drop_v2(steps: list[Step], store: Store) -> None:
    """After a complete in-place migration: the v2 documents, and the v2 chunks of re-encoded arrays."""
    doomed: list[str] = []
    for step in steps:
        prefix = nodes.prefix_of(step.path)
        doomed += [prefix + name for name in (*V2_KEYS, V2_CONSOLIDATED)]
        if step.kind == "reencode":
            new = set(step.written)
            doomed += [k for k in store.list_prefix(prefix) if k not in new and k != prefix + nodes.META]
    store.delete_many([k for k in doomed if store.exists(k)])


def migrate(src: Array | Group, store: Store, path: str, opts: MigrateOptions) -> list[Step]:
    """Migrate ``src`` to ``path`` in ``store`` (the source's own location: in place). Returns the steps."""
    in_place = store.lock_identity == src.store.lock_identity and nodes.normalize_path(path) == src.path
    if not in_place:
        from rectizarr.cli.copy import check_apart

        check_apart(src, store, path)
        if nodes.node_exists(store, path):
            if not opts.overwrite:
                raise NodeExistsError(
                    f"the destination already has a node at {path or '/'!r} (use --overwrite)"
                )
            nodes.delete_node(store, path)
    steps = plan_migration(src, opts)
    consolidated = isinstance(src, Group) and src.store.exists(nodes.prefix_of(src.path) + V2_CONSOLIDATED)
    try:
        _run(steps, store, src.path, path, in_place, opts)
    except BaseException:
        _roll_back(steps, store)
        raise
    if in_place and not opts.keep_v2:
        _drop_v2(steps, store)
    if consolidated:
        consolidate_metadata(store, path)
    return steps
