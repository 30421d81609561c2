"""``rectizarr migrate``: every v2 corpus case migrated to v3 (to a new root and in place) reads the same
values with rectizarr, zarr-python and tensorstore; chunk bytes are reused where the codecs map; --dry-run
changes nothing; --chunks rechunks to a rectilinear grid; an interrupted run leaves the source untouched."""

from __future__ import annotations

import json
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.cli import main
from rectizarr.cli.migrate import MigrateOptions, migrate
from tests.conformance.corpus import expected_v2, same_v2, v2_cases
from tests.refs import tensorstore, zarr_python


def _no_v3_type(case: Any) -> bool:
    name = rectizarr.open_array(
        case.store, path=case.arrays[0]["path"] or None, mode="r"
    ).metadata.data_type.name
    return name == "object" or name.startswith("v2:")


CASES = v2_cases()
USABLE = [c for c in CASES if not c.info.get("needs")]
MIGRATABLE = [c for c in USABLE if not _no_v3_type(c)]
NO_V3 = [c for c in USABLE if _no_v3_type(c)]
_ZP_TYPES = ("int2", "int4", "uint2", "uint4", "bfloat16", "float8")  # zarr-python 3.4.2 has no such types
_TS_CODECS = {"bytes", "transpose", "blosc", "gzip", "zstd", "crc32c"}


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _peers_read(path: Path, node: str, want: np.ndarray, what: str) -> None:
    doc = json.loads((path / node / "zarr.json").read_text())
    dtype = json.dumps(doc["data_type"])
    if not any(t in dtype for t in _ZP_TYPES) and not re.fullmatch(r'"r[0-9]+"', dtype):  # nor r<N>
        zarr = zarr_python()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = zarr.open_array(str(path / node), mode="r")[...]
        same_v2(
            np.asarray(got).astype(object) if np.asarray(got).dtype.kind == "T" else got, want, f"zarr {what}"
        )
    names = {c["name"] for c in doc["codecs"]}
    if names <= _TS_CODECS and want.dtype.kind in "biufc" and want.dtype.fields is None:
        ts = tensorstore()
        t = ts.open(
            {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path / node)}}, open=True
        ).result()
        same_v2(t.read().result(), want, f"tensorstore {what}")


@pytest.mark.parametrize("case", MIGRATABLE, ids=lambda c: c.id)
def test_migrate_to_a_new_root(case: Any, tmp_path: Path) -> None:
    before = _snapshot(case.store)
    src = rectizarr.open(case.store, mode="r")
    steps = migrate(src, rectizarr.LocalStore(tmp_path / "v3.zarr"), "", MigrateOptions())
    assert _snapshot(case.store) == before
    for entry in case.arrays:
        arr = rectizarr.open_array(tmp_path / "v3.zarr", path=entry["path"] or None, mode="r")
        assert arr.metadata.zarr_format == 3
        want = expected_v2(case, entry["expected"])
        same_v2(arr[...], want, f"{case.id} v3")
        attrs = arr.attrs.asdict()
        if entry["dimension_names"] is not None and "_FillValue" not in entry["attributes"]:
            attrs.pop("_FillValue", None)  # xarray's v2 fill value, as its v3 attribute (see below)
        assert attrs == entry["attributes"]
        names = entry["dimension_names"]
        assert arr.dimension_names == (tuple(names) if names is not None else None)
        _peers_read(tmp_path / "v3.zarr", entry["path"], want, case.id)
    step = next(s for s in steps if s.path == case.arrays[0]["path"])
    if step.kind == "reuse":  # the chunks are the v2 chunks, byte for byte
        node = case.arrays[0]["path"]
        v2 = {
            k: v for k, v in _snapshot(case.store / node).items() if not k.rpartition("/")[2].startswith(".")
        }
        v3 = {k: v for k, v in _snapshot(tmp_path / "v3.zarr" / node).items() if k != "zarr.json"}
        assert v2 == v3
    assert rectizarr.validate(tmp_path / "v3.zarr").ok


def test_common_codecs_are_reused() -> None:
    plans = {
        c.id: [
            s
            for s in rectizarr.cli.migrate.plan_migration(rectizarr.open(c.store, mode="r"), MigrateOptions())
            if s.kind != "group"
        ]
        for c in MIGRATABLE
    }
    kinds = {cid: {s.kind for s in steps} for cid, steps in plans.items()}
    for cid in (
        "zarr-python-2/compressor_zlib",
        "zarr-python-2/order_f_2d",
        "zarr-python-2/filter_delta",
        "zarr-python-2/object_vlen_utf8",
        "zarr-python-2/dtype_gtf8",
        "zarr-python-2/hierarchy",
        "tensorstore/dtype_int4",
        "zarr-python-3/string",
    ):
        assert kinds[cid] == {"reuse"}, cid
    for cid in (
        "zarr-python-2/filter_delta_big_endian",
        "zarr-python-2/order_f_3d_filters",
        "zarr-python-2/dtype_structured_big",
    ):
        assert kinds[cid] == {"reencode"}, cid


