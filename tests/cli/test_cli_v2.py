"""The CLI commands on Zarr v2 hierarchies (info, tree, cat, validate, diff), in-process."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from rectizarr.cli import main
from tests.conformance.corpus import ROOT

TREE = str(ROOT / "v2" / "zarr-python-2" / "hierarchy_consolidated" / "data.zarr")
PLAIN = str(ROOT / "v2" / "zarr-python-2" / "hierarchy" / "data.zarr")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = main(list(argv))
    return status, capsys.readouterr().out


def test_info_tree_cat_on_v2(capsys: pytest.CaptureFixture[str]) -> None:
    status, out = run(capsys, "info", TREE)
    assert status == 0 and "consolidated  : yes" in out
    status, out = run(capsys, "info", "--json", TREE + "/sub/count")
    assert status == 0
    info = json.loads(out)
    assert info["shape"] == [4, 3] and info["dimension_names"] == ["y", "x"]
    status, out = run(capsys, "tree", PLAIN)
    assert status == 0 and "deeper/" in out and "flag (4, 3) bool" in out
    status, out = run(capsys, "cat", TREE + "/sub/count")
    assert status == 0
    assert np.array(
        json.loads(
            json.dumps(
                [
                    [int(x) for x in row.split()]
                    for row in out.replace("[", "").replace("]", "").strip().splitlines()
                ]
            )
        )
    ).shape == (4, 3)


def test_validate_and_diff_on_v2(capsys: pytest.CaptureFixture[str]) -> None:
    status, out = run(capsys, "validate", TREE)
    assert status == 0 and out.startswith("OK")
    status, out = run(capsys, "diff", TREE, PLAIN)
    assert "temp" in out and "values: identical" in out


@pytest.mark.parametrize(
    "case", ["filter_delta", "object_vlen_utf8", "filter_delta_big_endian", "order_f_2d"]
)
def test_copy_from_v2_writes_v3(case: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import rectizarr

    src = str(ROOT / "v2" / "zarr-python-2" / case / "data.zarr")
    assert main(["copy", src, str(tmp_path / "c.zarr")]) == 0
    out = rectizarr.open_array(tmp_path / "c.zarr", mode="r")
    assert out.metadata.zarr_format == 3
    assert out[...].tolist() == rectizarr.open_array(src, mode="r")[...].tolist()
    status, text = run(capsys, "diff", "--metadata-only", src, str(tmp_path / "c.zarr"))
    assert status in (0, 1) and "summary" in text
