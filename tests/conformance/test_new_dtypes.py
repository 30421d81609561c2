"""The data types other implementations write (issue 19): ``struct``, ``null_terminated_bytes``, ``raw_bytes``,
``int2``/``int4``/``uint2``/``uint4`` and the ``complex_*`` spellings — written by rectizarr and read back by
the peer that writes them, written by the peer and read by rectizarr, bit-exact; fill values round-trip."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rectizarr
from rectizarr.core.dtype import DataType, parse_data_type
from tests.conformance.corpus import assert_same
from tests.refs import tensorstore, zarr_python
from tests.strategies import examples

STRUCT = {
    "name": "struct",
    "configuration": {"fields": [{"name": "x", "data_type": "float32"}, {"name": "y", "data_type": "int16"}]},
}
TYPES: dict[str, Any] = {
    "struct": STRUCT,
    "struct_nested": {
        "name": "struct",
        "configuration": {
            "fields": [{"name": "p", "data_type": STRUCT}, {"name": "q", "data_type": "uint8"}]
        },
    },
    "null_terminated_bytes": {"name": "null_terminated_bytes", "configuration": {"length_bytes": 5}},
    "raw_bytes": {"name": "raw_bytes", "configuration": {"length_bytes": 3}},
    "int2": "int2",
    "int4": "int4",
    "uint2": "uint2",
    "uint4": "uint4",
    "complex_float32": "complex_float32",
    "complex_float64": "complex_float64",
    "complex_float16": "complex_float16",
    "complex_bfloat16": "complex_bfloat16",
}


def _data(dt: DataType, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dt.name in ("int2", "int4", "uint2", "uint4"):
        lo, hi = {"int2": (-2, 1), "int4": (-8, 7), "uint2": (0, 3), "uint4": (0, 15)}[dt.name]
        return rng.integers(lo, hi, n, endpoint=True).astype(dt.numpy)
    raw = rng.integers(0, 256, n * dt.numpy.itemsize, dtype=np.uint8)
    out = np.frombuffer(raw.tobytes(), dtype=dt.numpy).copy()
    if dt.name == "null_terminated_bytes":
        out = np.array([bytes(b).rstrip(b"\0") for b in out], dtype=dt.numpy)
    return out


def _write(
    path: Path, name: str, shape: tuple[int, ...] = (7,), seed: int = 0
) -> tuple[rectizarr.Array, Any]:
    dt = parse_data_type(TYPES[name])
    arr = rectizarr.create_array(path, shape=shape, chunks=(3,), dtype=dt)
    data = _data(dt, int(np.prod(shape)), seed).reshape(shape)
    arr[:5] = data[:5]
    want = np.full(shape, arr.metadata.fill_value, dtype=dt.numpy)
    want[:5] = data[:5]
    return arr, want


@pytest.mark.parametrize("name", list(TYPES))
def test_round_trip(name: str, tmp_path: Path) -> None:
    arr, want = _write(tmp_path / "a.zarr", name)
    assert_same(arr[...], want, what=name)
    again = rectizarr.open_array(tmp_path / "a.zarr", mode="r")
    assert again.metadata.data_type == arr.metadata.data_type
    assert_same(again[...], want, what=name)
    assert_same(again.oindex[[4, 0, 6]], want[[4, 0, 6]], what=name)


@pytest.mark.parametrize("name", ["struct", "struct_nested", "null_terminated_bytes", "raw_bytes"])
def test_zarr_python_reads_what_we_write(name: str, tmp_path: Path) -> None:
    zarr = zarr_python()
    _, want = _write(tmp_path / "a.zarr", name, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = np.asarray(zarr.open_array(str(tmp_path / "a.zarr"), mode="r")[...])
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("name", ["struct", "null_terminated_bytes", "raw_bytes"])
def test_we_read_what_zarr_python_writes(name: str, tmp_path: Path) -> None:
    zarr = zarr_python()
    numpy_dtype = parse_data_type(TYPES[name]).numpy
    data = _data(parse_data_type(TYPES[name]), 6, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.create_array(str(tmp_path / "z.zarr"), shape=(6,), chunks=(4,), dtype=numpy_dtype)
        z[:4] = data[:4]
        want = np.asarray(z[...])
    got = rectizarr.open_array(tmp_path / "z.zarr", mode="r")
    assert got.metadata.data_type.to_json() == TYPES[name]
    assert got[...].tobytes() == want.tobytes()


def test_tensorstore_struct_both_ways(tmp_path: Path) -> None:
    ts = tensorstore()
    _, want = _write(tmp_path / "a.zarr", "struct", seed=3)
    for field in ("x", "y"):
        t = ts.open(
            {
                "driver": "zarr3",
                "kvstore": {"driver": "file", "path": str(tmp_path / "a.zarr")},
                "field": field,
            },
            open=True,
        ).result()
        assert t.read().result().tobytes() == np.ascontiguousarray(want[field]).tobytes()
    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": str(tmp_path / "t.zarr")},
        "metadata": {
            "shape": [5],
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
            "data_type": STRUCT,
            "fill_value": {"x": "NaN", "y": -3},
        },
    }
    for i, (field, values) in enumerate((("x", np.float32([1.5, -0.0, 3])), ("y", np.int16([7, 8, 9])))):
        t = ts.open({**spec, "field": field}, create=i == 0, open=i > 0).result()
        t[:3] = values
    got = rectizarr.open_array(tmp_path / "t.zarr", mode="r")
    out = got[...]
    assert out["x"][:3].tobytes() == np.float32([1.5, -0.0, 3]).tobytes() and np.isnan(out["x"][3:]).all()
    assert out["y"].tolist() == [7, 8, 9, -3, -3]


@pytest.mark.parametrize("name", ["int2", "int4"])
def test_tensorstore_int2_int4_both_ways(name: str, tmp_path: Path) -> None:
    ts = tensorstore()
    _, want = _write(tmp_path / "a.zarr", name, seed=4)
    t = ts.open(
        {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path / "a.zarr")}}, open=True
    ).result()
    assert t.read().result().view(np.uint8).tolist() == want.view(np.uint8).tolist()
    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": str(tmp_path / "t.zarr")},
        "metadata": {
            "shape": [6],
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
            "data_type": name,
            "fill_value": -1,
        },
    }
    t = ts.open(spec, create=True).result()
    values = np.array([-2, 1, 0, -1], dtype=getattr(ml_dtypes, name))
    t[:4] = values
    got = rectizarr.open_array(tmp_path / "t.zarr", mode="r")[...]
    assert (
        got.view(np.uint8).tolist()
        == np.concatenate([values, values[3:4], values[3:4]]).view(np.uint8).tolist()
    )


@pytest.mark.parametrize(
    ("name", "core"), [("complex_float32", "complex64"), ("complex_float64", "complex128")]
)
def test_complex_spellings_store_the_core_bytes(name: str, core: str, tmp_path: Path) -> None:
    data = _data(parse_data_type(core), 7, 5)
    stored = []
    for dtype in (name, core):
        arr = rectizarr.create_array(
            tmp_path / f"{dtype}.zarr", shape=(7,), chunks=(3,), dtype=dtype, compressors=None
        )
        arr[...] = data
        stored.append([(tmp_path / f"{dtype}.zarr" / "c" / str(i)).read_bytes() for i in range(3)])
    assert stored[0] == stored[1]
    assert rectizarr.open_array(tmp_path / f"{name}.zarr", mode="r").dtype == np.dtype(core)


def test_complex_half_types_interleave_components(tmp_path: Path) -> None:
    arr = rectizarr.create_array(
        tmp_path / "c.zarr",
        shape=(2,),
        chunks=(2,),
        dtype="complex_float16",
        compressors=None,
        fill_value=[1.5, "-Infinity"],
    )
    assert arr.metadata.data_type.fill_to_json(arr.metadata.fill_value) == [1.5, "-Infinity"]
    arr[0] = np.array((2.0, -1.0), dtype=arr.dtype)
    raw = (tmp_path / "c.zarr" / "c" / "0").read_bytes()
    assert raw == np.float16([2.0, -1.0, 1.5, -np.inf]).tobytes()


@given(name=st.sampled_from(list(TYPES)), data=st.data())
@examples(1)
def test_fill_values_round_trip_bit_exact(name: str, data: st.DataObject) -> None:
    dt = parse_data_type(TYPES[name])
    fill = _data(dt, 1, data.draw(st.integers(0, 2**32 - 1))).reshape(())
    json_value = dt.fill_to_json(fill)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = dt.parse_fill(json_value)
    assert back.tobytes() == fill.tobytes()
