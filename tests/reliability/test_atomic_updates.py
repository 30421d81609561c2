"""Updates of several documents that readers see whole or not at all, and that a killed writer cannot leave
half made (rectizarr/commit.py): the states an update passes through, planted by hand and read back;
processes SIGKILLed during appends, resizes, node creation and deletion in a consolidated group, and during
xarray appends of several variables; the group's consolidated view checked against every node's own
document after each kill, and the dataset opened at the old or the new length with the right values."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr import commit

SCALE = int(os.environ.get("RECTIZARR_STRESS_SCALE", "1"))


def _doc(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _put(path: Path, doc: dict[str, Any]) -> None:
    path.write_text(json.dumps(doc))


def _group(tmp_path: Path) -> Path:
    root = tmp_path / "g.zarr"
    g = rectizarr.create_group(root)
    g.create_array("x", shape=(4,), dtype="i4", chunks=(2,), fill_value=-1)[...] = [1, 2, 3, 4]
    g.create_array("y", shape=(4,), dtype="i4", chunks=(2,), fill_value=-1)[...] = [5, 6, 7, 8]
    rectizarr.consolidate_metadata(root)
    return root


def _prepare(root: Path, name: str, shape: list[int], ident: str, before: dict[str, Any] | None) -> None:
    doc = _doc(root / name / "zarr.json")
    doc["shape"] = shape
    doc["chunk_grid"]["configuration"]["chunk_shape"] = [2]
    doc[commit.MARK] = {"must_understand": False, "id": ident, "primary": "", "before": before}
    _put(root / name / "zarr.json", doc)


def _dead_pid() -> int:
    """The process id of a process of this machine that ran and ended."""
    run = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(run.stdout)


def _host() -> str:
    """This machine as writers name it (in temporary files and markers)."""
    import hashlib
    import socket

    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:6]


def _shapes(root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each member's shape as the consolidated view and as its own document (opened directly) give it."""
    g = rectizarr.open_group(root, mode="r")
    direct = {}
    for name in os.listdir(root):
        if (root / name / "zarr.json").exists():
            try:
                direct[name] = rectizarr.open_array(root, path=name, mode="r").shape
            except (rectizarr.NodeNotFoundError, rectizarr.NodeTypeError):
                pass
    return {n: a.shape for n, a in g.arrays()}, direct


def test_a_prepared_update_without_its_commit_is_not_seen(tmp_path: Path) -> None:
    """Members written with their new content and a marker, the primary not yet: readers (the consolidated
    view, each array opened by itself, the listing without consolidated metadata) see every array as
    before; zarr-python reads the documents too."""
    root = _group(tmp_path)
    for name in ("x", "y"):
        before = {k: v for k, v in _doc(root / name / "zarr.json").items()}
        _prepare(root, name, [6], "t1", before)
    assert _shapes(root) == ({"x": (4,), "y": (4,)}, {"x": (4,), "y": (4,)})
    assert {n: a.shape for n, a in rectizarr.open_group(root, mode="r", use_consolidated=False).arrays()} == {
        "x": (4,),
        "y": (4,),
    }
    zarr = pytest.importorskip("zarr")
    assert zarr.open_array(str(root / "x"), mode="r").shape == (
        6,
    )  # (the new content: it ignores the marker)
    # the next writer writes over it from the content before
    rectizarr.open_array(root, path="x").append([9])
    assert rectizarr.open_array(root, path="x", mode="r")[...].tolist() == [1, 2, 3, 4, 9]
    assert commit.MARK not in _doc(root / "x" / "zarr.json")
    assert _shapes(root) == ({"x": (5,), "y": (4,)}, {"x": (5,), "y": (4,)})


