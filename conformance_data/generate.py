"""Regenerate the conformance corpus. Run BY HAND (never in CI), from the repository root:

    .venv/bin/python conformance_data/generate.py

It deletes and rewrites ``conformance_data/cases/``, ``conformance_data/invalid/`` and the provenance
table in ``conformance_data/README.md``. Versions are pinned below: the corpus records what exactly
these releases write, so regenerate only after a deliberate upgrade (and review the diff).

Layout of one case: ``cases/<producer>/<case>/`` holding ``data.zarr/`` (the store as the producer wrote
it), ``expected.npy`` (the array as the producer reads it back, bit for bit) and ``case.json``
(producer, versions, notes, node path, attributes, dimension names, extra arrays of a hierarchy, and
``expect_error`` for a documented rectizarr limitation). ``invalid/<name>/`` holds ``data.zarr/`` and
``expected.json`` (the rectizarr error class, the stage it is raised at and why).
"""

from __future__ import annotations

import base64
import importlib.metadata as md
import json
import shutil
import struct
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tensorstore as ts
import zarr
import zarrs
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    ShardingCodec,
    TransposeCodec,
    ZstdCodec,
)

# ----------------------------------------------------------------------------------- pinned versions
assert zarr.__version__ == "3.4.2", zarr.__version__
assert zarrs.__version__ == "0.2.3", zarrs.__version__
assert md.version("tensorstore") == "0.1.86", md.version("tensorstore")
VERSIONS = {
    "zarr-python": zarr.__version__,
    "zarrs": zarrs.__version__,
    "tensorstore": md.version("tensorstore"),
    "numcodecs": md.version("numcodecs"),
    "numpy": np.__version__,
}

ROOT = Path(__file__).resolve().parent
CASES = ROOT / "cases"
INVALID = ROOT / "invalid"
RECT = {"array.rectilinear_chunks": True}
ZARRS = {"codec_pipeline.path": "zarrs.ZarrsCodecPipeline", "codec_pipeline.strict": True}
TABLE: list[tuple[str, str, str]] = []  # (producer, case, notes) for the README

warnings.filterwarnings("ignore", module="zarr")
warnings.filterwarnings("ignore", category=UserWarning)


# ------------------------------------------------------------------------------------------ helpers


def sample(dtype: Any, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Deterministic test data of any supported dtype (distinct values, no fill collisions)."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64))
    dt = np.dtype(dtype) if not isinstance(dtype, str) or dtype not in ("str", "bytes") else None
    if dtype == "str":
        words = ["", "a", "héllo", "Zarr ✓", "x" * 9, "naïve", "日本", "z"]
        return np.array([words[i % len(words)] + str(i) for i in range(n)], dtype=object).reshape(shape)
    if dtype == "bytes":
        return np.array([bytes([i % 256, 0, 255]) * (i % 3) + b"b" for i in range(n)], dtype=object).reshape(
            shape
        )
    assert dt is not None
    if dt.kind == "b":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        vals = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        return vals.reshape(shape)
    if dt.kind == "f":
        return (rng.standard_normal(n) * 100).astype(dt).reshape(shape)
    if dt.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt).reshape(shape)
    if dt.kind in "Mm":
        return rng.integers(-(10**9), 10**9, n).astype(dt).reshape(shape)
    if dt.kind == "U":
        return np.array([("ab" + chr(0xE9) + str(i))[: dt.itemsize // 4] for i in range(n)], dt).reshape(
            shape
        )
    if dt.kind in "SV" or dt.names:
        return np.frombuffer(rng.integers(1, 255, n * dt.itemsize, dtype=np.uint8).tobytes(), dt).reshape(
            shape
        )
    raise ValueError(dtype)


def case_dir(producer: str, name: str) -> Path:
    d = CASES / producer / name
    if d.exists():
        raise SystemExit(f"duplicate case {producer}/{name}")
    d.mkdir(parents=True)
    return d


def save_expected(d: Path, arr: np.ndarray, fname: str = "expected.npy") -> None:
    arr = np.asarray(arr)
    if arr.dtype == object or arr.dtype.kind == "T":
        items = arr.ravel().tolist()
        if all(isinstance(x, str) for x in items):
            arr = np.array(items, dtype=f"U{max([len(x) for x in items] + [1])}").reshape(arr.shape)
        else:  # variable-length bytes: keep them exact (no NUL stripping) as a JSON sidecar
            (d / (fname[:-4] + ".bytes.json")).write_text(
                json.dumps({"shape": list(arr.shape), "b64": [base64.b64encode(x).decode() for x in items]})
            )
            arr = np.zeros(arr.shape, "u1")
    np.save(d / fname, np.array(arr, order="C", copy=True), allow_pickle=False)


def write_case_json(d: Path, producer: str, notes: str, **extra: Any) -> None:
    info = {"producer": producer, "versions": VERSIONS, "notes": notes, **extra}
    (d / "case.json").write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n")
    TABLE.append((producer, d.name, notes))


def same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "Mm":
        return a.dtype == b.dtype and bool(np.array_equal(a.view("i8"), b.view("i8")))
    if a.dtype.kind in "fc":
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(
        np.array_equal(
            a.astype(object) if a.dtype.kind == "T" else a, b.astype(object) if b.dtype.kind == "T" else b
        )
    )


def apply_writes(target: Any, data: np.ndarray, writes: list[Any]) -> None:
    for sel in writes:
        target[sel] = data[sel]


# ------------------------------------------------------------------------------ zarr-python / zarrs


def zp_case(
    producer: str,
    name: str,
    notes: str,
    *,
    shape: tuple[int, ...],
    dtype: Any,
    data: np.ndarray | None = None,
    writes: list[Any] | None = None,
    after: Callable[[Any], None] | None = None,
    expect_error: dict[str, str] | None = None,
    **kwargs: Any,
) -> None:
    """One array written by zarr-python (``producer`` ``zarr-python``) or through the zarrs pipeline."""
    d = case_dir(producer, name)
    cfg = dict(RECT)
    if producer == "zarrs":
        cfg.update(ZARRS)
    src_dtype = kwargs.pop("np_dtype", None)
    if data is None:
        data = sample(src_dtype if src_dtype is not None else dtype, shape, seed=len(TABLE))
    writes = [...] if writes is None else writes
    with zarr.config.set(cfg):
        arr = zarr.create_array(str(d / "data.zarr"), shape=shape, dtype=dtype, **kwargs)
        if producer == "zarrs":
            check_zarrs_pipeline(arr)
        fill = arr.fill_value
        if data.size:
            apply_writes(arr, data, writes)
        if after is not None:
            after(arr)
        own = zarr.open_array(str(d / "data.zarr"), mode="r")[...]
    with zarr.config.set(RECT):  # the expected array is read by zarr-python's own pipeline
        got = zarr.open_array(str(d / "data.zarr"), mode="r")[...]
    if producer == "zarrs" and not same(own, got):
        notes += " [zarrs' own read-back of this store differs: the known big-endian complex edge-chunk bug]"
    if after is None and data.size:
        intended = np.full(shape, fill, dtype=got.dtype)
        apply_writes(intended, np.asarray(data, dtype=got.dtype) if got.dtype != object else data, writes)
        if not same(got, intended):
            raise SystemExit(f"{producer}/{name}: read-back differs from the written data")
    save_expected(d, got)
    meta = json.loads((d / "data.zarr" / "zarr.json").read_text())
    extra: dict[str, Any] = {
        "attributes": meta.get("attributes", {}),
        "dimension_names": meta.get("dimension_names"),
    }
    if expect_error:
        extra["expect_error"] = expect_error
    write_case_json(d, producer, notes, **extra)


def check_zarrs_pipeline(arr: Any) -> None:
    """Prove the chunks are encoded by zarrs: the array's pipeline is ZarrsCodecPipeline with a Rust
    implementation and, because ``codec_pipeline.strict`` is on, no Python fallback to hand off to."""
    cp = arr._async_array.codec_pipeline
    assert type(cp).__name__ == "ZarrsCodecPipeline", type(cp)
    assert cp.impl is not None and cp.python_impl is None, "zarrs pipeline would fall back to Python"


# ------------------------------------------------------------------------------------- tensorstore


def ts_case(
    name: str,
    notes: str,
    *,
    shape: list[int],
    data_type: str,
    chunk_shape: list[int] | None = None,
    codecs: list[Any] | None = None,
    np_dtype: Any = None,
    writes: list[Any] | None = None,
    expect_error: dict[str, str] | None = None,
    **meta: Any,
) -> None:
    d = case_dir("tensorstore", name)
    metadata: dict[str, Any] = {"shape": shape, "data_type": data_type, **meta}
    if chunk_shape is not None:
        metadata["chunk_grid"] = {"name": "regular", "configuration": {"chunk_shape": chunk_shape}}
    if codecs is not None:
        metadata["codecs"] = codecs
    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": str(d / "data.zarr")},
        "metadata": metadata,
    }
    t = ts.open(spec, create=True).result()
    data = sample(np_dtype if np_dtype is not None else t.dtype.numpy_dtype, tuple(shape), seed=len(TABLE))
    writes = [...] if writes is None else writes
    if data.size:
        for sel in writes:
            t[sel].write(data[sel]).result()
    t2 = ts.open(
        {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(d / "data.zarr")}}, open=True
    ).result()
    got = t2.read().result()
    save_expected(d, got)
    doc = json.loads((d / "data.zarr" / "zarr.json").read_text())
    extra: dict[str, Any] = {
        "attributes": doc.get("attributes", {}),
        "dimension_names": doc.get("dimension_names"),
    }
    if expect_error:
        extra["expect_error"] = expect_error
    write_case_json(d, "tensorstore", notes, **extra)


