"""Unit tables for rectizarr.indexing: every selection form against numpy, errors, zero-size, 0-d, blocks.
The test dims and the reference executor the plans run on are in tests/plans.py."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from rectizarr.errors import SelectionError
from rectizarr.indexing import Dim, Plan, basic_plan, block_plan, coordinate_plan, orthogonal_plan
from tests.plans import (
    ChunkStore,
    FixedDim,
    VaryingDim,
    as_indices,
    check_projections,
    roundtrip,
    values_for,
    write,
)
from tests.strategies import numpy_basic, numpy_orthogonal


def stable_id(value: Any) -> str:
    """A parameter's ``repr`` without object addresses: the same test IDs in every process (pytest-xdist's
    workers must collect the same tests)."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))


# ------------------------------------------------------------------------------------ tables

DIMS2 = [FixedDim(3, 10), VaryingDim([2, 4, 5, 6], 7)]  # axis 1: rectilinear, edges overflow the extent


BASIC = [
    3,
    -1,
    (2, 4),
    (-10, -7),
    slice(None),
    slice(2, 9, 2),
    slice(None, None, -1),
    slice(8, 1, -3),
    slice(-2, None, -4),
    slice(20, -20, -1),
    (slice(1, 9), slice(6, 0, -2)),
    (Ellipsis, 3),
    (2, Ellipsis),
    (None, 3, None, slice(1, 4), None),
    (Ellipsis, None),
    (),
    Ellipsis,
    [3, 1, 1, -1],
    (slice(None, None, -2), [6, 0, 6]),
    (4, [0, 5]),
    ([[1, 2], [9, 0]], slice(None, None, -1)),
    (None, [[1, 2], [9, 0]], None, 3),
    (2, None, [1, 5]),  # None separates the advanced indices: numpy moves index dims first
    (Ellipsis, [4, 4, 0]),
    ([7, 2], slice(1, 5), ...),
    (slice(0, 1), [5, 2, 5]),
    np.array([True, False] * 5),
    (slice(None), np.array([False, True, True, False, False, True, True])),
    np.arange(70).reshape(10, 7) % 3 == 0,
    (np.int64(2), np.array(-3)),
]


@pytest.mark.parametrize("sel", BASIC, ids=stable_id)
def test_basic_matches_numpy(sel: Any) -> None:
    plan = basic_plan(DIMS2, sel)
    select, assign = numpy_basic(sel)
    shape = np.arange(70).reshape(10, 7)[sel].shape
    roundtrip(DIMS2, plan, select, assign, values_for(shape))
    roundtrip(DIMS2, plan, select, assign, 5)


ORTHO = [
    (),
    (3, 4),
    (slice(None, None, -3), [6, 0, 0, -1]),
    ([9, 0, 4, 4], [1, 2, 3, 4, 5]),
    ([[]][0], slice(None)),
    (np.array([True] * 10), np.array([True, False, True, True, False, True, True])),
    ([5, 4, 3], 2),
    (-1, [6, 5, 4, 3, 2, 1, 0]),
    (slice(1, 8, 3), slice(5, 0, -1)),
]


@pytest.mark.parametrize("sel", ORTHO, ids=stable_id)
def test_orthogonal_matches_numpy(sel: Any) -> None:
    plan = orthogonal_plan(DIMS2, sel)
    select, assign = numpy_orthogonal(sel, [d.extent for d in DIMS2])
    roundtrip(DIMS2, plan, select, assign, values_for(plan.final_shape))
    roundtrip(DIMS2, plan, select, assign, 7)


VINDEX = [
    ([1, 2, 9], [0, 6, -1]),
    ([[1], [9], [-3]], [0, 3, 6, 5]),
    (4, [6, 1, 1, 6]),
    (np.zeros((2, 0, 3), dtype=int), 0),
    ([3, 3, 3], [2, 2, 2]),
    (np.arange(70).reshape(10, 7) % 4 == 1,),
    np.ones((10, 7), dtype=bool),
]


@pytest.mark.parametrize("sel", VINDEX, ids=stable_id)
def test_coordinate_matches_numpy(sel: Any) -> None:
    plan = coordinate_plan(DIMS2, sel)
    key = sel if not isinstance(sel, tuple) or len(sel) > 1 else sel[0]
    select, assign = numpy_basic(key if not isinstance(key, tuple) else tuple(np.asarray(k) for k in key))
    roundtrip(DIMS2, plan, select, assign, values_for(plan.final_shape))
    assert plan.kind == "coordinate" and plan.shape == (int(np.prod(plan.final_shape)),)


