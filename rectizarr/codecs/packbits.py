"""The ``packbits`` ``array -> bytes`` codec (zarr-extensions ``codecs/packbits``, as zarrs 0.23 implements it).

Each component (two for complex types) contributes its bits ``first_bit..last_bit`` (of its little-endian
representation; bit 0 the least significant) to one bit sequence, element after element; bit ``j`` of the
sequence is bit ``j % 8`` (least significant first) of byte ``j // 8``. The sequence is padded with zero
bits to whole bytes, and ``padding_encoding`` may add one byte (before or after) saying how many. Decoding
puts the bits back at ``first_bit`` and sign-extends signed integers to their full width (the spec's rule;
zarrs extends only within the byte holding the top bit, which differs for signed types of two or more bytes
whose ``last_bit`` lies a byte or more below the top).

The encoded size is fixed by the chunk shape, so a stored value of another size is refused before anything
is allocated for it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rectizarr.codecs.base import ArrayBytesCodec, ChunkSpec
from rectizarr.core.dtype import INTEGER_NAMES, data_type_from_numpy
from rectizarr.errors import MetadataError

# bits per component of the data types narrower than a byte (held one per byte, in its low bits)
_SUB_BYTE = dict(bool=1, int2=2, uint2=2, int4=4, uint4=4, float4_e2m1fn=4, float6_e2m3fn=6, float6_e3m2fn=6)
_SIGNED = frozenset({"int2", "int4", "int8", "int16", "int32", "int64"})
_WHOLE = INTEGER_NAMES | {"float16", "float32", "float64", "bfloat16", "complex64", "complex128"}


class PackbitsCodec(ArrayBytesCodec):
    name = "packbits"
    infallible = True

    def __init__(self, padding_encoding: str, first_bit: int | None, last_bit: int | None) -> None:
        if first_bit is not None and last_bit is not None and last_bit < first_bit:
            raise MetadataError(f"last_bit {last_bit} is below first_bit {first_bit}")
        self.padding_encoding, self.first_bit, self.last_bit = padding_encoding, first_bit, last_bit

    def _layout(self, dtype: np.dtype) -> tuple[int, int, int, int, bool]:
        """(components per element, bits per component, first bit, bits kept, signed) for ``dtype``."""
        name = data_type_from_numpy(dtype).name if dtype.kind != "O" else "object"
        if name in _SUB_BYTE:
            ncomp, nbits = 1, _SUB_BYTE[name]
        elif name in _WHOLE:
            ncomp = 2 if dtype.kind == "c" else 1
            nbits = dtype.itemsize * 8 // ncomp
        else:
            raise MetadataError(f"packbits does not code data type {name}")
        first = 0 if self.first_bit is None else self.first_bit
        last = nbits - 1 if self.last_bit is None else self.last_bit
        if last >= nbits:
            raise MetadataError(f"last_bit {last} is past the {nbits} bits of a {name} component")
        if last < first:
            raise MetadataError(f"first_bit {first} is past the {nbits} bits of a {name} component")
        return ncomp, nbits, first, last - first + 1, name in _SIGNED

    def validate(self, dtype: np.dtype, edges_per_axis: Sequence[np.ndarray]) -> None:
        self._layout(dtype)

    def _sizes(self, spec: ChunkSpec) -> tuple[int, int]:
        ncomp, _, _, kept, _ = self._layout(spec.dtype)
        nbits = spec.size * ncomp * kept
        return nbits, -(-nbits // 8)

    def encoded_size(self, spec: ChunkSpec) -> int | None:
        return self._sizes(spec)[1] + (self.padding_encoding != "none")

    def _components(self, dtype: np.dtype, ncomp: int, nbits: int) -> np.dtype:
        """The unsigned little-endian integer dtype holding one component's bits."""
        return np.dtype("u1") if nbits < 8 else np.dtype(f"<u{dtype.itemsize // ncomp}")

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> bytes:
        ncomp, nbits, first, kept, _ = self._layout(spec.dtype)
        total, nbytes = self._sizes(spec)
        arr = np.ascontiguousarray(chunk, dtype=spec.dtype)
        if arr.size != spec.size:
            raise self.error(f"got {arr.size} elements, the chunk has {spec.size}", spec.key)
        little = arr.astype(arr.dtype.newbyteorder("<")) if arr.dtype.byteorder == ">" else arr
        comps = little.reshape(-1).view(self._components(spec.dtype, ncomp, nbits)).astype(np.uint64)
        if nbits < 8:
            comps &= np.uint64((1 << nbits) - 1)
        comps >>= np.uint64(first)
        packed = _pack(comps, kept)
        assert packed.size == nbytes and total <= 8 * nbytes
        pad = bytes([8 * nbytes - total])
        body = packed.tobytes()
        return {"none": body, "first_byte": pad + body, "last_byte": body + pad}[self.padding_encoding]

    def decode(self, data: bytes | memoryview, spec: ChunkSpec) -> np.ndarray:
        ncomp, nbits, first, kept, signed = self._layout(spec.dtype)
        total, nbytes = self._sizes(spec)
        expected = nbytes + (self.padding_encoding != "none")
        raw = np.frombuffer(data, dtype=np.uint8)
        if raw.size != expected:
            raise self.error(
                f"stored value has {raw.size} bytes, a chunk of {spec.size} {spec.dtype} takes {expected}",
                spec.key,
            )
        if self.padding_encoding != "none":
            pad = int(raw[0] if self.padding_encoding == "first_byte" else raw[-1])
            if pad != 8 * nbytes - total:
                raise self.error(
                    f"padding byte says {pad} bits, the chunk pads {8 * nbytes - total}", spec.key
                )
            raw = raw[1:] if self.padding_encoding == "first_byte" else raw[:-1]
        comps = _unpack(raw, kept, spec.size * ncomp)
        if signed and first + kept < nbits:  # the top bit kept is the sign: copy it up to the full width
            top = np.uint64(1 << (kept - 1))
            high = np.uint64(((1 << nbits) - 1) ^ ((1 << kept) - 1))
            comps = np.where(comps & top, comps | high, comps)
        comps <<= np.uint64(first)
        if nbits < 8:
            comps &= np.uint64((1 << nbits) - 1)
        holder = self._components(spec.dtype, ncomp, nbits)
        out = comps.astype(holder).view(
            spec.dtype.newbyteorder("<") if spec.dtype.itemsize > 1 else spec.dtype
        )
        return out.astype(spec.dtype, copy=False).reshape(spec.shape)