BYTES_LE = {"name": "bytes", "configuration": {"endian": "little"}}
BYTES_BE = {"name": "bytes", "configuration": {"endian": "big"}}
CRC = {"name": "crc32c"}


def ts_shard(
    inner: list[int],
    *,
    codecs: list[Any] | None = None,
    index_codecs: list[Any] | None = None,
    index_location: str | None = None,
) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "chunk_shape": inner,
        "codecs": codecs or [BYTES_LE],
        "index_codecs": index_codecs or [BYTES_LE, CRC],
    }
    if index_location:
        cfg["index_location"] = index_location
    return {"name": "sharding_indexed", "configuration": cfg}


# ----------------------------------------------------------------------------------------- producers

ZP_DTYPES = [
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


def blosc_combinations(*, full: bool) -> list[tuple[str, str]]:
    """Every cname x shuffle mode, or (to keep the corpus small) a diagonal covering each of both."""
    cnames = ("blosclz", "lz4", "lz4hc", "zlib", "zstd")
    shuffles = ("noshuffle", "shuffle", "bitshuffle")
    if full:
        return [(c, s) for c in cnames for s in shuffles]
    return [(c, shuffles[i % 3]) for i, c in enumerate(cnames)]


def zarr_python_like(producer: str) -> None:
    """Cases both zarr-python's default pipeline and the zarrs pipeline write."""
    P = producer
    zs = producer == "zarrs"
    for dt in ZP_DTYPES:
        zp_case(
            P,
            f"dtype_{dt}",
            f"{dt}, 2-D (5, 7) in (2, 3) chunks: edge chunks, default codecs",
            shape=(5, 7),
            dtype=dt,
            chunks=(2, 3),
        )
    for dt in ("int16", "uint64", "float64", "complex128", "float16"):
        zp_case(
            P,
            f"bytes_big_{dt}",
            f"{dt} through a big-endian bytes codec",
            shape=(9,),
            dtype=dt,
            chunks=(4,),
            serializer=BytesCodec(endian="big"),
            compressors=None,
        )
    zp_case(
        P,
        "transpose_2d",
        "transpose [1, 0] on a 2-D int32 array (Fortran-order chunks)",
        shape=(5, 6),
        dtype="int32",
        chunks=(2, 4),
        filters=[TransposeCodec(order=[1, 0])],
    )
    zp_case(
        P,
        "transpose_3d",
        "transpose [2, 0, 1] on 3-D float32 with edge chunks",
        shape=(3, 5, 4),
        dtype="float32",
        chunks=(2, 3, 3),
        filters=[TransposeCodec(order=[2, 0, 1])],
    )
    for level in (0, 1, 9):
        zp_case(
            P,
            f"gzip_{level}",
            f"gzip level {level}",
            shape=(20,),
            dtype="int32",
            chunks=(8,),
            compressors=[GzipCodec(level=level)],
        )
    for cs in (False, True):
        zp_case(
            P,
            f"zstd_checksum_{cs}".lower(),
            f"zstd level 3 checksum={cs}",
            shape=(20,),
            dtype="float64",
            chunks=(8,),
            compressors=[ZstdCodec(level=3, checksum=cs)],
        )
    zp_case(
        P,
        "zstd_negative_level",
        "zstd with a negative (fast) level",
        shape=(20,),
        dtype="uint16",
        chunks=(8,),
        compressors=[ZstdCodec(level=-5)],
    )
    for cname, shuffle in blosc_combinations(full=not zs):
        zp_case(
            P,
            f"blosc_{cname}_{shuffle}",
            f"blosc cname={cname} shuffle={shuffle}",
            shape=(30,),
            dtype="int16",
            chunks=(16,),
            compressors=[BloscCodec(cname=cname, shuffle=shuffle, clevel=5, typesize=2)],
        )
    zp_case(
        P, "crc32c", "bytes + crc32c", shape=(10,), dtype="int64", chunks=(4,), compressors=[Crc32cCodec()]
    )
    zp_case(
        P,
        "gzip_crc32c",
        "bytes + gzip + crc32c",
        shape=(10,),
        dtype="uint32",
        chunks=(4,),
        compressors=[GzipCodec(level=5), Crc32cCodec()],
    )
    # sharding
    for loc in ("end", "start"):
        zp_case(
            P,
            f"shard_index_{loc}",
            f"sharding, index at {loc} (crc32c index)",
            shape=(12, 10),
            dtype="uint16",
            chunks=(12, 10),
            serializer=ShardingCodec(chunk_shape=(3, 5), index_location=loc),
            compressors=None,
        )
    zp_case(
        P,
        "shard_index_plain",
        "sharding, index codecs [bytes] only, index at start",
        shape=(8, 8),
        dtype="int32",
        chunks=(8, 8),
        compressors=None,
        serializer=ShardingCodec(chunk_shape=(4, 4), index_codecs=[BytesCodec()], index_location="start"),
    )
    zp_case(
        P,
        "shard_index_big_endian",
        "sharding, big-endian index + crc32c",
        shape=(8, 8),
        dtype="int32",
        chunks=(8, 8),
        compressors=None,
        serializer=ShardingCodec(chunk_shape=(4, 4), index_codecs=[BytesCodec(endian="big"), Crc32cCodec()]),
    )
    zp_case(
        P,
        "shard_regular_edges",
        "shards (4, 6) of inner (2, 3) on (10, 13): edge shards, inner chunks wholly outside never written",
        shape=(10, 13),
        dtype="float32",
        chunks=(2, 3),
        shards=(4, 6),
    )
    zp_case(
        P,
        "shard_inner_zstd",
        "sharding with bytes+zstd inner codecs",
        shape=(16,),
        dtype="float64",
        chunks=(16,),
        compressors=None,
        serializer=ShardingCodec(chunk_shape=(4,), codecs=[BytesCodec(), ZstdCodec(level=1)]),
    )
    zp_case(
        P,
        "shard_nested",
        "nested sharding: outer (8, 8) / middle (4, 4) / inner (2, 2)",
        shape=(8, 8),
        dtype="int16",
        chunks=(8, 8),
        compressors=None,
        serializer=ShardingCodec(chunk_shape=(4, 4), codecs=[ShardingCodec(chunk_shape=(2, 2))]),
    )
    zp_case(
        P,
        "shard_missing_inner",
        "sharding with most inner chunks never written (empty index entries)",
        shape=(12, 12),
        dtype="int32",
        chunks=(2, 2),
        shards=(6, 6),
        fill_value=-1,
        writes=[(slice(0, 2), slice(0, 2)), (slice(7, 9), slice(3, 5)), (11, 11)],
    )
    zp_case(
        P,
        "shard_then_gzip",
        "[sharding_indexed, gzip]: a bytes->bytes codec after sharding",
        shape=(8, 6),
        dtype="uint8",
        chunks=(8, 6),
        serializer=ShardingCodec(chunk_shape=(2, 3)),
        compressors=[GzipCodec(level=1)],
    )
    zp_case(P, "shard_0d", "0-d sharded array", shape=(), dtype="int32", chunks=(), shards=())
    # chunk key encodings
    for ck, sep in (("default", "/"), ("default", "."), ("v2", "."), ("v2", "/")):
        zp_case(
            P,
            f"cke_{ck}_{'slash' if sep == '/' else 'dot'}",
            f"chunk key encoding {ck} separator {sep!r}",
            shape=(4, 6, 2),
            dtype="uint8",
            chunks=(2, 4, 1),
            chunk_key_encoding={"name": ck, "separator": sep},
        )
    # fill values
    fills: list[tuple[str, str, Any]] = [
        ("nan", "float32", np.nan),
        ("inf", "float64", np.inf),
        ("neg_inf", "float16", -np.inf),
        ("neg_zero", "float64", -0.0),
        ("uint64_max", "uint64", 2**64 - 1),
        ("int64_min", "int64", -(2**63)),
        ("complex_nan", "complex64", complex(1, np.nan)),
        ("complex_inf", "complex128", complex(-np.inf, 2.5)),
        ("bool_true", "bool", True),
        ("float_tenth", "float32", 0.1),
    ]
    for label, dt, fv in fills:
        zp_case(
            P,
            f"fill_{label}",
            f"fill value {fv!r} on {dt}; half the chunks never written",
            shape=(8, 3),
            dtype=dt,
            chunks=(2, 3),
            fill_value=fv,
            writes=[slice(0, 2), slice(4, 5)],
        )
    payload = np.array([0x7FC00001], "<u4").view("<f4")[0]
    zp_case(
        P,
        "fill_nan_payload_data",
        "NaN fill; data holds NaN payload 0x7fc00001 (zarr-python skips the "
        "chunk as empty and loses the payload, zarrs stores it)",
        shape=(4,),
        dtype="float32",
        chunks=(2,),
        fill_value=np.nan,
        data=np.array([payload, payload, 1.0, payload], "f4"),
    )
    # shapes
    zp_case(P, "zero_d", "0-d array (key c)", shape=(), dtype="float64", chunks=())
    zp_case(
        P, "zero_length", "zero-length first dimension (0, 3)", shape=(0, 3), dtype="int32", chunks=(1, 3)
    )
    zp_case(
        P,
        "never_written",
        "no chunk ever written: all fill",
        shape=(6, 5),
        dtype="int16",
        chunks=(4, 4),
        fill_value=7,
        writes=[],
    )
    zp_case(
        P,
        "chunk_larger_than_shape",
        "one chunk overhanging the whole array",
        shape=(3, 2),
        dtype="int8",
        chunks=(8, 8),
    )
    zp_case(P, "ndim_1", "1-D", shape=(17,), dtype="float32", chunks=(5,))
    zp_case(
        P, "ndim_3", "3-D with edge chunks on every axis", shape=(5, 4, 3), dtype="int32", chunks=(2, 3, 2)
    )
    zp_case(P, "ndim_4", "4-D with edge chunks", shape=(3, 4, 2, 5), dtype="uint16", chunks=(2, 3, 1, 4))
    zp_case(
        P,
        "dimension_names",
        "dimension names with a null entry and attributes",
        shape=(4, 3, 2),
        dtype="float32",
        chunks=(2, 2, 2),
        dimension_names=["time", None, "x"],
        attributes={"units": "K", "nested": {"a": [1, 2.5, None, True]}, "unicode": "µ ✓"},
    )
    if not zs:
        zp_case(
            P,
            "attributes_bare_nan",
            "attributes with float NaN/inf: zarr-python writes bare NaN / Infinity tokens (invalid JSON)",
            shape=(3,),
            dtype="int8",
            chunks=(3,),
            attributes={"missing": float("nan"), "big": float("inf"), "ok": 1},
        )
        zp_case(
            P,
            "numcodecs_delta_zlib",
            "numcodecs.delta + bytes + numcodecs.zlib chain",
            shape=(20,),
            dtype="int32",
            chunks=(8,),
            filters=[zarr.codecs.numcodecs.Delta(dtype="<i4")],
            compressors=[zarr.codecs.numcodecs.Zlib(level=1)],
        )
        # data types only zarr-python writes (zarrs' pipeline refuses variable-length / datetime types)
        zp_case(
            P,
            "dtype_string",
            "string (vlen-utf8), non-ASCII and empty strings, fill ''",
            shape=(5, 3),
            dtype="str",
            chunks=(2, 2),
        )
        zp_case(
            P,
            "dtype_string_fill",
            "string with fill 'zz' and never-written chunks",
            shape=(6,),
            dtype="str",
            chunks=(4,),
            fill_value="zz",
            writes=[slice(0, 2)],
        )
        zp_case(
            P,
            "dtype_string_sharded",
            "vlen-utf8 inside shards",
            shape=(8,),
            dtype="str",
            chunks=(2,),
            shards=(4,),
        )
        zp_case(
            P,
            "dtype_variable_length_bytes",
            "zarr-python's 'variable_length_bytes' (read as 'bytes')",
            shape=(7,),
            dtype=zarr.core.dtype.VariableLengthBytes(),
            np_dtype="bytes",
            chunks=(3,),
        )
        zp_case(
            P,
            "dtype_fixed_length_utf32",
            "fixed_length_utf32 (numpy <U5)",
            shape=(5,),
            dtype="U5",
            chunks=(2,),
        )
        zp_case(
            P,
            "dtype_fixed_length_utf32_big",
            "fixed_length_utf32, big-endian bytes",
            shape=(5,),
            dtype="U3",
            chunks=(2,),
            serializer=BytesCodec(endian="big"),
            compressors=None,
        )
        zp_case(
            P,
            "dtype_datetime64",
            "numpy.datetime64 unit s, NaT fill",
            shape=(6,),
            dtype="M8[s]",
            chunks=(4,),
            writes=[slice(0, 3)],
        )
        zp_case(
            P,
            "dtype_timedelta64",
            "numpy.timedelta64 unit ms scale 1",
            shape=(6,),
            dtype="m8[ms]",
            chunks=(4,),
        )
        zp_case(
            P,
            "dtype_datetime64_ns_big",
            "datetime64[ns], big-endian",
            shape=(5,),
            dtype="M8[ns]",
            chunks=(2,),
            serializer=BytesCodec(endian="big"),
            compressors=None,
        )
        for dt, nm in (
            ("S4", "null_terminated_bytes"),
            ("V3", "raw_bytes"),
            ([("x", "<f4"), ("y", "<i2")], "struct"),
        ):
            zp_case(P, f"dtype_{nm}", f"zarr-python data type {nm!r}", shape=(4,), dtype=dt, chunks=(2,))
    # rectilinear grids in every stored form
    rect_forms = [
        ("explicit", "explicit edge list [1, 2, 3, 4]", (10,), [[1, 2, 3, 4]]),
        ("rle", "repeated edges stored run-length encoded", (17,), [[5, 5, 5, 2]]),
        (
            "mixed",
            "RLE mixed with explicit edges on one axis, bare int on the other",
            (12, 9),
            [[2, 2, 2, 1, 5], 4],
        ),
        (
            "bare_int_axes",
            "rectilinear on axis 0, regular (bare int) axis 1 with an edge chunk",
            (9, 7),
            [[4, 5], 3],
        ),
        ("3d", "3-D rectilinear on every axis", (6, 5, 4), [[1, 5], [2, 3], [3, 1]]),
    ]
    for label, notes, shape, chunks in rect_forms:
        zp_case(P, f"rect_{label}", notes, shape=shape, dtype="int32", chunks=chunks)
    zp_case(
        P,
        "rect_overflow",
        "edges sum above the extent by several chunks: [4, 4, 4, 4] shrunk to 9 "
        "(zarr-python cannot create it directly)",
        shape=(16,),
        dtype="int32",
        chunks=[[4, 4, 4, 4]],
        after=lambda a: a.resize((9,)),
    )
    zp_case(
        P,
        "rect_fill_partial",
        "rectilinear with chunks never written",
        shape=(10, 6),
        dtype="float64",
        chunks=[[3, 7], [1, 2, 3]],
        fill_value=np.nan,
        writes=[(slice(0, 3), slice(3, 6))],
    )

    def grow(a: Any) -> None:
        a.resize((14, 6))
        a[10:] = 5

    def shrink_grow(a: Any) -> None:
        a.resize((7, 6))
        a.resize((12, 6))

    def append(a: Any) -> None:
        a.append(np.full((3, 6), 9, "int32"), axis=0)

    for label, fn in (("grow", grow), ("shrink_regrow", shrink_grow), ("append", append)):
        zp_case(
            P,
            f"rect_after_{label}",
            f"rectilinear [[3, 7], 6] after {label.replace('_', '/')} (zarr-python appends one edge)",
            shape=(10, 6),
            dtype="int32",
            chunks=[[3, 7], 6],
            after=fn,
        )
    zp_case(
        P,
        "regular_after_shrink_regrow",
        "regular chunks 4, shrunk 10->5 then grown to 10: stale values "
        "of the straddling chunk come back (zarr-python behaviour, recorded as written)",
        shape=(10,),
        dtype="int16",
        chunks=(4,),
        fill_value=-1,
        after=lambda a: (a.resize((5,)), a.resize((10,))),
    )
    zp_case(
        P,
        "rect_shards",
        "rectilinear outer shards [[4, 8, 4], 6] with regular inner (2, 3)",
        shape=(16, 6),
        dtype="uint8",
        chunks=(2, 3),
        shards=[[4, 8, 4], 6],
    )
    zp_case(
        P,
        "rect_shards_partial",
        "rectilinear shards, one shard missing and inner chunks missing",
        shape=(14, 9),
        dtype="float32",
        chunks=(2, 3),
        shards=[[2, 6, 6], [3, 6]],
        fill_value=-2.5,
        writes=[(slice(2, 4), slice(0, 3)), (slice(9, 14), slice(4, 9))],
    )
    # hierarchy with consolidated metadata
    hierarchy(P)


def hierarchy(producer: str) -> None:
    d = case_dir(producer, "group_consolidated")
    cfg = dict(RECT)
    if producer == "zarrs":
        cfg.update(ZARRS)
    arrays: list[dict[str, Any]] = []
    with zarr.config.set(cfg):
        root = zarr.create_group(str(d / "data.zarr"), attributes={"title": "root", "n": 3})
        sub = root.create_group("sub", attributes={"level": 1})
        deep = sub.create_group("deeper")
        specs = [
            ("a", root, (6,), "int16", {"chunks": (4,)}),
            ("sub/b", sub, (3, 4), "float32", {"chunks": (2, 2), "dimension_names": ["y", "x"]}),
            ("sub/deeper/c", deep, (5,), "uint8", {"chunks": [[2, 3]]}),
            ("sub/deeper/d", deep, (2, 2), "int64", {"chunks": (1, 2), "shards": (2, 2)}),
        ]
        for i, (path, parent, shape, dt, kw) in enumerate(specs):
            arr = parent.create_array(
                path.rsplit("/", 1)[-1], shape=shape, dtype=dt, attributes={"i": i}, **kw
            )
            if producer == "zarrs":
                check_zarrs_pipeline(arr)
            arr[...] = sample(dt, shape, seed=i)
        zarr.consolidate_metadata(str(d / "data.zarr"))
        g = zarr.open_group(str(d / "data.zarr"), mode="r")
        for path, _, _, _, _ in specs:
            a = g[path]
            fname = "expected_" + path.replace("/", "__") + ".npy"
            save_expected(d, a[...], fname)
            doc = json.loads((d / "data.zarr" / path / "zarr.json").read_text())
            arrays.append(
                {
                    "path": path,
                    "expected": fname,
                    "attributes": doc.get("attributes", {}),
                    "dimension_names": doc.get("dimension_names"),
                }
            )
    groups = [
        {"path": "", "attributes": {"title": "root", "n": 3}},
        {"path": "sub", "attributes": {"level": 1}},
        {"path": "sub/deeper", "attributes": {}},
    ]
    write_case_json(
        d,
        producer,
        "group hierarchy (root, sub, sub/deeper) with four arrays and consolidated "
        "metadata in the root zarr.json",
        arrays=arrays,
        groups=groups,
    )


def ts_ml_data(dt: np.dtype, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64))
    if dt.name.startswith(("int", "uint")):
        return (
            rng.integers(-2 if dt.name == "int2" else -8, 2 if dt.name == "int2" else 8, n)
            .astype(dt)
            .reshape(shape)
        )
    return (rng.standard_normal(n) * 2).astype(np.float32).astype(dt).reshape(shape)