def test_coordinate_duplicates_last_wins() -> None:
    plan = coordinate_plan(DIMS2, ([3, 4, 3, 3], [2, 0, 2, 2]))
    store = ChunkStore(DIMS2, np.zeros((10, 7), dtype=np.int64))
    write(store, plan, [10, 20, 30, 40])
    assert store.to_array()[3, 2] == 40 and store.to_array()[4, 0] == 20
    assert not any(p.complete for p in plan)


BLOCK_DIMS = [
    VaryingDim([4, 1, 3, 5, 9], 10),
    FixedDim(4, 6),
]  # chunks: [0,4) [4,5) [5,8) [8,10) | [0,4) [4,6)
BLOCKS = [
    ((0, 0), (slice(0, 4), slice(0, 4))),
    ((1,), (slice(4, 5), slice(0, 6))),
    ((-1, -1), (slice(8, 10), slice(4, 6))),
    ((slice(1, 3), 1), (slice(4, 8), slice(4, 6))),
    ((slice(-2, None),), (slice(5, 10), slice(0, 6))),
    ((slice(3, 1), ...), (slice(0, 0), slice(0, 6))),
    ((Ellipsis, slice(None)), (slice(0, 10), slice(0, 6))),
]


@pytest.mark.parametrize(("sel", "elements"), BLOCKS, ids=stable_id)
def test_block_selection_on_rectilinear_grid(sel: Any, elements: tuple[slice, ...]) -> None:
    plan = block_plan(BLOCK_DIMS, sel)
    roundtrip(BLOCK_DIMS, plan, *numpy_basic(elements), values_for(plan.final_shape))
    assert all(p.complete for p in plan)


ERRORS: list[tuple[Callable[[Sequence[Dim], Any], Plan], Any, str]] = [
    (basic_plan, (0, 7), "index 7 is out of bounds for axis 1 with extent 7"),
    (basic_plan, -11, "index -11 is out of bounds for axis 0 with extent 10"),
    (basic_plan, (Ellipsis, [0, 7]), "index 7 is out of bounds for axis 1 with extent 7"),
    (basic_plan, ([0, -12],), "index -12 is out of bounds for axis 0 with extent 10"),
    (basic_plan, np.array([True] * 9), r"shape \(9,\) does not match axes 0..0 with extents \(10,\)"),
    (basic_plan, (1, 2, 3), "too many indices: the array is 2-dimensional but 3 were indexed"),
    (basic_plan, (Ellipsis, 1, Ellipsis), "single ellipsis"),
    (basic_plan, (1, 2.5), r"non-integer \(float\) index 2.5 for axis 1"),
    (basic_plan, (1.0,), "float.*axis 0"),
    (basic_plan, "a", "unsupported index 'a'.*axis 0"),
    (basic_plan, ([0.5, 1],), "dtype float64 for axis 0"),
    (basic_plan, (True,), "boolean scalar"),
    (basic_plan, ([0, 1], [1, 2]), "use .oindex"),
    (basic_plan, (slice(None, None, 0),), "step cannot be zero"),
    (basic_plan, (slice(0.5, None),), "slice bound 0.5 for axis 0"),
    (basic_plan, ([[0], [1, 2]],), "not a rectangular array"),
    (basic_plan, (2, None, [1, 7]), "index 7 is out of bounds for axis 1 with extent 7"),
    (basic_plan, (np.array([18446744073709551615], dtype=np.uint64),), "index 18446744073709551615"),
    (orthogonal_plan, (None, 1), "newaxis"),
    (orthogonal_plan, ([[1]], 1), "must be 1-D"),
    (orthogonal_plan, (1, np.array([True, False])), r"shape \(2,\) does not match axis 1 with extent 7"),
    (orthogonal_plan, (1, [8]), "index 8 is out of bounds for axis 1 with extent 7"),
    (orthogonal_plan, (1, 2, 3), "too many indices"),
    (coordinate_plan, ([1],), "one integer array per axis: got 1 for 2 axes"),
    (coordinate_plan, ([1], slice(None)), r"unsupported index slice.*axis 1"),
    (coordinate_plan, ([1, 2], [1, 2, 3]), r"could not be broadcast together with shapes \(2,\) \(3,\)"),
    (coordinate_plan, ([10], [0]), "index 10 is out of bounds for axis 0 with extent 10"),
    (coordinate_plan, (3, -8), "index -8 is out of bounds for axis 1 with extent 7"),
    (
        coordinate_plan,
        np.ones((10, 6), dtype=bool),
        r"shape \(10, 6\) does not match the array shape \(10, 7\)",
    ),
    (coordinate_plan, ([1], np.array([True])), "must cover all axes"),
    (block_plan, (4,), "block index 4 is out of bounds for axis 0 with 4 chunks"),
    (block_plan, (0, -3), "block index -3 is out of bounds for axis 1 with 2 chunks"),
    (block_plan, (slice(0, 4, 2),), "step 1; got 2 for axis 0"),
    (block_plan, (None,), "integers and step-1 slices"),
    (block_plan, ([0, 1],), "integers and step-1 slices"),
]


