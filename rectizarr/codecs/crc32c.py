"""CRC-32C (Castagnoli, RFC 3720): ``google_crc32c`` when importable, else a vectorised numpy fallback.

The fallback splits the input into equal blocks (zero-padded at the front, which does not change a CRC
register that starts at zero), runs the table-driven CRC over every block at once, one byte position per
numpy operation, and then folds neighbouring block registers pairwise with the GF(2) "shift by n zero
bytes" operator (the math behind zlib's ``crc32_combine``), halving the number of blocks per step.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["crc32c", "crc32c_numpy"]

_POLY = 0x82F63B78  # reflected Castagnoli polynomial
_MASK = 0xFFFFFFFF


def _make_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> np.uint32(1)) ^ np.uint32(_POLY), table >> np.uint32(1))
    return table.astype(np.uint32)


_TABLE = _make_table()
_TABLE_LIST = [int(x) for x in _TABLE]
_SMALL = 1024  # below this many bytes a plain Python loop is faster than the vectorised path


def _step_zero_byte(reg: int) -> int:
    return (reg >> 8) ^ _TABLE_LIST[reg & 0xFF]


# An operator is the images of the 32 single-bit registers: a 32x32 matrix over GF(2), stored as columns.
_ONE_BYTE: tuple[int, ...] = tuple(_step_zero_byte(1 << k) for k in range(32))


def _apply(op: tuple[int, ...], reg: int) -> int:
    out = 0
    k = 0
    while reg:
        if reg & 1:
            out ^= op[k]
        reg >>= 1
        k += 1
    return out


def _compose(outer: tuple[int, ...], inner: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(_apply(outer, col) for col in inner)


_POW2: list[tuple[int, ...]] = [_ONE_BYTE]  # _POW2[k] advances a register over 2**k zero bytes


def _pow2_operator(k: int) -> tuple[int, ...]:
    while len(_POW2) <= k:  # grown once per process; racing threads compute identical values
        _POW2.append(_compose(_POW2[-1], _POW2[-1]))
    return _POW2[k]


def _shift(reg: int, nbytes: int) -> int:
    """Advance the register ``reg`` over ``nbytes`` zero bytes."""
    k = 0
    while nbytes:
        if nbytes & 1:
            reg = _apply(_pow2_operator(k), reg)
        nbytes >>= 1
        k += 1
    return reg


def _apply_many(op: tuple[int, ...], regs: np.ndarray) -> np.ndarray:
    out = np.zeros_like(regs)
    for k, col in enumerate(op):
        bit = (regs >> np.uint32(k)) & np.uint32(1)
        out ^= bit * np.uint32(col)
    return out


def _python_register(data: np.ndarray, reg: int) -> int:
    for b in data.tolist():
        reg = (reg >> 8) ^ _TABLE_LIST[(reg ^ b) & 0xFF]
    return reg


def crc32c_numpy(data: bytes | bytearray | memoryview | np.ndarray) -> int:
    """CRC-32C of ``data`` computed with numpy only (used when ``google_crc32c`` is missing)."""
    buf = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data.view(np.uint8)
    buf = buf.reshape(-1)
    n = buf.size
    if n <= _SMALL:
        return _python_register(buf, _MASK) ^ _MASK
    log_block = max(6, math.ceil(math.log2(math.isqrt(n))))
    block = 1 << log_block
    nblocks = 1 << math.ceil(math.log2(-(-n // block)))  # a power of two, so pairwise folding is exact
    pad = nblocks * block - n
    padded = np.zeros(nblocks * block, dtype=np.uint8)
    padded[pad:] = buf
    columns = np.ascontiguousarray(padded.reshape(nblocks, block).T)  # row j = byte j of every block
    regs = np.zeros(nblocks, dtype=np.uint32)
    for row in columns:
        regs = (regs >> np.uint32(8)) ^ _TABLE[(regs ^ row) & np.uint32(0xFF)]
    k = log_block
    while regs.size > 1:  # fold pairs: crc(A || B) = shift(crc(A), len(B)) ^ crc(B)
        regs = _apply_many(_pow2_operator(k), regs[0::2]) ^ regs[1::2]
        k += 1
    # The initial register 0xFFFFFFFF advanced over the n real bytes, plus the data-only register.
    return _shift(_MASK, n) ^ int(regs[0]) ^ _MASK


def _load_native() -> Callable[[bytes | bytearray | memoryview | np.ndarray], int] | None:
    try:
        import google_crc32c
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    if google_crc32c.implementation != "c":  # pragma: no cover - the pure-Python build is slow
        return None

    def native(data: bytes | bytearray | memoryview | np.ndarray) -> int:
        # The C extension takes bytes or numpy arrays, not memoryviews or bytearrays.
        arg = data if isinstance(data, bytes | np.ndarray) else np.frombuffer(data, dtype=np.uint8)
        return int(google_crc32c.value(arg))

    return native


_NATIVE = _load_native()


def crc32c(data: bytes | bytearray | memoryview | np.ndarray) -> int:
    """CRC-32C of ``data`` as an unsigned 32-bit int (``crc32c(b"123456789") == 0xE3069283``)."""
    if _NATIVE is not None:
        return _NATIVE(data)
    return crc32c_numpy(data)  # pragma: no cover - depends on the environment
