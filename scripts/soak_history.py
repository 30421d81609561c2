"""The history of a soak run (``scripts/soak.py``) and its checker.

Every operation of every client is recorded twice, to that client process's own JSONL file
(``p<proc>.jsonl``, one ``os.write`` per record, so a SIGKILLed client leaves every record it made, whole):
its invocation (``{"ev": "inv", "id", "t", "op", ...arguments}``) before it starts, and its completion
(``{"ev": "ret", "id", "t", "st", ...result}``) once it returns, with ``st`` one of ``ok``, ``fail`` (an
error that says nothing was written: ``NodeExistsError`` creating a node, ``NodeNotFoundError`` deleting
one, ``KeyError`` deleting an attribute) or ``err`` (any other exception: the operation may or may not have
taken effect). An invocation without a completion is ``killed``: unknown too. Times are
``time.monotonic()`` (one clock for every process of the machine). ``run.json`` (written by the
coordinator at the end) names the arrays, the kills (``proc``, monotonic and wall time), the slack given to
unknown operations and what was found left behind.

Values are attributable. An array element at (row, col) written by operation ``op`` holds
``op << 16 | row << 8 | col`` (an append: ``op << 16 | i << 8 | col``, ``i`` the row within the appended
block, since where it lands is known only once it has); the fill value is -1. An attribute ``k0``..``k3``
holds the id of the operation that set it; a node ``nodes/n<i>`` is created with the attribute ``born``
set to the creating operation's id. Operation ids are ``(proc * 8 + thread) << 27 | seq``: unique in a run.

The checker (:func:`check`) replays this against a sequential model, per element, attribute key, shape and
node name (registers): see "Soak and history checks" in ``docs/guarantees.md`` for exactly what is checked.

    .venv/bin/python scripts/soak_history.py HISTORY_DIR [--store-dir DIR]   # check a kept history again
"""

from __future__ import annotations

import argparse
import base64
import bisect
import itertools
import json
import math
import os
import re
import sys
import threading
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FILL = -1
INF = math.inf
KEYS = ("k0", "k1", "k2", "k3")
MAX_ROWS = 256  # rows and columns of an element are 8 bits each in its value (and in its index)
CHANGES = (
    "init",
    "write",
    "append",
    "resize",
    "attrs",
    "create",
    "delete",
)  # operations that change something
# what NumPy's rules raise (a value that does not broadcast into a selection that a resize changed)
NUMPY_ERRORS = ("ValueError", "IndexError")
TMP_NAME = re.compile(r"^\..+\.[0-9a-f]{16}\.tmp$")  # LocalStore's temporary files
VIOLATIONS = (
    "stale-read",
    "lost-write",
    "future-read",
    "phantom",
    "torn",
    "duplicate-append",
    "shape",
    "node",
    "consolidated",
    "foreign-error",
    "leak-tmp",
    "leak-lock",
    "hang",
)


# ---------------------------------------------------------------------------------------------- encoding
def op_id(proc: int, thread: int, seq: int) -> int:
    """The id of operation ``seq`` (from 1) of ``thread`` (0-7) of client process ``proc`` (0: the
    coordinator)."""
    if not (0 <= proc < 2**17 and 0 <= thread < 8 and 0 < seq < 2**27):
        raise ValueError(f"operation id out of range: proc {proc}, thread {thread}, seq {seq}")
    return ((proc * 8 + thread) << 27) | seq


def proc_of(op: int) -> int:
    return op >> 30


def flat(row: Any, col: Any) -> Any:
    """An element's index in records: ``row << 8 | col`` (ints or NumPy arrays)."""
    return (row << 8) | col


def encode(op: int, row: Any, col: Any) -> Any:
    """The value ``op`` writes at (row, col) (for an append: row within the appended block)."""
    return (np.int64(op) << 16) | (np.asarray(row, dtype=np.int64) << 8) | np.asarray(col, dtype=np.int64)


def pack(values: Any) -> str:
    """Integers as compact text for a record (zlib-compressed little-endian int64, base64)."""
    data = np.ascontiguousarray(np.asarray(values, dtype="<i8").reshape(-1)).tobytes()
    return base64.b64encode(zlib.compress(data, 1)).decode("ascii")


def unpack(text: str) -> np.ndarray:
    return np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype="<i8")


def now() -> float:
    return time.monotonic()


