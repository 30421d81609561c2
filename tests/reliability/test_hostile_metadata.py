"""Hostile ``zarr.json``: every open either works or raises a RectizarrError with a message, quickly,
and absurd size fields are refused before anything big is allocated."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import random
import subprocess
import sys
import textwrap
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

import rectizarr
from rectizarr.cli import main
from rectizarr.cli.main import info_text
from rectizarr.errors import CodecError, MetadataError, SelectionError, UnsupportedError
from rectizarr.stores import MemoryStore
from tests.memory import least_peak
from tests.reliability._mutate import CASE_SECONDS, alarm, check_case, mutate, seed_stores
from tests.strategies import examples

SEEDS = seed_stores()


@examples(3, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, len(SEEDS) - 1), rng_seed=st.integers(0, 2**32 - 1))
def test_mutated_documents_fail_cleanly(seed: int, rng_seed: int) -> None:
    contents, key, path = SEEDS[seed]
    data = mutate(contents[key], random.Random(rng_seed))
    with alarm(CASE_SECONDS):
        outcomes = check_case(contents, key, path, data)
    assert len(outcomes) == 4


def _doc(**over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4],
        "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0,
        "codecs": [{"name": "bytes"}],
    }
    base.update(over)
    return base


_SHARD = {
    "name": "sharding_indexed",
    "configuration": {
        "chunk_shape": [1],
        "codecs": [{"name": "bytes"}],
        "index_location": "end",
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
    },
}


# Regressions: each of these escaped as a non-RectizarrError before the fix.
REGRESSIONS = {
    "deep list in shape": b'{"zarr_format": 3, "node_type": "array", "shape": '
    + b"[" * 10_000
    + b"]" * 10_000
    + b"}",
    "deep object": b'{"zarr_format": 3, "attributes": ' + b'{"a":' * 10_000 + b"1" + b"}" * 10_000 + b"}",
    "invalid utf-8 in a key": json.dumps(_doc()).encode().replace(b'"shape"', b'"sh\xffape"'),
    "invalid utf-8 in the grid": json.dumps(_doc()).encode().replace(b'"regular"', b'"r\xe5gular"'),
    "surrogate in the grid": json.dumps(_doc())
    .encode()
    .replace(b'"configuration"', b'"\xed\xa0\x80configuration"'),
    "list as datetime unit": json.dumps(
        _doc(
            data_type={"name": "numpy.datetime64", "configuration": {"unit": ["s"], "scale_factor": 1}},
            fill_value="NaT",
        )
    ).encode(),
    "NaN tokens": json.dumps(_doc(shape=[float("nan")])).encode(),
    "lone surrogate escape in a codec key": json.dumps(
        _doc(
            codecs=[
                {"name": "bytes"},
                {"name": "zstd", "configuration": {"level": 0, "chec\ud800ksum": False}},
            ]
        )
    ).encode(),
    "truncated": json.dumps(_doc()).encode()[:37],
    "inner chunk_shape past int64": json.dumps(
        _doc(codecs=[{**_SHARD, "configuration": {**_SHARD["configuration"], "chunk_shape": [2**64 + 1]}}])
    ).encode(),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regressions_raise_rectizarr_errors(name: str) -> None:
    contents = {"a/zarr.json": REGRESSIONS[name], "zarr.json": b'{"zarr_format": 3, "node_type": "group"}'}
    with alarm(CASE_SECONDS):
        outcomes = check_case(contents, "a/zarr.json", "a", REGRESSIONS[name])
    assert all(o is not None for o in outcomes[:3]), outcomes


_HUGE_SCRIPT = textwrap.dedent("""
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))   # 1 GiB address space
    import rectizarr
    from rectizarr.stores import MemoryStore
    doc, chunks = json.loads(sys.argv[1])
    store = MemoryStore()
    store.set("zarr.json", json.dumps(doc).encode())
    for k, v in chunks.items():
        store.set(k, bytes.fromhex(v))
    try:
        a = rectizarr.open_array(store, mode="r")
        a[(slice(0, 1),) * a.ndim]
        print("OK")
    except rectizarr.RectizarrError as e:
        assert str(e)
        print("ERR", type(e).__name__)