def tensorstore_cases() -> None:
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
        ts_case(
            f"dtype_{dt}",
            f"{dt}, (5, 7) in (2, 3) chunks, tensorstore defaults (bytes only, compact "
            "JSON, no attributes/storage_transformers keys)",
            shape=[5, 7],
            data_type=dt,
            chunk_shape=[2, 3],
        )
    ml = [
        "bfloat16",
        "float8_e3m4",
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e4m3b11fnuz",
        "float8_e5m2",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
        "float4_e2m1fn",
    ]
    for dt in ml:
        if dt == "float8_e8m0fnu":  # no zero in this type: tensorstore's default fill 0.0 is unrepresentable
            _ts_ml(
                dt,
                ts.dtype(dt).numpy_dtype,
                name="dtype_float8_e8m0fnu_default_fill",
                expect_error={
                    "error": "MetadataError",
                    "message": "not representable",
                    "why": "tensorstore records the default fill 0.0 for float8_e8m0fnu, which has no zero "
                    "(ml_dtypes casts 0.0 to NaN); rectizarr refuses an unrepresentable fill value",
                },
            )
            # All elements written: tensorstore 0.1.86 decodes the fill 1.0 of this type as 0x3f (2**-64)
            # instead of 0x7f (1.0), so a never-written element would record tensorstore's bug.
            _ts_ml(dt, ts.dtype(dt).numpy_dtype, fill_value=1.0, partial=False)
            continue
        _ts_ml(dt, ts.dtype(dt).numpy_dtype)
    for dt in ("int2", "int4"):
        _ts_ml(dt, ts.dtype(dt).numpy_dtype)
    _ts_struct()
    for dt in ("int16", "float64", "complex64", "uint32"):
        ts_case(
            f"bytes_big_{dt}",
            f"{dt} through a big-endian bytes codec",
            shape=[9],
            data_type=dt,
            chunk_shape=[4],
            codecs=[BYTES_BE],
        )
    ts_case(
        "transpose_3d",
        "transpose [2, 0, 1] then bytes",
        shape=[3, 5, 4],
        data_type="int32",
        chunk_shape=[2, 3, 3],
        codecs=[{"name": "transpose", "configuration": {"order": [2, 0, 1]}}, BYTES_LE],
    )
    ts_case(
        "gzip",
        "gzip level 6",
        shape=[20],
        data_type="int32",
        chunk_shape=[8],
        codecs=[BYTES_LE, {"name": "gzip", "configuration": {"level": 6}}],
    )
    ts_case(
        "zstd_checksum",
        "zstd with checksum",
        shape=[20],
        data_type="float32",
        chunk_shape=[8],
        codecs=[BYTES_LE, {"name": "zstd", "configuration": {"level": 2, "checksum": True}}],
    )
    ts_case(
        "zstd_no_checksum_key",
        "zstd without a checksum key (tensorstore omits it)",
        shape=[20],
        data_type="float32",
        chunk_shape=[8],
        codecs=[BYTES_LE, {"name": "zstd", "configuration": {"level": 1}}],
    )
    for cname, shuffle in blosc_combinations(full=False):
        cfg = {"cname": cname, "clevel": 4, "shuffle": shuffle, "typesize": 4, "blocksize": 0}
        ts_case(
            f"blosc_{cname}_{shuffle}",
            f"blosc cname={cname} shuffle={shuffle}",
            shape=[30],
            data_type="uint32",
            chunk_shape=[16],
            codecs=[BYTES_LE, {"name": "blosc", "configuration": cfg}],
        )
    ts_case(
        "crc32c", "bytes + crc32c", shape=[10], data_type="int64", chunk_shape=[4], codecs=[BYTES_LE, CRC]
    )
    for loc in ("end", "start"):
        ts_case(
            f"shard_index_{loc}",
            f"sharding, index at {loc}, inner chunks in lexicographic order",
            shape=[12, 10],
            data_type="uint16",
            chunk_shape=[12, 10],
            codecs=[ts_shard([3, 5], index_location=loc)],
        )
    ts_case(
        "shard_index_location_omitted",
        "sharding without an index_location key (default end)",
        shape=[8, 8],
        data_type="int32",
        chunk_shape=[8, 8],
        codecs=[ts_shard([4, 4])],
    )
    ts_case(
        "shard_index_big_endian_no_crc",
        "sharding with a big-endian index and no crc32c",
        shape=[8, 8],
        data_type="int32",
        chunk_shape=[8, 8],
        codecs=[ts_shard([4, 4], index_codecs=[BYTES_BE])],
    )
    ts_case(
        "shard_nested",
        "nested sharding (8, 8) / (4, 4) / (2, 2)",
        shape=[8, 8],
        data_type="int16",
        chunk_shape=[8, 8],
        codecs=[ts_shard([4, 4], codecs=[ts_shard([2, 2])])],
    )
    ts_case(
        "shard_edges",
        "regular edge shards (4, 6) of inner (2, 3) on (10, 13)",
        shape=[10, 13],
        data_type="float32",
        chunk_shape=[4, 6],
        codecs=[ts_shard([2, 3])],
    )
    ts_case(
        "shard_missing_inner",
        "sharding with inner chunks never written",
        shape=[12, 12],
        data_type="int32",
        chunk_shape=[6, 6],
        codecs=[ts_shard([2, 2])],
        fill_value=-1,
        writes=[(slice(0, 2), slice(0, 2)), (slice(7, 9), slice(3, 5))],
    )
    ts_case(
        "transpose_before_shard",
        "[transpose [1, 0], sharding chunk_shape [3, 2]] on chunks (4, 6): the inner "
        "chunk shape is in the transposed (6, 4) space (zarr-python gets this wrong)",
        shape=[8, 12],
        data_type="uint16",
        chunk_shape=[4, 6],
        codecs=[{"name": "transpose", "configuration": {"order": [1, 0]}}, ts_shard([3, 2])],
    )
    ts_case(
        "transpose_before_shard_3d",
        "[transpose [2, 0, 1], sharding (2, 2, 3)] on chunks (4, 6, 4)",
        shape=[4, 6, 8],
        data_type="int32",
        chunk_shape=[4, 6, 4],
        codecs=[{"name": "transpose", "configuration": {"order": [2, 0, 1]}}, ts_shard([2, 2, 3])],
    )
    ts_case(
        "shard_0d", "0-d sharded array", shape=[], data_type="int32", chunk_shape=[], codecs=[ts_shard([])]
    )
    # [sharding_indexed, gzip] is refused by tensorstore ("not compatible with subsequent bytes -> bytes
    # codecs"); zarr-python and zarrs write it (cases */shard_then_gzip).
    for ck, sep in (("default", "/"), ("default", "."), ("v2", "."), ("v2", "/")):
        ts_case(
            f"cke_{ck}_{'slash' if sep == '/' else 'dot'}",
            f"chunk key encoding {ck} separator {sep!r}",
            shape=[4, 6, 2],
            data_type="uint8",
            chunk_shape=[2, 4, 1],
            chunk_key_encoding={"name": ck, "configuration": {"separator": sep}},
        )
    ts_case(
        "cke_v2_no_config",
        "v2 chunk key encoding without configuration",
        shape=[4, 4],
        data_type="uint8",
        chunk_shape=[2, 2],
        chunk_key_encoding={"name": "v2"},
    )
    fills = [
        ("nan", "float32", "NaN"),
        ("nan_payload", "float32", "0x7fc00001"),
        ("neg_nan", "float64", "0xfff8000000000000"),
        ("inf", "float64", "Infinity"),
        ("neg_inf", "float16", "-Infinity"),
        ("hex_one", "float32", "0x3f800000"),
        ("uint64_max", "uint64", 2**64 - 1),
        ("int64_min", "int64", -(2**63)),
        ("complex_hex", "complex64", ["0x7fc00000", "-Infinity"]),
        ("bool_true", "bool", True),
    ]
    for label, dt, fv in fills:
        ts_case(
            f"fill_{label}",
            f"fill value {json.dumps(fv)} on {dt}; chunks never written",
            shape=[8, 3],
            data_type=dt,
            chunk_shape=[2, 3],
            fill_value=fv,
            writes=[slice(0, 2), slice(4, 5)],
        )
    _ts_ml("bfloat16", ts.dtype("bfloat16").numpy_dtype, name="fill_bfloat16_nan", fill_value="NaN")
    ts_case("zero_d", "0-d array", shape=[], data_type="float64", chunk_shape=[])
    ts_case(
        "zero_length", "zero-length dimension (0, 3)", shape=[0, 3], data_type="int32", chunk_shape=[1, 3]
    )
    ts_case(
        "never_written",
        "no chunk written",
        shape=[6, 5],
        data_type="int16",
        chunk_shape=[4, 4],
        fill_value=7,
        writes=[],
    )
    ts_case(
        "ndim_4", "4-D with edge chunks", shape=[3, 4, 2, 5], data_type="uint16", chunk_shape=[2, 3, 1, 4]
    )
    ts_case(
        "dimension_names",
        "dimension names and attributes",
        shape=[4, 3],
        data_type="float32",
        chunk_shape=[2, 2],
        dimension_names=["y", ""],
        attributes={"units": "m", "list": [1, 2]},
    )
    ts_case(
        "empty_chunks_stored",
        "store_data_equal_to_fill_value semantics: data equal to fill in one chunk (tensorstore deletes it)",
        shape=[6],
        data_type="int32",
        chunk_shape=[2],
        fill_value=0,
        writes=[...],
    )


