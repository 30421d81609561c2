"""What arrays tell users about themselves: codec descriptions (zarr-python's ``compressors`` /
``filters`` / ``serializer``), chunk counts in zarr-python's units, and the ``info`` text."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rectizarr._util import prod
from rectizarr.core.codec_meta import CodecMeta, ShardingMeta, codecs_to_json
from rectizarr.core.grid import Runs

__all__ = ["CodecSpec", "StoredBytes", "codec_roles", "info_text", "inner_counts"]


@dataclass(frozen=True, slots=True)
class CodecSpec:
    """One codec as ``zarr.json`` states it. ``to_dict()`` gives the JSON form zarr-python's codec objects
    give, so a spec can be passed back as ``compressors=`` / ``filters=`` / ``serializer=``."""

    name: str
    configuration: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.configuration:
            out["configuration"] = dict(self.configuration)
        return out

    def __repr__(self) -> str:
        args = ", ".join(
            f"{k}={v!r}" for k, v in self.configuration.items() if not isinstance(v, list | dict)
        )
        return f"{self.name}({args})"


class StoredBytes(int):
    """The bytes stored, as an ``int`` that can also be called (zarr-python's ``a.nbytes_stored()``)."""

    def __call__(self) -> int:
        return int(self)


def codec_roles(
    metas: tuple[CodecMeta, ...], pipeline: Any
) -> tuple[tuple[CodecSpec, ...], CodecSpec, tuple[CodecSpec, ...]]:
    """(filters, serializer, compressors) of a chain and the pipeline built from it, whose ``array_array``
    codecs are the filters. A sharded chain is described by its inner chain, as zarr-python does."""
    n = len(pipeline.array_array)
    serializer = metas[n]
    if isinstance(serializer, ShardingMeta):
        return codec_roles(serializer.codecs, pipeline.array_bytes.codecs)
    specs = [CodecSpec(d["name"], d.get("configuration", {})) for d in codecs_to_json(metas)]
    return tuple(specs[:n]), specs[n], tuple(specs[n + 1 :])


def _compact(runs: Runs) -> str:
    if not runs:
        return "()"
    parts = [f"{v}x{n}" if n > 1 else str(v) for v, n in runs]
    if len(parts) > 8:
        parts = [*parts[:4], "...", *parts[-3:]]
    return "[" + ", ".join(parts) + "]"


def _human(n: int) -> str:
    value = float(n)
    for unit in ("", "K", "M", "G", "T", "P"):
        if value < 1024 or unit == "P":
            return str(n) if not unit else f"{n} ({value:.1f}{unit})"
        value /= 1024
    return str(n)


def info_text(a: Any, *, complete: bool = False) -> str:
    """The summary ``Array.info`` shows (``complete``: with what is stored, which lists the store)."""
    filters, serializer, compressors = codec_roles(a.metadata.codecs, a.pipeline)
    regular = a.grid.regular_chunk_shape
    rows = [
        ("Name", a.name),
        ("Type", "Array"),
        ("Zarr format", "3"),
        ("Data type", str(a.dtype) if a.metadata.data_type.name != "string" else "string"),
        ("Fill value", str(a.metadata.data_type.fill_to_json(a.metadata.fill_value))),
        ("Shape", str(a.shape)),
        ("Chunk grid", a.grid.kind),
    ]
    written = str(regular) if regular is not None else ", ".join(_compact(r) for r in a.write_chunk_runs)
    if a.is_sharded:
        rows.append(("Shard shape", written))
    if a.inner_chunk_shape is not None:
        rows.append(("Chunk shape", str(a.inner_chunk_shape)))
    elif not a.is_sharded:
        rows.append(("Chunk shape", written or "()"))
    rows += [
        ("Dimensions", str(a.dimension_names) if a.dimension_names is not None else "-"),
        ("Read-only", str(a.read_only)),
        ("Store type", type(a.store).__name__),
        ("Filters", str(filters)),
        ("Serializer", repr(serializer)),
        ("Compressors", str(compressors)),
        ("Attributes", f"{len(a.metadata.attributes)} keys"),
        ("No. bytes", _human(a.nbytes)),
        ("No. chunks", str(a.nchunks)),
    ]
    if complete:
        stored = int(a.nbytes_stored)
        rows += [
            ("No. bytes stored", _human(stored)),
            ("Storage ratio", f"{a.nbytes / stored:.1f}" if stored else "-"),
            ("Chunks Initialized", str(a.nchunks_initialized)),
        ]
        if a.is_sharded:
            rows.append(("Shards Initialized", str(a.nshards_initialized)))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}} : {v}" for k, v in rows)


def inner_counts(shape: tuple[int, ...], inner: tuple[int, ...]) -> int:
    """How many inner chunks of shape ``inner`` cover ``shape`` (zarr-python's ``nchunks``)."""
    return prod(tuple(-(-s // c) for s, c in zip(shape, inner, strict=True)))
