"""mode="r" and read-only stores never create, modify or delete anything."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.errors import NodeNotFoundError, ReadOnlyError, RectizarrError
from rectizarr.stores import LocalStore, Store, ZipStore
from tests.reliability._helpers import snapshot


def _populate(store: Store) -> None:
    g = rectizarr.create_group(store, attributes={"a": 1})
    a = g.create_array("x", shape=(10, 8), dtype="f4", chunks=[[3, 7], 4], fill_value=np.nan)
    a[:] = np.arange(80, dtype="f4").reshape(10, 8)
    s = g.create_group("sub").create_array("s", shape=(8,), dtype="i2", shards=(4,), chunks=(2,))
    s[:] = 3
    rectizarr.consolidate_metadata(store)


def _reads(store: Store) -> None:
    g = rectizarr.open_group(store, mode="r")
    assert sorted(g.keys()) == ["sub", "x"]
    a = rectizarr.open_array(store, path="x", mode="r")
    assert a[2, 3] == 19 and a.oindex[[0, 9], ::-1].shape == (2, 8) and a.vindex[[1], [1]][0] == 9
    assert (rectizarr.open(store, path="sub/s", mode="r")[:] == 3).all()
    assert g.attrs["a"] == 1 and g.tree() and a.info and a.nchunks_initialized == 4
    g["sub"]["s"].blocks[1]


def _writes(store: Store) -> list[tuple[str, Callable[[], Any]]]:
    g = rectizarr.open_group(store, mode="r")
    a = rectizarr.open_array(store, path="x", mode="r")
    s = rectizarr.open_array(store, path="sub/s", mode="r")
    kw = dict(shape=(4,), dtype="i1", chunks=(2,))
    return [
        ("setitem", lambda: a.__setitem__((0, 0), 1.0)),
        ("oindex set", lambda: a.oindex.__setitem__(([1], [2]), 5.0)),
        ("sharded set", lambda: s.__setitem__(slice(None), 9)),
        ("resize", lambda: a.resize((4, 4))),
        ("append", lambda: a.append(np.zeros((1, 8), "f4"))),
        ("array attrs", lambda: a.attrs.__setitem__("k", 1)),
        ("array attrs del", lambda: g.attrs.__delitem__("a")),
        ("group attrs", lambda: g.attrs.update(k=2)),
        ("create_group", lambda: g.create_group("new")),
        ("create_array", lambda: g.create_array("new", **kw)),
        ("require_group", lambda: g.require_group("new2")),
        ("delete", lambda: g.delete("x")),
        ("delitem", lambda: g.__delitem__("sub")),
        ("top create_array", lambda: rectizarr.create_array(store, name="y", **kw)),
        ("top create_array overwrite", lambda: rectizarr.create_array(store, name="x", overwrite=True, **kw)),
        ("top create_group", lambda: rectizarr.create_group(store, path="z")),
        ("open_group a", lambda: rectizarr.open_group(store, path="new3", mode="a")),
        ("open_array w", lambda: rectizarr.open_array(store, path="x", mode="w", **kw)),
        ("consolidate", lambda: rectizarr.consolidate_metadata(store)),
        ("store.set", lambda: store.set("x/c/0/0", b"")),
        ("store.set_many", lambda: store.set_many({"q": b"1"})),
        ("store.delete", lambda: store.delete("x/zarr.json")),
        ("store.delete_many", lambda: store.delete_many(["x/zarr.json"])),
        ("store.delete_prefix", lambda: store.delete_prefix("")),
    ]


def _check_battery(store: Store, path: Path) -> None:
    before = snapshot(path)
    _reads(store)
    for what, attempt in _writes(store):
        with pytest.raises(ReadOnlyError) as info:
            attempt()
        assert str(info.value), what
    _reads(store)
    assert snapshot(path) == before


def test_read_only_local_store(tmp_path: Path) -> None:
    root = tmp_path / "d.zarr"
    _populate(LocalStore(root))
    _check_battery(LocalStore(root, read_only=True), tmp_path)
    _check_battery(rectizarr.open_store(str(root), mode="r"), tmp_path)


def test_mode_r_on_a_writable_store(tmp_path: Path) -> None:
    """A writable store opened with mode="r": arrays and groups refuse every write."""
    root = tmp_path / "d.zarr"
    store = LocalStore(root)
    _populate(store)
    before = snapshot(tmp_path)
    a = rectizarr.open_array(store, path="x", mode="r")
    g = rectizarr.open_group(store, mode="r")
    for attempt in (
        lambda: a.__setitem__(0, 1.0),
        lambda: a.resize((1, 1)),
        lambda: a.attrs.put({}),
        lambda: g.create_group("n"),
        lambda: g.delete("x"),
        lambda: g.attrs.put({}),
    ):
        with pytest.raises(ReadOnlyError):
            attempt()
    assert snapshot(tmp_path) == before


def test_read_only_zip_store(tmp_path: Path) -> None:
    zpath = tmp_path / "d.zip"
    w = ZipStore(zpath, mode="w")
    _populate(w)
    w.close()
    store = ZipStore(zpath, mode="r")
    _check_battery(store, tmp_path)
    store.close()
    _check_battery(rectizarr.open_store(str(zpath), mode="r"), tmp_path)


def test_read_only_open_of_a_missing_path_creates_nothing(tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    for attempt in (
        lambda: rectizarr.open_array(str(tmp_path / "nope.zarr"), mode="r"),
        lambda: rectizarr.open_group(str(tmp_path / "nope.zarr"), mode="r"),
        lambda: rectizarr.open(str(tmp_path / "nope.zarr"), mode="r"),
        lambda: rectizarr.open_array(str(tmp_path / "nope.zip"), mode="r"),
    ):
        with pytest.raises(RectizarrError) as info:
            attempt()
        assert isinstance(info.value, NodeNotFoundError | ReadOnlyError) or str(info.value)
    assert snapshot(tmp_path) == before
