"""Virtual concatenation (rectizarr.virtual): reference sets over existing files, read back by rectizarr and
zarr-python; sharded, v2, HDF5 (kerchunk) and remote sources; request counts; every refusal."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr import virtual
from rectizarr.stores import CountingStore, FsspecStore, open_store
from rectizarr.virtual import ConcatError, SourceMismatchError, UnreferenceableError
from tests.refs import zarr_python

MONTHS = (31, 28, 31)


def _open(refs: Any, **options: Any) -> rectizarr.Array:
    return rectizarr.open_array("reference://", mode="r", storage_options={"fo": refs, **options})


def _zarr_read(refs: Any, **options: Any) -> np.ndarray:
    zarr = zarr_python()
    with zarr.config.set({"array.rectilinear_chunks": True}):
        store = zarr.storage.FsspecStore.from_url(
            "reference://", read_only=True, storage_options={"fo": refs, **options}
        )
        return np.asarray(zarr.open_array(store, mode="r")[...])


def _months(
    root: Path, lengths: tuple[int, ...] = MONTHS, **kwargs: Any
) -> tuple[list[str], list[np.ndarray]]:
    """One array per month, shape (days, 5, 3), 7-day chunks; values distinct per source."""
    kwargs.setdefault("chunks", (7, 5, 2))
    paths, values = [], []
    for i, n in enumerate(lengths):
        x = np.arange(n * 15, dtype="f4").reshape(n, 5, 3) + 1000 * i
        path = str(root / f"m{i}")
        rectizarr.create_array(path, data=x, fill_value=np.float32(np.nan), **kwargs)
        paths.append(path)
        values.append(x)
    return paths, values


def _edges(refs: dict[str, Any], path: str = "") -> list[Any]:
    doc = json.loads(refs["refs"][f"{path}/zarr.json" if path else "zarr.json"])
    assert doc["chunk_grid"]["name"] == "rectilinear"
    return list(doc["chunk_grid"]["configuration"]["chunk_shapes"])


def test_months_of_31_28_31_days_with_7_day_chunks(tmp_path: Path) -> None:
    paths, values = _months(tmp_path)
    result = virtual.build(paths, 0, side_store=tmp_path / "side")
    # the 31-day month's 5th week is 3 days: rewritten at its true size (two chunks across the last axis);
    # the last month's keeps its stored 7 (the grid overhangs the extent by 4)
    assert result.rewritten == 2 and result.prefixes == 0
    assert _edges(result.refs) == [[[7, 4], 3, [7, 9]], 5, 2]
    assert len(os.listdir(tmp_path / "side" / "edges")) == 2
    expected = np.concatenate(values)
    out = tmp_path / "v.json"
    virtual.write_refs(result.refs, out)
    a = _open(str(out))
    assert a.shape == (90, 5, 3)
    assert np.array_equal(a[...], expected) and np.array_equal(a[29:33, 1:, ::2], expected[29:33, 1:, ::2])
    assert np.array_equal(_zarr_read(str(out)), expected)
    # every other chunk is a whole-file reference to the source's own chunk file
    assert result.refs["refs"]["c/5/0/0"] == [os.path.join(paths[1], "c", "0", "0", "0")]


def test_edge_rows_larger_than_the_window_are_rewritten_chunk_by_chunk(tmp_path: Path) -> None:
    from dataclasses import replace

    from rectizarr import tuning

    paths, values = _months(tmp_path)
    with tuning.use(replace(tuning.current(), window_bytes=64)):  # (a row of edge chunks is 180 bytes)
        small = virtual.build(paths, 0, side_store="inline")
    assert small.refs == virtual.build(paths, 0, side_store="inline").refs
    assert np.array_equal(_open(small.refs)[...], np.concatenate(values))


def test_raw_chunks_on_axis_0_are_referenced_as_a_byte_prefix(tmp_path: Path) -> None:
    paths, values = _months(tmp_path, compressors=None)
    result = virtual.build(paths, 0)  # no side store needed: nothing is rewritten
    assert (result.rewritten, result.prefixes) == (0, 2)
    ref = result.refs["refs"]["c/4/0/0"]
    assert ref == [os.path.join(paths[0], "c", "4", "0", "0"), 0, 3 * 5 * 2 * 4]
    assert np.array_equal(_open(result.refs)[...], np.concatenate(values))
    assert np.array_equal(_zarr_read(result.refs), np.concatenate(values))


def test_join_along_an_inner_axis(tmp_path: Path) -> None:
    values = [np.arange(4 * n, dtype="i2").reshape(4, n) - 50 * i for i, n in enumerate((5, 9, 3))]
    paths = []
    for i, x in enumerate(values):
        paths.append(str(tmp_path / f"s{i}"))
        rectizarr.create_array(paths[-1], data=x, chunks=(3, 4), fill_value=-1)
    refs = virtual.concat(paths, axis=1, side_store="inline")
    assert _edges(refs) == [3, [4, 1, [4, 2], 1, 4]]
    expected = np.concatenate(values, axis=1)
    assert np.array_equal(_open(refs)[...], expected)
    assert np.array_equal(_zarr_read(refs), expected)


def test_missing_chunks_read_as_fill_and_get_no_reference(tmp_path: Path) -> None:
    a = rectizarr.create_array(tmp_path / "a", shape=(10, 4), dtype="i4", chunks=(4, 4), fill_value=-7)
    a[0:4] = 1  # chunks 1 and 2 never written
    b = rectizarr.create_array(tmp_path / "b", shape=(6, 4), dtype="i4", chunks=(4, 4), fill_value=-7)
    b[4:6] = 2
    refs = virtual.concat([str(tmp_path / "a"), str(tmp_path / "b")], side_store="inline")
    assert sorted(k for k in refs["refs"] if k != "zarr.json") == ["c/0/0", "c/4/0"]
    expected = np.concatenate([a[...], b[...]])
    assert np.array_equal(_open(refs)[...], expected)
    assert np.array_equal(_zarr_read(refs), expected)


def test_sharded_sources_reference_each_inner_chunk(tmp_path: Path) -> None:
    paths, values = _months(tmp_path, chunks=(7, 5, 3), shards=(14, 5, 3))
    counted = [rectizarr.open_array(CountingStore(open_store(p)), mode="r") for p in paths]
    for a in counted:
        a.store.reset()
    result = virtual.build(counted, 0, side_store=tmp_path / "side")
    # metadata only: the shard indexes (3, 2 and 3 shards of 14 days, each a suffix read), no listing;
    # and one edge chunk read back to be rewritten (the first month's 3-day week)
    index_reads = [r for a in counted for r in a.store.requests if r[1] == (-(16 * 2 + 4), None)]
    assert len(index_reads) == 3 + 2 + 3 and sum(a.store.lists for a in counted) == 0
    assert [k for k, _ in counted[0].store.requests[3:]] == ["c/2/0/0"]  # (its shard holds only that chunk)
    assert [len(a.store.requests) for a in counted[1:]] == [2, 3]
    assert result.rewritten == 1
    doc = json.loads(result.refs["refs"]["zarr.json"])
    assert [c["name"] for c in doc["codecs"]] == ["bytes", "zstd"]  # the inner chain, unsharded
    ref = result.refs["refs"]["c/5/0/0"]  # month 2, week 1: inner chunk (0, 0, 0) of its first shard
    assert ref[0] == os.path.join(paths[1], "c", "0", "0", "0") and len(ref) == 3
    expected = np.concatenate(values)
    assert np.array_equal(_open(result.refs)[...], expected)
    assert np.array_equal(_zarr_read(result.refs), expected)


def test_v2_sources(tmp_path: Path) -> None:
    values = [np.arange(n * 4, dtype=">i4").reshape(n, 4) for n in (10, 7)]
    paths = []
    for i, x in enumerate(values):
        paths.append(str(tmp_path / f"v{i}"))
        rectizarr.create_array(
            paths[-1],
            data=x,
            chunks=(3, 4),
            zarr_format=2,
            fill_value=0,
            chunk_key_encoding={"name": "v2", "separator": "/" if i else "."},
        )
    result = virtual.build(paths, 0, side_store=tmp_path / "side")
    assert result.rewritten == 1  # 10 = 3 + 3 + 3 + 1
    assert result.refs["refs"]["c/1/0"] == [os.path.join(paths[0], "1.0")]
    assert result.refs["refs"]["c/5/0"] == [os.path.join(paths[1], "1", "0")]
    doc = json.loads(result.refs["refs"]["zarr.json"])
    assert doc["zarr_format"] == 3 and doc["codecs"][0] == {
        "name": "bytes",
        "configuration": {"endian": "big"},
    }
    expected = np.concatenate(values)
    assert np.array_equal(_open(result.refs)[...], expected)
    assert np.array_equal(_zarr_read(result.refs), expected)


def test_kerchunk_references_to_hdf5_files(tmp_path: Path) -> None:
    import h5py
    from kerchunk.hdf import SingleHdf5ToZarr

    sources, values = [], []
    for i, n in enumerate(MONTHS):
        x = np.random.default_rng(i).random((n, 6)).astype("f8")
        path = str(tmp_path / f"m{i}.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("t", data=x, chunks=(7, 3), compression="gzip", shuffle=True)
        refs = SingleHdf5ToZarr(path, inline_threshold=0).translate()
        # the dataset as a root array: its keys without the "t/" prefix
        sources.append(
            {"version": 1, "refs": {k[2:]: v for k, v in refs["refs"].items() if k.startswith("t/")}}
        )
        values.append(x)
    result = virtual.build(sources, 0, side_store=tmp_path / "side")
    assert result.rewritten == 2  # the first month's 3-day week, both column chunks
    doc = json.loads(result.refs["refs"]["zarr.json"])
    assert [c["name"] for c in doc["codecs"]] == ["bytes", "numcodecs.shuffle", "numcodecs.zlib"]
    ref = result.refs["refs"]["c/5/1"]
    assert ref[0] == str(tmp_path / "m1.h5") and len(ref) == 3  # a byte range of the HDF5 file
    expected = np.concatenate(values)
    assert np.array_equal(_open(result.refs)[...], expected)
    assert np.array_equal(_zarr_read(result.refs), expected)
    with h5py.File(tmp_path / "m2.h5") as f:
        assert np.array_equal(_open(result.refs)[59:], f["t"][...])


def test_parquet_reference_sets_are_read_and_the_result_is_json(tmp_path: Path) -> None:
    import h5py
    from kerchunk.df import refs_to_dataframe
    from kerchunk.hdf import SingleHdf5ToZarr

    sources, values = [], []
    for i, n in enumerate((10, 6)):
        x = np.arange(n * 4, dtype="f4").reshape(n, 4) + 100 * i
        with h5py.File(tmp_path / f"h{i}.h5", "w") as f:
            f.create_dataset("t", data=x, chunks=(4, 4), compression="gzip")
        refs = SingleHdf5ToZarr(str(tmp_path / f"h{i}.h5"), inline_threshold=0).translate()
        refs_to_dataframe(refs, str(tmp_path / f"r{i}.parq"))  # kerchunk's Parquet form (Zarr v2)
        sources.append(str(tmp_path / f"r{i}.parq"))
        values.append(x)
    # a group of HDF5 datasets: h5py's dimension names (phony_dim_0) name the axis
    result = virtual.build(sources, "phony_dim_0", side_store="inline")
    assert result.joined == ("t",) and result.rewritten == 1
    g = rectizarr.open_group(result.refs, mode="r")
    assert np.array_equal(g["t"][...], np.concatenate(values))
    with pytest.raises(rectizarr.UnsupportedError, match="write it as JSON"):
        virtual.write_refs(result.refs, tmp_path / "v.parq")
    # a Zarr v2 reference set round-trips through Parquet
    back = virtual.load_refs(sources[0])
    virtual.write_refs(back, tmp_path / "again.parq")
    again = virtual.load_refs(tmp_path / "again.parq")
    assert sorted(again["refs"]) == sorted(back["refs"])
    assert [list(map(str, again["refs"][k])) for k in sorted(back["refs"]) if k.startswith("t/0")] == [
        list(map(str, back["refs"][k])) for k in sorted(back["refs"]) if k.startswith("t/0")
    ]


def test_reference_set_templates_and_version_0(tmp_path: Path) -> None:
    paths, values = _months(tmp_path, (14, 7))
    doc = (Path(paths[0]) / "zarr.json").read_text()
    templated = {
        "version": 1,
        "templates": {"u": paths[0]},
        "refs": {
            "zarr.json": doc,
            "c/0/0/0": ["{{u}}/c/0/0/0"],
            "c/1/0/0": ["{{ u }}/c/1/0/0"],
            "c/0/0/1": [f"{paths[0]}/c/0/0/1"],
            "c/1/0/1": [f"{paths[0]}/c/1/0/1"],
        },
    }
    version0 = {
        "zarr.json": (Path(paths[1]) / "zarr.json").read_text(),
        "c/0/0/0": [f"{paths[1]}/c/0/0/0"],
        "c/0/0/1": [f"{paths[1]}/c/0/0/1"],
    }
    refs = virtual.concat([templated, version0])
    assert refs["refs"]["c/1/0/0"] == [f"{paths[0]}/c/1/0/0"] and refs["refs"]["c/2/0/1"] == [
        f"{paths[1]}/c/0/0/1"
    ]
    assert np.array_equal(_open(refs)[...], np.concatenate(values))
    bad = {**templated, "refs": {**templated["refs"], "c/1/0/0": {"not": "a target"}}}
    with pytest.raises(UnreferenceableError) as info:
        virtual.concat([bad, version0])
    assert info.value.field == "refs" and "c/1/0/0" in str(info.value)


def test_inline_chunks_of_a_reference_set_stay_inline(tmp_path: Path) -> None:
    a = rectizarr.create_array(
        tmp_path / "a", shape=(4, 2), dtype="u1", chunks=(2, 2), compressors=None, fill_value=0
    )
    a[...] = np.arange(8).reshape(4, 2)
    src = {
        "version": 1,
        "refs": {
            "zarr.json": (tmp_path / "a" / "zarr.json").read_text(),
            "c/0/0": "base64:AAECAw==",
            "c/1/0": [str(tmp_path / "a" / "c" / "1" / "0")],
        },
    }
    refs = virtual.concat([src, str(tmp_path / "a")])
    assert refs["refs"]["c/0/0"] == "base64:AAECAw=="
    assert np.array_equal(_open(refs)[...], np.concatenate([a[...], a[...]]))


# ------------------------------------------------------------------------------------------- refusals


def _pair(tmp_path: Path, **second: Any) -> list[str]:
    first = dict(shape=(10, 4), dtype="i4", chunks=(5, 2), fill_value=0)
    out = []
    for name, kw in (("a", first), ("b", {**first, **second})):
        rectizarr.create_array(tmp_path / name, **kw)[...] = 1
        out.append(str(tmp_path / name))
    return out


@pytest.mark.parametrize(
    ("second", "field"),
    [
        ({"dtype": "i8"}, "data_type"),
        ({"fill_value": 3}, "fill_value"),
        ({"compressors": {"name": "gzip", "configuration": {"level": 1}}}, "codecs"),
        ({"shape": (10, 5)}, "shape"),
        ({"shape": (10, 4, 1), "chunks": (5, 2, 1)}, "shape"),
        ({"chunks": (5, 4)}, "chunk_grid"),
    ],
)
def test_mismatches_are_refused_naming_source_and_field(
    tmp_path: Path, second: dict[str, Any], field: str
) -> None:
    paths = _pair(tmp_path, **second)
    with pytest.raises(SourceMismatchError) as info:
        virtual.concat(paths, side_store=tmp_path / "side")
    assert info.value.field == field and info.value.source is not None and paths[1] in info.value.source
    assert isinstance(info.value, rectizarr.RectizarrError) and isinstance(info.value, ValueError)
    assert not (tmp_path / "side").exists()  # nothing written


def test_edge_chunks_without_a_side_store_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    paths, _ = _months(tmp_path)
    with pytest.raises(UnreferenceableError) as info:
        virtual.concat(paths)
    assert info.value.field == "side_store" and "2 edge chunk(s)" in str(info.value)


def test_unreferenceable_sources_are_refused(tmp_path: Path) -> None:
    mem = rectizarr.create_array(rectizarr.MemoryStore(), shape=(4,), dtype="u1", chunks=(2,))
    with pytest.raises(UnreferenceableError) as info:
        virtual.concat([mem, mem])
    assert info.value.field == "store"
    # a whole-shard compressor: inner chunks are not byte ranges of the stored value
    codecs = [
        {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [2],
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "index_codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "crc32c"},
                ],
            },
        },
        {"name": "gzip", "configuration": {"level": 1}},
    ]
    s = rectizarr.create_array(tmp_path / "s", shape=(4,), dtype="u1", chunks=(4,), codecs=codecs)
    with pytest.raises(UnreferenceableError) as info:
        virtual.concat([s, s])
    assert info.value.field == "codecs"
    # a reference set whose chunk key does not map to its array's chunk key encoding
    a = rectizarr.create_array(tmp_path / "a", shape=(4,), dtype="u1", chunks=(2,))
    refs = {"version": 1, "refs": {"zarr.json": (tmp_path / "a" / "zarr.json").read_text(), "c.0": ["/x"]}}
    with pytest.raises(UnreferenceableError) as info:
        virtual.concat([refs, a])
    assert info.value.field == "chunk_key_encoding" and "#0" in str(info.value)
    with pytest.raises(UnreferenceableError) as info:
        virtual.concat([{"version": 1, "refs": {}, "gen": [{"key": "c/{{i}}"}]}, a])
    assert info.value.field == "gen"


def test_calls_that_cannot_be_planned_are_refused(tmp_path: Path) -> None:
    paths = _pair(tmp_path)
    with pytest.raises(ConcatError) as info:
        virtual.concat(paths, axis=2)
    assert info.value.field == "axis"
    with pytest.raises(ConcatError):
        virtual.concat([])
    rectizarr.open_group(tmp_path / "g", mode="w")
    with pytest.raises(SourceMismatchError) as info:
        virtual.concat([paths[0], str(tmp_path / "g")])
    assert info.value.field == "node_type"


# ----------------------------------------------------------------------------------------------- remote


def test_http_sources(tmp_path: Path, http_server: Any) -> None:
    paths, values = _months(tmp_path)
    urls = [http_server.serve(p) for p in paths]
    # (edge chunks inline: a reference set's targets are best on one protocol, which fsspec reads without
    # being told each protocol's filesystem)
    result = virtual.build(urls, 0, side_store="inline")
    assert result.refs["refs"]["c/5/0/0"] == [f"{urls[1]}/c/0/0/0"]
    assert result.refs["refs"]["c/4/0/0"].startswith("base64:")
    expected = np.concatenate(values)
    assert np.array_equal(_open(result.refs)[...], expected)
    # zarr-python reads asynchronously: the HTTP filesystem it is given must be an asynchronous one (fsspec
    # would otherwise hand back the synchronous instance rectizarr's read above made and cached)
    remote = {
        "remote_protocol": "http",
        "remote_options": {"asynchronous": True, "skip_instance_cache": True},
    }
    assert np.array_equal(_zarr_read(result.refs, **remote), expected)
    # an HTTP server lists nothing: each chunk of the grid is probed with a one-byte read (batched)
    counted = [CountingStore(FsspecStore(u)) for u in urls]
    virtual.build(counted, 0, side_store="inline")
    probes = [sorted(k for k, r in c.requests if r == (0, 1)) for c in counted]
    assert probes[1] == [f"c/{i}/0/{j}" for i in range(4) for j in range(2)] and counted[1].lists == 0
    assert [len(c.requests) for c in counted] == [1 + 10 + 2, 1 + 8, 1 + 10]  # + document (+ edge row read)


@pytest.mark.parametrize("backend", ["obstore", "fsspec"])
def test_s3_urls_as_sources(
    tmp_path: Path, backend: str, s3_months: tuple[list[str], list[np.ndarray], dict[str, Any]]
) -> None:
    paths, values, options = s3_months
    sources = [open_store(p, mode="r", backend=backend, storage_options=options) for p in paths]
    result = virtual.build(sources, 0, side_store="inline")
    assert result.refs["refs"]["c/5/0"] == [f"{paths[1]}/c/0/0"]
    remote = {"remote_protocol": "s3", "remote_options": options}
    assert np.array_equal(_open(result.refs, **remote)[...], np.concatenate(values))


@pytest.fixture
def s3_months(tmp_path: Path, s3_server: Any) -> tuple[list[str], list[np.ndarray], dict[str, Any]]:
    options = s3_server.storage_options()
    bucket = s3_server.new_bucket(s3_server.filesystem())
    paths, values = [], []
    for i, n in enumerate(MONTHS):
        x = np.arange(n * 6, dtype="u2").reshape(n, 6) + i
        url = f"s3://{bucket}/m{i}"
        rectizarr.create_array(url, data=x, chunks=(7, 3), storage_options=options, fill_value=0)
        paths.append(url)
        values.append(x)
    return paths, values, options


def test_s3_sources_read_metadata_only_and_reads_cost_what_direct_reads_cost(
    tmp_path: Path, s3_server: Any, s3_months: tuple[list[str], list[np.ndarray], dict[str, Any]]
) -> None:
    paths, values, options = s3_months
    sources = [
        rectizarr.open_array(CountingStore(FsspecStore(p, storage_options=options)), mode="r") for p in paths
    ]
    for a in sources:
        a.store.reset()
    side = paths[0].rsplit("/", 1)[0] + "/side"
    result = virtual.build(sources, 0, side_store=side, side_options=options)
    assert result.refs["refs"]["c/4/0"][0].startswith(side + "/edges/")
    # one listing per source, and the one edge chunk row rewritten (2 chunks of the first month read back)
    assert [a.store.lists for a in sources] == [1, 1, 1]
    assert [len(a.store.requests) for a in sources] == [2, 0, 0]
    expected = np.concatenate(values)
    # (s3fs asks for the size of a whole object before a GET (a HEAD) unless max_concurrency is 1)
    ref_options = {"remote_protocol": "s3", "remote_options": {**options, "max_concurrency": 1}}
    v = _open(result.refs, **ref_options)
    assert np.array_equal(v[...], expected)
    # a window over the join of months 1 and 2: the same GETs as reading the two sources directly
    s3_server.reset_counts()
    assert np.array_equal(v[50:66, 1:4], expected[50:66, 1:4])
    virtual_gets = s3_server.counts()["total"]
    direct = [rectizarr.open_array(p, mode="r", storage_options=options) for p in paths[1:]]
    s3_server.reset_counts()
    assert np.array_equal(
        np.concatenate([direct[0][50 - 31 :], direct[1][: 66 - 59]])[:, 1:4], expected[50:66, 1:4]
    )
    assert virtual_gets == s3_server.counts()["total"] == 3 * 2


# --------------------------------------------------------------------------------------- groups, xarray


def _dataset(i: int, start: Any, n: int, orog: float = 0.0) -> Any:
    import pandas as pd
    import xarray as xr

    t = pd.date_range(start, periods=n, freq="D")
    ds = xr.Dataset(
        {
            "tas": (("time", "lat", "lon"), np.random.default_rng(i).random((n, 3, 4)).astype("f4")),
            "orog": (("lat", "lon"), np.arange(12.0).reshape(3, 4) + orog),
        },
        coords={"time": t, "lat": [1.0, 2.0, 3.0], "lon": [10.0, 20.0, 30.0, 40.0]},
    )
    ds["tas"].encoding["chunks"] = (7, 3, 4)
    # one time encoding for every file: a joined array's attributes (its units) must be the same everywhere
    ds["time"].encoding.update(chunks=(7,), units="days since 2000-01-01", dtype="int32")
    return ds


def _datasets(root: Path, lengths: tuple[int, ...] = (31, 29, 31)) -> tuple[list[str], list[Any]]:
    import pandas as pd

    from rectizarr.xarray import to_rectizarr

    start = pd.Timestamp("2024-01-01")
    paths, dss = [], []
    for i, n in enumerate(lengths):
        ds = _dataset(i, start, n)
        start += pd.Timedelta(days=n)
        paths.append(str(root / f"m{i}.zarr"))
        to_rectizarr(ds, paths[-1], mode="w")
        dss.append(ds)
    return paths, dss


def test_xarray_datasets_join_along_time(tmp_path: Path) -> None:
    import xarray as xr

    paths, dss = _datasets(tmp_path)
    result = virtual.build(paths, "time", side_store=tmp_path / "side")
    assert (
        result.joined == ("tas", "time") and result.rewritten == 4
    )  # Jan's and Feb's last weeks, both arrays
    root = json.loads(result.refs["refs"]["zarr.json"])
    assert sorted(root["consolidated_metadata"]["metadata"]) == ["lat", "lon", "orog", "tas", "time"]
    assert _edges(result.refs, "tas") == [[[7, 4], 3, [7, 4], 1, [7, 5]], 3, 4]
    expected = xr.concat(dss, "time", data_vars="minimal")
    out = tmp_path / "v.json"
    virtual.write_refs(result.refs, out)
    for source in (result.refs, str(out)):
        xr.testing.assert_identical(xr.open_dataset(source, engine="rectizarr").load(), expected)
    zarr = zarr_python()
    with zarr.config.set({"array.rectilinear_chunks": True}):
        ds = xr.open_dataset(
            "reference://",
            engine="zarr",
            storage_options={"fo": result.refs},
            consolidated=True,
            zarr_format=3,
        )
        xr.testing.assert_identical(ds.load(), expected)


def test_appending_a_month_to_a_virtual_dataset(tmp_path: Path) -> None:
    import xarray as xr

    paths, dss = _datasets(tmp_path, (31, 29, 31, 30))
    out = tmp_path / "v.json"
    virtual.write_refs(virtual.concat(paths[:2], "time", side_store=tmp_path / "side"), out)
    for p in paths[2:]:
        result = virtual.append(out, [p], "time", side_store=tmp_path / "side")
        assert result.rewritten == 2  # the previous end's overhanging week (tas and time)
    expected = xr.concat(dss, "time", data_vars="minimal")
    xr.testing.assert_identical(xr.open_dataset(out, engine="rectizarr").load(), expected)


def test_group_refusals(tmp_path: Path) -> None:
    import pandas as pd

    from rectizarr.xarray import to_rectizarr

    paths, _ = _datasets(tmp_path, (7, 7))
    with pytest.raises(ConcatError) as info:
        virtual.concat(paths, 0)
    assert info.value.field == "axis"
    # an array without the axis must be the same in every source
    other = _dataset(5, pd.Timestamp("2024-01-15"), 7, orog=1.0)
    to_rectizarr(other, tmp_path / "o.zarr", mode="w")
    with pytest.raises(SourceMismatchError) as info:
        virtual.concat([paths[0], str(tmp_path / "o.zarr")], "time")
    assert info.value.field == "values" and "'orog'" in str(info.value)
    # a joined array's attributes (a time encoding with other units) must be the same too
    other = _dataset(5, pd.Timestamp("2024-01-15"), 7)
    other["time"].encoding["units"] = "days since 2024-01-01"
    to_rectizarr(other, tmp_path / "u.zarr", mode="w")
    with pytest.raises(SourceMismatchError) as info:
        virtual.concat([paths[0], str(tmp_path / "u.zarr")], "time")
    assert info.value.field == "attributes" and "units" in str(info.value)
    # the same members in every source
    to_rectizarr(other.drop_vars("orog"), tmp_path / "d.zarr", mode="w")
    with pytest.raises(SourceMismatchError) as info:
        virtual.concat([paths[0], str(tmp_path / "d.zarr")], "time")
    assert info.value.field == "members" and "orog" in str(info.value)


# ------------------------------------------------------------------------------------------ request counts


def _counting(paths: list[str]) -> list[CountingStore]:
    return [CountingStore(open_store(p, mode="r")) for p in paths]


def test_365_daily_files(tmp_path: Path) -> None:
    stores, days = [], []
    for d in range(365):
        day = np.full((1, 4, 6), d, dtype="i2")
        rectizarr.create_array(tmp_path / f"d{d:03d}", data=day, chunks=(1, 2, 3), fill_value=-1)
        stores.append(CountingStore(open_store(str(tmp_path / f"d{d:03d}"), mode="r")))
        days.append(day)
    result = virtual.build(stores, 0)
    # one document and one listing per file, nothing else (and the stat a local open makes of zarr.json)
    assert sum(len(s.requests) for s in stores) == 365 and sum(s.lists for s in stores) == 365
    assert {k for s in stores for k, _ in s.requests} == {"zarr.json"} and result.rewritten == 0
    assert len(result.refs["refs"]) == 1 + 365 * 4
    a = _open(result.refs)
    assert a.shape == (365, 4, 6) and a.read_chunk_sizes[0] == (1,) * 365
    assert np.array_equal(a[100:200:7, 1:3], np.concatenate(days)[100:200:7, 1:3])


def test_requests_per_source_are_metadata_only(tmp_path: Path) -> None:
    # chunked v3: one document and one listing per source; chunks neither read nor stat'ed (the one info
    # is the stat of zarr.json a local store's open makes: its version, which caches are keyed on)
    paths, _ = _months(tmp_path / "v3", (28, 14, 21))  # (multiples of 7: nothing to rewrite)
    stores = _counting(paths)
    virtual.build(stores, 0)
    assert [(s.requests, s.lists, s.infos) for s in stores] == [([("zarr.json", None)], 1, 1)] * 3
    # sharded: one document and each shard's index (a suffix read), no listing
    paths, _ = _months(tmp_path / "sh", (28, 14), chunks=(7, 5, 3), shards=(14, 5, 3))
    stores = _counting(paths)
    virtual.build(stores, 0)
    index = (-(16 * 2 + 4), None)
    assert [(s.requests, s.lists) for s in stores] == [
        ([("zarr.json", None), ("c/0/0/0", index), ("c/1/0/0", index)], 0),
        ([("zarr.json", None), ("c/0/0/0", index)], 0),
    ]
    # Zarr v2: its documents (zarr.json is looked for first), one listing
    x = np.arange(28, dtype="i2").reshape(14, 2)
    v2 = [str(tmp_path / f"v2_{i}") for i in range(2)]
    for p in v2:
        rectizarr.create_array(p, data=x, chunks=(7, 2), zarr_format=2)
    stores = _counting(v2)
    virtual.build(stores, 0)
    assert [(sorted(k for k, _ in s.requests), s.lists) for s in stores] == [
        ([".zarray", ".zattrs", ".zgroup", ".zmetadata", "zarr.json"], 1)
    ] * 2
    # a reference set: its one file, nothing of the files it points to (here gone)
    refs = tmp_path / "r.json"
    virtual.write_refs(virtual.concat(paths, 0), refs)
    shutil.rmtree(tmp_path / "sh")
    result = virtual.build([str(refs), str(refs)], 0)
    assert len(result.refs["refs"]) == 1 + 2 * 6


def test_xarray_v2_datasets_with_strings_and_scalars(tmp_path: Path) -> None:
    import pandas as pd
    import xarray as xr

    from rectizarr.xarray import to_rectizarr

    dss, paths = [], []
    start = pd.Timestamp("2024-01-01")
    for i, n in enumerate((5, 4)):
        t = pd.date_range(start, periods=n, freq="D")
        start += pd.Timedelta(days=n)
        ds = xr.Dataset(
            {
                "tas": (("time", "x"), np.random.default_rng(i).random((n, 3))),
                "crs": ((), np.int32(4326)),
                "station": (("x",), np.array(["a", "bb", "ccc"], dtype=object)),
                "flag": (("time",), np.array([f"f{i}{j}" for j in range(n)], dtype=object)),
            },
            coords={"time": t},
        )
        ds["tas"].encoding["chunks"] = (2, 3)
        ds["flag"].encoding["chunks"] = (2,)
        ds["time"].encoding.update(chunks=(2,), units="days since 2000-01-01", dtype="int32")
        paths.append(str(tmp_path / f"m{i}.zarr"))
        to_rectizarr(ds, paths[-1], mode="w", zarr_format=2)
        dss.append(ds)
    result = virtual.build(paths, "time", side_store="inline")
    assert result.joined == ("flag", "tas", "time") and result.rewritten == 3  # 5 = 2 + 2 + 1, each array
    doc = json.loads(result.refs["refs"]["flag/zarr.json"])
    assert doc["zarr_format"] == 3 and doc["codecs"][0]["name"] == "vlen-utf8"
    expected = xr.concat(dss, "time", data_vars="minimal")
    xr.testing.assert_identical(xr.open_dataset(result.refs, engine="rectizarr").load(), expected)


def test_nested_groups_keep_their_attributes_and_read_in_zarr_python(tmp_path: Path) -> None:
    values, paths = [], []
    for i, n in enumerate((5, 3)):
        paths.append(str(tmp_path / f"g{i}"))
        g = rectizarr.open_group(paths[-1], mode="w", attributes={"title": "x"})
        x = np.arange(n * 2, dtype="i4").reshape(n, 2) + 10 * i
        g.create_group("sub", attributes={"k": 1}).create_array(
            "a", shape=(n, 2), dtype="i4", chunks=(2, 2), dimension_names=["t", "y"]
        )[...] = x
        g.create_array("const", shape=(2,), dtype="f8", chunks=(2,), dimension_names=["y"])[...] = [1.5, 2.5]
        values.append(x)
    result = virtual.build(paths, "t", side_store="inline")
    assert result.joined == ("sub/a",) and result.rewritten == 1
    assert sorted(k for k in result.refs["refs"] if k.endswith("zarr.json")) == [
        "const/zarr.json",
        "sub/a/zarr.json",
        "sub/zarr.json",
        "zarr.json",
    ]
    g = rectizarr.open_group(result.refs, mode="r")
    assert (g.attrs.asdict(), g["sub"].attrs.asdict()) == ({"title": "x"}, {"k": 1})
    assert np.array_equal(g["sub/a"][...], np.concatenate(values)) and g["const"][...].tolist() == [1.5, 2.5]
    zarr = zarr_python()
    with zarr.config.set({"array.rectilinear_chunks": True}):
        zg = zarr.open_group("reference://", mode="r", storage_options={"fo": result.refs})
        assert np.array_equal(zg["sub/a"][...], np.concatenate(values))
