"""Small shared helpers and type aliases (no rectizarr imports)."""

from __future__ import annotations

import os
from typing import TypeAlias

import numpy as np

Shape: TypeAlias = tuple[int, ...]
Coords: TypeAlias = tuple[int, ...]

MAX_U64 = 2**64 - 1


def ceildiv(a: int, b: int) -> int:
    """Ceiling division of non-negative ``a`` by positive ``b``."""
    return -(-a // b)


def prod(shape: Shape) -> int:
    """Product of a shape as a Python int (exact for huge shapes, 1 for ``()``)."""
    out = 1
    for s in shape:
        out *= int(s)
    return out


def default_workers() -> int:
    """Default thread count for codec work: the number of usable cores."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def json_path(base: str, *parts: str | int) -> str:
    """Extend a JSON path: ``json_path("$.codecs", 1, "configuration")`` -> ``$.codecs[1].configuration``."""
    out = base
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def is_int(x: object) -> bool:
    """True for Python/numpy integers, False for bools."""
    return isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_)