""")


def _regular(*cs: int) -> dict[str, object]:
    return {"name": "regular", "configuration": {"chunk_shape": list(cs)}}


HUGE = {
    "shape 2**62, one-element read": (_doc(shape=[2**62], chunk_grid=_regular(1)), {"c/0": "01"}),
    "shape 2**62 stored chunk of 2**61": (
        _doc(shape=[2**62], chunk_grid=_regular(2**61)),
        {"c/0": "01" * 64},
    ),
    "chunk_shape 2**40 on 3 axes": (
        _doc(shape=[4, 4, 4], chunk_grid=_regular(2**40, 2**40, 2**40)),
        {"c/0/0/0": "01" * 64},
    ),
    "chunk_shape 2**40 on 3 axes, missing": (
        _doc(shape=[2**40] * 3, chunk_grid=_regular(2**40, 2**40, 2**40)),
        {},
    ),
    "shard index of 2**40 entries": (
        _doc(shape=[10], chunk_grid=_regular(2**40), codecs=[_SHARD]),
        {"c/0": "01" * 64},
    ),
    "vlen length past the buffer": (
        _doc(data_type="string", fill_value="", codecs=[{"name": "vlen-utf8"}]),
        {"c/0": "02000000" + "ffffff7f" + "6162"},
    ),
    "vlen count past the buffer": (
        _doc(data_type="string", fill_value="", codecs=[{"name": "vlen-utf8"}]),
        {"c/0": "ffffff7f" + "01000000" + "61"},
    ),
    "rectilinear RLE [[1, 10**12]]": (
        _doc(
            shape=[10**12],
            chunk_grid={
                "name": "rectilinear",
                "configuration": {"kind": "inline", "chunk_shapes": [[[1, 10**12]]]},
            },
        ),
        {"c/0": "01"},
    ),
    "rectilinear RLE on 2 axes": (
        _doc(
            shape=[10, 10**12],
            chunk_grid={
                "name": "rectilinear",
                "configuration": {"kind": "inline", "chunk_shapes": [[[1, 10**12]], [[1, 10**12]]]},
            },
        ),
        {},
    ),
}


@pytest.mark.parametrize("name", sorted(HUGE))
def test_absurd_sizes_do_not_allocate(name: str) -> None:
    """Run under a 1 GiB address-space limit: an allocation of the declared size would die with
    MemoryError (not a RectizarrError) or be killed; the case must finish with OK or a clean error."""
    doc, chunks = HUGE[name]
    proc = subprocess.run(
        [sys.executable, "-c", _HUGE_SCRIPT, json.dumps([doc, chunks])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[0] in ("OK", "ERR"), proc.stdout


# Issue 16, "also close": numpy or OS errors that escaped instead of a RectizarrError.
def _open_doc(doc: dict[str, object], chunks: dict[str, bytes] | None = None) -> rectizarr.Array:
    store = MemoryStore()
    store.set("zarr.json", json.dumps(doc).encode())
    for k, v in (chunks or {}).items():
        store.set(k, v)
    return rectizarr.open_array(store, mode="r")


@pytest.mark.parametrize("ndim", [33, 64, 65])
def test_more_than_32_dimensions_are_refused_at_open_and_create(ndim: int) -> None:
    doc = _doc(shape=[1] * ndim, chunk_grid=_regular(*[1] * ndim))
    with pytest.raises(UnsupportedError, match="at most 32") as exc:
        _open_doc(doc)
    assert exc.value.path == "$.shape"
    with pytest.raises(UnsupportedError, match="at most 32"):
        rectizarr.create_array(MemoryStore(), shape=(1,) * ndim, dtype="i4", chunks=(1,) * ndim)


def test_32_dimensions_read_and_write() -> None:
    a = rectizarr.create_array(MemoryStore(), shape=(3,) + (1,) * 31, dtype="i4", chunks=(2,) + (1,) * 31)
    a[...] = np.arange(3).reshape(a.shape)
    np.testing.assert_array_equal(a[...].ravel(), np.arange(3))


@pytest.mark.parametrize("name", ["r17179869184", "r" + "8" * 5000])
def test_raw_type_larger_than_numpy_is_a_metadata_error(name: str) -> None:
    with pytest.raises(MetadataError, match="bytes per element") as exc:
        _open_doc(_doc(data_type=name, fill_value=[0]))
    assert exc.value.path == "$.data_type"


def test_stray_key_with_a_5000_digit_coordinate_is_not_a_chunk_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = MemoryStore()
    a = rectizarr.create_array(store, shape=(4,), dtype="u1", chunks=(2,), fill_value=7, compressors=None)
    a[:2] = 1
    path = tmp_path / "a.zip"  # a 5000-character file name is too long for a local file system
    with zipfile.ZipFile(path, "w") as z:
        for key in [*store.list_prefix(""), "c/" + "9" * 5000]:
            z.writestr(key, bytes(store.get(key) or b"\0\0"))
    a = rectizarr.open_array(str(path), mode="r")
    np.testing.assert_array_equal(a[...], [1, 1, 7, 7])
    assert a.nchunks_initialized == 1
    assert "Chunks Initialized : 1" in a.info_complete() and "Initialized" not in a.info  # info lists nothing
    assert main(["validate", str(path), "--lenient", "--json"]) == 0
    assert "chunks.stray_key" in capsys.readouterr().out


@pytest.mark.parametrize("chunk", [2**62, 1])
def test_huge_valid_shape_info_works_and_full_read_is_a_clear_error(chunk: int) -> None:
    a = _open_doc(_doc(shape=[2**62, 2**62], chunk_grid=_regular(chunk, chunk)))
    assert (
        f"Chunk shape : ({chunk}, {chunk})" in a.info and f"No. chunks  : {(2**62 // chunk) ** 2}" in a.info
    )
    assert f"{2**62 // chunk}" in info_text(a)
    assert a.write_chunk_runs == (((chunk, 2**62 // chunk),),) * 2
    with pytest.raises(SelectionError, match="select less"):
        a[...]
    assert a[5, 7:9].tolist() == [0, 0]


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"offset": 0, "scale": 1, "dtype": "<f8", "astype": "V2000000000"}, "astype"),
        ({"offset": 0, "scale": 1, "dtype": "V2000000000", "astype": "<f8"}, "dtype"),
    ],
)
def test_numcodecs_filter_declaring_huge_elements_is_refused_at_open(
    config: dict[str, object], field: str
) -> None:
    """``astype: "V2000000000"`` took 10-18 s and 3.85 GB to open and read one element."""
    doc = _doc(
        data_type="float64",
        codecs=[{"name": "numcodecs.fixedscaleoffset", "configuration": config}, {"name": "bytes"}],
    )

    def refused() -> None:
        with pytest.raises(MetadataError, match="at most 128 bytes") as exc:
            _open_doc(doc)
        assert exc.value.path == f"$.codecs[0].configuration.{field}"

    assert least_peak(refused, 16 << 20) < 16 << 20


@pytest.mark.filterwarnings(
    "ignore::numpy.exceptions.ComplexWarning"
)  # numcodecs decodes c16 -> i1 with astype
def test_numcodecs_filter_growing_elements_sixteen_times_still_works() -> None:
    a = rectizarr.create_array(
        MemoryStore(),
        shape=(4,),
        dtype="i1",
        chunks=(2,),
        codecs=[
            {"name": "numcodecs.astype", "configuration": {"encode_dtype": "<c16", "decode_dtype": "|i1"}},
            {"name": "bytes", "configuration": {"endian": "little"}},
        ],
    )
    a[:] = np.arange(4, dtype="i1")
    np.testing.assert_array_equal(a[:], np.arange(4))


_RLE_SCRIPT = textwrap.dedent("""
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))   # 1 GiB address space
    import rectizarr
    from rectizarr.cli.main import info_json, info_text
    from rectizarr.stores import MemoryStore
    store = MemoryStore()
    store.set("zarr.json", sys.argv[1].encode())
    a = rectizarr.open_array(store)
    assert "[1x100000000]" in a.info and "[1x100000000]" in info_text(a), a.info
    assert info_json(a)["chunk_grid"]["write_chunk_sizes"] == [[[1, 10**8]]] * a.ndim
    assert a.write_chunk_runs == (((1, 10**8),),) * a.ndim
    last = (10**8 - 1,) * a.ndim
    a[last] = 9
    assert a[last] == 9 and a[(slice(10**8 - 2, None),) * a.ndim].sum() == 9 and a.nchunks_initialized == 1
    assert a.grid.to_json() == json.loads(sys.argv[1])["chunk_grid"]
    if a.ndim > 1:  # listing 10**8 chunks per axis as Python ints: refused past 10**8 in total
        try:
            a.write_chunk_sizes
        except rectizarr.MetadataError as e:
            print("ERR", e)
    print("OK")
