"""Very large read outputs and shard buffers are allocated without transparent huge pages where the kernel
gives them only on request (see rectizarr.pages.empty)."""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
import pytest

import rectizarr
from rectizarr import tuning
from rectizarr.pages import empty, populate


def _thp_mode() -> str | None:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.index("[") + 1 : text.index("]")]


def _vm_flags(address: int) -> list[str]:
    """The VmFlags of the mapping of this process that holds ``address``."""
    current = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                current = lo <= address < hi
            elif current and head == "VmFlags:":
                return line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


def _no_huge_pages_asked(a: np.ndarray) -> bool:
    middle = int(a.__array_interface__["data"][0]) + a.nbytes // 2
    return "nh" in _vm_flags(middle)


@pytest.mark.parametrize("dtype", ["uint16", "float64", "V3"])
def test_empty_is_np_empty_in_shape_and_dtype(dtype: str) -> None:
    with tuning.use(replace(tuning.current(), no_huge_pages_bytes=1 << 22)):
        _empty_is_np_empty(dtype)


def _empty_is_np_empty(dtype: str) -> None:
    for shape in [(), (0,), (3, 5), ((1 << 22) // 3 + 7,)]:
        a = empty(shape, dtype)
        assert a.shape == shape and a.dtype == np.dtype(dtype) and a.flags.c_contiguous and a.flags.owndata
        a[...] = np.zeros((), dtype)  # writable, every byte
    assert empty((4,), object).tolist() == [None] * 4


def test_large_outputs_ask_for_no_huge_pages_only_where_numpy_would_get_them_on_request() -> None:
    assert tuning.DEFAULT.no_huge_pages_bytes == 512 << 20
    small = 1 << 22
    with tuning.use(replace(tuning.current(), no_huge_pages_bytes=small)):  # a test-sized threshold
        _large_outputs_ask_for_no_huge_pages(small)


def _large_outputs_ask_for_no_huge_pages(small: int) -> None:
    if not sys.platform.startswith("linux"):  # no transparent huge pages, nothing to ask: numpy's empty
        assert empty((small // 2,), np.uint16).shape == (small // 2,)
        return
    mode = _thp_mode()
    big = empty((small // 2,), np.uint16)
    assert _no_huge_pages_asked(big) == (mode == "madvise")
    read = rectizarr.create_array(None, shape=(2048, 2048), dtype="uint16", chunks=(512, 512))
    read[...] = 1
    out = read[...]
    assert out.nbytes >= small and (out == 1).all()
    assert _no_huge_pages_asked(out) == (mode == "madvise")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="MADV_POPULATE_WRITE is Linux's")
def test_populate_makes_the_pages_and_keeps_what_they_hold() -> None:
    """``populate`` faults the pages in for writing (the writes that follow fault no more) and changes no
    value, also of a view that starts and ends inside a page."""
    import resource

    a = np.empty(8 << 20, np.uint8)  # a mapping of its own: no page made yet
    a[: 3 * 4096] = 7
    view = a[100:-100]
    populate(view)
    assert (a[: 3 * 4096] == 7).all()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    view[::4096] = 1
    assert (
        resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before < 64
    )  # (2,048 pages: 2,048 faults before)
    populate(np.empty(0, np.uint8))  # nothing to do
