"""Top-level functions: create, open and copy arrays (and dispatch to groups)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

from rectizarr import nodes
from rectizarr.arrays import Array, create
from rectizarr.core.grid import declared_sizes
from rectizarr.core.metadata import ArrayMeta, NodeMeta
from rectizarr.core.spec import SPEC_KEYWORDS, ArraySpec
from rectizarr.errors import ConflictError, MetadataError, NodeExistsError, NodeTypeError
from rectizarr.stores import Store

__all__ = ["copy_region", "create_array", "from_array", "naming_store", "open_array", "open_node"]

NodeT = TypeVar("NodeT")


@contextmanager
def naming_store(store: Any) -> Iterator[None]:
    """Metadata errors raised inside name the store (its path or URL), not only the key in it."""
    try:
        yield
    except MetadataError as exc:
        where = repr(store)
        if where in str(exc):
            raise
        raise type(exc)(f"{exc.message} (in {where})", path=exc.path, key=exc.key) from exc


def create_array(
    store: Any,
    *,
    name: str | None = None,
    shape: Any = None,
    dtype: Any = None,
    data: Any = None,
    chunks: Any = "auto",
    shards: Any = None,
    filters: Any = None,
    compressors: Any = "auto",
    serializer: Any = "auto",
    codecs: Sequence[Any] | None = None,
    fill_value: Any = None,
    dimension_names: Sequence[str | None] | None = None,
    attributes: Mapping[str, Any] | None = None,
    chunk_key_encoding: Any = None,
    index_location: str = "end",
    write_empty_chunks: bool = False,
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    workers: int | None = None,
    zarr_format: int = 3,
    order: str | None = None,
) -> Array:
    """Create an array and return it.
     ``chunks`` and ``shards`` take per axis an int (regular) or a list of edges (rectilinear), mixed freely
    across axes; with ``shards``, ``chunks`` is the (regular) inner chunk shape (``shards="auto"``: whole inner
    chunks doubled along the axis with the fewest until a shard holds about 64 MiB, or the array). Defaults:
    little-endian ``bytes`` and ``zstd`` (level 0). ``filters``/``serializer``/``compressors`` accept JSON-shaped
    dicts (``{"name": "gzip", "configuration": {"level": 1}}``), names or numcodecs codec objects; or give the
    whole chain as ``codecs=[...]`` exactly as it appears in ``zarr.json``. ``data`` (as in
        zarr-python): an array-like whose shape and dtype the array takes, written once it is created.

        ``zarr_format=2`` writes a Zarr v2 array (``.zarray``): regular ``chunks``, ``filters`` and one
        compressor as numcodecs codecs (or ``{"id": ...}`` dicts), ``order="C"|"F"``, ``chunk_key_encoding``
        ``{"name": "v2", "separator": "/"}`` for nested keys; no sharding, no rectilinear grids."""
    if data is not None:
        if shape is not None or dtype is not None:
            raise MetadataError("give either data= or shape= and dtype=, not both (the data sets them)")
        values = data if isinstance(data, Array) else np.asarray(data)
        shape, dtype = values.shape, values.dtype
    elif shape is None or dtype is None:
        raise MetadataError("create_array needs shape= and dtype= (or data=)")
    s = nodes.store_for(store, "w" if overwrite else "a", storage_options)
    # the keywords above that describe the array (shape and dtype: the data's), checked by the spec
    spec = ArraySpec.from_keywords(**{k: v for k, v in locals().items() if k in SPEC_KEYWORDS})
    out = create(
        s,
        nodes.normalize_path(name),
        *nodes.format_for(spec.zarr_format).build_array(spec),
        overwrite=overwrite,
        write_empty_chunks=write_empty_chunks,
        workers=workers,
    )
    if data is not None and out.size:
        out[...] = values[...]
    return out


def open_node(
    store: Store,
    path: str,
    mode: str,
    zarr_format: int | None,
    create: Callable[[bool], NodeT] | None,
    existing: Callable[[NodeMeta], NodeT],
) -> NodeT:
    """The modes of the open functions, for arrays, groups or either: ``"w"`` creates, replacing what is
    there; ``"w-"`` creates where no node is (the creation refuses one); ``"a"`` opens what is there and
    creates what is not; ``"r"`` / ``"r+"`` open what is there. ``create(overwrite)`` makes the new node
    (``None``: nothing to create, only open), ``existing`` the node for the metadata stored at ``path``
    (read as ``zarr_format`` if given)."""
    if create is not None and (mode in ("w", "w-") or (mode == "a" and not nodes.node_exists(store, path))):
        try:
            return create(mode == "w")
        except NodeExistsError as exc:
            if mode == "w-":
                raise NodeExistsError(f"a node already exists at {path or '/'!r} in {store!r}") from exc
            if mode != "a":
                raise  # ("a": another writer created it meanwhile: opened below)
    with naming_store(store):
        return existing(nodes.read_meta(store, path, zarr_format))


def open_array(
    store: Any,
    *,
    path: str | None = None,
    mode: str = "r+",
    storage_options: Mapping[str, Any] | None = None,
    write_empty_chunks: bool = False,
    workers: int | None = None,
    zarr_format: int | None = None,
    **create_kwargs: Any,
) -> Array:
    """Open an existing array (``mode`` ``"r"`` read-only, ``"r+"`` read/write); ``"a"`` opens or, given
    creation keywords, creates; ``"w"`` creates (replacing); ``"w-"`` creates, failing if it exists.
    Zarr v3 and v2 arrays are told apart by their documents; ``zarr_format=2|3`` forces one."""
    s = nodes.store_for(store, mode, storage_options)
    p = nodes.normalize_path(path)
    if create_kwargs and mode in ("r", "r+"):  # ("a" opens an existing array as it is, as zarr-python does)
        raise MetadataError(f"unexpected keywords for opening an existing array: {sorted(create_kwargs)}")
    given: dict[str, Any] = {"write_empty_chunks": write_empty_chunks, "workers": workers}
    if zarr_format is not None:
        given["zarr_format"] = zarr_format

    def new(overwrite: bool) -> Array:
        return create_array(s, name=p, overwrite=overwrite, **given, **create_kwargs)

    def opened(meta: NodeMeta) -> Array:
        if not isinstance(meta, ArrayMeta):
            raise NodeTypeError(
                f"the node at {p or '/'!r} in {s!r} is a group, not an array: open it with "
                "open_group (or rectizarr.open, which opens either)"
            )
        return Array(
            s, p, meta, read_only=(mode == "r"), write_empty_chunks=write_empty_chunks, workers=workers
        )

    return open_node(s, p, mode, zarr_format, new if create_kwargs or mode in ("w", "w-") else None, opened)


def from_array(
    store: Any,
    data: Any,
    *,
    name: str | None = None,
    chunks: Any = "keep",
    shards: Any = "keep",
    **kwargs: Any,
) -> Array:
    """Create an array holding a copy of ``data`` (a numpy array-like or another rectizarr array).

    ``chunks="keep"`` keeps a rectizarr source's chunking (its storage and inner chunk sizes, rectilinear
    included), a zarr-python array's chunks, shards, fill value, dimension names and attributes, and, for
    other data, chooses regular chunks of about 1 MiB."""
    if isinstance(data, Array):
        sharded = data.is_sharded
        if chunks == "keep":  # as declared, not clipped to the extent (a 12/6 shard of 7 elements stays so)
            chunks = data.inner_chunk_shape if sharded else declared_sizes(data.grid)
        if shards == "keep":
            shards = declared_sizes(data.grid) if sharded else None
        kwargs.setdefault("dtype", data.metadata.data_type)
        kwargs.setdefault("fill_value", data.metadata.fill_value)
        kwargs.setdefault("dimension_names", data.dimension_names)
        kwargs.setdefault("attributes", data.attrs.asdict())
    elif type(data).__module__.startswith("zarr.") and hasattr(data, "metadata"):  # zarr-python's: its layout
        if chunks == "keep":
            chunks = tuple(data.chunks)  # (the inner chunks when sharded, as here)
        if shards == "keep":
            shards = None if data.shards is None else tuple(data.shards)
        kwargs.setdefault("fill_value", data.fill_value)
        kwargs.setdefault("dimension_names", getattr(data.metadata, "dimension_names", None))
        kwargs.setdefault("attributes", dict(data.attrs))
    values = data if isinstance(data, Array) else np.asarray(data)
    kwargs.setdefault("dtype", values.dtype)
    chunks, shards = ("auto" if chunks == "keep" else chunks), (None if shards == "keep" else shards)
    out = create_array(store, name=name, shape=values.shape, chunks=chunks, shards=shards, **kwargs)
    if isinstance(values, Array):  # (a block at a time: bounded memory)
        for block in _copy_regions(values):
            copy_region(out, values, block)
    else:
        out[...] = values
    return out


def copy_region(dst: Array, src: Array, region: tuple[slice, ...]) -> None:
    """``dst[region] = src[region]``, refused (ConflictError) when the source no longer holds the whole
    region: another writer shrank it during the copy (a shorter block would be broadcast, or fail in numpy)."""
    values = src[region]
    want = np.broadcast_to(np.empty((), bool), dst.shape)[region].shape  # (a view: nothing allocated)
    if np.shape(values) != want:
        raise ConflictError(
            f"the source array {src.name!r} changed shape while being copied (it is {src.shape} "
            f"now); copy it again"
        )
    dst[region] = values


def _copy_regions(src: Array) -> list[tuple[slice, ...]]:
    """Regions of about 64 MiB aligned to the source's storage chunks (bounded memory)."""
    if src.size == 0:
        return []
    rows = src.write_chunk_sizes[0] if src.ndim else ()
    if not rows:
        return [()]
    per_row = max(1, src.nbytes // max(1, src.shape[0]))
    regions: list[tuple[slice, ...]] = []
    start = end = 0
    for i, n in enumerate(rows):
        end += n
        if (end - start) * per_row >= 64 << 20 or i == len(rows) - 1:
            regions.append((slice(start, end),))
            start = end
    return regions