@pytest.mark.parametrize("alive", [False, True])
def test_a_young_marker_of_a_writer_of_this_machine_is_waited_for_only_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, alive: bool
) -> None:
    """An uncommitted marker written a moment ago names its writer's process and machine: the next writer
    aborts it at once when that process no longer runs (a killed local writer), and waits for it (up to
    ``commit.LEASE``) while it does."""
    import threading

    root = _group(tmp_path)
    pid = os.getpid() if alive else _dead_pid()
    monkeypatch.setattr(commit, "LEASE", 0.5 if alive else 3600.0)  # (3600: waited for, it would hang)
    host = _host()
    _prepare(root, "x", [6], "t8", _doc(root / "x" / "zarr.json"))
    doc = _doc(root / "x" / "zarr.json")
    doc[commit.MARK].update(t=time.time(), by=f"{pid}-{host}")
    _put(root / "x" / "zarr.json", doc)
    done = threading.Thread(target=lambda: rectizarr.open_array(root, path="x").append([9]), daemon=True)
    done.start()
    done.join(120)
    assert not done.is_alive(), "the next writer waited for a writer that no longer runs"
    assert rectizarr.open_array(root, path="x", mode="r")[...].tolist() == [1, 2, 3, 4, 9]
    assert commit.MARK not in _doc(root / "x" / "zarr.json")
    assert _shapes(root) == ({"x": (5,), "y": (4,)}, {"x": (5,), "y": (4,)})


def test_a_committed_update_is_seen_whole_and_finished_by_the_next_writer(tmp_path: Path) -> None:
    """The primary holds the record: every member is seen with its new content, also the one whose
    marker is still there; the next writer of the group drops the markers, then the record."""
    root = _group(tmp_path)
    for name in ("x", "y"):
        _prepare(root, name, [6], "t2", _doc(root / name / "zarr.json"))
    group = _doc(root / "zarr.json")
    for name in ("x", "y"):
        group["consolidated_metadata"]["metadata"][name]["shape"] = [6]
    group[commit.MARK] = {"must_understand": False, "id": "t2", "members": ["x", "y"]}
    _put(root / "zarr.json", group)
    assert _shapes(root) == ({"x": (6,), "y": (6,)}, {"x": (6,), "y": (6,)})
    assert rectizarr.open_array(root, path="y", mode="r")[...].tolist() == [5, 6, 7, 8, -1, -1]
    rectizarr.open_group(root).attrs["k"] = 1
    assert all(
        commit.MARK not in _doc(p)
        for p in (root / "zarr.json", root / "x" / "zarr.json", root / "y" / "zarr.json")
    )
    assert _shapes(root) == ({"x": (6,), "y": (6,)}, {"x": (6,), "y": (6,)})


def test_a_new_node_never_committed_is_not_there(tmp_path: Path) -> None:
    """A member document marked as new (``before`` null) without its commit: no reader sees the node,
    and creating it again works."""
    root = _group(tmp_path)
    (root / "z").mkdir()
    doc = _doc(root / "x" / "zarr.json")
    doc[commit.MARK] = {"must_understand": False, "id": "t3", "primary": "", "before": None}
    _put(root / "z" / "zarr.json", doc)
    g = rectizarr.open_group(root, mode="r")
    assert "z" not in g.keys()
    assert "z" not in rectizarr.open_group(root, mode="r", use_consolidated=False).keys()
    with pytest.raises(rectizarr.NodeNotFoundError):
        rectizarr.open_array(root, path="z", mode="r")
    rectizarr.open_group(root).create_array("z", shape=(3,), dtype="u1", chunks=(3,))
    assert rectizarr.open_group(root, mode="r")["z"].shape == (3,)


