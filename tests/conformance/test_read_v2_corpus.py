"""Read every stored Zarr v2 conformance case (``conformance_data/v2``: zarr-python 2.18, zarr-python 3 with
``zarr_format=2``, tensorstore's ``zarr`` driver) and compare bit-exactly with what the producer read back,
in full and through selections of every kind; hierarchies through listings, consolidated or not."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.errors import LenientMetadataWarning, UnsupportedError
from tests.conformance.corpus import (
    Case,
    apply_array,
    apply_numpy,
    expected_v2,
    same_v2,
    selections,
    v2_cases,
)

CASES = v2_cases()


def _open(case: Case, path: str) -> rectizarr.Array:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", LenientMetadataWarning)
        return rectizarr.open_array(case.store, path=path or None, mode="r")


def test_v2_corpus_is_present() -> None:
    assert {c.dir.parent.name for c in CASES} == {"zarr-python-2", "zarr-python-3", "tensorstore"}
    assert len(CASES) > 70


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_read_v2_case(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    if case.info.get("needs"):
        with pytest.raises(UnsupportedError, match=case.info["needs"]):
            _open(case, case.arrays[0]["path"])
        monkeypatch.setenv(case.info["needs"], "1")
    for entry in case.arrays:
        arr = _open(case, entry["path"])
        assert arr.metadata.zarr_format == 2
        want = expected_v2(case, entry["expected"])
        where = f"{case.id}:{entry['path'] or '/'}"
        same_v2(arr[...], want, f"{where} full read")
        for kind, sel in selections(arr.shape, case.id):
            same_v2(apply_array(arr, kind, sel), apply_numpy(want, kind, sel), f"{where} {kind}[{sel!r}]")
        assert arr.attrs.asdict() == entry["attributes"], where
        names = entry["dimension_names"]
        assert arr.dimension_names == (tuple(names) if names is not None else None), where


@pytest.mark.parametrize("case", [c for c in CASES if "groups" in c.info], ids=lambda c: c.id)
def test_read_v2_hierarchy(case: Case) -> None:
    consolidated = (case.store / ".zmetadata").exists()
    for entry in case.info["groups"]:
        for use in (None, False) if not consolidated else (True, False):
            g = rectizarr.open_group(case.store, path=entry["path"] or None, mode="r", use_consolidated=use)
            assert g.metadata.zarr_format == 2
            assert g.attrs.asdict() == entry["attributes"]
    root = rectizarr.open(case.store, mode="r")
    assert isinstance(root, rectizarr.Group)
    assert (root.metadata.consolidated_metadata is not None) == consolidated
    for entry in case.arrays:
        node = root[entry["path"]]
        assert isinstance(node, rectizarr.Array)
        same_v2(node[...], expected_v2(case, entry["expected"]), entry["path"])
        assert node.dimension_names == tuple(entry["dimension_names"])
    tree = root.tree()
    assert all(e["path"].rsplit("/", 1)[-1] in tree for e in case.arrays)


def test_format_is_forced(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == "zarr-python-2/dtype_lti4")
    with pytest.raises(rectizarr.NodeNotFoundError, match=r"zarr\.json"):
        rectizarr.open_array(case.store, mode="r", zarr_format=3)
    assert rectizarr.open_array(case.store, mode="r", zarr_format=2).shape == (5, 7)
    with pytest.raises(rectizarr.NodeNotFoundError, match=r"\.zarray"):
        rectizarr.open_array(tmp_path, mode="r", zarr_format=2)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_validate_v2_case(case: Case) -> None:
    report = rectizarr.validate(case.store)
    if case.info.get("needs"):
        assert [i.rule for i in report.errors] == ["codecs.invalid"]
        assert case.info["needs"] in report.errors[0].message
        return
    assert report.ok, report.format_text()
    assert report.nodes_checked == len(case.arrays) + len(case.info.get("groups", []))


def test_validate_v2_finds_problems(tmp_path: Path) -> None:
    import shutil

    src = next(c for c in CASES if c.id == "zarr-python-2/hierarchy_consolidated").store
    store = tmp_path / "h.zarr"
    shutil.copytree(src, store)
    (store / "temp" / "0.0").write_bytes(b"garbage")
    (store / "temp" / "9.9").write_bytes(b"x")
    (store / "sub" / ".zattrs").write_text('{"level": 2}')
    (store / "stray").write_text("x")
    report = rectizarr.validate(store)
    rules = sorted({i.rule for i in report.errors})
    assert rules == ["chunks.decode", "chunks.stray_key", "consolidated.stale", "hierarchy.stray_key"]
    assert any(i.key == "temp/0.0" for i in report.errors)


def test_dask_and_xarray_on_v2() -> None:
    import xarray as xr

    from rectizarr.integrations.dask import to_dask

    case = next(c for c in CASES if c.id == "zarr-python-2/hierarchy_consolidated")
    arr = rectizarr.open_array(case.store, path="sub/count", mode="r")
    want = expected_v2(case, "count.npy")
    same_v2(to_dask(arr).compute(scheduler="sync"), want, "dask")
    ds = xr.open_dataset(case.store, engine="rectizarr")
    assert ds["temp"].dims == ("y", "x") and ds["temp"].attrs == {"units": "m"}
    same_v2(ds["temp"].values, expected_v2(case, "temp.npy"), "xarray")
    sub = xr.open_dataset(case.store, engine="rectizarr", group="sub", mask_and_scale=False)
    same_v2(sub["count"].values, want, "xarray group")
    # a Zarr v2 fill value (0 here) is the CF _FillValue, as xarray's zarr engine reads it: the zeros
    # masked, the integers made floats
    masked = xr.open_dataset(case.store, engine="rectizarr", group="sub")["count"].values
    assert masked.dtype == np.float64 and np.array_equal(
        masked, np.where(want == 0, np.nan, want), equal_nan=True
    )


def test_hostile_vlen_count_is_refused_before_allocating(tmp_path: Path) -> None:
    import shutil
    import struct

    import numcodecs

    src = next(c for c in CASES if c.id == "zarr-python-2/object_vlen_bytes").store
    shutil.copytree(src, tmp_path / "b.zarr")
    (tmp_path / "b.zarr" / "0").write_bytes(
        numcodecs.Blosc("lz4", 5, 1).encode(struct.pack("<I", 2**31) + bytes(16))
    )
    arr = rectizarr.open_array(tmp_path / "b.zarr", mode="r")
    with pytest.raises(rectizarr.CodecError, match="declares 2147483648 items"):
        arr[...]
    assert arr[4:].tolist() == [b"ee", b"f"]


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"order": "X"}, "$.order"),
        ({"chunks": [0, 3]}, "$.chunks"),
        ({"dtype": "<q9"}, "$.dtype"),
        ({"dimension_separator": "-"}, "$.dimension_separator"),
        ({"fill_value": "zz"}, "$.fill_value"),
        ({"filters": [{"id": "no-such-codec"}]}, "$.codecs[0].configuration.filters[0]"),
        ({"compressor": {"id": "blosc", "cname": "lz4", "shuffle": 7}}, "$.compressor"),
        ({"zarr_format": 3}, "$.zarr_format"),
        ({"dtype": "|O"}, "$.filters"),
    ],
)
def test_bad_zarray_documents_name_key_and_path(change: dict[str, Any], path: str, tmp_path: Path) -> None:
    doc = {
        "shape": [4, 6],
        "chunks": [2, 3],
        "dtype": "<i4",
        "order": "C",
        "compressor": None,
        "filters": None,
        "fill_value": 0,
        "zarr_format": 2,
        **change,
    }
    (tmp_path / "a.zarr").mkdir()
    (tmp_path / "a.zarr" / ".zarray").write_text(json.dumps(doc))
    with pytest.raises(rectizarr.MetadataError) as info:
        rectizarr.open_array(tmp_path / "a.zarr", mode="r")
    assert info.value.key == ".zarray" and info.value.path == path, str(info.value)
