"""Thread sweep: how each implementation scales with the cores it is given (issue 33).

    python benchmarks/scale.py                 # n = 1, 2, 4, ... up to the usable cores -> benchmarks/scale.md
    python benchmarks/scale.py --quick         # small arrays, 1 repeat (a check of the script, not a result)
    python benchmarks/scale.py --threads 1,2,16 --only R,F

For each workload and each n: rectizarr with ``set_workers(n)``, TensorStore with ``data_copy_concurrency``
and ``file_io_concurrency`` limited to n (a fresh context per n), and zarr-python + zarrs at its full width
(it has no such knob); the median of the repeats, the process CPU time of the median repeat, each
implementation's speedup over its own n = 1, and rectizarr's time over the best peer at that n. Every
implementation reads the same bytes (uint16, zstd level 1, written once by rectizarr, which writes
zarr-python's bytes for these arrays) from a local directory in the page cache. Writes go to a fresh
directory each.

The last column is the 2-core proxy for many cores: the time rectizarr held the GIL per chunk on one codec
thread (``benchmarks/gil.py``, py-spy; "-" where py-spy cannot run). Python holding the GIL is what more
cores cannot share: at 5 µs per chunk, 20,000 chunks take 100 ms whatever the core count.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gil import gil_held  # noqa: E402
from impls import BY_NAME, Spec, zarr_json  # noqa: E402

RZ, ZS, TS = "rectizarr", "zarr-python+zarrs", "tensorstore"


@dataclass(frozen=True)
class Workload:
    id: str
    what: str
    spec: Spec
    kind: str  # read | write | oindex
    sel: str = "..."

    @property
    def nchunks(self) -> int:
        return int(np.prod([-(-s // c) for s, c in zip(self.spec.shape, self.spec.chunks, strict=True)]))


def workloads(quick: bool, full: bool) -> list[Workload]:
    depth = 16 if quick else 512 if full else 128  # (depth, 1024, 1024) uint16: 128 -> 256 MiB, 512 -> 1 GiB
    n1 = 2000 if quick else 20000  # 1-D: chunks of 512 uint16
    cube = (depth, 1024, 1024)
    size = f"{depth * 2} MiB"
    return [
        Workload("R", f"full read, {size}, 64x128x64 chunks", Spec(cube, "uint16", (64, 128, 64)), "read"),
        Workload(
            "RS",
            f"full read, {size} in 64x512x256 shards",
            Spec(cube, "uint16", (64, 128, 64), (64, 512, 256)),
            "read",
        ),
        Workload("W", f"full write, {size}, 64x128x64 chunks", Spec(cube, "uint16", (64, 128, 64)), "write"),
        Workload(
            "O",
            "oindex[::7, 100:900, [1, 5, 9]]",
            Spec(cube, "uint16", (64, 128, 64)),
            "oindex",
            "np.s_[::7, 100:900, [1, 5, 9]]",
        ),
        Workload("F", f"1-D, {n1:,} chunk files of 512 uint16", Spec((n1 * 512,), "uint16", (512,)), "read"),
        Workload(
            "FS",
            f"1-D, {n1:,} such chunks in {n1 // 1000} shards",
            Spec((n1 * 512,), "uint16", (512,), (512 * 1000,)),
            "read",
        ),
    ]


def smooth(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """uint16 values that compress as measured data does (a smooth field plus noise)."""
    rng = np.random.default_rng(seed)
    flat = np.cumsum(rng.integers(-3, 4, size=int(np.prod(shape)), dtype=np.int64)) % 4096
    return (flat + rng.integers(0, 64, size=flat.size)).astype(np.uint16).reshape(shape)


def ts_open(path: str, n: int, create: Spec | None = None) -> Any:
    import tensorstore as ts

    ctx = ts.Context(
        {"data_copy_concurrency": {"limit": n}, "file_io_concurrency": {"limit": n}, "file_io_sync": False}
    )
    spec: dict[str, Any] = {"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}
    if create is not None:
        spec["metadata"] = zarr_json(create)
        return ts.open(spec, create=True, delete_existing=True, context=ctx).result()
    return ts.open(spec, read=True, context=ctx).result()


def runner(impl: str, w: Workload, path: str, n: int, data: np.ndarray, scratch: str) -> Callable[[], None]:
    """One repeat of ``w`` by ``impl`` at ``n`` threads."""
    sel = eval(w.sel, {"np": np})
    if impl == RZ:
        import rectizarr

        rectizarr.set_workers(n)
        if w.kind == "write":
            return lambda: BY_NAME[RZ].write(
                BY_NAME[RZ].create(scratch, w.spec), data, w.spec.shards is not None
            )
        h = BY_NAME[RZ].open(path)
        return (lambda: h.oindex[sel]) if w.kind == "oindex" else (lambda: h[sel])
    if impl == TS:
        if w.kind == "write":
            return lambda: ts_open(scratch, n, w.spec).write(data).result()
        h = ts_open(path, n)
        return (
            (lambda: h.oindex[sel].read().result())
            if w.kind == "oindex"
            else (lambda: h[sel].read().result())
        )
    impl_ = BY_NAME[ZS]
    if w.kind == "write":
        return lambda: impl_.write(impl_.create(scratch, w.spec), data, w.spec.shards is not None)
    h = impl_.open(path)
    return (lambda: impl_.oindex(h, sel)) if w.kind == "oindex" else (lambda: impl_.read(h, sel))


def timed(fn: Callable[[], None], scratch: str) -> tuple[float, float]:
    shutil.rmtree(scratch, ignore_errors=True)
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    shutil.rmtree(scratch, ignore_errors=True)
    return wall, cpu


def sweep(w: Workload, root: str, threads: list[int], repeats: int, gil: bool) -> dict[str, Any]:
    data = smooth(w.spec.shape)
    path = os.path.join(root, f"{w.id}.zarr")
    if not os.path.exists(path):
        BY_NAME[RZ].write(BY_NAME[RZ].create(path, w.spec), data, w.spec.shards is not None)
    scratch = os.path.join(root, "scratch.zarr")
    rows: dict[str, Any] = {"id": w.id, "what": w.what, "nchunks": w.nchunks, "by_n": {}}
    impls = [RZ, TS, ZS]
    for n in threads:
        samples: dict[str, list[tuple[float, float]]] = {}
        for r in range(repeats):
            order = impls[r % 3 :] + impls[: r % 3]  # round-robin, rotating
            for impl in order:
                if impl == ZS and n != threads[-1]:
                    continue  # zarrs: full width only
                fn = runner(impl, w, path, n, data, scratch)
                fn() if w.kind != "write" and r == 0 else None  # warm: metadata, caches
                samples.setdefault(impl, []).append(timed(fn, scratch))
        rows["by_n"][n] = {impl: _median(s) for impl, s in samples.items()}
        print(
            f"  {w.id} n={n}: "
            + ", ".join(f"{i} {v['wall'] * 1e3:.1f} ms" for i, v in rows["by_n"][n].items()),
            flush=True,
        )
    if gil:
        got = gil_held("write" if w.kind == "write" else "read", path, w.sel, 3 if w.nchunks < 1000 else 5)
        rows["gil_per_chunk"] = None if got is None else got[0] / w.nchunks
    return rows


def _median(s: list[tuple[float, float]]) -> dict[str, float]:
    walls = [w for w, _ in s]
    med = statistics.median(walls)
    cpu = min(s, key=lambda x: abs(x[0] - med))[1]
    return {"wall": med, "cpu": cpu}


def markdown(results: list[dict[str, Any]], threads: list[int], meta: dict[str, str]) -> list[str]:
    lines = [
        "## Thread sweep (issue 33)",
        "",
        f"`make bench-scale` (`benchmarks/scale.py{meta['args']}`) on {meta['stamp']}: {meta['machine']}. "
        f"{meta['versions']}. n = threads given to rectizarr (`set_workers(n)`) and TensorStore "
        "(`data_copy_concurrency` = `file_io_concurrency` = n); zarrs runs at full width (shown at the "
        "largest n). *x1*: speedup over the same implementation at n = 1. *rz/best*: rectizarr's time over "
        "the fastest peer at that n (< 1: rectizarr is faster). CPU: process CPU time of the median repeat. "
        "*GIL/chunk*: the time rectizarr held the GIL per chunk on one codec thread (py-spy), the many-core "
        "ceiling a 2-core machine can measure.",
        "",
        "| workload | n | rectizarr | x1 | CPU | tensorstore | x1 | CPU | zarrs | rz/best | GIL/chunk |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        base = r["by_n"][threads[0]]
        for n in threads:
            row = r["by_n"][n]
            rz, ts_, zs = row.get(RZ), row.get(TS), row.get(ZS)
            peers = [x["wall"] for x in (ts_, zs) if x]
            cells = [f"{r['id']}: {r['what']}" if n == threads[0] else "", str(n)]
            for impl, v in ((RZ, rz), (TS, ts_)):
                cells += (
                    [
                        f"{v['wall'] * 1e3:.1f} ms",
                        f"{base[impl]['wall'] / v['wall']:.2f}",
                        f"{v['cpu'] * 1e3:.0f} ms",
                    ]
                    if v
                    else ["-"] * 3
                )
            cells.append(f"{zs['wall'] * 1e3:.1f} ms" if zs else "")
            cells.append(f"{rz['wall'] / min(peers):.2f}x" if rz and peers else "-")
            gil = r.get("gil_per_chunk")
            cells.append((f"{gil * 1e6:.2f} µs" if gil is not None else "-") if n == threads[0] else "")
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def versions() -> str:
    from importlib.metadata import version

    out = []
    for name in ("numpy", "zstandard", "tensorstore", "zarr", "zarrs"):
        try:
            out.append(f"{name} {version(name)}")
        except Exception:  # not installed
            pass
    return ", ".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--full", action="store_true", help="the 1 GiB arrays of the issue (default 256 MiB)")
    ap.add_argument("--threads", default="", help="comma-separated n (default 1, 2, 4, ... the usable cores)")
    ap.add_argument("--only", default="", help="comma-separated workload ids (R,RS,W,O,F,FS)")
    ap.add_argument("--repeats", type=int, default=0)
    ap.add_argument("--no-gil", action="store_true", help="skip the py-spy GIL measurement")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default=str(HERE / "scale.md"))
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    threads = (
        [int(x) for x in args.threads.split(",")]
        if args.threads
        else sorted({*[1 << k for k in range(8) if 1 << k <= cores], cores})
    )
    repeats = args.repeats or (1 if args.quick else 3)
    chosen = [w for w in workloads(args.quick, args.full) if not args.only or w.id in args.only.split(",")]
    root = args.data_dir or tempfile.mkdtemp(prefix="rz-scale-")
    t0 = time.time()
    try:
        results = [sweep(w, root, threads, repeats, not args.no_gil) for w in chosen]
    finally:
        if args.data_dir is None:
            shutil.rmtree(root, ignore_errors=True)
    flags = " ".join(a for a in sys.argv[1:] if not a.startswith("--out"))
    meta = {
        "args": f" {flags}" if flags else "",
        "stamp": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{cores} cores ({platform.machine()}, {platform.processor() or 'cpu'}), "
        f"Python {platform.python_version()}, {(time.time() - t0) / 60:.1f} minutes",
        "versions": versions(),
    }
    text = "\n".join(markdown(results, threads, meta)) + "\n"
    print(text)
    if not args.quick or args.out != str(HERE / "scale.md"):
        Path(args.out).write_text(text)
        os.makedirs(HERE / "_data", exist_ok=True)
        (HERE / "_data" / "scale.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
