"""Two families found by differential testing against numpy (issue 19): ``blocks[...]`` on sharded arrays
when a block selection is empty along some axis, and 0-d values (0-d object arrays) read from and written
into ``string`` arrays. numpy (``StringDType`` for strings) is the oracle."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

import rectizarr
from tests.strategies import array_kwargs, basic_selections, block_selections, examples, expand, seeded_arrays

STRING = np.dtypes.StringDType()


def _block_elements(grid: rectizarr.Array, sel: tuple[Any, ...]) -> tuple[slice, ...]:
    """The element region a block selection means, computed from the chunk sizes (dask convention)."""
    out = []
    for sizes, s in zip(grid.write_chunk_sizes, expand(sel, grid.ndim), strict=True):
        n = len(sizes)
        c0, c1 = (s % n, s % n + 1) if isinstance(s, int) else s.indices(n)[:2]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        out.append(slice(int(offsets[c0]), int(offsets[c1])) if c1 > c0 else slice(0, 0))
    return tuple(out)


@given(setup=array_kwargs(), data=st.data())
@examples(2, suppress_health_check=list(HealthCheck))
def test_blocks_match_numpy_sharded_or_not(setup: dict[str, Any], data: st.DataObject) -> None:
    a = rectizarr.create_array(rectizarr.MemoryStore(), **setup)
    model = data.draw(seeded_arrays(setup["shape"], setup["dtype"]))
    a[...] = model
    sel = data.draw(block_selections([len(s) for s in a.write_chunk_sizes]))
    region = _block_elements(a, sel)
    want = model[region]
    got = a.blocks[sel]
    assert got.shape == want.shape
    assert np.array_equal(got, want, equal_nan=model.dtype.kind in "fc")
    assert a.get_block_selection(sel).shape == want.shape
    new = data.draw(seeded_arrays(want.shape, setup["dtype"]))
    a.blocks[sel] = new
    model[region] = new
    assert np.array_equal(a[...], model, equal_nan=model.dtype.kind in "fc")


def test_empty_block_selection_on_sharded_arrays() -> None:  # the examples of the issue
    a = rectizarr.create_array(
        rectizarr.MemoryStore(), shape=(4, 0), dtype="i4", chunks=(2, 1), shards=(4, 2)
    )
    assert a.blocks[0].shape == np.zeros((4, 0))[0:4].shape == (4, 0)
    b = rectizarr.create_array(
        rectizarr.MemoryStore(), shape=(4, 6), dtype="i4", chunks=(2, 1), shards=(4, 2)
    )
    assert b.blocks[0, 1:1].shape == (4, 0)
    b.blocks[0, 1:1] = np.zeros((4, 0), dtype="i4")
    assert not b[...].any()


_texts = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=4)


def _zero_d(value: str, how: str) -> Any:
    return {"str": value, "object": np.array(value, dtype=object), "unicode": np.array(value)}[how]


@given(
    shape=st.lists(st.integers(0, 4), max_size=2).map(tuple),
    data=st.data(),
    how=st.sampled_from(["str", "object", "unicode"]),
)
@examples(2, suppress_health_check=list(HealthCheck))
def test_string_arrays_take_and_give_zero_d_values_like_numpy(
    shape: tuple[int, ...], data: st.DataObject, how: str
) -> None:
    a = rectizarr.create_array(
        rectizarr.MemoryStore(),
        shape=shape,
        dtype="str",
        chunks=tuple(max(1, s // 2) for s in shape),
        fill_value="",
    )
    model = np.full(shape, "", dtype=STRING)
    for _ in range(3):
        sel = data.draw(basic_selections(shape))
        if data.draw(st.booleans()):
            sel = (*(sel if isinstance(sel, tuple) else (sel,)), None)  # a new axis, as a[..., None]
        value = _zero_d(data.draw(_texts), how)
        model[sel] = value
        a[sel] = value
        if shape and all(shape):
            index = [data.draw(st.integers(0, s - 1)) for s in shape]
            one = _zero_d(data.draw(_texts), how)
            model[tuple(index)] = one
            a.oindex[tuple([i] for i in index)] = one
        got = a[sel]
        want = model[sel]
        if isinstance(want, np.ndarray):
            assert isinstance(got, np.ndarray) and got.shape == want.shape
            assert all(type(x) is str for x in got.reshape(-1))
            assert got.tolist() == want.astype(object).tolist()
        else:
            assert type(got) is str and got == want
    whole = a[...]
    assert whole.shape == shape and all(type(x) is str for x in whole.reshape(-1))
    assert whole.tolist() == model.astype(object).tolist()
    if not shape:
        assert type(a[()]) is str and a[()] == model[()]


def test_zero_d_string_array_examples() -> None:  # the examples of the issue
    a = rectizarr.create_array(rectizarr.MemoryStore(), shape=(), dtype="str", fill_value="")
    a[...] = np.array("x", dtype=object)
    assert a[()] == "x" and type(a[()]) is str
    assert a[...].shape == () and type(a[...][()]) is str
    a[..., None] = np.array("z", dtype=object)
    assert a[()] == "z"
    b = rectizarr.create_array(rectizarr.MemoryStore(), shape=(3,), dtype="str", chunks=(2,), fill_value="")
    b[1] = np.array("y", dtype=object)
    b.oindex[[2]] = np.array("w", dtype=object)
    assert b[...].tolist() == ["", "y", "w"]


def test_zero_d_string_written_by_zarr_python(tmp_path: Any) -> None:
    from tests.refs import zarr_python

    zarr = zarr_python()
    for fmt in (3, 2):
        z = zarr.create_array(str(tmp_path / f"s{fmt}"), shape=(), dtype=str, zarr_format=fmt, fill_value="")
        z[...] = "abc"
        a = rectizarr.open_array(tmp_path / f"s{fmt}")
        assert type(a[()]) is str and a[()] == "abc"
        whole = a[...]
        assert whole.shape == () and type(whole[()]) is str
        a[...] = np.array("x", dtype=object)
        assert str(z[()]) == "x"