def _ts_ml(
    dt: str,
    np_dt: np.dtype,
    *,
    name: str | None = None,
    fill_value: Any = None,
    expect_error: dict[str, str] | None = None,
    partial: bool = True,
) -> None:
    name = name or f"dtype_{dt}"
    d = case_dir("tensorstore", name)
    meta: dict[str, Any] = {
        "shape": [6],
        "data_type": dt,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
    }
    if fill_value is not None:
        meta["fill_value"] = fill_value
    path = str(d / "data.zarr")
    t = ts.open(
        {"driver": "zarr3", "kvstore": {"driver": "file", "path": path}, "metadata": meta}, create=True
    ).result()
    data = ts_ml_data(np.dtype(np_dt), (6,), len(TABLE))
    if fill_value is not None and partial:
        t[:3].write(data[:3]).result()
    else:
        t.write(data).result()
    got = (
        ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}, open=True)
        .result()
        .read()
        .result()
    )
    # ml_dtypes arrays are saved by their raw bits; the test views them through case.json's "view".
    np.save(
        d / "expected.npy",
        np.array(got, order="C", copy=True).view(f"u{np.dtype(np_dt).itemsize}"),
        allow_pickle=False,
    )
    extra: dict[str, Any] = {
        "attributes": {},
        "dimension_names": None,
        "view": f"u{np.dtype(np_dt).itemsize}",
    }
    if expect_error:
        extra["expect_error"] = expect_error
    write_case_json(
        d,
        "tensorstore",
        f"{dt} (ml_dtypes){'; fill ' + json.dumps(fill_value) if fill_value else ''}",
        **extra,
    )