def test_migrate_in_place(tmp_path: Path) -> None:
    src = next(c for c in CASES if c.id == "zarr-python-2/hierarchy_consolidated").store
    shutil.copytree(src, tmp_path / "h.zarr")
    assert main(["migrate", str(tmp_path / "h.zarr")]) == 0
    files = _snapshot(tmp_path / "h.zarr")
    assert not any(k.rpartition("/")[2] in (".zarray", ".zgroup", ".zattrs", ".zmetadata") for k in files)
    root = rectizarr.open_group(tmp_path / "h.zarr", mode="r")
    assert root.metadata.zarr_format == 3 and root.metadata.consolidated_metadata is not None
    assert root["sub/count"].dimension_names == ("y", "x")
    same_v2(root["sub/count"][...], np.load(src.parent / "count.npy"), "in place")
    assert rectizarr.validate(tmp_path / "h.zarr").ok


def test_keep_v2_and_reencode_in_place(tmp_path: Path) -> None:
    src = next(c for c in CASES if c.id == "zarr-python-2/filter_delta_big_endian").store
    shutil.copytree(src, tmp_path / "d.zarr")
    want = rectizarr.open_array(src, mode="r")[...]
    assert main(["migrate", str(tmp_path / "d.zarr"), "--keep-v2"]) == 0
    assert (tmp_path / "d.zarr" / ".zarray").exists() and (tmp_path / "d.zarr" / "zarr.json").exists()
    same_v2(rectizarr.open_array(tmp_path / "d.zarr", mode="r", zarr_format=2)[...], want, "v2 kept")
    v3 = rectizarr.open_array(tmp_path / "d.zarr", mode="r")
    assert v3.metadata.zarr_format == 3 and v3.metadata.chunk_key_encoding.name == "default"
    same_v2(v3[...], want, "re-encoded")
    shutil.rmtree(tmp_path / "d.zarr")
    shutil.copytree(src, tmp_path / "d.zarr")
    assert main(["migrate", str(tmp_path / "d.zarr")]) == 0  # without --keep-v2: only the v3 array is left
    assert sorted(p.name for p in (tmp_path / "d.zarr").iterdir()) == ["c", "zarr.json"]
    same_v2(rectizarr.open_array(tmp_path / "d.zarr", mode="r")[...], want, "re-encoded, v2 dropped")


@pytest.mark.parametrize("case", NO_V3, ids=lambda c: c.id)
def test_arrays_without_a_v3_type_are_refused(case: Any, tmp_path: Path) -> None:
    with pytest.raises(rectizarr.UnsupportedError, match="no Zarr v3 data type"):
        migrate(
            rectizarr.open(case.store, mode="r"),
            rectizarr.LocalStore(tmp_path / "v3.zarr"),
            "",
            MigrateOptions(),
        )
    assert not (tmp_path / "v3.zarr").exists() or not any((tmp_path / "v3.zarr").iterdir())


