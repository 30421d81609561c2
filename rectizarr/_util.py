"""Small shared helpers and type aliases (no rectizarr imports)."""

from __future__ import annotations

import functools
import math
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import numpy as np

Shape: TypeAlias = tuple[int, ...]
Coords: TypeAlias = tuple[int, ...]

MAX_U64 = 2**64 - 1


class LazyModule:
    """A module imported when one of its names is first asked for (``import rectizarr`` leaves out what
    opening a local v3 array does not need). Type checkers see the module itself: assign it as
    ``if TYPE_CHECKING: from x import m`` / ``else: m = LazyModule("x.m")``."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        import importlib

        return getattr(importlib.import_module(self._name), attr)


def ceildiv(a: int, b: int) -> int:
    """Ceiling division of non-negative ``a`` by positive ``b``."""
    return -(-a // b)


def prod(shape: Shape) -> int:
    """Product of a shape as a Python int (exact for huge shapes, 1 for ``()``)."""
    return math.prod(map(int, shape))


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


def region_of(a: np.ndarray, box: Sequence[slice]) -> np.ndarray:
    """``a[box]`` as an array (a view), also when ``box`` is empty: ``a[()]`` of a 0-d array is a scalar."""
    sel: tuple[Any, ...] = (*box, Ellipsis)
    view: np.ndarray = a[sel]
    return view


def is_int(x: object) -> bool:
    """True for Python/numpy integers, False for bools."""
    return isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_)


def in_forked_child(fn: Callable[[], None]) -> Callable[[], None]:
    """Run ``fn`` in a child just forked (``os.register_at_fork``; a decorator): for module-level state
    such as locks, which another thread of the parent may have held at the fork and would then stay held."""
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=fn)
    return fn


_RELOCKED: weakref.WeakSet[Any] = weakref.WeakSet()


def relocked_in_child(obj: Any) -> None:
    """Give ``obj`` a fresh ``obj._lock`` in a forked child: a handle used after ``fork`` (a multiprocessing
    pool's workers) would wait forever on a lock another thread of the parent held at the fork."""
    _RELOCKED.add(obj)


_RLOCK = type(threading.RLock())


def _fresh_lock(old: Any) -> Any:
    """A new lock of ``old``'s kind (``type(lock)()`` cannot make a plain lock before Python 3.13:
    "cannot create '_thread.lock' instances")."""
    return threading.RLock() if isinstance(old, _RLOCK) else threading.Lock()


@in_forked_child
def _relock() -> None:  # pragma: no cover - runs in forked children (tests/reliability)
    fresh: dict[int, Any] = {}  # objects that shared a lock (a store and its read-only view) still share one
    for obj in list(_RELOCKED):
        old = obj._lock
        obj._lock = fresh.setdefault(id(old), _fresh_lock(old))


@functools.cache
def this_host() -> str:
    """This machine, in names that say who wrote something (hashlib and socket: imported on first use)."""
    import hashlib
    import socket

    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:6]


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` of this machine runs (True where that cannot be told)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True
