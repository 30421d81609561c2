"""Updates of several documents on object stores (rectizarr/commit.py, "stores with conditional writes"):
no writer locks there, so the states a killed or slow writer leaves are planted by hand (a young marker, an
old one, a committed record) on the moto S3 server through both backends, and writers SIGKILLed in a
consolidated group; after each kill the group's consolidated view agrees with every node's own document."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr import commit
from rectizarr.stores import Store, open_store
from tests.servers import S3Server

BACKENDS = ("obstore", "fsspec")


def _open(s3_server: S3Server, backend: str, bucket: str | None = None) -> tuple[Store, str]:
    bucket = bucket or s3_server.new_bucket(s3_server.filesystem())
    return open_store(f"s3://{bucket}", backend=backend, storage_options=s3_server.storage_options()), bucket


def _group(store: Store) -> None:
    g = rectizarr.create_group(store)
    g.create_array("x", shape=(4,), dtype="i4", chunks=(2,), fill_value=-1)[...] = [1, 2, 3, 4]
    g.create_array("y", shape=(4,), dtype="i4", chunks=(2,), fill_value=-1)[...] = [5, 6, 7, 8]
    rectizarr.consolidate_metadata(store)


def _doc(store: Store, key: str) -> dict[str, Any]:
    data = store.get(key)
    assert data is not None, key
    return json.loads(data)


def _prepare(store: Store, name: str, shape: list[int], ident: str, at: float) -> None:
    """What a writer's prepare step leaves: the new content and a marker holding the content before."""
    doc = _doc(store, f"{name}/zarr.json")
    before = dict(doc)
    doc["shape"] = shape
    doc[commit.MARK] = {"must_understand": False, "id": ident, "primary": "", "t": at, "before": before}
    store.set(f"{name}/zarr.json", json.dumps(doc).encode())


def _commit(store: Store, ident: str, members: list[str], shape: list[int], version: Any = None) -> bool:
    """What a writer's commit step writes: the root's consolidated entries and the record."""
    doc = _doc(store, "zarr.json")
    for name in members:
        doc["consolidated_metadata"]["metadata"][name]["shape"] = shape
    doc[commit.MARK] = {"must_understand": False, "id": ident, "members": members}
    if version is None:
        store.set("zarr.json", json.dumps(doc).encode())
        return True
    return store.set_if("zarr.json", json.dumps(doc).encode(), version)


def _views(store: Store) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each array's shape through the consolidated view and opened by itself."""
    g = rectizarr.open_group(store, mode="r")
    direct = {}
    for name in ("x", "y", "n0", "n1", "n2"):
        try:
            direct[name] = rectizarr.open_array(store, path=name, mode="r").shape
        except rectizarr.NodeNotFoundError:
            pass
    return {n: a.shape for n, a in g.arrays()}, direct


def _marks(store: Store) -> dict[str, Any]:
    return {
        k: _doc(store, k).get(commit.MARK) for k in sorted(store.list_prefix("")) if k.endswith("zarr.json")
    }


