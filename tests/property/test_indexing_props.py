"""Property tests: every plan, executed by the reference executor over a dict of chunks, equals numpy.

Random grids mix fixed and rectilinear dims (extents including 0, edges running past the extent); random
selections cover basic indexing (negative steps, newaxis, Ellipsis, one int array or mask), orthogonal,
coordinate (broadcast multi-dimensional arrays, full masks) and block selections. Reads and writes
(duplicates included: numpy's last-wins) are compared on the full array; ``roundtrip`` also checks that each
chunk_sel stays inside the chunk's data_len, that ``complete`` is exact, and that chunk_coords lists exactly
the chunks holding selected elements.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rectizarr.errors import SelectionError
from rectizarr.indexing import basic_plan, block_plan, coordinate_plan, orthogonal_plan
from tests.unit.test_indexing import FixedDim, VaryingDim, numpy_basic, numpy_orthogonal, roundtrip

STEPS = st.none() | st.sampled_from([1, 2, 3, 5, -1, -2, -3, -5])
PROPS = settings(max_examples=150, deadline=None)


@st.composite
def grids(draw: st.DrawFn, max_ndim: int = 3) -> list[FixedDim]:
    dims: list[FixedDim] = []
    for _ in range(draw(st.integers(0, max_ndim))):
        extent = draw(st.integers(0, 11))
        if draw(st.booleans()):
            dims.append(FixedDim(draw(st.integers(1, 5)), extent))
            continue
        edges = [draw(st.integers(1, 5))]
        while sum(edges) < extent:
            edges.append(draw(st.integers(1, 5)))
        edges += draw(st.lists(st.integers(1, 5), max_size=2))  # declared edges past the extent
        dims.append(VaryingDim(edges, extent))
    return dims


def a_slice(extent: int) -> st.SearchStrategy[slice]:
    bound = st.none() | st.integers(-extent - 3, extent + 3)
    return st.builds(slice, bound, bound, STEPS)


def int_array(draw: st.DrawFn, extent: int, shape: tuple[int, ...]) -> npt.NDArray[np.int64]:
    if extent == 0 and 0 not in shape:
        shape = (0, *shape[1:]) if shape else (0,)
    return draw(hnp.arrays(np.int64, shape, elements=st.integers(-extent, max(extent - 1, -extent))))


def with_ellipsis(draw: st.DrawFn, items: list[Any]) -> list[Any]:
    """Maybe replace a run of items by ``...``, or drop trailing items (implied ``:``)."""
    choice = draw(st.sampled_from(["keep", "ellipsis", "truncate"]))
    if choice == "ellipsis":
        p = draw(st.integers(0, len(items)))
        q = draw(st.integers(p, len(items)))
        return [*items[:p], Ellipsis, *items[q:]]
    if choice == "truncate":
        return items[: draw(st.integers(0, len(items)))]
    return items


@st.composite
def basic_selections(draw: st.DrawFn, dims: list[FixedDim]) -> tuple[Any, ...]:
    extents = [d.extent for d in dims]
    array_at = draw(st.none() | st.integers(0, max(len(dims) - 1, 0))) if dims else None
    items: list[Any] = []
    axis = 0
    while axis < len(dims):
        e = extents[axis]
        if axis == array_at:
            kind = draw(st.sampled_from(["ints", "mask", "masks"]))
            if kind == "ints":
                shape = draw(hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=4))
                items.append(int_array(draw, e, shape))
                axis += 1
            else:
                k = 1 if kind == "mask" else draw(st.integers(1, len(dims) - axis))
                items.append(draw(hnp.arrays(np.bool_, tuple(extents[axis : axis + k]))))
                axis += k
            continue
        if e and draw(st.booleans()):
            items.append(draw(st.integers(-e, e - 1)))
        else:
            items.append(draw(a_slice(e)))
        axis += 1
    items = with_ellipsis(draw, items)
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    return tuple(items)


@st.composite
def orthogonal_selections(draw: st.DrawFn, dims: list[FixedDim]) -> tuple[Any, ...]:
    items: list[Any] = []
    for d in dims:
        e = d.extent
        kind = draw(st.sampled_from(["int", "slice", "array", "mask"] if e else ["slice", "array", "mask"]))
        if kind == "int":
            items.append(draw(st.integers(-e, e - 1)))
        elif kind == "slice":
            items.append(draw(a_slice(e)))
        elif kind == "array":
            items.append(int_array(draw, e, (draw(st.integers(0, 6)),)))
        else:
            items.append(draw(hnp.arrays(np.bool_, (e,))))
    return tuple(with_ellipsis(draw, items))


@st.composite
def coordinate_selections(draw: st.DrawFn, dims: list[FixedDim]) -> Any:
    extents = tuple(d.extent for d in dims)
    full_mask = draw(st.booleans())
    if dims and full_mask:
        return draw(hnp.arrays(np.bool_, extents))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3))
    if 0 in extents:
        shape = (0, *shape[1:]) if shape else (0,)
    arrays = []
    for e in extents:
        own = shape
        if e and draw(st.booleans()):  # a broadcastable shape: fewer leading dims, some sides 1
            own = tuple(1 if draw(st.booleans()) else n for n in shape[draw(st.integers(0, len(shape))) :])
        arrays.append(int_array(draw, e, own) if own else np.int64(draw(st.integers(-e, e - 1))))
    return tuple(arrays)


@st.composite
def block_selections(draw: st.DrawFn, dims: list[FixedDim]) -> tuple[Any, ...]:
    items: list[Any] = []
    for d in dims:
        n = d.nchunks
        bound = st.none() | st.integers(-n - 2, n + 2)
        if n and draw(st.booleans()):
            items.append(draw(st.integers(-n, n - 1)))
        else:
            items.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1]))))
    return tuple(with_ellipsis(draw, items))


def expand(sel: tuple[Any, ...], ndim: int) -> list[Any]:
    """One item per axis: ``...`` and the implied trailing ``:`` written out."""
    at = [i for i, s in enumerate(sel) if s is Ellipsis]
    if at:
        sel = (*sel[: at[0]], *[slice(None)] * (ndim - len(sel) + 1), *sel[at[0] + 1 :])
    return [*sel, *[slice(None)] * (ndim - len(sel))]


def block_elements(dims: list[FixedDim], sel: tuple[Any, ...]) -> tuple[slice, ...]:
    """The element slices a block selection means (computed independently from the dims)."""
    out = []
    for d, s in zip(dims, expand(sel, len(dims)), strict=True):
        c0, c1 = (s % d.nchunks, s % d.nchunks + 1) if isinstance(s, int) else s.indices(d.nchunks)[:2]
        chunks = range(c0, c1)
        out.append(slice(d.offset(c0), d.offset(c1 - 1) + d.data_len(c1 - 1)) if chunks else slice(0, 0))
    return tuple(out)


@st.composite
def values(draw: st.DrawFn, shape: tuple[int, ...], leading_ones: bool = True) -> Any:
    kind = draw(
        st.sampled_from(
            ["full", "scalar", "broadcast", "leading"] if leading_ones else ["full", "scalar", "broadcast"]
        )
    )
    if kind == "scalar":
        return draw(st.integers(-(2**40), 2**40))
    if kind == "broadcast":
        shape = tuple(1 if draw(st.booleans()) else n for n in shape[draw(st.integers(0, len(shape))) :])
    elif kind == "leading":
        shape = (1, *shape)
    return draw(hnp.arrays(np.int64, shape, elements=st.integers(-(2**40), 2**40)))


@PROPS
@given(st.data())
def test_basic_selection_matches_numpy(data: st.DataObject) -> None:
    dims = data.draw(grids())
    sel = data.draw(basic_selections(dims))
    plan = basic_plan(dims, sel)
    expected_shape = np.zeros([d.extent for d in dims])[sel].shape
    assert plan.final_shape == expected_shape
    roundtrip(dims, plan, *numpy_basic(sel), data.draw(values(expected_shape)))


@PROPS
@given(st.data())
def test_orthogonal_selection_matches_numpy(data: st.DataObject) -> None:
    dims = data.draw(grids())
    sel = data.draw(orthogonal_selections(dims))
    plan = orthogonal_plan(dims, sel)
    value = data.draw(values(plan.final_shape, leading_ones=False))
    roundtrip(dims, plan, *numpy_orthogonal(expand(sel, len(dims)), dims), value)


@PROPS
@given(st.data())
def test_coordinate_selection_matches_numpy(data: st.DataObject) -> None:
    dims = data.draw(grids())
    sel = data.draw(coordinate_selections(dims))
    plan = coordinate_plan(dims, sel)
    key = sel if isinstance(sel, np.ndarray) else tuple(sel)
    expected_shape = np.zeros([d.extent for d in dims])[key].shape
    assert plan.final_shape == expected_shape
    roundtrip(dims, plan, *numpy_basic(key), data.draw(values(expected_shape)))


@PROPS
@given(st.data())
def test_block_selection_matches_numpy(data: st.DataObject) -> None:
    dims = data.draw(grids())
    sel = data.draw(block_selections(dims))
    plan = block_plan(dims, sel)
    elements = (*block_elements(dims, sel), Ellipsis)  # a block is a view, even of a 0-d array
    roundtrip(dims, plan, *numpy_basic(elements), data.draw(values(plan.final_shape)))


@PROPS
@given(st.data())
def test_out_of_bounds_raises_like_numpy(data: st.DataObject) -> None:
    dims = data.draw(grids(max_ndim=2).filter(bool))
    axis = data.draw(st.integers(0, len(dims) - 1))
    e = dims[axis].extent
    bad = data.draw(st.integers(e, e + 50) | st.integers(-e - 50, -e - 1))
    index = data.draw(st.sampled_from([bad, [0, bad] if e else [bad]]))
    sel: tuple[Any, ...] = (*[slice(None)] * axis, index)
    with pytest.raises(IndexError):
        np.zeros([d.extent for d in dims])[sel]
    with pytest.raises(SelectionError, match=f"index {bad} is out of bounds for axis {axis} with extent {e}"):
        basic_plan(dims, sel)
