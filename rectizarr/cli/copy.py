"""``rectizarr copy``: re-encode and rechunk an array or a whole hierarchy, region by region.

Each array is copied in regions made of whole destination storage chunks (shards when sharded), so every
destination chunk is written exactly once and memory stays around ``budget`` bytes plus one region's
encoded bytes, whatever the array size. Regular <-> rectilinear works in both directions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rectizarr import nodes
from rectizarr.api import copy_region, create_array
from rectizarr.arrays import Array
from rectizarr.cli.util import Progress, plan_regions, stored_members
from rectizarr.codecs.build import build_pipeline
from rectizarr.codecs.pipeline import ShardingCodec
from rectizarr.core.codec_meta import codecs_to_json, parse_codecs
from rectizarr.core.grid import declared_sizes
from rectizarr.core.metadata import node_to_json
from rectizarr.creation import build_chain
from rectizarr.errors import MetadataError, NodeExistsError
from rectizarr.groups import Group, consolidate_metadata, open_group
from rectizarr.stores import Store

__all__ = ["CopyOptions", "check_apart", "compressor_chain", "copy_node", "dest_layout"]

_DEFAULT_INDEX_CODECS = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]


@dataclass(frozen=True)
class CopyOptions:
    """What to change while copying; ``None`` keeps the source's choice."""

    chunks: list[Any] | None = None  # storage chunks, or inner chunks when sharded
    shards: list[Any] | str | None = None  # outer grid, or "none" to drop sharding
    codecs: list[Any] | None = None  # the full chain, exactly as in zarr.json
    compressor: str | None = None  # zstd | gzip | blosc | none
    overwrite: bool = False
    budget: int = 64 << 20


def compressor_chain(name: str, itemsize: int) -> list[dict[str, Any]]:
    """The bytes -> bytes codecs for ``--compressor NAME``."""
    match name:
        case "zstd":
            return [{"name": "zstd", "configuration": {"level": 3, "checksum": False}}]
        case "gzip":
            return [{"name": "gzip", "configuration": {"level": 5}}]
        case "blosc":
            return [
                {
                    "name": "blosc",
                    "configuration": {
                        "cname": "zstd",
                        "clevel": 5,
                        "shuffle": "shuffle",
                        "typesize": max(1, itemsize),
                        "blocksize": 0,
                    },
                }
            ]
        case "none":
            return []
    raise MetadataError(f"unknown compressor {name!r}: choose zstd, gzip, blosc or none")


def _split(chain_json: list[dict[str, Any]], n_array_array: int) -> tuple[list[Any], Any, list[Any]]:
    return chain_json[:n_array_array], chain_json[n_array_array], chain_json[n_array_array + 1 :]


def dest_layout(src: Array, opts: CopyOptions) -> tuple[list[Any], list[Any]]:
    """``(storage chunks, full codec chain JSON)`` of the destination of ``src`` under ``opts``."""
    pipe = src.pipeline
    metas = src.metadata.codecs
    v3, _ = nodes.format_of(src.metadata).as_v3(src.metadata)
    if v3 is not src.metadata:  # the destination is v3: the v2 chain as v3 codecs, else the defaults
        metas = (
            v3.codecs
            if v3 is not None
            else parse_codecs(build_chain(src.metadata.data_type, None, "auto", "auto"))
        )
        pipe = build_pipeline(metas, src.dtype, [d.unique_edges() for d in src.grid.dims])
    outer_a, serializer, outer_b = _split(codecs_to_json(metas), len(pipe.array_array))
    keep_storage = declared_sizes(src.grid)
    if opts.codecs is not None:
        if opts.shards is not None:
            raise MetadataError(
                "--codecs gives the whole chain: put sharding_indexed in it instead of --shards"
            )
        return (opts.chunks if opts.chunks is not None else keep_storage), list(opts.codecs)
    sharding = pipe.array_bytes if isinstance(pipe.array_bytes, ShardingCodec) else None
    if sharding is not None:
        cfg = serializer["configuration"]
        in_a, in_ser, in_b = _split(list(cfg["codecs"]), len(sharding.codecs.array_array))
        index_codecs, index_location, inner_shape = (
            cfg["index_codecs"],
            cfg["index_location"],
            cfg["chunk_shape"],
        )
    else:
        in_a, in_ser, in_b = outer_a, serializer, outer_b
        outer_a, outer_b = [], []
        index_codecs, index_location, inner_shape = _DEFAULT_INDEX_CODECS, "end", None
    if opts.compressor is not None:
        in_b = compressor_chain(opts.compressor, src.dtype.itemsize)
    inner_chain = [*in_a, in_ser, *in_b]
    shards = opts.shards
    if shards == "none" or (shards is None and sharding is None):
        if sharding is not None and opts.chunks is None:
            storage: list[Any] = list(inner_shape)
        else:
            storage = opts.chunks if opts.chunks is not None else keep_storage
        return storage, [*outer_a, *inner_chain, *outer_b]
    outer = keep_storage if shards is None else shards
    inner = opts.chunks if opts.chunks is not None else inner_shape
    if inner is None:
        raise MetadataError("--shards needs --chunks for the inner chunk shape (regular ints, one per axis)")
    if any(not isinstance(c, int) for c in inner):
        raise MetadataError(f"inner chunks of a sharded array are regular: got {inner}")
    if opts.chunks is not None:  # given as ``info`` prints them, in the array's axis order: in the codec's
        for codec in outer_a:
            if codec.get("name") == "transpose":
                inner = [inner[i] for i in codec["configuration"]["order"]]
    sharded = {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": list(inner),
            "codecs": inner_chain,
            "index_codecs": index_codecs,
            "index_location": index_location,
        },
    }
    return list(outer), [*outer_a, sharded, *outer_b]