@pytest.mark.parametrize("backend", BACKENDS)
def test_updates_leave_only_the_primarys_id_and_zarr_python_reads_them(
    s3_server: S3Server, backend: str
) -> None:
    """Appends, resizes, attributes, creation and deletion in a consolidated group on S3: afterwards no
    member holds a marker, the group only an id (a fresh one at each update: its bytes never repeat), the
    consolidated view equals the nodes, and zarr-python reads the hierarchy."""
    store, bucket = _open(s3_server, backend)
    _group(store)
    ids = set()
    g = rectizarr.open_group(store)
    for step in (
        lambda: g["x"].append([5, 6]),
        lambda: g["y"].resize((2,)),
        lambda: g.create_group("sub").create_array("w", shape=(2, 2), dtype="f4", chunks=(1, 2)),
        lambda: g["sub"].attrs.update({"a": 1}),
        lambda: g.__delitem__("y"),
    ):
        step()
        marks = _marks(store)
        assert [k for k, m in marks.items() if m is not None] == ["zarr.json"], marks
        assert set(marks["zarr.json"]) == {"must_understand", "id", "done"}
        ids.add(marks["zarr.json"]["id"])
    assert len(ids) == 5
    assert _views(store) == ({"x": (6,)}, {"x": (6,)})
    assert rectizarr.open_array(store, path="x")[...].tolist() == [1, 2, 3, 4, 5, 6]
    zarr = pytest.importorskip("zarr")
    z = zarr.open_group(f"s3://{bucket}", mode="r", storage_options=s3_server.storage_options())
    assert sorted(z.keys()) == ["sub", "x"] and z["x"].shape == (6,) and z["sub/w"].shape == (2, 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_old_uncommitted_update_is_not_seen_and_the_next_writer_aborts_it(
    s3_server: S3Server, backend: str
) -> None:
    """Members prepared by a writer that never committed (a marker older than the lease): readers see
    every array as before; the next writer of one of them aborts that update (the group's document gets a
    fresh id, so the other writer's commit, a write at the version it read, is refused) and writes from
    the content before."""
    store, _ = _open(s3_server, backend)
    _group(store)
    _, version = store.get_versioned("zarr.json")  # what the killed writer read before preparing
    for name in ("x", "y"):
        _prepare(store, name, [6], "killed", time.time() - 60)
    assert _views(store) == ({"x": (4,), "y": (4,)}, {"x": (4,), "y": (4,)})
    rectizarr.open_array(store, path="x").append([9])
    assert _views(store) == ({"x": (5,), "y": (4,)}, {"x": (5,), "y": (4,)})
    assert rectizarr.open_array(store, path="x")[...].tolist() == [1, 2, 3, 4, 9]
    assert not _commit(store, "killed", ["x", "y"], [6], version)  # too late: it can never commit
    assert _views(store) == ({"x": (5,), "y": (4,)}, {"x": (5,), "y": (4,)})
    rectizarr.open_array(store, path="y").resize((2,))  # y's old marker: written over from before
    assert _views(store) == ({"x": (5,), "y": (2,)}, {"x": (5,), "y": (2,)})
    assert [k for k, m in _marks(store).items() if m is not None] == ["zarr.json"]


def test_a_young_marker_is_waited_for_and_its_commit_taken_up(s3_server: S3Server) -> None:
    """A writer at work (a fresh marker on ``x``) commits 0.4 s later: an append to ``x`` meanwhile waits
    for it instead of aborting it, then finishes its clean-up and appends after the new length."""
    store, _ = _open(s3_server, "obstore")
    _group(store)
    _, version = store.get_versioned("zarr.json")
    _prepare(store, "x", [6], "busy", time.time())
    committed: list[bool] = []
    late = threading.Timer(0.4, lambda: committed.append(_commit(store, "busy", ["x"], [6], version)))
    late.start()
    rectizarr.open_array(store, path="x").append([9])
    late.join()
    assert committed == [True]
    assert _views(store) == ({"x": (7,), "y": (4,)}, {"x": (7,), "y": (4,)})
    assert rectizarr.open_array(store, path="x")[...].tolist() == [1, 2, 3, 4, -1, -1, 9]
    assert [k for k, m in _marks(store).items() if m is not None] == ["zarr.json"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_committed_update_is_seen_whole_and_finished_by_the_next_writer(
    s3_server: S3Server, backend: str
) -> None:
    """Members prepared and the record committed, the writer killed before its clean-up: readers see the
    new content everywhere; the next writer (of the group's attributes) finishes the clean-up first."""
    store, _ = _open(s3_server, backend)
    _group(store)
    for name in ("x", "y"):
        _prepare(store, name, [6], "done", time.time() - 60)
    _commit(store, "done", ["x", "y"], [6])
    assert _views(store) == ({"x": (6,), "y": (6,)}, {"x": (6,), "y": (6,)})
    rectizarr.open_group(store).attrs["k"] = 1
    assert [k for k, m in _marks(store).items() if m is not None] == ["zarr.json"]
    assert set(_marks(store)["zarr.json"]) == {"must_understand", "id", "done"}
    assert _views(store) == ({"x": (6,), "y": (6,)}, {"x": (6,), "y": (6,)})


_WORKER = textwrap.dedent("""
    import json, random, sys
    import numpy as np
    import rectizarr
    from rectizarr.stores import open_store
    url, backend, options, seed = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    store = open_store(url, backend=backend, storage_options=options)
    g = rectizarr.open_group(store)
    print("ready", flush=True)
    while True:
        op = rng.randrange(5)
        names = [n for n, _ in g.arrays()]
        if op == 0 and names:
            g[rng.choice(names)].append(np.full((rng.randrange(1, 5),), 7, "i4"))
        elif op == 1 and names:
            g[rng.choice(names)].resize((rng.randrange(0, 20),))
        elif op == 2 and f"n{seed % 3}" not in names:
            g.create_array(f"n{seed % 3}", shape=(5,), dtype="i4", chunks=(4,), fill_value=0)
        elif op == 3 and len(names) > 1:
            del g[rng.choice(names)]
        else:
            g.attrs["k"] = rng.random()
""")


@pytest.mark.parametrize("backend", BACKENDS)
def test_kills_in_a_consolidated_group_on_s3_never_leave_a_disagreeing_view(
    s3_server: S3Server, backend: str
) -> None:
    """A writer SIGKILLed at random moments during appends, resizes, creation, deletion and attribute
    changes in a consolidated group on S3: after each kill the consolidated view agrees with every node's
    own document, and a new writer then works on every array."""
    store, bucket = _open(s3_server, backend)
    _group(store)
    options = json.dumps(s3_server.storage_options())
    rng = random.Random(36)
    bad = []
    for kill in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER, f"s3://{bucket}", backend, options, str(kill)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n", proc.communicate()
        time.sleep(0.2 + rng.random() * 0.6)
        if proc.poll() is not None:
            raise AssertionError(proc.communicate()[1].decode())
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        consolidated, direct = _views(store)
        if consolidated != direct:
            bad.append(f"kill {kill}: consolidated {consolidated} != stored {direct}")
    assert bad == []
    g = rectizarr.open_group(store)
    for _, a in g.arrays():
        a.resize((6,))
        a[...] = np.arange(6) + 1
    consolidated, direct = _views(store)
    assert consolidated == direct and all(shape == (6,) for shape in direct.values())


_RESIZE_WORKER = textwrap.dedent("""
    import json, random, sys
    import rectizarr
    from rectizarr.stores import open_store
    url, backend, options, seed = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    g = rectizarr.open_group(open_store(url, backend=backend, storage_options=options))
    print("ready", flush=True)
    while True:
        n = rng.randrange(1, 30)
        g.resize_arrays({"x": n, "y": n})
""")


@pytest.mark.parametrize("consolidated", [True, False])
def test_kills_during_resize_arrays_on_s3_leave_every_array_at_one_length(
    s3_server: S3Server, consolidated: bool
) -> None:
    """``Group.resize_arrays`` on S3 is one update (the group's document commits it where no ancestor
    consolidates): SIGKILLed at random moments, the arrays always read at one length, through the
    consolidated view and opened by themselves; the values kept are the values written."""
    store, bucket = _open(s3_server, "obstore")
    g = rectizarr.create_group(store)
    for name in ("x", "y"):
        g.create_array(name, shape=(40,), dtype="i4", chunks=(8,), fill_value=-1)[...] = np.arange(40)
    if consolidated:
        rectizarr.consolidate_metadata(store)
    options = json.dumps(s3_server.storage_options())
    rng = random.Random(35)
    lengths = []
    for kill in range(5):
        proc = subprocess.Popen(
            [sys.executable, "-c", _RESIZE_WORKER, f"s3://{bucket}", "obstore", options, str(kill)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n", proc.communicate()
        time.sleep(0.2 + rng.random() * 0.5)
        if proc.poll() is not None:
            raise AssertionError(proc.communicate()[1].decode())
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        direct = {n: rectizarr.open_array(store, path=n, mode="r").shape for n in ("x", "y")}
        lengths.append(direct)
        assert len(set(direct.values())) == 1, lengths
        if consolidated:
            assert {n: a.shape for n, a in rectizarr.open_group(store, mode="r").arrays()} == direct
    x = rectizarr.open_array(store, path="x")[...]
    assert set(x.tolist()) <= set(range(40)) | {-1}
    assert x[: min(len(x), 1)].tolist() == [0][: len(x)]


def test_resize_arrays_on_s3_is_seen_whole(s3_server: S3Server) -> None:
    """Both arrays resized at once (one grows, one shrinks), the regrown part reads as the fill value."""
    store, _ = _open(s3_server, "fsspec")
    _group(store)
    g = rectizarr.open_group(store)
    g.resize_arrays({"x": 2, "y": 6})
    assert _views(store) == ({"x": (2,), "y": (6,)}, {"x": (2,), "y": (6,)})
    g.resize_arrays({"x": 5, "y": 6})
    assert rectizarr.open_array(store, path="x")[...].tolist() == [1, 2, -1, -1, -1]
    assert rectizarr.open_array(store, path="y")[...].tolist() == [5, 6, 7, 8, -1, -1]
    assert [k for k, m in _marks(store).items() if m is not None] == ["zarr.json"]


_XR_WORKER = textwrap.dedent("""
    import json, sys
    import numpy as np
    import xarray as xr
    import rectizarr.xarray  # noqa: F401
    from rectizarr.stores import open_store
    url, backend, options, consolidated = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4] == "1"
    store = open_store(url, backend=backend, storage_options=options)
    n = xr.open_dataset(store, engine="rectizarr").sizes["time"]
    print("ready", flush=True)
    while True:
        t = np.arange(n, n + 3)
        ds = xr.Dataset({v: (("time", "x"), np.repeat(t[:, None] * 10 + i, 4, axis=1).astype("f8"))
                         for i, v in enumerate("abcd")}, coords={"time": t})
        ds.rectizarr.to_zarr(store, append_dim="time", consolidated=consolidated)
        n += 3
""")


@pytest.mark.parametrize(
    ("backend", "consolidated"), [("obstore", True), ("obstore", False), ("fsspec", True)]
)
def test_kills_during_xarray_appends_on_s3_leave_a_dataset_that_opens(
    s3_server: S3Server, backend: str, consolidated: bool
) -> None:
    """A process appending 3 time steps at a time to a 4-variable dataset on S3, SIGKILLed at random
    moments: the dataset always opens, every variable at one length, with the values written (before:
    the variables grew one after another, their data written after their documents)."""
    xr = pytest.importorskip("xarray")
    import rectizarr.xarray  # noqa: F401

    store, bucket = _open(s3_server, backend)
    t = np.arange(3)
    xr.Dataset(
        {
            v: (("time", "x"), np.repeat(t[:, None] * 10 + i, 4, axis=1).astype("f8"))
            for i, v in enumerate("abcd")
        },
        coords={"time": t},
    ).rectizarr.to_zarr(store, consolidated=consolidated)
    options = json.dumps(s3_server.storage_options())
    rng = random.Random(37)
    seen = []
    for _ in range(5):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _XR_WORKER,
                f"s3://{bucket}",
                backend,
                options,
                "1" if consolidated else "0",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n", proc.communicate()
        time.sleep(0.3 + rng.random() * 0.8)
        if proc.poll() is not None:
            raise AssertionError(proc.communicate()[1].decode())
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        ds = xr.open_dataset(store, engine="rectizarr", consolidated=consolidated)
        n = ds.sizes["time"]
        seen.append(n)
        assert n % 3 == 0 and ds["time"].values.tolist() == list(range(n))
        for i, v in enumerate("abcd"):
            assert (ds[v].values == np.arange(n)[:, None] * 10 + i).all(), (v, n)
    assert seen[-1] > 3  # (the writer got some appends done)


@pytest.mark.parametrize("cleaned_up", [False, True], ids=["alone", "cleaned-up-by-another"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_commit_whose_answer_is_lost_is_taken_as_made(
    s3_server: S3Server, backend: str, cleaned_up: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group's document (the commit) is written, and the writer told it was refused (a lost answer
    whose retry is refused: the document changed, by this very write); with ``cleaned_up``, another writer
    finishes the update before the writer looks again (its markers and record gone: the group's document
    names the last updates cleaned up, "done"). The writer finds its own update and takes it as made,
    once: a new node is made (not NodeExistsError), an append is applied once, a deletion is done.
    Before, it cleaned its update up as another's and then refused its own creation, and an append could
    grow twice (the 10-minute obstore soaks: 14, then 2 node violations)."""
    store, _ = _open(s3_server, backend)
    _group(store)
    g = rectizarr.open_group(store)
    set_if = type(store).set_if
    refused = []

    def landed_but_refused(self: Store, key: str, value: Any, version: Any) -> bool:
        ok = set_if(self, key, value, version)
        if ok and key == "zarr.json" and b'"members"' in bytes(value):
            if cleaned_up:
                commit.finish(self, "")  # another writer, at once
            refused.append(key)
            return False
        return ok

    monkeypatch.setattr(type(store), "set_if", landed_but_refused)
    g.create_group("n")
    rectizarr.open_array(store, path="x").append([9])
    del g["y"]
    monkeypatch.undo()
    assert len(refused) == 3
    assert sorted(rectizarr.open_group(store, mode="r").keys()) == ["n", "x"]
    assert rectizarr.open_array(store, path="x")[...].tolist() == [1, 2, 3, 4, 9]
    assert _views(store) == ({"x": (5,)}, {"x": (5,)})
    assert [k for k, m in _marks(store).items() if m is not None] == ["zarr.json"]
    assert set(_marks(store)["zarr.json"]) == {"must_understand", "id", "done"}
