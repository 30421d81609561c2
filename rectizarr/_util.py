"""Small shared helpers and type aliases (no rectizarr imports)."""

from __future__ import annotations

import functools
import os
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

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


def region_of(a: np.ndarray, box: Sequence[slice]) -> np.ndarray:
    """``a[box]`` as an array (a view), also when ``box`` is empty: ``a[()]`` of a 0-d array is a scalar."""
    sel: tuple[Any, ...] = (*box, Ellipsis)
    view: np.ndarray = a[sel]
    return view


def is_int(x: object) -> bool:
    """True for Python/numpy integers, False for bools."""
    return isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_)


NO_HUGE_PAGES_BYTES = 1 << 29  # arrays from 512 MiB up: ordinary pages (see empty)
_MADV_NOHUGEPAGE = 15  # <asm-generic/mman-common.h>, as mmap.MADV_NOHUGEPAGE
_MADV_POPULATE_WRITE = 23  # (Linux 5.14)
_POPULATE_STEP = 2 << 20


def empty(shape: Shape | int, dtype: Any) -> np.ndarray:
    """``np.empty``; from :data:`NO_HUGE_PAGES_BYTES` up (fixed-size items), without the transparent huge
    pages numpy asks for on large arrays where the kernel gives them only on request (Linux, ``madvise`` in
    ``/sys/kernel/mm/transparent_hugepage/enabled``). On this project's virtual machines, whose host takes
    back memory the guest has left free for a few seconds, the first write to a 2 MiB page is cheap when the
    page was freed moments before and dear otherwise. Two threads writing fresh memory: 1 GiB in 65-75 ms
    with huge pages back to back, 200 ms with ordinary pages, 870 ms with huge pages after a pause of 2.5 s
    (256 MiB: 200 vs 55 ms, 32 MiB: 40 vs 7 ms). In ``make bench``'s reads, where each implementation's
    output is freed just before the next one's is made, huge pages won at 256 MiB (raw chunked read 74
    vs 103 ms) and lost at 1 GiB (0.7 or 1.2-1.9 s from one read to the next, against 0.77-0.88 s every
    time with ordinary pages): the larger the array, the less of it the memory freed just before covers."""
    out = np.empty(shape, dtype)
    if out.nbytes >= NO_HUGE_PAGES_BYTES and not out.dtype.hasobject and (madvise := _madvise()) is not None:
        page = os.sysconf("SC_PAGE_SIZE")
        address = int(out.__array_interface__["data"][0])
        start, end = -(-address // page) * page, (address + out.nbytes) // page * page
        if end > start:
            madvise(start, end - start, _MADV_NOHUGEPAGE)  # advice: a failure changes nothing
    return out


def populate(a: np.ndarray) -> None:
    """Make the pages of ``a``'s memory, as its first writes would, leaving what it holds as it is (Linux's
    ``MADV_POPULATE_WRITE``; nothing elsewhere, or on kernels without it). ctypes lets go of the GIL for
    the call: on another thread it makes a read's output ready while the read waits for its data (32 MiB:
    5 ms of page faults on these machines)."""
    madvise = _libc_madvise()
    if madvise is None or not a.nbytes:
        return
    page = os.sysconf("SC_PAGE_SIZE")
    address = int(a.__array_interface__["data"][0])
    start, end = address // page * page, -(-(address + a.nbytes) // page) * page
    for at in range(start, end, _POPULATE_STEP):  # (in steps: the memory map's lock is never held long)
        if madvise(
            at, min(_POPULATE_STEP, end - at), _MADV_POPULATE_WRITE
        ):  # advice: a failure changes nothing
            return


@functools.cache
def _madvise() -> Callable[[int, int, int], int] | None:
    """libc's ``madvise`` on Linux when huge pages come only on request; None elsewhere."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            if "[madvise]" not in f.read():
                return None
    except OSError:
        return None
    return _libc_madvise()


@functools.cache
def _libc_madvise() -> Callable[[int, int, int], int] | None:
    """libc's ``madvise`` on Linux; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


# ------------------------------------------------------------------------------------------ fork


def in_forked_child(fn: Callable[[], None]) -> Callable[[], None]:
    """Run ``fn`` in a child just forked (``os.register_at_fork``; a decorator): for module-level state
    such as locks, which another thread of the parent may have held at the fork and would then stay held."""
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=fn)
    return fn


_RELOCKED: weakref.WeakSet[Any] = weakref.WeakSet()


def relocked_in_child(obj: Any) -> None:
    """Give ``obj`` (which keeps its lock in ``obj._lock``) a fresh lock in a forked child: a handle used
    after ``fork`` (a multiprocessing pool's workers) would wait forever on a lock another thread of the
    parent held at the fork."""
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