class Recorder:
    """Appends records to one JSONL file: one ``os.write`` per record (O_APPEND), so each record reaches
    the file before the operation goes on, and a killed process leaves whole lines."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()

    def record(self, rec: dict[str, Any]) -> None:
        data = (json.dumps(rec, separators=(",", ":")) + "\n").encode()
        with self._lock:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]

    def invoke(self, op: int, kind: str, t: float | None = None, **args: Any) -> None:
        self.record({"ev": "inv", "id": op, "t": now() if t is None else t, "op": kind, **args})

    def complete(self, op: int, status: str, t: float | None = None, **result: Any) -> None:
        self.record({"ev": "ret", "id": op, "t": now() if t is None else t, "st": status, **result})

    def close(self) -> None:
        os.close(self._fd)


# ----------------------------------------------------------------------------------------------- loading
@dataclass
class Op:
    id: int
    proc: int
    kind: str
    inv: float
    args: dict[str, Any]
    status: str = "killed"  # ok | fail | err | killed
    ret: float = INF
    res: dict[str, Any] = field(default_factory=dict)
    end: float = INF  # the latest moment it may have had an effect

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def unknown(self) -> bool:
        return self.status in ("err", "killed")

    def describe(self) -> str:
        args = {k: v for k, v in self.args.items() if k not in ("el",)}
        return f"op {self.id} (proc {self.proc}) {self.kind} {args} [{self.inv:.3f}, {self.ret:.3f}] {self.status}"


@dataclass
class History:
    ops: dict[int, Op]
    run: dict[str, Any]
    cut_lines: int = 0  # last lines of killed clients' files cut short
    final: list[dict[str, Any]] = field(default_factory=list)  # the coordinator's end-of-run records


def load(directory: str | os.PathLike[str]) -> History:
    """Read a history directory (``run.json`` and every ``p<proc>.jsonl``)."""
    root = Path(directory)
    run = json.loads((root / "run.json").read_text())
    kills = {int(k["proc"]): float(k["t"]) for k in run.get("kills", [])}
    kill_slack, err_slack = float(run.get("kill_slack", 0.0)), float(run.get("err_slack", 0.0))
    ops: dict[int, Op] = {}
    history = History(ops, run)
    for path in sorted(root.glob("p*.jsonl")):
        proc = int(path.stem[1:])
        lines = path.read_bytes().split(b"\n")
        if lines[-1]:  # no newline at the end: the client was killed while writing it
            if proc not in kills:
                raise ValueError(f"{path}: the last record is cut short but process {proc} was not killed")
            history.cut_lines += 1
        for n, line in enumerate(lines[:-1], 1):
            try:
                rec = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{n}: not a record: {exc}") from exc
            ev = rec.pop("ev")
            if ev == "final":
                history.final.append(rec)
            elif ev == "inv":
                op = int(rec.pop("id"))
                ops[op] = Op(op, proc, rec.pop("op"), float(rec.pop("t")), rec)
            elif ev == "ret":
                op = ops[int(rec.pop("id"))]
                op.ret, op.status, op.res = float(rec.pop("t")), rec.pop("st"), rec
    for op in ops.values():
        if op.status in ("ok", "fail"):
            op.end = op.ret
        elif op.status == "err":
            op.end = op.ret + err_slack
        elif op.proc in kills:
            op.end = kills[op.proc] + kill_slack
    return history


# --------------------------------------------------------------------------------------------- registers
@dataclass(slots=True)
class Write:
    inv: float
    end: float
    op: int


_WILD = object()  # the value of a write whose value is not known (an append that did not say where it ended)


class Register:
    """One element, attribute key, shape or node name: the writes of each value (possibly applied ones
    included), and the definitely applied ones (ok, and surely reaching this register)."""

    __slots__ = ("_index", "_invs", "_sufmin", "by_value", "definite")

    def __init__(self) -> None:
        self.by_value: dict[Any, list[Write]] = defaultdict(list)
        self.definite: list[tuple[float, float, int]] = []  # (inv, completion, op)
        self._invs: list[float] | None = None
        self._sufmin: list[float] = []
        # per value: its writes by invocation, and the one with the latest end among the first k of them
        self._index: dict[Any, tuple[list[float], list[Write]]] = {}

    def add(self, value: Any, inv: float, end: float, op: int, definite_comp: float | None = None) -> None:
        self.by_value[value].append(Write(inv, end, op))
        self._index.pop(value, None)
        if definite_comp is not None:
            self.definite.append((inv, definite_comp, op))
            self._invs = None

    def _latest_ending(self, value: Any, before: float) -> Write | None:
        """Of the writes of ``value`` invoked before ``before``, the one that may have ended last."""
        got = self._index.get(value)
        if got is None:
            writes = sorted(self.by_value.get(value, ()), key=lambda w: w.inv)
            best: list[Write] = []
            for w in writes:
                best.append(w if not best or w.end > best[-1].end else best[-1])
            got = self._index[value] = ([w.inv for w in writes], best)
        invs, best = got
        k = bisect.bisect_left(invs, before)
        return best[k - 1] if k else None

    def overwritten(self, after: float, before: float) -> tuple[float, float, int] | None:
        """A definite write invoked after ``after`` that completed before ``before``, if any."""
        if self._invs is None:
            self.definite.sort()
            self._invs = [d[0] for d in self.definite]
            self._sufmin = [INF] * (len(self.definite) + 1)
            for i in range(len(self.definite) - 1, -1, -1):
                self._sufmin[i] = min(self._sufmin[i + 1], self.definite[i][1])
        k = bisect.bisect_right(self._invs, after)
        if self._sufmin[k] >= before:
            return None
        return next(d for d in self.definite[k:] if d[1] < before)

    def check(self, values: Iterable[Any], r_inv: float, r_comp: float) -> tuple[str, Any] | None:
        """Whether a read over [r_inv, r_comp] may return one of ``values`` (the possible readings of what it
        returned): ``None``, or ``("phantom" | "future" | "stale", detail)``. A write ``w`` explains the read
        if it began before the read ended and no definite write began after ``w``'s end and completed
        before the read began."""
        values = [v for v in (*values, _WILD) if v in self.by_value]
        if not values:
            return ("phantom", None)
        valid = [w for w in (self._latest_ending(v, r_comp) for v in values) if w is not None]
        if not valid:
            return ("future", min((w for v in values for w in self.by_value[v]), key=lambda w: w.inv))
        best = max(valid, key=lambda w: w.end)
        over = self.overwritten(best.end, r_inv)
        return None if over is None else ("stale", (best, over))

    def values(self) -> list[Any]:
        return [v for v in self.by_value if v is not None and v is not _WILD]


# ---------------------------------------------------------------------------------------------- report
@dataclass
class Violation:
    kind: str
    text: str


@dataclass
class Report:
    violations: list[Violation] = field(default_factory=list)
    ops: Counter[str] = field(default_factory=Counter)  # by status
    kinds: Counter[str] = field(default_factory=Counter)  # by operation kind
    checked: Counter[str] = field(default_factory=Counter)  # what was compared with the model
    notes: Counter[str] = field(default_factory=Counter)  # allowed leftovers (see the docs)
    errors: Counter[str] = field(default_factory=Counter)  # exception types of failed operations

    def add(self, kind: str, text: str) -> None:
        assert kind in VIOLATIONS, kind
        self.violations.append(Violation(kind, text))

    def by_kind(self) -> Counter[str]:
        return Counter(v.kind for v in self.violations)

    def summary(self, run: dict[str, Any] | None = None) -> str:
        run = run or {}
        faults = run.get("faults") or {}
        nfaults = sum(faults.values())
        fault_text = " ".join(f"{k}:{v}" for k, v in sorted(faults.items()) if v)
        kinds = self.by_kind()
        vtext = " ".join(f"{k}={kinds[k]}" for k in VIOLATIONS if kinds[k]) or "none"
        parts = [
            f"soak: store={run.get('store', '?')}",
            f"{run.get('seconds', 0):.0f}s",
            f"clients={run.get('clients', '?')}x{run.get('threads', '?')}",
            f"ops={sum(self.ops.values())} (ok {self.ops['ok']}, fail {self.ops['fail']}, err {self.ops['err']}, "
            f"killed {self.ops['killed']})",
            f"checked: {self.checked['reads']} reads, {self.checked['elements']} elements, "
            f"{self.checked['attributes']} attributes, {self.checked['shapes']} shapes, "
            f"{self.checked['nodes']} node states, {self.checked['chunks']} chunks/documents for tearing",
            f"faults={nfaults}" + (f" ({fault_text})" if fault_text else ""),
            f"kills={len(run.get('kills', []))}",
            f"violations={len(self.violations)} ({vtext})",
        ]
        if self.notes:
            parts.append("allowed: " + ", ".join(f"{k}={v}" for k, v in sorted(self.notes.items())))
        return "; ".join(parts)


def _t(x: float) -> str:
    return "inf" if x == INF else f"{x:.3f}"


# --------------------------------------------------------------------------------------------- checker
class _Bounds:
    """Whether row ``i`` of a resizable array was surely inside its extent over a time window: some
    operation that made the extent larger than ``i`` completed before the window, and no resize that could
    cut row ``i`` (to a size <= i; done or unknown) may have come between that operation and the window's
    end. Per row, sorted lists with running maxima: each question is two bisections."""

    def __init__(self, fixed_rows: int | None) -> None:
        self.fixed_rows = fixed_rows
        self.raisers: list[tuple[float, float, int]] = []  # ok: (completion, invocation, extent after)
        self.cutters: list[tuple[float, float, int, int]] = []  # (invocation, end, new extent, op)
        self._rows: dict[int, _RowBounds] = {}

    def _row(self, i: int) -> _RowBounds:
        got = self._rows.get(i)
        if got is None:
            got = self._rows[i] = _RowBounds(
                [(c, inv) for c, inv, n in self.raisers if n > i],
                [(inv, end, op) for inv, end, n, op in self.cutters if n <= i],
            )
        return got

    def inside(self, i: int, t0: float, t1: float, exclude: int | None = None) -> bool:
        if self.fixed_rows is not None:
            return i < self.fixed_rows
        row = self._row(i)
        since = row.made_before(t0)
        return since is not None and not row.cut(since, t1, exclude)

    def clear_of_cutters(self, rows: Iterable[int], t0: float, t1: float) -> set[int]:
        """The rows no resize to a size <= row may have cut during [t0, t1]."""
        if self.fixed_rows is not None:
            return set(rows)
        return {i for i in rows if not self._row(i).cut(t0, t1)}


class _RowBounds:
    def __init__(self, up: list[tuple[float, float]], down: list[tuple[float, float, int]]) -> None:
        up.sort()
        self.comps = [c for c, _ in up]
        self.maxinv = list(itertools.accumulate((inv for _, inv in up), max))
        down.sort()
        self.invs = [inv for inv, _, _ in down]
        # running (largest end, its op, second largest end) of the cutters invoked so far
        self.top: list[tuple[float, int, float]] = []
        best: tuple[float, int, float] = (-INF, 0, -INF)
        for _, end, op in down:
            if end > best[0]:
                best = (end, op, best[0])
            elif end > best[2]:
                best = (best[0], best[1], end)
            self.top.append(best)

    def made_before(self, t: float) -> float | None:
        """The latest invocation of an operation that made the row and completed before ``t``."""
        k = bisect.bisect_left(self.comps, t)
        return self.maxinv[k - 1] if k else None

    def cut(self, since: float, t: float, exclude: int | None = None) -> bool:
        """Whether a cutter invoked before ``t`` may have ended after ``since`` (``exclude`` aside)."""
        j = bisect.bisect_left(self.invs, t)
        if not j:
            return False
        end, op, second = self.top[j - 1]
        return (second if op == exclude else end) > since


class _ArrayModel:
    def __init__(self, name: str, spec: dict[str, Any]) -> None:
        self.name = name
        self.cols = int(spec["cols"])
        self.growing = bool(spec["growing"])
        self.max_rows = int(spec.get("max_rows", spec["rows"])) if self.growing else 0
        self.bounds = _Bounds(None if self.growing else int(spec["rows"]))
        self.elements: dict[int, Register] = {}
        self.shape = Register()
        self.covers: dict[int, frozenset[int]] = {}  # write op -> its elements
        self.sure: dict[int, frozenset[int]] = {}  # op -> elements it surely wrote if it was applied
        self.appends: dict[int, Op] = {}
        self.starts: dict[int, set[int]] = defaultdict(set)  # append -> rows where its values were seen
        self.seen: dict[int, set[int]] = defaultdict(set)  # the same, gathered before the checks

    def element(self, e: int) -> Register:
        reg = self.elements.get(e)
        if reg is None:
            reg = self.elements[e] = Register()
            reg.add(FILL, -INF, -INF, 0)  # never written: the fill value
        return reg


class Checker:
    def __init__(self, history: History, store_dir: str | os.PathLike[str] | None = None) -> None:
        self.h = history
        self.store_dir = store_dir
        self.report = Report()
        self.arrays = {name: _ArrayModel(name, spec) for name, spec in history.run.get("arrays", {}).items()}
        self.docs: dict[str, dict[str, Register]] = defaultdict(lambda: defaultdict(_absent_at_first))
        self.node_regs: dict[str, Register] = {}
        self._hints: dict[int, str] = {}

    # -------------------------------------------------------------------------------------- driver
    def run(self) -> Report:
        ops = sorted(self.h.ops.values(), key=lambda o: o.inv)
        for op in ops:
            self.report.ops[op.status] += 1
            self.report.kinds[op.kind] += 1
            if op.status in ("err", "fail"):
                self.report.errors[op.res.get("exc", "?")] += 1
                if (
                    op.status == "err"
                    and not op.res.get("rz", True)
                    and op.res.get("exc") not in NUMPY_ERRORS
                ):
                    self.report.add(
                        "foreign-error", f"{op.describe()}: {op.res.get('exc')}: {op.res.get('msg')}"
                    )
        self._build_arrays(ops)
        self._build_docs(ops)
        self._build_nodes(ops)
        for op in ops:
            if op.ok or (op.status == "fail" and op.kind in ("create", "delete")):
                self._check_op(op, bool(op.args.get("final")))
        for final in self.h.final:
            self._check_final(final)
        self._check_appends()
        self._check_leaks()
        return self.report

    # ------------------------------------------------------------------------------------ arrays
    def _build_arrays(self, ops: list[Op]) -> None:
        for op in ops:
            model = self.arrays.get(op.args.get("arr", ""))
            if model is None or op.status == "fail":
                continue
            if op.kind == "init" and op.ok:
                model.bounds.raisers.append((op.ret, op.inv, int(op.args["n"])))
                model.shape.add(int(op.args["n"]), op.inv, op.end, op.id, op.ret)
            elif op.kind == "resize":
                n = int(op.args["n"])
                model.bounds.cutters.append((op.inv, op.end, n, op.id))
                if op.ok:
                    model.bounds.raisers.append((op.ret, op.inv, n))
                model.shape.add(n, op.inv, op.end, op.id, op.ret if op.ok else None)
            elif op.kind == "append":
                model.appends[op.id] = op
                if op.ok:  # (the extent was n at some moment while it ran, even where n is not its own end)
                    model.bounds.raisers.append((op.ret, op.inv, int(op.res["n"])))
                if op.ok and op.res.get("exact", True):
                    model.shape.add(int(op.res["n"]), op.inv, op.end, op.id, op.ret)
                else:  # it set the extent to a value not known here (if it did)
                    model.shape.add(_WILD, op.inv, op.end, op.id)
        self._observe_appends(ops)
        for model in self.arrays.values():  # clients with older handles may reach past the intended limit
            if model.growing:
                model.max_rows = min(
                    MAX_ROWS,
                    max(
                        [
                            model.max_rows,
                            *(n for _, _, n in model.bounds.raisers),
                            *(n for _, _, n, _ in model.bounds.cutters),
                        ]
                    ),
                )
        for op in ops:
            model = self.arrays.get(op.args.get("arr", ""))
            if model is None or op.status == "fail":
                continue
            if op.kind == "write":
                els = frozenset(int(e) for e in unpack(op.args["el"]))
                model.covers[op.id] = els
                sure = frozenset(e for e in els if model.bounds.inside(e >> 8, op.inv, op.end))
                model.sure[op.id] = sure
                for e in els:
                    model.element(e).add(
                        op.id, op.inv, op.end, op.id, op.ret if op.ok and e in sure else None
                    )
            elif op.kind == "append" and op.ok:
                k, n = int(op.args["k"]), int(op.res["n"])
                start = n - k if op.res.get("exact", True) else _only(model.seen[op.id])
                if start is None or not 0 <= start <= n - k:
                    continue  # where it landed is not known: like an unknown append
                rows = model.bounds.clear_of_cutters(range(start, start + k), op.inv, op.end)
                sure = frozenset(flat(r, c) for r in rows for c in range(model.cols))
                model.sure[op.id] = sure
                for r in range(start, start + k):
                    for c in range(model.cols):
                        e = flat(r, c)
                        model.element(e).add(op.id, op.inv, op.end, op.id, op.ret if e in sure else None)
            elif op.kind == "resize":  # rows past the new extent read as the fill value afterwards
                n = int(op.args["n"])
                for i in range(n, model.max_rows):
                    cut = op.ok and model.bounds.inside(i, op.inv, op.ret, exclude=op.id)
                    for c in range(model.cols):
                        model.element(flat(i, c)).add(FILL, op.inv, op.end, op.id, op.ret if cut else None)

    def _observe_appends(self, ops: list[Op]) -> None:
        """Where reads saw each append's rows (its first row's index): an append's own end is not known
        from what it returned where other threads of its process changed the array meanwhile (``exact``
        false: soak.py's MetaChanges)."""
        for op in ops:
            model = self.arrays.get(op.args.get("arr", ""))
            if op.kind != "read" or not op.ok or "el" not in op.res or model is None or not model.growing:
                continue
            for e, v in zip(unpack(op.res["el"]).tolist(), unpack(op.res["val"]).tolist(), strict=True):
                if v != FILL and (v >> 16) in model.appends:
                    model.seen[v >> 16].add((e >> 8) - ((v >> 8) & 255))

    def _check_read(self, op: Op, final: bool) -> None:
        model = self.arrays[op.args["arr"]]
        els, vals = unpack(op.res["el"]), unpack(op.res["val"])
        units = unpack(op.res["unit"]) if "unit" in op.res else np.zeros(len(els), np.int64)
        self.report.checked["reads"] += 1
        seen: dict[int, Any] = {}  # element -> op id (or FILL) it showed, phantoms left out
        for e, v in zip(els.tolist(), vals.tolist(), strict=True):
            self.report.checked["elements"] += 1
            who = self._check_value(model, op, e, v, final)
            if who is not None:
                seen[e] = who
        groups: dict[int, list[int]] = defaultdict(list)
        for e, u in zip(els.tolist(), units.tolist(), strict=True):
            if e in seen:
                groups[u].append(e)
        for unit, members in groups.items():
            if len(members) > 1:
                self.report.checked["chunks"] += 1
                self._check_torn(model, op, unit, {e: seen[e] for e in members})

    def _check_value(self, model: _ArrayModel, r: Op, e: int, v: int, final: bool) -> Any:
        """Check one element read; return who wrote what it showed (op id or FILL), None for a phantom."""
        row, col = e >> 8, e & 255
        where = f"{model.name}[{row}, {col}]"
        if v == FILL:
            verdict = model.element(e).check([FILL], r.inv, r.ret)
            who: Any = FILL
        else:
            w = self.h.ops.get(v >> 16)
            rc = v & 0xFFFF
            bad = None
            if w is None or w.args.get("arr") != model.name or w.kind not in ("write", "append"):
                bad = "no operation on this array wrote it"
            elif w.status == "fail":
                bad = f"its operation failed cleanly: {w.describe()}"
            elif w.kind == "write" and (rc != e or e not in model.covers.get(w.id, ())):
                bad = f"{w.describe()} did not write this element (the value names [{rc >> 8}, {rc & 255}])"
            elif w.kind == "append":
                i, c, k = rc >> 8, rc & 255, int(w.args["k"])
                start = row - i
                if c != col or i >= k or start < 0:
                    bad = f"{w.describe()} wrote no such value here (row {i} of its block, column {c})"
                elif w.ok and w.res.get("exact", True) and start != int(w.res["n"]) - k:
                    bad = f"{w.describe()} put its rows at {int(w.res['n']) - k}, this one says {start}"
                elif w.ok and start + k > int(w.res["n"]):
                    bad = f"{w.describe()} returned the extent {w.res['n']}, this value says its rows end at {start + k}"
                else:
                    model.starts[w.id].add(start)
            if bad is not None:
                self.report.add("phantom", f"{r.describe()}: {where} = {v}: {bad}")
                return None
            assert w is not None
            if w.kind == "append" and not w.ok and w.id not in model.element(e).by_value:
                model.element(e).add(w.id, w.inv, w.end, w.id)  # an unknown append's element, where it landed
            verdict = model.element(e).check([w.id], r.inv, r.ret)
            who = w.id
        if verdict is not None:
            self._array_verdict(model, r, where, v, verdict, final)
        return who

    def _array_verdict(
        self, model: _ArrayModel, r: Op, where: str, v: int, verdict: tuple[str, Any], final: bool
    ) -> None:
        kind, detail = verdict
        shown = "the fill value" if v == FILL else f"the value of op {v >> 16}"
        if not self._unwritten(kind, detail, r, f"{where} shows {shown}"):
            best, over = detail
            self.report.add(
                "lost-write" if final else "stale-read",
                f"{r.describe()}: {where} shows {shown} (its write ended by {_t(best.end)}), but "
                f"{self._name(over[2])} wrote it there over [{_t(over[0])}, {_t(over[1])}], "
                f"definitely later and before the read began{self._beside_shrink(model, over[2])}",
            )

    def _unwritten(self, kind: str, detail: Any, r: Op, what: str) -> bool:
        """Report a value that nothing wrote (``phantom``) or that was written only after the read
        (``future``); False for any other verdict."""
        if kind == "phantom":
            self.report.add("phantom", f"{r.describe()}: {what}, which nothing wrote there")
        elif kind == "future":
            self.report.add(
                "future-read",
                f"{r.describe()}: {what}, written by an operation invoked only at "
                f"{_t(detail.inv)}, after the read completed",
            )
        else:
            return False
        return True

    def _beside_shrink(self, model: _ArrayModel, op_id: int) -> str:
        """For a shrink: the resizes and appends of the array that ran beside it (a hint for triage)."""
        if op_id not in self._hints:
            shrink = self.h.ops.get(op_id)
            beside = (
                []
                if shrink is None or shrink.kind != "resize"
                else [o.id for o in model.appends.values() if o.inv < shrink.ret and o.end > shrink.inv]
                + [
                    op
                    for inv, end, _, op in model.bounds.cutters
                    if op != op_id and inv < shrink.ret and end > shrink.inv
                ]
            )
            self._hints[op_id] = (
                f" (ran beside these resizes and appends of {model.name}: {sorted(beside)})" if beside else ""
            )
        return self._hints[op_id]

    def _name(self, op: int) -> str:
        o = self.h.ops.get(op)
        return f"op {op}" if o is None else o.describe()

    def _check_torn(self, model: _ArrayModel, r: Op, unit: int, seen: dict[int, Any]) -> None:
        """The elements of one storage key in one read must be consistent with applying whole writes to the
        key in some order: a write seen at one element and surely covering another element that shows a
        different write was applied before that one; a cycle is a torn key. (On arrays that are never
        resized, a write seen beside an element it surely covers that shows the fill value is torn too.)"""
        writers = {w for w in seen.values() if w != FILL}
        if not writers or (len(writers) == 1 and FILL not in seen.values()):
            return
        after: dict[int, set[int]] = defaultdict(set)
        for w in writers:
            sure = self._sure_cover(model, w, seen)
            for e, shown in seen.items():
                if shown == w or e not in sure:
                    continue
                if shown == FILL:
                    if not model.growing:
                        self.report.add(
                            "torn",
                            f"{r.describe()}: key {unit} of {model.name} shows {self._name(w)} "
                            f"but the fill value at [{e >> 8}, {e & 255}], which it wrote",
                        )
                        return
                    continue
                after[w].add(shown)
        cycle = _find_cycle(after)
        if cycle:
            self.report.add(
                "torn",
                f"{r.describe()}: key {unit} of {model.name} mixes writes that cannot have "
                f"been applied whole in any order: {' -> '.join(self._name(w) for w in cycle)}",
            )

    def _sure_cover(self, model: _ArrayModel, w: int, seen: dict[int, Any]) -> frozenset[int]:
        if w in model.sure:
            return model.sure[w]
        op = model.appends.get(w)
        if op is None:
            return frozenset()
        rows: set[int] = set()
        k = int(op.args["k"])
        for s in model.starts[w]:
            rows |= model.bounds.clear_of_cutters(range(s, s + k), op.inv, op.end)
        return frozenset(flat(r, c) for r in rows for c in range(model.cols))

    def _check_appends(self) -> None:
        for model in self.arrays.values():
            for op, starts in model.starts.items():
                if len(starts) > 1:
                    self.report.add(
                        "duplicate-append",
                        f"{self._name(op)}: its rows were seen at {sorted(starts)} "
                        f"of {model.name}: applied more than once",
                    )

    def _check_shape(self, r: Op, model: _ArrayModel, n: int, what: str) -> None:
        self.report.checked["shapes"] += 1
        verdict = model.shape.check([n], r.inv, r.ret)
        if verdict is None:
            return
        kind, detail = verdict
        if kind == "stale":
            best, over = detail
            text = (
                f"its last possible writer ended by {_t(best.end)}, but {self._name(over[2])} set the "
                "extent definitely later and before"
            )
        elif kind == "future":
            text = f"only {self._name(detail.op)} sets it, invoked after"
        else:
            text = "no resize or append made it"
        self.report.add("shape", f"{r.describe()}: {what} extent {n} of {model.name}: {text}")

    # ------------------------------------------------------------------------------------ documents
    def _build_docs(self, ops: list[Op]) -> None:
        for op in ops:
            if op.kind != "attrs" or op.status == "fail":
                continue
            regs = self.docs[op.args["doc"]]
            for key, value in op.args["set"].items():
                regs[key].add(
                    op.id if value is not None else None, op.inv, op.end, op.id, op.ret if op.ok else None
                )

    def _check_doc(self, r: Op, doc: str, attrs: dict[str, Any], staleness: bool, final: bool) -> None:
        """Attribute keys read from one document: each a value set by an operation (or absent after a
        delete) that may be current (``staleness``: else only that it was written, and not later); and
        the keys together consistent with whole updates applied in some order."""
        regs = self.docs[doc]
        seen: dict[str, int] = {}
        for key in KEYS:
            value = attrs.get(key)
            self.report.checked["attributes"] += 1
            reg = regs[key]
            verdict = reg.check([value], r.inv, r.ret)
            where = f"attribute {key!r} of {doc or '/'!r}"
            if verdict is None:
                if value is not None:
                    seen[key] = value
                continue
            kind, detail = verdict
            if not self._unwritten(kind, detail, r, f"{where} = {value!r}"):
                if value is not None:
                    seen[key] = value
                if staleness:
                    best, over = detail
                    self.report.add(
                        "lost-write" if final else "stale-read",
                        f"{r.describe()}: {where} = {value!r} (set by {_t(best.end)}), but "
                        f"{self._name(over[2])} set it definitely later and before the read",
                    )
        self.report.checked["chunks"] += 1
        after: dict[int, set[int]] = defaultdict(set)
        for key, w in seen.items():
            for w2 in seen.values():
                op = self.h.ops.get(w2)
                if w2 != w and op is not None and key in op.args.get("set", {}):
                    after[w2].add(w)
        cycle = _find_cycle(after)
        if cycle:
            self.report.add(
                "torn",
                f"{r.describe()}: the attributes of {doc or '/'!r} mix updates that cannot "
                f"have been applied whole: {' -> '.join(self._name(w) for w in cycle)}",
            )

    # --------------------------------------------------------------------------------------- nodes
    def _build_nodes(self, ops: list[Op]) -> None:
        for op in ops:
            if op.kind not in ("create", "delete") or op.status == "fail":
                continue
            reg = self._node(op.args["node"])
            value = op.id if op.kind == "create" else None
            reg.add(value, op.inv, op.end, op.id, op.ret if op.ok else None)

    def _node(self, name: str) -> Register:
        reg = self.node_regs.get(name)
        if reg is None:
            reg = self.node_regs[name] = Register()
            reg.add(None, -INF, -INF, 0)  # no node at first
        return reg

    def _check_node(self, r: Op, name: str, shown: Any, final: bool, present: bool = False) -> None:
        """``shown``: the ``born`` id read (None: no node); ``present``: the operation only saw that some
        node was there (a create refused, a delete done)."""
        self.report.checked["nodes"] += 1
        reg = self._node(name)
        if present:
            values = reg.values()
            what = "a node"
        else:
            values = [shown]
            what = "no node" if shown is None else f"the node made by op {shown}"
            if shown is not None:
                maker = self.h.ops.get(shown)
                if maker is None or maker.kind != "create" or maker.args.get("node") != name:
                    self.report.add(
                        "phantom", f"{r.describe()}: {name} has born={shown}, which no create of it set"
                    )
                    return
                if maker.status == "fail":
                    self.report.add(
                        "node", f"{r.describe()}: {name} is {maker.describe()}'s, which was refused"
                    )
                    return
        verdict = reg.check(values, r.inv, r.ret)
        if verdict is None:
            return
        kind, detail = verdict
        if kind == "stale":
            best, over = detail
            text = f"but {self._name(over[2])} changed it definitely later (after {_t(best.end)}) and before"
        elif kind == "future":
            text = "but only an operation invoked after made it so"
        else:
            text = "but nothing made it so"
        self.report.add(
            "lost-write" if final and kind == "stale" else "node",
            f"{r.describe()}: saw {what} at {name}, {text}",
        )

    # ------------------------------------------------------------------------------------- per op
    def _check_op(self, op: Op, final: bool = False) -> None:
        kind = op.kind
        if kind == "read":
            self._check_read(op, final)
        elif kind == "append" and op.res.get("exact", True):
            model = self.arrays[op.args["arr"]]
            self._check_shape(op, model, int(op.res["n"]) - int(op.args["k"]), "an append found the")
        elif kind == "meta":
            self._check_doc(op, op.args["doc"], op.res.get("attrs") or {}, True, final)
            model = self.arrays.get(op.args["doc"])
            if model is not None and model.growing:
                self._check_shape(op, model, int(op.res["n"]), "read the")
        elif kind == "exists":
            self._check_node(op, op.args["node"], op.res.get("born"), final)
        elif kind in ("create", "delete"):  # what it found there: no node (made one; refused), a node
            self._check_node(op, op.args["node"], None, False, present=(kind == "create") != op.ok)
        elif kind == "cread":
            self._check_consolidated_read(op)

    def _check_consolidated_read(self, op: Op) -> None:
        """Consolidated metadata may be older than the nodes' documents (docs/guarantees.md): only that each
        entry is some version that was written (no phantom, none from the future, not torn)."""
        for doc, attrs in (op.res.get("docs") or {}).items():
            self._check_doc(op, doc, attrs, False, False)
        for name, born in (op.res.get("nodes") or {}).items():
            maker = self.h.ops.get(born) if born is not None else None
            if born is not None and (
                maker is None or maker.kind != "create" or maker.args.get("node") != name
            ):
                self.report.add(
                    "phantom",
                    f"{op.describe()}: consolidated entry {name} has born={born}, which no create of it set",
                )
            elif maker is not None and maker.inv >= op.ret:
                self.report.add(
                    "future-read",
                    f"{op.describe()}: consolidated entry {name} is from {maker.describe()}, invoked after",
                )

    def _check_final(self, rec: dict[str, Any]) -> None:
        if rec.get("what") == "consolidated":
            self._check_consolidated_end(rec)
        elif rec.get("what") == "failed-read":
            self.report.add("lost-write", f"the final read of {rec.get('target')} failed: {rec.get('msg')}")
        elif rec.get("what") == "locks":
            for key in rec.get("held", []):
                self.report.add("leak-lock", f"the lock of {key!r} is still held after every client stopped")
        elif rec.get("what") == "hung":
            self.report.add("hang", f"client process {rec.get('proc')} did not stop by the deadline: killed")

    def _check_consolidated_end(self, rec: dict[str, Any]) -> None:
        """After the run: the root's consolidated entries against the documents as readers see them. They
        agree on every store whose updates of several documents are one update (docs/guarantees.md); in a
        zip archive, where they are not, an operation on that node (or a consolidation) that failed, with no
        later successful one, explains a difference (allowed); otherwise it is a violation."""
        entries, docs = rec.get("entries") or {}, rec.get("docs") or {}
        for path in sorted(set(entries) | set(docs)):
            if entries.get(path) == docs.get(path):
                continue
            if self.h.run.get("store") != "zip":
                self.report.add(
                    "consolidated",
                    f"after the run the consolidated entry of {path!r} is "
                    f"{entries.get(path)!r}, its document {docs.get(path)!r}",
                )
                continue
            touching = [
                o
                for o in self.h.ops.values()
                if o.kind == "consolidate"
                or (o.kind in CHANGES and path in (o.args.get("arr"), o.args.get("doc"), o.args.get("node")))
            ]
            unknown = [o for o in touching if o.unknown]
            explained = any(not any(o.ok and o.inv > u.end for o in touching) for u in unknown)
            if explained:
                self.report.notes["consolidated entries behind after failed or killed operations"] += 1
            else:
                self.report.add(
                    "consolidated",
                    f"after the run the consolidated entry of {path!r} is "
                    f"{entries.get(path)!r}, its document {docs.get(path)!r}",
                )

    # -------------------------------------------------------------------------------------- leaks
    def _check_leaks(self) -> None:
        if self.store_dir is None:
            return
        kills = [float(k["wall"]) for k in self.h.run.get("kills", [])]
        for dirpath, _, files in os.walk(self.store_dir):
            for name in files:
                if not TMP_NAME.match(name):
                    continue
                path = os.path.join(dirpath, name)
                mtime = os.stat(path).st_mtime
                if any(k - 120 <= mtime <= k + 1 for k in kills):
                    self.report.notes["temporary files of killed clients"] += 1
                else:
                    self.report.add(
                        "leak-tmp",
                        f"{path}: a temporary file left behind (modified at {mtime:.3f}, near no kill)",
                    )


def _only(values: set[int]) -> int | None:
    return next(iter(values)) if len(values) == 1 else None


def _absent_at_first() -> Register:
    reg = Register()
    reg.add(None, -INF, -INF, 0)  # an attribute key before the node was made with it
    return reg


def _find_cycle(after: dict[int, set[int]]) -> list[int] | None:
    """A cycle in the graph ``w -> each of after[w]``, if any."""
    state: dict[int, int] = {}
    stack: list[int] = []

    def visit(n: int) -> list[int] | None:
        state[n] = 1
        stack.append(n)
        for m in after.get(n, ()):
            if state.get(m) == 1:
                return [*stack[stack.index(m) :], m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in list(after):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def check(
    directory: str | os.PathLike[str], store_dir: str | os.PathLike[str] | None = None
) -> tuple[Report, History]:
    """Check the history in ``directory`` (``store_dir``: a local store to look for leftovers in)."""
    history = load(directory)
    return Checker(history, store_dir).run(), history


def print_report(report: Report, history: History, out: Any = sys.stdout, limit: int = 20) -> None:
    for v in report.violations[:limit]:
        print(f"VIOLATION {v.kind}: {v.text}", file=out)
    if len(report.violations) > limit:
        print(f"... and {len(report.violations) - limit} more", file=out)
    print(report.summary(history.run), file=out, flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("history")
    p.add_argument("--store-dir", default=None, help="a local store to look for leftover temporary files in")
    p.add_argument("--limit", type=int, default=20, help="violations printed in full")
    a = p.parse_args(argv)
    report, history = check(a.history, a.store_dir)
    print_report(report, history, limit=a.limit)
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
