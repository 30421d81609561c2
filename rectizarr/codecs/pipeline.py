"""A codec chain: ``array -> array`` codecs, one ``array -> bytes`` codec, ``bytes -> bytes`` codecs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import msgspec
import numpy as np

import rectizarr.codecs as _registry
from rectizarr._util import json_path
from rectizarr.codecs.array_to_bytes import BytesCodec
from rectizarr.codecs.base import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec, ChunkSpec, Codec
from rectizarr.codecs.sharding import ShardingCodec
from rectizarr.core.codec_meta import BloscMeta, CodecMeta, codecs_to_json
from rectizarr.errors import MetadataError

__all__ = ["CodecPipeline"]


def _with_path(exc: MetadataError, path: str) -> MetadataError:
    """``exc`` if it already names a JSON path, else the same error (same class) at ``path``."""
    if exc.path is not None:
        return exc
    return type(exc)(str(exc), path=path, key=exc.key)


@dataclass(frozen=True, slots=True)
class CodecPipeline:
    """A validated codec chain. ``metas`` are the codecs' metadata as resolved at build time (a blosc
    ``typesize`` filled in, nested sharding chains resolved), so :meth:`to_json` writes every parameter.
    """

    metas: tuple[CodecMeta, ...]
    array_array: tuple[ArrayArrayCodec, ...]
    array_bytes: ArrayBytesCodec
    bytes_bytes: tuple[BytesBytesCodec, ...]

    @classmethod
    def build(
        cls,
        metas: Sequence[CodecMeta],
        dtype: np.dtype,
        edges_per_axis: Sequence[np.ndarray],
        path: str = "$.codecs",
    ) -> CodecPipeline:
        """Build and validate a chain for chunks of ``dtype`` whose axis ``i`` edges are ``edges_per_axis[i]``.

        Every declared edge is checked (for sharding: divisible by the inner chunk shape) in the space the
        array->bytes codec sees, i.e. after any ``transpose``.
        """
        edges: list[Any] = [np.asarray(e) for e in edges_per_axis]
        spec = ChunkSpec(tuple(int(e[0]) if e.size else 1 for e in edges), dtype, np.zeros((), dtype=dtype))
        array_array: list[ArrayArrayCodec] = []
        array_bytes: ArrayBytesCodec | None = None
        bytes_bytes: list[BytesBytesCodec] = []
        resolved: list[CodecMeta] = []
        for i, meta in enumerate(metas):
            where = json_path(path, i)
            try:
                codec = _registry.build_codec(meta, spec.dtype, where)
                if isinstance(meta, BloscMeta) and isinstance(codec, _registry.BloscCodec):
                    meta = msgspec.structs.replace(meta, typesize=codec.typesize)
                if isinstance(codec, ShardingCodec):
                    meta = codec.meta
                resolved.append(meta)
                if isinstance(codec, ArrayArrayCodec):
                    if array_bytes is not None:
                        raise MetadataError(f"array->array codec {codec.name!r} after the array->bytes codec")
                    spec = codec.resolve(spec)
                    edges = codec.map_axes(edges)
                    array_array.append(codec)
                elif isinstance(codec, ArrayBytesCodec):
                    if array_bytes is not None:
                        raise MetadataError(
                            f"only one array->bytes codec is allowed ({array_bytes.name!r} and {codec.name!r})"
                        )
                    codec.validate(spec.dtype, edges)
                    array_bytes = codec
                else:
                    if array_bytes is None:
                        raise MetadataError(
                            f"bytes->bytes codec {codec.name!r} before the array->bytes codec (invalid codec order)"
                        )
                    bytes_bytes.append(cast(BytesBytesCodec, codec))  # the third and last kind
            except MetadataError as exc:
                raise _with_path(exc, where) from exc
        if array_bytes is None:
            raise MetadataError("at least one array->bytes codec (such as 'bytes') is required", path=path)
        return cls(tuple(resolved), tuple(array_array), array_bytes, tuple(bytes_bytes))

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        """The representation the array->bytes codec sees for chunks of ``spec``."""
        for codec in self.array_array:
            spec = codec.resolve(spec)
        return spec

    def _specs(self, spec: ChunkSpec) -> list[ChunkSpec]:
        specs = [spec]
        for codec in self.array_array:
            specs.append(codec.resolve(specs[-1]))
        return specs

    def encode_array(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        """Apply only the array->array codecs (the engine's partial-shard path uses this)."""
        for codec, s in zip(self.array_array, self._specs(spec)[:-1], strict=True):
            chunk = codec.encode(chunk, s)
        return chunk

    def decode_array(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        """Invert :meth:`encode_array`: ``chunk`` is in the array->bytes representation of ``spec``."""
        specs = self._specs(spec)
        for codec, s in zip(reversed(self.array_array), reversed(specs[:-1]), strict=True):
            chunk = codec.decode(chunk, s)
        return chunk

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> bytes:
        data: bytes | memoryview = self.array_bytes.encode(self.encode_array(chunk, spec), self.resolve(spec))
        for codec in self.bytes_bytes:
            data = codec.encode(data)
        return bytes(data)

    def decode(self, data: bytes | memoryview, spec: ChunkSpec) -> np.ndarray:
        """A chunk of ``spec.shape`` and ``spec.dtype`` (possibly read-only or a view of ``data``)."""
        if self.bytes_bytes:
            for codec, limit in zip(reversed(self.bytes_bytes), reversed(self._limits(spec)), strict=True):
                data = codec.decode(data, spec.key) if limit is None else codec.decode_limited(data, spec.key, limit)
        if not self.array_array:  # the common chain: no spec to resolve
            return self.array_bytes.decode(data, spec)
        return self.decode_array(self.array_bytes.decode(data, self.resolve(spec)), spec)

    def is_raw(self, dtype: np.dtype) -> bool:
        """Whether chunks of ``dtype`` are stored as their own bytes: only ``bytes``, in native order."""
        return not self.array_array and not self.bytes_bytes and isinstance(self.array_bytes, BytesCodec) \
            and self.array_bytes.is_native(dtype)

    def can_decode_into(self, dtype: np.dtype) -> bool:
        """Whether :meth:`decode_into` and :meth:`decode_prefix` may work for chunks of ``dtype``: one
        compressor before ``bytes`` in native order (ask once per read; the calls still may say no)."""
        return not self.array_array and len(self.bytes_bytes) == 1 and isinstance(self.array_bytes, BytesCodec) \
            and self.array_bytes.is_native(dtype)

    def decode_into(self, data: bytes | memoryview, spec: ChunkSpec, out: np.ndarray) -> bool:
        """Decode straight into ``out`` (C-contiguous, of ``spec``'s shape and dtype) when
        :meth:`can_decode_into`: no temporary chunk. False when it cannot (then :meth:`decode`, which
        also reports invalid data); ``out`` may be overwritten either way."""
        if not self.can_decode_into(spec.dtype):
            return False
        return self.bytes_bytes[0].decode_into(data, out.reshape(-1).view(np.uint8))

    def decode_prefix(self, data: bytes | memoryview, spec: ChunkSpec, out: np.ndarray, nbytes: int) -> bool:
        """Like :meth:`decode_into`, but only the first ``nbytes`` of ``out`` (in C order) are wanted:
        the compressor may stop there, leaving the rest of ``out`` unspecified."""
        if not self.can_decode_into(spec.dtype):
            return False
        flat = out.reshape(-1).view(np.uint8)
        codec = self.bytes_bytes[0]
        if nbytes < flat.size and codec.decode_prefix(data, flat, nbytes):
            return True
        return codec.decode_into(data, flat)

    def encode_cannot_fail(self, dtype: np.dtype) -> bool:
        """Whether encoding valid chunks of ``dtype`` cannot fail: fixed-size data and infallible codecs."""
        return not dtype.hasobject and all(c.infallible for c in self.codecs)

    @property
    def codecs(self) -> tuple[Codec, ...]:
        """Every codec of the chain, in order."""
        return (*self.array_array, self.array_bytes, *self.bytes_bytes)

    def _limits(self, spec: ChunkSpec) -> list[int | None]:
        """Per bytes -> bytes codec, the most bytes its decoding may yield for a valid chunk (None: no
        bound, e.g. variable-length strings)."""
        size = self.array_bytes.encoded_size(self.resolve(spec) if self.array_array else spec)
        limits: list[int | None] = []
        for codec in self.bytes_bytes:
            limits.append(size)
            size = None if size is None else codec.decoded_bound(size)
        return limits

    def encoded_size(self, spec: ChunkSpec) -> int | None:
        size = self.array_bytes.encoded_size(self.resolve(spec))
        for codec in self.bytes_bytes:
            if size is None:
                return None
            size = codec.encoded_size(size)
        return size

    @property
    def sharding(self) -> ShardingCodec | None:
        """The sharding codec when inner chunks can be read and written in place (no bytes->bytes after it)."""
        if isinstance(self.array_bytes, ShardingCodec) and not self.bytes_bytes:
            return self.array_bytes
        return None

    def to_json(self) -> list[dict[str, Any]]:
        return codecs_to_json(self.metas)
