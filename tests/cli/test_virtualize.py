"""``rectizarr virtualize`` (and reference sets as the PATH of the other commands): build, append, inspect,
materialize with ``copy``; errors as one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import rectizarr
from rectizarr.cli import main

DAYS = (31, 28, 31)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def months(tmp_path: Path) -> tuple[list[str], np.ndarray]:
    paths, values = [], []
    for i, n in enumerate(DAYS):
        x = np.arange(n * 4, dtype="i4").reshape(n, 4) + 1000 * i
        paths.append(str(tmp_path / f"m{i}"))
        rectizarr.create_array(paths[-1], data=x, chunks=(7, 4))
        values.append(x)
    return paths, np.concatenate(values)


def _read(refs: str) -> np.ndarray:
    return np.asarray(rectizarr.open_array("reference://", mode="r", storage_options={"fo": refs})[...])


def test_virtualize_reports_rewritten_edge_chunks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, months: tuple[list[str], np.ndarray]
) -> None:
    paths, expected = months
    out = str(tmp_path / "v.json")
    status, text, err = run(
        capsys, "virtualize", *paths, "--axis", "0", "-o", out, "--side", str(tmp_path / "side")
    )
    assert (status, err) == (0, "")
    assert text == (
        f"{out}: 3 source(s), 1 array(s) joined, 14 chunk reference(s); 1 edge chunk(s) rewritten "
        f"(into {tmp_path / 'side'}), 0 referenced as a byte prefix\n"
    )
    assert np.array_equal(_read(out), expected)
    doc = json.loads(json.loads(Path(out).read_text())["refs"]["zarr.json"])
    assert doc["chunk_grid"]["configuration"]["chunk_shapes"] == [[[7, 4], 3, [7, 9]], 4]


def test_append_then_copy_materializes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, months: tuple[list[str], np.ndarray]
) -> None:
    paths, expected = months
    out, side = str(tmp_path / "v.json"), str(tmp_path / "side")
    assert run(capsys, "virtualize", paths[0], "-o", out, "--side", side)[0] == 0
    for p in paths[1:]:  # the monthly workflow: one more file each time
        status, text, _ = run(capsys, "virtualize", p, "-o", out, "--side", side, "--append")
        assert status == 0
    # appending month 2 rewrote month 1's overhanging 3-day week (month 1 was the last chunk until then)
    assert len(os.listdir(Path(side) / "edges")) == 1
    assert np.array_equal(_read(out), expected)
    status, text, _ = run(capsys, "info", out)
    assert status == 0 and "rectilinear" in text and "(90, 4)" in text
    real = str(tmp_path / "real")
    assert run(capsys, "copy", out, real, "--chunks", "30,4")[0] == 0
    copied = rectizarr.open_array(real, mode="r")
    assert copied.chunks == (30, 4) and np.array_equal(copied[...], expected)
    assert run(capsys, "diff", out, real)[0] == 0


def test_refusals_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, months: tuple[list[str], np.ndarray]
) -> None:
    paths, _ = months
    out = str(tmp_path / "v.json")
    status, _, err = run(capsys, "virtualize", *paths, "-o", out)
    assert status == 2 and "field 'side_store'" in err and err.count("\n") == 1
    assert not os.path.exists(out)
    rectizarr.create_array(tmp_path / "other", shape=(7, 4), dtype="i8", chunks=(7, 4))
    status, _, err = run(capsys, "virtualize", paths[0], str(tmp_path / "other"), "-o", out, "--inline")
    assert status == 2 and "source #1" in err and "field 'data_type'" in err
    status, _, err = run(capsys, "virtualize", paths[0], "-o", out, "--append")
    assert status == 2 and "does not exist" in err


def test_virtualize_groups_along_a_dimension_name(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    paths, values = [], []
    for i, n in enumerate(DAYS):
        g = rectizarr.open_group(tmp_path / f"g{i}", mode="w")
        x = np.arange(n * 2, dtype="f4").reshape(n, 2) + 100 * i
        g.create_array("tas", shape=(n, 2), dtype="f4", chunks=(7, 2), dimension_names=["time", "x"])[...] = x
        g.create_array("x", shape=(2,), dtype="i4", chunks=(2,), dimension_names=["x"])[...] = [5, 6]
        paths.append(str(tmp_path / f"g{i}"))
        values.append(x)
    out = str(tmp_path / "v.json")
    status, text, err = run(capsys, "virtualize", *paths, "--axis", "time", "-o", out, "--inline")
    assert (status, err) == (0, "")
    assert (
        "1 array(s) joined" in text and "1 edge chunk(s) rewritten (into the reference set, inline)" in text
    )
    g = rectizarr.open_group(out, mode="r")
    assert np.array_equal(g["tas"][...], np.concatenate(values)) and g["x"][...].tolist() == [5, 6]
    status, text, _ = run(capsys, "tree", out)
    assert status == 0 and "tas" in text


def test_parquet_reference_sets_are_paths_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import h5py
    from kerchunk.df import refs_to_dataframe
    from kerchunk.hdf import SingleHdf5ToZarr

    x = np.arange(40, dtype="f4").reshape(10, 4)
    with h5py.File(tmp_path / "h.h5", "w") as f:
        f.create_dataset("t", data=x, chunks=(4, 4))
    refs_to_dataframe(
        SingleHdf5ToZarr(str(tmp_path / "h.h5"), inline_threshold=0).translate(), str(tmp_path / "r.parq")
    )
    status, text, _ = run(capsys, "info", str(tmp_path / "r.parq"), "--path", "t")
    assert status == 0 and "(10, 4)" in text
    out = str(tmp_path / "v.json")
    status, text, _ = run(
        capsys,
        "virtualize",
        str(tmp_path / "r.parq"),
        str(tmp_path / "r.parq"),
        "--axis",
        "phony_dim_0",
        "-o",
        out,
        "--inline",
    )
    # 10 = 4 + 4 + 2: the 2-row chunk is raw (HDF5, no filter), so a byte prefix of its 4 rows
    assert status == 0 and "0 edge chunk(s) rewritten, 1 referenced as a byte prefix" in text
    assert np.array_equal(rectizarr.open_group(out, mode="r")["t"][...], np.concatenate([x, x]))
