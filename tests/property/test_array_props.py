"""Arrays against a numpy model: random grids (regular, rectilinear, mixed; sharded or not), random codec
chains and dtypes, random selections of every kind, resize and append sequences."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import rectizarr

DTYPES = ["uint8", "int16", "uint32", "int64", "float32", "float64", "complex64", "bool"]


@st.composite
def edges_for(draw: st.DrawFn, extent: int, multiple: int = 1) -> list[int] | int:
    """A rectilinear axis (edges summing to >= extent, each a multiple of ``multiple``) or a regular size."""
    if draw(st.booleans()):
        return multiple * draw(st.integers(1, 4))
    edges: list[int] = []
    total = 0
    while total < extent or not edges:
        e = multiple * draw(st.integers(1, 4))
        edges.append(e)
        total += e
    if draw(st.booleans()):
        edges.append(multiple * draw(st.integers(1, 3)))  # an edge wholly past the extent
    return edges


@st.composite
def array_setup(draw: st.DrawFn) -> dict[str, Any]:
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(0, 12)) for _ in range(ndim))
    dtype = draw(st.sampled_from(DTYPES))
    sharded = draw(st.booleans())
    compressor = draw(st.sampled_from([None, "zstd", "gzip", "blosc", "crc32c"]))
    comps: list[Any] = []
    if compressor == "zstd":
        comps = [{"name": "zstd", "configuration": {"level": 1, "checksum": draw(st.booleans())}}]
    elif compressor == "gzip":
        comps = [{"name": "gzip", "configuration": {"level": 1}}]
    elif compressor == "blosc":
        comps = [{"name": "blosc", "configuration": {"cname": "lz4", "clevel": 1, "shuffle": "shuffle",
                                                      "typesize": np.dtype(dtype).itemsize, "blocksize": 0}}]
    elif compressor == "crc32c":
        comps = [{"name": "crc32c"}]
    filters: list[Any] = []
    if ndim > 1 and draw(st.booleans()):
        filters = [{"name": "transpose", "configuration": {"order": draw(st.permutations(range(ndim)))}}]
    fill = draw(st.sampled_from([None, 0, 1]))
    kwargs: dict[str, Any] = {"shape": shape, "dtype": dtype, "compressors": comps, "filters": filters,
                              "fill_value": (fill if dtype != "bool" else bool(fill)) if fill is not None else None,
                              "write_empty_chunks": draw(st.booleans())}
    if sharded:
        inner = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
        kwargs["chunks"] = inner
        kwargs["shards"] = [draw(edges_for(s, m)) for s, m in zip(shape, inner, strict=True)]
        kwargs["index_location"] = draw(st.sampled_from(["start", "end"]))
    else:
        kwargs["chunks"] = [draw(edges_for(s)) for s in shape]
    return kwargs


def random_value(draw: st.DrawFn, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    n = int(np.prod(shape))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if dtype.startswith("complex"):
        return (rng.integers(-5, 5, n) + 1j * rng.integers(-5, 5, n)).astype(dtype).reshape(shape)
    return rng.integers(0, 100, n).astype(dtype).reshape(shape)


@st.composite
def basic_selection(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[Any, ...]:
    sel: list[Any] = []
    for n in shape:
        kind = draw(st.sampled_from(["slice", "int", "full"]) if n else st.sampled_from(["slice", "full"]))
        if kind == "int":
            sel.append(draw(st.integers(-n, n - 1)))
        elif kind == "full":
            sel.append(slice(None))
        else:
            start = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
            step = draw(st.one_of(st.none(), st.integers(1, 3), st.integers(-3, -1)))
            sel.append(slice(start, stop, step))
    return tuple(sel)


@st.composite
def ortho_selection(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[Any, ...]:
    sel: list[Any] = []
    for n in shape:
        kind = draw(st.sampled_from(["slice", "ints", "mask"]) if n else st.just("slice"))
        if kind == "ints":
            sel.append(np.array(draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=5)), dtype=np.int64))
        elif kind == "mask":
            sel.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool))
        else:
            sel.append(slice(draw(st.one_of(st.none(), st.integers(0, n))), None, draw(st.integers(1, 2))))
    return tuple(sel)


@st.composite
def coord_selection(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    npts = draw(st.integers(1, 8))
    return tuple(np.array(draw(st.lists(st.integers(-n, n - 1), min_size=npts, max_size=npts)), dtype=np.int64)
                 for n in shape)


def assert_same(got: Any, want: np.ndarray) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype
    assert np.array_equal(np.ascontiguousarray(got).reshape(-1).view(np.uint8),
                          np.ascontiguousarray(want).reshape(-1).view(np.uint8))


class ArrayModel(RuleBasedStateMachine):
    @initialize(setup=array_setup())
    def create(self, setup: dict[str, Any]) -> None:
        self.store = rectizarr.MemoryStore()
        self.array = rectizarr.create_array(self.store, **setup)
        fill = self.array.metadata.fill_value
        self.model = np.full(setup["shape"], fill, dtype=self.array.dtype)
        self.dtype = setup["dtype"]

    @rule(data=st.data())
    def write_basic(self, data: st.DataObject) -> None:
        sel = data.draw(basic_selection(self.model.shape))
        target = self.model[sel]
        value = random_value(data.draw, np.shape(target), self.dtype)
        self.model[sel] = value
        self.array[sel] = value

    @rule(data=st.data())
    def write_scalar_broadcast(self, data: st.DataObject) -> None:
        sel = data.draw(basic_selection(self.model.shape))
        value = random_value(data.draw, (), self.dtype)[()]
        self.model[sel] = value
        self.array[sel] = value

    @precondition(lambda self: all(self.model.shape))
    @rule(data=st.data())
    def write_ortho(self, data: st.DataObject) -> None:
        sel = data.draw(ortho_selection(self.model.shape))
        target = self.model[np.ix_(*[np.arange(n)[s] for n, s in zip(self.model.shape, sel, strict=True)])]
        # Orthogonal writes with repeated indices: last wins, as numpy's np.ix_ assignment.
        value = random_value(data.draw, target.shape, self.dtype)
        self.model[np.ix_(*[np.arange(n)[s] for n, s in zip(self.model.shape, sel, strict=True)])] = value
        self.array.oindex[sel] = value

    @precondition(lambda self: all(self.model.shape))
    @rule(data=st.data())
    def write_coords(self, data: st.DataObject) -> None:
        sel = data.draw(coord_selection(self.model.shape))
        value = random_value(data.draw, sel[0].shape, self.dtype)
        self.model[sel] = value
        self.array.vindex[sel] = value

    @rule(data=st.data())
    def read_basic(self, data: st.DataObject) -> None:
        sel = data.draw(basic_selection(self.model.shape))
        assert_same(self.array[sel], np.asarray(self.model[sel]))

    @precondition(lambda self: all(self.model.shape))
    @rule(data=st.data())
    def read_ortho(self, data: st.DataObject) -> None:
        sel = data.draw(ortho_selection(self.model.shape))
        want = self.model[np.ix_(*[np.arange(n)[s] for n, s in zip(self.model.shape, sel, strict=True)])]
        assert_same(self.array.oindex[sel], want)

    @precondition(lambda self: all(self.model.shape))
    @rule(data=st.data())
    def read_coords(self, data: st.DataObject) -> None:
        sel = data.draw(coord_selection(self.model.shape))
        assert_same(self.array.vindex[sel], self.model[sel])

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
        value = random_value(data.draw, tuple(shape), self.dtype)
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


ArrayModel.TestCase.settings = settings(
    max_examples=100, stateful_step_count=12, deadline=None, suppress_health_check=list(HealthCheck)
)
TestArrayModel = ArrayModel.TestCase


@given(setup=array_setup(), data=st.data())
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
def test_mask_selection_matches_numpy(setup: dict[str, Any], data: st.DataObject) -> None:
    a = rectizarr.create_array(rectizarr.MemoryStore(), **setup)
    value = random_value(data.draw, setup["shape"], setup["dtype"])
    a[...] = value
    mask = np.asarray(data.draw(st.lists(st.booleans(), min_size=value.size, max_size=value.size)),
                      dtype=bool).reshape(value.shape)
    assert_same(a.get_mask_selection(mask), value[mask])
    new = random_value(data.draw, (int(mask.sum()),), setup["dtype"])
    a.set_mask_selection(mask, new)
    value[mask] = new
    assert_same(a[...], value)
