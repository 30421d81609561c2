"""Every ``rectizarr`` sub-command, in-process through ``main([...])`` and once as a real process."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rectizarr
from rectizarr.cli import main
from tests.refs import zarr_python

DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
MONTHLY = "[31,28,31,30,31,30,31x2,30,31,30,31],6,5"
INFO_KEYS = {
    "node_type",
    "path",
    "shape",
    "data_type",
    "fill_value",
    "chunk_grid",
    "codecs",
    "chunk_key_encoding",
    "dimension_names",
    "attributes",
    "nchunks",
    "stored_chunks",
    "stored_bytes",
    "nbytes",
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def _data() -> np.ndarray:
    data = np.random.default_rng(3).normal(size=(365, 6, 5)).astype("float32")
    data[5, 0, 0] = np.frombuffer(np.uint32(0x7FC00001).tobytes(), "float32")[0]  # a NaN payload
    data[6, 0, 0] = -0.0
    return data


@pytest.fixture
def daily(tmp_path: Path) -> str:
    path = str(tmp_path / "daily.zarr")
    a = rectizarr.create_array(
        path,
        shape=(365, 6, 5),
        dtype="float32",
        chunks=(1, 6, 5),
        fill_value=np.nan,
        dimension_names=["time", "y", "x"],
        attributes={"units": "K"},
    )
    a[:] = _data()
    return path


@pytest.fixture
def hierarchy(tmp_path: Path) -> str:
    path = str(tmp_path / "h.zarr")
    g = rectizarr.open_group(path, mode="w", attributes={"title": "t"})
    g.create_array("x", shape=(10,), dtype="i4", chunks=[[3, 7]])[:] = np.arange(10)
    sub = g.create_group("sub", attributes={"level": 1})
    sub.create_array("y", shape=(4, 5), dtype="f8", chunks=(2, 5))[:] = np.ones((4, 5))
    return path


# ------------------------------------------------------------------------------------------- info
def test_info_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = str(tmp_path / "m.zarr")
    a = rectizarr.create_array(
        path,
        shape=(365, 10),
        dtype="int16",
        shards=[DAYS, 10],
        chunks=(1, 5),
        dimension_names=["time", "station"],
        attributes={"a": 1},
    )
    a[:31] = 7
    status, out, err = run(capsys, "info", path)
    assert status == 0 and err == ""
    assert "array /" in out and "(365, 10)" in out and '"int16"' in out
    assert "rectilinear (sharded)" in out
    assert "time [31,28,31,30,31,30,31x2,30,31,30,31]" in out  # the copy --chunks syntax
    assert "time [1x365]; station [5x2]" in out  # read chunks: inner chunks
    assert "sharding_indexed" in out and "crc32c" in out
    assert "1 of 12 chunks" in out and "time, station" in out and '{"a": 1}' in out


def test_info_json_shape(capsys: pytest.CaptureFixture[str], daily: str, hierarchy: str) -> None:
    status, out, _ = run(capsys, "info", daily, "--json")
    doc = json.loads(out)
    assert status == 0 and set(doc) == INFO_KEYS
    assert doc["node_type"] == "array" and doc["shape"] == [365, 6, 5] and doc["data_type"] == "float32"
    assert doc["fill_value"] == "NaN" and doc["dimension_names"] == ["time", "y", "x"]
    assert doc["chunk_grid"]["kind"] == "regular" and doc["chunk_grid"]["sharded"] is False
    assert doc["chunk_grid"]["write_chunk_sizes"] == [[[1, 365]], [6], [5]]
    assert doc["chunk_grid"]["metadata"] == {"name": "regular", "configuration": {"chunk_shape": [1, 6, 5]}}
    assert doc["stored_chunks"] == 365 and doc["nchunks"] == 365 and doc["stored_bytes"] > 0
    assert doc["nbytes"] == 365 * 30 * 4 and doc["codecs"][0]["name"] == "bytes"
    status, out, _ = run(capsys, "info", hierarchy, "--json")
    doc = json.loads(out)
    assert doc == {
        "node_type": "group",
        "path": "/",
        "attributes": {"title": "t"},
        "consolidated": False,
        "members": [{"name": "sub", "node_type": "group"}, {"name": "x", "node_type": "array"}],
    }
    status, out, _ = run(capsys, "info", hierarchy, "--path", "sub/y", "--json")
    assert json.loads(out)["path"] == "/sub/y"
    status, out, _ = run(capsys, "info", hierarchy)
    assert "group /" in out and "sub/, x" in out


def test_tree(capsys: pytest.CaptureFixture[str], hierarchy: str) -> None:
    status, out, _ = run(capsys, "tree", hierarchy)
    assert status == 0
    assert "x (10,) int32 (rectilinear)" in out and "y (4, 5) float64 (regular)" in out and "sub/" in out
    status, out, _ = run(capsys, "tree", hierarchy, "--depth", "1")
    assert "sub/" in out and "y (4, 5)" not in out
    status, out, _ = run(capsys, "tree", hierarchy, "--path", "x")
    assert "(10,) int32 (rectilinear)" in out


# -------------------------------------------------------------------------------------------- cat
def test_cat_prints_numpy_style(capsys: pytest.CaptureFixture[str], daily: str, tmp_path: Path) -> None:
    data = _data()
    status, out, _ = run(capsys, "cat", daily, "10:12, 0, ::-2")
    assert status == 0 and out.strip() == str(data[10:12, 0, ::-2])
    status, out, _ = run(capsys, "cat", daily, "--threshold", "5", "-1, -1, -1")
    assert out.strip() == str(data[-1, -1, -1])
    status, out, _ = run(capsys, "cat", daily)
    assert "..." in out and len(out.splitlines()) < 100  # summarised
    npy = tmp_path / "sel.npy"
    status, out, _ = run(capsys, "cat", daily, "[0, 5, 6], ..., 0", "--npy", str(npy))
    assert status == 0 and out == ""
    saved = np.load(npy)
    assert saved.tobytes() == data[[0, 5, 6], ..., 0].tobytes()  # bit-exact: NaN payload and -0.0 kept


def test_cat_errors(capsys: pytest.CaptureFixture[str], daily: str, hierarchy: str) -> None:
    status, _, err = run(capsys, "cat", hierarchy)
    assert status == 2 and err.startswith("rectizarr: error: ") and "group" in err and err.count("\n") == 1
    status, _, err = run(capsys, "cat", daily, "__import__('os')")
    assert status == 2 and "cannot parse selection" in err
    status, _, err = run(capsys, "cat", daily, "400")
    assert status == 2 and err.startswith("rectizarr: error: ")
    status, _, err = run(capsys, "cat", daily, "--max-bytes", "100")
    assert status == 2 and "--max-bytes" in err


# --------------------------------------------------------------------------------------- validate
def test_validate_clean_and_broken(capsys: pytest.CaptureFixture[str], daily: str, tmp_path: Path) -> None:
    for flag in ("--strict", "--lenient"):
        status, out, _ = run(capsys, "validate", daily, flag)
        assert status == 0, out
    status, out, _ = run(capsys, "validate", daily, "--json")
    doc = json.loads(out)
    assert status == 0 and isinstance(doc, dict)
    broken = tmp_path / "broken.zarr"
    broken.mkdir()
    (broken / "zarr.json").write_text('{"zarr_format": 3, "node_type": "array", "shape": [-1]}')
    for flag in ("--strict", "--lenient"):
        status, out, _ = run(capsys, "validate", str(broken), flag)
        assert status == 1, out


def test_validate_lenient_lets_warnings_pass(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "dn.zarr"
    rectizarr.create_array(str(path), shape=(4,), dtype="i4", chunks=(2,))
    doc = json.loads((path / "zarr.json").read_text())
    doc["dimension_names"] = None  # accepted by zarr-python, rejected by tensorstore: a lenient warning
    (path / "zarr.json").write_text(json.dumps(doc))
    from rectizarr.validate import validate

    report = validate(str(path), strict=False)
    status, _, _ = run(capsys, "validate", str(path), "--lenient")
    assert status == (1 if report.errors else 0)
    status, _, _ = run(capsys, "validate", str(path), "--strict")
    assert status == 1


# ------------------------------------------------------------------------------------------- diff
def test_diff_regular_vs_equivalent_rectilinear(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = np.arange(100 * 3, dtype="f8").reshape(100, 3)
    a = rectizarr.create_array(str(tmp_path / "r.zarr"), shape=(100, 3), dtype="f8", chunks=(10, 3))
    b = rectizarr.create_array(str(tmp_path / "q.zarr"), shape=(100, 3), dtype="f8", chunks=[[10] * 10, 3])
    a[:] = data
    b[:] = data
    assert a.grid.kind == "regular" and b.grid.kind == "rectilinear"
    status, out, _ = run(capsys, "diff", str(tmp_path / "r.zarr"), str(tmp_path / "q.zarr"))
    assert status == 0 and "equivalent" in out and "same chunk boundaries" in out
    status, out, _ = run(capsys, "diff", str(tmp_path / "r.zarr"), str(tmp_path / "q.zarr"), "--json")
    doc = json.loads(out)
    assert doc["verdict"] == "equivalent"
    assert doc["nodes"][0]["values"] == {"compared": 300, "differing": 0, "first_index": None}
    # other chunk boundaries, same values: the same data, chunked differently (not a failure)
    c = rectizarr.create_array(str(tmp_path / "c.zarr"), shape=(100, 3), dtype="f8", chunks=[[50, 50], 3])
    c[:] = data
    status, out, _ = run(capsys, "diff", str(tmp_path / "r.zarr"), str(tmp_path / "c.zarr"))
    assert status == 0 and "same data, different chunking" in out and "values: identical" in out


def test_diff_values_bitwise(capsys: pytest.CaptureFixture[str], daily: str, tmp_path: Path) -> None:
    other = str(tmp_path / "other.zarr")
    assert main(["copy", daily, other]) == 0
    status, out, _ = run(capsys, "diff", daily, other)
    assert status == 0 and "identical" in out  # NaN payload and -0.0 compared bit for bit
    b = rectizarr.open_array(other)
    b[6, 0, 0] = 0.0  # was -0.0
    b[200, 3, 4] = 1e6
    b[5, 0, 0] = np.nan  # the canonical NaN instead of the payload 0x7fc00001
    status, out, _ = run(capsys, "diff", daily, other, "--json")
    v = json.loads(out)["nodes"][0]["values"]
    assert status == 1 and v["differing"] == 3 and v["first_index"] == [5, 0, 0]
    status, out, _ = run(capsys, "diff", daily, other, "--metadata-only")
    assert status == 0 and "values" not in out
    b.attrs["units"] = "degC"
    b.attrs["new"] = True
    status, out, _ = run(capsys, "diff", daily, other, "--metadata-only")
    assert status == 1 and 'attribute \'units\': "K" != "degC"' in out and "attribute 'new': only in B" in out


def test_diff_hierarchies_and_errors(
    capsys: pytest.CaptureFixture[str], hierarchy: str, daily: str, tmp_path: Path
) -> None:
    copy = str(tmp_path / "h2.zarr")
    assert main(["copy", hierarchy, copy]) == 0
    status, out, _ = run(capsys, "diff", hierarchy, copy)
    assert status == 0 and "4 nodes compared" in out
    g = rectizarr.open_group(copy)
    g.create_array("extra", shape=(1,), dtype="u1", chunks=(1,))
    g["sub/y"][0, 0] = 5.0  # type: ignore[index]
    status, out, _ = run(capsys, "diff", hierarchy, copy)
    assert status == 1 and "member 'extra': only in B" in out and "1 of 20 elements differ" in out
    status, out, _ = run(capsys, "diff", hierarchy, copy, "--a-path", "x", "--b-path", "x")
    assert status == 0
    status, out, _ = run(capsys, "diff", hierarchy, daily)
    assert status == 1 and "node type" in out
    status, _, err = run(capsys, "diff", hierarchy, str(tmp_path / "missing.zarr"))
    assert status == 2 and err.startswith("rectizarr: error: ") and "missing.zarr" in err


# ------------------------------------------------------------------------------------------- copy
def test_copy_daily_to_monthly_and_back(
    capsys: pytest.CaptureFixture[str], daily: str, tmp_path: Path
) -> None:
    monthly, back = str(tmp_path / "monthly.zarr"), str(tmp_path / "back.zarr")
    assert main(["copy", daily, monthly, "--chunks", MONTHLY, "--compressor", "gzip"]) == 0
    m = rectizarr.open_array(monthly, mode="r")
    assert m.grid.kind == "rectilinear" and m.write_chunk_sizes[0] == tuple(DAYS)
    assert json.dumps(rectizarr.core.codec_meta.codecs_to_json(m.metadata.codecs)).count('"gzip"') == 1
    assert m.attrs.asdict() == {"units": "K"} and m.dimension_names == ("time", "y", "x")
    assert np.asarray(m[...]).tobytes() == _data().tobytes()
    assert main(["copy", monthly, back, "--chunks", "1,6,5", "--compressor", "none"]) == 0
    capsys.readouterr()
    status, out, _ = run(capsys, "diff", daily, back, "--json")
    doc = json.loads(out)
    assert status == 0 and doc["nodes"][0]["metadata"] == "equivalent"  # codecs differ (zstd vs none) ...
    assert doc["nodes"][0]["values"] == {
        "compared": 10950,
        "differing": 0,
        "first_index": None,
    }  # ... values not
    assert rectizarr.open_array(back).write_chunk_sizes == rectizarr.open_array(daily).write_chunk_sizes
    assert (
        main(["copy", monthly, str(tmp_path / "back2.zarr"), "--chunks", "1,6,5", "--compressor", "zstd"])
        == 0
    )
    status, out, _ = run(capsys, "diff", daily, str(tmp_path / "back2.zarr"))
    assert status == 0 and "level" in out and "same data, different encoding" in out  # zstd level 3 vs 0


def test_copy_sharding_codecs_and_groups(
    capsys: pytest.CaptureFixture[str], daily: str, hierarchy: str, tmp_path: Path
) -> None:
    sharded = str(tmp_path / "sharded.zarr")
    assert (
        main(["copy", daily, sharded, "--shards", MONTHLY, "--chunks", "1,3,5", "--compressor", "blosc"]) == 0
    )
    s = rectizarr.open_array(sharded, mode="r")
    assert s.is_sharded and s.write_chunk_sizes[0] == tuple(DAYS) and s.read_chunk_sizes[1] == (3, 3)
    assert np.asarray(s[...]).tobytes() == _data().tobytes()
    unsharded = str(tmp_path / "unsharded.zarr")
    assert main(["copy", sharded, unsharded, "--shards", "none"]) == 0
    u = rectizarr.open_array(unsharded, mode="r")
    assert not u.is_sharded and u.write_chunk_sizes == s.read_chunk_sizes
    chain = '[{"name": "bytes", "configuration": {"endian": "big"}}, {"name": "crc32c"}]'
    big = str(tmp_path / "big.zarr")
    assert main(["copy", daily, big, "--codecs", chain, "--chunks", "100,6,5"]) == 0
    assert np.asarray(rectizarr.open_array(big)[...]).tobytes() == _data().tobytes()
    status, _, err = run(capsys, "copy", daily, big, "--chunks", "100,6,5")
    assert status == 2 and "--overwrite" in err
    assert main(["copy", daily, big, "--chunks", "73,6,5", "--overwrite"]) == 0
    assert rectizarr.open_array(big).write_chunk_sizes[0] == (73,) * 5
    h2 = str(tmp_path / "h2.zarr")
    assert main(["copy", hierarchy, h2, "--compressor", "zstd"]) == 0
    g = rectizarr.open_group(h2, mode="r")
    assert g.attrs.asdict() == {"title": "t"} and g["sub"].attrs.asdict() == {"level": 1}
    assert g["x"].write_chunk_sizes == ((3, 7),)  # type: ignore[union-attr]
    status, _, err = run(capsys, "copy", daily, str(tmp_path / "z.zarr"), "--chunks", "[0],6,5")
    assert status == 2 and err.count("\n") == 1
    status, _, err = run(capsys, "copy", daily, str(tmp_path / "z.zarr"), "--chunks", "5,5")
    assert status == 2 and "3 dimensions" in err
    status, _, err = run(capsys, "copy", daily, str(tmp_path / "z.zarr"), "--codecs", "{nope")
    assert status == 2 and "--codecs" in err


def test_debug_shows_traceback_and_progress_only_on_tty(
    capsys: pytest.CaptureFixture[str], daily: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    status, _, err = run(capsys, "--debug", "cat", daily, "1:2:3:4")
    assert status == 2 and "Traceback" in err and err.rstrip().endswith("has too many ':'")
    status, _, err = run(capsys, "cat", daily, "1:2:3:4")
    assert status == 2 and "Traceback" not in err
    status, _, err = run(capsys, "copy", daily, str(tmp_path / "piped.zarr"))
    assert status == 0 and err == ""  # piped: quiet

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    assert main(["copy", daily, str(tmp_path / "tty.zarr"), "--memory", "1"]) == 0
    assert "copy /" in tty.getvalue() and "365/365" in tty.getvalue()


def test_usage_errors_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["--help"]) == 0
    assert "copy" in capsys.readouterr().out
    assert main(["copy", "only-one-arg"]) == 2


# ------------------------------------------------------------------------------ other writers / process
def test_on_a_zarr_python_store(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    zarr = zarr_python()
    path = str(tmp_path / "zp.zarr")
    data = np.arange(40 * 30, dtype="int32").reshape(40, 30)
    root = zarr.open_group(path, mode="w", zarr_format=3)
    root.attrs["origin"] = "zarr-python"
    z = root.create_array(
        "z", shape=(40, 30), dtype="int32", chunks=(10, 10), shards=(20, 30), dimension_names=["y", "x"]
    )
    z[:] = data
    status, out, _ = run(capsys, "info", path, "--path", "z", "--json")
    doc = json.loads(out)
    assert status == 0 and doc["chunk_grid"]["sharded"] and doc["stored_chunks"] == 2
    status, out, _ = run(capsys, "tree", path)
    assert "z (40, 30) int32 (regular, sharded)" in out
    status, out, _ = run(capsys, "cat", path, "--path", "z", "3, 5:8")
    assert out.strip() == str(data[3, 5:8])
    mine = str(tmp_path / "mine.zarr")
    assert main(["copy", path, mine, "--shards", "none", "--chunks", "[7,33],[10,20]"]) == 0
    status, out, _ = run(capsys, "diff", path, mine)
    assert status == 0 and "values: identical (1200 elements)" in out and "different chunking" in out
    with zarr.config.set({"array.rectilinear_chunks": True}):
        back = zarr.open_array(mine, path="z", mode="r")  # zarr-python reads what copy wrote
        assert np.array_equal(back[...], data)
    status, out, _ = run(capsys, "validate", path, "--lenient")
    assert status == 0, out


def test_as_a_real_process(daily: str, tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "rectizarr"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "rectizarr"]
    out = subprocess.run([*cmd, "info", daily, "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and json.loads(out.stdout)["shape"] == [365, 6, 5]
    other = str(tmp_path / "o.zarr")
    out = subprocess.run(
        [sys.executable, "-m", "rectizarr", "copy", daily, other, "--chunks", MONTHLY],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stderr == ""  # not a terminal: no progress bar
    b = rectizarr.open_array(other)
    b[0, 0, 0] = 42.0
    out = subprocess.run(
        [sys.executable, "-m", "rectizarr", "diff", daily, other], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 1 and "first at index (0, 0, 0)" in out.stdout
    out = subprocess.run(
        [*cmd, "info", str(tmp_path / "nothing.zarr")], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and out.stderr.startswith("rectizarr: error: ") and out.stderr.count("\n") == 1


def test_copy_and_diff_edge_cases(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    scalar = rectizarr.create_array(str(tmp_path / "s0.zarr"), shape=(), dtype="i8", fill_value=3)
    scalar[()] = 7
    rectizarr.create_array(str(tmp_path / "e.zarr"), shape=(0, 4), dtype="f4", chunks=(2, 2))
    text = rectizarr.create_array(str(tmp_path / "t.zarr"), shape=(5,), dtype=str, chunks=(2,))
    text[:] = np.array(["a", "bé", "", "x", "y"])
    for name in ("s0", "e", "t"):
        src, dst = str(tmp_path / f"{name}.zarr"), str(tmp_path / f"{name}-copy.zarr")
        assert main(["copy", src, dst]) == 0
        status, out, _ = run(capsys, "diff", src, dst)
        assert status == 0 and "summary: identical" in out, out  # declared chunks kept, even for extent 0
    rectizarr.open_array(str(tmp_path / "t-copy.zarr"))[1] = "zz"
    status, out, _ = run(capsys, "diff", str(tmp_path / "t.zarr"), str(tmp_path / "t-copy.zarr"))
    assert status == 1 and "1 of 5 elements differ; first at index (1,)" in out
    # an overhanging regular edge chunk and the clipped rectilinear edge are the same boundaries
    a = rectizarr.create_array(str(tmp_path / "r.zarr"), shape=(95,), dtype="u2", chunks=(10,))
    b = rectizarr.create_array(str(tmp_path / "q.zarr"), shape=(95,), dtype="u2", chunks=[[10] * 9 + [5]])
    a[:] = b[:] = np.arange(95)
    status, out, _ = run(capsys, "diff", str(tmp_path / "r.zarr"), str(tmp_path / "q.zarr"))
    assert status == 0 and "summary: equivalent" in out


def test_copy_refuses_a_destination_overlapping_the_source(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``copy SRC SRC --overwrite`` deleted the source and exited 0; ``copy SRC SRC/sub`` never stopped."""
    src = tmp_path / "s.zarr"
    g = rectizarr.create_group(str(src))
    g.create_array("x", shape=(4,), dtype="i4", chunks=(2,))[:] = np.arange(4, dtype="i4")
    cases = [
        ([str(src), str(src), "--overwrite"], "is the source"),
        ([str(src), str(src / "sub")], "lies inside the source"),
        ([str(src), str(src), "--dst-path", "sub", "--overwrite"], "lies inside the source"),
        ([str(src), str(src), "--src-path", "x", "--overwrite"], "holds the source"),
        ([str(src / "x"), str(src), "--overwrite"], "holds the source"),
        ([str(src), str(src), "--src-path", "x", "--dst-path", "x", "--overwrite"], "is the source"),
    ]
    for argv, why in cases:
        status, _, err = run(capsys, "copy", *argv)
        assert status == 2 and why in err and err.count("\n") == 1, (argv, err)
    assert rectizarr.open_group(str(src)).keys() == ["x"]
    np.testing.assert_array_equal(rectizarr.open_array(str(src / "x"))[:], np.arange(4))
    status, _, _ = run(capsys, "copy", str(src), str(src), "--src-path", "x", "--dst-path", "y")
    assert status == 0
    np.testing.assert_array_equal(rectizarr.open_array(str(src / "y"))[:], np.arange(4))