_BLOCK = 1 << 15  # elements (a multiple of 8: every block starts on a byte) per step: temporaries stay small


def _pack(values: np.ndarray, bits: int) -> np.ndarray:
    """The low ``bits`` bits of each ``uint64`` of ``values``, one after another, least significant first."""
    shifts = np.arange(bits, dtype=np.uint64)
    parts = []
    for start in range(0, values.size, _BLOCK):
        block = values[start : start + _BLOCK]
        seq = ((block[:, None] >> shifts) & np.uint64(1)).astype(np.uint8)
        parts.append(np.packbits(seq.reshape(-1), bitorder="little"))
    return np.concatenate(parts) if parts else np.zeros(0, np.uint8)


def _unpack(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """Invert :func:`_pack`: ``count`` values of ``bits`` bits each."""
    out = np.empty(count, dtype=np.uint64)
    shifts = np.arange(bits, dtype=np.uint64)
    step = _BLOCK * bits // 8
    for i, start in enumerate(range(0, count, _BLOCK)):
        n = min(_BLOCK, count - start)
        seq = np.unpackbits(packed[i * step : (i + 1) * step], count=n * bits, bitorder="little")
        out[start : start + n] = np.bitwise_or.reduce(
            seq.reshape(n, bits).astype(np.uint64) << shifts, axis=1
        )  # type: ignore[call-overload]
    return out