""")


@pytest.mark.parametrize("ndim", [1, 4])
def test_run_length_edges_stay_compressed(ndim: int) -> None:
    """``[[1, 10**8]]`` in a 287-byte zarr.json: open took 12-14 s and 2.3 GB, ``info`` 60 s and 4.6 GB;
    four such axes ended in a raw MemoryError. Runs stay runs: open, info and reads fit in 1 GiB."""
    doc = _doc(
        shape=[10**8] * ndim,
        chunk_grid={
            "name": "rectilinear",
            "configuration": {"kind": "inline", "chunk_shapes": [[[1, 10**8]]] * ndim},
        },
    )
    proc = subprocess.run(
        [sys.executable, "-c", _RLE_SCRIPT, json.dumps(doc)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[-2] == "OK"
    assert ("too many to list" in proc.stdout) == (ndim == 4)


# Zarr v2 metadata and chunk sizes that escaped as KeyError, OverflowError or MemoryError.
def _open_v2(stored: dict[str, bytes] | None = None, **over: object) -> rectizarr.Array:
    doc = {
        "zarr_format": 2,
        "shape": [4],
        "chunks": [2],
        "dtype": "<i4",
        "compressor": None,
        "fill_value": 0,
        "order": "C",
        "filters": None,
        **over,
    }
    store = MemoryStore()
    store.set(".zarray", json.dumps(doc).encode())
    for k, v in (stored or {}).items():
        store.set(k, v)
    return rectizarr.open_array(store, mode="r")


@pytest.mark.parametrize("cid", ["nope", "", "vlen-arrays"])
def test_unknown_v2_compressor_is_unsupported(cid: str) -> None:
    with pytest.raises(UnsupportedError, match="unknown compressor") as exc:
        _open_v2(compressor={"id": cid, "dtype": "<i4"})
    assert exc.value.path == "$.compressor.id" and exc.value.key == ".zarray"
    with pytest.raises(UnsupportedError, match="unknown codec") as exc:
        _open_doc(_doc(codecs=[{"name": "bytes"}, {"name": f"numcodecs.{cid}"}]))
    assert exc.value.path == "$.codecs[1].name"


def test_a_known_array_to_bytes_codec_as_v2_compressor_is_a_metadata_error() -> None:
    """numcodecs' VLenArray (issue 37: read) codes object arrays; as the compressor of an int array it
    would be a second array->bytes step: refused, naming both, not a raw exception."""
    with pytest.raises(MetadataError, match=r"only one array->bytes codec.*numcodecs\.vlen-array") as exc:
        _open_v2(compressor={"id": "vlen-array", "dtype": "<i4"})
    assert exc.value.key == ".zarray"


_INF = float("inf")


@pytest.mark.parametrize(
    ("compressor", "path"),
    [
        ({"id": "blosc", "cname": "lz4", "clevel": _INF, "shuffle": 1, "blocksize": 0}, "$.compressor"),
        ({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": _INF}, "$.compressor"),
        ({"id": "gzip", "level": _INF}, "$.compressor"),
        ({"id": "zstd", "level": _INF}, "$.compressor"),
        ({"id": "zlib", "level": _INF}, "$.codecs[1].configuration"),
        ({"id": "zlib", "level": 2**62}, "$.codecs[1].configuration"),
        ({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 2**31}, "$.compressor"),
    ],
)
@pytest.mark.filterwarnings("ignore:zarr.json. bare NaN/Infinity")  # the v3 document has an Infinity token
def test_infinite_or_huge_compressor_levels_are_metadata_errors(
    compressor: dict[str, object], path: str
) -> None:
    with pytest.raises(MetadataError, match="configuration") as exc:
        _open_v2(compressor=compressor)
    assert exc.value.path == path and exc.value.key == ".zarray"
    if compressor["id"] == "zlib":
        config = {k: v for k, v in compressor.items() if k != "id"}
        with pytest.raises(MetadataError, match="configuration") as exc:
            _open_doc(_doc(codecs=[{"name": "bytes"}, {"name": "numcodecs.zlib", "configuration": config}]))
        assert exc.value.path == path


@pytest.mark.parametrize("dtype", ["<m8[s]", "<M8[ns]"])
@pytest.mark.parametrize("fill", [2**63, 2**64 + 1, -(2**63) - 1])
def test_v2_time_fill_past_int64_is_a_metadata_error(dtype: str, fill: int) -> None:
    with pytest.raises(MetadataError, match="out of the int64 range") as exc:
        _open_v2(dtype=dtype, fill_value=fill)
    assert exc.value.path == "$.fill_value"
    assert _open_v2(dtype=dtype, fill_value=2**63 - 1).fill_value.view("i8") == 2**63 - 1


_CHUNK = bytes(range(16))


@pytest.mark.parametrize(
    ("v3_codec", "compressor", "data"),
    [
        ({"name": "gzip", "configuration": {"level": 1}}, {"id": "gzip", "level": 1}, gzip.compress(_CHUNK)),
        (
            {"name": "numcodecs.zlib", "configuration": {"level": 1}},
            {"id": "zlib", "level": 1},
            zlib.compress(_CHUNK),
        ),
        ({"name": "numcodecs.lzma", "configuration": {}}, {"id": "lzma"}, lzma.compress(_CHUNK)),
        (
            {"name": "numcodecs.bz2", "configuration": {"level": 1}},
            {"id": "bz2", "level": 1},
            bz2.compress(_CHUNK),
        ),
    ],
    ids=["gzip", "zlib", "lzma", "bz2"],
)
def test_chunk_bytes_past_ssize_t_with_a_stored_chunk(
    v3_codec: dict[str, object], compressor: dict[str, object], data: bytes
) -> None:
    """A chunk of 2**62 int32 elements holds 2**64 bytes: the decode bound overflowed a C ssize_t."""
    a = _open_v2({"0": data}, chunks=[2**62], compressor=compressor)
    with pytest.raises(CodecError, match="expected 18446744073709551616 bytes") as exc:
        a[0]
    assert exc.value.key == "0"
    a = _open_doc(
        _doc(
            data_type="int32",
            chunk_grid=_regular(2**62),
            codecs=[{"name": "bytes", "configuration": {"endian": "little"}}, v3_codec],
        ),
        {"c/0": data},
    )
    with pytest.raises(CodecError, match="expected 18446744073709551616 bytes") as exc:
        a[0]
    assert exc.value.key == "c/0"
    np.testing.assert_array_equal(
        _open_v2({"0": data}, shape=[4], chunks=[4], compressor=compressor)[:], np.frombuffer(_CHUNK, "<i4")
    )


_ITEMSIZE_SCRIPT = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))   # 1 GiB address space
    import rectizarr
    from rectizarr.stores import MemoryStore
    store = MemoryStore()
    store.set(sys.argv[1], sys.argv[2].encode())
    try:
        rectizarr.open_array(store, mode="r")
        print("OK")
    except rectizarr.MetadataError as e:
        print(type(e).__name__, e.path)
""")


