"""Codec contracts shared by every codec: the chunk spec and the three codec kinds.

A chunk's shape is never fixed at construction: every call gets a :class:`ChunkSpec` describing the
*decoded* representation the codec works on (rectilinear grids give every chunk its own shape).
Construction depends only on metadata."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from rectizarr._util import Shape, prod
from rectizarr.errors import CodecError
from rectizarr.pages import empty

if TYPE_CHECKING:
    from rectizarr.codecs.batch import Frames


@dataclass(frozen=True, slots=True)
class ChunkSpec:
    """The decoded representation a codec works on: ``shape`` the codec (declared) shape of the chunk,
    ``dtype`` the numpy dtype in native byte order (``object`` for the variable-length ``string``/``bytes``
    types), ``fill_value`` a 0-d array of that dtype, ``key`` the store key of the value being coded (for
    error messages only)."""

    shape: Shape
    dtype: np.dtype
    fill_value: np.ndarray
    key: str | None = None
    size: int = field(init=False, repr=False, compare=False)  # elements (computed once: asked per chunk)
    nbytes: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        size = prod(self.shape)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "nbytes", size * self.dtype.itemsize)

    def with_shape(self, shape: Shape) -> ChunkSpec:
        return replace(self, shape=tuple(int(s) for s in shape))

    def with_key(self, key: str | None) -> ChunkSpec:
        return replace(self, key=key)

    def fill_chunk(self) -> np.ndarray:
        """A new chunk of this spec holding only the fill value."""
        out = empty(self.shape, self.dtype)
        out[...] = self.fill_value
        return out


class Codec(ABC):  # noqa: B024 - a common base; each kind below declares the abstract methods
    """Common base: every codec knows its registered name (used in error messages)."""

    name: str = ""
    infallible: bool = False
    """Encoding a valid chunk of fixed-size data cannot fail (so encoded values may be written while
    others are still being encoded)."""

    def map_axes(self, per_axis: Sequence[object]) -> list[object]:
        """Map per-axis facts of the input (e.g. the set of edges per axis) to the output's axes: at open,
        every chunk shape of a rectilinear grid is validated without enumerating chunks. Shape-preserving
        codecs return the input unchanged; ``transpose`` permutes it."""
        return list(per_axis)

    def error(self, message: str, key: str | None) -> CodecError:
        """The :class:`CodecError` of this codec about the value of ``key``."""
        return CodecError(message, key=key, codec=self.name)


class ArrayArrayCodec(Codec):
    """``array -> array``: may change the shape (``transpose``) or dtype (``numcodecs.astype``)."""

    axes_only: bool = False  # its output is its input with the axes reordered (map_axes says how)

    @abstractmethod
    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        """The encoded representation this codec produces from ``spec``."""

    @abstractmethod
    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray: ...

    @abstractmethod
    def decode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        """Invert :meth:`encode`; ``spec`` is the *decoded* representation (this codec's input)."""


class ArrayBytesCodec(Codec):
    """``array -> bytes``: exactly one per chain (``bytes``, ``vlen-*``, ``sharding_indexed`` ...)."""

    def validate(self, dtype: np.dtype, edges_per_axis: Sequence[np.ndarray]) -> None:
        """Check this codec can code chunks of ``dtype`` whose axis ``i`` edges are ``edges_per_axis[i]``
        (else :class:`~rectizarr.errors.MetadataError`); the default accepts everything."""

    @abstractmethod
    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> bytes: ...

    @abstractmethod
    def decode(self, data: bytes | memoryview, spec: ChunkSpec) -> np.ndarray: ...

    def encoded_size(self, spec: ChunkSpec) -> int | None:
        """Size in bytes of the encoding of any chunk of ``spec``, or ``None`` when it varies."""
        return None

    def encoded_bound(self, spec: ChunkSpec) -> int | None:
        """The most bytes a valid encoding of a chunk of ``spec`` takes (what decoding and reading the stored
        value may be limited to), or None without one (variable-length data); default :meth:`encoded_size`."""
        return self.encoded_size(spec)


def too_large(codec: str, key: str | None, limit: int) -> CodecError:
    return CodecError(
        f"decodes to more than {limit} bytes, more than the chunk can hold (corrupt or crafted data)",
        key=key,
        codec=codec,
    )


class BytesBytesCodec(Codec):
    """``bytes -> bytes``: compressors and checksums."""

    #: whether :meth:`decode_many_into` decodes a batch in one call that does not hold the GIL (so other
    #: threads run meanwhile); the per-value loop takes the GIL back for every value
    batch_releases_gil = False

    @abstractmethod
    def encode(self, data: bytes | memoryview) -> bytes: ...

    @abstractmethod
    def decode(self, data: bytes | memoryview, key: str | None = None) -> bytes | memoryview:
        """Invert :meth:`encode`; ``key`` names the store key in error messages."""

    def decode_limited(self, data: bytes | memoryview, key: str | None, limit: int) -> bytes | memoryview:
        """:meth:`decode`, refusing (``CodecError``) a value that decodes to more than ``limit`` bytes, the
        most a valid chunk can hold. Compressors override it to stop before that much memory is used (a
        few KiB of crafted data can claim gigabytes); the default checks afterwards."""
        out = self.decode(data, key)
        if len(out) > limit:
            raise too_large(self.name, key, limit)
        return out

    def decoded_bound(self, nbytes: int) -> int:
        """A bound on the bytes an encoding of ``nbytes`` input bytes can take (for decoding limits): the
        exact size when known, else twice the input and 64 KiB (compressors expand incompressible data by
        well under 1 %; a text encoding such as base64 by a third)."""
        size = self.encoded_size(nbytes)
        return 2 * nbytes + (64 << 10) if size is None else size

    def decode_into(self, data: bytes | memoryview, out: np.ndarray) -> bool:
        """Decode into ``out`` (a C-contiguous uint8 array) when ``data`` decodes to exactly ``out.nbytes``
        bytes; False when it cannot (unsupported, another size, or invalid data: :meth:`decode` then says
        why). ``out`` may be overwritten either way. The default supports nothing."""
        return False

    def decode_many_into(self, frames: Frames, out: np.ndarray, rows: np.ndarray, threads: int) -> np.ndarray:
        """Decode value ``i`` of ``frames`` into row ``rows[i]`` of ``out`` (C-contiguous ``uint8``, ``(m,
        row_bytes)``) where it decodes to exactly ``row_bytes``, on up to ``threads`` threads; the mask of
        those decoded (the caller decodes the others the usual way). By default the per-value loop of
        :meth:`decode_into`."""
        done = np.zeros(len(frames), dtype=bool)
        for i, row in enumerate(rows.tolist()):
            done[i] = self.decode_into(frames[i], out[row])
        return done

    def encode_many(self, rows: np.ndarray, threads: int) -> Frames:
        """Encode each row of ``rows`` (C-contiguous ``uint8``, ``(n, row_bytes)``) as :meth:`encode` does.
        The default is the per-row loop."""
        from rectizarr.codecs.batch import Frames

        return Frames.of([self.encode(memoryview(row)) for row in rows])

    def decode_prefix(self, data: bytes | memoryview, out: np.ndarray, n: int) -> bool:
        """Decode at least the first ``n`` bytes of the decoded value into ``out`` (C-contiguous uint8 of the
        whole decoded size; its bytes past ``n`` are then unspecified), when that costs less than decoding
        it all; False when it cannot (the caller then decodes the whole value), as by default."""
        return False

    def encoded_size(self, nbytes: int) -> int | None:
        """Encoded size for an input of ``nbytes``, or ``None`` when it depends on the data."""
        return None