def _ts_struct() -> None:
    """tensorstore's struct type: it opens one field at a time, so each field is written on its own."""
    d = case_dir("tensorstore", "dtype_struct")
    fields = [
        {"name": "a", "data_type": "int16"},
        {"name": "b", "data_type": "float32"},
        {"name": "c", "data_type": "uint8"},
    ]
    meta = {
        "shape": [7],
        "data_type": {"name": "struct", "configuration": {"fields": fields}},
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [3]}},
        "fill_value": {"a": -1, "b": "NaN", "c": 7},
    }
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(d / "data.zarr")}}
    rng = np.random.default_rng(len(TABLE))
    np_dt = np.dtype([("a", "<i2"), ("b", "<f4"), ("c", "u1")])
    got = np.zeros(7, dtype=np_dt)
    for i, f in enumerate(fields):
        t = ts.open({**spec, "field": f["name"], "metadata": meta}, create=i == 0, open=i > 0).result()
        t[:4].write(rng.integers(0, 100, 4).astype(np_dt[f["name"]])).result()  # the last chunk stays missing
    for f in fields:
        got[f["name"]] = ts.open({**spec, "field": f["name"]}, open=True).result().read().result()
    save_expected(d, got)
    write_case_json(
        d,
        "tensorstore",
        "struct (int16, float32, uint8 fields; fill {a: -1, b: NaN, c: 7}), written "
        "field by field, last chunk missing",
        attributes={},
        dimension_names=None,
    )


# ------------------------------------------------------------------------------------- handwritten

MAX = 2**64 - 1


def crc32c(data: bytes) -> bytes:
    import google_crc32c

    return struct.pack("<I", google_crc32c.value(data))


def array_doc(
    shape: list[int],
    data_type: Any,
    chunk_grid: Any,
    codecs: Any,
    fill_value: Any = 0,
    cke: Any = None,
    **extra: Any,
) -> dict[str, Any]:
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": data_type,
        "chunk_grid": chunk_grid,
        "chunk_key_encoding": cke or {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill_value,
        "codecs": codecs,
    }
    doc.update(extra)
    return doc


def regular(*chunk_shape: int) -> dict[str, Any]:
    return {"name": "regular", "configuration": {"chunk_shape": list(chunk_shape)}}


def rectilinear(*chunk_shapes: Any) -> dict[str, Any]:
    return {"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": list(chunk_shapes)}}


def write_store(root: Path, doc: dict[str, Any] | bytes, chunks: dict[str, bytes]) -> None:
    root.mkdir(parents=True)
    raw = doc if isinstance(doc, bytes) else json.dumps(doc, indent=2, ensure_ascii=False).encode()
    (root / "zarr.json").write_bytes(raw)
    for key, value in chunks.items():
        p = root / key
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(value)


def hw(
    name: str,
    notes: str,
    doc: dict[str, Any] | bytes,
    chunks: dict[str, bytes],
    expected: np.ndarray,
    **extra: Any,
) -> None:
    d = case_dir("handwritten", name)
    write_store(d / "data.zarr", doc, chunks)
    save_expected(d, expected)
    meta = doc if isinstance(doc, dict) else {}
    info = {"attributes": meta.get("attributes", {}), "dimension_names": meta.get("dimension_names"), **extra}
    write_case_json(d, "handwritten", notes, **info)


def shard(
    cps: tuple[int, ...],
    payloads: dict[tuple[int, ...], bytes],
    order: list[tuple[int, ...]],
    gap: bytes = b"",
    index_location: str = "end",
    crc: bool = True,
) -> bytes:
    """A shard holding ``payloads`` in the physical ``order`` given, with ``gap`` bytes before each."""
    n = int(np.prod(cps, dtype=np.int64))
    index = np.full((*cps, 2), MAX, dtype="<u8")
    index_size = 16 * n + (4 if crc else 0)
    body = b""
    base = index_size if index_location == "start" else 0
    for coords in order:
        body += gap
        index[coords] = (base + len(body), len(payloads[coords]))
        body += payloads[coords]
    raw = index.tobytes()
    idx = raw + (crc32c(raw) if crc else b"")
    return idx + body if index_location == "start" else body + idx


