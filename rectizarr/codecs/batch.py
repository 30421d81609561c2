"""Many chunks per codec call: the encoded values of a batch as one buffer with segments (:class:`Frames`),
and the pipeline's batch decode (:func:`decode_many`) into rows of a pre-allocated array.

A compressor that has a batch API (zstd: many frames, one C call, its own threads, the GIL released)
overrides :meth:`~rectizarr.codecs.base.BytesBytesCodec.decode_many_into`; every other chain falls back to
the per-chunk loop. A chunk the batch cannot decode is reported back, never guessed: the caller decodes it
the usual way, which names its key in the error."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True, eq=False)
class Frames:
    """``n`` encoded values as segments of one buffer: value ``i`` is ``buffer[offsets[i] : offsets[i] +
    sizes[i]]`` (``uint64`` arrays; a shard's inner chunks are its own bytes and index, no copy)."""

    buffer: bytes | memoryview
    offsets: np.ndarray
    sizes: np.ndarray

    @classmethod
    def of(cls, values: Sequence[bytes | memoryview]) -> Frames:
        """Values gathered into one buffer (one copy)."""
        sizes = np.fromiter(map(len, values), dtype=np.uint64, count=len(values))
        return cls(b"".join(values), np.cumsum(sizes) - sizes, sizes)

    def __len__(self) -> int:
        return int(self.sizes.size)

    def __getitem__(self, i: int) -> memoryview:
        start = int(self.offsets[i])
        return memoryview(self.buffer).cast("B")[start : start + int(self.sizes[i])]

    def segments(self) -> np.ndarray:
        """The ``(offset, size)`` pairs as a C-contiguous ``(n, 2)`` ``uint64`` array."""
        return np.ascontiguousarray(np.stack([self.offsets, self.sizes], axis=1), dtype=np.uint64)

    def u32_at(self, delta: int) -> np.ndarray:
        """The little-endian ``uint32`` at byte ``delta`` of every value (header fields), as ``int64``;
        -1 where a value is too short to hold it."""
        buf = np.frombuffer(self.buffer, dtype=np.uint8)
        ok = self.sizes >= delta + 4
        at = (self.offsets + np.uint64(delta))[ok].astype(np.int64)
        out = np.full(len(self), -1, dtype=np.int64)
        if at.size:
            got = buf[at[:, None] + np.arange(4)].astype(np.int64)
            out[ok] = got[:, 0] | (got[:, 1] << 8) | (got[:, 2] << 16) | (got[:, 3] << 24)
        return out