@pytest.mark.parametrize(("fn", "sel", "message"), ERRORS, ids=stable_id)
def test_selection_errors(fn: Callable[[Sequence[Dim], Any], Plan], sel: Any, message: str) -> None:
    dims = BLOCK_DIMS if fn is block_plan else DIMS2
    with pytest.raises(SelectionError, match=message) as info:
        fn(dims, sel)
    assert isinstance(info.value, IndexError)
    assert isinstance(info.value, ValueError) == (
        message == "step cannot be zero"
    )  # NumPy's a[::0]: ValueError


ZERO = [
    (basic_plan, (slice(3, 3),), (0, 7)),
    (basic_plan, ([],), (0, 7)),
    (basic_plan, (np.zeros(10, dtype=bool), 2), (0,)),
    (basic_plan, (np.zeros((0, 2), dtype=np.int64), None), (0, 2, 1, 7)),
    (orthogonal_plan, ([], [1, 2]), (0, 2)),
    (coordinate_plan, (np.zeros(0, dtype=int), np.zeros(0, dtype=int)), (0,)),
    (coordinate_plan, np.zeros((10, 7), dtype=bool), (0,)),
    (block_plan, (slice(2, 2),), (0, 7)),
]


@pytest.mark.parametrize(("fn", "sel", "final"), ZERO, ids=stable_id)
def test_zero_size_selections(
    fn: Callable[[Sequence[Dim], Any], Plan], sel: Any, final: tuple[int, ...]
) -> None:
    plan = fn(DIMS2, sel)
    assert plan.final_shape == final and plan.nchunks == 0 and list(plan) == []
    assert plan.chunk_coords.shape == (0, 2)
    assert int(np.prod(plan.shape)) == 0
    assert plan.value_to_internal(3, np.int64).shape == plan.shape


def test_zero_extent_axis() -> None:
    dims = [FixedDim(2, 0), VaryingDim([3], 3)]
    for plan, final in [
        (basic_plan(dims, (slice(None), 1)), (0,)),
        (basic_plan(dims, (Ellipsis, None)), (0, 3, 1)),
        (orthogonal_plan(dims, ()), (0, 3)),
        (coordinate_plan(dims, np.zeros((0, 3), dtype=bool)), (0,)),
        (block_plan(dims, (slice(None), 0)), (0, 3)),
    ]:
        assert plan.final_shape == final and plan.nchunks == 0
    with pytest.raises(SelectionError, match="index 0 is out of bounds for axis 0 with extent 0"):
        basic_plan(dims, 0)


@pytest.mark.parametrize("fn", [basic_plan, orthogonal_plan, coordinate_plan, block_plan])
@pytest.mark.parametrize("sel", [(), Ellipsis])
def test_zero_dimensional(fn: Callable[[Sequence[Dim], Any], Plan], sel: Any) -> None:
    if fn is coordinate_plan and sel is Ellipsis:
        with pytest.raises(SelectionError, match="got 1 for 0 axes"):
            fn([], sel)
        return
    plan = fn([], sel)
    assert plan.shape == plan.final_shape == () and plan.chunk_coords.shape == (1, 0)
    (p,) = list(plan)
    assert p.coords == () and p.chunk_sel == () and p.out_sel == () and p.complete
    chunk, out = np.array(42), np.zeros((), dtype=np.int64)
    out[p.out_sel] = chunk[p.chunk_sel]
    assert out == 42
    chunk[p.chunk_sel] = plan.value_to_internal(9, np.int64)[p.out_sel]
    assert chunk == 9


def test_zero_dimensional_write_modes() -> None:
    with pytest.raises(ValueError, match="sequence"):
        basic_plan([], ()).value_to_internal([1], np.float64)  # a[()] = [1]: element assignment
    with pytest.raises(TypeError):  # numpy's own error for int arrays
        basic_plan([], ()).value_to_internal([1], np.int64)
    with pytest.raises(ValueError):
        basic_plan([], Ellipsis).value_to_internal([1], np.int64)  # a[...] = [1]: more dims than the view
    assert basic_plan([], Ellipsis).value_to_internal(np.array([5]), np.int64).reshape(()) == 5