def test_updates_leave_no_marker_and_zarr_python_reads_them(tmp_path: Path) -> None:
    """Appends, resizes, attributes, creation and deletion in a consolidated group: afterwards no document
    holds a marker or record, the consolidated view equals the nodes, and zarr-python agrees."""
    root = _group(tmp_path)
    g = rectizarr.open_group(root)
    g["x"].append([5, 6])
    g["y"].resize((2,))
    g.create_group("sub").create_array("w", shape=(2, 2), dtype="f4", chunks=(1, 2))
    g["sub"].attrs["a"] = 1
    del g["y"]
    for doc in root.rglob("zarr.json"):
        assert commit.MARK not in _doc(doc), doc
    consolidated, direct = _shapes(root)
    assert consolidated == direct == {"x": (6,)}
    zarr = pytest.importorskip("zarr")
    z = zarr.open_group(str(root), mode="r")
    assert sorted(z.keys()) == ["sub", "x"] and z["x"].shape == (6,) and z["sub/w"].shape == (2, 2)


_WORKER = textwrap.dedent("""
    import random, sys
    import numpy as np
    import rectizarr
    root, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    g = rectizarr.open_group(root)
    while True:
        op = rng.randrange(5)
        names = [n for n, _ in g.arrays()]
        if op == 0 and names:
            a = g[rng.choice(names)]
            a.append(np.full((rng.randrange(1, 9), 3), 7, "i4"))
        elif op == 1 and names:
            a = g[rng.choice(names)]
            a.resize((rng.randrange(0, 40), 3))
        elif op == 2 and f"n{seed % 6}" not in names:
            g.create_array(f"n{seed % 6}", shape=(5, 3), dtype="i4", chunks=(4, 3), fill_value=0)
        elif op == 3 and len(names) > 1:
            del g[rng.choice(names)]
        else:
            g.attrs["k"] = rng.random()
""")


def _agree(root: Path) -> list[str]:
    """Where the consolidated view and the stored nodes disagree (shape, dtype, members)."""
    g = rectizarr.open_group(root, mode="r")
    view = {n: (a.shape, a.dtype) for n, a in g.arrays()}
    own = {}
    for name in sorted(os.listdir(root)):
        if (root / name).is_dir():
            try:
                a = rectizarr.open_array(root, path=name, mode="r")
            except (rectizarr.NodeNotFoundError, rectizarr.NodeTypeError):
                continue
            own[name] = (a.shape, a.dtype)
    return [] if view == own else [f"consolidated {view} != stored {own}"]


def _kill_after(args: list[str], seconds: float, ready: bool = False) -> None:
    """Run a worker script and SIGKILL it ``seconds`` after it starts or, with ``ready``, after it prints
    its first line (its imports done: a loaded machine may take seconds to import xarray)."""
    proc = subprocess.Popen(
        [sys.executable, *args], stderr=subprocess.PIPE, stdout=subprocess.PIPE if ready else None
    )
    if ready and proc.stdout is not None and not proc.stdout.readline():
        raise AssertionError(proc.stderr.read().decode() if proc.stderr else "worker stopped")
    time.sleep(seconds)
    if proc.poll() is not None:
        raise AssertionError(proc.stderr.read().decode() if proc.stderr else "worker stopped")
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_kills_in_a_consolidated_group_never_leave_a_disagreeing_view(tmp_path: Path) -> None:
    """A writer SIGKILLed at random moments during appends, resizes, node creation and deletion and
    attribute changes in a consolidated group: after each kill the consolidated view agrees with every
    node's own document (before: 3 of 30 kills disagreed)."""
    root = tmp_path / "g.zarr"
    g = rectizarr.create_group(root)
    g.create_array("a", shape=(5, 3), dtype="i4", chunks=(4, 3), fill_value=0)
    rectizarr.consolidate_metadata(root)
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    rng = random.Random(35)
    bad = []
    for kill in range(8 * SCALE):
        _kill_after([str(script), str(root), str(kill)], 0.6 + rng.random() * 0.5)
        bad += [f"kill {kill}: {problem}" for problem in _agree(root)]
    assert bad == []
    # the next writer (a new process) rewrites every array: the killed writers' temporary files in each
    # directory it writes to are gone, and so are those of deleted nodes (those of chunk rows past its 48
    # rows, 12 chunks, stay until a writer writes there: a killed append's chunk that never landed is not in
    # the listing the shrink deletes)
    subprocess.run([sys.executable, "-c", _REWRITE, str(root)], check=True)
    written = [p for p in _leftovers(root) if not (p.count("/") == 3 and int(p.split("/")[2]) >= 12)]
    assert written == []


