"""The soak history checker (scripts/soak_history.py) catches each kind of violation planted into a small
synthetic history, flags nothing in clean ones (overlapping writes, unknown outcomes, shrink and regrow),
and a short real soak (scripts/soak.py: client processes on a local directory, one SIGKILL) ends with none."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("soak_history", ROOT / "scripts" / "soak_history.py")
assert _spec is not None and _spec.loader is not None
sh = importlib.util.module_from_spec(_spec)
sys.modules["soak_history"] = sh
_spec.loader.exec_module(sh)

ARRAYS = {
    "a": {"rows": 2, "cols": 4, "growing": False},  # never resized
    "g": {"rows": 2, "cols": 2, "growing": True, "max_rows": 8},  # grows and shrinks
}


class Hist:
    """A synthetic history: operations with explicit times, written as soak.py's clients write them."""

    def __init__(self, tmp: Path) -> None:
        self.dir = tmp / "history"
        self.dir.mkdir()
        self.recs: dict[int, Any] = {}
        self.seq: Counter[int] = Counter()
        self.kills: list[dict[str, float]] = []
        self.final: list[dict[str, Any]] = []
        self.setup()

    def op(
        self,
        proc: int,
        kind: str,
        inv: float,
        ret: float | None,
        status: str = "ok",
        res: dict[str, Any] | None = None,
        **args: Any,
    ) -> int:
        """One operation; ``ret`` None (or status ``killed``): no completion recorded. Arguments given as
        functions are called with the operation's id."""
        self.seq[proc] += 1
        op = sh.op_id(proc, 0, self.seq[proc])
        if proc not in self.recs:
            self.recs[proc] = sh.Recorder(self.dir / f"p{proc}.jsonl")
        rec = self.recs[proc]
        rec.invoke(op, kind, t=inv, **{k: (v(op) if callable(v) else v) for k, v in args.items()})
        if ret is not None and status != "killed":
            rec.complete(
                op, status, t=ret, **{k: (v(op) if callable(v) else v) for k, v in (res or {}).items()}
            )
        return op

    def write(
        self,
        proc: int,
        arr: str,
        cells: list[tuple[int, int]],
        inv: float,
        ret: float | None,
        status: str = "ok",
    ) -> int:
        rows, cols = zip(*cells, strict=True)
        return self.op(proc, "write", inv, ret, status, arr=arr, el=sh.pack(sh.flat(_a(rows), _a(cols))))

    def read(
        self,
        proc: int,
        arr: str,
        seen: list[tuple[int, int, int]],
        inv: float,
        ret: float,
        final: bool = False,
        units: list[int] | None = None,
    ) -> int:
        rows, cols, vals = zip(*seen, strict=True)
        res = {
            "el": sh.pack(sh.flat(_a(rows), _a(cols))),
            "val": sh.pack(list(vals)),
            "unit": sh.pack(units or [0] * len(vals)),
        }
        return self.op(proc, "read", inv, ret, res=res, arr=arr, final=final)

    def setup(self) -> None:
        """Process 0 at t 0-1: the arrays (every element written), the root's attributes, no node."""
        for name, spec in ARRAYS.items():
            self.op(0, "init", 0.0, 0.5, arr=name, n=spec["rows"])
            self.setup_write = getattr(self, "setup_write", {})
            self.setup_write[name] = self.write(
                0, name, [(r, c) for r in range(spec["rows"]) for c in range(spec["cols"])], 0.5, 1.0
            )
        self.root_attrs = self.op(0, "attrs", 0.0, 1.0, doc="", set=lambda op: dict.fromkeys(sh.KEYS, op))

    store_kind = "synthetic"

    def check(self, store_dir: Path | None = None) -> Any:
        for rec in self.final:
            self.recs[0].record({"ev": "final", **rec})
        (self.dir / "run.json").write_text(
            json.dumps(
                {
                    "store": self.store_kind,
                    "seconds": 10,
                    "clients": 2,
                    "threads": 1,
                    "arrays": ARRAYS,
                    "kills": self.kills,
                    "kill_slack": 0.5,
                    "err_slack": 0.1,
                    "faults": {},
                }
            )
        )
        for rec in self.recs.values():
            rec.close()
        report, _ = sh.check(self.dir, store_dir)
        return report


def _a(xs: Any) -> Any:
    import numpy as np

    return np.asarray(xs, dtype=np.int64)


def v(op: int, r: int, c: int) -> int:
    return int(sh.encode(op, r, c))


def kinds(report: Any) -> Counter[str]:
    return report.by_kind()


@pytest.fixture
def h(tmp_path: Path) -> Hist:
    return Hist(tmp_path)


