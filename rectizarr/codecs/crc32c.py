"""CRC-32C (Castagnoli, RFC 3720) through ``google_crc32c``, the only module that imports it."""

from __future__ import annotations

import google_crc32c
import numpy as np


def crc32c(data: bytes | bytearray | memoryview | np.ndarray) -> int:
    """CRC-32C of ``data`` as an unsigned 32-bit int (``crc32c(b"123456789") == 0xE3069283``)."""
    # The C extension takes bytes or numpy arrays, not memoryviews or bytearrays.
    arg = data if isinstance(data, bytes | np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    return int(google_crc32c.value(arg))
