"""Top-level functions: create, open and copy arrays (and dispatch to groups)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from rectizarr import nodes
from rectizarr.arrays import Array, create
from rectizarr.core.grid import declared_sizes
from rectizarr.core.metadata import ArrayMeta
from rectizarr.creation import build_array_meta, build_v2_array_meta
from rectizarr.errors import ConflictError, MetadataError, NodeExistsError, NodeTypeError

__all__ = ["copy_region", "create_array", "from_array", "naming_store", "open_array"]


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
    across axes; with ``shards``, ``chunks`` is the (regular) inner chunk shape (``shards="auto"``: whole
    inner chunks doubled along the axis with the fewest until a shard holds about 64 MiB, or the array). Defaults: little-endian
    ``bytes`` and ``zstd`` (level 0). ``filters``/``serializer``/``compressors`` accept JSON-shaped dicts
    (``{"name": "gzip", "configuration": {"level": 1}}``), names or numcodecs codec objects; or give the
    whole chain as ``codecs=[...]`` exactly as it appears in ``zarr.json``. ``data`` (as in
    zarr-python): an array-like whose shape and dtype the array takes, written once it is created.

    ``zarr_format=2`` writes a Zarr v2 array (``.zarray``): regular ``chunks``, ``filters`` and one
    compressor as numcodecs codecs (or ``{"id": ...}`` dicts), ``order="C"|"F"``, ``chunk_key_encoding``
    ``{"name": "v2", "separator": "/"}`` for nested keys; no sharding, no rectilinear grids.
    """
    if data is not None:
        if shape is not None or dtype is not None:
            raise MetadataError("give either data= or shape= and dtype=, not both (the data sets them)")
        values = data if isinstance(data, Array) else np.asarray(data)
        out = create_array(
            store,
            name=name,
            shape=values.shape,
            dtype=values.dtype,
            chunks=chunks,
            shards=shards,
            filters=filters,
            compressors=compressors,
            serializer=serializer,
            codecs=codecs,
            fill_value=fill_value,
            dimension_names=dimension_names,
            attributes=attributes,
            chunk_key_encoding=chunk_key_encoding,
            index_location=index_location,
            write_empty_chunks=write_empty_chunks,
            overwrite=overwrite,
            storage_options=storage_options,
            workers=workers,
            zarr_format=zarr_format,
            order=order,
        )
        if out.size:
            out[...] = values[...]
        return out
    if shape is None or dtype is None:
        raise MetadataError("create_array needs shape= and dtype= (or data=)")
    s = nodes.store_for(store, "w" if overwrite else "a", storage_options)
    if nodes.check_format(zarr_format) == 2:
        meta, pipeline = build_v2_array_meta(
            shape=shape,
            dtype=dtype,
            chunks=chunks,
            shards=shards,
            filters=filters,
            compressors=compressors,
            serializer=serializer,
            codecs=codecs,
            fill_value=fill_value,
            dimension_names=dimension_names,
            attributes=attributes,
            chunk_key_encoding=chunk_key_encoding,
            order=order,
        )
    else:
        if order not in (None, "C"):
            raise MetadataError(
                "order='F' is a Zarr v2 setting; in Zarr v3 add a transpose codec (filters=...)"
            )
        meta, pipeline = build_array_meta(
            shape=shape,
            dtype=dtype,
            chunks=chunks,
            shards=shards,
            filters=filters,
            compressors=compressors,
            serializer=serializer,
            codecs=codecs,
            fill_value=fill_value,
            dimension_names=dimension_names,
            attributes=attributes,
            chunk_key_encoding=chunk_key_encoding,
            index_location=index_location,
        )
    return create(
        s,
        nodes.normalize_path(name),
        meta,
        pipeline,
        overwrite=overwrite,
        write_empty_chunks=write_empty_chunks,
        workers=workers,
    )


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
    if mode in ("w", "w-") or (mode == "a" and create_kwargs and not nodes.node_exists(s, p)):
        if zarr_format is not None:
            create_kwargs["zarr_format"] = zarr_format
        try:
            return create_array(
                s,
                name=p,
                overwrite=(mode == "w"),
                write_empty_chunks=write_empty_chunks,
                workers=workers,
                **create_kwargs,
            )
        except NodeExistsError:
            if mode != "a":
                raise  # ("a": another writer created it meanwhile: opened below)
    if create_kwargs and mode != "a":  # ("a" opens an existing array as it is, as zarr-python does)
        raise MetadataError(f"unexpected keywords for opening an existing array: {sorted(create_kwargs)}")
    with naming_store(s):
        meta = nodes.read_meta(s, p, zarr_format)
        if not isinstance(meta, ArrayMeta):
            raise NodeTypeError(
                f"the node at {p or '/'!r} in {s!r} is a group, not an array: open it with "
                "open_group (or rectizarr.open, which opens either)"
            )
        return Array(
            s, p, meta, read_only=(mode == "r"), write_empty_chunks=write_empty_chunks, workers=workers
        )


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
    other data, chooses regular chunks of about 1 MiB.
    """
    if isinstance(data, Array):
        src = data
        sharded = src.is_sharded
        if chunks == "keep":  # as declared, not clipped to the extent (a 12/6 shard of 7 elements stays so)
            chunks = src.inner_chunk_shape if sharded else declared_sizes(src.grid)
        if shards == "keep":
            shards = declared_sizes(src.grid) if sharded else None
        kwargs.setdefault("dtype", src.metadata.data_type)
        kwargs.setdefault("fill_value", src.metadata.fill_value)
        kwargs.setdefault("dimension_names", src.dimension_names)
        kwargs.setdefault("attributes", src.attrs.asdict())
        out = create_array(store, name=name, shape=src.shape, chunks=chunks, shards=shards, **kwargs)
        for block in _copy_regions(src):
            copy_region(out, src, block)
        return out
    if type(data).__module__.startswith("zarr.") and hasattr(
        data, "metadata"
    ):  # a zarr-python array: its layout
        if chunks == "keep":
            chunks = tuple(data.chunks)  # (the inner chunks when sharded, as here)
        if shards == "keep":
            shards = None if data.shards is None else tuple(data.shards)
        kwargs.setdefault("fill_value", data.fill_value)
        kwargs.setdefault("dimension_names", getattr(data.metadata, "dimension_names", None))
        kwargs.setdefault("attributes", dict(data.attrs))
    arr = np.asarray(data)
    if chunks == "keep":
        chunks = "auto"
    if shards == "keep":
        shards = None
    kwargs.setdefault("dtype", arr.dtype)
    out = create_array(store, name=name, shape=arr.shape, chunks=chunks, shards=shards, **kwargs)
    out[...] = arr
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
    start = acc = 0
    for i, n in enumerate(rows):
        acc += n
        end = sum(rows[: i + 1])
        if acc * per_row >= 64 << 20 or i == len(rows) - 1:
            regions.append((slice(start, end),))
            start, acc = end, 0
    return regions
