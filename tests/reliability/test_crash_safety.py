"""SIGKILL a LocalStore writer at random moments: every key is wholly old or wholly new."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.reliability._crash import kill_loop, verify


def test_killed_writer_leaves_whole_values(tmp_path: Path) -> None:
    root = str(tmp_path / "crash.zarr")
    assert kill_loop(root, kills=10, seed=1) == 10
    assert verify(root) > 10  # the writers got well into their loops before being killed


@pytest.mark.parametrize("shards", [None, (8,)])
def test_a_grow_after_a_shrink_killed_before_its_clean_up_shows_the_fill_value(
    tmp_path: Path, shards: Any
) -> None:
    """A shrink writes zarr.json, then deletes the chunks past the new end; a process killed in between
    (7 of 30 kill -9s) left them, and growing again showed their old values (2.8 million elements). A grow
    now deletes stored chunks wholly past the present end first."""
    import json

    import rectizarr

    path = tmp_path / "a"
    a = rectizarr.create_array(str(path), shape=(64,), dtype="i4", chunks=(4,), shards=shards, fill_value=0)
    a[...] = 5
    doc = json.loads((path / "zarr.json").read_text())
    (path / "zarr.json").write_text(json.dumps({**doc, "shape": [8]}))  # the shrink's zarr.json, then killed
    b = rectizarr.open_array(str(path), mode="r+")
    b.resize((64,))
    assert b[...].tolist() == [5] * 8 + [0] * 56
