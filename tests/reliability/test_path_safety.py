"""Names and keys that try to leave the store are refused everywhere; nothing appears outside the root."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import rectizarr
from rectizarr.errors import RectizarrError, StoreError
from rectizarr.stores import FsspecStore, LocalStore, MemoryStore, Store, ZipStore
from tests.reliability._helpers import snapshot

BAD = [
    "..",
    "../x",
    "a/../../x",
    "a/..",
    "./x",
    "x/./y",
    "../../../../../../tmp/escape",
    "%2e%2e",
    "%2e%2e/x",
    "a/%2e%2e/%2e%2e/x",
    "a%2f..%2f..%2fx",
    "%252e%252e/x",
    "%2E%2E%5cx",
    "x\x00y",
    "\x00",
    "..\\x",
    "a\\..\\..\\x",
    "\\abs",
    "C:\\x\\..\\..",
    "\ud800",
    "a/\udfff/b",  # lone surrogates: no UTF-8 form (once a UnicodeEncodeError)
]
# A leading '/' is the root in Zarr paths ("/a/b" == "a/b"): accepted, but it must stay inside the root.
ROOTED = ["/x", "//x", "/tmp/escape"]

KINDS = ["memory", "local", "zip", "fsspec-memory", "fsspec-file"]


@pytest.fixture(params=KINDS)
def store_in(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Path]]:
    root = tmp_path / "inner" / "root"
    root.mkdir(parents=True)
    kind = request.param
    store: Store
    if kind == "memory":
        store = MemoryStore()
    elif kind == "local":
        store = LocalStore(root)
    elif kind == "zip":
        store = ZipStore(root / "s.zip", mode="w")
    elif kind == "fsspec-memory":
        store = FsspecStore(f"memory://safety-{secrets.token_hex(6)}")
    else:
        store = FsspecStore(f"file://{root}")
    rectizarr.create_group(store).create_group("g")
    yield store, tmp_path
    store.close()


def _attempts(store: Store, name: str) -> list[tuple[str, Callable[[], Any]]]:
    kw = dict(shape=(4,), dtype="i1", chunks=(2,))
    g = rectizarr.open_group(store, path="g")
    return [
        ("create_array", lambda: rectizarr.create_array(store, name=name, **kw)),
        ("open_array a", lambda: rectizarr.open_array(store, path=name, mode="a", **kw)),
        ("open_array w", lambda: rectizarr.open_array(store, path=name, mode="w", **kw)),
        ("open_array r", lambda: rectizarr.open_array(store, path=name, mode="r")),
        ("create_group", lambda: rectizarr.create_group(store, path=name)),
        ("open_group a", lambda: rectizarr.open_group(store, path=name, mode="a")),
        ("open", lambda: rectizarr.open(store, path=name, mode="r")),
        ("Group.create_group", lambda: g.create_group(name)),
        ("Group.create_array", lambda: g.create_array(name, **kw)),
        ("Group.require_group", lambda: g.require_group(name)),
        ("Group[name]", lambda: g[name]),
        ("Group.delete", lambda: g.delete(name)),
        ("store.set", lambda: store.set(name, b"x")),
        ("store.set zarr.json", lambda: store.set(f"{name}/zarr.json", b"{}")),
        ("store.get", lambda: store.get(name)),
        ("store.delete", lambda: store.delete(name)),
        ("store.delete_prefix", lambda: store.delete_prefix(name + "/")),
    ]


@pytest.mark.parametrize("name", BAD)
def test_escaping_names_are_refused(store_in: tuple[Store, Path], name: str) -> None:
    store, outer = store_in
    before_keys = sorted(store.list_prefix(""))
    before = snapshot(outer)
    for what, attempt in _attempts(store, name):
        with pytest.raises(RectizarrError) as info:
            attempt()
        assert str(info.value), what
    assert sorted(store.list_prefix("")) == before_keys
    assert snapshot(outer) == before


@pytest.mark.parametrize("name", ROOTED)
def test_rooted_names_stay_inside(store_in: tuple[Store, Path], name: str) -> None:
    store, outer = store_in
    outside = {k: v for k, v in snapshot(outer).items() if not k.startswith("inner")}
    a = rectizarr.create_array(store, name=name, shape=(4,), dtype="i1", chunks=(2,))
    a[:] = 1
    assert a.path == name.strip("/")
    assert rectizarr.open_array(store, path=name.strip("/"), mode="r")[1] == 1
    assert {k: v for k, v in snapshot(outer).items() if not k.startswith("inner")} == outside
    assert not os.path.exists("/tmp/escape")


def test_symlink_leading_outside_is_never_written_through(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "keep").write_bytes(b"precious")
    store = LocalStore(root)
    rectizarr.create_group(store)
    os.symlink(outside, root / "link")
    os.symlink(outside / "keep", root / "filelink")
    before = snapshot(outside)
    g = rectizarr.open_group(store)
    attempts: list[Callable[[], Any]] = [
        lambda: rectizarr.create_array(store, name="link/x", shape=(4,), dtype="i1", chunks=(2,)),
        lambda: rectizarr.create_array(
            store, name="link", shape=(4,), dtype="i1", chunks=(2,), overwrite=True
        ),
        lambda: g.create_group("link/sub"),
        lambda: store.set("link/zarr.json", b"{}"),
        lambda: store.set("link/a/b", b"x"),
        lambda: store.delete("link/keep"),
        lambda: store.delete_prefix("link/"),
        lambda: rectizarr.create_group(store, path="link", overwrite=True),
    ]
    for attempt in attempts:
        with pytest.raises(RectizarrError):
            attempt()
    assert snapshot(outside) == before
    assert (outside / "keep").read_bytes() == b"precious"
    # A link to a file: replacing the key replaces the link, never the target.
    try:
        store.set("filelink", b"new")
    except RectizarrError:
        pass
    assert (outside / "keep").read_bytes() == b"precious"
    assert snapshot(outside) == before


def _swap_forever(root: str, outside: str, done: Any, swaps: Any) -> None:
    real, aside = os.path.join(root, "c"), os.path.join(root, "c.real")
    while not done.is_set():
        try:
            os.rename(real, aside)  # the directory aside, a link to outside in its place, and back
            os.symlink(outside, real, target_is_directory=True)
            os.unlink(real)
            os.rename(aside, real)
            with swaps.get_lock():
                swaps.value += 1
        except OSError:  # the store made "c" again meanwhile: drop that one, put the directory back
            with contextlib.suppress(OSError):
                if os.path.islink(real):
                    os.unlink(real)
                elif os.path.exists(aside):
                    shutil.rmtree(real, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.rename(aside, real)


class Swapper:
    """Another process that keeps swapping ``root/c`` between a real directory and a link to ``outside``
    (a process, not a thread: a thread waits for the GIL between its renames, and a writer holding it
    makes ``c`` again every time, so no swap would ever complete)."""

    def __init__(self, root: Path, outside: Path) -> None:
        context = multiprocessing.get_context("fork")
        self._done, self._swaps = context.Event(), context.Value("q", 0)
        self._process = context.Process(
            target=_swap_forever, args=(str(root), str(outside), self._done, self._swaps), daemon=True
        )

    @property
    def swaps(self) -> int:
        return int(self._swaps.value)

    def __enter__(self) -> Swapper:
        self._process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._process.join(10)
        if self._process.is_alive():  # pragma: no cover - a swapper stuck in a system call
            self._process.kill()
            self._process.join()


def _until_swapped(swapper: Swapper, at_least: int, swaps: int = 20, seconds: float = 60.0) -> Iterator[int]:
    """0, 1, 2, ... until ``at_least`` steps are done and the swapper has made ``swaps`` swaps (or
    ``seconds`` have passed: the caller's assertion on the swaps then fails)."""
    deadline = time.monotonic() + seconds
    i = 0
    while i < at_least or (swapper.swaps < swaps and time.monotonic() < deadline):
        yield i
        i += 1


def test_swapping_a_directory_for_an_outside_link_during_writes_never_writes_outside(tmp_path: Path) -> None:
    """One thread keeps swapping ``root/c`` between a real directory and a link to a directory outside the
    root while another writes keys under ``c/`` (a few hundred times): every write lands inside the root or
    is refused, never outside (the check and the write go through the same directory descriptor)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    outside.mkdir()
    store = LocalStore(root)
    store.set("c/first", b"v")
    refused = 0
    with Swapper(root, outside) as swapper:
        for i in _until_swapped(swapper, 300):  # at least 300 writes and 20 swaps
            try:
                if i % 3:
                    store.set(f"c/k{i}", b"x")
                else:
                    store.set_many({f"c/m{i}": b"y", f"c/d{i}/n": b"z"})
            except RectizarrError:
                refused += 1
            assert not any(outside.iterdir()), f"a file appeared outside the root at write {i}"
    assert not any(outside.iterdir())
    assert swapper.swaps >= 20 and refused < i


def test_swapping_a_directory_for_an_outside_link_during_deletes_never_deletes_outside(
    tmp_path: Path,
) -> None:
    """The same swapping while keys under ``c/`` are deleted one by one and by prefix: what lies outside
    under the same names is never removed."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    outside.mkdir()
    names = [f"k{i}" for i in range(50)]
    for name in names:
        (outside / name).write_bytes(b"precious")
        (outside / f"d{name}").mkdir()
        (outside / f"d{name}" / "n").write_bytes(b"precious")
    before = snapshot(outside)
    store = LocalStore(root)
    with Swapper(root, outside) as swapper:
        for i in _until_swapped(swapper, 300):  # at least 300 deletes and 20 swaps
            name = names[i % len(names)]
            try:
                store.set_many({f"c/{name}": b"x", f"c/d{name}/n": b"y"})
            except RectizarrError:
                pass
            with contextlib.suppress(RectizarrError):
                store.delete(f"c/{name}") if i % 2 else store.delete_prefix(f"c/d{name}/")
            assert snapshot(outside) == before, f"something outside the root changed at delete {i}"
    assert swapper.swaps >= 20


@pytest.mark.parametrize(
    "name",
    ["x" * 300, "é" * 200, "a/" + "b" * 256 + "/c", "/".join(["d" * 250] * 20)],
    ids=["300 bytes", "400 bytes utf-8", "long inner segment", "long path"],
)
def test_names_longer_than_the_file_system_allows(tmp_path: Path, name: str) -> None:
    """A node name or key the file system cannot hold: reads find nothing there, writes raise a StoreError
    naming the key, never a bare OSError."""
    store = LocalStore(tmp_path / "root")
    g = rectizarr.create_group(store)
    assert store.get(name) is None and store.get(name, (0, 4)) is None and store.get_transient(name) is None
    assert not store.exists(name) and store.getsize(name) is None
    assert store.list_dir(name + "/") == [] and list(store.list_prefix(name + "/")) == []
    assert name not in g
    with pytest.raises(rectizarr.errors.NodeNotFoundError):
        rectizarr.open_array(store, path=name, mode="r")
    for attempt in [
        lambda: rectizarr.create_array(store, name=name, shape=(4,), dtype="i1", chunks=(2,)),
        lambda: g.create_group(name),
        lambda: store.set(name, b"x"),
        lambda: store.set_many({"ok": b"1", name: b"x"}),
    ]:
        with pytest.raises(StoreError, match="longer than the file system allows") as info:
            attempt()
        assert repr(name)[:40] in str(info.value)
    assert store.get("ok") is None  # a batch is refused before anything of it is written
    assert sorted(store.list_prefix("")) == ["zarr.json"]  # no ancestor group of the refused node either
    store.delete(name)  # nothing there: nothing to do
    store.delete_prefix(name + "/")


def test_a_directory_descriptor_handed_out_stays_open_when_its_directory_vanishes(tmp_path: Path) -> None:
    """A batch write opens the descriptor of ``c`` for one key, then finds ``c`` removed while making
    ``c/d`` for another: ``c`` is walked to again, and the first descriptor stays open until the batch
    ends (closing it early failed the first write with EBADF, or let its number be reused)."""
    import os

    from rectizarr.stores.dirfd import Directories

    root = tmp_path / "root"
    (root / "c").mkdir(parents=True)
    with Directories(str(root), str(root.resolve()), create=True) as dirs:
        first = dirs.open("c", "c/x")
        assert first is not None
        os.rmdir(root / "c")  # removed by another process
        second = dirs.open("c/d", "c/d/y")
        assert second is not None and (root / "c" / "d").is_dir()
        # Still open, on the same (removed) directory: before, it was closed and its number reused at once
        # for the new ``c`` (so the first key's write would have gone there) or left dangling (EBADF).
        assert os.fstat(first).st_nlink == 0  # the removed directory, not the new ``c``
    with pytest.raises(OSError):
        os.fstat(first)  # closed with the others
