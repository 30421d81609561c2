"""A key of a LocalStore that is not a regular file (a link to ``/dev/zero`` or ``/dev/urandom``, a named
pipe, a socket) holds no value: every read path answers "missing" at once, without blocking and without
reading the device. ``exists`` and listings already said so; reads now agree (a chunk reads as the fill
value, a ``zarr.json`` as no node)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.errors import NodeNotFoundError
from rectizarr.stores import LocalStore
from tests.reliability._helpers import bounded

DEVICES = ["/dev/zero", "/dev/urandom"]


def special(root: Path, key: str, kind: str) -> None:
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":  # a bound unix socket (opening it fails with ENXIO)
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(os.fspath(path))
        sock.close()
    else:
        os.symlink(kind, path)


def read_paths(store: LocalStore, key: str) -> list[tuple[str, Callable[[], Any]]]:
    return [
        ("get", lambda: store.get(key)),
        ("get range", lambda: store.get(key, (0, 4))),
        ("get suffix", lambda: store.get(key, (-4, None))),
        ("get open range", lambda: store.get(key, (2, None))),
        ("get_many", lambda: store.get_many([(key, None), (key, (0, 4))])),
        ("get_transient", lambda: store.get_transient(key)),
        ("get_transient hint", lambda: store.get_transient(key, size_hint=4)),
        ("get_transient range", lambda: store.get_transient(key, (0, 4))),
        ("read_into", lambda: store.read_into([key], [memoryview(bytearray(4))])),
    ]


@pytest.mark.parametrize("kind", [*DEVICES, "fifo", "socket"])
def test_special_file_is_missing_on_every_read_path(tmp_path: Path, kind: str) -> None:
    store = LocalStore(tmp_path / "s")
    store.set("ok", b"1234")
    special(tmp_path / "s", "k", kind)
    for what, read in read_paths(store, "k"):
        got = bounded(read)
        assert got in (None, [None, None], [-1]), (what, got)
    assert not store.exists("k") and store.getsize("k") is None
    assert sorted(store.list_prefix("")) == ["ok"]
    assert store.get("ok") == b"1234"


@pytest.mark.parametrize("sharded", [False, True], ids=["chunked", "sharded"])
@pytest.mark.parametrize("kind", [*DEVICES, "fifo"])
def test_special_chunk_reads_as_fill_and_special_metadata_as_no_node(
    tmp_path: Path, kind: str, sharded: bool
) -> None:
    root = tmp_path / "s"
    layout: dict[str, Any] = dict(shards=(4,), chunks=(2,)) if sharded else dict(chunks=(4,))
    a = rectizarr.create_array(
        LocalStore(root), shape=(8,), dtype="u1", fill_value=7, compressors=None, **layout
    )
    a[:] = np.arange(8, dtype="u1")
    os.unlink(root / "c" / "1")
    special(root, "c/1", kind)
    for selection in (slice(None), slice(5, 6), [1, 6]):
        got = bounded(lambda s=selection: rectizarr.open_array(LocalStore(root), mode="r")[s])
        np.testing.assert_array_equal(got, np.array([0, 1, 2, 3, 7, 7, 7, 7], dtype="u1")[selection])
    special(root, "g/zarr.json", kind)
    with pytest.raises(NodeNotFoundError):
        bounded(lambda: rectizarr.open_group(LocalStore(root), path="g", mode="r"))
