"""The ``bitround`` ``array -> array`` codec (zarr-extensions ``codecs/bitround``, as zarrs 0.23 computes it).

Encoding rounds each value's bits to ``keepbits`` significant bits, ties to even; decoding is the identity.
Floating-point values keep ``keepbits`` bits of their mantissa (complex ones per component); integers keep
``keepbits`` bits from their most significant set bit, on their unsigned bit pattern (a negative signed
value's top bit is set, so it keeps the top ``keepbits`` bits of its two's complement). A rounding that
would carry past the type's width saturates (all bits set) before the low bits are cleared, as zarrs does
(the sample data's uint8 255 -> 224). ``numcodecs.bitround`` stays numcodecs' codec (floats only; its
carry wraps around instead)."""

from __future__ import annotations

import numpy as np

from rectizarr.codecs.base import ArrayArrayCodec, ChunkSpec
from rectizarr.core.dtype import INTEGER_NAMES, data_type_from_numpy
from rectizarr.errors import MetadataError

_MANTISSA = {"float16": 10, "bfloat16": 7, "float32": 23, "float64": 52, "complex64": 23, "complex128": 52}
_INTEGERS = INTEGER_NAMES | {"numpy.datetime64", "numpy.timedelta64"}


def _bit_length(u: np.ndarray, width: int) -> np.ndarray:
    """Per element, the number of bits up to its most significant set one (0 for 0)."""
    length = np.zeros(u.shape, dtype=u.dtype)
    v = u.copy()
    step = width // 2
    while step:
        big = v >> u.dtype.type(step)
        has = big != 0
        v = np.where(has, big, v)
        length += has.astype(u.dtype) * u.dtype.type(step)
        step //= 2
    out: np.ndarray = length + (v != 0).astype(u.dtype)
    return out


def _round(u: np.ndarray, keepbits: int, maxbits: np.ndarray | int, width: int) -> np.ndarray:
    """Round the unsigned patterns ``u`` to ``keepbits`` bits below bit ``maxbits`` (ties to even)."""
    t = u.dtype.type
    maskbits = np.asarray(maxbits, dtype=u.dtype) - t(min(keepbits, width))
    todo = np.asarray(maxbits, dtype=u.dtype) > t(keepbits)
    maskbits = np.where(todo, maskbits, t(1))  # (unused where nothing is rounded: any valid shift)
    all_set = t(np.iinfo(u.dtype).max)
    mask = (all_set >> maskbits) << maskbits
    add = ((u >> maskbits) & t(1)) + ((t(1) << (maskbits - t(1))) - t(1))
    with np.errstate(over="ignore"):
        total = u + add
    total = np.where(total < u, all_set, total)  # a carry out of the top saturates
    return np.where(todo, total & mask, u)


class BitroundCodec(ArrayArrayCodec):
    name = "bitround"
    infallible = True

    def __init__(self, keepbits: int) -> None:
        if keepbits < 1:
            raise MetadataError(f"keepbits must be at least 1, not {keepbits}")
        self.keepbits = keepbits

    def _kind(self, dtype: np.dtype) -> tuple[np.dtype, int | None]:
        """The unsigned dtype of one component, and its mantissa bits (None: an integer type)."""
        name = data_type_from_numpy(dtype).name if dtype.kind != "O" else "object"
        if name in _MANTISSA:
            size = dtype.itemsize // (2 if dtype.kind == "c" else 1)
            return np.dtype(f"u{size}"), _MANTISSA[name]
        if name in _INTEGERS:
            return np.dtype(f"u{dtype.itemsize}"), None
        raise MetadataError(f"bitround does not code data type {name}")

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        self._kind(spec.dtype)
        return spec

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        unsigned, mantissa = self._kind(spec.dtype)
        out = np.array(chunk, dtype=spec.dtype, order="C", copy=True)
        u = out.reshape(-1).view(unsigned)
        width = unsigned.itemsize * 8
        maxbits = _bit_length(u, width) if mantissa is None else mantissa
        u[...] = _round(u, self.keepbits, maxbits, width)
        return out

    def decode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        return np.asarray(chunk)
