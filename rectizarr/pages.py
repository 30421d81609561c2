"""Fresh memory for arrays: without transparent huge pages where they cost more than they save
(:func:`empty`), and with its pages made ahead of the first writes (:func:`populate`)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from rectizarr import tuning
from rectizarr._util import Shape

_MADV_NOHUGEPAGE = 15  # <asm-generic/mman-common.h>, as mmap.MADV_NOHUGEPAGE
_MADV_POPULATE_WRITE = 23  # (Linux 5.14)


def empty(shape: Shape | int, dtype: Any) -> np.ndarray:
    """``np.empty``; from ``Tuning.no_huge_pages_bytes`` up (fixed-size items), without the transparent huge
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
    if (
        out.nbytes >= tuning.current().no_huge_pages_bytes
        and not out.dtype.hasobject
        and (madvise := _madvise()) is not None
    ):
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
    step = tuning.current().populate_step
    for at in range(start, end, step):  # (in steps: the memory map's lock is never held long)
        if madvise(at, min(step, end - at), _MADV_POPULATE_WRITE):  # advice: a failure changes nothing
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