_REWRITE = textwrap.dedent("""
    import sys
    import numpy as np
    import rectizarr
    g = rectizarr.open_group(sys.argv[1])
    for _, a in g.arrays():
        a.resize((48, 3))
        a[...] = np.arange(a.size, dtype=a.dtype).reshape(a.shape) + 1
    g.attrs["done"] = True
""")


def _leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*.tmp"))


_XR_WORKER = textwrap.dedent("""
    import sys
    import numpy as np
    import xarray as xr
    import rectizarr.xarray  # noqa: F401
    path, consolidated = sys.argv[1], sys.argv[2] == "1"
    n = xr.open_dataset(path, engine="rectizarr").sizes["time"]
    print("ready", flush=True)
    while True:
        t = np.arange(n, n + 3)
        ds = xr.Dataset({v: (("time", "x"), np.repeat(t[:, None] * 10 + i, 4, axis=1).astype("f8"))
                         for i, v in enumerate("abcd")}, coords={"time": t})
        ds.rectizarr.to_zarr(path, append_dim="time", consolidated=consolidated)
        n += 3
""")


@pytest.mark.parametrize("zarr_format", [3, 2])
@pytest.mark.parametrize("consolidated", [True, False])
def test_kills_during_xarray_appends_leave_a_dataset_that_opens(
    tmp_path: Path, consolidated: bool, zarr_format: int
) -> None:
    """A process appending 3 time steps at a time to a 4-variable dataset, SIGKILLed at random moments: the
    dataset always opens, every variable at the same length (a multiple of 3), with the right values
    (before: 11 of 20 kills left it unopenable)."""
    xr = pytest.importorskip("xarray")
    import rectizarr.xarray  # noqa: F401

    path = tmp_path / "d.zarr"
    t = np.arange(3)
    xr.Dataset(
        {
            v: (("time", "x"), np.repeat(t[:, None] * 10 + i, 4, axis=1).astype("f8"))
            for i, v in enumerate("abcd")
        },
        coords={"time": t},
    ).rectizarr.to_zarr(path, consolidated=consolidated, zarr_format=zarr_format)
    script = tmp_path / "worker.py"
    script.write_text(_XR_WORKER)
    rng = random.Random(36)
    lengths = []
    for _ in range(3 * SCALE):
        _kill_after([str(script), str(path), "1" if consolidated else "0"], 1.0 + rng.random(), ready=True)
        ds = xr.open_dataset(path, engine="rectizarr", consolidated=consolidated)
        n = ds.sizes["time"]
        lengths.append(n)
        assert n % 3 == 0
        assert ds.time.values.tolist() == list(range(n))
        for i, v in enumerate("abcd"):
            assert ds[v].shape == (n, 4)
            assert np.array_equal(ds[v].values, np.repeat(np.arange(n)[:, None] * 10 + i, 4, axis=1))
    assert lengths[-1] > 3  # appends happened


