"""The Python (GIL-held) time of a read or write: the many-core proxy of issue 33 that a 2-core machine can
measure. A child process opens the array and does the work once (imports, caches, pages), then waits with
the GIL released; ``py-spy record --gil`` is attached to it and the child repeats the work ``reps`` times
with one codec thread (``set_workers(1)``). py-spy keeps only samples of the thread holding the GIL, so
samples / rate is the time some thread of the child held the GIL: what 16 cores could not share.

    python benchmarks/gil.py read PATH [--reps 10] [--sel "np.s_[...]"]     # prints µs per read

Needs the ``py-spy`` binary (the ``bench`` extra) and permission to trace a child (root, or
``kernel.yama.ptrace_scope`` 0); :func:`gil_held` returns None where it cannot run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

RATE = 997  # samples per second (prime: no lock-step with periodic work)

_CHILD = r"""
import sys, time
import numpy as np
import rectizarr
kind, path, sel, reps = sys.argv[1], sys.argv[2], eval(sys.argv[3], {"np": np}), int(sys.argv[4])
rectizarr.set_workers(1)
if kind == "read":
    a = rectizarr.open_array(path, mode="r")
    work = lambda: a[sel]
else:
    src = rectizarr.open_array(path, mode="r")
    data = np.asarray(src[...])
    tmp = sys.argv[5]
    def work():
        b = rectizarr.create_array(tmp, shape=src.shape, dtype=src.dtype, chunks=src.chunks, shards=src.shards,
                                   compressors=src.compressors, fill_value=src.fill_value, overwrite=True)
        b[...] = data
work()
print("ready", flush=True)
sys.stdin.readline()  # py-spy attaches while this waits without the GIL
t0 = time.perf_counter()
for _ in range(reps):
    work()
print(time.perf_counter() - t0, flush=True)
"""


def py_spy() -> str | None:
    """The py-spy binary beside this interpreter, or on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return here if os.path.exists(here) else shutil.which("py-spy")


def gil_held(
    kind: str, path: str, sel: str = "...", reps: int = 10, where: dict[str, int] | None = None
) -> tuple[float, float] | None:
    """(seconds of GIL held, wall seconds) per repeat of ``kind`` ('read' of ``sel``, or 'write' of the
    whole array into a new one like it) on one codec thread; None where py-spy cannot run. ``where``, if
    given, receives the samples per innermost frame."""
    spy = py_spy()
    if spy is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out, target = os.path.join(tmp, "spy.txt"), os.path.join(tmp, "w.zarr")
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, kind, path, sel, str(reps), target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdin is not None and child.stdout is not None
        try:
            if child.stdout.readline().strip() != "ready":
                return None
            rec = subprocess.Popen(
                [
                    spy,
                    "record",
                    "--gil",
                    "--nonblocking",
                    "-r",
                    str(RATE),
                    "-f",
                    "raw",
                    "-o",
                    out,
                    "--pid",
                    str(child.pid),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1.0)  # attached
            child.stdin.write("go\n")
            child.stdin.flush()
            wall = float(child.stdout.readline())
            child.wait(60)
            rec.wait(60)
        finally:
            child.kill()
        if rec.returncode != 0 or not os.path.exists(out):
            return None
        samples = 0
        with open(out) as f:
            for line in f:
                stack, n = line.rsplit(" ", 1)
                samples += int(n)
                if where is not None:
                    leaf = stack.rsplit(";", 1)[-1]
                    where[leaf] = where.get(leaf, 0) + int(n)
    return samples / RATE / reps, wall / reps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=["read", "write"])
    p.add_argument("path")
    p.add_argument("--sel", default="...")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--chunks", type=int, default=0, help="divide by this many chunks")
    p.add_argument("--top", type=int, default=0, help="print the innermost frames holding the GIL most")
    args = p.parse_args()
    where: dict[str, int] = {}
    got = gil_held(args.kind, args.path, args.sel, args.reps, where)
    if got is None:
        print("py-spy could not run here")
        return
    held, wall = got
    per = f", {held / args.chunks * 1e6:.2f} µs per chunk" if args.chunks else ""
    print(f"GIL held {held * 1e3:.2f} ms of {wall * 1e3:.2f} ms per {args.kind} (one codec thread){per}")
    total = sum(where.values()) or 1
    for leaf, n in sorted(where.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {100 * n / total:5.1f} %  {leaf}")


if __name__ == "__main__":
    main()