COMPLETE = [
    (basic_plan, (slice(3, 6), slice(2, 6)), {(1, 1): True}),
    (basic_plan, (slice(3, 5), slice(2, 6)), {(1, 1): False}),
    (basic_plan, (9, slice(6, 7)), {(3, 2): True}),  # edge chunk: data_len 1 x 1 of edges 3 x 5
    (basic_plan, (slice(9, 10), slice(6, 7)), {(3, 2): True}),
    (basic_plan, (slice(None, None, -1), 0), {(0, 0): False, (1, 0): False, (2, 0): False, (3, 0): False}),
    (orthogonal_plan, ([5, 3, 4], [1, 0]), {(1, 0): True}),
    (orthogonal_plan, ([5, 3, 4, 4], [1, 0]), {(1, 0): False}),
    (orthogonal_plan, ([9], [6]), {(3, 2): True}),
    (orthogonal_plan, (slice(0, 10, 2), [6]), {(0, 2): False, (1, 2): False, (2, 2): False}),
    (orthogonal_plan, (slice(0, 10, 2), [0, 1]), {(0, 0): False, (1, 0): False, (2, 0): False}),
    (coordinate_plan, ([9], [6]), {(3, 2): True}),
    (coordinate_plan, ([[3], [4], [5]], [0, 1]), {(1, 0): True}),
    (coordinate_plan, ([3, 4, 5, 3, 4, 5, 5], [0, 0, 0, 1, 1, 1, 1]), {(1, 0): False}),
    (coordinate_plan, ([3, 4, 5, 3, 4], [0, 0, 0, 1, 1]), {(1, 0): False}),
]


@pytest.mark.parametrize(("fn", "sel", "expected"), COMPLETE, ids=stable_id)
def test_complete_flag(fn: Callable[[Sequence[Dim], Any], Plan], sel: Any, expected: dict[Any, bool]) -> None:
    plan = fn(DIMS2, sel)
    assert {p.coords: p.complete for p in check_projections(DIMS2, plan)} == expected


def test_projection_forms() -> None:
    # a contiguous run of an int array becomes a slice; a reversed slice has a negative-step out_sel
    (p,) = list(orthogonal_plan([FixedDim(10, 10)], ([6, 5, 4, 3],)))
    assert p.chunk_sel == (slice(3, 7, 1),) and p.out_sel == (slice(3, None, -1),)
    (p,) = list(basic_plan([FixedDim(10, 10)], slice(8, 1, -3)))
    assert p.chunk_sel == (slice(2, 9, 3),) and p.out_sel == (slice(2, None, -1),)
    (p,) = list(basic_plan([FixedDim(10, 10)], [[2, 7], [2, 0]]))
    assert isinstance(p.chunk_sel[0], np.ndarray) and p.chunk_sel[0].tolist() == [0, 2, 2, 7]
    assert p.out_sel[0].tolist() == [3, 0, 2, 1]  # type: ignore[union-attr]
    # two array axes: np.ix_ shapes, slices in the same tuple expanded
    (p,) = list(orthogonal_plan([FixedDim(10, 10)] * 3, ([1, 1], slice(0, 2), [3, 0])))
    assert [np.shape(s) for s in p.chunk_sel] == [(2, 1, 1), (1, 2, 1), (1, 1, 2)]
    assert p.out_sel == (slice(0, 2, 1), slice(0, 2, 1), slice(1, None, -1))
    (p,) = list(orthogonal_plan([FixedDim(10, 10)] * 2, ([1, 1, 0], [3, 0, 5])))
    assert [np.shape(s) for s in p.out_sel] == [(3, 1), (1, 3)]  # positions [2, 0, 1] and [1, 0, 2]


LAYOUTS = [
    (DIMS2, (None, [[1, 2, 3]], None, 0), "orthogonal", (3, 1)),  # index dims moved first: still a reshape
    (DIMS2, (1, None, [1, 2]), "orthogonal", (1, 2)),
    ([FixedDim(2, 4)] * 3, (0, slice(None), [1, 2]), "coordinate", (8,)),  # moved first: pointwise plan
    ([FixedDim(2, 4)] * 3, (np.ones((4, 4), dtype=bool), 1), "coordinate", (16,)),
    ([FixedDim(2, 4)] * 3, (slice(0, 1), 2, [[1], [2]]), "orthogonal", (1, 1, 2)),
]