def test_copy_keeps_consolidation_and_rechunk_diff_is_same_data(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    src, dst = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    g = rectizarr.create_group(src)
    g.create_array("v", shape=(40, 6), dtype="f4", chunks=(8, 6))[...] = np.arange(240, dtype="f4").reshape(
        40, 6
    )
    rectizarr.consolidate_metadata(src)
    assert main(["copy", src, dst, "--chunks", "10,3"]) == 0
    copied = rectizarr.open_group(dst, mode="r")
    assert copied.metadata.consolidated_metadata is not None
    assert copied["v"].chunks == (10, 3)
    capsys.readouterr()
    status, out, _ = run(capsys, "diff", src, dst)
    assert (
        status == 0 and "same data, different chunking" in out and "values: identical (240 elements)" in out
    )
    rectizarr.open_array(dst, path="v")[0, 0] = -1.0
    status, out, _ = run(capsys, "diff", src, dst)
    assert status == 1 and "1 of 240 elements differ" in out


def test_diff_of_a_migrated_array_is_equivalent_and_copy_refuses_a_v3_node_in_a_v2_group(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    v2 = rectizarr.create_array(tmp_path / "v2.zarr", shape=(4,), dtype="i4", chunks=(2,), zarr_format=2)
    v2[...] = [1, 2, 3, 4]
    assert main(["migrate", str(tmp_path / "v2.zarr"), str(tmp_path / "v3.zarr"), "--chunks", "3"]) == 0
    code, out, _ = run(capsys, "diff", str(tmp_path / "v2.zarr"), str(tmp_path / "v3.zarr"))
    assert code == 0 and "equivalent" in out and "chunk_key_encoding" in out  # the keys differ, not the data
    group = rectizarr.create_group(tmp_path / "g.zarr", zarr_format=2, attributes={"title": "t"})
    group.create_array("old", shape=(2,), dtype="i4")
    before = sorted(p.name for p in (tmp_path / "g.zarr").iterdir())
    code, _, err = run(
        capsys, "copy", str(tmp_path / "v3.zarr"), str(tmp_path / "g.zarr"), "--dst-path", "new"
    )
    assert code == 2 and "Zarr v2 node" in err
    assert (
        sorted(p.name for p in (tmp_path / "g.zarr").iterdir()) == before
    )  # no zarr.json hiding the v2 group
    assert dict(rectizarr.open_group(tmp_path / "g.zarr", mode="r").attrs) == {"title": "t"}


def test_from_array_keeps_the_declared_chunks_of_its_source(tmp_path: Path) -> None:
    """As declared, not clipped to the extent: a 12/6 shard of 7 elements failed ("shards=[7] is not
    divisible by chunks=(6,)"), and chunks (12,) became 7."""
    src = rectizarr.create_array(tmp_path / "s.zarr", shape=(7,), dtype="i4", chunks=(6,), shards=(12,))
    src[...] = np.arange(7)
    out = rectizarr.from_array(tmp_path / "d.zarr", src)
    assert out.metadata.chunk_grid == src.metadata.chunk_grid and out.inner_chunk_shape == (6,)
    assert out[...].tolist() == list(range(7))
    for chunks in ((12,), [[4, 8]]):
        a = rectizarr.create_array(rectizarr.MemoryStore(), shape=(10,), dtype="i4", chunks=chunks)
        a[...] = 1
        assert rectizarr.from_array(rectizarr.MemoryStore(), a).metadata.chunk_grid == a.metadata.chunk_grid


def test_copy_with_a_run_of_a_huge_count_keeps_it_a_run(tmp_path: Path) -> None:
    """``--chunks '[1x10**18]'`` was expanded into a list of 10**18 ints (MemoryError; 10**8 took a minute
    and 2.5 GB); it is a run, as the metadata's run-length form and ``create_array`` keep it."""
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    rectizarr.create_array(src, shape=(50,), dtype="f8", chunks=(8,))[:] = np.arange(50.0)
    assert main(["copy", src, dst, "--chunks", f"[3,1x{10**18}]"]) == 0
    out = rectizarr.open_array(dst, mode="r")
    assert out.read_chunk_runs[0][:2] == ((3, 1), (1, 47)) and out[...].tolist() == list(np.arange(50.0))


def test_a_v2_type_with_no_v3_name_is_refused_by_copy_and_from_array(tmp_path: Path) -> None:
    """A v2 structured dtype with a sub-array field has no Zarr v3 data type: ``copy`` (to v3) and
    ``from_array`` wrote ``"data_type": "v2:|V20"``, which nothing can open; refused like ``migrate``."""
    src = Path(__file__).resolve().parents[2] / "conformance_data/v2/zarr-python-2/dtype_structured/data.zarr"
    dst = tmp_path / "dst"
    assert main(["copy", str(src), str(dst)]) == 2
    assert not (dst / "zarr.json").exists()
    with pytest.raises(rectizarr.UnsupportedError, match="no Zarr v3 data type"):
        rectizarr.from_array(str(tmp_path / "f"), rectizarr.open_array(str(src), mode="r"))
    v2 = rectizarr.from_array(str(tmp_path / "v2"), rectizarr.open_array(str(src), mode="r"), zarr_format=2)
    assert v2[...].tobytes() == rectizarr.open_array(str(src), mode="r")[...].tobytes()


@pytest.mark.parametrize("spec", ["2,3", "1,3"])
def test_copy_chunks_of_a_transposed_sharded_array_are_in_the_arrays_axis_order(
    tmp_path: Path, spec: str
) -> None:
    """``--chunks`` is in the array's axis order, as ``info`` prints; with ``transpose`` before sharding the
    inner ``chunk_shape`` is in the transposed order (the spec), and the spec was written there as given:
    refused ("not divisible") or other inner chunks."""
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    tr = {"name": "transpose", "configuration": {"order": [1, 0]}}
    shd = {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [3, 2],
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
            "index_location": "end",
        },
    }
    a = rectizarr.create_array(src, shape=(8, 12), dtype="i4", chunks=(4, 6), codecs=[tr, shd])
    a[...] = np.arange(96).reshape(8, 12)
    assert main(["copy", src, dst, "--chunks", spec]) == 0
    b = rectizarr.open_array(dst, mode="r")
    rows, cols = (int(x) for x in spec.split(","))
    assert {b.read_chunk_sizes[0][0], b.read_chunk_sizes[1][0]} == {rows, cols} and b.read_chunk_sizes[0][
        0
    ] == rows
    assert b[...].tolist() == np.arange(96).reshape(8, 12).tolist()
