"""A codec chain (``array -> array`` codecs, one ``array -> bytes`` codec, ``bytes -> bytes`` codecs) and the
``sharding_indexed`` codec, which nests two chains: the two refer to each other, so they share this module.
They are built from metadata by :mod:`.build`; the shard format's data (index, byte layout) is in
:mod:`.shard_index`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import EllipsisType
from typing import Any, Literal

import numpy as np

from rectizarr._util import Coords, Shape, prod
from rectizarr.codecs.array_to_bytes import BytesCodec
from rectizarr.codecs.base import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec, ChunkSpec, Codec
from rectizarr.codecs.batch import Frames
from rectizarr.codecs.shard_index import EMPTY, ShardIndex, concat, is_fill, pack
from rectizarr.core.codec_meta import CodecMeta, ShardingMeta, codecs_to_json
from rectizarr.errors import CodecError, MetadataError

_INDEX_DTYPE = np.dtype(np.uint64)


@dataclass(frozen=True, slots=True)
class CodecPipeline:
    """A validated codec chain. ``metas`` are the codecs' metadata as resolved at build time (a blosc
    ``typesize`` filled in, nested sharding chains resolved), so :meth:`to_json` writes every parameter."""

    metas: tuple[CodecMeta, ...]
    array_array: tuple[ArrayArrayCodec, ...]
    array_bytes: ArrayBytesCodec
    bytes_bytes: tuple[BytesBytesCodec, ...]

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

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> bytes | memoryview:
        """The stored value of ``chunk``. Where ``bytes`` in native order is the whole array side, the chunk's
        bytes are a view of it (of its C-contiguous copy if strided: NumPy's copy lets other threads run),
        given to the one compressor or returned as they are (the caller stores them before it returns):
        ``tobytes`` would hold the GIL for the copy of a strided chunk, serialising the writers (1 MiB: 90 us
        each), and copy a contiguous chunk once more."""
        data: bytes | memoryview
        if (
            chunk.dtype == spec.dtype
            and chunk.size == spec.size
            and (self.can_decode_into(spec.dtype) if self.bytes_bytes else self.is_raw(spec.dtype))
        ):
            data = memoryview(np.ascontiguousarray(chunk).reshape(-1).view(np.uint8))
            if not self.bytes_bytes:
                return data
        else:
            data = self.array_bytes.encode(self.encode_array(chunk, spec), self.resolve(spec))
        for codec in self.bytes_bytes:
            data = codec.encode(data)
        return bytes(data)

    def decode(self, data: bytes | memoryview, spec: ChunkSpec) -> np.ndarray:
        """A chunk of ``spec.shape`` and ``spec.dtype`` (possibly read-only or a view of ``data``)."""
        stored = len(data)
        try:
            if self.bytes_bytes:
                for codec, limit in zip(reversed(self.bytes_bytes), self._limits(spec)[-2::-1], strict=True):
                    data = (
                        codec.decode(data, spec.key)
                        if limit is None
                        else codec.decode_limited(data, spec.key, limit)
                    )
            if not self.array_array:  # the common chain: no spec to resolve
                return self.array_bytes.decode(data, spec)
            return self.decode_array(self.array_bytes.decode(data, self.resolve(spec)), spec)
        except MemoryError as exc:  # (bounded decodes stop at what a chunk can hold; this is the rest)
            raise CodecError(f"out of memory decoding a {stored}-byte value ({exc})", key=spec.key) from exc

    def is_raw(self, dtype: np.dtype) -> bool:
        """Whether chunks of ``dtype`` are stored as their own bytes: only ``bytes``, in native order."""
        return (
            not self.array_array
            and not self.bytes_bytes
            and isinstance(self.array_bytes, BytesCodec)
            and self.array_bytes.is_native(dtype)
        )

    def can_decode_into(self, dtype: np.dtype) -> bool:
        """Whether :meth:`decode_into` and :meth:`decode_prefix` may work for chunks of ``dtype``: one
        compressor before ``bytes`` in native order (ask once per read; the calls still may say no)."""
        return (
            not self.array_array
            and len(self.bytes_bytes) == 1
            and isinstance(self.array_bytes, BytesCodec)
            and self.array_bytes.is_native(dtype)
        )

    def batch_releases_gil(self, dtype: np.dtype) -> bool:
        """Whether :meth:`decode_many` decodes chunks of ``dtype`` in one call that lets other threads run."""
        return self.can_decode_into(dtype) and self.bytes_bytes[0].batch_releases_gil

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
        flat, codec = out.reshape(-1).view(np.uint8), self.bytes_bytes[0]
        prefix = nbytes < flat.size and codec.decode_prefix(data, flat, nbytes)
        return prefix or codec.decode_into(data, flat)

    def decode_many(
        self, frames: Frames, spec: ChunkSpec, out: np.ndarray, rows: np.ndarray, threads: int = 1
    ) -> np.ndarray:
        """Decode value ``i`` of ``frames`` (chunks of ``spec``, fixed-size) into ``out[rows[i]]`` (``out``:
        C-contiguous, ``(m, *spec.shape)``) in as few codec calls as the chain allows (zstd: one, on
        ``threads`` threads); the mask of those decoded (:meth:`decode` reports why the others are not)."""
        flat = out.reshape(out.shape[0], -1).view(np.uint8)
        if self.can_decode_into(spec.dtype):
            done = self.bytes_bytes[0].decode_many_into(frames, flat, rows, threads)
        else:
            done = np.zeros(len(frames), dtype=bool)
        raw = self.is_raw(spec.dtype)
        for i in np.flatnonzero(~done).tolist():
            row = int(rows[i])
            if raw:  # the chunk's own bytes
                done[i] = int(frames.sizes[i]) == spec.nbytes
                if done[i]:
                    flat[row] = np.frombuffer(frames[i], np.uint8)
                continue
            try:
                out[row] = self.decode(frames[i], spec)
            except CodecError:
                continue  # the caller decodes it again, naming its key
            done[i] = True
        return done

    def encode_many(self, chunks: np.ndarray, spec: ChunkSpec, threads: int = 1) -> Frames:
        """Encode each chunk of ``chunks`` (``(n, *spec.shape)`` of ``spec.dtype``, fixed-size) as
        :meth:`encode` does, with as few codec calls as the chain allows (one for zstd)."""
        n = chunks.shape[0]
        if not n:
            return Frames.of([])
        if self.is_raw(spec.dtype) or self.can_decode_into(spec.dtype):
            rows = np.ascontiguousarray(chunks).reshape(n, -1).view(np.uint8)  # bytes in native order
            if self.bytes_bytes:  # then one compressor
                return self.bytes_bytes[0].encode_many(rows, threads)
            offsets = np.arange(n, dtype=np.uint64) * np.uint64(spec.nbytes)
            return Frames(rows.reshape(-1).data, offsets, np.full(n, spec.nbytes, dtype=np.uint64))
        return Frames.of([self.encode(chunks[i, ...], spec) for i in range(n)])  # 0-d chunks: arrays too

    def encode_cannot_fail(self, dtype: np.dtype) -> bool:
        """Whether encoding valid chunks of ``dtype`` cannot fail: fixed-size data and infallible codecs."""
        return not dtype.hasobject and all(c.infallible for c in self.codecs)

    @property
    def codecs(self) -> tuple[Codec, ...]:
        """Every codec of the chain, in order."""
        return (*self.array_array, self.array_bytes, *self.bytes_bytes)

    def _limits(self, spec: ChunkSpec) -> list[int | None]:
        """The most bytes a valid chunk's encoding takes after the array -> bytes codec and after each
        bytes -> bytes codec (what each one's decoding may yield), or None without a bound."""
        size = self.array_bytes.encoded_bound(self.resolve(spec) if self.array_array else spec)
        limits: list[int | None] = []
        for codec in self.bytes_bytes:
            limits.append(size)
            size = None if size is None else codec.decoded_bound(size)
        limits.append(size)
        return limits

    def stored_bound(self, spec: ChunkSpec) -> int | None:
        """The most bytes the stored value of a valid chunk of ``spec`` takes (what a store may refuse to
        read past), or None when there is no bound (variable-length data)."""
        return self._limits(spec)[-1]

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

    def sharding_axes(self, ndim: int) -> tuple[int, ...] | None:
        """When :attr:`sharding` applies after codecs that only reorder axes: the array axis of each axis
        the sharding codec sees (its inner chunks can then be read and written in place); else None."""
        if self.sharding is None or not all(c.axes_only for c in self.array_array):
            return None
        perm: list[Any] = list(range(ndim))
        for codec in self.array_array:
            perm = codec.map_axes(perm)
        return tuple(perm)

    def to_json(self) -> list[dict[str, Any]]:
        return codecs_to_json(self.metas)


class ShardingCodec(ArrayBytesCodec):
    """``sharding_indexed``: inner chunks of ``chunk_shape`` coded by ``codecs``, an index by ``index_codecs``.

    Shapes given to it are shard shapes in the codec's input space (after any ``transpose`` before it)."""

    name = "sharding_indexed"

    def __init__(
        self,
        chunk_shape: Sequence[int],
        codecs: CodecPipeline,
        index_codecs: CodecPipeline,
        index_location: Literal["start", "end"],
        *,
        path: str | None = None,
    ) -> None:
        self.chunk_shape: Shape = tuple(int(c) for c in chunk_shape)
        self.codecs, self.index_codecs = codecs, index_codecs
        self.index_location: Literal["start", "end"] = index_location
        self.infallible = all(c.infallible for chain in (codecs, index_codecs) for c in chain.codecs)
        if index_codecs.encoded_size(self._index_spec((1,) * len(self.chunk_shape), None)) is None:
            raise MetadataError(
                "index_codecs must produce a fixed-size encoding (no compressors); use bytes + crc32c",
                path=f"{path}.configuration.index_codecs" if path else None,
            )

    @property
    def meta(self) -> ShardingMeta:
        """The metadata of this codec, with the inner chains as their pipelines resolved them."""
        return ShardingMeta(self.chunk_shape, self.codecs.metas, self.index_codecs.metas, self.index_location)

    def validate(self, dtype: np.dtype, edges_per_axis: Sequence[np.ndarray]) -> None:
        if len(edges_per_axis) != len(self.chunk_shape):
            raise MetadataError(
                f"sharding chunk_shape {list(self.chunk_shape)} has {len(self.chunk_shape)} dimensions but "
                f"the shards it codes have {len(edges_per_axis)}"
            )
        for axis, (edges, inner) in enumerate(zip(edges_per_axis, self.chunk_shape, strict=True)):
            bad = [e for e in np.asarray(edges).tolist() if e % inner]  # Python ints: inner may be > 2**63
            if bad:
                raise MetadataError(
                    f"chunk edge length {bad[0]} in dimension {axis} is not divisible by the shard's "
                    f"inner chunk size {inner}"
                )

    def chunks_per_shard(self, shard_shape: Shape) -> Shape:
        if len(shard_shape) != len(self.chunk_shape) or any(
            s % c for s, c in zip(shard_shape, self.chunk_shape, strict=True)
        ):
            raise MetadataError(
                f"shard shape {list(shard_shape)} is not a multiple of the inner chunk shape {list(self.chunk_shape)}"
            )
        return tuple(s // c for s, c in zip(shard_shape, self.chunk_shape, strict=True))

    def _index_spec(self, cps: Shape, key: str | None) -> ChunkSpec:
        return ChunkSpec((*cps, 2), _INDEX_DTYPE, np.array(EMPTY, dtype=_INDEX_DTYPE), key)

    def encode_index(self, table: np.ndarray, cps: Shape) -> bytes:
        """The stored index of a shard of ``cps`` inner chunks from its ``(offset, nbytes)`` table (one row
        per inner chunk in C order; :data:`EMPTY` rows for absent ones)."""
        return bytes(self.index_codecs.encode(table.reshape(*cps, 2), self._index_spec(cps, None)))

    def encoded_bound(self, spec: ChunkSpec) -> int | None:
        """Twice what the inner chunks and the index of a shard of ``spec`` can take: writers that rewrite
        inner chunks in place may leave stale bytes behind (None: inner chunks without a bound)."""
        inner = self.codecs.stored_bound(self.inner_spec(spec))
        if inner is None:
            return None
        return 2 * (prod(self.chunks_per_shard(spec.shape)) * inner + self.index_nbytes(spec.shape))

    def index_nbytes(self, shard_shape: Shape) -> int:
        size = self.index_codecs.encoded_size(self._index_spec(self.chunks_per_shard(shard_shape), None))
        assert size is not None  # (index_codecs without a fixed size are refused at construction)
        return size

    def index_byte_range(self, shard_shape: Shape) -> tuple[int, int | None]:
        """The index's byte range: ``(0, n)`` at the start, or the suffix ``(-n, None)`` at the end."""
        n = self.index_nbytes(shard_shape)
        return (0, n) if self.index_location == "start" else (-n, None)

    def _index_bytes(self, shard: memoryview, n: int) -> memoryview:
        return shard[:n] if self.index_location == "start" else shard[len(shard) - n :]

    def decode_index(
        self, data: bytes | memoryview, shard_shape: Shape, *, shard_nbytes: int | None, key: str | None
    ) -> ShardIndex:
        """Decode and validate an index (``shard_nbytes``, when known, bounds every byte range)."""
        cps = self.chunks_per_shard(shard_shape)
        expected = self.index_nbytes(shard_shape)
        if len(data) != expected:
            raise self.error(f"shard index is {len(data)} bytes, expected {expected}", key)
        table = self.index_codecs.decode(data, self._index_spec(cps, key))
        return ShardIndex.checked(table, shard_nbytes, key=key, codec=self.name)

    def inner_spec(self, shard_spec: ChunkSpec) -> ChunkSpec:
        return shard_spec.with_shape(self.chunk_shape)

    def decode_inner(self, data: bytes | memoryview, inner_spec: ChunkSpec) -> np.ndarray:
        return self.codecs.decode(data, inner_spec)

    def encode_inner(self, chunk: np.ndarray, inner_spec: ChunkSpec) -> bytes | memoryview:
        return self.codecs.encode(chunk, inner_spec)

    def split(
        self, shard: bytes | memoryview, shard_shape: Shape, *, key: str | None
    ) -> tuple[ShardIndex, dict[Coords, memoryview]]:
        """The index and zero-copy views of every stored inner chunk's bytes."""
        mv = memoryview(shard).cast("B")
        index = self.index_of(mv, shard_shape, key=key)
        present = index.present()
        coords = [tuple(c) for c in np.argwhere(present).tolist()]
        starts = index.offsets[present].tolist()
        sizes = index.nbytes[present].tolist()
        return index, {c: mv[o : o + s] for c, o, s in zip(coords, starts, sizes, strict=True)}

    def index_of(self, shard: bytes | memoryview, shard_shape: Shape, *, key: str | None) -> ShardIndex:
        """The validated index of a whole shard value (every range inside the value)."""
        mv = memoryview(shard).cast("B")
        n = self.index_nbytes(shard_shape)
        if len(mv) < n:
            raise self.error(f"shard of {len(mv)} bytes is shorter than its {n}-byte index", key)
        return self.decode_index(self._index_bytes(mv, n), shard_shape, shard_nbytes=len(mv), key=key)

    def dense(
        self, shard: bytes | memoryview, shard_shape: Shape, dtype: np.dtype, *, key: str | None
    ) -> np.ndarray | None:
        """:meth:`ShardIndex.block` of ``shard`` where the inner chunks are plain ``bytes`` of ``dtype`` in
        native order (as rectizarr and most writers lay them out: a whole shard then reads with no work per
        inner chunk); ``None`` otherwise (other codecs, an absent chunk, another layout)."""
        if not self.codecs.is_raw(dtype):
            return None
        mv = memoryview(shard).cast("B")
        n = self.index_nbytes(shard_shape)
        if len(mv) < n:
            return None  # split() reports it
        index = self.decode_index(self._index_bytes(mv, n), shard_shape, shard_nbytes=len(mv), key=key)
        return index.block(mv, dtype, self.chunk_shape)

    def _build(
        self, shard_shape: Shape, chunks: Mapping[Coords, bytes | memoryview], *, as_view: bool = False
    ) -> bytes | memoryview:
        cps = self.chunks_per_shard(shard_shape)
        start = self.index_nbytes(shard_shape) if self.index_location == "start" else 0
        table, parts = pack(cps, chunks, start, codec=self.name)
        index = self.index_codecs.encode(table, self._index_spec(cps, None))
        pieces: list[bytes | memoryview] = (
            [index, *parts] if self.index_location == "start" else [*parts, index]
        )
        return concat(pieces, as_view=as_view)

    def assemble(
        self, shard_shape: Shape, chunks: Mapping[Coords, bytes | memoryview]
    ) -> bytes | memoryview | None:
        """A shard holding the given encoded inner chunks (bytes, or a view of a buffer when it is large),
        or ``None`` when there is nothing to store."""
        if not any(len(memoryview(v)) for v in chunks.values()):
            return None
        return self._build(shard_shape, chunks, as_view=True)

    def assemble_frames(
        self, shard_shape: Shape, frames: Frames, rows: np.ndarray
    ) -> bytes | memoryview | None:
        """:meth:`assemble` of the inner chunks encoded in ``frames`` (value ``i``: the inner chunk at C-order
        position ``rows[i]``, increasing), with no step per inner chunk: the same bytes."""
        cps = self.chunks_per_shard(shard_shape)
        stored = frames.sizes > 0  # a zero-length encoding is an absent inner chunk
        if not stored.any():
            return None
        start = self.index_nbytes(shard_shape) if self.index_location == "start" else 0
        sizes = frames.sizes[stored]
        table = np.full((prod(cps), 2), EMPTY, dtype=np.uint64)
        table[rows[stored], 1] = sizes
        table[rows[stored], 0] = np.uint64(start) + np.cumsum(sizes) - sizes
        data = memoryview(frames.buffer).cast("B")
        if not stored.all() or int(frames.offsets[0]) != 0 or int(frames.sizes.sum()) != len(data):
            data = memoryview(b"".join(frames[i] for i in np.flatnonzero(stored).tolist()))
        index = self.index_codecs.encode(table.reshape(*cps, 2), self._index_spec(cps, None))
        pieces: list[bytes | memoryview] = [index, data] if self.index_location == "start" else [data, index]
        return concat(pieces, as_view=True)

    def _inner_slices(self, coords: Coords) -> tuple[slice | EllipsisType, ...]:
        return (*(slice(c * s, (c + 1) * s) for c, s in zip(coords, self.chunk_shape, strict=True)), Ellipsis)

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> bytes:
        """A whole shard; inner chunks equal to the fill value (bit for bit) are left out."""
        if chunk.shape != spec.shape:
            raise self.error(f"shard of shape {chunk.shape} does not match {spec.shape}", spec.key)
        inner = self.inner_spec(spec)
        chunks: dict[Coords, bytes | memoryview] = {}
        for coords in np.ndindex(*self.chunks_per_shard(spec.shape)):
            sub = chunk[self._inner_slices(coords)]
            if not is_fill(sub, spec.fill_value):
                chunks[coords] = self.encode_inner(sub, inner)
        return bytes(self._build(spec.shape, chunks))  # bytes already: no copy

    def decode(self, data: bytes | memoryview, spec: ChunkSpec) -> np.ndarray:
        """A whole shard; empty inner chunks hold the fill value."""
        _, views = self.split(data, spec.shape, key=spec.key)
        out = spec.fill_chunk()
        inner = self.inner_spec(spec)
        for coords, view in views.items():
            out[self._inner_slices(coords)] = self.decode_inner(view, inner)
        return out