# ------------------------------------------------------------------------------------------- clean
def test_clean_history_with_overlapping_and_unknown_operations(h: Hist, tmp_path: Path) -> None:
    s = h.setup_write["a"]
    w1 = h.write(1, "a", [(0, 0), (0, 1)], 2.0, 5.0)
    w2 = h.write(2, "a", [(0, 0), (0, 1)], 3.0, 4.0)  # inside w1's interval: either may be last
    h.read(1, "a", [(0, 0, v(w2, 0, 0)), (0, 1, v(w2, 0, 1))], 3.5, 3.6)  # w2 already, before it returned
    h.read(2, "a", [(0, 0, v(w1, 0, 0)), (0, 1, v(w1, 0, 1))], 6.0, 7.0)  # w1 last: allowed
    h.read(1, "a", [(0, 0, v(w2, 0, 0)), (0, 1, v(w2, 0, 1))], 8.0, 9.0)  # w2 last: allowed too
    h.read(2, "a", [(1, 0, v(s, 1, 0)), (1, 1, v(s, 1, 1))], 2.0, 3.0)
    # an operation killed half-way, and one that raised: their values may or may not show, at any time
    killed = h.write(3, "a", [(1, 2), (1, 3)], 10.0, None)
    h.kills.append({"proc": 3, "t": 10.5, "wall": 0.0})
    failed = h.write(2, "a", [(1, 0)], 10.0, 10.2, status="err")
    h.read(1, "a", [(1, 2, v(killed, 1, 2)), (1, 3, v(killed, 1, 3)), (1, 0, v(failed, 1, 0))], 11.0, 12.0)
    h.read(2, "a", [(1, 2, v(s, 1, 2)), (1, 3, v(s, 1, 3)), (1, 0, v(s, 1, 0))], 11.0, 12.0)
    # a growing array: append, shrink (the rows past the end read as fill after the regrow), append again
    app = h.op(1, "append", 13.0, 14.0, res={"n": 4}, arr="g", k=2)
    h.read(2, "g", [(2, 0, -1), (3, 1, -1)], 13.5, 13.9)  # during the append: its rows not written yet
    h.read(2, "g", [(2, 0, v(app, 0, 0)), (3, 1, v(app, 1, 1))], 14.5, 15.0)
    h.op(1, "resize", 16.0, 17.0, arr="g", n=1)
    h.op(2, "resize", 18.0, 19.0, arr="g", n=5)
    h.read(1, "g", [(2, 0, -1), (3, 1, -1), (0, 0, v(h.setup_write["g"], 0, 0))], 20.0, 21.0, final=True)
    app2 = h.op(5, "append", 22.0, None, arr="g", k=1)  # killed: where it landed is known only from reads
    h.kills.append({"proc": 5, "t": 22.5, "wall": 0.0})
    h.read(1, "g", [(5, 0, v(app2, 0, 0)), (5, 1, v(app2, 0, 1))], 23.0, 24.0)
    h.op(1, "meta", 23.0, 24.0, res={"attrs": {}, "n": 6}, doc="g")  # the killed append's extent
    # attributes, overlapping updates; a node made, found, deleted
    a1 = h.op(1, "attrs", 25.0, 27.0, doc="", set=lambda op: {"k0": op, "k1": op})
    a2 = h.op(3 + 1, "attrs", 26.0, 26.5, doc="", set=lambda op: {"k1": op})
    r = h.root_attrs
    h.op(1, "meta", 28.0, 29.0, res={"attrs": {"k0": a1, "k1": a2, "k2": r, "k3": r}}, doc="")
    made = h.op(1, "create", 30.0, 31.0, node="nodes/n0", res={})
    h.op(2, "create", 30.5, 31.5, status="fail", node="nodes/n0", res={"exc": "NodeExistsError"})
    h.op(2, "exists", 32.0, 33.0, res={"born": made}, node="nodes/n0")
    h.op(1, "delete", 34.0, 35.0, node="nodes/n0")
    h.op(2, "exists", 36.0, 37.0, res={"born": None}, node="nodes/n0", final=True)
    # a temporary file left by the killed process: allowed
    store = tmp_path / "store"
    store.mkdir()
    (store / ".c.0123456789abcdef.tmp").write_bytes(b"x")
    h.kills[0]["wall"] = time.time()
    report = h.check(store)
    assert report.violations == [], report.violations
    assert report.notes["temporary files of killed clients"] == 1
    assert (
        report.checked["elements"] >= 20
        and report.checked["attributes"] == 8
        and report.checked["nodes"] == 5
    )


