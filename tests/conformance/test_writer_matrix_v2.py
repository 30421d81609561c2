"""Zarr v2 arrays and hierarchies written by rectizarr (``zarr_format=2``), read back by zarr-python 3 and
tensorstore's ``zarr`` driver (and by zarr-python 2.18 when its separate environment exists, see
``conformance_data/generate_v2.py``); consolidated ``.zmetadata`` kept fresh by our own writes."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest

import rectizarr
from rectizarr.errors import UnsupportedError
from tests.refs import tensorstore, zarr_python

ZARR2_PYTHON = os.environ.get("RECTIZARR_ZARR2_PYTHON", "/tmp/zarr2env/bin/python")


def _sample(dtype: Any, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype == "str":
        return np.array([["", "a", "héllo", "日本"][i % 4] + str(i) for i in range(n)], dtype=object).reshape(
            shape
        )
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    if dt.kind in "iu":
        return rng.integers(0, 100, n).astype(dt).reshape(shape)
    if dt.kind == "S":
        return np.array([f"b{i}".encode() for i in range(n)], dtype=dt).reshape(shape)
    if dt.kind == "U":
        return np.array([f"ü{i}" for i in range(n)], dtype=dt).reshape(shape)
    if dt.kind in "Mm":
        return rng.integers(0, 10**6, n).astype(dt).reshape(shape)
    if dt.fields is not None:
        return np.frombuffer(rng.integers(0, 120, n * dt.itemsize, dtype=np.uint8).tobytes(), dt).reshape(
            shape
        )
    return (rng.standard_normal(n) * 10).astype(dt).reshape(shape)


CASES: dict[str, tuple[Any, tuple[int, ...], dict[str, Any]]] = {
    "i4_default": ("<i4", (5, 7), {"chunks": (2, 3)}),
    "f8_order_f": ("<f8", (5, 7), {"chunks": (2, 3), "order": "F"}),
    "u2_slash": (
        "<u2",
        (4, 4, 3),
        {"chunks": (3, 2, 2), "chunk_key_encoding": {"name": "v2", "separator": "/"}},
    ),
    "bool": ("bool", (9,), {"chunks": (4,)}),
    "c16_fill": ("complex128", (6,), {"chunks": (4,), "fill_value": 1 + 2j}),
    "M8": ("M8[ns]", (6,), {"chunks": (4,)}),
    "S6": ("S6", (6,), {"chunks": (4,), "fill_value": b"zz"}),
    "U3": ("<U3", (6,), {"chunks": (4,)}),
    "struct": ([("a", "<i4"), ("b", "<f4")], (6,), {"chunks": (4,)}),
    "f4_nan_fill": ("<f4", (7,), {"chunks": (3,), "fill_value": np.nan}),
    "zero_d": ("<i8", (), {"chunks": ()}),
    "blosc": ("<i4", (20,), {"chunks": (8,), "compressors": numcodecs.Blosc("lz4", 5, 1)}),
    "gzip_v3_style": (
        "<i4",
        (20,),
        {"chunks": (8,), "compressors": {"name": "gzip", "configuration": {"level": 3}}},
    ),
    "no_compressor": ("<i2", (20,), {"chunks": (8,), "compressors": None}),
    "zlib_delta": (
        "<i8",
        (20,),
        {"chunks": (8,), "compressors": numcodecs.Zlib(1), "filters": [numcodecs.Delta(dtype="<i8")]},
    ),
    "string": ("str", (3, 4), {"chunks": (2, 3)}),
    # numcodecs' config says "checksum": false, which tensorstore refuses in a .zarray
    "zstd_numcodecs": ("<i4", (20,), {"chunks": (8,), "compressors": numcodecs.Zstd(level=3)}),
    "string_np_fill": ("str", (7,), {"chunks": (3,), "fill_value": np.str_("x")}),
    "string_zlib_filter": ("str", (7,), {"chunks": (3,), "filters": [numcodecs.Zlib(1)]}),  # after vlen-utf8
}
NO_TENSORSTORE = {
    "zlib_delta": "tensorstore's zarr driver refuses filters",
    "string": "tensorstore has no |O",
    "string_np_fill": "tensorstore has no |O",
    "string_zlib_filter": "tensorstore has no |O",
    "M8": "tensorstore has no datetime64",
    "U3": "tensorstore has no <U",
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, np.ndarray]]:
    root = tmp_path_factory.mktemp("v2matrix")
    out = {}
    for i, (name, (dtype, shape, kwargs)) in enumerate(CASES.items()):
        path = root / f"{name}.zarr"
        arr = rectizarr.create_array(path, shape=shape, dtype=dtype, zarr_format=2, **kwargs)
        data = _sample(dtype, shape, i).copy()
        if shape and shape[0] > 4:
            arr[: shape[0] - 3] = data[: shape[0] - 3]  # a missing chunk at the end
            data[shape[0] - 3 :] = arr.metadata.fill_value
        else:
            arr[...] = data
        assert (path / ".zarray").exists() and not (path / "zarr.json").exists()
        got = np.asarray(rectizarr.open_array(path, mode="r")[...])
        if not data.dtype.hasobject and data.dtype.kind in "fc":
            assert np.array_equal(got, data, equal_nan=True), name
        else:
            assert got.tolist() == data.tolist(), name
        out[name] = (path, got)
    return out


def _same(got: Any, want: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    if got.dtype.kind == "T":
        got = got.astype(object)
    assert got.shape == want.shape, what
    if want.dtype.hasobject:
        assert got.tolist() == want.tolist(), what
    else:
        assert got.astype(got.dtype.newbyteorder("=")).tobytes() == want.tobytes(), what


@pytest.mark.parametrize("name", list(CASES))
def test_zarr_python_reads_v2(name: str, written: dict[str, tuple[Path, np.ndarray]]) -> None:
    zarr = zarr_python()
    path, want = written[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.open_array(str(path), mode="r")
        _same(z[...], want, name)
    assert z.metadata.zarr_format == 2


@pytest.mark.parametrize("name", list(CASES))
def test_tensorstore_reads_v2(name: str, written: dict[str, tuple[Path, np.ndarray]]) -> None:
    ts = tensorstore()
    path, want = written[name]
    spec = {"driver": "zarr", "kvstore": {"driver": "file", "path": str(path)}}
    if name in NO_TENSORSTORE:
        with pytest.raises(ValueError):
            ts.open(spec, open=True).result()
        return
    if want.dtype.names:
        for field in want.dtype.names:
            t = ts.open({**spec, "field": field}, open=True).result()
            _same(t.read().result(), np.ascontiguousarray(want[field]), f"{name}.{field}")
        return
    got = ts.open(spec, open=True).result().read().result()
    if want.dtype.kind == "S":  # tensorstore reads |S<n> as n bytes along an extra last axis
        assert got.shape == (*want.shape, want.dtype.itemsize)
        # numpy sees tensorstore's "char" elements as |S0: read the (contiguous) buffer itself
        assert got.strides == (
            *[want.dtype.itemsize * int(np.prod(want.shape[i + 1 :])) for i in range(want.ndim)],
            1,
        )
        assert ctypes.string_at(got.__array_interface__["data"][0], want.nbytes) == want.tobytes()
        return
    _same(got, want, name)


def zarr2_python() -> str:
    """A Python with zarr-python 2.18: ``RECTIZARR_ZARR2_PYTHON``, else a virtual environment made once
    in the temporary directory (``pip install 'zarr<3'``; the package index is reachable in CI)."""
    if os.path.exists(ZARR2_PYTHON):
        return ZARR2_PYTHON
    env_dir = Path(tempfile.gettempdir()) / f"rectizarr-zarr2-py{sys.version_info[0]}{sys.version_info[1]}"
    python = env_dir / "bin" / "python"
    if not (env_dir / ".ready").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(env_dir)], check=True)
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "zarr>=2.18,<3",
                "msgpack",
            ],
            check=True,
        )
        (env_dir / ".ready").touch()
    return str(python)


def test_zarr_python_2_reads_v2(written: dict[str, tuple[Path, np.ndarray]], tmp_path: Path) -> None:
    python = zarr2_python()
    script = (
        "import sys, json, zarr, numpy as np\nout = {}\nfor name, path in json.loads(sys.argv[1]).items():\n"
        "    a = zarr.open_array(path, mode='r')[...]\n"
        "    np.save(sys.argv[2] + '/' + name + '.npy', a, allow_pickle=True)\n"
    )
    paths = {n: str(p) for n, (p, _) in written.items()}
    subprocess.run(
        [python, "-c", script, json.dumps(paths), str(tmp_path)],
        check=True,
        env={**os.environ, "PYTHONPATH": ""},
    )
    for name, (_, want) in written.items():
        _same(np.load(tmp_path / f"{name}.npy", allow_pickle=True), want, f"zarr 2.18 {name}")


def test_v2_hierarchy_consolidated_stays_fresh(tmp_path: Path) -> None:
    zarr = zarr_python()
    g = rectizarr.create_group(tmp_path / "h.zarr", zarr_format=2, attributes={"title": "t"})
    a = g.create_array("a", shape=(4,), chunks=(2,), dtype="<i4", dimension_names=["x"])
    a[...] = [1, 2, 3, 4]
    sub = g.create_group("sub")
    rectizarr.consolidate_metadata(tmp_path / "h.zarr")
    b = sub.create_array("b", shape=(3,), chunks=(2,), dtype="<f4")  # after consolidation
    b[...] = [0.5, 1.5, 2.5]
    a.resize((6,))
    a.attrs["units"] = "m"
    del g["sub"]
    entries = json.loads((tmp_path / "h.zarr" / ".zmetadata").read_text())["metadata"]
    assert sorted(entries) == [".zattrs", ".zgroup", "a/.zarray", "a/.zattrs"]
    assert entries["a/.zarray"]["shape"] == [6]
    assert entries["a/.zattrs"] == {"_ARRAY_DIMENSIONS": ["x"], "units": "m"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.open_consolidated(str(tmp_path / "h.zarr"), zarr_format=2)
        assert z["a"].shape == (6,) and list(z["a"][:4]) == [1, 2, 3, 4]
    assert rectizarr.validate(tmp_path / "h.zarr").ok
    reopened = rectizarr.open_group(tmp_path / "h.zarr", mode="r")
    assert reopened.metadata.zarr_format == 2 and reopened.keys() == ["a"]
    assert reopened["a"].dimension_names == ("x",) and reopened["a"].attrs.asdict() == {"units": "m"}


@pytest.mark.parametrize("shape", [(), (2,)])
def test_v2_bytes_arrays_take_a_scalar_covering_a_chunk(tmp_path: Path, shape: tuple[int, ...]) -> None:
    """The broadcast scalar is a read-only view, which numcodecs' VLenBytes refused to encode."""
    a = rectizarr.create_array(
        tmp_path / "b.zarr", shape=shape, dtype="bytes", chunks=(1,) * len(shape), zarr_format=2
    )
    a[(0,) * len(shape)] = b"xy"
    got = rectizarr.open_array(tmp_path / "b.zarr", mode="r")[...]
    assert np.asarray(got).reshape(-1).tolist()[:1] == [b"xy"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert (
            np.asarray(zarr_python().open_array(str(tmp_path / "b.zarr"), mode="r")[...]).reshape(-1)[0]
            == b"xy"
        )


def test_a_v2_bytes_fill_value_is_refused_not_dropped(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedError, match="bytes fill value"):
        rectizarr.create_array(
            tmp_path / "f.zarr", shape=(2,), dtype="bytes", chunks=(2,), fill_value=b"q", zarr_format=2
        )
    a = rectizarr.create_array(
        tmp_path / "g.zarr", shape=(2,), dtype="bytes", chunks=(2,), fill_value=b"", zarr_format=2
    )
    assert a[...].tolist() == [b"", b""]


def test_what_v2_cannot_hold_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedError, match="sharding"):
        rectizarr.create_array(
            tmp_path / "a", shape=(8,), chunks=(2,), shards=(4,), dtype="i4", zarr_format=2
        )
    with pytest.raises(UnsupportedError, match="rectilinear"):
        rectizarr.create_array(tmp_path / "b", shape=(8,), chunks=[[3, 5]], dtype="i4", zarr_format=2)
    with pytest.raises(UnsupportedError, match="codec chain"):
        rectizarr.create_array(
            tmp_path / "c",
            shape=(8,),
            dtype="i4",
            zarr_format=2,
            codecs=[{"name": "bytes", "configuration": {"endian": "little"}}],
        )
    with pytest.raises(UnsupportedError, match="one compressor"):
        rectizarr.create_array(
            tmp_path / "d",
            shape=(8,),
            dtype="i4",
            zarr_format=2,
            compressors=[numcodecs.Zlib(), numcodecs.GZip()],
        )
    with pytest.raises(rectizarr.MetadataError, match="zarr_format"):
        rectizarr.create_array(tmp_path / "e", shape=(8,), dtype="i4", zarr_format=4)
    assert not any((tmp_path / n).exists() for n in "abcde")