def test_a_killed_writers_temporary_files_are_removed_by_the_next_writer(tmp_path: Path) -> None:
    """Temporary files whose writer process is gone (planted: the process ran and ended) are removed by the
    next process writing into their directory, also one that only deletes there; a running writer's and
    another machine's are kept."""
    root = tmp_path / "g.zarr"
    g = rectizarr.create_group(root)
    g.create_array("a", shape=(8,), dtype="i4", chunks=(4,), fill_value=0)[...] = 1
    dead, host = _dead_pid(), _host()
    planted = {
        "zarr.json": f".zarr.json.p{dead}-{host}.0123456789abcdef.tmp",
        "a/zarr.json": f".zarr.json.p{dead}-{host}.0123456789abcde0.tmp",
        "a/c/0": f".0.p{dead}-{host}.0123456789abcde1.tmp",
        "a/c/1": f".1.p{dead}-{host}.0123456789abcde2.tmp",
    }
    kept = [
        root / f".zarr.json.p{os.getpid()}-{host}.0123456789abcde3.tmp",  # running
        root / f".zarr.json.p{dead}-{'f' if host[0] != 'f' else 'e'}{host[1:]}.0123456789abcde4.tmp",
    ]
    for key, name in planted.items():
        (root / key).parent.joinpath(name).write_bytes(b"half")
    for path in kept:
        path.write_bytes(b"half")
    subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        import sys
        import rectizarr
        g = rectizarr.open_group(sys.argv[1])
        g.attrs["k"] = 1
        a = g["a"]
        a.append([2, 2])
        a[0:4] = 0  # a chunk of the fill value: deleted, not written
    """),
            str(root),
        ],
        check=True,
    )
    assert [p for p in kept if p.exists()] == kept
    assert [k for k, name in planted.items() if (root / k).parent.joinpath(name).exists()] == []


def test_resize_arrays_is_one_update(tmp_path: Path) -> None:
    """``Group.resize_arrays`` grows and shrinks several arrays as one update: the consolidated view and
    each array agree, a shrink's clean-up is done (a later grow shows the fill value), no marker stays; in
    memory too; a bad shape changes nothing."""
    for store in (tmp_path / "g.zarr", rectizarr.MemoryStore()):
        g = rectizarr.create_group(store)
        g.create_array("x", shape=(6,), dtype="i4", chunks=(4,), fill_value=-1)[...] = 1
        g.create_array("y", shape=(6, 2), dtype="f4", chunks=(4, 2), fill_value=0)[...] = 2
        rectizarr.consolidate_metadata(store)
        g = rectizarr.open_group(store)
        g.resize_arrays({"x": 3, "y": (9, 2)})
        assert (g["x"].shape, g["y"].shape) == ((3,), (9, 2))
        fresh = rectizarr.open_group(store, mode="r")
        assert {n: a.shape for n, a in fresh.arrays()} == {"x": (3,), "y": (9, 2)}
        assert rectizarr.open_array(store, path="y", mode="r")[...][:, 0].tolist() == [2] * 6 + [0] * 3
        g.resize_arrays({"x": 8})
        assert rectizarr.open_array(store, path="x", mode="r")[...].tolist() == [1, 1, 1] + [-1] * 5
        with pytest.raises(rectizarr.MetadataError):
            g.resize_arrays({"x": 2, "y": (1,)})
        assert {n: a.shape for n, a in rectizarr.open_group(store, mode="r").arrays()} == {
            "x": (8,),
            "y": (9, 2),
        }
        if isinstance(store, Path):
            assert all(commit.MARK not in _doc(p) for p in store.rglob("zarr.json"))


_RESIZER = textwrap.dedent("""
    import random, sys
    import rectizarr
    g = rectizarr.open_group(sys.argv[1])
    rng = random.Random(int(sys.argv[2]))
    while True:
        n = rng.randrange(1, 60)
        g.resize_arrays({name: (n, 2) for name in "abcdef"})
