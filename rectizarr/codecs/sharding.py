"""The ``sharding_indexed`` codec and the primitives the engine uses for partial shard I/O.

A shard is the inner chunks' encodings in any order, plus an index (``uint64`` array of shape
``chunks_per_shard + (2,)`` holding absolute ``(offset, nbytes)`` pairs, ``(2**64-1, 2**64-1)`` for an
empty inner chunk) encoded with ``index_codecs`` at the start or the end of the value. Readers trust only
the index: gaps, overlaps and any physical order are accepted. This module does no store I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import EllipsisType
from typing import TYPE_CHECKING, Literal

import numpy as np

from rectizarr import tuning
from rectizarr._util import MAX_U64, Coords, Shape
from rectizarr.codecs.array_to_bytes import BytesCodec
from rectizarr.codecs.base import ArrayBytesCodec, ChunkSpec
from rectizarr.core.codec_meta import ShardingMeta
from rectizarr.errors import CodecError, MetadataError

if TYPE_CHECKING:
    from rectizarr.codecs.pipeline import CodecPipeline

__all__ = ["ShardIndex", "ShardingCodec", "is_fill"]

_MAX = np.uint64(MAX_U64)
_INDEX_DTYPE = np.dtype(np.uint64)


def is_fill(chunk: np.ndarray, fill: np.ndarray) -> bool:
    """True when every element of ``chunk`` equals ``fill`` bit for bit (as TensorStore decides).

    So a NaN fill matches NaN data only with the same payload, and ``-0.0`` data is not a ``0.0`` fill:
    storing such chunks keeps the data exact. Object (string/bytes) chunks compare with ``==``.
    """
    dtype = chunk.dtype
    if dtype.hasobject:
        return bool(np.all(chunk == np.asarray(fill, dtype=object).reshape(()).item()))
    value = np.asarray(fill, dtype=dtype).reshape(())
    size = dtype.itemsize
    if size in (1, 2, 4, 8):
        as_uint = np.dtype(f"u{size}")
        bits, target = chunk.view(as_uint), value.view(as_uint)
        if bits.size and bits.flat[0] != target:  # most chunks with data differ at once: no full scan
            return False
        return bool(np.all(bits == target))
    rows = np.ascontiguousarray(chunk).view(np.uint8).reshape(-1, size)
    return bool(np.all(rows == np.frombuffer(value.tobytes(), dtype=np.uint8)))


@dataclass(frozen=True, slots=True, eq=False)
class ShardIndex:
    """A decoded, validated shard index: ``offsets`` and ``nbytes`` have the chunks-per-shard shape."""

    offsets: np.ndarray
    nbytes: np.ndarray

    def present(self) -> np.ndarray:
        """Boolean mask of the inner chunks stored in the shard."""
        empty: np.ndarray = (self.offsets == _MAX) & (self.nbytes == _MAX)
        return ~empty

    def byte_range(self, coords: Coords) -> tuple[int, int] | None:
        """``(offset, nbytes)`` of inner chunk ``coords``, or ``None`` if it is empty (fill value)."""
        offset, nbytes = int(self.offsets[coords]), int(self.nbytes[coords])
        if offset == MAX_U64 and nbytes == MAX_U64:
            return None
        return offset, nbytes


class ShardingCodec(ArrayBytesCodec):
    """``sharding_indexed``: inner chunks of ``chunk_shape`` coded by ``codecs``, an index by ``index_codecs``.

    Shapes given to it are shard shapes in the codec's input space (after any ``transpose`` before it).
    """

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
        self.codecs = codecs
        self.index_codecs = index_codecs
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
        return ShardingMeta(
            chunk_shape=self.chunk_shape,
            codecs=self.codecs.metas,
            index_codecs=self.index_codecs.metas,
            index_location=self.index_location,
        )

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
        return ChunkSpec((*cps, 2), _INDEX_DTYPE, np.array(_MAX, dtype=_INDEX_DTYPE), key)

    def index_nbytes(self, shard_shape: Shape) -> int:
        size = self.index_codecs.encoded_size(self._index_spec(self.chunks_per_shard(shard_shape), None))
        if size is None:  # pragma: no cover - excluded at construction
            raise MetadataError("index_codecs have no fixed encoded size")
        return size

    def index_byte_range(self, shard_shape: Shape) -> tuple[int, int | None]:
        """The index's byte range: ``(0, n)`` at the start, or the suffix ``(-n, None)`` at the end."""
        n = self.index_nbytes(shard_shape)
        return (0, n) if self.index_location == "start" else (-n, None)

    def decode_index(
        self, data: bytes | memoryview, shard_shape: Shape, *, shard_nbytes: int | None, key: str | None
    ) -> ShardIndex:
        """Decode and validate an index (``shard_nbytes``, when known, bounds every byte range)."""
        cps = self.chunks_per_shard(shard_shape)
        expected = self.index_nbytes(shard_shape)
        if len(data) != expected:
            raise CodecError(
                f"shard index is {len(data)} bytes, expected {expected}", key=key, codec=self.name
            )
        table = self.index_codecs.decode(data, self._index_spec(cps, key))
        offsets = np.array(table[..., 0], dtype=np.uint64)
        nbytes = np.array(table[..., 1], dtype=np.uint64)
        off_max, nb_max = offsets == _MAX, nbytes == _MAX
        live = ~(off_max & nb_max)

        def fail(mask: np.ndarray, what: str) -> None:
            if mask.any():
                coords = tuple(int(c) for c in np.argwhere(mask)[0])
                raise CodecError(
                    f"shard index entry {coords} (offset {int(offsets[coords])}, nbytes {int(nbytes[coords])}) "
                    f"{what}",
                    key=key,
                    codec=self.name,
                )

        fail(off_max ^ nb_max, "is half an empty marker")
        fail(live & (nbytes == 0), "has zero length")
        if shard_nbytes is None:
            fail(live & (offsets > _MAX - nbytes), "overflows")
        else:
            limit = np.uint64(shard_nbytes)
            fail(
                live & ((nbytes > limit) | (offsets > limit - nbytes)),
                f"ends past the shard's {shard_nbytes} bytes",
            )
        return ShardIndex(offsets, nbytes)

    def inner_spec(self, shard_spec: ChunkSpec) -> ChunkSpec:
        return shard_spec.with_shape(self.chunk_shape)

    def decode_inner(self, data: bytes | memoryview, inner_spec: ChunkSpec) -> np.ndarray:
        return self.codecs.decode(data, inner_spec)

    def encode_inner(self, chunk: np.ndarray, inner_spec: ChunkSpec) -> bytes:
        return self.codecs.encode(chunk, inner_spec)

    def split(
        self, shard: bytes | memoryview, shard_shape: Shape, *, key: str | None
    ) -> tuple[ShardIndex, dict[Coords, memoryview]]:
        """The index and zero-copy views of every stored inner chunk's bytes."""
        mv = memoryview(shard).cast("B")
        n = self.index_nbytes(shard_shape)
        if len(mv) < n:
            raise CodecError(
                f"shard of {len(mv)} bytes is shorter than its {n}-byte index", key=key, codec=self.name
            )
        raw = mv[:n] if self.index_location == "start" else mv[len(mv) - n :]
        index = self.decode_index(raw, shard_shape, shard_nbytes=len(mv), key=key)
        present = index.present()
        coords = [tuple(c) for c in np.argwhere(present).tolist()]
        starts = index.offsets[present].tolist()
        sizes = index.nbytes[present].tolist()
        return index, {c: mv[o : o + s] for c, o, s in zip(coords, starts, sizes, strict=True)}

    def dense(self, shard: bytes | memoryview, shard_shape: Shape, dtype: np.dtype, *,
              key: str | None) -> np.ndarray | None:
        """The inner chunks as one array of shape ``chunks_per_shard + chunk_shape`` (a view of ``shard``)
        when they are plain ``bytes`` of ``dtype`` in native order, all stored, back to back in C order of
        their coords (as rectizarr and most writers lay them out): a whole shard then reads with no work per
        inner chunk. ``None`` otherwise (other codecs, an absent chunk, another layout)."""
        chain = self.codecs
        if chain.array_array or chain.bytes_bytes or not isinstance(chain.array_bytes, BytesCodec) \
                or dtype.hasobject or chain.array_bytes._wire(dtype) != dtype:
            return None
        mv = memoryview(shard).cast("B")
        n = self.index_nbytes(shard_shape)
        if len(mv) < n:
            return None  # split() reports it
        raw = mv[:n] if self.index_location == "start" else mv[len(mv) - n :]
        index = self.decode_index(raw, shard_shape, shard_nbytes=len(mv), key=key)
        count = index.offsets.size
        size = int(np.prod(self.chunk_shape, dtype=np.int64)) * dtype.itemsize
        first = int(index.offsets.reshape(-1)[0])
        expected = np.arange(count, dtype=np.uint64) * np.uint64(size) + np.uint64(first)
        if size == 0 or first == MAX_U64 or bool(np.any(index.nbytes != size)) \
                or not np.array_equal(index.offsets.reshape(-1), expected):
            return None
        block = np.frombuffer(mv, dtype=dtype, count=count * (size // dtype.itemsize), offset=first)
        return block.reshape((*index.offsets.shape, *self.chunk_shape))

    def _build(self, shard_shape: Shape, chunks: Mapping[Coords, bytes | memoryview], *,
               as_view: bool = False) -> bytes | memoryview:
        cps = self.chunks_per_shard(shard_shape)
        index_size = self.index_nbytes(shard_shape)
        table = np.full((*cps, 2), _MAX, dtype=np.uint64)
        position = index_size if self.index_location == "start" else 0
        parts: list[bytes | memoryview] = []
        for coords in sorted(chunks):  # C order of the inner coords
            if len(coords) != len(cps) or not all(0 <= c < s for c, s in zip(coords, cps, strict=True)):
                raise CodecError(
                    f"inner chunk {coords} is outside a shard of {cps} inner chunks", codec=self.name
                )
            data = memoryview(chunks[coords]).cast("B")
            if not len(data):
                continue  # a zero-length encoding is an absent inner chunk
            table[coords] = (position, len(data))
            position += len(data)
            parts.append(data)
        index = self.index_codecs.encode(table, self._index_spec(cps, None))
        pieces = [index, *parts] if self.index_location == "start" else [*parts, index]
        total = sum(len(x) for x in pieces)
        if not as_view or total < tuning.current().assemble_numpy_bytes:
            return b"".join(pieces)
        # A large shard goes into a NumPy buffer: NumPy asks for huge pages, so the fresh memory costs far
        # fewer page faults than a bytes object of the same size (a 64 MiB shard: 4x faster).
        view = memoryview(np.empty(total, dtype=np.uint8)).cast("B")
        position = 0
        for piece in pieces:
            view[position : position + len(piece)] = piece
            position += len(piece)
        return view

    def assemble(self, shard_shape: Shape, chunks: Mapping[Coords, bytes | memoryview]) -> bytes | memoryview | None:
        """A shard holding the given encoded inner chunks (bytes, or a view of a buffer when it is large),
        or ``None`` when there is nothing to store."""
        if not any(len(memoryview(v)) for v in chunks.values()):
            return None
        return self._build(shard_shape, chunks, as_view=True)

    def _inner_slices(self, coords: Coords) -> tuple[slice | EllipsisType, ...]:
        return (*(slice(c * s, (c + 1) * s) for c, s in zip(coords, self.chunk_shape, strict=True)), Ellipsis)

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> bytes:
        """A whole shard; inner chunks equal to the fill value (bit for bit) are left out."""
        if chunk.shape != spec.shape:
            raise CodecError(
                f"shard of shape {chunk.shape} does not match {spec.shape}", key=spec.key, codec=self.name
            )
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