@pytest.mark.parametrize(
    "dtype",
    [
        ">f8",
        ">i4",
        "<u2",
        [("a", ">i4"), ("b", ">f8")],
        [("a", "<i4"), ("b", ">f8")],
        [("a", ">i2"), ("b", "<u2"), ("c", "S2")],
    ],
)
def test_v2_byte_order_as_asked(tmp_path: Path, dtype: Any) -> None:
    """A v2 array created with a big-endian dtype is stored big-endian (as zarr-python 2 does), each field of
    a structured dtype in the order asked (all were made one order), and reads back equal in rectizarr and
    zarr-python."""
    zarr = zarr_python()
    want = np.zeros(6, dtype=dtype)
    for name in want.dtype.names or [None]:
        target = want if name is None else want[name]
        target[...] = np.arange(6) * 3 + 1
    a = rectizarr.create_array(tmp_path / "b.zarr", shape=(6,), dtype=dtype, chunks=(4,), zarr_format=2)
    a[...] = want
    assert json.loads((tmp_path / "b.zarr" / ".zarray").read_text())["dtype"] == (
        np.dtype(dtype).str if np.dtype(dtype).fields is None else [list(f) for f in np.dtype(dtype).descr]
    )
    assert np.array_equal(rectizarr.open_array(tmp_path / "b.zarr", mode="r")[...], want)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = zarr.open_array(str(tmp_path / "b.zarr"), mode="r")[...]
    assert got.dtype == np.dtype(dtype) and got.tobytes() == want.tobytes()


