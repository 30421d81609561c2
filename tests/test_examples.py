"""Every example in ``examples/`` runs standalone (each writes only to its own temporary directory)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))
# Generous: the dask/xarray example starts a local cluster on a shared two-core machine.
TIMEOUT = {"dask_xarray_timeseries.py": 600}


def test_the_expected_examples_exist() -> None:
    names = {p.name for p in EXAMPLES}
    assert {
        "quickstart.py",
        "daily_appends.py",
        "irregular_archive.py",
        "image_tiles.py",
        "xarray_open.py",
    } <= names


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(example: Path, tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(example)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=TIMEOUT.get(example.name, 300),
    )
    assert out.returncode == 0, f"{example.name} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
    assert out.stdout.strip(), f"{example.name} printed nothing"
    assert not any(tmp_path.iterdir()), f"{example.name} left files in its working directory"
