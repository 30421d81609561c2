"""Soak run: client processes hammer one hierarchy with random operations while a killer SIGKILLs them and
(on S3) the server fails requests; every operation is recorded and the history checked afterwards
(``scripts/soak_history.py``; what is checked: "Soak and history checks" in ``docs/guarantees.md``).

    make soak                                          # 10 minutes on a local directory
    make soak SOAK_ARGS="--minutes 3 --store s3-obstore"
    .venv/bin/python scripts/soak.py --hours 8 --store s3-fsspec --clients 8 --threads 2 --kill-every 30
    .venv/bin/python scripts/soak.py --seconds 5 --clients 2 --threads 2 --kill-every 2 --max-kills 1

Stores: ``local`` (a directory; client processes), ``s3-fsspec`` and ``s3-obstore`` (a moto server this
script starts on 127.0.0.1, behind :class:`tests.s3_faults.FaultInjector` answering ``--fault-rate`` of the
requests with a 500, a 503, a 412 (conditional PUTs only), a lost answer (the write done, the answer a 500),
a truncated body (GETs), a slow answer (up to ``--slow-max`` seconds) or a reset connection), ``memory``
and ``zip`` (one process: the clients are threads of this one, and nothing is killed).

The hierarchy: a root group and a group ``nodes`` (attributes ``k0``..``k3``), arrays ``fx`` (12 x 20,
chunks 4 x 5) and ``fs`` (16 x 24, shards 8 x 12 of 4 x 6 chunks) that keep their shape, and arrays that
grow and shrink along axis 0 between 1 and 48 rows: ``gr`` (regular 4 x 6 chunks), ``gx`` (rectilinear
rows [3, 5, 4, 4, ...]) and ``gs`` (rectilinear shards [8, 8, ...] x 12 of 4 x 6 chunks); nodes
``nodes/n0``..``nodes/n3`` are created and deleted. Operations: writes (basic with steps, orthogonal,
coordinate, mask, block), appends, resizes, attribute updates and deletions, creating and deleting nodes,
consolidating the root, and reads of every kind (data, documents, nodes, consolidated metadata).

Prints one summary line (operations, faults, kills, violations by kind) and exits 1 on any violation; the
history and the store are kept (``--keep``, or on a violation) in the work directory it names.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT)]

import soak_history as sh  # noqa: E402

import rectizarr  # noqa: E402
import rectizarr.nodes  # noqa: E402
from rectizarr.errors import NodeExistsError, NodeNotFoundError, RectizarrError  # noqa: E402

STORES = ("local", "s3-fsspec", "s3-obstore", "memory", "zip")
ARRAYS: dict[str, dict[str, Any]] = {
    "fx": {"rows": 12, "cols": 20, "growing": False, "create": {"chunks": (4, 5)}},
    "fs": {"rows": 16, "cols": 24, "growing": False, "create": {"shards": (8, 12), "chunks": (4, 6)}},
    "gr": {"rows": 16, "cols": 12, "growing": True, "max_rows": 48, "create": {"chunks": (4, 6)}},
    "gx": {"rows": 16, "cols": 12, "growing": True, "max_rows": 48, "create": {"chunks": [[3, 5, 4, 4], 6]}},
    "gs": {
        "rows": 16,
        "cols": 12,
        "growing": True,
        "max_rows": 48,
        "create": {"shards": [[8, 8], 12], "chunks": (4, 6)},
    },
}
DOCS = ("", "nodes", *ARRAYS)
NODES = tuple(f"nodes/n{i}" for i in range(4))
OPS = {  # operation -> weight
    "write": 24,
    "append": 5,
    "resize": 4,
    "attrs": 7,
    "create": 3,
    "delete": 2,
    "consolidate": 1,
    "read": 36,
    "meta": 8,
    "exists": 4,
    "cread": 2,
}


# ----------------------------------------------------------------------------------------------- stores
def open_soak_store(spec: dict[str, Any], mode: str = "a") -> Any:
    kind = spec["kind"]
    if kind == "local":
        return rectizarr.LocalStore(spec["path"], read_only=(mode == "r"))
    if kind == "zip":
        return rectizarr.ZipStore(spec["path"], mode="r" if mode == "r" else "a")
    if kind == "memory":
        return spec["object"]
    options: dict[str, Any] = {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": spec["endpoint"], "region_name": "us-east-1"},
    }
    if kind == "s3-fsspec":
        options["config_kwargs"] = {
            "retries": {"max_attempts": 5, "mode": "standard"},
            "read_timeout": 20,
            "connect_timeout": 5,
        }
        options["skip_instance_cache"] = True
        backend = "fsspec"
    else:
        options["timeout"] = 20
        backend = "obstore"
    return rectizarr.open_store(
        f"s3://{spec['bucket']}", backend=backend, storage_options=options, mode="r" if mode == "r" else "a"
    )


# ------------------------------------------------------------------------------------------- selections
def grid_starts(a: Any) -> tuple[np.ndarray, np.ndarray]:
    """Where each storage chunk (shard) of ``a`` starts, per axis, as the handle sees its grid."""
    rows, cols = (
        np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) for sizes in a.write_chunk_sizes
    )
    return rows, cols


def units_of(a: Any, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    starts_r, starts_c = grid_starts(a)
    return (
        (np.searchsorted(starts_r, rows, side="right") - 1) * 1000
        + np.searchsorted(starts_c, cols, side="right")
        - 1
    )


@dataclass
class Selection:
    how: str
    desc: str
    key: Any  # what goes in brackets
    kind: str  # "basic" | "orthogonal" | "coordinate" | "mask" | "block"

    def apply(self, a: Any) -> Any:
        if self.kind == "basic":
            return a[self.key]
        if self.kind == "orthogonal":
            return a.oindex[self.key]
        if self.kind == "mask":
            return a.get_mask_selection(self.key)
        if self.kind == "coordinate":
            return a.vindex[self.key]
        return a.blocks[self.key]

    def assign(self, a: Any, values: np.ndarray) -> None:
        if self.kind == "basic":
            a[self.key] = values
        elif self.kind == "orthogonal":
            a.oindex[self.key] = values
        elif self.kind == "mask":
            a.set_mask_selection(self.key, values)
        elif self.kind == "coordinate":
            a.vindex[self.key] = values
        else:
            a.blocks[self.key] = values

    def index(self, a: Any, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
        """The (row, col) of every element the selection picks in an array of ``rows`` x ``cols``, in the
        order of the result."""
        r = np.broadcast_to(np.arange(rows, dtype=np.int64)[:, None], (rows, cols))
        c = np.broadcast_to(np.arange(cols, dtype=np.int64)[None, :], (rows, cols))
        if self.kind == "basic":
            return r[self.key], c[self.key]
        if self.kind == "orthogonal":
            ix = np.ix_(*self.key)
            return r[ix], c[ix]
        if self.kind in ("coordinate", "mask"):
            if self.kind == "mask" and self.key.shape != (rows, cols):
                raise IndexError("the mask does not fit")
            return r[self.key], c[self.key]
        starts_r, starts_c = grid_starts(a)
        sizes_r, sizes_c = a.write_chunk_sizes
        bi, bj = self.key
        region = (
            slice(starts_r[bi], starts_r[bi] + sizes_r[bi]),
            slice(starts_c[bj], starts_c[bj] + sizes_c[bj]),
        )
        return r[region], c[region]


def _slice(rng: random.Random, n: int, growing: bool) -> slice:
    """A slice of ``range(n)``: mostly short forward runs, some strided and reversed. On arrays that change
    size, explicit bounds and reversed only by -1 step, so that after a resize the slice names the same
    rows or fewer (a start past a new, smaller extent is moved to its end: ``range(9)[9:5:-2]`` is [8, 6],
    as many rows as [9, 7], and the recorded rows would be wrong)."""
    lo = rng.randrange(n)
    hi = rng.randint(lo + 1, min(n, lo + rng.choice((2, 4, 8, 16))))
    step = rng.choice((1, 1, 1, 2, 3, -1, -1) if growing else (1, 1, 1, 2, 3, -1, -2))
    if not growing and rng.random() < 0.15:
        return rng.choice((slice(None), slice(-hi, None), slice(lo - n, hi - n or None)))
    if step > 0:
        return slice(lo, hi, step)
    return slice(hi - 1, lo - 1 if lo else None, step)


def pick_selection(rng: random.Random, a: Any, growing: bool, writing: bool) -> Selection | None:
    rows, cols = a.shape
    if rows == 0:
        return None
    how = rng.choice(("basic", "basic", "basic", "orthogonal", "coordinate", "mask", "block"))
    if how == "basic":
        if not writing and not growing and rng.random() < 0.1:
            return Selection("basic", "...", (Ellipsis,), "basic")
        key = (_slice(rng, rows, growing), _slice(rng, cols, growing))
        return Selection("basic", f"[{key[0]}, {key[1]}]", key, "basic")
    if how == "orthogonal":
        rs = rng.sample(range(rows), rng.randint(1, min(rows, 5)))
        cs = rng.sample(range(cols), rng.randint(1, min(cols, 5)))
        return Selection(how, f"oindex[{rs}, {cs}]", (np.array(rs), np.array(cs)), "orthogonal")
    if how == "coordinate":
        cells = rng.sample(range(rows * cols), rng.randint(1, min(rows * cols, 12)))
        rs, cs = np.array([x // cols for x in cells]), np.array([x % cols for x in cells])
        return Selection(how, f"vindex[{rs.tolist()}, {cs.tolist()}]", (rs, cs), "coordinate")
    if how == "mask":
        nprng = np.random.default_rng(rng.getrandbits(32))
        mask = nprng.random((rows, cols)) < 0.08
        mask[rng.randrange(rows), rng.randrange(cols)] = True
        return Selection(how, f"mask of {int(mask.sum())}", mask, "mask")
    sizes_r, sizes_c = a.write_chunk_sizes
    bi, bj = rng.randrange(len(sizes_r)), rng.randrange(len(sizes_c))
    if writing and growing and sizes_r[bi] < 2:
        # the last block's rows change with the extent: a one-row value would be broadcast into more rows
        # if the array grew before the write is planned (NumPy's rules), which the record would not show
        return None
    return Selection(how, f"blocks[{bi}, {bj}]", (bi, bj), "block")


# ---------------------------------------------------------------------------------------------- clients
class MetaChanges:
    """Per process: the metadata changes (append, resize, attributes) of each array under way in its
    threads. ``append`` returns the handle's shape after writing its data, and on object stores that write
    reads ``zarr.json`` again when another thread of the process changed it meanwhile (docs/guarantees.md,
    *Stale handles*), or when the handle came from consolidated metadata and writes for the first time:
    the shape returned may then include another client's later append. An append returns exactly where
    its rows end when neither happened (``exact``: the checker then takes that for its end; otherwise
    it finds its rows where reads saw them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: Counter[str] = Counter()
        self._events: Counter[str] = Counter()

    @contextlib.contextmanager
    def change(self, name: str) -> Any:
        with self._lock:
            alone = self._active[name] == 0
            self._active[name] += 1
            self._events[name] += 1
            seen = self._events[name]
        out = {"exact": False}
        try:
            yield out
        finally:
            with self._lock:
                self._active[name] -= 1
                self._events[name] += 1
                out["exact"] = alone and self._events[name] == seen + 1


class Worker:
    """One client thread: random operations until the deadline, each recorded before and after."""

    def __init__(
        self,
        store: Any,
        rec: sh.Recorder,
        proc: int,
        thread: int,
        deadline: float,
        think: float,
        seed: int,
        shared: dict[str, Any],
        shared_lock: threading.Lock,
        changes: MetaChanges,
    ) -> None:
        self.store, self.rec, self.proc, self.thread = store, rec, proc, thread
        self.changes = changes
        self.deadline, self.think = deadline, think
        self.rng = random.Random(seed)
        self.seq = 0
        self.handles: dict[str, Any] = {}
        self.shared, self.shared_lock = shared, shared_lock
        self.root: Any = None
        self.source = ""  # where the last handle of array() came from

    def new_op(self) -> int:
        self.seq += 1
        return sh.op_id(self.proc, self.thread, self.seq)

    def run(self) -> None:
        names, weights = zip(*OPS.items(), strict=True)
        while sh.now() < self.deadline:
            kind = self.rng.choices(names, weights)[0]
            try:
                getattr(self, f"op_{kind}")()
            except Exception:  # opening a handle failed (a fault): try something else
                self.handles.clear()
                self.root = None
            if self.think:
                time.sleep(self.rng.uniform(0, 2 * self.think))

    def _do(
        self,
        op: int,
        kind: str,
        args: dict[str, Any],
        fn: Callable[[], dict[str, Any] | None],
        fail: tuple[type[BaseException], ...] = (),
    ) -> None:
        self.rec.invoke(op, kind, **args)
        try:
            result = fn()
        except fail as exc:
            self.rec.complete(op, "fail", exc=type(exc).__name__, msg=str(exc)[:300])
        except Exception as exc:
            self.rec.complete(
                op, "err", exc=type(exc).__name__, msg=str(exc)[:300], rz=isinstance(exc, RectizarrError)
            )
            self.handles.clear()
            self.root = None
        else:
            self.rec.complete(op, "ok", **(result or {}))

    # ---- handles
    def array(self, name: str, shared: bool = True) -> Any:
        """A handle of the array: a new one (``fresh``), the root group's member (``group``: maybe from its
        consolidated metadata), one shared by the process's threads (``shared``) or this thread's own
        (``thread``); which one is in ``self.source``."""
        roll = self.rng.random()
        if roll < 0.15:
            self.source = "fresh"
            return rectizarr.open_array(self.store, path=name)
        if roll < 0.25:
            if self.root is None:
                self.root = rectizarr.open_group(self.store, mode="r+")
            self.source = "group"
            return self.root[name]
        if roll < 0.45 and shared:
            self.source = "shared"
            with self.shared_lock:
                if name not in self.shared:
                    self.shared[name] = rectizarr.open_array(self.store, path=name)
                return self.shared[name]
        self.source = "thread"
        if name not in self.handles:
            self.handles[name] = rectizarr.open_array(self.store, path=name)
        return self.handles[name]

    def node(self, doc: str) -> Any:
        if doc in ARRAYS:
            return self.array(doc)
        return rectizarr.open_group(self.store, path=doc or None, mode="r+", use_consolidated=False)

    # ---- operations
    def op_write(self) -> None:
        name = self.rng.choice(tuple(ARRAYS))
        a = self.array(name)
        sel = pick_selection(self.rng, a, ARRAYS[name]["growing"], True)
        if sel is None:
            return
        rows, cols = sel.index(a, *a.shape)
        if rows.size == 0:
            return
        op = self.new_op()
        values = sh.encode(op, rows, cols)
        self._do(
            op,
            "write",
            {
                "arr": name,
                "how": sel.how,
                "sel": sel.desc,
                "h": self.source,
                "el": sh.pack(sh.flat(rows, cols)),
            },
            lambda: sel.assign(a, values),
        )

    def op_read(self) -> None:
        name = self.rng.choice(tuple(ARRAYS))
        a = self.array(name)
        sel = pick_selection(self.rng, a, ARRAYS[name]["growing"], False)
        if sel is None:
            return
        before = a.shape
        op = self.new_op()

        def read() -> dict[str, Any]:
            got = np.asarray(sel.apply(a), dtype=np.int64)
            for shape in dict.fromkeys((a.shape, before)):
                try:
                    rows, cols = sel.index(a, *shape)
                except IndexError:
                    continue
                if rows.shape == got.shape:
                    return {
                        "el": sh.pack(sh.flat(rows, cols)),
                        "val": sh.pack(got),
                        "unit": sh.pack(units_of(a, rows, cols)),
                    }
            return {"unchecked": f"result {got.shape} fits neither shape {before} nor {a.shape}"}

        self._do(op, "read", {"arr": name, "how": sel.how, "sel": sel.desc, "h": self.source}, read)

    def op_append(self) -> None:
        name = self.rng.choice([n for n, s in ARRAYS.items() if s["growing"]])
        # (not the handle the threads share: append returns the handle's shape after it, which there may
        # include another thread's append; see MetaChanges)
        a = self.array(name, shared=False)
        source = self.source
        rows, cols = a.shape
        k = self.rng.randint(1, 6)
        if rows + k > ARRAYS[name]["max_rows"]:
            return self.op_resize(name, self.rng.randint(1, max(1, rows - 8)))
        op = self.new_op()
        values = sh.encode(op, np.arange(k)[:, None], np.arange(cols)[None, :])
        extra = {"chunks": "repeat"} if name == "gx" and self.rng.random() < 0.3 else {}

        def append() -> dict[str, Any]:
            with self.changes.change(name) as out:
                n = int(a.append(values, **extra)[0])
            # (a handle from consolidated metadata reads zarr.json again before its first write: the
            # append's data, whose shape may then include other clients' appends)
            return {"n": n, "exact": out["exact"] and source != "group"}

        self._do(op, "append", {"arr": name, "k": k, "h": source, **extra}, append)
        return None

    def op_resize(self, name: str | None = None, n: int | None = None) -> None:
        name = name or self.rng.choice([n for n, s in ARRAYS.items() if s["growing"]])
        a = self.array(name)
        n = n if n is not None else self.rng.randint(1, ARRAYS[name]["max_rows"])
        extra = {"chunks": "repeat"} if name == "gx" and self.rng.random() < 0.3 else {}
        op = self.new_op()

        def resize() -> None:
            with self.changes.change(name):
                a.resize((n, a.shape[1]), **extra)

        self._do(op, "resize", {"arr": name, "n": n, "h": self.source, **extra}, resize)

    def op_attrs(self) -> None:
        doc = self.rng.choice(DOCS)
        node = self.node(doc)
        op = self.new_op()
        if self.rng.random() < 0.15:
            key = self.rng.choice(sh.KEYS)

            def delete() -> None:
                with self.changes.change(doc):
                    del node.attrs[key]

            self._do(op, "attrs", {"doc": doc, "set": {key: None}}, delete, fail=(KeyError,))
            return
        changes = {k: op for k in self.rng.sample(sh.KEYS, self.rng.randint(1, 3))}

        def update() -> None:
            with self.changes.change(doc):
                node.attrs.update(changes)

        self._do(op, "attrs", {"doc": doc, "set": changes}, update)

    def op_create(self) -> None:
        path = self.rng.choice(NODES)
        name = path.split("/")[1]
        group = rectizarr.open_group(self.store, path="nodes", mode="r+", use_consolidated=False)
        op = self.new_op()
        what = "group" if self.rng.random() < 0.7 else "array"

        def create() -> None:
            if what == "group":
                group.create_group(name, attributes={"born": op})
            else:
                group.create_array(
                    name, shape=(4,), dtype="i8", chunks=(2,), fill_value=-1, attributes={"born": op}
                )

        self._do(op, "create", {"node": path, "as": what}, create, fail=(NodeExistsError,))

    def op_delete(self) -> None:
        path = self.rng.choice(NODES)
        group = rectizarr.open_group(self.store, path="nodes", mode="r+", use_consolidated=False)
        op = self.new_op()
        self._do(
            op, "delete", {"node": path}, lambda: group.delete(path.split("/")[1]), fail=(NodeNotFoundError,)
        )

    def op_exists(self) -> None:
        path = self.rng.choice(NODES)
        op = self.new_op()

        def look() -> dict[str, Any]:
            try:
                node = rectizarr.open(self.store, path=path, mode="r")
            except NodeNotFoundError:
                return {"born": None}
            return {"born": node.attrs.get("born")}

        self._do(op, "exists", {"node": path}, look)

    def op_meta(self) -> None:
        self._do(
            self.new_op(), "meta", {"doc": (doc := self.rng.choice(DOCS))}, lambda: read_doc(self.store, doc)
        )

    def op_consolidate(self) -> None:
        def consolidate() -> None:
            rectizarr.consolidate_metadata(self.store)

        self._do(self.new_op(), "consolidate", {}, consolidate)

    def op_cread(self) -> None:
        def read() -> dict[str, Any]:
            g = rectizarr.open_group(self.store, mode="r")
            entries = (g.metadata.consolidated_metadata or {}).get("metadata") or {}
            docs = {d: _keys(entries[d].get("attributes") or {}) for d in DOCS if d and d in entries}
            nodes = {p: (entries[p].get("attributes") or {}).get("born") for p in NODES if p in entries}
            return {"docs": docs, "nodes": nodes}

        self._do(self.new_op(), "cread", {}, read)


def _keys(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: attrs[k] for k in sh.KEYS if k in attrs}


def read_doc(store: Any, doc: str) -> dict[str, Any]:
    """A fresh handle's view of a node's document: its attributes ``k0``..``k3`` (and an array's extent)."""
    if doc in ARRAYS:
        a = rectizarr.open_array(store, path=doc, mode="r")
        return {"attrs": _keys(a.attrs.asdict()), "n": int(a.shape[0])}
    g = rectizarr.open_group(store, path=doc or None, mode="r", use_consolidated=False)
    return {"attrs": _keys(g.attrs.asdict())}


def run_client(
    store: Any, history: Path, proc: int, threads: int, deadline: float, think: float, seed: int
) -> list[threading.Thread]:
    rec = sh.Recorder(history / f"p{proc}.jsonl")
    rec.record({"ev": "start", "proc": proc, "t": sh.now()})
    shared: dict[str, Any] = {}
    lock = threading.Lock()
    changes = MetaChanges()
    workers = [
        Worker(store, rec, proc, t, deadline, think, seed * 1_000_003 + proc * 8 + t, shared, lock, changes)
        for t in range(threads)
    ]
    out = [threading.Thread(target=w.run, name=f"soak-p{proc}-t{w.thread}") for w in workers]
    for t in out:
        t.start()
    return out


def client_main(config_path: str, proc: int) -> None:
    """Body of a client process (``soak.py --client CONFIG PROC``)."""
    cfg = json.loads(Path(config_path).read_text())
    store = open_soak_store(cfg["store"])
    for t in run_client(
        store, Path(cfg["history"]), proc, cfg["threads"], cfg["deadline"], cfg["think"], cfg["seed"]
    ):
        t.join()


# ------------------------------------------------------------------------------------------- the server
# The faults drawn for each kind of request (see tests/s3_faults.py; "slow": answered after a pause)
FAULTS_BY_KIND = {
    "get": ("500", "503", "reset", "truncate", "slow"),
    "get_range": ("500", "503", "reset", "truncate", "slow"),
    "head": ("500", "503", "reset", "slow"),
    "put": ("500", "503", "412", "lost", "lost_reset", "reset", "slow"),
    "delete": ("500", "503", "lost", "lost_reset", "reset", "slow"),
    "list": ("500", "503", "reset", "slow"),
}


class RandomFaults:
    """WSGI middleware in front of a :class:`tests.s3_faults.FaultInjector`: each request draws a fault
    with probability ``rate`` (0 at first) among those of its kind (:data:`FAULTS_BY_KIND`; a 412 only for
    a PUT with ``If-Match``, where a real condition could fail, else a 500) and has the injector answer it
    with that fault (``inject(fault, 1, [kind], key=its key)``, just before it goes on to the injector);
    a slow answer is a pause of up to ``slow_max`` seconds here first."""

    def __init__(self, injector: Any, slow_max: float, seed: int) -> None:
        from tests.s3_faults import FAULTS

        self.injector = injector
        self.rate = 0.0
        self.slow_max = slow_max
        self.slow = 0
        self._known = set(FAULTS)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        from tests.s3_faults import CONTROL_PREFIX, classify

        path = environ.get("PATH_INFO", "")
        if self.rate > 0 and not path.startswith(CONTROL_PREFIX):
            kind = classify(environ)
            with self._lock:
                fault = None
                if kind in FAULTS_BY_KIND and self._rng.random() < self.rate:
                    fault = self._rng.choice(
                        [f for f in FAULTS_BY_KIND[kind] if f == "slow" or f in self._known]
                    )
                delay = self._rng.uniform(0.05, self.slow_max)
            if fault == "412" and not environ.get("HTTP_IF_MATCH"):
                fault = "500"
            if fault == "slow":
                with self._lock:
                    self.slow += 1
                time.sleep(delay)
            elif fault is not None:
                key = path.lstrip("/").partition("/")[2]
                try:
                    self.injector.inject(fault, 1, [kind], key=key)
                except TypeError:  # an injector without per-key rules: the next request of the kind
                    self.injector.inject(fault, 1, [kind])
        return self.injector(environ, start_response)

    def counts(self) -> dict[str, int]:
        out = {k[len("fault_") :]: v for k, v in self.injector.counts().items() if k.startswith("fault_")}
        out["slow"] = self.slow
        return out


def start_s3(slow_max: float, seed: int) -> tuple[RandomFaults, Any, str]:
    """A moto S3 server on 127.0.0.1 (a free port, threads of this process) behind a fault injector and
    :class:`RandomFaults`."""
    import logging

    from moto.server import MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    from tests.s3_faults import FaultInjector

    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)  # (the faults make it complain)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, "testing")
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    faults = RandomFaults(FaultInjector(create_backend_app("s3")), slow_max, seed)
    server = make_server("127.0.0.1", 0, faults, threaded=True, request_handler=MotoRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return faults, server, f"http://127.0.0.1:{server.server_port}"


# ------------------------------------------------------------------------------------------ coordinator
class Coordinator:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.work = Path(a.dir or tempfile.mkdtemp(prefix=f"soak-{a.store}-"))
        self.work.mkdir(parents=True, exist_ok=True)
        self.history = self.work / "history"
        self.history.mkdir(exist_ok=True)
        self.rng = random.Random(a.seed)
        self.rec = sh.Recorder(self.history / "p0.jsonl")
        self.seq = 0
        self.kills: list[dict[str, Any]] = []
        self.procs: dict[int, subprocess.Popen[bytes]] = {}  # proc -> process, running clients
        self.next_proc = 1
        self.injector: Any = None
        self.server: Any = None
        self.store_spec: dict[str, Any] = {"kind": a.store}
        self.remote = a.store.startswith("s3")
        self.kill_slack = (a.slow_max + 5.0) if self.remote else 1.0
        self.err_slack = (a.slow_max + 1.0) if self.remote else 0.1

    def op(self) -> int:
        self.seq += 1
        return sh.op_id(0, 0, self.seq)

    # ---- set-up
    def make_store(self) -> Any:
        kind = self.a.store
        if kind == "local":
            self.store_spec["path"] = str(self.work / "store.zarr")
        elif kind == "zip":
            self.store_spec["path"] = str(self.work / "store.zip")
        elif kind == "memory":
            self.store_spec["object"] = rectizarr.MemoryStore()
        else:
            self.injector, self.server, endpoint = start_s3(self.a.slow_max, self.a.seed)
            bucket = f"soak-{os.getpid()}"
            import s3fs

            s3fs.S3FileSystem(
                key="testing",
                secret="testing",
                skip_instance_cache=True,
                client_kwargs={"endpoint_url": endpoint, "region_name": "us-east-1"},
            ).call_s3("create_bucket", Bucket=bucket)
            self.store_spec.update(endpoint=endpoint, bucket=bucket)
        return open_soak_store(self.store_spec)

    def setup(self, store: Any) -> None:
        """The hierarchy, each step recorded as an operation of process 0."""
        op = self.op()
        self.rec.invoke(op, "attrs", doc="", set=dict.fromkeys(sh.KEYS, op))
        root = rectizarr.create_group(store, attributes=dict.fromkeys(sh.KEYS, op))
        self.rec.complete(op, "ok")
        op = self.op()
        self.rec.invoke(op, "attrs", doc="nodes", set=dict.fromkeys(sh.KEYS, op))
        root.create_group("nodes", attributes=dict.fromkeys(sh.KEYS, op))
        self.rec.complete(op, "ok")
        for name, spec in ARRAYS.items():
            init, attrs = self.op(), self.op()
            self.rec.invoke(init, "init", arr=name, n=spec["rows"])
            self.rec.invoke(attrs, "attrs", doc=name, set=dict.fromkeys(sh.KEYS, attrs))
            a = root.create_array(
                name,
                shape=(spec["rows"], spec["cols"]),
                dtype="i8",
                fill_value=-1,
                attributes=dict.fromkeys(sh.KEYS, attrs),
                **spec["create"],
            )
            self.rec.complete(attrs, "ok")
            self.rec.complete(init, "ok")
            op = self.op()
            rows, cols = np.meshgrid(np.arange(spec["rows"]), np.arange(spec["cols"]), indexing="ij")
            self.rec.invoke(op, "write", arr=name, how="basic", sel="...", el=sh.pack(sh.flat(rows, cols)))
            a[...] = sh.encode(op, rows, cols)
            self.rec.complete(op, "ok")
        op = self.op()
        self.rec.invoke(op, "consolidate")
        rectizarr.consolidate_metadata(store)
        self.rec.complete(op, "ok")

    # ---- clients and the killer
    def config(self, deadline: float) -> Path:
        path = self.work / "client.json"
        path.write_text(
            json.dumps(
                {
                    "store": self.store_spec,
                    "history": str(self.history),
                    "threads": self.a.threads,
                    "deadline": deadline,
                    "think": self.a.think,
                    "seed": self.a.seed,
                }
            )
        )
        return path

    def spawn(self, config: Path) -> int:
        proc = self.next_proc
        self.next_proc += 1
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        self.procs[proc] = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--client", str(config), str(proc)],
            cwd=ROOT,
            env=env,
        )
        return proc

    def started(self, proc: int) -> bool:
        path = self.history / f"p{proc}.jsonl"
        return path.exists() and path.stat().st_size > 200  # its start record and an operation or two

    def run_processes(self, deadline: float) -> None:
        config = self.config(deadline)
        for _ in range(self.a.clients):
            self.spawn(config)
        every = self.a.kill_every
        next_kill = sh.now() + self.rng.uniform(0.5, 1.0) * every if every > 0 else sh.INF
        while sh.now() < deadline:
            time.sleep(min(0.1, max(0.0, deadline - sh.now())))
            for proc, p in list(self.procs.items()):
                if p.poll() is not None and sh.now() < deadline - 1:
                    print(
                        f"soak: client process {proc} exited with {p.returncode} before the deadline; "
                        "restarting it",
                        file=sys.stderr,
                    )
                    del self.procs[proc]
                    self.spawn(config)
            if sh.now() < next_kill or len(self.kills) >= self.a.max_kills or sh.now() > deadline - 0.5:
                continue
            ready = [proc for proc, p in self.procs.items() if p.poll() is None and self.started(proc)]
            if not ready:
                continue
            victim = self.rng.choice(ready)
            p = self.procs.pop(victim)
            p.send_signal(signal.SIGKILL)
            p.wait()
            self.kills.append({"proc": victim, "t": sh.now(), "wall": time.time()})
            if sh.now() < deadline - 1:
                self.spawn(config)
            next_kill = sh.now() + self.rng.uniform(0.5, 1.5) * every
        for proc, p in self.procs.items():
            try:
                p.wait(timeout=max(60.0, 4 * self.a.slow_max + 30))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                self.kills.append({"proc": proc, "t": sh.now(), "wall": time.time()})
                self.rec.record({"ev": "final", "what": "hung", "proc": proc})

    def run_threads(self, store: Any, deadline: float) -> None:
        threads = []
        for _ in range(self.a.clients):
            proc = self.next_proc
            self.next_proc += 1
            threads += run_client(
                store, self.history, proc, self.a.threads, deadline, self.a.think, self.a.seed
            )
        for t in threads:
            t.join(timeout=max(1.0, deadline - sh.now()) + 120)
            if t.is_alive():
                self.rec.record({"ev": "final", "what": "hung", "proc": t.name})

    # ---- the end
    def final(self, store: Any) -> None:
        """With every client stopped and no faults: each array read whole, each document and node looked at
        (recorded like clients' reads: a stale value here is a lost write), the consolidated entries against
        the documents, and every lock of the store taken."""
        for name in ARRAYS:
            op = self.op()
            self.rec.invoke(op, "read", arr=name, how="basic", sel="...", final=True)
            try:
                a = rectizarr.open_array(store, path=name, mode="r")
                got = np.asarray(a[...], dtype=np.int64)
                rows, cols = np.meshgrid(np.arange(a.shape[0]), np.arange(a.shape[1]), indexing="ij")
                self.rec.complete(
                    op,
                    "ok",
                    el=sh.pack(sh.flat(rows, cols)),
                    val=sh.pack(got),
                    unit=sh.pack(units_of(a, rows, cols)),
                )
            except Exception as exc:
                self.rec.complete(
                    op, "err", exc=type(exc).__name__, msg=str(exc)[:300], rz=isinstance(exc, RectizarrError)
                )
                self.rec.record(
                    {"ev": "final", "what": "failed-read", "target": name, "msg": repr(exc)[:300]}
                )
        for doc in DOCS:
            op = self.op()
            self.rec.invoke(op, "meta", doc=doc, final=True)
            try:
                self.rec.complete(op, "ok", **read_doc(store, doc))
            except Exception as exc:
                self.rec.complete(
                    op, "err", exc=type(exc).__name__, msg=str(exc)[:300], rz=isinstance(exc, RectizarrError)
                )
                self.rec.record(
                    {"ev": "final", "what": "failed-read", "target": doc or "/", "msg": repr(exc)[:300]}
                )
        for path in NODES:
            op = self.op()
            self.rec.invoke(op, "exists", node=path, final=True)
            try:
                node = rectizarr.open(store, path=path, mode="r")
                self.rec.complete(op, "ok", born=node.attrs.get("born"))
            except NodeNotFoundError:
                self.rec.complete(op, "ok", born=None)
        self.rec.record({"ev": "final", "what": "consolidated", **consolidated_vs_documents(store)})
        self.rec.record({"ev": "final", "what": "locks", "held": locks_held(store)})

    def write_run(self, seconds: float) -> None:
        faults = self.injector.counts() if self.injector is not None else {}
        (self.history / "run.json").write_text(
            json.dumps(
                {
                    "store": self.a.store,
                    "seconds": seconds,
                    "clients": self.a.clients,
                    "threads": self.a.threads,
                    "arrays": {n: {k: v for k, v in s.items() if k != "create"} for n, s in ARRAYS.items()},
                    "kills": self.kills,
                    "kill_slack": self.kill_slack,
                    "err_slack": self.err_slack,
                    "faults": faults,
                    "fault_rate": self.a.fault_rate if self.remote else 0.0,
                    "seed": self.a.seed,
                },
                indent=1,
            )
        )

    def main(self) -> int:
        a = self.a
        t0 = sh.now()
        store = self.make_store()
        self.setup(store)
        deadline = sh.now() + a.seconds
        if self.injector is not None:
            self.injector.rate = a.fault_rate
        try:
            if a.store in ("memory", "zip"):
                self.run_threads(store, deadline)
            else:
                self.run_processes(deadline)
        finally:
            for p in self.procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
        if self.injector is not None:
            self.injector.rate = 0.0
        last = max((k["t"] for k in self.kills), default=-sh.INF)
        time.sleep(max(0.0, min(last + self.kill_slack - sh.now(), self.kill_slack)))
        if a.store == "zip":
            store.close()
        final_store = open_soak_store(self.store_spec, "r" if a.store == "zip" else "a")
        self.final(final_store)
        self.write_run(sh.now() - t0)
        self.rec.close()
        if self.server is not None:
            self.injector.injector.release()
            self.server.shutdown()
            self.server.server_close()
        report, history = sh.check(self.history, self.store_spec["path"] if a.store == "local" else None)
        with open(self.work / "report.txt", "w") as f:
            sh.print_report(report, history, out=f, limit=10_000)
        sh.print_report(report, history)
        keep = a.keep or bool(report.violations)
        if keep:
            print(f"soak: history, store and report in {self.work}")
        elif a.dir is None:
            shutil.rmtree(self.work, ignore_errors=True)
        return 1 if report.violations else 0