@pytest.mark.parametrize(
    "codec",
    [
        numcodecs.JSON(),
        numcodecs.MsgPack(),
        numcodecs.Categorize(["red", "green", "blue"], dtype=object, astype="u1"),
    ],
)
def test_a_v2_object_codec_given_as_a_filter_is_the_only_one(tmp_path: Path, codec: Any) -> None:
    """zarr-python 2 stored ``json2`` / ``msgpack2`` / ``categorize`` string arrays with that filter alone (see
    ``conformance_data/v2/zarr-python-2/object_json2``); rectizarr added ``vlen-utf8`` after it, and every
    write failed. A bytes filter goes after the ``vlen-utf8`` it needs (``string_zlib_filter`` above)."""
    data = ["red", "green", "blue", "red", "green"]
    a = rectizarr.create_array(
        tmp_path / "o.zarr", shape=(5,), chunks=(2,), dtype=str, zarr_format=2, filters=[codec]
    )
    a[:] = data
    assert [f["id"] for f in json.loads((tmp_path / "o.zarr" / ".zarray").read_text())["filters"]] == [
        codec.codec_id
    ]
    assert rectizarr.open_array(tmp_path / "o.zarr", mode="r")[...].tolist() == data


@pytest.mark.parametrize("codec", [numcodecs.JSON(), numcodecs.MsgPack()])
@pytest.mark.parametrize("order", ["C", "F"])
def test_v2_object_codecs_that_keep_the_shape_round_trip_in_either_order(
    tmp_path: Path, codec: Any, order: str
) -> None:
    """``json2`` and ``msgpack2`` store a chunk's values as nested lists, in place whatever the order: an
    ``order="F"`` array read them back transposed in memory (laid out again as if flat in F order)."""
    want = np.array([["a", "b", "c"], ["d", "e", "f"], ["g", "h", "i"], ["j", "k", "l"]], dtype=object)
    a = rectizarr.create_array(
        tmp_path / "o.zarr",
        shape=(4, 3),
        chunks=(2, 3),
        dtype=object,
        zarr_format=2,
        order=order,
        filters=[codec],
        compressors=None,
    )
    a[...] = want
    assert rectizarr.open_array(tmp_path / "o.zarr", mode="r")[...].tolist() == want.tolist()
    assert a[1:3, 1].tolist() == ["e", "h"]


