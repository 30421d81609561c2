"""SIGKILL a LocalStore writer at random moments: every key is wholly old or wholly new."""

from __future__ import annotations

from pathlib import Path

from tests.reliability._crash import kill_loop, verify


def test_killed_writer_leaves_whole_values(tmp_path: Path) -> None:
    root = str(tmp_path / "crash.zarr")
    assert kill_loop(root, kills=10, seed=1) == 10
    assert verify(root) > 10  # the writers got well into their loops before being killed