# -------------------------------------------------------------------------------------- violations
def test_a_lost_write_is_caught(h: Hist) -> None:
    s = h.setup_write["a"]
    h.write(1, "a", [(0, 0)], 2.0, 3.0)  # acknowledged ...
    h.read(0, "a", [(0, 0, v(s, 0, 0))], 10.0, 11.0, final=True)  # ... and gone after the run
    assert kinds(h.check()) == {"lost-write": 1}


def test_a_stale_read_is_caught(h: Hist) -> None:
    s = h.setup_write["a"]
    h.write(1, "a", [(0, 0)], 2.0, 3.0)
    h.read(2, "a", [(0, 0, v(s, 0, 0))], 3.5, 4.0)  # began after the write returned: must see it
    assert kinds(h.check()) == {"stale-read": 1}


def test_a_shrink_then_grow_showing_old_values_is_stale(h: Hist) -> None:
    s = h.setup_write["g"]
    h.op(1, "resize", 2.0, 3.0, arr="g", n=1)
    h.op(1, "resize", 4.0, 5.0, arr="g", n=2)
    h.read(2, "g", [(1, 0, v(s, 1, 0))], 6.0, 7.0)  # row 1 was cut: the fill value, not its old value
    assert kinds(h.check()) == {"stale-read": 1}


def test_a_torn_chunk_is_caught(h: Hist) -> None:
    w1 = h.write(1, "a", [(0, 0), (0, 1)], 2.0, 5.0)
    w2 = h.write(2, "a", [(0, 0), (0, 1)], 3.0, 6.0)  # concurrent: each element may show either ...
    h.read(
        1, "a", [(0, 0, v(w1, 0, 0)), (0, 1, v(w2, 0, 1))], 7.0, 8.0, units=[5, 5]
    )  # ... not both in one chunk
    h.read(1, "a", [(0, 0, v(w1, 0, 0)), (0, 1, v(w2, 0, 1))], 7.0, 8.0, units=[5, 6])  # two chunks: fine
    assert kinds(h.check()) == {"torn": 1}


def test_torn_attributes_are_caught(h: Hist) -> None:
    a1 = h.op(1, "attrs", 2.0, 5.0, doc="", set=lambda op: {"k0": op, "k1": op})
    a2 = h.op(2, "attrs", 3.0, 6.0, doc="", set=lambda op: {"k0": op, "k1": op})
    r = h.root_attrs
    h.op(1, "meta", 7.0, 8.0, res={"attrs": {"k0": a1, "k1": a2, "k2": r, "k3": r}}, doc="")
    assert kinds(h.check()) == {"torn": 1}


def test_values_no_writer_wrote_are_caught(h: Hist) -> None:
    w1 = h.write(1, "a", [(0, 0)], 2.0, 3.0)
    nobody = sh.op_id(9, 0, 1)
    h.read(2, "a", [(0, 0, v(nobody, 0, 0))], 4.0, 5.0)  # an operation that never ran
    h.read(2, "a", [(1, 1, v(w1, 0, 0))], 4.0, 5.0)  # w1's value, at an element it did not write
    h.read(2, "a", [(0, 0, 12345)], 4.0, 5.0)  # garbage
    h.op(1, "meta", 4.0, 5.0, res={"attrs": dict.fromkeys(sh.KEYS, w1)}, doc="")  # attributes nobody set
    assert kinds(h.check()) == {"phantom": 7}


def test_a_value_read_before_its_write_began_is_caught(h: Hist) -> None:
    w = h.write(1, "a", [(0, 0)], 5.0, 6.0)
    h.read(2, "a", [(0, 0, v(w, 0, 0))], 2.0, 3.0)
    assert kinds(h.check()) == {"future-read": 1}


def test_an_append_applied_twice_and_a_wrong_extent_are_caught(h: Hist) -> None:
    app = h.op(1, "append", 2.0, 3.0, status="err", arr="g", k=1)  # unknown outcome: may have landed ...
    h.read(2, "g", [(2, 0, v(app, 0, 0))], 4.0, 5.0)
    h.read(2, "g", [(3, 0, v(app, 0, 0))], 4.0, 5.0)  # ... once, not at two places
    h.op(2, "meta", 1.2, 1.8, res={"attrs": {}, "n": 7}, doc="g")  # nothing had made 7 rows by then
    assert kinds(h.check()) == {"duplicate-append": 1, "shape": 1}