def handwritten_cases() -> None:
    u8 = np.arange(6, dtype="u1").reshape(2, 3)
    hw(
        "shorthand_codecs",
        'Zarr 3.1 short-hand names: "codecs": ["bytes"] and "chunk_key_encoding": '
        '"default" (zarr-python and tensorstore reject them)',
        array_doc([2, 3], "uint8", regular(2, 3), ["bytes"], cke="default"),
        {"c/0/0": u8.tobytes()},
        u8,
    )
    hw(
        "shorthand_crc32c",
        'short-hand ["bytes", "crc32c"]',
        array_doc([2, 3], "uint8", regular(2, 3), ["bytes", "crc32c"]),
        {"c/0/0": u8.tobytes() + crc32c(u8.tobytes())},
        u8,
    )
    hw(
        "must_understand_false_key",
        'unknown top-level key whose value has "must_understand": false',
        array_doc(
            [2, 3], "uint8", regular(2, 3), [{"name": "bytes"}], foo={"must_understand": False, "x": 1}
        ),
        {"c/0/0": u8.tobytes()},
        u8,
    )
    hw(
        "codec_must_understand_false",
        'a known codec carrying "must_understand": false',
        array_doc(
            [2, 3],
            "uint8",
            regular(2, 3),
            [{"name": "bytes", "must_understand": False}, {"name": "crc32c", "must_understand": False}],
        ),
        {"c/0/0": u8.tobytes() + crc32c(u8.tobytes())},
        u8,
    )
    hw(
        "minimal_document",
        "the smallest legal array document: no attributes, no CKE configuration, bytes "
        "without configuration on uint8",
        array_doc([2, 3], "uint8", regular(1, 3), [{"name": "bytes"}], cke={"name": "default"}),
        {"c/0/0": u8[:1].tobytes(), "c/1/0": u8[1:].tobytes()},
        u8,
    )
    # shards with inner chunks out of order and with gaps
    data = np.arange(64, dtype="<i2").reshape(8, 8)
    cps = (2, 2)
    payloads = {
        (i, j): data[i * 4 : (i + 1) * 4, j * 4 : (j + 1) * 4].tobytes() for i in range(2) for j in range(2)
    }
    codecs = [
        {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [4, 4],
                "codecs": [BYTES_LE],
                "index_codecs": [BYTES_LE, CRC],
                "index_location": "end",
            },
        }
    ]
    hw(
        "shard_out_of_order",
        "shard whose inner chunks are stored in reverse order",
        array_doc([8, 8], "int16", regular(8, 8), codecs),
        {"c/0/0": shard(cps, payloads, [(1, 1), (1, 0), (0, 1), (0, 0)])},
        data,
    )
    hw(
        "shard_gaps",
        "shard with unused gap bytes before every inner chunk, order shuffled",
        array_doc([8, 8], "int16", regular(8, 8), codecs),
        {"c/0/0": shard(cps, payloads, [(0, 1), (1, 1), (0, 0), (1, 0)], gap=b"\xab" * 7)},
        data,
    )
    start_codecs = json.loads(json.dumps(codecs))
    start_codecs[0]["configuration"]["index_location"] = "start"
    start_codecs[0]["configuration"]["index_codecs"] = [BYTES_LE]
    part = {k: v for k, v in payloads.items() if k != (0, 1)}
    exp = data.copy()
    exp[0:4, 4:8] = 5
    hw(
        "shard_start_missing_gaps",
        "index at start without crc32c, one inner chunk missing, gaps",
        array_doc([8, 8], "int16", regular(8, 8), start_codecs, fill_value=5),
        {
            "c/0/0": shard(
                cps, part, [(1, 0), (0, 0), (1, 1)], gap=b"\x00\x01", index_location="start", crc=False
            )
        },
        exp,
    )
    hw(
        "shard_all_empty_index",
        "a shard present whose index marks every inner chunk empty: all fill",
        array_doc([8, 8], "int16", regular(8, 8), codecs, fill_value=-3),
        {"c/0/0": shard(cps, {}, [])},
        np.full((8, 8), -3, "i2"),
    )
    # the spec's 5-D rectilinear example
    shape5 = [6] * 5
    spec5 = [4, [1, 2, 3], [[4, 2]], [[1, 3], 3], [4, 4, 4]]
    full5 = np.arange(6**5, dtype=np.int64).astype("u1").reshape(shape5)
    edges = [[4, 4], [1, 2, 3], [4, 4], [1, 1, 1, 3], [4, 4]]
    chunks5: dict[str, bytes] = {}
    for coords in np.ndindex(*[len(e) for e in edges]):
        starts = [sum(e[:c]) for e, c in zip(edges, coords, strict=True)]
        block = np.full(
            [e[c] for e, c in zip(edges, coords, strict=True)], 0xEE if sum(coords) % 2 else 0, "u1"
        )
        region = tuple(slice(s, min(s + e[c], 6)) for s, e, c in zip(starts, edges, coords, strict=True))
        block[tuple(slice(0, r.stop - r.start) for r in region)] = full5[region]
        chunks5["c/" + "/".join(map(str, coords))] = block.tobytes()
    assert len(chunks5) == 96
    hw(
        "spec_rectilinear_5d",
        "the rectilinear extension's 5-D example [4, [1,2,3], [[4,2]], [[1,3],3], [4,4,4]] "
        "on shape [6]*5: 96 chunks at declared edge sizes (576 bytes for c/1/2/1/3/1), garbage 0xEE in half the "
        "overhangs",
        array_doc(shape5, "uint8", rectilinear(*spec5), [{"name": "bytes"}]),
        chunks5,
        full5,
    )
    v = np.array([1, 2, 3, 4, 5, 6], "<i4")
    hw(
        "edge_overhang_garbage",
        "regular edge chunk whose out-of-bounds tail holds garbage (must be ignored)",
        array_doc([6], "int32", regular(4), [BYTES_LE], fill_value=9),
        {"c/0": v[:4].tobytes(), "c/1": v[4:].tobytes() + b"\xde\xad\xbe\xef" * 2},
        v,
    )
    hw(
        "rect_overhang_garbage",
        "rectilinear last chunk overhanging the extent by 3 with garbage",
        array_doc([6], "int32", rectilinear([2, 7]), [BYTES_LE], fill_value=9),
        {"c/0": v[:2].tobytes(), "c/1": v[2:].tobytes() + b"\xff" * 12},
        v,
    )
    stray = {
        "c/0": v[:4].tobytes(),
        "c/1": v[4:].tobytes() + bytes(8),
        "c/2": b"stray outside the grid",
        "c/7": b"x",
        "c/5/1": b"wrong ndim",
        "c/x": b"unparseable",
        "c.1": b"wrong separator",
        "notes.txt": b"not a chunk",
        "c/01": b"leading zero",
    }
    hw(
        "stray_keys",
        "keys outside the grid, of the wrong dimensionality, unparseable or unrelated: ignored on "
        "read, reported by validate()",
        array_doc([6], "int32", regular(4), [BYTES_LE]),
        stray,
        v,
        stray_keys=sorted(k for k in stray if k not in ("c/0", "c/1")),
    )
    r16 = np.array([b"\x01\x02", b"\xff\x00", b"\x01\x02"], "V2")
    hw(
        "raw_r16",
        "raw bits r16 with the per-byte list fill [1, 2] (second chunk never written)",
        array_doc([3], "r16", regular(2), [{"name": "bytes"}], fill_value=[1, 2]),
        {"c/0": r16[:2].tobytes()},
        r16,
    )
    hw(
        "dimension_names_null_dup",
        'dimension_names ["x", "x", null]: duplicates and null are legal',
        array_doc(
            [1, 2, 3], "uint8", regular(1, 2, 3), [{"name": "bytes"}], dimension_names=["x", "x", None]
        ),
        {"c/0/0/0": u8.tobytes()},
        u8.reshape(1, 2, 3),
    )
    hw(
        "attributes_raw_utf8",
        "attributes with raw (unescaped) UTF-8 text and nested values",
        array_doc(
            [2, 3],
            "uint8",
            regular(2, 3),
            [{"name": "bytes"}],
            attributes={"name": "Zürich ✓ 日本", "nested": {"list": [1, None, {"k": "v"}]}},
        ),
        {"c/0/0": u8.tobytes()},
        u8,
    )
    import gzip as gz

    g = np.arange(10, dtype="<u2")
    hw(
        "gzip_multi_member",
        "a gzip chunk made of two concatenated members",
        array_doc([10], "uint16", regular(10), [BYTES_LE, {"name": "gzip", "configuration": {"level": 1}}]),
        {"c/0": gz.compress(g[:3].tobytes()) + gz.compress(g[3:].tobytes())},
        g,
    )
    hw(
        "transpose_0d",
        "0-d array with transpose order [] and v2 key '0'",
        array_doc(
            [],
            "float32",
            regular(),
            [{"name": "transpose", "configuration": {"order": []}}, BYTES_LE],
            cke={"name": "v2", "configuration": {"separator": "."}},
        ),
        {"0": np.float32(2.5).tobytes()},
        np.array(2.5, "f4"),
    )
    hw(
        "rect_zero_extent",
        "extent 0 with explicit edges [3, 3]: no chunks",
        array_doc([0, 2], "uint8", rectilinear([3, 3], 2), [{"name": "bytes"}]),
        {},
        np.zeros((0, 2), "u1"),
    )
    hw(
        "fill_hex_payload",
        "float64 fill 0x7ff0000000000001 (signalling NaN payload) kept bit-exactly",
        array_doc([3], "float64", regular(2), [BYTES_LE], fill_value="0x7ff0000000000001"),
        {"c/0": np.array([1.0, 2.0], "<f8").tobytes()},
        np.frombuffer(
            np.array([1.0, 2.0], "<f8").tobytes() + struct.pack("<Q", 0x7FF0000000000001), "<f8"
        ).copy(),
    )
    c = np.array([1 + 2j, 3 - 4j], "<c8")
    hw(
        "complex_big_endian_edge",
        "complex64 big-endian edge chunk (zarrs once swapped parts here)",
        array_doc([3], "complex64", regular(2), [BYTES_BE], fill_value=[1, "NaN"]),
        {"c/0": c.astype(">c8").tobytes(), "c/1": np.array([5 + 6j, 0], ">c8").tobytes()},
        np.array([1 + 2j, 3 - 4j, 5 + 6j], "c8"),
    )
    hw(
        "blosc_missing_typesize",
        "blosc with shuffle but no typesize (zarr-python fills it in; lenient)",
        array_doc(
            [8],
            "int32",
            regular(8),
            [
                BYTES_LE,
                {
                    "name": "blosc",
                    "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "blocksize": 0},
                },
            ],
        ),
        {
            "c/0": __import__("numcodecs")
            .Blosc("lz4", 5, 1, typesize=4)
            .encode(np.arange(8, dtype="<i4").tobytes())
        },
        np.arange(8, dtype="i4"),
    )
    hw(
        "int_fill_float_literal",
        "integer fill written as 1.0 (both references accept it; lenient)",
        array_doc([3], "int16", regular(2), [BYTES_LE], fill_value=1.0),
        {"c/0": np.array([7, 8], "<i2").tobytes()},
        np.array([7, 8, 1], "i2"),
    )
    group_stale_consolidated()


def group_stale_consolidated() -> None:
    d = case_dir("handwritten", "group_stale_consolidated")
    root = d / "data.zarr"
    a_doc = array_doc([3], "uint8", regular(3), [{"name": "bytes"}], attributes={"who": "a"})
    b_doc = array_doc([2], "uint8", regular(2), [{"name": "bytes"}], attributes={"who": "b"})
    cons = {"kind": "inline", "must_understand": False, "metadata": {"a": a_doc}}
    write_store(
        root,
        {"zarr_format": 3, "node_type": "group", "attributes": {}, "consolidated_metadata": cons},
        {
            "a/zarr.json": json.dumps(a_doc).encode(),
            "a/c/0": b"\x01\x02\x03",
            "b/zarr.json": json.dumps(b_doc).encode(),
            "b/c/0": b"\x04\x05",
            "__ext/zarr.json": json.dumps(b_doc).encode(),
        },
    )
    save_expected(d, np.array([1, 2, 3], "u1"), "expected_a.npy")
    save_expected(d, np.array([4, 5], "u1"), "expected_b.npy")
    write_case_json(
        d,
        "handwritten",
        "group whose consolidated metadata is stale (array b added later) and a reserved __ext child",
        arrays=[
            {"path": "a", "expected": "expected_a.npy", "attributes": {"who": "a"}, "dimension_names": None},
            {"path": "b", "expected": "expected_b.npy", "attributes": {"who": "b"}, "dimension_names": None},
        ],
        groups=[{"path": "", "attributes": {}}],
        reserved_keys=["__ext/zarr.json"],
    )


