"""Regenerate the Zarr v2 conformance corpus. Run BY HAND (never in CI), from the repository root:

    .venv/bin/python conformance_data/generate_v2.py [--zarr2-python /tmp/zarr2env/bin/python]

It deletes and rewrites ``conformance_data/v2/``. Three producers:

- ``zarr-python-2``: zarr-python 2.18 (``zarr<3``), which cannot share an environment with zarr-python 3, so
  this script re-runs itself under the interpreter of a separate virtual environment (``--zarr2-python``;
  create it with ``python -m venv /tmp/zarr2env && /tmp/zarr2env/bin/pip install 'zarr<3' msgpack``).
- ``zarr-python-3``: zarr-python 3.4.2 writing ``zarr_format=2``.
- ``tensorstore``: tensorstore's ``zarr`` (v2) driver.

Layout of one case: ``v2/<producer>/<case>/`` with ``data.zarr/``, ``case.json`` (producer, versions,
notes, ``arrays``: path, expected file, attributes, dimension names; ``groups``; ``needs`` for a case that
only reads with an opt-in) and the expected arrays as the producer reads them back: ``<name>.npy``
(bit-exact) or, for object arrays, ``<name>.json`` (``{"shape", "values"}``; bytes as ``{"b64": ...}``,
sub-arrays as ``{"array": [...], "dtype": ...}``).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent / "v2"


def _jsonable(x: Any) -> Any:
    if isinstance(x, bytes):
        return {"b64": base64.b64encode(x).decode()}
    if isinstance(x, np.ndarray):
        return {"array": x.tolist(), "dtype": x.dtype.str}
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    return x


def save_expected(case: Path, name: str, arr: np.ndarray) -> str:
    if arr.dtype.hasobject:
        flat = [_jsonable(v) for v in arr.reshape(-1)]
        (case / f"{name}.json").write_text(json.dumps({"shape": list(arr.shape), "values": flat}))
        return f"{name}.json"
    if arr.dtype.type.__module__.startswith("ml_dtypes"):  # no .npy form: the raw bits (the test views them)
        arr = arr.view(f"u{arr.dtype.itemsize}")
    np.save(case / f"{name}.npy", arr, allow_pickle=False)
    return f"{name}.npy"


def sample(dtype: Any, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Deterministic data of a v2 dtype: distinct values, no collisions with the fill value."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    if dt.fields is not None:
        out = np.zeros(n, dtype=dt)
        for name in dt.names or ():
            sub = out[name]
            sub[...] = sample(dt.fields[name][0].base, (), seed + 1) if sub.ndim == 1 else 0
            sub[...] = (rng.integers(1, 100, size=sub.shape)).astype(dt.fields[name][0].base)
        return out.reshape(shape)
    if dt.kind == "b":
        return (rng.integers(0, 2, size=n) == 1).reshape(shape)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return (
            rng.integers(max(int(info.min), -1000), min(int(info.max), 1000), size=n)
            .astype(dt)
            .reshape(shape)
        )
    if dt.kind == "f":
        return (rng.standard_normal(n) * 100).astype(dt).reshape(shape)
    if dt.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt).reshape(shape)
    if dt.kind in "Mm":
        return (
            rng.integers(0, 10**6, size=n)
            .astype(np.int64)
            .view(dt.newbyteorder("="))
            .astype(dt)
            .reshape(shape)
        )
    if dt.kind == "S":
        return np.array([f"s{i}".encode()[: dt.itemsize] for i in range(n)], dtype=dt).reshape(shape)
    if dt.kind == "U":
        return np.array([f"ü{i}"[: dt.itemsize // 4] for i in range(n)], dtype=dt).reshape(shape)
    if dt.kind == "V":
        return np.frombuffer(
            rng.integers(0, 256, size=n * dt.itemsize, dtype=np.uint8).tobytes(), dtype=dt
        ).reshape(shape)
    raise ValueError(dt)


def new_case(producer: str, name: str) -> Path:
    case = ROOT / producer / name
    shutil.rmtree(case, ignore_errors=True)
    case.mkdir(parents=True)
    return case


def write_case_json(
    case: Path,
    producer: str,
    versions: dict[str, str],
    notes: str,
    arrays: list[dict[str, Any]],
    groups: list[dict[str, Any]] | None = None,
    needs: str | None = None,
) -> None:
    info: dict[str, Any] = {"producer": producer, "versions": versions, "notes": notes, "arrays": arrays}
    if groups is not None:
        info["groups"] = groups
    if needs:
        info["needs"] = needs
    (case / "case.json").write_text(json.dumps(info, indent=2) + "\n")


# ------------------------------------------------------------------------------- zarr-python 2.18


def zarr2_cases() -> None:  # runs under the zarr<3 interpreter
    import numcodecs
    import zarr
    from numcodecs import (
        BZ2,
        LZ4,
        LZMA,
        Blosc,
        Categorize,
        Delta,
        FixedScaleOffset,
        GZip,
        PackBits,
        Pickle,
        Quantize,
        Zlib,
        Zstd,
    )

    assert zarr.__version__.startswith("2.18"), zarr.__version__
    producer = "zarr-python-2"
    versions = {"zarr": zarr.__version__, "numcodecs": numcodecs.__version__, "numpy": np.__version__}

    def one(
        name: str,
        notes: str,
        data: np.ndarray,
        *,
        chunks: Any = (2, 3),
        partial: bool = False,
        needs: str | None = None,
        **kwargs: Any,
    ) -> None:
        case = new_case(producer, name)
        z = zarr.open_array(
            str(case / "data.zarr"),
            mode="w",
            shape=data.shape,
            chunks=chunks,
            dtype=kwargs.pop("dtype", data.dtype),
            **kwargs,
        )
        if partial and data.ndim:
            z[: data.shape[0] // 2] = data[: data.shape[0] // 2]  # later chunks stay missing
        else:
            z[...] = data
        got = np.asarray(z[...])
        if partial and z.fill_value is None and data.ndim:
            # zarr 2 leaves never-written regions of a null-fill array uninitialised (np.empty); zarr-python 3
            # and rectizarr read zeros there.
            got[data.shape[0] // 2 :] = 0
        expected = save_expected(case, "expected", got)
        write_case_json(
            case,
            producer,
            versions,
            notes,
            [{"path": "", "expected": expected, "attributes": {}, "dimension_names": None}],
            needs=needs,
        )

    shape = (5, 7)
    for dt in [
        "<i4",
        ">f8",
        "|b1",
        "<M8[ns]",
        "<m8[s]",
        "|S12",
        "<U5",
        "|V16",
        "|u1",
        "<i8",
        ">i2",
        "<f2",
        "<c16",
        ">c8",
        "<u8",
        ">U3",
    ]:
        one(
            f"dtype_{dt.replace('<', 'lt').replace('>', 'gt').replace('|', '').replace('[', '_').strip(']')}",
            f"dtype {dt}, (5, 7) in (2, 3) chunks, default blosc",
            sample(dt, shape),
            **({"fill_value": None} if dt.startswith("|V") else {}),
        )
    struct = np.dtype([("a", "<i4"), ("b", "<f8", (2,))])
    one("dtype_structured", "structured [a <i4, b <f8 (2,)]", sample(struct, shape))
    one(
        "dtype_structured_big",
        "structured with big-endian fields, fill via base64",
        sample(np.dtype([("x", ">u2"), ("y", ">f4")]), shape),
        fill_value=np.zeros((), ">u2,>f4")[()],
    )
    compressors = {
        "blosc_lz4_shuffle": Blosc("lz4", 5, Blosc.SHUFFLE),
        "blosc_zstd_bitshuffle": Blosc("zstd", 3, Blosc.BITSHUFFLE),
        "blosc_blosclz_noshuffle": Blosc("blosclz", 1, Blosc.NOSHUFFLE),
        "blosc_lz4hc_autoshuffle": Blosc("lz4hc", 5, Blosc.AUTOSHUFFLE),
        "zstd": Zstd(level=3),
        "lz4": LZ4(),
        "gzip": GZip(5),
        "zlib": Zlib(1),
        "bz2": BZ2(9),
        "lzma": LZMA(),
        "none": None,
    }
    for cname, comp in compressors.items():
        one(f"compressor_{cname}", f"compressor {cname} on <f4", sample("<f4", shape, 3), compressor=comp)
    filters: dict[str, tuple[Any, list[Any]]] = {
        "delta": ("<i4", [Delta(dtype="<i4")]),
        "delta_astype": ("<i8", [Delta(dtype="<i8", astype="<i2")]),
        "fixedscaleoffset": ("<f8", [FixedScaleOffset(offset=1, scale=100, dtype="<f8", astype="<i4")]),
        "quantize": ("<f8", [Quantize(digits=3, dtype="<f8")]),
        "packbits": ("|b1", [PackBits()]),
        "astype": ("<f8", [numcodecs.AsType(encode_dtype="<f4", decode_dtype="<f8")]),
        "shuffle": ("<i4", [numcodecs.Shuffle(elementsize=4)]),
        "bitround": ("<f4", [numcodecs.BitRound(keepbits=6)]),
        "delta_big_endian": (">i4", [Delta(dtype=">i4")]),
        "two_filters": ("<i4", [Delta(dtype="<i4"), numcodecs.Shuffle(elementsize=4)]),
    }
    for fname, (dt, flt) in filters.items():
        data = sample(dt, shape, 5)
        if fname == "fixedscaleoffset":
            data = np.round(data, 2)
        one(f"filter_{fname}", f"filters {fname} on {dt}", data, filters=flt)
    words = np.array(
        [["ab", "", "héllo", "x"], ["日本", "c", "dd", "eee"], ["f", "g", "h", "i"]], dtype=object
    )
    one(
        "object_vlen_utf8",
        "|O with vlen-utf8, fill 'xy', missing chunks",
        words,
        dtype=object,
        object_codec=numcodecs.VLenUTF8(),
        fill_value="xy",
        partial=True,
    )
    blobs = np.array([b"", b"\x00\xff", b"abc", b"d", b"ee", b"f"], dtype=object)
    one(
        "object_vlen_bytes",
        "|O with vlen-bytes",
        blobs,
        chunks=(4,),
        dtype=object,
        object_codec=numcodecs.VLenBytes(),
    )
    ragged = np.empty(4, dtype=object)
    ragged[:] = [
        np.array([1, 2, 3], "<i4"),
        np.array([], "<i4"),
        np.array([7], "<i4"),
        np.array([5, 6], "<i4"),
    ]
    one(
        "object_vlen_array",
        "|O with vlen-array <i4",
        ragged,
        chunks=(3,),
        dtype=object,
        object_codec=numcodecs.VLenArray("<i4"),
    )
    docs = np.array([{"a": 1}, [1, 2], "s", 3.5, None, True], dtype=object)
    one("object_json2", "|O with json2", docs, chunks=(4,), dtype=object, object_codec=numcodecs.JSON())
    one(
        "object_msgpack2",
        "|O with msgpack2",
        np.array(["a", 1, [2, 3], {"k": "v"}], dtype=object),
        chunks=(3,),
        dtype=object,
        object_codec=numcodecs.MsgPack(),
    )
    one(
        "object_pickle",
        "|O with pickle: read only with RECTIZARR_ALLOW_PICKLE=1",
        np.array([[1, "a"], {"s": 2}, 2.5], dtype=object),
        chunks=(2,),
        dtype=object,
        object_codec=Pickle(),
        needs="RECTIZARR_ALLOW_PICKLE",
    )
    cats = np.array(["red", "green", "blue", "red", "red", "blue", "green"], dtype=object)
    one(
        "filter_categorize",
        "|O strings through categorize (the only filter)",
        cats,
        chunks=(3,),
        dtype=object,
        filters=[Categorize(labels=["red", "green", "blue"], dtype=object, astype="u1")],
    )
    one("order_f_2d", "order F, (5, 7) in (2, 3)", sample("<i4", shape, 7), order="F")
    one(
        "order_f_3d_filters",
        "order F 3-D with a delta filter and big-endian floats",
        sample(">f8", (3, 4, 5), 8),
        chunks=(2, 3, 2),
        order="F",
        filters=[Delta(dtype=">f8")],
    )
    one("order_f_structured", "order F structured", sample(struct, (4, 3), 9), order="F")
    one("separator_slash", "dimension_separator '/'", sample("<u2", shape, 10), dimension_separator="/")
    one(
        "separator_slash_3d",
        "dimension_separator '/' in 3-D, missing chunks",
        sample("<i4", (4, 4, 4), 11),
        chunks=(2, 2, 3),
        dimension_separator="/",
        partial=True,
    )
    one(
        "missing_chunks",
        "half the chunks never written, fill 42",
        sample("<i2", shape, 12),
        fill_value=42,
        partial=True,
    )
    one("zero_d", "0-d array", np.array(7.5, "<f8"), chunks=())
    one("empty", "(0, 3) array", np.zeros((0, 3), "<i4"), chunks=(2, 2))
    for fill_name, fill in {"nan": np.nan, "inf": np.inf, "neginf": -np.inf, "null": None}.items():
        one(
            f"fill_{fill_name}",
            f"float fill {fill_name}, nothing written but one chunk",
            np.full(shape, np.nan if fill is None else fill, "<f8"),
            fill_value=fill,
            partial=True,
        )
    one(
        "fill_bytes_base64",
        "|S4 fill b'ab' (base64), missing chunks",
        sample("|S4", shape, 13),
        fill_value=b"ab",
        partial=True,
    )
    one("fill_complex", "complex fill [1, 2]", sample("<c8", shape, 14), fill_value=1 + 2j, partial=True)
    one(
        "fill_datetime_nat",
        "M8[s] fill NaT",
        sample("<M8[s]", shape, 15),
        fill_value=np.datetime64("NaT", "s"),
        partial=True,
    )
    _zarr2_hierarchies(zarr, producer, versions)


def _zarr2_hierarchies(zarr: Any, producer: str, versions: dict[str, str]) -> None:
    for consolidated in (False, True):
        name = "hierarchy_consolidated" if consolidated else "hierarchy"
        case = new_case(producer, name)
        root = zarr.open_group(str(case / "data.zarr"), mode="w")
        root.attrs["title"] = "v2 tree"
        sub = root.create_group("sub")
        sub.attrs["level"] = 1
        deeper = sub.create_group("deeper")
        arrays = []
        for path, group, dt in (
            ("temp", root, "<f4"),
            ("sub/count", sub, "<i8"),
            ("sub/deeper/flag", deeper, "|b1"),
        ):
            leaf = path.rsplit("/", 1)[-1]
            data = sample(dt, (4, 3), len(arrays))
            z = group.create_dataset(leaf, data=data, chunks=(3, 2))
            z.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]
            z.attrs["units"] = "m"
            arrays.append(
                {
                    "path": path,
                    "expected": save_expected(case, leaf, z[...]),
                    "attributes": {"units": "m"},
                    "dimension_names": ["y", "x"],
                }
            )
        if consolidated:
            zarr.consolidate_metadata(str(case / "data.zarr"))
        groups = [
            {"path": "", "attributes": {"title": "v2 tree"}},
            {"path": "sub", "attributes": {"level": 1}},
            {"path": "sub/deeper", "attributes": {}},
        ]
        write_case_json(
            case,
            producer,
            versions,
            f"nested groups, _ARRAY_DIMENSIONS, consolidated={consolidated}",
            arrays,
            groups,
        )


# ------------------------------------------------------------------------- zarr-python 3, tensorstore


def zarr3_cases() -> None:
    import numcodecs
    import zarr

    producer = "zarr-python-3"
    versions = {"zarr": zarr.__version__, "numpy": np.__version__}

    def one(name: str, notes: str, data: np.ndarray, **kwargs: Any) -> None:
        case = new_case(producer, name)
        z = zarr.create_array(
            str(case / "data.zarr"),
            shape=data.shape,
            dtype=kwargs.pop("dtype", data.dtype),
            zarr_format=2,
            chunks=kwargs.pop("chunks", (2, 3)),
            **kwargs,
        )
        z[...] = data
        write_case_json(
            case,
            producer,
            versions,
            notes,
            [
                {
                    "path": "",
                    "expected": save_expected(case, "expected", np.asarray(z[...])),
                    "attributes": {},
                    "dimension_names": None,
                }
            ],
        )

    shape = (5, 7)
    one("default_i4", "int32 with the default compressor", sample("<i4", shape))
    one("big_endian_f8", ">f8", sample(">f8", shape, 1))
    one("order_f", "order F", sample("<u4", shape, 2), order="F")
    one("string", "str (vlen-utf8)", np.array([["a", "bb", "", "é"]] * 3, dtype=object), dtype=str)
    one(
        "separator_slash",
        "chunk_key_encoding v2 with '/'",
        sample("<i2", shape, 3),
        chunk_key_encoding={"name": "v2", "separator": "/"},
    )
    one(
        "filters_delta_zlib",
        "delta filter and zlib",
        sample("<i8", shape, 4),
        filters=[numcodecs.Delta(dtype="<i8")],
        compressors=numcodecs.Zlib(level=2),
    )
    case = new_case(producer, "hierarchy_consolidated")
    root = zarr.open_group(str(case / "data.zarr"), mode="w", zarr_format=2)
    root.attrs["kind"] = "root"
    g = root.create_group("g")
    arr = g.create_array("a", shape=(3, 4), dtype="<f4", chunks=(2, 2), dimension_names=None)
    arr[...] = sample("<f4", (3, 4), 5)
    arr.attrs["_ARRAY_DIMENSIONS"] = ["t", "x"]
    zarr.consolidate_metadata(str(case / "data.zarr"))
    write_case_json(
        case,
        producer,
        versions,
        "a consolidated v2 hierarchy written by zarr-python 3",
        [
            {
                "path": "g/a",
                "expected": save_expected(case, "a", arr[...]),
                "attributes": {},
                "dimension_names": ["t", "x"],
            }
        ],
        [{"path": "", "attributes": {"kind": "root"}}, {"path": "g", "attributes": {}}],
    )


def tensorstore_cases() -> None:
    import importlib.metadata as md

    import tensorstore as ts

    producer = "tensorstore"
    versions = {"tensorstore": md.version("tensorstore"), "numpy": np.__version__}

    def one(name: str, notes: str, data: np.ndarray, metadata: dict[str, Any]) -> None:
        case = new_case(producer, name)
        spec = {
            "driver": "zarr",
            "kvstore": {"driver": "file", "path": str(case / "data.zarr")},
            "metadata": {"shape": list(data.shape), "chunks": [2, 3][: data.ndim], **metadata},
        }
        if data.dtype.names:  # tensorstore opens one field of a structured array at a time
            got = np.zeros_like(data)
            for i, field in enumerate(data.dtype.names):
                t = ts.open(
                    {**spec, "field": field}, create=i == 0, delete_existing=i == 0, open=i > 0
                ).result()
                t[...] = data[field]
                got[field] = t.read().result()
        else:
            t = ts.open(spec, create=True, delete_existing=True).result()
            t[...] = data
            got = t.read().result()
        write_case_json(
            case,
            producer,
            versions,
            notes,
            [
                {
                    "path": "",
                    "expected": save_expected(case, "expected", np.asarray(got)),
                    "attributes": {},
                    "dimension_names": None,
                }
            ],
        )

    shape = (5, 7)
    one(
        "i4_blosc",
        "<i4 with blosc",
        sample("<i4", shape),
        {"dtype": "<i4", "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1}},
    )
    one(
        "f8_big_zlib",
        ">f8 with zlib",
        sample(">f8", shape, 1),
        {"dtype": ">f8", "compressor": {"id": "zlib", "level": 3}},
    )
    one(
        "order_f",
        "order F, no compressor",
        sample("<u2", shape, 2),
        {"dtype": "<u2", "order": "F", "compressor": None},
    )
    one(
        "structured",
        "structured dtype",
        sample(np.dtype([("a", "<i2"), ("b", "<f4")]), shape, 3),
        {"dtype": [["a", "<i2"], ["b", "<f4"]], "compressor": None},
    )
    one(
        "separator_slash",
        "dimension_separator '/'",
        sample("<f4", shape, 4),
        {"dtype": "<f4", "dimension_separator": "/", "compressor": {"id": "zstd", "level": 1}},
    )
    one(
        "fill_nan_partial",
        "fill NaN, one chunk written",
        np.full(shape, np.nan, "<f8"),
        {"dtype": "<f8", "fill_value": "NaN"},
    )
    import ml_dtypes

    for name in ("bfloat16", "float8_e4m3fn", "int4"):
        values = np.random.default_rng(6).integers(-4, 4, size=shape).astype(getattr(ml_dtypes, name))
        one(
            f"dtype_{name}",
            f"tensorstore's v2 dtype name {name!r} (ml_dtypes); expected saved as raw bits",
            values,
            {"dtype": name, "compressor": None},
        )


def main() -> None:
    if "--zarr2-child" in sys.argv:
        zarr2_cases()
        return
    python = (
        sys.argv[sys.argv.index("--zarr2-python") + 1]
        if "--zarr2-python" in sys.argv
        else "/tmp/zarr2env/bin/python"
    )
    shutil.rmtree(ROOT, ignore_errors=True)
    ROOT.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": "",
        "NUMCODECS_ALLOW_UNSAFE_PICKLE_DECODE": "1",
    }  # to read back our own pickle case
    subprocess.run([python, __file__, "--zarr2-child"], check=True, env=env)
    zarr3_cases()
    tensorstore_cases()
    write_readme()


def write_readme() -> None:
    rows = []
    for case in sorted(ROOT.glob("*/*/case.json")):
        info = json.loads(case.read_text())
        rows.append(f"| {info['producer']} | `{case.parent.name}` | {info['notes']} |")
    text = (
        (__doc__ or "").split("\n\n", 1)[1].replace("It deletes and rewrites ``conformance_data/v2/``. ", "")
    )
    (ROOT / "README.md").write_text(
        "# Zarr v2 conformance corpus\n\nGenerated by `conformance_data/generate_v2.py` (run by hand, never in CI; "
        "do not edit by hand). Read by `tests/conformance/test_read_v2_corpus.py`, migrated by "
        "`tests/cli/test_migrate.py`.\n\n"
        + text.strip()
        + "\n\n| producer | case | exercises |\n|---|---|---|\n"
        + "\n".join(rows)
        + "\n"
    )


if __name__ == "__main__":
    main()
