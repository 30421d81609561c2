"""One rectilinear array over monthly files, without copying a chunk (``rectizarr.virtual``).

Three monthly files (31, 28 and 31 days) are stored with 7-day chunks. Kerchunk's ``MultiZarrToZarr``
cannot join them: their chunk edges do not line up on one regular grid. A rectilinear grid takes the
files' own edges (``[7, 7, 7, 7, 3, 7, 7, 7, 7, 7, ...]``), and the reference set points each chunk at
the file that holds it. January's last chunk stores its 3 days padded to 7; it is the one chunk that is
re-encoded, at its true size, into a small side store. April is appended the same way, then the virtual
quarter is materialized into a real array with monthly chunks by ``rectizarr copy``.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

import rectizarr
from rectizarr import virtual
from rectizarr.cli import main as rectizarr_command

DAYS = {"jan": 31, "feb": 28, "mar": 31, "apr": 30}


def month(root: Path, name: str, first_day: int) -> tuple[str, np.ndarray]:
    n = DAYS[name]
    values = np.arange(first_day, first_day + n, dtype="f4")[:, None, None] + np.zeros((1, 8, 8), "f4")
    path = str(root / f"{name}.zarr")
    rectizarr.create_array(path, data=values, chunks=(7, 8, 8))
    return path, values


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths, values, day = [], [], 0
        for name in DAYS:
            path, v = month(root, name, day)
            paths.append(path)
            values.append(v)
            day += DAYS[name]
        refs_path, side = root / "q1.json", root / "edges"
        result = virtual.build(paths[:3], axis=0, side_store=side)
        virtual.write_refs(result.refs, refs_path)
        grid = json.loads(result.refs["refs"]["zarr.json"])["chunk_grid"]["configuration"]["chunk_shapes"][0]
        print(
            f"joined {result.sources} files: {len(result.refs['refs']) - 1} chunk references, "
            f"{result.rewritten} edge chunk rewritten; time edges {grid}"
        )
        q1 = rectizarr.open_array(refs_path, mode="r")
        assert np.array_equal(q1[...], np.concatenate(values[:3]))
        print(f"day 31 (Feb 1) reads {float(q1[31, 0, 0])}; shape {q1.shape}")

        appended = virtual.append(refs_path, [paths[3]], axis=0, side_store=side)
        print(
            f"appended April: {appended.rewritten} edge chunk rewritten (March's last week, no longer the end)"
        )
        year = rectizarr.open_array(refs_path, mode="r")
        assert np.array_equal(year[...], np.concatenate(values))

        real = root / "monthly.zarr"
        monthly = f"[{','.join(str(n) for n in DAYS.values())}],8,8"
        assert rectizarr_command(["copy", str(refs_path), str(real), "--chunks", monthly]) == 0
        copied = rectizarr.open_array(real, mode="r")
        assert np.array_equal(copied[...], np.concatenate(values))
        print(f"materialized with monthly chunks {copied.write_chunk_sizes[0]}")


if __name__ == "__main__":
    main()