def consolidated_vs_documents(store: Any) -> dict[str, Any]:
    """The root's consolidated entry of each node beside the node's own document (attributes; an array's
    shape and grid too), for the checker to compare."""
    root = rectizarr.open_group(store, mode="r", use_consolidated=False)
    entries = (root.metadata.consolidated_metadata or {}).get("metadata") or {}

    def summary(doc: dict[str, Any] | None) -> Any:
        if doc is None:
            return None
        return {k: doc.get(k) for k in ("node_type", "attributes", "shape", "chunk_grid") if k in doc}

    docs: dict[str, Any] = {}
    for path in (
        *[d for d in DOCS if d],
        *NODES,
    ):  # as readers see them (an uncommitted update's marker decided)
        meta = rectizarr.nodes.try_read_meta(store, path, 3)
        docs[path] = summary(None if meta is None else rectizarr.nodes.node_doc(meta))
    return {"entries": {p: summary(entries.get(p)) for p in docs}, "docs": docs}


def locks_held(store: Any, budget: float = 60.0) -> list[str]:
    """Every key's lock taken and let go, one at a time, in a thread; the key it still waits for after
    ``budget`` seconds (the locks are striped and shared with every other user of the machine: a wait
    that long is a lock left held)."""
    keys = sorted(set(store.list_prefix("")) | {f"{p}/zarr.json".lstrip("/") for p in DOCS})
    at: list[str] = []

    def take() -> None:
        for key in keys:
            at[:] = [key]
            with store.lock([key]):
                pass
        at.clear()

    t = threading.Thread(target=take, daemon=True)
    t.start()
    t.join(budget)
    return list(at) if t.is_alive() else []


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", choices=STORES, default="local")
    length = p.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=float, default=None, help="run time (default 10)")
    length.add_argument("--hours", type=float, default=None)
    length.add_argument("--seconds", type=float, default=None)
    p.add_argument(
        "--clients", type=int, default=4, help="client processes (threads of this one: memory, zip)"
    )
    p.add_argument("--threads", type=int, default=2, help="threads per client (at most 8)")
    p.add_argument(
        "--kill-every",
        type=float,
        default=20.0,
        help="mean seconds between SIGKILLs of a random client (0: none; not for memory, zip)",
    )
    p.add_argument("--max-kills", type=int, default=1_000_000)
    p.add_argument(
        "--fault-rate", type=float, default=0.02, help="S3: share of requests answered with a fault"
    )
    p.add_argument("--slow-max", type=float, default=1.0, help="S3: the longest slow answer, seconds")
    p.add_argument(
        "--think", type=float, default=0.02, help="mean pause between a thread's operations, seconds"
    )
    p.add_argument("--nice", type=int, default=10, help="niceness added to this process and its clients")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--dir", default=None, help="work directory (default: a new temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the work directory even without violations")
    a = p.parse_args(argv)
    a.seconds = (
        a.seconds
        if a.seconds is not None
        else a.hours * 3600
        if a.hours is not None
        else (a.minutes if a.minutes is not None else 10.0) * 60
    )
    if not 1 <= a.threads <= 8 or a.clients < 1:
        p.error("--threads must be 1-8 and --clients at least 1")
    if a.seed is None:
        a.seed = random.randrange(2**31)
    return a


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--client"]:
        client_main(argv[1], int(argv[2]))
        return 0
    a = parse(argv)
    with contextlib.suppress(OSError):
        os.nice(a.nice)  # a background job: the S3 server here, the clients (which inherit it)
    print(
        f"soak: store={a.store} {a.seconds:.0f}s {a.clients}x{a.threads} seed={a.seed} "
        f"kill-every={a.kill_every}s fault-rate={a.fault_rate if a.store.startswith('s3') else 0}",
        flush=True,
    )
    return Coordinator(a).main()


if __name__ == "__main__":
    sys.exit(main())