@pytest.mark.parametrize(
    ("dtype", "fill", "path"),
    [
        ("|V2147483647", 0, "$.dtype"),
        ("|V2147483647", "AAAA", "$.dtype"),
        ("|S2147483647", "AAAA", "$.dtype"),
        ("|S2147483647", None, "$.dtype"),
        ("<U536870911", "a", "$.dtype"),
        ([["a", "|V16777216"], ["b", "|V1"]], 0, "$.dtype"),
        ([["a", "|V2000", [10000]]], 0, "$.dtype"),
        ([["a", "|V2147483647"], ["b", "|V2147483647"], ["c", "|V2"]], 0, "$.dtype[0][1]"),
    ],
)
def test_v2_dtype_larger_than_max_itemsize_is_refused_before_the_fill_is_built(
    dtype: object, fill: object, path: str
) -> None:
    """The fill value of a 2 GiB element was allocated at open (MemoryError under a 1 GiB limit)."""
    doc = {
        "zarr_format": 2,
        "shape": [4],
        "chunks": [2],
        "dtype": dtype,
        "compressor": None,
        "fill_value": fill,
        "order": "C",
        "filters": None,
    }
    proc = subprocess.run(
        [sys.executable, "-c", _ITEMSIZE_SCRIPT, ".zarray", json.dumps(doc)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["UnsupportedError", path]
    _open_v2(dtype=[["a", "|V16777215"], ["b", "|V1"]], fill_value=0)  # at the limit


def test_v3_byte_strings_larger_than_max_itemsize_are_refused() -> None:
    doc = _doc(
        data_type={"name": "null_terminated_bytes", "configuration": {"length_bytes": 2**31 - 1}},
        fill_value="AAAA",
    )
    proc = subprocess.run(
        [sys.executable, "-c", _ITEMSIZE_SCRIPT, "zarr.json", json.dumps(doc)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["MetadataError", "$.data_type.configuration"]


def test_v3_utf32_and_raw_types_larger_than_max_itemsize_are_refused() -> None:
    """A fill value of the type is built at open: ``fixed_length_utf32`` of 2**31 - 4 bytes allocated 2 GiB."""
    from rectizarr.core.dtype_ext import MAX_ITEMSIZE

    big = MAX_ITEMSIZE + 4
    with pytest.raises(MetadataError, match="length_bytes"):
        _open_doc(
            _doc(
                data_type={"name": "fixed_length_utf32", "configuration": {"length_bytes": big}},
                fill_value="a",
            )
        )
    with pytest.raises(MetadataError, match="bytes per element"):
        _open_doc(_doc(data_type=f"r{8 * big}", fill_value=[0] * 4))


def test_a_zstd_frame_without_a_size_in_a_huge_declared_chunk_is_counted_in_bounded_memory() -> None:
    """A frame that declares no content size is first counted against the declared chunk size; the count
    once allocated that size (2**62: a ValueError from numpy)."""
    import zstandard

    frame = zstandard.ZstdCompressor(write_content_size=False).compress(b"\0" * 16)
    a = _open_doc(
        _doc(
            chunk_grid={"name": "regular", "configuration": {"chunk_shape": [2**62]}},
            codecs=[{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 1, "checksum": False}}],
        ),
        {"c/0": frame},
    )
    with pytest.raises(CodecError, match="c/0"):
        a[0]


def _nested(kind: str, depth: int) -> tuple[str, dict[str, object] | list[object]]:
    """``(key, document)`` of an array whose sharding, struct or v2 structured dtype nests ``depth`` deep."""
    doc: dict[str, object] = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [8],
        "data_type": "int8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0,
        "codecs": [{"name": "bytes"}],
    }
    inner: object = {"name": "bytes"} if kind == "sharding" else "int8" if kind == "struct" else "<i1"
    fill: object = 0
    for _ in range(depth):
        if kind == "sharding":
            inner = {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": [8],
                    "codecs": [inner],
                    "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                },
            }
        elif kind == "struct":
            inner, fill = (
                {"name": "struct", "configuration": {"fields": [{"name": "a", "data_type": inner}]}},
                {"a": fill},
            )
        else:
            inner = [["a", inner]]
    if kind == "v2":
        return ".zarray", {
            "zarr_format": 2,
            "shape": [8],
            "chunks": [8],
            "dtype": inner,
            "compressor": None,
            "fill_value": None,
            "order": "C",
            "filters": None,
        }
    doc.update({"codecs": [inner]} if kind == "sharding" else {"data_type": inner, "fill_value": fill})
    return "zarr.json", doc


@pytest.mark.parametrize("kind", ["sharding", "struct", "v2"])
def test_deeply_nested_metadata_is_a_metadata_error_at_once(kind: str) -> None:
    """Sharding in sharding, structs in structs: 300 levels raised RecursionError, and each struct level
    parsed its fields twice (20 levels of a 1 KB document: 32 s). 16 levels open; more are refused."""
    for depth, ok in ((16, True), (17, False), (300, False)):
        key, doc = _nested(kind, depth)
        store = MemoryStore()
        store.set(key, json.dumps(doc).encode())
        with alarm(CASE_SECONDS):
            if ok:
                a = rectizarr.open_array(store, mode="r")
                assert a.shape == (8,)
            else:
                with pytest.raises(MetadataError, match="nested more than 16 levels") as info:
                    rectizarr.open_array(store, mode="r")
                assert info.value.key == key
                assert not rectizarr.validate(store).ok


@pytest.mark.parametrize(
    ("field", "value"),
    [("blocksize", 2**31), ("blocksize", 10**30), ("typesize", 2**31), ("typesize", 10**30)],
)
def test_blosc_numbers_past_a_c_int_are_refused_at_open(field: str, value: int) -> None:
    """c-blosc takes typesize and blocksize as C ints: larger ones opened, then every write failed with
    OverflowError or blosc's error -10 (and c-blosc printed to stdout)."""
    config = {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0, field: value}
    with pytest.raises(MetadataError, match=field) as exc:
        _open_doc(_doc(codecs=[{"name": "bytes"}, {"name": "blosc", "configuration": config}]))
    assert exc.value.path == f"$.codecs[1].configuration.{field}"


@pytest.mark.parametrize("inner", [None, [1]])
def test_a_write_into_a_chunk_no_memory_can_hold_is_a_clear_error(inner: list[int] | None) -> None:
    """A chunk of 2**47 int64 (1 PiB, past any address space), or a shard of 2**47 inner chunks (its index):
    the array opens and reads as fill, and a one-element write raised numpy's bare MemoryError; it is an
    UnsupportedError naming the array and its chunks, and nothing is stored."""
    n = 2**47
    codecs: list[dict[str, object]] = [{"name": "bytes", "configuration": {"endian": "little"}}]
    if inner is not None:
        codecs = [
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": inner,
                    "codecs": codecs,
                    "index_codecs": [*codecs, {"name": "crc32c"}],
                    "index_location": "end",
                },
            }
        ]
    store = MemoryStore()
    store.set(
        "zarr.json",
        json.dumps(
            _doc(
                shape=[n],
                data_type="int64",
                codecs=codecs,
                chunk_grid={"name": "regular", "configuration": {"chunk_shape": [n]}},
                fill_value=0,
            )
        ).encode(),
    )
    a = rectizarr.open_array(store, mode="r+")
    assert a[:2].tolist() == [0, 0]
    with pytest.raises(UnsupportedError, match="needs a whole chunk"):
        a[0] = 5
    assert sorted(store.list_prefix("")) == ["zarr.json"]


def test_a_selection_over_more_chunks_than_memory_can_list_is_a_selection_error() -> None:
    """``a.blocks[-1]`` with 2**40 chunks per axis planned an 8 TiB array of chunk offsets: numpy's bare
    MemoryError. A SelectionError now (a 1-D array's last block still reads)."""
    a = rectizarr.create_array(MemoryStore(), shape=(2**40,) * 3, chunks=(1, 1, 1), dtype="i4")
    with pytest.raises(SelectionError, match="more chunks than can be planned"):
        a.blocks[-1]
    b = rectizarr.create_array(MemoryStore(), shape=(2**40,), chunks=(1,), dtype="i4")
    assert b.blocks[-1].tolist() == [0]