def test_dry_run_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = next(c for c in CASES if c.id == "zarr-python-2/hierarchy").store
    shutil.copytree(src, tmp_path / "h.zarr")
    before = _snapshot(tmp_path / "h.zarr")
    assert main(["migrate", str(tmp_path / "h.zarr"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "array /sub/count: metadata only" in out and "group /sub/deeper" in out
    assert _snapshot(tmp_path / "h.zarr") == before


def test_rechunk_to_rectilinear(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == "zarr-python-2/dtype_lti4")
    assert main(["migrate", str(case.store), str(tmp_path / "r.zarr"), "--chunks", "[1,3,1],[4,3]"]) == 0
    arr = rectizarr.open_array(tmp_path / "r.zarr", mode="r")
    assert arr.grid.kind == "rectilinear" and arr.write_chunk_sizes == ((1, 3, 1), (4, 3))
    same_v2(arr[...], expected_v2(case, "expected.npy"), "rechunked")


def test_interrupted_in_place_run_leaves_the_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = next(c for c in CASES if c.id == "zarr-python-2/hierarchy").store
    shutil.copytree(src, tmp_path / "h.zarr")
    before = _snapshot(tmp_path / "h.zarr")
    calls = {"n": 0}
    real = rectizarr.Array.__setitem__

    def flaky(self: Any, sel: Any, value: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        real(self, sel, value)

    monkeypatch.setattr(rectizarr.Array, "__setitem__", flaky)
    assert main(["migrate", str(tmp_path / "h.zarr"), "--chunks", "2,2"]) == 130
    assert _snapshot(tmp_path / "h.zarr") == before
    assert rectizarr.open_group(tmp_path / "h.zarr", mode="r").metadata.zarr_format == 2


def test_refuses_v3_and_an_existing_destination(tmp_path: Path) -> None:
    rectizarr.create_array(tmp_path / "v3.zarr", shape=(2,), dtype="i4")
    assert main(["migrate", str(tmp_path / "v3.zarr")]) == 2
    case = next(c for c in CASES if c.id == "zarr-python-2/dtype_lti4")
    assert main(["migrate", str(case.store), str(tmp_path / "v3.zarr")]) == 2
    assert main(["migrate", str(case.store), str(tmp_path / "v3.zarr"), "--overwrite"]) == 0
    assert rectizarr.open_array(tmp_path / "v3.zarr", mode="r").shape == (5, 7)


def test_a_hierarchy_is_walked_as_stored_not_as_consolidated(tmp_path: Path) -> None:
    """zarr-python leaves ``.zmetadata`` as it was when members are added, grown or deleted afterwards.
    migrate, copy and diff walk the store's listing: the new member and the grown shape were left out of
    the v3 copy (exit 0), and a deleted member made migrate fail."""
    zarr = pytest.importorskip("zarr")
    src = str(tmp_path / "v2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = zarr.open_group(src, mode="w", zarr_format=2)
        g.create_array("a", shape=(4,), chunks=(2,), dtype="i4")[:] = [1, 2, 3, 4]
        g.create_group("gone")
        zarr.consolidate_metadata(src, zarr_format=2)
        g = zarr.open_group(src, mode="a", zarr_format=2, use_consolidated=False)
        g.create_array("b", shape=(3,), chunks=(2,), dtype="f8")[:] = [1.5, 2.5, 3.5]
        g["a"].append(np.array([5, 6], "i4"))
        del g["gone"]
    assert main(["migrate", src, str(tmp_path / "v3")]) == 0
    v3 = rectizarr.open_group(str(tmp_path / "v3"), mode="r", use_consolidated=False)
    assert v3.keys() == ["a", "b"] and v3["a"][...].tolist() == [1, 2, 3, 4, 5, 6]
    assert v3["b"][...].tolist() == [1.5, 2.5, 3.5]
    assert main(["copy", src, str(tmp_path / "copy")]) == 0
    assert rectizarr.open_group(str(tmp_path / "copy"), mode="r", use_consolidated=False).keys() == ["a", "b"]
    assert main(["diff", src, str(tmp_path / "v3")]) == 0
    with warnings.catch_warnings():  # every member deleted since: nothing listed, nothing migrated
        warnings.simplefilter("ignore")
        for name in ("a", "b"):
            del g[name]
    assert main(["migrate", src, str(tmp_path / "v3-empty")]) == 0
    assert rectizarr.open_group(str(tmp_path / "v3-empty"), mode="r").keys() == []


@pytest.mark.parametrize("command", ["migrate", "copy", "migrate --chunks 2"])
def test_xarrays_fill_value_stays_its_fill_value(tmp_path: Path, command: str) -> None:
    """xarray keeps a v2 variable's CF ``_FillValue`` in the ``.zarray`` ``fill_value`` and a v3 one's in a
    ``_FillValue`` attribute: migrated or copied without it, the values it masks came back as numbers
    (``[1, 7, 3]`` for ``[1, nan, 3]``), read by xarray or by rectizarr's xarray engine."""
    xr = pytest.importorskip("xarray")
    ds = xr.Dataset(
        {
            "p": (("t",), np.array([0.0, np.nan, 0.5])),
            "i": (("t",), np.array([1.0, np.nan, 3.0])),
            "f": (("t",), np.array([1.0, np.nan, 3.0], "f4")),
        }
    )
    enc = {"p": {"dtype": "i2", "scale_factor": 0.1, "_FillValue": -1}, "i": {"dtype": "i2", "_FillValue": 7}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(tmp_path / "v2.zarr", zarr_format=2, encoding=enc, consolidated=False)
    name, *more = command.split()
    assert main([name, str(tmp_path / "v2.zarr"), str(tmp_path / "v3.zarr"), *more]) == 0
    assert json.loads((tmp_path / "v3.zarr" / "i" / "zarr.json").read_text())["attributes"] == {
        "_FillValue": 7
    }
    for engine in ("zarr", "rectizarr"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = xr.open_dataset(tmp_path / "v3.zarr", engine=engine)
        for v in ("p", "i", "f"):
            np.testing.assert_allclose(got[v].values, ds[v].values, equal_nan=True, err_msg=f"{engine} {v}")
