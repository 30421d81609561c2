"""``import rectizarr`` imports what opening a local array needs and nothing else: remote stores, the
CLI, the dask and xarray glue, virtual datasets, zip archives, thread pools and codec plugins load on first
use (issue 38). Checked on ``sys.modules`` of a fresh interpreter, never on timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).parents[2]

NOT_AT_IMPORT = (
    "fsspec",
    "obstore",
    "dask",
    "xarray",
    "zarr",
    "numcodecs",
    "rectizarr.cli",
    "rectizarr.integrations",
    "rectizarr.dask",
    "rectizarr.xarray",
    "rectizarr.virtual",
    "rectizarr.core.v2meta",  # Zarr v2's parsing, dtypes and creation: on first use
    "rectizarr.core.v2dtype",
    "rectizarr.core.v2create",
    "rectizarr.core.v2migrate",
    "rectizarr.stores.fsspec",
    "rectizarr.stores.objectstore",
    "rectizarr.stores.zip",
    "zipfile",
    "concurrent.futures",
    "importlib.metadata",
    "tempfile",
    "shutil",
    "socket",
    "urllib.parse",
)


def _modules_after(code: str) -> set[str]:
    """The modules loaded by a fresh interpreter (this checkout's rectizarr) after ``code``."""
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def _loaded(modules: set[str], name: str) -> bool:
    return name in modules or any(m.startswith(name + ".") for m in modules)


def test_import_rectizarr_loads_none_of_what_a_local_array_does_not_need() -> None:
    modules = _modules_after("import rectizarr")
    assert "rectizarr" in modules and "numpy" in modules
    assert [name for name in NOT_AT_IMPORT if _loaded(modules, name)] == []


def test_reading_a_local_array_loads_no_remote_store_or_glue(tmp_path: Path) -> None:
    """Opening and reading a local (sharded, zstd) array needs none of them either; the pools come in."""
    path = tmp_path / "a.zarr"
    a = np.arange(64 * 64, dtype="u2").reshape(64, 64)
    write = (
        "import numpy as np, rectizarr\n"
        f"z = rectizarr.create_array({str(path)!r}, shape=(64, 64), dtype='u2', chunks=(8, 8), "
        "shards=(32, 32), compressors={'name': 'zstd', 'configuration': {'level': 1}})\n"
        "z[...] = np.arange(64 * 64, dtype='u2').reshape(64, 64)\n"
    )
    subprocess.run(
        [sys.executable, "-c", write], check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    read = f"import rectizarr\nassert int(rectizarr.open_array({str(path)!r})[...].sum()) == {int(a.sum())}"
    modules = _modules_after(read)
    remote = ("fsspec", "obstore", "dask", "xarray", "zarr", "rectizarr.cli", "rectizarr.integrations")
    assert [name for name in remote if _loaded(modules, name)] == []
    assert "rectizarr.core.v2meta" not in modules  # (a v3 array: no v2 parsing)


def test_a_v2_array_loads_v2_on_first_use(tmp_path: Path) -> None:
    """The v2 modules come in when a v2 array is created or read (and it reads back what was written)."""
    path = str(tmp_path / "v2.zarr")
    code = (
        "import numpy as np, rectizarr\n"
        f"z = rectizarr.create_array({path!r}, shape=(6,), dtype='i4', chunks=(4,), zarr_format=2)\n"
        "z[...] = np.arange(6)\n"
        f"assert rectizarr.open_array({path!r}).metadata.zarr_format == 2\n"
        f"assert rectizarr.open_array({path!r})[...].tolist() == list(range(6))\n"
    )
    assert {"rectizarr.core.v2meta", "rectizarr.core.v2create"} <= _modules_after(code)


def test_the_lazy_names_resolve() -> None:
    import rectizarr
    import rectizarr.stores

    for name in ("ZipStore", "FsspecStore", "ObjectStore"):
        assert getattr(rectizarr, name) is getattr(rectizarr.stores, name)
        assert getattr(rectizarr, name).__name__ == name
    assert callable(rectizarr.validate)
    assert rectizarr.validate.__module__ == "rectizarr.validate"