@pytest.mark.parametrize(("dims", "sel", "kind", "shape"), LAYOUTS, ids=stable_id)
def test_plan_layouts(dims: Sequence[FixedDim], sel: Any, kind: str, shape: tuple[int, ...]) -> None:
    plan = basic_plan(dims, sel)
    assert (plan.kind, plan.shape) == (kind, shape)
    roundtrip(dims, plan, *numpy_basic(sel), values_for(plan.final_shape))


def test_orthogonal_chunk_coords_in_c_order() -> None:
    plan = orthogonal_plan(DIMS2, (slice(1, 4), [0, 1, 2]))
    assert plan.chunk_coords.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]


def test_huge_axes_plan_in_chunks_touched() -> None:
    big = 2**40
    plan = basic_plan([FixedDim(2**30, big)], slice(3, big - 3))
    assert plan.nchunks == 1024 and plan.final_shape == (big - 6,)
    first = next(iter(plan))
    assert first.chunk_sel == (slice(3, 2**30, 1),) and not first.complete
    plan = basic_plan([FixedDim(10, big)], slice(big - 1, None, -(2**35)))  # sparse step: 32 elements
    assert plan.nchunks == 32 and plan.final_shape == (32,)
    starts = [p.coords[0] * 10 + as_indices(p.chunk_sel[0])[0] for p in plan]
    assert starts[:2] == [big - 1 - 31 * 2**35, big - 1 - 30 * 2**35]
    # coordinate keys over 2**120 possible chunks are compressed instead of overflowing
    dims = [FixedDim(1, big)] * 3
    pts = (np.array([big - 1, 0, big - 1, 5]), np.array([0, big - 1, 0, 5]), np.array([7, 7, 7, big - 2]))
    plan = coordinate_plan(dims, pts)
    assert plan.chunk_coords.tolist() == [[0, big - 1, 7], [5, 5, big - 2], [big - 1, 0, 7]]
    assert [p.out_sel.tolist() for p in plan] == [[1], [3], [0, 2]]  # type: ignore[union-attr]


def test_value_to_internal() -> None:
    plan = basic_plan(DIMS2, (slice(0, 4), [1, 2]))
    v = plan.value_to_internal(3.9, np.int64)
    assert v.shape == (4, 2) and (v == 3).all() and not v.flags.writeable
    arr = np.arange(8).reshape(4, 2)
    assert np.shares_memory(plan.value_to_internal(arr, np.int64), arr)
    assert plan.value_to_internal([[[1, 2]]], np.int64).tolist() == [[1, 2]] * 4  # advanced: leading 1s ok
    with pytest.raises(ValueError, match="broadcast"):
        plan.value_to_internal([1, 2, 3], np.int64)
    with pytest.raises(OverflowError):
        plan.value_to_internal(300, np.uint8)
    view = basic_plan(DIMS2, (slice(0, 2), 0))
    with pytest.raises(ValueError, match="sequence"):
        view.value_to_internal([[1, 2]], np.int64)  # basic: a list may not have more dims than the view
    assert view.value_to_internal(np.array([[1, 2]]), np.int64).tolist() == [[1], [2]]
    scalar = basic_plan(DIMS2, (1, 2))
    with pytest.raises(ValueError, match="sequence"):
        scalar.value_to_internal([1], np.float64)
    assert scalar.value_to_internal(np.float64(2.5), np.int64).tolist() == [[2]]
    coord = coordinate_plan(DIMS2, ([[1], [2]], [0, 1, 2]))
    assert coord.value_to_internal(np.arange(3), np.int64).tolist() == [0, 1, 2, 0, 1, 2]


def test_index_objects_and_ranges_index_as_in_numpy() -> None:
    """An object with ``__index__`` is an int (also as a slice bound), a ``range`` an index array, as NumPy
    takes them (both were refused)."""

    class Index:
        def __init__(self, v: int) -> None:
            self.v = v

        def __index__(self) -> int:
            return self.v

    import rectizarr

    ref = np.arange(20, dtype="i4").reshape(5, 4)
    a = rectizarr.create_array(rectizarr.MemoryStore(), shape=(5, 4), dtype="i4", chunks=(2, 3))
    a[...] = ref
    for sel in [
        Index(2),
        (slice(Index(1), None), Index(-1)),
        range(1, 4),
        (range(3), 2),
        slice(None, None, Index(2)),
    ]:
        assert a[sel].tolist() == ref[sel].tolist()  # type: ignore[call-overload]
        assert a.oindex[sel].tolist() == ref[sel].tolist()  # type: ignore[call-overload]
