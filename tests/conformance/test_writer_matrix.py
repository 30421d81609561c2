"""Arrays written by rectizarr, read back by zarr-python, zarr-python + zarrs and tensorstore.

Every case is written with rectizarr into a temporary directory and read by each reference reader; values
are compared bit for bit, and zarr-python's view of attributes and dimension names too. Cases a reader
cannot handle are listed by name with the reason, and the test checks that the reader really refuses
them (never a silent pass).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from tests.conformance.corpus import assert_same
from tests.refs import tensorstore, zarr_python

RECT = {"array.rectilinear_chunks": True}
ZARRS = {"codec_pipeline.path": "zarrs.ZarrsCodecPipeline", "codec_pipeline.strict": True}
LE = {"name": "bytes", "configuration": {"endian": "little"}}
BE = {"name": "bytes", "configuration": {"endian": "big"}}
CRC = {"name": "crc32c"}


def gzip(level: int = 1) -> dict[str, Any]:
    return {"name": "gzip", "configuration": {"level": level}}


def zstd(level: int = 0, checksum: bool = False) -> dict[str, Any]:
    return {"name": "zstd", "configuration": {"level": level, "checksum": checksum}}


def blosc(cname: str, shuffle: str, typesize: int) -> dict[str, Any]:
    return {
        "name": "blosc",
        "configuration": {
            "cname": cname,
            "clevel": 5,
            "shuffle": shuffle,
            "typesize": typesize,
            "blocksize": 0,
        },
    }


def transpose(*order: int) -> dict[str, Any]:
    return {"name": "transpose", "configuration": {"order": list(order)}}


def shard(
    inner: list[int],
    *,
    codecs: list[Any] | None = None,
    index_codecs: list[Any] | None = None,
    location: str = "end",
) -> dict[str, Any]:
    return {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": inner,
            "codecs": codecs or [LE],
            "index_codecs": index_codecs or [LE, CRC],
            "index_location": location,
        },
    }


@dataclass(frozen=True)
class W:
    name: str
    shape: tuple[int, ...]
    dtype: Any
    kwargs: dict[str, Any] = field(default_factory=dict)
    writes: tuple[Any, ...] = (Ellipsis,)


def _sample(dtype: Any, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == "str":
        return np.array(
            [["", "a", "héllo", "日本✓", "zz"][i % 5] + str(i) for i in range(n)], object
        ).reshape(shape)
    if dtype == "bytes":
        return np.array([bytes([i % 256, 0]) * (i % 3) for i in range(n)], object).reshape(shape)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, n, dtype=dt, endpoint=True).reshape(shape)
    if dt.kind == "f":
        out = (rng.standard_normal(n) * 100).astype(dt)
        out[::7] = -0.0
        return out.reshape(shape)
    if dt.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt).reshape(shape)
    if dt.kind in "Mm":
        return rng.integers(-(10**9), 10**9, n).astype(dt).reshape(shape)
    if dt.kind == "U":
        return np.array([("é" + str(i))[: dt.itemsize // 4] for i in range(n)], dt).reshape(shape)
    raise ValueError(dtype)


def _matrix() -> Iterator[W]:
    numeric = [
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    ]
    for dt in numeric:
        yield W(f"dtype_{dt}", (5, 7), dt, {"chunks": (2, 3)})
        yield W(f"dtype_{dt}_rect", (5, 7), dt, {"chunks": [[1, 4], [3, 3, 1]]})
    for dt, label in (
        ("str", "string"),
        ("bytes", "bytes"),
        ("<U4", "utf32"),
        ("M8[s]", "datetime64"),
        ("m8[ns]", "timedelta64"),
    ):
        yield W(f"dtype_{label}", (5, 3), dt, {"chunks": (2, 2)}, (slice(0, 3),))
        yield W(f"dtype_{label}_rect", (5, 3), dt, {"chunks": [[2, 3], 2]})
    chains: dict[str, list[Any]] = {
        "bytes_only": [LE],
        "big_endian": [BE],
        "gzip": [LE, gzip(5)],
        "zstd_checksum": [LE, zstd(3, True)],
        "zstd_default": [LE, zstd()],
        "crc32c": [LE, CRC],
        "gzip_crc32c": [LE, gzip(), CRC],
        "blosc_lz4_shuffle": [LE, blosc("lz4", "shuffle", 4)],
        "blosc_zstd_bitshuffle": [LE, blosc("zstd", "bitshuffle", 4)],
        "blosc_zlib_noshuffle": [LE, blosc("zlib", "noshuffle", 4)],
        "blosc_blosclz": [LE, blosc("blosclz", "shuffle", 4)],
        "blosc_lz4hc": [LE, blosc("lz4hc", "shuffle", 4)],
        "transpose": [transpose(1, 0), LE],
        "transpose_big_gzip": [transpose(1, 0), BE, gzip()],
    }
    for label, chain in chains.items():
        yield W(f"codecs_{label}", (6, 5), "int32", {"chunks": (4, 2), "codecs": chain})
        yield W(f"codecs_{label}_rect", (6, 5), "int32", {"chunks": [[1, 2, 3], [4, 1]], "codecs": chain})
    yield W(
        "codecs_transpose_3d", (3, 4, 5), "float32", {"chunks": (2, 3, 2), "codecs": [transpose(2, 0, 1), LE]}
    )
    shards: dict[str, tuple[Any, list[Any], tuple[Any, ...]]] = {
        "shard_end": ((6, 6), [shard([3, 2])], (Ellipsis,)),
        "shard_start": ((6, 6), [shard([3, 2], location="start")], (Ellipsis,)),
        "shard_index_plain": ((6, 6), [shard([2, 3], index_codecs=[LE], location="start")], (Ellipsis,)),
        "shard_index_big": ((6, 6), [shard([2, 3], index_codecs=[BE, CRC])], (Ellipsis,)),
        "shard_inner_zstd": ((6, 6), [shard([3, 3], codecs=[LE, zstd(1)])], (Ellipsis,)),
        "shard_nested": ((6, 6), [shard([3, 6], codecs=[shard([1, 3])])], (Ellipsis,)),
        "shard_then_gzip": ((6, 6), [shard([3, 3]), gzip()], (Ellipsis,)),
        "shard_missing_inner": ((6, 6), [shard([2, 2])], ((slice(0, 2), slice(0, 2)), (7, 8))),
        "shard_edges": ((4, 6), [shard([2, 3])], (Ellipsis,)),
    }
    for label, (chunks, chain, writes) in shards.items():
        yield W(label, (9, 10), "uint16", {"chunks": chunks, "codecs": chain}, writes)
    yield W("shard_rect", (16, 6), "float32", {"chunks": [[4, 8, 4], 6], "codecs": [shard([2, 3])]})
    yield W(
        "shard_rect_partial",
        (14, 9),
        "int64",
        {"chunks": [[2, 6, 6], [3, 6]], "codecs": [shard([2, 3])]},
        ((slice(2, 4), slice(0, 3)), (slice(9, 14), slice(4, 9))),
    )
    yield W(
        "shard_rect_start",
        (10, 4),
        "int32",
        {"chunks": [[4, 6], 4], "codecs": [shard([2, 2], location="start")]},
    )
    yield W(
        "shard_after_transpose",
        (8, 12),
        "uint16",
        {"chunks": (4, 6), "codecs": [transpose(1, 0), shard([3, 2])]},
    )
    yield W("shard_api", (9, 10), "float64", {"chunks": (3, 5), "shards": (6, 10)})
    yield W("shard_api_rect", (9, 10), "float64", {"chunks": (3, 5), "shards": [[3, 6], 10]})
    yield W("shard_0d", (), "int32", {"chunks": (), "shards": ()})
    for name, sep in (("default", "/"), ("default", "."), ("v2", "."), ("v2", "/")):
        label = "slash" if sep == "/" else "dot"
        cke = {"name": name, "configuration": {"separator": sep}}
        yield W(f"cke_{name}_{label}", (4, 6, 2), "uint8", {"chunks": (2, 4, 1), "chunk_key_encoding": cke})
        yield W(
            f"cke_{name}_{label}_rect",
            (4, 6, 2),
            "uint8",
            {"chunks": [[1, 3], 4, 1], "chunk_key_encoding": cke},
        )
    yield W("cke_v2_0d", (), "float64", {"chunks": (), "chunk_key_encoding": {"name": "v2"}})
    payload = np.array(0x7FC00001, "<u4").view("<f4")[()]
    fills: dict[str, tuple[Any, Any]] = {
        "nan": ("float32", np.nan),
        "inf": ("float64", np.inf),
        "neg_inf": ("float16", -np.inf),
        "neg_zero": ("float64", -0.0),
        "nan_payload": ("float32", payload),
        "uint64_max": ("uint64", 2**64 - 1),
        "int64_min": ("int64", -(2**63)),
        "complex": ("complex128", complex(np.nan, -np.inf)),
        "bool": ("bool", True),
        "tenth": ("float32", 0.1),
        "string": ("str", "fill ✓"),
        "utf32": ("<U3", "ab"),
        "datetime_nat": ("M8[ms]", np.datetime64("NaT", "ms")),
    }
    for label, (dt, fv) in fills.items():
        yield W(f"fill_{label}", (8, 3), dt, {"chunks": (2, 3), "fill_value": fv}, (slice(0, 2), slice(5, 6)))
        yield W(f"fill_{label}_rect", (8, 3), dt, {"chunks": [[3, 5], 3], "fill_value": fv}, (slice(3, 8),))
    patterns: dict[str, tuple[Any, ...]] = {
        "never_written": (),
        "single_element": ((3, 4),),
        "strided": ((slice(None, None, 3), slice(1, None, 2)),),
        "negative_step": ((slice(None, None, -2), slice(None)),),
        "edge_only": ((slice(8, 9), slice(5, 7)),),
        "overlapping": ((slice(0, 5),), (slice(3, 9), slice(2, 4))),
    }
    for label, writes in patterns.items():
        yield W(f"write_{label}", (9, 7), "int16", {"chunks": (4, 3), "fill_value": -1}, writes)
        yield W(
            f"write_{label}_rect", (9, 7), "int16", {"chunks": [[2, 7], [1, 6]], "fill_value": -1}, writes
        )
        yield W(
            f"write_{label}_sharded",
            (9, 7),
            "int16",
            {"chunks": (2, 3), "shards": (4, 6), "fill_value": -1},
            writes,
        )
    yield W("zero_length", (0, 3), "int32", {"chunks": (1, 3)})
    yield W("zero_length_rect", (0, 3), "int32", {"chunks": [[2, 2], 3]})
    yield W("zero_d", (), "complex64", {"chunks": ()})
    yield W("ndim_1", (17,), "float32", {"chunks": (5,)})
    yield W("ndim_4", (3, 4, 2, 5), "uint16", {"chunks": (2, 3, 1, 4)})
    yield W("ndim_4_rect", (3, 4, 2, 5), "uint16", {"chunks": [[1, 2], [4], 1, [2, 2, 1]]})
    yield W("chunk_larger_than_shape", (3, 2), "int8", {"chunks": (8, 8)})
    yield W(
        "metadata_names_attrs",
        (4, 3),
        "float64",
        {
            "chunks": (2, 2),
            "dimension_names": ["time", None],
            "attributes": {"units": "K", "nested": {"a": [1, 2.5, None, True]}, "text": "µ ✓"},
        },
    )


MATRIX = list(_matrix())
BY_NAME = {c.name: c for c in MATRIX}
assert len(BY_NAME) == len(MATRIX), "duplicate case names"

_RECT_REASON = "tensorstore 0.1.86 implements only the regular chunk grid (no rectilinear)"
_TS_DTYPE = "tensorstore 0.1.86 has no {} data type"
TENSORSTORE_UNSUPPORTED: dict[str, str] = {
    **{c.name: _RECT_REASON for c in MATRIX if c.name.endswith("_rect") or "_rect_" in c.name},
    "dtype_string": _TS_DTYPE.format("string"),
    "dtype_bytes": _TS_DTYPE.format("bytes"),
    "dtype_utf32": _TS_DTYPE.format("fixed_length_utf32"),
    "dtype_datetime64": _TS_DTYPE.format("numpy.datetime64"),
    "dtype_timedelta64": _TS_DTYPE.format("numpy.timedelta64"),
    "fill_string": _TS_DTYPE.format("string"),
    "fill_utf32": _TS_DTYPE.format("fixed_length_utf32"),
    "fill_datetime_nat": _TS_DTYPE.format("numpy.datetime64"),
    "shard_rect": _RECT_REASON,
    "shard_api_rect": _RECT_REASON,
    "shard_then_gzip": "tensorstore refuses bytes->bytes codecs after sharding_indexed",
}
_ZARRS_DTYPE = (
    "the zarrs pipeline refuses numpy kind {} (variable-length/text/time types; strict mode, no fallback)"
)
ZARRS_UNSUPPORTED: dict[str, str] = {
    **{
        n: _ZARRS_DTYPE.format("T/O (string)")
        for n in ("dtype_string", "dtype_string_rect", "fill_string", "fill_string_rect")
    },
    **{n: _ZARRS_DTYPE.format("O (bytes)") for n in ("dtype_bytes", "dtype_bytes_rect")},
    **{
        n: _ZARRS_DTYPE.format("U")
        for n in ("dtype_utf32", "dtype_utf32_rect", "fill_utf32", "fill_utf32_rect")
    },
    **{
        n: _ZARRS_DTYPE.format("M/m")
        for n in (
            "dtype_datetime64",
            "dtype_datetime64_rect",
            "dtype_timedelta64",
            "dtype_timedelta64_rect",
            "fill_datetime_nat",
            "fill_datetime_nat_rect",
        )
    },
}
ZARR_PYTHON_UNSUPPORTED: dict[str, str] = {
    "shard_after_transpose": "zarr-python 3.4.2 checks the inner chunk shape of sharding_indexed against the "
    "untransposed chunk shape (zarr-python#2050) and refuses the spec-correct [3, 2] in the (6, 4) space"
}
ZARRS_UNSUPPORTED.update(
    {n: r for n, r in ZARR_PYTHON_UNSUPPORTED.items()}
)  # zarrs opens through zarr-python
# zarrs receives the metadata re-serialised by zarr-python, which rewrites every NaN fill as "NaN": a NaN
# payload fill (0x7fc00001) comes back as the canonical 0x7fc00000 in never-written regions.
ZARRS_CANONICAL_NAN_FILL = {"fill_nan_payload", "fill_nan_payload_rect"}
# Warnings zarr-python emits for what we write on purpose, matched by message:
ZARR_PYTHON_EXPECTED_WARNINGS = (
    # zarr-python flags every data type without a zarr-extensions spec it knows of; rectizarr writes the
    # registered extension names (string, bytes, fixed_length_utf32, numpy.datetime64/timedelta64), which
    # zarr-python 3.4.2 still labels "unstable".
    "does not have a Zarr V3 specification",
    # A performance note for the legal chain [sharding_indexed, gzip] (case shard_then_gzip).
    "disables partial reads and writes",
)


def _expected(case: W, fill: Any, data: np.ndarray) -> np.ndarray:
    dtype = data.dtype
    out = np.empty(case.shape, dtype=dtype)
    out[...] = fill
    for sel in case.writes:
        out[sel] = data[sel]
    return out


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, np.ndarray]]:
    """Every matrix case written once by rectizarr: name -> (store path, expected array)."""
    root = tmp_path_factory.mktemp("matrix")
    out = {}
    for i, case in enumerate(MATRIX):
        path = root / f"{case.name}.zarr"
        kwargs = dict(case.kwargs)
        dtype = object if case.dtype in ("str", "bytes") else case.dtype
        if case.dtype in ("str", "bytes"):
            kwargs.setdefault("dtype", "string" if case.dtype == "str" else "bytes")
        else:
            kwargs["dtype"] = dtype
        arr = rectizarr.create_array(path, shape=case.shape, **kwargs)
        data = _sample(case.dtype, case.shape, i)
        for sel in case.writes:
            arr[sel] = data[sel]
        fill = arr.metadata.fill_value
        exp = _expected(case, fill, data)
        assert_same(arr[...], exp, what=f"rectizarr round trip {case.name}")
        out[case.name] = (path, exp)
    return out


def test_matrix_size() -> None:
    assert 120 <= len(MATRIX) <= 400
    assert set(TENSORSTORE_UNSUPPORTED) <= set(BY_NAME)
    assert set(ZARRS_UNSUPPORTED) <= set(BY_NAME)


def _open_zarr_python(zarr: Any, path: Path) -> Any:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        arr = zarr.open_array(str(path), mode="r")
    unexpected = [
        str(w.message) for w in caught if not any(m in str(w.message) for m in ZARR_PYTHON_EXPECTED_WARNINGS)
    ]
    assert not unexpected, unexpected
    return arr


def _check_values(got: Any, exp: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    if got.dtype.kind == "T":  # numpy StringDType from zarr-python
        got = got.astype(object)
    assert_same(got, exp, what=what)


@pytest.mark.parametrize("name", list(BY_NAME))
def test_zarr_python_reads(name: str, written: dict[str, tuple[Path, np.ndarray]]) -> None:
    zarr = zarr_python()
    path, exp = written[name]
    if name in ZARR_PYTHON_UNSUPPORTED:
        with zarr.config.set(RECT), pytest.raises((TypeError, ValueError)):
            zarr.open_array(str(path), mode="r")
        return
    with zarr.config.set(RECT):
        arr = _open_zarr_python(zarr, path)
        _check_values(arr[...], exp, f"zarr-python {name}")
    mine = rectizarr.open_array(path, mode="r")
    assert dict(arr.attrs) == mine.attrs.asdict()
    assert (
        tuple(arr.metadata.dimension_names) if arr.metadata.dimension_names else None
    ) == mine.dimension_names
    assert arr.shape == mine.shape


@pytest.mark.parametrize("name", list(BY_NAME))
def test_zarrs_reads(name: str, written: dict[str, tuple[Path, np.ndarray]]) -> None:
    zarr = zarr_python()
    path, exp = written[name]
    with zarr.config.set({**RECT, **ZARRS}):
        if name in ZARRS_UNSUPPORTED:
            with pytest.raises(Exception) as info:  # at open or at the first read, depending on the type
                zarr.open_array(str(path), mode="r")[...]
            assert type(info.value).__name__ in (
                "UnsupportedDataTypeError",
                "UnsupportedMetadataError",
                "TypeError",
                "ValueError",
            ), repr(info.value)
            return
        arr = _open_zarr_python(zarr, path)
        assert type(arr._async_array.codec_pipeline).__name__ == "ZarrsCodecPipeline"
        got = arr[...]
    if name in ZARRS_CANONICAL_NAN_FILL:
        fill_bits = rectizarr.open_array(path, mode="r").metadata.fill_value.view("<u4")[()]
        g, e = np.asarray(got).view("<u4"), exp.view("<u4")
        changed = g != e
        assert changed.any() and (e[changed] == fill_bits).all() and (g[changed] == 0x7FC00000).all()
        return
    _check_values(got, exp, f"zarrs {name}")


@pytest.mark.parametrize("name", list(BY_NAME))
def test_tensorstore_reads(name: str, written: dict[str, tuple[Path, np.ndarray]]) -> None:
    ts = tensorstore()
    path, exp = written[name]
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    if name in TENSORSTORE_UNSUPPORTED:
        with pytest.raises(ValueError):
            ts.open(spec, open=True, read=True).result()
        return
    t = ts.open(spec, open=True, read=True).result()
    _check_values(t.read().result(), exp, f"tensorstore {name}")
    names = rectizarr.open_array(path, mode="r").dimension_names
    if names is not None:
        assert list(t.domain.labels) == [n or "" for n in names]
