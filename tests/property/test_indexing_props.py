"""Property tests: every plan, executed by the reference executor over a dict of chunks, equals numpy.

Random grids mix fixed and rectilinear dims (extents including 0, edges running past the extent); random
selections cover basic indexing (negative steps, newaxis, Ellipsis, one int array or mask), orthogonal,
coordinate (broadcast multi-dimensional arrays, full masks) and block selections. Reads and writes
(duplicates included: numpy's last-wins) are compared on the full array; ``roundtrip`` also checks that each
chunk_sel stays inside the chunk's data_len, that ``complete`` is exact, and that chunk_coords lists exactly
the chunks holding selected elements.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rectizarr import tuning
from rectizarr.errors import SelectionError
from rectizarr.indexing import basic_plan, block_plan, coordinate_plan, orthogonal_plan
from tests.plans import FixedDim, VaryingDim, roundtrip
from tests.strategies import (
    basic_selections,
    block_selections,
    chunked_axes,
    coordinate_selections,
    examples,
    expand,
    numpy_basic,
    numpy_orthogonal,
    orthogonal_selections,
    setitem_values,
)

PROPS = examples(3)


def grids(max_ndim: int = 3) -> st.SearchStrategy[list[FixedDim]]:
    """The test dims (strict about out-of-range indices) over random chunked axes."""
    return chunked_axes(max_dims=max_ndim).map(
        lambda axes: [FixedDim(c, e) if isinstance(c, int) else VaryingDim(c, e) for e, c in axes]
    )


def extents(dims: list[FixedDim]) -> list[int]:
    return [d.extent for d in dims]


def block_elements(dims: list[FixedDim], sel: tuple[Any, ...]) -> tuple[slice, ...]:
    """The element slices a block selection means (computed independently from the dims)."""
    out = []
    for d, s in zip(dims, expand(sel, len(dims)), strict=True):
        c0, c1 = (s % d.nchunks, s % d.nchunks + 1) if isinstance(s, int) else s.indices(d.nchunks)[:2]
        chunks = range(c0, c1)
        out.append(slice(d.offset(c0), d.offset(c1 - 1) + d.data_len(c1 - 1)) if chunks else slice(0, 0))
    return tuple(out)


@PROPS
@given(st.data())
def test_basic_selection_matches_numpy(data: st.DataObject) -> None:
    dims = data.draw(grids())
    sel = data.draw(basic_selections(extents(dims)))
    plan = basic_plan(dims, sel)
    expected_shape = np.zeros([d.extent for d in dims])[sel].shape
    assert plan.final_shape == expected_shape
    roundtrip(dims, plan, *numpy_basic(sel), data.draw(setitem_values(expected_shape)))


@PROPS
@given(st.data())
def test_orthogonal_selection_matches_numpy(data: st.DataObject) -> None:
    dims = data.draw(grids())
    sel = data.draw(orthogonal_selections(extents(dims)))
    plan = orthogonal_plan(dims, sel)
    value = data.draw(setitem_values(plan.final_shape, leading_ones=False))
    roundtrip(dims, plan, *numpy_orthogonal(sel, extents(dims)), value)


@PROPS
@given(st.data())
def test_coordinate_selection_matches_numpy(data: st.DataObject) -> None:
    dims = data.draw(grids())
    sel = data.draw(coordinate_selections(extents(dims)))
    plan = coordinate_plan(dims, sel)
    key = sel if isinstance(sel, np.ndarray) else tuple(sel)
    expected_shape = np.zeros([d.extent for d in dims])[key].shape
    assert plan.final_shape == expected_shape
    roundtrip(dims, plan, *numpy_basic(key), data.draw(setitem_values(expected_shape)))


@PROPS
@given(st.data())
def test_block_selection_matches_numpy(data: st.DataObject) -> None:
    dims = data.draw(grids())
    sel = data.draw(block_selections([d.nchunks for d in dims]))
    plan = block_plan(dims, sel)
    elements = (*block_elements(dims, sel), Ellipsis)  # a block is a view, even of a 0-d array
    roundtrip(dims, plan, *numpy_basic(elements), data.draw(setitem_values(plan.final_shape)))


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


@PROPS
@given(st.data())
def test_slices_over_few_chunks_plan_as_over_many(data: st.DataObject) -> None:
    """A slice over fewer than ``Tuning.few_chunks`` chunks of an axis is planned in plain Python; it gives
    the same chunks and entries as the numpy path that larger slices take."""
    from rectizarr.core.dims import FixedDim as Fixed
    from rectizarr.indexing import axis
    from tests.strategies import varying_dims

    dim = data.draw(
        st.one_of(
            st.builds(Fixed, st.integers(1, 12), st.integers(1, 150)),
            varying_dims().filter(lambda d: d.extent > 0),
        )
    )
    start, stop, step = slice(
        data.draw(st.integers(-160, 160)),
        data.draw(st.integers(-160, 160)),
        data.draw(st.integers(-30, 30).filter(bool)),
    ).indices(dim.extent)
    few = axis.axis_from_slice(dim, start, stop, step)
    with tuning.use(replace(tuning.current(), few_chunks=0)):
        ref = axis.axis_from_slice(dim, start, stop, step)
    assert few.length == ref.length and few.chunks.tolist() == ref.chunks.tolist()
    assert list(few.entries) == list(ref.entries)