""")


def test_kills_during_resize_arrays_leave_every_array_at_one_length(tmp_path: Path) -> None:
    """A writer resizing six arrays together, SIGKILLed at random moments, consolidated or not: every
    reader sees the six at one length."""
    for consolidated in (True, False):
        root = tmp_path / f"g{consolidated}.zarr"
        g = rectizarr.create_group(root)
        for name in "abcdef":
            g.create_array(name, shape=(1, 2), dtype="u1", chunks=(4, 2))
        if consolidated:
            rectizarr.consolidate_metadata(root)
        script = tmp_path / "resizer.py"
        script.write_text(_RESIZER)
        rng = random.Random(37)
        for kill in range(4 * SCALE):
            _kill_after([str(script), str(root), str(kill)], 0.5 + rng.random() * 0.4)
            view = {a.shape for _, a in rectizarr.open_group(root, mode="r").arrays()}
            own = {rectizarr.open_array(root, path=n, mode="r").shape for n in "abcdef"}
            assert len(view) == 1 and view == own, (consolidated, kill, view, own)


def test_readers_during_updates_see_one_length_through_consolidated_metadata(tmp_path: Path) -> None:
    """Threads reading while another resizes four arrays together again and again: every read of the
    consolidated view shows the four at one length, and every array opened by itself opens (its marker,
    when it has one, decided) at a length the writer set: 0 mixed views, 0 errors."""
    import threading

    root = tmp_path / "g.zarr"
    g = rectizarr.create_group(root)
    for name in "abcd":
        g.create_array(name, shape=(1,), dtype="u1", chunks=(8,))
    rectizarr.consolidate_metadata(root)
    lengths = list(range(1, 40))
    stop = threading.Event()
    mixed: list[Any] = []
    errors: list[str] = []
    reads = [0]

    def read() -> None:
        while not stop.is_set():
            try:
                view = {a.shape for _, a in rectizarr.open_group(root, mode="r").arrays()}
                own = rectizarr.open_array(root, path=random.choice("abcd"), mode="r").shape
            except Exception as exc:  # counted
                errors.append(repr(exc))
                continue
            reads[0] += 1
            if len(view) != 1 or own[0] not in lengths:
                mixed.append((view, own))

    threads = [threading.Thread(target=read) for _ in range(3)]
    for t in threads:
        t.start()
    w = rectizarr.open_group(root)
    for i in range(60 * SCALE):
        n = lengths[i % len(lengths)]
        w.resize_arrays({name: n for name in "abcd"})
    stop.set()
    for t in threads:
        t.join()
    assert (mixed, errors) == ([], [])
    assert reads[0] > 0


def test_zarr_v2_updates_resolve_the_same_way(tmp_path: Path) -> None:
    """Zarr v2: a ``.zarray`` prepared with a marker is seen as before until its record is in the group's
    ``.zmetadata`` (or ``.zgroup``); with the record it is seen as after, and the next writer cleans up."""
    for consolidated in (True, False):
        root = tmp_path / f"v2{consolidated}.zarr"
        g = rectizarr.create_group(root, zarr_format=2)
        g.create_array("x", shape=(4,), dtype="i4", chunks=(2,), fill_value=-1, zarr_format=2)[...] = [
            1,
            2,
            3,
            4,
        ]
        if consolidated:
            rectizarr.consolidate_metadata(root)
        record_key = root / (".zmetadata" if consolidated else ".zgroup")
        before = _doc(root / "x" / ".zarray")
        _put(
            root / "x" / ".zarray",
            {
                **before,
                "shape": [6],
                commit.MARK: {
                    "must_understand": False,
                    "id": "v",
                    "record": record_key.name,
                    "before": before,
                },
            },
        )
        assert rectizarr.open_array(root, path="x", mode="r").shape == (4,)
        record = _doc(record_key)
        if consolidated:
            record["metadata"]["x/.zarray"]["shape"] = [6]
        _put(
            record_key,
            {**record, commit.MARK: {"must_understand": False, "id": "v", "members": ["x/.zarray"]}},
        )
        assert rectizarr.open_array(root, path="x", mode="r")[...].tolist() == [1, 2, 3, 4, -1, -1]
        assert rectizarr.open_group(root, mode="r")["x"].shape == (6,)
        rectizarr.open_group(root).resize_arrays({"x": 7})
        assert commit.MARK not in _doc(root / "x" / ".zarray") and commit.MARK not in _doc(record_key)
        assert rectizarr.open_group(root, mode="r")["x"].shape == (7,)