@pytest.mark.parametrize(
    "dtype",
    [
        [("a", [("x", ">u8"), ("y", ">c8"), ("z", "<i4")]), ("b", "i1"), ("c", ">u2")],
        [("a", [("x", "<u8"), ("y", ">c8")])],
    ],
)
def test_v2_byte_order_as_asked_in_nested_fields(tmp_path: Path, dtype: Any) -> None:
    """Each field of a nested structured dtype is stored in the order asked, as zarr-python writes it (the
    order of a nested field's first leaf was taken for all its leaves)."""
    zarr = zarr_python()
    want = np.frombuffer(bytes(range(6 * np.dtype(dtype).itemsize)), dtype=dtype)
    a = rectizarr.create_array(tmp_path / "r.zarr", shape=(6,), dtype=dtype, chunks=(4,), zarr_format=2)
    a[...] = want
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.create_array(str(tmp_path / "z.zarr"), shape=(6,), dtype=dtype, chunks=(4,), zarr_format=2)
        got = zarr.open_array(str(tmp_path / "r.zarr"), mode="r")[...]
    ours, theirs = (json.loads((tmp_path / f"{n}.zarr" / ".zarray").read_text())["dtype"] for n in "rz")
    assert ours == theirs
    assert (
        rectizarr.open_array(tmp_path / "r.zarr", mode="r")[...].astype(want.dtype).tobytes()
        == want.tobytes()
    )
    assert got.astype(want.dtype).tobytes() == want.tobytes()


