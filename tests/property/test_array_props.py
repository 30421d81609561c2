"""Arrays against a numpy model: random grids (regular, rectilinear, mixed; sharded or not), random codec
chains and dtypes, random selections of every kind, resize and append sequences."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import rectizarr
from tests.strategies import (
    array_kwargs,
    basic_selections,
    coordinate_selections,
    examples,
    masks,
    numpy_orthogonal,
    orthogonal_selections,
    seeded_arrays,
)


def assert_same(got: Any, want: np.ndarray) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype
    assert np.array_equal(
        np.ascontiguousarray(got).reshape(-1).view(np.uint8),
        np.ascontiguousarray(want).reshape(-1).view(np.uint8),
    )


class ArrayModel(RuleBasedStateMachine):
    @initialize(setup=array_kwargs())
    def create(self, setup: dict[str, Any]) -> None:
        self.store = rectizarr.MemoryStore()
        self.array = rectizarr.create_array(self.store, **setup)
        fill = self.array.metadata.fill_value
        self.model = np.full(setup["shape"], fill, dtype=self.array.dtype)
        self.dtype = setup["dtype"]

    def value(self, data: st.DataObject, shape: tuple[int, ...]) -> np.ndarray:
        return data.draw(seeded_arrays(shape, self.dtype))

    @rule(data=st.data())
    def write_basic(self, data: st.DataObject) -> None:
        sel = data.draw(basic_selections(self.model.shape))
        value = self.value(data, np.shape(self.model[sel]))
        self.model[sel] = value
        self.array[sel] = value

    @rule(data=st.data())
    def write_scalar_broadcast(self, data: st.DataObject) -> None:
        sel = data.draw(basic_selections(self.model.shape))
        value = self.value(data, ())[()]
        self.model[sel] = value
        self.array[sel] = value

    @precondition(lambda self: all(self.model.shape))
    @rule(data=st.data())
    def write_ortho(self, data: st.DataObject) -> None:
        sel = data.draw(orthogonal_selections(self.model.shape))
        select, assign = numpy_orthogonal(sel, self.model.shape)
        # Orthogonal writes with repeated indices: last wins, as numpy's np.ix_ assignment.
        value = self.value(data, select(self.model).shape)
        assign(self.model, value)
        self.array.oindex[sel] = value

    @precondition(lambda self: all(self.model.shape))
    @rule(data=st.data())
    def write_coords(self, data: st.DataObject) -> None:
        sel = data.draw(coordinate_selections(self.model.shape, max_side=8))
        value = self.value(data, np.shape(self.model[sel]))
        self.model[sel] = value
        self.array.vindex[sel] = value

    @rule(data=st.data())
    def read_basic(self, data: st.DataObject) -> None:
        sel = data.draw(basic_selections(self.model.shape))
        assert_same(self.array[sel], np.asarray(self.model[sel]))

    @precondition(lambda self: all(self.model.shape))
    @rule(data=st.data())
    def read_ortho(self, data: st.DataObject) -> None:
        sel = data.draw(orthogonal_selections(self.model.shape))
        select, _ = numpy_orthogonal(sel, self.model.shape)
        assert_same(self.array.oindex[sel], select(self.model))

    @precondition(lambda self: all(self.model.shape))
    @rule(data=st.data())
    def read_coords(self, data: st.DataObject) -> None:
        sel = data.draw(coordinate_selections(self.model.shape, max_side=8))
        assert_same(self.array.vindex[sel], np.asarray(self.model[sel]))

    @precondition(lambda self: self.model.ndim > 0)
    @rule(data=st.data())
    def resize(self, data: st.DataObject) -> None:
        new = tuple(data.draw(st.integers(0, 14)) for _ in self.model.shape)
        try:
            self.array.resize(new)
        except rectizarr.MetadataError:
            # Sharded rectilinear axes grow by one edge = the growth, which must divide by the inner chunk.
            assert self.array.is_sharded
            return
        model = np.full(new, self.array.metadata.fill_value, dtype=self.model.dtype)
        common = tuple(slice(0, min(a, b)) for a, b in zip(new, self.model.shape, strict=True))
        model[common] = self.model[common]
        self.model = model

    @precondition(lambda self: self.model.ndim > 0)
    @rule(data=st.data())
    def append(self, data: st.DataObject) -> None:
        axis = data.draw(st.integers(0, self.model.ndim - 1))
        shape = list(self.model.shape)
        shape[axis] = data.draw(st.integers(1, 4))
        value = self.value(data, tuple(shape))
        try:
            self.array.append(value, axis=axis)
        except rectizarr.MetadataError:
            assert self.array.is_sharded
            return
        self.model = np.concatenate([self.model, value], axis=axis)

    @invariant()
    def same_everywhere(self) -> None:
        if hasattr(self, "array"):
            assert self.array.shape == self.model.shape
            assert_same(self.array[...], self.model)
            reopened = rectizarr.open_array(self.store, mode="r")
            assert_same(reopened[...], self.model)


ArrayModel.TestCase.settings = examples(2, stateful_step_count=12, suppress_health_check=list(HealthCheck))
TestArrayModel = pytest.mark.hypothesis(
    ArrayModel.TestCase
)  # selected with the @given tests by -m hypothesis


@given(setup=array_kwargs(), data=st.data())
@examples(2, suppress_health_check=list(HealthCheck))
def test_mask_selection_matches_numpy(setup: dict[str, Any], data: st.DataObject) -> None:
    a = rectizarr.create_array(rectizarr.MemoryStore(), **setup)
    value = data.draw(seeded_arrays(setup["shape"], setup["dtype"]))
    a[...] = value
    mask = data.draw(masks(value.shape))
    assert_same(a.get_mask_selection(mask), value[mask])
    new = data.draw(seeded_arrays((int(mask.sum()),), setup["dtype"]))
    a.set_mask_selection(mask, new)
    value[mask] = new
    assert_same(a[...], value)