def test_an_append_whose_returned_extent_is_not_its_own_is_placed_by_reads(h: Hist) -> None:
    """``append`` returns the handle's extent after its data is written: with another client's append
    meanwhile (``exact`` false), more than its own; its rows are then where reads saw them."""
    a = h.op(1, "append", 2.0, 3.0, res={"n": 6, "exact": False}, arr="g", k=2)  # its rows: 2, 3
    b = h.op(2, "append", 2.1, 2.9, res={"n": 6}, arr="g", k=2)  # rows 4, 5
    h.read(1, "g", [(2, 0, v(a, 0, 0)), (3, 1, v(a, 1, 1)), (4, 0, v(b, 0, 0)), (5, 1, v(b, 1, 1))], 4.0, 5.0)
    h.read(0, "g", [(2, 1, -1)], 6.0, 7.0, final=True)  # a's definite row, lost
    assert kinds(h.check()) == {"lost-write": 1}


def test_an_append_seen_past_the_extent_it_returned_is_caught(h: Hist) -> None:
    a = h.op(1, "append", 2.0, 3.0, res={"n": 6, "exact": False}, arr="g", k=2)
    h.read(1, "g", [(5, 0, v(a, 0, 0))], 4.0, 5.0)  # its rows would end at 7
    assert kinds(h.check()) == {"phantom": 1}


def test_node_violations_are_caught(h: Hist) -> None:
    h.op(1, "create", 2.0, 3.0, node="nodes/n0")
    h.op(2, "create", 4.0, 5.0, node="nodes/n0")  # created twice with no delete between
    h.op(
        2, "delete", 6.0, 7.0, status="fail", node="nodes/n0", res={"exc": "NodeNotFoundError"}
    )  # it is there
    h.op(1, "exists", 1.0, 1.5, res={"born": 12345}, node="nodes/n0")
    assert kinds(h.check()) == {"node": 2, "phantom": 1}


def test_leaks_and_a_consolidated_entry_left_behind_are_caught(h: Hist, tmp_path: Path) -> None:
    h.op(1, "attrs", 2.0, 3.0, doc="a", set=lambda op: {"k0": op})
    h.final.append(
        {
            "what": "consolidated",
            "entries": {"a": {"attributes": {"k0": 1}}},
            "docs": {"a": {"attributes": {"k0": 2}}},
        }
    )
    h.final.append({"what": "locks", "held": ["a/c/0/0"]})
    store = tmp_path / "store"
    (store / "a" / "c").mkdir(parents=True)
    (store / "a" / "c" / ".0.0123456789abcdef.tmp").write_bytes(b"x")  # no client was killed
    (store / "a" / "c" / ".0.tmp").write_bytes(b"x")  # not one of LocalStore's names
    assert kinds(h.check(store)) == {"leak-tmp": 1, "leak-lock": 1, "consolidated": 1}


@pytest.mark.parametrize("kind", ["zip", "local"])
def test_a_consolidated_entry_behind_after_a_failed_change_is_allowed_in_a_zip_archive_only(
    h: Hist, kind: str
) -> None:
    """Everywhere else a change of several documents is one update (docs/guarantees.md): a consolidated
    entry that disagrees with its document after the run is a violation, killed writer or not."""
    h.op(1, "attrs", 2.0, None, doc="a", set=lambda op: {"k0": op})
    h.kills.append({"proc": 1, "t": 2.5, "wall": 0.0})
    h.final.append(
        {
            "what": "consolidated",
            "entries": {"a": {"attributes": {"k0": 1}}},
            "docs": {"a": {"attributes": {"k0": 2}}},
        }
    )
    h.store_kind = kind
    if kind != "zip":
        assert kinds(h.check()) == {"consolidated": 1}
        return
    report = h.check()
    assert report.violations == []
    assert report.notes["consolidated entries behind after failed or killed operations"] == 1


def test_foreign_exceptions_are_caught(h: Hist) -> None:
    h.op(
        1,
        "write",
        2.0,
        3.0,
        status="err",
        res={"exc": "ClientError", "msg": "botocore", "rz": False},
        arr="a",
        el=sh.pack([0]),
    )
    h.op(
        1,
        "write",
        2.0,
        3.0,
        status="err",
        res={"exc": "ValueError", "msg": "broadcast", "rz": False},
        arr="a",
        el=sh.pack([0]),
    )  # NumPy's rules: allowed
    assert kinds(h.check()) == {"foreign-error": 1}


# ---------------------------------------------------------------------------------------- real soak
def test_a_short_real_soak_with_a_kill_finds_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "soak.py"),
            "--seconds",
            "5",
            "--clients",
            "2",
            "--threads",
            "2",
            "--store",
            "local",
            "--kill-every",
            "1.5",
            "--max-kills",
            "1",
            "--think",
            "0.01",
            "--seed",
            "7",
            "--dir",
            str(tmp_path / "work"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    summary = out.stdout.strip().splitlines()[-1]
    assert "kills=1;" in summary and "violations=0" in summary, out.stdout
    ops = int(summary.split("ops=")[1].split()[0])
    assert ops > 20, summary
