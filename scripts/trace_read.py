"""Print the rectizarr modules one read goes through, in call order (consecutive calls in one module merged).

    .venv/bin/python scripts/trace_read.py            # one inner chunk of a zstd-sharded local array

The array is made in a temporary directory and read once first (so the shard index is cached), then the
traced read runs under ``sys.setprofile``.
"""

from __future__ import annotations

import sys
import tempfile
from types import FrameType
from typing import Any

import numpy as np

import rectizarr


def main() -> None:
    zstd = [{"name": "zstd", "configuration": {"level": 1}}]
    a = rectizarr.create_array(
        tempfile.mkdtemp(),
        shape=(64, 256, 256),
        dtype="<u2",
        chunks=(8, 128, 128),
        shards=(32, 256, 256),
        compressors=zstd,
        fill_value=0,
    )
    a[...] = np.arange(a.size, dtype="<u2").reshape(a.shape)
    sel = np.s_[8:16, 0:128, 0:128]  # exactly one inner chunk
    a[sel]
    calls: list[tuple[str, str]] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        module = frame.f_globals.get("__name__", "")
        if event == "call" and module.startswith("rectizarr"):
            calls.append((module, frame.f_code.co_name))

    sys.setprofile(profile)
    a[sel]
    sys.setprofile(None)
    merged: list[tuple[str, list[str]]] = []
    for module, name in calls:
        if not merged or merged[-1][0] != module:
            merged.append((module, [name]))
        elif name not in merged[-1][1]:
            merged[-1][1].append(name)
    for module, names in merged:
        print(f"{module:32s} {', '.join(names)}")


if __name__ == "__main__":
    main()