# ------------------------------------------------------------------------------------------ invalid

INVALID_TABLE: list[tuple[str, str, str, str]] = []


def invalid(
    name: str,
    error: str,
    why: str,
    doc: dict[str, Any] | bytes,
    chunks: dict[str, bytes] | None = None,
    *,
    stage: str = "open",
    message: str = "",
    json_path: str | None = None,
) -> None:
    """``stage`` ``open`` (opening the array fails) or ``read`` (reading all of it fails)."""
    d = INVALID / name
    if d.exists():
        raise SystemExit(f"duplicate invalid case {name}")
    write_store(d / "data.zarr", doc, chunks or {})
    exp = {"error": error, "stage": stage, "why": why, "message": message}
    if json_path:
        exp["json_path"] = json_path
    (d / "expected.json").write_text(json.dumps(exp, indent=2, ensure_ascii=False) + "\n")
    INVALID_TABLE.append((name, error, stage, why))


def invalid_cases() -> None:
    B = [BYTES_LE]
    G = {"name": "gzip", "configuration": {"level": 1}}
    base = dict(shape=[4, 6], data_type="int16", chunk_grid=regular(2, 3), codecs=B)

    def doc(**changes: Any) -> dict[str, Any]:
        kw = {**base, **changes}
        return array_doc(kw.pop("shape"), kw.pop("data_type"), kw.pop("chunk_grid"), kw.pop("codecs"), **kw)

    def shard_codec(inner: list[int], **cfg: Any) -> dict[str, Any]:
        c = {
            "chunk_shape": inner,
            "codecs": [BYTES_LE],
            "index_codecs": [BYTES_LE, CRC],
            "index_location": "end",
        }
        c.update(cfg)
        return {"name": "sharding_indexed", "configuration": c}

    without_codecs = doc()
    del without_codecs["codecs"]
    invalid(
        "zarr_format_2",
        "UnsupportedError",
        "zarr_format must be 3 (spec §9.4)",
        doc(zarr_format=2),
        message="zarr_format",
        json_path="$.zarr_format",
    )
    invalid(
        "zarr_format_string",
        "UnsupportedError",
        'zarr_format must be the integer 3, not "3"',
        doc(zarr_format="3"),
        message="zarr_format",
        json_path="$.zarr_format",
    )
    invalid("not_json", "MetadataError", "zarr.json is not JSON", b'{"zarr_format": 3,', message="JSON")
    invalid("missing_codecs", "MetadataError", "codecs is required", without_codecs, message="codecs")
    invalid(
        "empty_codecs",
        "MetadataError",
        "codecs must hold exactly one array->bytes codec (zarrita.js wrote [])",
        doc(codecs=[]),
        message="codecs",
        json_path="$.codecs",
    )
    invalid(
        "two_array_bytes",
        "MetadataError",
        "two array->bytes codecs",
        doc(codecs=[BYTES_LE, BYTES_LE]),
        message="array->bytes",
    )
    invalid(
        "gzip_before_bytes",
        "MetadataError",
        "a bytes->bytes codec before the array->bytes codec",
        doc(codecs=[G, BYTES_LE]),
        message="gzip",
    )
    invalid(
        "transpose_after_bytes",
        "MetadataError",
        "an array->array codec after the array->bytes codec",
        doc(codecs=[BYTES_LE, {"name": "transpose", "configuration": {"order": [1, 0]}}]),
        message="transpose",
    )
    invalid(
        "no_array_bytes", "MetadataError", "no array->bytes codec", doc(codecs=[G]), message="array->bytes"
    )
    invalid(
        "bytes_without_endian",
        "MetadataError",
        "bytes without endian on a multi-byte type",
        doc(codecs=[{"name": "bytes"}]),
        message="endian",
    )
    invalid(
        "dimension_names_length",
        "MetadataError",
        "dimension_names length differs from the number of dims",
        doc(dimension_names=["x"]),
        message="dimension_names",
        json_path="$.dimension_names",
    )
    invalid(
        "must_understand_string",
        "UnsupportedError",
        '"must_understand": "false" (a string) does not waive the unknown key',
        doc(foo={"must_understand": "false"}),
        message="foo",
        json_path="$.foo",
    )
    invalid(
        "unknown_top_level_key",
        "UnsupportedError",
        "unknown top-level key without must_understand false",
        doc(foo=1),
        message="foo",
        json_path="$.foo",
    )
    invalid(
        "unknown_storage_transformer",
        "UnsupportedError",
        "non-empty storage_transformers we do not know",
        doc(storage_transformers=[{"name": "chunk-manifest-json", "configuration": {}}]),
        message="storage transformer",
    )
    invalid(
        "unknown_codec",
        "UnsupportedError",
        "an unknown codec must be understood",
        doc(codecs=[BYTES_LE, {"name": "lzfse"}]),
        message="lzfse",
    )
    invalid(
        "unknown_data_type",
        "UnsupportedError",
        "data types cannot be skipped",
        doc(data_type="foo"),
        message="foo",
        json_path="$.data_type",
    )
    invalid(
        "unknown_chunk_key_encoding",
        "UnsupportedError",
        "chunk key encodings cannot be skipped",
        doc(cke={"name": "hash"}),
        message="hash",
    )
    invalid(
        "unknown_chunk_grid",
        "UnsupportedError",
        "chunk grids cannot be skipped",
        doc(chunk_grid={"name": "irregular", "configuration": {}}),
        message="irregular",
    )
    invalid(
        "gzip_config_extra_key",
        "MetadataError",
        "unknown key inside a codec configuration",
        doc(codecs=[BYTES_LE, {"name": "gzip", "configuration": {"level": 1, "foo": 2}}]),
        message="foo",
    )
    invalid(
        "gzip_in_index_codecs",
        "MetadataError",
        "index_codecs must have a fixed encoded size (no gzip)",
        doc(shape=[8], chunk_grid=regular(8), codecs=[shard_codec([4], index_codecs=[BYTES_LE, G])]),
        message="index",
    )
    invalid(
        "sharding_non_divisible",
        "MetadataError",
        "inner chunk shape must divide the shard shape",
        doc(shape=[12], chunk_grid=regular(6), codecs=[shard_codec([4])]),
        message="divisible",
    )
    invalid(
        "transpose_space_zarr_python_style",
        "MetadataError",
        "[transpose [1,0], sharding [2,3]] on chunks (4,6): "
        "zarr-python validates [2,3] against the untransposed (4,6) and accepts it; in the codec's input space "
        "(6,4) 3 does not divide 4",
        doc(
            shape=[8, 12],
            chunk_grid=regular(4, 6),
            codecs=[{"name": "transpose", "configuration": {"order": [1, 0]}}, shard_codec([2, 3])],
        ),
        message="divisible",
    )
    invalid(
        "rect_sharding_non_divisible",
        "MetadataError",
        "a rectilinear shard edge (5) not divisible by inner 2",
        doc(shape=[9], chunk_grid=rectilinear([4, 5]), codecs=[shard_codec([2])]),
        message="divisible",
    )
    invalid(
        "rect_sum_below_extent",
        "MetadataError",
        "rectilinear edges sum to 5 < extent 6",
        doc(shape=[6], chunk_grid=rectilinear([2, 3])),
        message="sum",
    )
    for label, spec in (
        ("rle_zero_count", [[4, 0]]),
        ("rle_zero_value", [[0, 2]]),
        ("rle_three", [[4, 2, 1]]),
        ("edge_float", [4.0, 2]),
        ("edge_bool", [True, 5]),
        ("edges_empty", []),
        ("edge_zero", [0, 6]),
    ):
        invalid(
            f"rect_{label}",
            "MetadataError",
            f"rectilinear chunk_shapes entry {json.dumps(spec)} is malformed",
            doc(shape=[6], chunk_grid=rectilinear(spec)),
            message="chunk_shapes",
        )
    invalid(
        "rect_kind_foo",
        "UnsupportedError",
        'rectilinear kind must be "inline" (other kinds may be defined '
        "by future versions of the extension, hence unsupported rather than malformed)",
        doc(
            shape=[6],
            chunk_grid={"name": "rectilinear", "configuration": {"kind": "foo", "chunk_shapes": [3]}},
        ),
        message="kind",
    )
    invalid(
        "rect_kind_missing",
        "MetadataError",
        "rectilinear kind is required",
        doc(shape=[6], chunk_grid={"name": "rectilinear", "configuration": {"chunk_shapes": [3]}}),
        message="kind",
    )
    invalid(
        "rect_ndim_mismatch",
        "MetadataError",
        "chunk_shapes has 1 entry for a 2-D array",
        doc(chunk_grid=rectilinear(2)),
        message="chunk_shapes",
    )
    invalid(
        "regular_ndim_mismatch",
        "MetadataError",
        "chunk_shape has 3 entries for a 2-D array",
        doc(chunk_grid=regular(2, 2, 2)),
        message="chunk_shape",
    )
    invalid(
        "fill_int_fraction", "MetadataError", "integer fill 1.5", doc(fill_value=1.5), message="fill_value"
    )
    invalid(
        "fill_int_string",
        "MetadataError",
        'integer fill "1" (a string)',
        doc(fill_value="1"),
        message="fill_value",
    )
    invalid(
        "fill_uint8_256",
        "MetadataError",
        "256 does not fit uint8",
        doc(data_type="uint8", codecs=[{"name": "bytes"}], fill_value=256),
        message="fill_value",
    )
    invalid(
        "fill_int64_overflow",
        "MetadataError",
        "2**63 does not fit int64",
        doc(data_type="int64", fill_value=2**63),
        message="fill_value",
    )
    invalid(
        "fill_complex_scalar",
        "MetadataError",
        "complex fill must be a [re, im] pair",
        doc(data_type="complex64", fill_value=1),
        message="fill_value",
    )
    invalid(
        "fill_float_null",
        "MetadataError",
        "null is not a float fill value",
        doc(data_type="float32", fill_value=None),
        message="fill_value",
    )
    invalid(
        "shape_float", "MetadataError", "shape entries must be integers", doc(shape=[4.0, 6]), message="shape"
    )
    invalid(
        "node_type_missing",
        "MetadataError",
        "node_type is required",
        {"zarr_format": 3, "attributes": {}},
        message="node_type",
    )
    invalid(
        "string_with_bytes_codec",
        "MetadataError",
        "the string type needs vlen-utf8, not bytes",
        doc(data_type="string", fill_value="", codecs=[{"name": "bytes"}]),
        message="string",
    )
    # errors raised while reading chunk data
    v = np.arange(6, dtype="<i2").reshape(2, 3)
    raw = v.tobytes()
    crc_doc = doc(shape=[2, 3], codecs=[BYTES_LE, CRC])
    bad = bytearray(raw + crc32c(raw))
    bad[0] ^= 1
    invalid(
        "crc32c_mismatch",
        "ChecksumError",
        "a flipped bit under crc32c",
        crc_doc,
        {"c/0/0": bytes(bad)},
        stage="read",
        message="c/0/0",
    )
    invalid(
        "truncated_chunk",
        "CodecError",
        "an edge chunk stored truncated (N5 style) instead of full size",
        doc(shape=[3], chunk_grid=regular(2)),
        {"c/0": v.ravel()[:2].tobytes(), "c/1": v.ravel()[2:3].tobytes()},
        stage="read",
        message="c/1",
    )
    invalid(
        "gzip_garbage",
        "CodecError",
        "gzip chunk that is not a gzip stream",
        doc(codecs=[BYTES_LE, G]),
        {"c/0/0": b"\x78\x9c not gzip"},
        stage="read",
        message="c/0/0",
    )
    zs = __import__("numcodecs").Zstd(level=1, checksum=True).encode(raw)
    zs = zs[:-5] + bytes([zs[-5] ^ 0xFF]) + zs[-4:]
    invalid(
        "zstd_corrupt",
        "ChecksumError",
        "zstd frame with checksum and a corrupted byte",
        doc(
            shape=[2, 3], codecs=[BYTES_LE, {"name": "zstd", "configuration": {"level": 1, "checksum": True}}]
        ),
        {"c/0/0": zs},
        stage="read",
        message="c/0/0",
    )
    sdoc = doc(shape=[4], data_type="uint8", chunk_grid=regular(4), codecs=[shard_codec([2])])
    good = shard((2,), {(0,): b"\x01\x02", (1,): b"\x03\x04"}, [(0,), (1,)])
    index = np.frombuffer(good[4:-4], "<u8").copy().reshape(2, 2)

    def with_index(ix: np.ndarray, body: bytes = b"\x01\x02\x03\x04") -> bytes:
        r = ix.astype("<u8").tobytes()
        return body + r + crc32c(r)

    half = index.copy()
    half[1] = (MAX, 0)
    invalid(
        "shard_index_half_empty",
        "CodecError",
        "index entry (MAX, 0): half an empty marker",
        sdoc,
        {"c/0": with_index(half)},
        stage="read",
        message="c/0",
    )
    zero = index.copy()
    zero[1, 1] = 0
    invalid(
        "shard_nbytes_zero",
        "CodecError",
        "inner chunk with nbytes 0",
        sdoc,
        {"c/0": with_index(zero)},
        stage="read",
        message="c/0",
    )
    out = index.copy()
    out[1, 0] = 1000
    invalid(
        "shard_offset_out_of_range",
        "CodecError",
        "inner chunk range past the end of the shard",
        sdoc,
        {"c/0": with_index(out)},
        stage="read",
        message="c/0",
    )
    corrupt = bytearray(good)
    corrupt[6] ^= 0x10
    invalid(
        "shard_index_crc",
        "ChecksumError",
        "shard index with a corrupted byte under crc32c",
        sdoc,
        {"c/0": bytes(corrupt)},
        stage="read",
        message="c/0",
    )
    invalid(
        "shard_truncated",
        "CodecError",
        "a shard shorter than its index",
        sdoc,
        {"c/0": good[:10]},
        stage="read",
        message="c/0",
    )
    invalid(
        "shard_empty_value",
        "CodecError",
        "a zero-length shard",
        sdoc,
        {"c/0": b""},
        stage="read",
        message="c/0",
    )