LISTED_UNITS = 1_000_000  # storage units from which a copy visits the stored ones instead of every region


def copy_array(src: Array, store: Store, path: str, opts: CopyOptions) -> Array:
    """Create the destination array and fill it region by region (destination-chunk aligned)."""
    chunks, codecs = dest_layout(src, opts)
    if len(chunks) != src.ndim:
        raise MetadataError(
            f"array {src.path or '/'!r} has {src.ndim} dimensions but the chunk spec gives {len(chunks)}"
        )
    try:
        dst = _create_dest(src, store, path, opts, chunks, codecs)
    except NodeExistsError:
        raise NodeExistsError(
            f"the destination already has a node at {path or '/'!r} (use --overwrite)"
        ) from None
    if max(src.nshards, dst.nshards) > LISTED_UNITS:  # too many to plan one by one: visit what is stored
        regions = list(src.stored_regions())  # the rest is the fill value, which the destination shares
    else:
        regions = plan_regions(
            src.shape, dst.write_chunk_sizes, src.read_chunk_sizes, src.dtype.itemsize, opts.budget
        )
    bar = Progress(f"copy {src.path or '/'}", len(regions))
    for region in regions:
        copy_region(dst, src, region)
        bar.advance()
    bar.close()
    return dst


def _create_dest(
    src: Array, store: Store, path: str, opts: CopyOptions, chunks: list[Any], codecs: list[Any]
) -> Array:
    meta_json = node_to_json(src.metadata)
    return create_array(
        store,
        name=path,
        shape=src.shape,
        dtype=src.metadata.data_type,
        chunks=chunks,
        codecs=codecs,
        fill_value=src.metadata.fill_value,
        dimension_names=src.dimension_names,
        attributes=nodes.format_of(src.metadata).v3_attributes(src.metadata),
        chunk_key_encoding=meta_json["chunk_key_encoding"],
        overwrite=opts.overwrite,
    )


def check_apart(src: Array | Group, store: Store, path: str) -> None:
    """Refuse (``MetadataError``) a destination that is the source, lies inside it (the copy would copy
    itself without end) or holds it (``--overwrite`` would delete the source before reading it)."""
    a = src.store.lock_identity + nodes.prefix_of(src.path)
    b = store.lock_identity + nodes.prefix_of(path)
    if a.startswith(b) or b.startswith(a):
        where = (
            "is the source" if a == b else "lies inside the source" if b.startswith(a) else "holds the source"
        )
        raise MetadataError(f"cannot copy {a!r} to {b!r}: the destination {where}; copy to another location")


def copy_node(src: Array | Group, store: Store, path: str, opts: CopyOptions) -> Array | Group:
    """Copy an array, or a group recursively with its attributes, to ``path`` in ``store`` (a location
    apart from the source's)."""
    check_apart(src, store, path)
    if isinstance(src, Array):
        return copy_array(src, store, path, opts)
    try:
        g = open_group(store, path=path, mode="w" if opts.overwrite else "w-", attributes=src.attrs.asdict())
    except NodeExistsError:
        raise NodeExistsError(
            f"the destination already has a node at {path or '/'!r} (use --overwrite)"
        ) from None
    for name, child in stored_members(src):
        copy_node(child, store, f"{path}/{name}" if path else name, opts)
    if src.metadata.consolidated_metadata is not None:  # a consolidated source stays consolidated
        g = consolidate_metadata(store, path)
    return g