@pytest.mark.parametrize(
    ("dtype", "filters"),
    [
        ("<i4", [{"id": "vlen-utf8"}]),
        ("<i4", [{"id": "categorize", "labels": ["a"], "dtype": "|O", "astype": "|u1"}]),
        ("<i2", [{"id": "quantize", "digits": 2, "dtype": "<f8"}]),
    ],
)
def test_a_v2_filter_chain_that_cannot_code_the_data_type_is_refused_at_creation(
    tmp_path: Path, dtype: Any, filters: Any
) -> None:
    """Such a ``.zarray`` was written (zarr-python refuses to open it) and every write then failed. (A chain
    whose failure depends on the values, as ``delta`` after ``vlen-utf8``, still fails at the write.)"""
    with pytest.raises(rectizarr.MetadataError, match="cannot code the data type"):
        rectizarr.create_array(
            tmp_path / "a.zarr", shape=(3,), chunks=(2,), zarr_format=2, dtype=dtype, filters=filters
        )
    assert not (tmp_path / "a.zarr" / ".zarray").exists()
    ok = rectizarr.create_array(
        tmp_path / "b.zarr", shape=(3,), chunks=(2,), zarr_format=2, dtype=str, filters=[{"id": "json2"}]
    )  # (an object codec alone: fine)
    ok[...] = ["x", "y", "z"]
    assert ok[...].tolist() == ["x", "y", "z"]