# ------------------------------------------------------------------------------------------- README

README_HEAD = """# Conformance corpus

Small Zarr v3 stores written by the reference implementations, hand-written edge cases, and documents that
must be rejected. Everything here is **generated output** of `generate.py` (run by hand, never in CI:
`.venv/bin/python conformance_data/generate.py`); do not edit it manually. Tests read it without any
reference library installed (`tests/conformance/test_read_corpus.py`, `test_invalid.py`, `test_validate.py`).

Pinned producer versions: {versions}.

## Layout

- `cases/<producer>/<case>/data.zarr/` — the store exactly as the producer wrote it;
  `expected.npy` — the array as the producer reads it back (bit-exact; ml_dtypes arrays saved as their raw
  unsigned bits, `case.json` `"view"` names it; variable-length bytes in `expected.bytes.json`);
  `case.json` — producer, versions, notes, attributes, dimension names, `arrays`/`groups` for hierarchies,
  `stray_keys`, and `expect_error` for the few stores rectizarr deliberately refuses (with the reason).
- `invalid/<case>/data.zarr/` + `expected.json` — `{{"error": <rectizarr error class>, "stage": "open" | "read",
  "why": ..., "message": <substring of the message>, "json_path": ...}}`.

## Producers

- **zarr-python** — `zarr.create_array` with the default `BatchedCodecPipeline`, under
  `zarr.config.set({{"array.rectilinear_chunks": True}})` so rectilinear grids can be written.
- **zarrs** — zarr-python with `zarr.config.set({{"codec_pipeline.path": "zarrs.ZarrsCodecPipeline",
  "codec_pipeline.strict": True}})`. Verified per array: `type(arr._async_array.codec_pipeline)` is
  `zarrs.ZarrsCodecPipeline`, its Rust `impl` is set and, because of `strict`, its Python fallback
  (`python_impl`) is `None` — so every chunk is encoded by zarrs or the write fails. Behavioural proof in the
  corpus: `zarrs/fill_nan_payload_data` keeps NaN payload `0x7fc00001` chunks that zarr-python's own pipeline
  drops as "empty" (`zarr-python/fill_nan_payload_data` reads back canonical NaN). zarrs' pipeline refuses
  string, bytes, datetime and fixed-width text types, so those cases exist for zarr-python only.
  `expected.npy` of zarr-python and zarrs cases is read back by zarr-python's *own* pipeline: zarrs 0.2.3
  swaps real and imaginary parts of big-endian complex edge chunks on read (noted on that case).
- **tensorstore** — `tensorstore.open({{"driver": "zarr3", ...}}, create=True)` with explicit metadata.
  It cannot write rectilinear grids, string/bytes or datetime types; it can write transpose before
  sharding correctly (zarr-python cannot, see `invalid/transpose_space_zarr_python_style`). Its
  `float8_e8m0fnu` default fill `0.0` is unrepresentable (a documented refusal), and it decodes the fill
  `1.0` of that type as `0x3f`, so that case writes every element.
- **handwritten** — plain `json`/bytes writes for what no producer emits: short-hand names,
  `must_understand: false`, shards with inner chunks out of order and with gaps, the rectilinear extension's
  5-D example, garbage in edge-chunk overhangs, stray keys, `r16`, gzip multi-member, stale consolidated
  metadata.

## Cases

| producer | case | exercises |
|---|---|---|
"""


def write_readme() -> None:
    counts: dict[str, int] = {}
    for p, _, _ in TABLE:
        counts[p] = counts.get(p, 0) + 1
    text = README_HEAD.format(versions=", ".join(f"{k} {v}" for k, v in VERSIONS.items()))
    text += "".join(f"| {p} | `{c}` | {n.replace('|', '/')} |\n" for p, c, n in TABLE)
    text += "\nCases per producer: " + ", ".join(f"{p} {n}" for p, n in counts.items())
    text += f"; total {len(TABLE)}.\n\n## Invalid documents\n\n| case | error | stage | why |\n|---|---|---|---|\n"
    text += "".join(f"| `{n}` | {e} | {s} | {w.replace('|', '/')} |\n" for n, e, s, w in INVALID_TABLE)
    text += f"\n{len(INVALID_TABLE)} invalid documents.\n"
    (ROOT / "README.md").write_text(text)


def main() -> None:
    for d in (CASES, INVALID):
        if d.exists():
            shutil.rmtree(d)
    zarr_python_like("zarr-python")
    zarr_python_like("zarrs")
    tensorstore_cases()
    handwritten_cases()
    invalid_cases()
    write_readme()
    print(f"{len(TABLE)} cases, {len(INVALID_TABLE)} invalid documents", file=sys.stderr)


if __name__ == "__main__":
    main()
