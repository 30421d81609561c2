"""Side-by-side benchmarks: rectizarr vs zarr-python, zarr-python + zarrs, and TensorStore.

    python benchmarks/run.py            # full run (< 10 minutes on 2 cores), writes benchmarks/results.md
    python benchmarks/run.py --quick    # small sizes, 1-2 repeats, writes benchmarks/_data/results-quick.md
    python benchmarks/run.py --only R1,L1 --keep --data-dir /tmp/bench

Every implementation reads the same bytes (written once by rectizarr) from a local directory; writes go to
a fresh directory each. Repeats run round-robin (the order rotates every round) so machine drift hits every
implementation alike; medians are reported, and ratios come from one run. Files are in the page cache
(they were just written): this measures the libraries, not the disk. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from impls import BY_NAME, IMPLS, Impl, Spec  # noqa: E402

RZ, ZP, ZS, TS = "rectizarr", "zarr-python", "zarr-python+zarrs", "tensorstore"
OTHERS = (ZP, ZS, TS)
GiB, MiB = 1 << 30, 1 << 20


# ------------------------------------------------------------------------------------------ sizes


@dataclass(frozen=True)
class Config:
    quick: bool
    big_depth: int  # uint16 (depth, 1024, 1024) headline arrays: 512 -> 1 GiB
    small_depth: int  # uint16 variants: 128 -> 256 MiB
    f32_depth: int  # float32 variants: 64 -> 256 MiB
    r_repeats: int
    big_r_repeats: int
    w_repeats: int
    big_w_repeats: int
    t_rows: int  # T arrays are (t_rows, 5120) uint16 in (16, 32) chunks: 10000 rows -> 100,000 chunks
    t_zarr_rows: int  # zarr-python reads/writes only this many rows of the T arrays (per-chunk ratios)
    t3_rows: int
    t_repeats: int
    l_samples: int
    o_repeats: int
    m2_edges: int
    a1_days: int
    i1_repeats: int


FULL = Config(
    quick=False,
    big_depth=512,
    small_depth=128,
    f32_depth=64,
    r_repeats=3,
    big_r_repeats=5,
    w_repeats=5,
    big_w_repeats=2,
    t_rows=10000,
    t_zarr_rows=1000,
    t3_rows=1000,
    t_repeats=2,
    l_samples=200,
    o_repeats=2,
    m2_edges=1_000_000,
    a1_days=365,
    i1_repeats=20,  # fresh interpreters per module: the median of 5 moved by 10-20 ms on a busy machine
)
QUICK = Config(
    quick=True,
    big_depth=32,
    small_depth=32,
    f32_depth=16,
    r_repeats=2,
    big_r_repeats=2,
    w_repeats=1,
    big_w_repeats=1,
    t_rows=1600,
    t_zarr_rows=400,
    t3_rows=400,
    t_repeats=1,
    l_samples=40,
    o_repeats=1,
    m2_edges=100_000,
    a1_days=40,
    i1_repeats=3,
)


# ------------------------------------------------------------------------------------------ results


@dataclass
class Row:
    workload: str
    case: str
    impl: str
    samples: list[float] = field(default_factory=list)  # seconds
    per: int = 1  # report samples / per (e.g. per chunk)
    per_label: str = ""
    nbytes: int | None = None  # output/input bytes, for throughput
    limit: bool = False  # a "limit" row (not an implementation)
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.samples) / self.per

    @property
    def p90(self) -> float | None:
        if len(self.samples) < 5:
            return None
        return float(np.percentile(self.samples, 90)) / self.per


@dataclass
class Results:
    cfg: Config
    rows: list[Row] = field(default_factory=list)
    tables: dict[str, list[str]] = field(default_factory=dict)  # extra markdown tables (A1, P1)
    extras: dict[str, Any] = field(default_factory=dict)  # numbers for targets (P1 ratio ...)
    log: list[str] = field(default_factory=list)
    phase_times: dict[str, float] = field(default_factory=dict)

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row

    def find(self, workload: str, case: str, impl: str) -> Row | None:
        for r in self.rows:
            if r.workload == workload and r.case == case and r.impl == impl:
                return r
        return None


def say(msg: str) -> None:
    print(msg, flush=True)


# ------------------------------------------------------------------------------------------ timing


def round_robin(fns: dict[str, Callable[[], float]], repeats: int, rows: dict[str, Row]) -> None:
    """Call every ``fn`` (which returns the seconds it measured) ``repeats`` times, rotating the order."""
    names = list(fns)
    for r in range(repeats):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            gc.collect()
            rows[name].samples.append(fns[name]())


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    del out
    return dt


# ------------------------------------------------------------------------------------------ data


def smooth_u16(depth: int, seed: int = 0) -> np.ndarray:
    """A smooth field plus 2 bits of noise: zstd level 1 gets ~1.25x, blosc-lz4 + shuffle ~1.7x.
    The noise of 64 planes is reused (a chunk holds 8 planes, so no chunk sees a repeat)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:1024, 0:1024]
    base = (20000 + 8000 * np.sin(x / 97.0) * np.cos(y / 131.0)).astype(np.uint16)
    noise = rng.integers(0, 4, size=(min(depth, 64), 1024, 1024), dtype=np.uint16)
    out = np.empty((depth, 1024, 1024), np.uint16)
    for z in range(0, depth, noise.shape[0]):
        n = min(noise.shape[0], depth - z)
        np.add(base[None] + np.uint16(z % 50), noise[:n], out=out[z : z + n])
    return out


def smooth_f32(depth: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:1024, 0:1024]
    base = (200 + 80 * np.sin(x / 97.0) * np.cos(y / 131.0)).astype(np.float32)
    out = np.empty((depth, 1024, 1024), np.float32)
    for z in range(0, depth, 8):
        n = min(8, depth - z)
        out[z : z + n] = base[None] + rng.normal(0, 0.01, size=(n, 1024, 1024)).astype(np.float32)
    return out


def cube_spec(depth: int, dtype: str, codec: str, sharded: bool) -> Spec:
    inner = 8 if dtype == "uint16" else 4  # 1 MiB chunks
    chunks = (inner, 256, 256)
    shards = (inner * 4, 1024, 1024) if sharded else None  # 4 x 4 x 4 = 64 inner chunks per shard
    return Spec((depth, 1024, 1024), dtype, chunks, shards, codec)


def human_bytes(n: float) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


def dir_files(path: str) -> dict[str, tuple[int, int, int]]:
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            st = os.stat(p)
            out[p] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def chunk_files(path: str) -> list[str]:
    return sorted(p for p in dir_files(path) if not p.endswith("zarr.json"))


def rmtree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


# ------------------------------------------------------------------------------------------ R1 / W1


def bench_r1_w1(res: Results, root: str, keep_for_later: dict[str, tuple[str, Spec]]) -> None:
    cfg = res.cfg
    cases = [
        ("uint16 zstd", cfg.big_depth, "uint16", "zstd", True),
        ("uint16 raw", cfg.small_depth, "uint16", "raw", False),
        ("uint16 blosc-lz4", cfg.small_depth, "uint16", "blosc-lz4", True),
        ("float32 zstd", cfg.f32_depth, "float32", "zstd", False),
    ]
    for label, depth, dtype, codec, limits in cases:
        t0 = time.perf_counter()
        data = smooth_u16(depth) if dtype == "uint16" else smooth_f32(depth)
        say(f"  data {label}: {human_bytes(data.nbytes)} in {time.perf_counter() - t0:.1f}s")
        for sharded in (False, True):
            spec = cube_spec(depth, dtype, codec, sharded)
            case = f"{label} {'sharded' if sharded else 'chunked'}, {human_bytes(spec.nbytes)}"
            big = depth == cfg.big_depth and dtype == "uint16"
            dataset = _w1(res, root, case, spec, data, sharded, cfg.big_w_repeats if big else cfg.w_repeats)
            _r1(res, case, dataset, data, cfg.big_r_repeats if big else cfg.r_repeats)
            if limits and not sharded:
                _limits(res, case, dataset, spec, data)
            if label == "uint16 zstd":
                keep_for_later["sharded" if sharded else "chunked"] = (dataset, spec)
            else:
                rmtree(dataset)
        del data
        gc.collect()


def _w1(res: Results, root: str, case: str, spec: Spec, data: np.ndarray, sharded: bool, repeats: int) -> str:
    rows = {impl.name: res.add(Row("W1", case, impl.name, nbytes=spec.nbytes)) for impl in IMPLS}
    outs = {impl.name: os.path.join(root, f"W1-{impl.name}.zarr") for impl in IMPLS}

    def writer(impl: Impl) -> Callable[[], float]:
        def run() -> float:
            rmtree(outs[impl.name])
            t0 = time.perf_counter()
            h = impl.create(outs[impl.name], spec)
            impl.write(h, data, sharded)
            return time.perf_counter() - t0

        return run

    round_robin({impl.name: writer(impl) for impl in IMPLS}, repeats, rows)
    # Everyone wrote the same array: check what each wrote reads back (with rectizarr) in one corner.
    import rectizarr

    corner = (slice(0, spec.chunks[0] + 1), slice(0, 300), slice(1000, 1024))
    for impl in IMPLS:
        got = rectizarr.open_array(outs[impl.name], mode="r")[corner]
        if not np.array_equal(got, data[corner]):
            raise AssertionError(f"W1 {case}: {impl.name} wrote different data")
    for name, path in outs.items():
        if name != RZ:
            rmtree(path)
    dataset = os.path.join(root, f"R1-{case.split(',')[0].replace(' ', '-')}.zarr")
    rmtree(dataset)
    os.rename(outs[RZ], dataset)
    _report(res, "W1", case)
    return dataset


def _r1(res: Results, case: str, dataset: str, data: np.ndarray, repeats: int) -> None:
    rows = {impl.name: res.add(Row("R1", case, impl.name, nbytes=data.nbytes)) for impl in IMPLS}
    checked: set[str] = set()

    def reader(impl: Impl) -> Callable[[], float]:
        def run() -> float:
            t0 = time.perf_counter()
            out = impl.read(impl.open(dataset))
            dt = time.perf_counter() - t0
            if impl.name not in checked:
                checked.add(impl.name)
                if not np.array_equal(out, data):
                    raise AssertionError(f"R1 {case}: {impl.name} read different data")
            return dt

        return run

    round_robin({impl.name: reader(impl) for impl in IMPLS}, repeats, rows)
    _report(res, "R1", case)


def _limits(res: Results, case: str, dataset: str, spec: Spec, data: np.ndarray) -> None:
    """What the hardware and the codec allow: stored bytes read, numpy copy, codec alone on 1/2 threads."""
    import numcodecs

    files = chunk_files(dataset)

    def read_files(paths: Sequence[str]) -> list[bytes]:
        out = []
        for p in paths:
            with open(p, "rb", buffering=0) as f:
                out.append(f.readall())
        return out

    halves = [files[0::2], files[1::2]]
    raw = read_files(files)
    if spec.codec == "zstd":
        codec: Any = numcodecs.Zstd(level=1, checksum=False)
    elif spec.codec == "blosc-lz4":
        codec = numcodecs.Blosc(
            cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE, typesize=np.dtype(spec.dtype).itemsize
        )
    else:
        codec = None
    chunk_nbytes = int(np.prod(spec.chunks)) * np.dtype(spec.dtype).itemsize
    chunks = [
        np.ascontiguousarray(data[z : z + spec.chunks[0], y : y + 256, x : x + 256])
        for z in range(0, spec.shape[0], spec.chunks[0])
        for y in range(0, 1024, 256)
        for x in range(0, 1024, 256)
    ]

    def decode_all(items: Sequence[bytes]) -> None:
        buf = np.empty(chunk_nbytes, np.uint8)
        for b in items:
            codec.decode(b, out=buf)

    def encode_all(items: Sequence[np.ndarray]) -> None:
        for c in items:
            codec.encode(c)

    def two(fn: Callable[[Any], None], items: Sequence[Any]) -> float:
        with ThreadPoolExecutor(2) as pool:
            t0 = time.perf_counter()
            list(pool.map(fn, [items[0::2], items[1::2]]))
            return time.perf_counter() - t0

    def read_two() -> float:
        with ThreadPoolExecutor(2) as pool:
            t0 = time.perf_counter()
            list(pool.map(read_files, halves))
            return time.perf_counter() - t0

    fns: dict[str, Callable[[], float]] = {
        "limit: numpy copy of the output (fresh array)": lambda: timed(data.copy),
        "limit: read the stored bytes, 2 threads": read_two,
    }
    wfns: dict[str, Callable[[], float]] = {}
    if codec is not None:
        fns["limit: decode alone, 1 thread"] = lambda: timed(lambda: decode_all(raw))
        fns["limit: decode alone, 2 threads"] = lambda: two(decode_all, raw)
        wfns["limit: encode alone, 1 thread"] = lambda: timed(lambda: encode_all(chunks))
        wfns["limit: encode alone, 2 threads"] = lambda: two(encode_all, chunks)
    reps = 2
    rrows = {name: res.add(Row("R1", case, name, nbytes=data.nbytes, limit=True)) for name in fns}
    round_robin(fns, reps, rrows)
    if wfns:
        wrows = {name: res.add(Row("W1", case, name, nbytes=data.nbytes, limit=True)) for name in wfns}
        round_robin(wfns, reps, wrows)
    wrows2 = {
        "limit: numpy copy of the input": res.add(
            Row("W1", case, "limit: numpy copy of the input", nbytes=data.nbytes, limit=True)
        )
    }
    round_robin({"limit: numpy copy of the input": lambda: timed(data.copy)}, reps, wrows2)
    for row in res.rows:
        if row.limit and row.case == case:
            say(f"    {row.workload} {row.impl:48s} {fmt_time(row.median)}")


# ------------------------------------------------------------------------------------------ L1 / O1 / O2


def bench_l1(res: Results, dataset: str, spec: Spec, written: str = "") -> None:
    assert spec.shards is not None
    rng = random.Random(42)
    n = res.cfg.l_samples
    grid = [s // c for s, c in zip(spec.shape, spec.chunks, strict=True)]
    chunk_sels = []
    for _ in range(n):
        c = [rng.randrange(g) for g in grid]
        chunk_sels.append(tuple(slice(i * s, (i + 1) * s) for i, s in zip(c, spec.chunks, strict=True)))
    small_sels = []
    for _ in range(n):
        z, y = rng.randrange(spec.shape[0]), rng.randrange(spec.shape[1])
        x = rng.randrange(spec.shape[2] // 256) * 256 + rng.randrange(256 - 16)
        small_sels.append((z, y, slice(x, x + 16)))
    handles = {impl.name: impl.open(dataset) for impl in IMPLS}
    for label, sels in (
        (f"one inner chunk (1 MiB) of a sharded array{written}", chunk_sels),
        (f"16 elements of a sharded array{written}", small_sels),
    ):
        read = {impl.name: partial(impl.read, handles[impl.name]) for impl in IMPLS}
        rows = {name: res.add(Row("L1", label, name)) for name in read}
        if sels is chunk_sels:  # the floors, in the same rotation as the implementations
            read.update(_l1_floors(dataset, spec, sels))
            rows.update(
                {name: res.add(Row("L1", label, name, limit=True)) for name in read if name not in rows}
            )
        for name in read:  # warm-up: thread pools, first index reads
            read[name](sels[0])
        batch = max(1, n // 10)
        names = list(read)
        for start in range(0, n, batch):
            k = (start // batch) % len(names)
            for name in names[k:] + names[:k]:
                for i in range(start, min(n, start + batch)):
                    rows[name].samples.append(timed(partial(read[name], sels[i])))
        _report(res, "L1", label)


def _l1_floors(dataset: str, spec: Spec, sels: list[tuple[slice, ...]]) -> dict[str, Callable[[Any], Any]]:
    """The floors of L1, as readers of the same selections: each inner chunk's stored bytes decoded into a
    fresh array, (a) from memory (read beforehand) and (b) after one ``pread`` of them from their shard into
    a reused buffer -- the least a reader that does not map files into memory must do (a mapped file
    that another program truncates kills the reader with ``SIGBUS``), with the shard's index already known.
    The decoder is the fastest zstd decoder available from Python here (the ``zstandard`` package's, with a
    reused context, which rectizarr uses; numcodecs' took 1.15x as long on these frames)."""
    import zstandard

    assert spec.shards is not None and spec.codec == "zstd"
    per_shard = [s // c for s, c in zip(spec.shards, spec.chunks, strict=True)]
    index_bytes = 16 * int(np.prod(per_shard)) + 4  # (offset, length) uint64 pairs + crc32c, at the end
    where: dict[tuple[slice, ...], tuple[str, int, int]] = {}
    stored: dict[tuple[slice, ...], bytes] = {}
    for sel in sels:
        inner = [s.start // c for s, c in zip(sel, spec.chunks, strict=True)]
        shard = [i // n for i, n in zip(inner, per_shard, strict=True)]
        local = [i % n for i, n in zip(inner, per_shard, strict=True)]
        path = os.path.join(dataset, "c", *map(str, shard))
        with open(path, "rb") as f:
            f.seek(-index_bytes, os.SEEK_END)
            index = np.frombuffer(f.read(index_bytes)[:-4], "<u8").reshape(-1, 2)
            offset, length = (int(v) for v in index[int(np.ravel_multi_index(local, per_shard))])
            f.seek(offset)
            stored[sel] = f.read(length)
        where[sel] = (path, offset, length)
    dctx = zstandard.ZstdDecompressor()
    buffer = memoryview(bytearray(max(length for _, _, length in where.values())))

    def decode(data: bytes | memoryview) -> np.ndarray:
        out = np.empty(spec.chunks, spec.dtype)
        dctx.stream_reader(data).readinto(memoryview(out).cast("B"))
        return out

    def read_and_decode(sel: tuple[slice, ...]) -> np.ndarray:
        path, offset, length = where[sel]
        fd = os.open(path, os.O_RDONLY)
        try:
            got = os.preadv(fd, [buffer[:length]], offset)
        finally:
            os.close(fd)
        return decode(buffer[:got])

    return {
        "limit: decode alone (zstd)": lambda sel: decode(stored[sel]),
        "limit: pread + decode": read_and_decode,
    }


def _selector(method: Callable[[Any, Any], np.ndarray], handle: Any, sel: Any) -> Callable[[], float]:
    return lambda: timed(lambda: method(handle, sel))


def bench_o(res: Results, datasets: dict[str, tuple[str, Spec]], written: str = "") -> None:
    for layout, (dataset, spec) in datasets.items():
        handles = {impl.name: impl.open(dataset) for impl in IMPLS}
        osel = (slice(None, None, 7), slice(100, 900), np.array([1, 5, 9]))
        case = f"oindex[::7, 100:900, [1, 5, 9]], uint16 zstd {layout}, {human_bytes(spec.nbytes)}{written}"
        rows = {impl.name: res.add(Row("O1", case, impl.name)) for impl in IMPLS}
        round_robin(
            {impl.name: _selector(impl.oindex, handles[impl.name], osel) for impl in IMPLS},
            res.cfg.o_repeats + 1,
            rows,
        )
        _report(res, "O1", case)
        if written:
            continue
        rng = np.random.default_rng(7)
        pts = tuple(rng.integers(0, s, size=10_000) for s in spec.shape)
        case = f"vindex, 10,000 random points, uint16 zstd {layout}, {human_bytes(spec.nbytes)}"
        rows = {impl.name: res.add(Row("O2", case, impl.name)) for impl in IMPLS}
        round_robin(
            {impl.name: _selector(impl.vindex, handles[impl.name], pts) for impl in IMPLS},
            res.cfg.o_repeats,
            rows,
        )
        _report(res, "O2", case)


def bench_zp_written(res: Results, root: str) -> None:
    """O1 and L1 again on arrays zarr-python wrote with its own defaults (zstd level 0, i.e. 3, no checksum;
    its shard index at the end): another writer's bytes, the same shapes as the 256 MiB R1 arrays."""
    import zarr

    depth, written = res.cfg.small_depth, ", written by zarr-python"
    data = smooth_u16(depth)
    datasets: dict[str, tuple[str, Spec]] = {}
    for layout in ("chunked", "sharded"):
        spec = cube_spec(depth, "uint16", "zstd", layout == "sharded")
        path = os.path.join(root, f"zp-{layout}.zarr")
        z = zarr.create_array(
            store=path,
            shape=spec.shape,
            dtype=spec.dtype,
            chunks=spec.chunks,
            shards=spec.shards,
            fill_value=0,
            overwrite=True,
        )
        z[...] = data
        datasets[layout] = (path, spec)
    del data
    os.sync()  # the fresh files' write-back would otherwise land in the measurements
    bench_o(res, datasets, written)
    bench_l1(res, *datasets["sharded"], written)
    for path, _ in datasets.values():
        rmtree(path)


# ------------------------------------------------------------------------------------------ T1 / T2 / T3


def _t1_syscall_limit(res: Results, wl: str, case: str, path: str, nchunks: int) -> None:
    """What one Python thread spends on the system calls alone: open, read, close of every chunk file."""
    files = [os.path.join(d, f) for d, _, names in os.walk(os.path.join(path, "c")) for f in names]
    assert len(files) == nchunks

    def loop() -> None:
        for name in files:
            fd = os.open(name, os.O_RDONLY)
            os.read(fd, 4096)
            os.close(fd)

    row = res.add(
        Row(
            wl,
            case,
            "limit: open+read+close each file, one Python thread",
            per=nchunks,
            per_label="per chunk",
            limit=True,
        )
    )
    for _ in range(res.cfg.t_repeats):
        row.samples.append(timed(loop))


def bench_t(res: Results, root: str) -> None:
    cfg = res.cfg
    rows_n = cfg.t_rows
    rng = np.random.default_rng(3)
    data = rng.integers(0, 60000, size=(rows_n, 5120), dtype=np.uint16)
    nchunks = rows_n // 16 * 160
    zrows = cfg.t_zarr_rows
    znchunks = zrows // 16 * 160
    for sharded in (False, True):
        spec = Spec((rows_n, 5120), "uint16", (16, 32), (400, 1280) if sharded else None, "raw")
        t0 = time.perf_counter()
        path = os.path.join(root, f"T-{'sharded' if sharded else 'chunked'}.zarr")
        BY_NAME[RZ].write(BY_NAME[RZ].create(path, spec), data, sharded)
        say(
            f"  T dataset ({'100 shards' if sharded else 'one file per chunk'}): {time.perf_counter() - t0:.1f}s"
        )
        wl = "T2" if sharded else "T1"
        case = (
            f"full read, {nchunks:,} chunks of 1 KiB in {rows_n // 400 * 4} shards"
            if sharded
            else f"full read, {nchunks:,} chunks of 1 KiB, one file each"
        )
        rows = {
            impl.name: res.add(
                Row(
                    wl,
                    case,
                    impl.name,
                    per=nchunks if impl.name != ZP else znchunks,
                    per_label="per chunk",
                    nbytes=data.nbytes,
                )
            )
            for impl in IMPLS
        }
        rows[ZP].note = f"first {zrows} rows only ({znchunks} chunks)"

        def reader(impl: Impl, path: str = path) -> Callable[[], float]:
            sel = (slice(0, zrows),) if impl.name == ZP else Ellipsis
            return lambda: timed(lambda: impl.read(impl.open(path), sel))

        round_robin({impl.name: reader(impl) for impl in IMPLS}, cfg.t_repeats, rows)
        if not sharded:
            _t1_syscall_limit(res, wl, case, path, nchunks)
        out = BY_NAME[RZ].read(BY_NAME[RZ].open(path))
        assert np.array_equal(out, data)
        del out
        _report(res, wl, case)
        rmtree(path)
    # T3: writes. One repeat (writes of many small files are slow on this file system); per chunk.
    for sharded in (False, True):
        n_rows = cfg.t3_rows if not sharded else rows_n
        z_rows = min(n_rows, zrows)
        per = n_rows // 16 * 160
        zper = z_rows // 16 * 160
        case = (
            f"write {per:,} chunks of 1 KiB in {-(-n_rows // 400) * 4} shards"
            if sharded
            else f"write {per:,} chunks of 1 KiB, one file each"
        )
        rows = {
            impl.name: res.add(
                Row(
                    "T3",
                    case,
                    impl.name,
                    per=per if impl.name != ZP else zper,
                    per_label="per chunk",
                    nbytes=n_rows * 5120 * 2,
                )
            )
            for impl in IMPLS
        }
        rows[ZP].note = f"first {z_rows} rows only ({zper} chunks)"

        def writer(
            impl: Impl, n_rows: int = n_rows, z_rows: int = z_rows, sharded: bool = sharded
        ) -> Callable[[], float]:
            r = z_rows if impl.name == ZP else n_rows
            spec = Spec((r, 5120), "uint16", (16, 32), (400, 1280) if sharded else None, "raw")
            out = os.path.join(root, f"T3-{impl.name}.zarr")
            part = data[:r]

            def run() -> float:
                rmtree(out)
                t0 = time.perf_counter()
                impl.write(impl.create(out, spec), part, sharded)
                dt = time.perf_counter() - t0
                rmtree(out)
                return dt

            return run

        round_robin({impl.name: writer(impl) for impl in IMPLS}, 1, rows)
        _report(res, "T3", case)


# ------------------------------------------------------------------------------------------ T1z / T2z


def _stored_frames(path: str, sharded: bool) -> list[bytes]:
    """Every chunk's (inner chunk's) stored bytes, read beforehand: what the codec alone decodes."""
    files = sorted(os.path.join(d, f) for d, _, names in os.walk(os.path.join(path, "c")) for f in names)
    frames: list[bytes] = []
    for name in files:
        with open(name, "rb") as f:
            value = f.read()
        if not sharded:
            frames.append(value)
            continue
        index = np.frombuffer(value[-4 - 16 * 1000 :][:-4], "<u8").reshape(
            -1, 2
        )  # 25 x 40 inner chunks, crc32c
        frames.extend(value[int(o) : int(o) + int(n)] for o, n in index if int(o) != 2**64 - 1)
    return frames


def _tz_decode_limit(
    res: Results, wl: str, case: str, codec: str, frames: list[bytes], chunk_nbytes: int
) -> None:
    """The codec alone on the same frames: zstd in one ``multi_decompress_to_buffer`` call (2 threads),
    blosc-lz4 one c-blosc call per frame into one output buffer (numcodecs has no batch call)."""
    import zstandard
    from numcodecs import blosc

    if codec == "zstd":
        sizes = np.fromiter(map(len, frames), np.uint64, len(frames))
        offsets = np.concatenate([[0], np.cumsum(sizes[:-1])]).astype(np.uint64)
        segs = zstandard.BufferWithSegments(b"".join(frames), np.stack([offsets, sizes], 1).tobytes())
        dctx, out_sizes = (
            zstandard.ZstdDecompressor(),
            np.full(len(frames), chunk_nbytes, np.uint64).tobytes(),
        )

        def run() -> None:
            dctx.multi_decompress_to_buffer(segs, decompressed_sizes=out_sizes, threads=2)

        label = "limit: codec alone, one batch call (zstandard, 2 threads)"
    else:
        out = np.empty((len(frames), chunk_nbytes), np.uint8)

        def run() -> None:
            for frame, row in zip(frames, out, strict=True):
                blosc.decompress(frame, row)

        label = "limit: codec alone, c-blosc per frame into one buffer"
    row = res.add(Row(wl, case, label, per=len(frames), per_label="per chunk", limit=True))
    for _ in range(max(2, res.cfg.t_repeats)):
        row.samples.append(timed(run))


def bench_tz(res: Results, root: str) -> None:
    """T1z / T2z: the T arrays' 1 KiB chunks compressed (zstd level 1, blosc-lz4), read and written."""
    cfg = res.cfg
    rows_n, zrows = cfg.t_rows // 5, cfg.t_zarr_rows // 2.5
    zrows = int(zrows) // 16 * 16
    rng = np.random.default_rng(4)  # values of 0..599: compressible, as measured data is
    data = rng.integers(0, 600, size=(rows_n, 5120), dtype=np.uint16)
    nchunks, znchunks = rows_n // 16 * 160, zrows // 16 * 160
    for codec in ("zstd", "blosc-lz4"):
        for sharded in (False, True):
            wl = "T2z" if sharded else "T1z"
            spec = Spec((rows_n, 5120), "uint16", (16, 32), (400, 1280) if sharded else None, codec)
            path = os.path.join(root, f"{wl}-{codec}.zarr")
            BY_NAME[RZ].write(BY_NAME[RZ].create(path, spec), data, sharded)
            where = f"in {-(-rows_n // 400) * 4} shards" if sharded else "one file each"
            case = f"full read, {nchunks:,} chunks of 1 KiB {codec}, {where}"
            rows = {
                impl.name: res.add(
                    Row(
                        wl,
                        case,
                        impl.name,
                        per=nchunks if impl.name != ZP else znchunks,
                        per_label="per chunk",
                        nbytes=data.nbytes,
                    )
                )
                for impl in IMPLS
            }
            rows[ZP].note = f"first {zrows} rows only ({znchunks} chunks)"

            def reader(impl: Impl, path: str = path) -> Callable[[], float]:
                sel = (slice(0, zrows),) if impl.name == ZP else Ellipsis
                return lambda: timed(lambda: impl.read(impl.open(path), sel))

            round_robin({impl.name: reader(impl) for impl in IMPLS}, max(2, cfg.t_repeats + 1), rows)
            assert np.array_equal(BY_NAME[RZ].read(BY_NAME[RZ].open(path)), data)
            _tz_decode_limit(res, wl, case, codec, _stored_frames(path, sharded), 1024)
            if codec == "zstd":
                _gil_row(res, wl, case, "read", path, nchunks)
            _report(res, wl, case)
            rmtree(path)
            _tz_write(res, root, wl, codec, spec, data, sharded)


def _tz_write(
    res: Results, root: str, wl: str, codec: str, spec: Spec, data: np.ndarray, sharded: bool
) -> None:
    """Writes of the T1z / T2z arrays: one file per chunk writes the first ``t3_rows`` rows (file creation
    dominates), shards the whole array; zarr-python writes at most ``t_zarr_rows / 2.5`` rows."""
    n_rows = spec.shape[0] if sharded else min(spec.shape[0], res.cfg.t3_rows)
    z_rows = min(n_rows, int(res.cfg.t_zarr_rows // 2.5) // 16 * 16)
    per, zper = n_rows // 16 * 160, z_rows // 16 * 160
    where = f"in {-(-n_rows // 400) * 4} shards" if sharded else "one file each"
    case = f"write {per:,} chunks of 1 KiB {codec}, {where}"
    rows = {
        impl.name: res.add(
            Row(
                wl,
                case,
                impl.name,
                per=per if impl.name != ZP else zper,
                per_label="per chunk",
                nbytes=n_rows * 5120 * 2,
            )
        )
        for impl in IMPLS
    }
    rows[ZP].note = f"first {z_rows} rows only ({zper} chunks)"

    def writer(impl: Impl) -> Callable[[], float]:
        r = z_rows if impl.name == ZP else n_rows
        wspec = Spec((r, 5120), "uint16", (16, 32), spec.shards, codec)
        out = os.path.join(root, f"{wl}w-{impl.name}.zarr")

        def run() -> float:
            rmtree(out)
            t0 = time.perf_counter()
            impl.write(impl.create(out, wspec), data[:r], sharded)
            dt = time.perf_counter() - t0
            rmtree(out)
            return dt

        return run

    round_robin({impl.name: writer(impl) for impl in IMPLS}, 2, rows)
    _report(res, wl, case)


# ------------------------------------------------------------------------------------------ S1

S1_CASES = [  # (label, shape, chunks, shards): uint16 values 0-599, zstd level 1
    ("1-D, 1 KiB chunk files", (20000 * 512,), (512,), None),
    ("1-D, 1 KiB chunks in 20 shards", (20000 * 512,), (512,), (512 * 1000,)),
    ("4-D, 1 KiB chunk files", (80, 40, 40, 80), (4, 4, 4, 8), None),
    ("4-D, 1 KiB chunks in 8 shards", (80, 40, 40, 80), (4, 4, 4, 8), (20, 20, 40, 80)),
    (
        "3-D, chunks small only along the first axis (1 x 256 x 256, 128 KiB), files",
        (1024, 256, 256),
        (1, 256, 256),
        None,
    ),
    ("3-D, the same chunks in 16 shards", (1024, 256, 256), (1, 256, 256), (64, 256, 256)),
]


def _gil_row(res: Results, wl: str, case: str, kind: str, path: str, nchunks: int, sel: str = "...") -> None:
    """rectizarr's GIL-held time per chunk on one codec thread (benchmarks/gil.py, py-spy): the many-core
    proxy of issue 33. No row where py-spy cannot run."""
    from gil import gil_held

    got = gil_held(kind, path, sel, 5)
    if got is not None:
        res.add(
            Row(
                wl,
                case,
                "limit: rectizarr GIL held (1 thread, py-spy)",
                [got[0]],
                per=nchunks,
                per_label="per chunk",
                limit=True,
            )
        )


def bench_s1(res: Results, root: str) -> None:
    """S1: every shape a fast shape (issue 33): 1-D and 4-D arrays of 1 KiB zstd chunks (files and shards) and
    chunks small only along the first axis, read whole (zarr-python+zarrs and TensorStore; plain zarr-python
    would take minutes), and the sharded ones written; with rectizarr's GIL-held time per chunk."""
    cfg = res.cfg
    impls = [BY_NAME[RZ], BY_NAME[ZS], BY_NAME[TS]]
    rng = np.random.default_rng(5)
    for label, shape, chunks, shards in S1_CASES:
        if cfg.quick:
            shape = (shape[0] // 8, *shape[1:])
        spec = Spec(shape, "uint16", chunks, shards, "zstd")
        data = rng.integers(0, 600, size=shape, dtype=np.uint16)
        nchunks = int(np.prod([n // c for n, c in zip(shape, chunks, strict=True)]))
        path = os.path.join(root, "S1.zarr")
        BY_NAME[RZ].write(BY_NAME[RZ].create(path, spec), data, shards is not None)
        case = f"read: {label}, {nchunks:,} chunks"
        rows = {
            i.name: res.add(Row("S1", case, i.name, per=nchunks, per_label="per chunk", nbytes=data.nbytes))
            for i in impls
        }

        def reader(impl: Impl, path: str = path) -> Callable[[], float]:
            return lambda: timed(lambda: impl.read(impl.open(path)))

        round_robin({i.name: reader(i) for i in impls}, max(2, cfg.t_repeats + 1), rows)
        assert np.array_equal(BY_NAME[RZ].read(BY_NAME[RZ].open(path)), data)
        _gil_row(res, "S1", case, "read", path, nchunks)
        _report(res, "S1", case)
        if shards is not None:
            wcase = f"write: {label}, {nchunks:,} chunks"
            wrows = {
                i.name: res.add(
                    Row("S1", wcase, i.name, per=nchunks, per_label="per chunk", nbytes=data.nbytes)
                )
                for i in impls
            }

            def writer(impl: Impl, spec: Spec = spec, data: np.ndarray = data) -> Callable[[], float]:
                out = os.path.join(root, f"S1w-{impl.name}.zarr")

                def run() -> float:
                    rmtree(out)
                    dt = timed(lambda: impl.write(impl.create(out, spec), data, True))
                    rmtree(out)
                    return dt

                return run

            round_robin({i.name: writer(i) for i in impls}, 2, wrows)
            _gil_row(res, "S1", wcase, "write", path, nchunks)
            _report(res, "S1", wcase)
        rmtree(path)


# ------------------------------------------------------------------------------------------ I1 / M2 / A1 / P1


def bench_i1(res: Results) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    mods = {RZ: "rectizarr", "zarr-python": "zarr", TS: "tensorstore"}
    rows = {name: res.add(Row("I1", "import in a fresh interpreter", name)) for name in mods}
    rows["numpy (floor)"] = res.add(
        Row("I1", "import in a fresh interpreter", "limit: import numpy", limit=True)
    )
    mods["numpy (floor)"] = "numpy"
    code = "import time; t = time.perf_counter(); import {m}; print(time.perf_counter() - t)"

    def run(mod: str) -> float:
        out = subprocess.run(
            [sys.executable, "-c", code.format(m=mod)], env=env, capture_output=True, text=True, check=True
        )
        return float(out.stdout.strip().splitlines()[-1])

    for mod in mods.values():  # compile .pyc files once
        run(mod)
    round_robin({name: (lambda mod=mod: run(mod)) for name, mod in mods.items()}, res.cfg.i1_repeats, rows)
    _report(res, "I1", "import in a fresh interpreter")


def bench_m2(res: Results, root: str) -> None:
    import rectizarr

    n = res.cfg.m2_edges
    edges = np.random.default_rng(5).integers(1, 9, size=n).tolist()
    rows_total = int(sum(edges))
    path = os.path.join(root, "M2.zarr")
    t0 = time.perf_counter()
    a = rectizarr.create_array(
        path,
        shape=(rows_total, 16),
        dtype="float32",
        chunks=[edges, 16],
        compressors=[],
        fill_value=0,
        overwrite=True,
    )
    tail = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)
    a[-64:] = tail
    say(
        f"  M2 dataset: {n:,} edges, {os.path.getsize(os.path.join(path, 'zarr.json')) / MiB:.1f} MiB of "
        f"zarr.json, {time.perf_counter() - t0:.1f}s"
    )
    import zarr

    def zarr_run(pipeline: str | None) -> Callable[[], float]:
        cfg: dict[str, Any] = {"array.rectilinear_chunks": True}
        if pipeline:
            cfg["codec_pipeline.path"] = pipeline

        def run() -> float:
            with zarr.config.set(cfg):
                t0 = time.perf_counter()
                got = zarr.open_array(path, mode="r")[-64:]
                dt = time.perf_counter() - t0
            assert np.array_equal(got, tail)
            return dt

        return run

    def rz_run() -> float:
        t0 = time.perf_counter()
        got = rectizarr.open_array(path, mode="r")[-64:]
        dt = time.perf_counter() - t0
        assert np.array_equal(got, tail)
        return dt

    case = f"open a rectilinear array with {n:,} edges + read its last 64 rows"
    fns: dict[str, Callable[[], float]] = {RZ: rz_run, ZP: zarr_run(None)}
    try:
        zarr_run("zarrs.ZarrsCodecPipeline")()
        fns[ZS] = zarr_run("zarrs.ZarrsCodecPipeline")
    except Exception as exc:  # pragma: no cover - depends on the installed zarrs
        say(f"  M2: zarrs pipeline cannot read it: {type(exc).__name__}: {exc}")
    rows = {name: res.add(Row("M2", case, name)) for name in fns}
    round_robin(fns, 3, rows)
    res.add(Row("M2", case, TS, note="n/a: no rectilinear chunk grid in TensorStore"))
    _report(res, "M2", case)
    rmtree(path)


def bench_remote(res: Results) -> None:
    """RM: the remote section (benchmarks/remote.py) against a loopback S3 server at 0 and 20 ms, and
    plain HTTP at 20 ms (benchmarks/remote_http.py)."""
    import remote

    quick = res.cfg.quick
    rows, meta, lines = remote.run(
        [0.0, 0.02], repeats=1 if quick else 5, group_size=50 if quick else 200, from_run=True
    )
    import remote_http

    lines = [*lines, "", *remote_http.run(0.02, 2 if quick else 5)]  # plain HTTP at 20 ms
    res.tables["Remote"] = lines
    raw = HERE / "_data" / ("remote-quick.json" if quick else "remote.json")
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text(json.dumps({"meta": meta, "rows": [r.__dict__ for r in rows]}, indent=1))


def bench_c1(res: Results, root: str) -> None:
    """C1: what the consistency checks cost. Single elements written and read through a handle kept open,
    on a (512, 512) uint16 array of raw (64, 64) chunks: each write is a read-modify-write of its chunk
    (rectizarr: under the chunk's lock, a flock, after one version check of zarr.json); each read is one
    chunk (rectizarr: after one version check)."""
    n = 100 if res.cfg.quick else 500
    spec = Spec((512, 512), "uint16", (64, 64), None, "raw")
    points = [tuple(int(x) for x in p) for p in np.random.default_rng(11).integers(0, 512, size=(n, 2))]
    handles = {}
    for impl in IMPLS:
        handles[impl.name] = impl.create(os.path.join(root, f"C1-{impl.name}.zarr"), spec)
        impl.write(handles[impl.name], np.zeros(spec.shape, np.uint16), False)

    def writes(impl: Impl) -> Callable[[], float]:
        def run() -> float:
            t0 = time.perf_counter()
            for k, p in enumerate(points):
                impl.set_point(handles[impl.name], p, k % 60000)
            return time.perf_counter() - t0

        return run

    def reads(impl: Impl) -> Callable[[], float]:
        def run() -> float:
            t0 = time.perf_counter()
            for p in points:
                impl.read(handles[impl.name], p)
            return time.perf_counter() - t0

        return run

    for case, make in (
        (f"{n} single-element writes, one handle", writes),
        (f"{n} single-element reads, one handle", reads),
    ):
        rows = {
            impl.name: res.add(Row("C1", case, impl.name, per=n, per_label="per element")) for impl in IMPLS
        }
        round_robin({impl.name: make(impl) for impl in IMPLS}, res.cfg.t_repeats + 1, rows)
        _report(res, "C1", case)


class _Snapshot:
    """Bytes written between two calls, measured on the files (new or changed size/mtime/inode)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.state = dir_files(path)

    def delta(self) -> int:
        now = dir_files(self.path)
        written = sum(v[0] for k, v in now.items() if self.state.get(k) != v)
        self.state = now
        return written


def bench_a1(res: Results, root: str) -> None:
    import zarr

    import rectizarr

    days = res.cfg.a1_days
    ny = nx = 64
    rng = np.random.default_rng(11)
    year = rng.normal(size=(365, ny, nx)).astype(np.float32)
    new_days = rng.normal(size=(days, 1, ny, nx)).astype(np.float32)
    comp = [{"name": "zstd", "configuration": {"level": 1, "checksum": False}}]
    from zarr.codecs import ZstdCodec

    def setup(kind: str, path: str) -> Callable[[np.ndarray], None]:
        if kind == "rectizarr, rectilinear grid (a new 1-day chunk per append)":
            a = rectizarr.create_array(
                path,
                shape=(365, ny, nx),
                dtype="float32",
                chunks=[[365], ny, nx],
                compressors=comp,
                fill_value=0,
                overwrite=True,
            )
            a[...] = year
            return lambda d: a.append(d, axis=0)
        if kind == "rectizarr, regular grid (edge chunk rewritten)":
            a = rectizarr.create_array(
                path,
                shape=(365, ny, nx),
                dtype="float32",
                chunks=(365, ny, nx),
                compressors=comp,
                fill_value=0,
                overwrite=True,
            )
            a[...] = year
            return lambda d: a.append(d, axis=0)
        rect = "rectilinear" in kind
        with zarr.config.set({"array.rectilinear_chunks": rect}):
            z = zarr.create_array(
                store=path,
                shape=(365, ny, nx),
                dtype="float32",
                chunks=[[365], [ny], [nx]] if rect else (365, ny, nx),
                compressors=ZstdCodec(level=1, checksum=False),
                fill_value=0,
                overwrite=True,
            )
            z[...] = year

        def app(d: np.ndarray) -> None:
            with zarr.config.set({"array.rectilinear_chunks": rect}):
                z.append(d, axis=0)

        return app

    kinds = [
        ("rectizarr, rectilinear grid (a new 1-day chunk per append)", RZ),
        ("rectizarr, regular grid (edge chunk rewritten)", RZ),
        ("zarr-python, rectilinear grid", ZP),
        ("zarr-python, regular grid (edge chunk rewritten)", ZP),
    ]
    lines = [
        f"One year (365 x {ny} x {nx} float32, zstd level 1) chunked by year, then {days} appends of one day. "
        "Bytes written are measured on the files (new or changed after each append, `zarr.json` included).",
        "",
        "| A1 implementation | median per append | p90 per append | bytes written per append (median) "
        "| bytes written, all appends | vs rectizarr rectilinear (bytes) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    stats: dict[str, tuple[list[float], list[int]]] = {}
    state: dict[str, tuple[Callable[[np.ndarray], None], _Snapshot]] = {}
    for kind, _ in kinds:
        path = os.path.join(root, f"A1-{len(state)}.zarr")
        rmtree(path)
        try:
            fn = setup(kind, path)
        except Exception as exc:
            say(f"  A1 {kind}: cannot set up: {type(exc).__name__}: {exc}")
            continue
        state[kind] = (fn, _Snapshot(path))
        stats[kind] = ([], [])
    for i in range(days):  # interleaved: day i for every implementation
        for kind, (fn, snap) in state.items():
            t0 = time.perf_counter()
            fn(new_days[i])
            stats[kind][0].append(time.perf_counter() - t0)
            stats[kind][1].append(snap.delta())
    base = statistics.median(stats[kinds[0][0]][1]) if kinds[0][0] in stats else None
    for kind, (times, written) in stats.items():
        med_b = statistics.median(written)
        ratio = f"{med_b / base:.1f}x" if base else "-"
        lines.append(
            f"| {kind} | {fmt_time(statistics.median(times))} | "
            f"{fmt_time(float(np.percentile(times, 90)))} | {human_bytes(med_b)} | "
            f"{human_bytes(sum(written))} | {ratio} |"
        )
        say(f"  A1 {kind:60s} {fmt_time(statistics.median(times))}/append, {human_bytes(med_b)}/append")
    res.tables["A1"] = lines
    if base and kinds[1][0] in stats:
        res.extras["A1_bytes_ratio"] = statistics.median(stats[kinds[1][0]][1]) / base
    import rectizarr as rz

    check = rz.open_array(os.path.join(root, "A1-0.zarr"), mode="r")
    assert check.shape[0] == 365 + days and np.array_equal(check[365:], new_days[:, 0])
    for i in range(len(kinds)):
        rmtree(os.path.join(root, f"A1-{i}.zarr"))


P1_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {here!r})
import numpy as np
from impls import BY_NAME
impl = BY_NAME[{impl!r}]
h = impl.open({path!r})
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()
def hwm():  # VmHWM starts afresh at exec (ru_maxrss would carry the parent's peak over)
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM:"))
impl.read(h, (slice(0, 1), slice(0, 1), slice(0, 1)))  # thread pools, caches
before = rss()
out = impl.read(h)
peak = hwm()
print(json.dumps({{"before": before, "peak": peak, "nbytes": out.nbytes}}))
"""


def bench_p1(res: Results, datasets: dict[str, tuple[str, Spec]]) -> None:
    lines = [
        "Each run is a fresh subprocess: open the array, read one element (thread pools, caches), note the "
        "resident set size, read the whole array, take the peak resident set size (`VmHWM`). "
        "Peak memory = peak - RSS before the read, as a multiple of the output size.",
        "",
        "| P1 case | implementation | peak memory of the read | / output size |",
        "|---|---|---:|---:|",
    ]
    for layout, (dataset, spec) in datasets.items():
        for impl in IMPLS:
            if layout == "sharded" and impl.name not in (RZ, TS):  # time budget: the others once
                continue
            code = P1_CHILD.format(here=str(HERE), impl=impl.name, path=dataset)
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            if proc.returncode != 0:
                say(f"  P1 {impl.name}: failed: {proc.stderr[-500:]}")
                continue
            d = json.loads(proc.stdout.strip().splitlines()[-1])
            peak = d["peak"] - d["before"]
            ratio = peak / d["nbytes"]
            case = f"R1 uint16 zstd {layout}, {human_bytes(spec.nbytes)}"
            lines.append(f"| {case} | {impl.name} | {human_bytes(peak)} | {ratio:.2f}x |")
            say(f"  P1 {case} {impl.name:20s} {ratio:.2f}x")
            if impl.name == RZ:
                res.extras[f"P1_{layout}"] = ratio
    res.tables["P1"] = lines


# ------------------------------------------------------------------------------------------ report


def fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms" if s < 0.1 else f"{s * 1e3:.0f} ms"
    return f"{s * 1e6:.1f} µs" if s < 1e-4 else f"{s * 1e6:.0f} µs"


def _case_rows(res: Results, workload: str, case: str) -> list[Row]:
    return [r for r in res.rows if r.workload == workload and r.case == case]


def _report(res: Results, workload: str, case: str) -> None:
    rows = [r for r in _case_rows(res, workload, case) if r.samples and not r.limit]
    say(f"  {workload} {case}")
    rz = next((r for r in rows if r.impl == RZ), None)
    for r in rows:
        ratio = f"{r.median / rz.median:6.2f}x rz" if rz else ""
        say(f"    {r.impl:20s} {fmt_time(r.median):>10s} {ratio}")


def _best_other(rows: list[Row]) -> Row | None:
    others = [r for r in rows if r.impl in OTHERS and r.samples]
    return min(others, key=lambda r: r.median) if others else None


def markdown_table(res: Results) -> list[str]:
    lines = [
        "| Workload | Case | Implementation | Median | p90 | n | Throughput | vs rectizarr | vs best other |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    seen: list[tuple[str, str]] = []
    for r in res.rows:
        if (r.workload, r.case) not in seen:
            seen.append((r.workload, r.case))
    for workload, case in seen:
        rows = _case_rows(res, workload, case)
        rz = next((r for r in rows if r.impl == RZ and r.samples), None)
        best = _best_other(rows)
        for r in rows:
            if not r.samples:
                lines.append(f"| {workload} | {case} | {r.impl} | {r.note or 'n/a'} | | | | | |")
                continue
            per = f" {r.per_label}" if r.per_label else ""
            tput = f"{r.nbytes / (statistics.median(r.samples)) / 1e6:,.0f} MB/s" if r.nbytes else ""
            vs_rz = f"{r.median / rz.median:.2f}x" if rz else ""
            if r.impl == RZ and best:
                vs_best = f"**{r.median / best.median:.2f}x** ({best.impl})"
            elif r.impl in OTHERS and best:
                vs_best = f"{r.median / best.median:.2f}x"
            else:
                vs_best = ""
            name = f"**{r.impl}**" if r.impl == RZ else r.impl
            note = f" ({r.note})" if r.note else ""
            lines.append(
                f"| {workload} | {case} | {name}{note} | {fmt_time(r.median)}{per} | "
                f"{fmt_time(r.p90)} | {len(r.samples)} | {tput} | {vs_rz} | {vs_best} |"
            )
    return lines


@dataclass
class Target:
    text: str
    ratio: float | None
    limit: float
    kind: str  # "le" (ratio <= limit) or "ge"
    detail: str = ""

    @property
    def held(self) -> bool | None:
        if self.ratio is None:
            return None
        return self.ratio <= self.limit if self.kind == "le" else self.ratio >= self.limit


def targets(res: Results) -> list[Target]:
    out: list[Target] = []

    def med(wl: str, case: str, impl: str) -> float | None:
        r = res.find(wl, case, impl)
        return r.median if r and r.samples else None

    def cases(wl: str) -> list[str]:
        seen: list[str] = []
        for r in res.rows:
            if r.workload == wl and r.case not in seen:
                seen.append(r.case)
        return seen

    for case in cases("R1"):
        rz, zs, ts, zp = (med("R1", case, i) for i in (RZ, ZS, TS, ZP))
        if rz is None:
            continue
        best = min(x for x in (zs, ts) if x is not None) if (zs or ts) else None
        out.append(
            Target(
                f"R1 {case}: rectizarr <= 1.0x best of zarrs/tensorstore",
                rz / best if best else None,
                1.0,
                "le",
            )
        )
        out.append(Target(f"R1 {case}: >= 1.8x faster than zarr-python", zp / rz if zp else None, 1.8, "ge"))
    for case in cases("W1"):
        rz, ts = med("W1", case, RZ), med("W1", case, TS)
        if rz and ts:
            out.append(Target(f"W1 {case}: rectizarr <= 1.0x tensorstore", rz / ts, 1.0, "le"))
    for case in cases("L1"):
        rz, ts, floor = med("L1", case, RZ), med("L1", case, TS), med("L1", case, "limit: pread + decode")
        if rz and ts:
            out.append(
                Target(
                    f"L1 {case}: median latency <= 0.7x tensorstore",
                    rz / ts,
                    0.7,
                    "le",
                    f" (floor, `limit: pread + decode`: {floor / ts:.2f}x)" if floor else "",
                )
            )
    for wl, lim in (("T1", 1.0), ("T2", 1.5)):
        for case in cases(wl):
            rz, ts, zp = med(wl, case, RZ), med(wl, case, TS), med(wl, case, ZP)
            if rz and ts:
                out.append(
                    Target(f"{wl} {case}: rectizarr <= {lim}x tensorstore per chunk", rz / ts, lim, "le")
                )
            if rz and zp:
                out.append(
                    Target(f"{wl} {case}: >= 10x faster than zarr-python per chunk", zp / rz, 10, "ge")
                )
    for wl in ("T1z", "T2z"):
        for case in cases(wl):
            rz, ts, zp = med(wl, case, RZ), med(wl, case, TS), med(wl, case, ZP)
            kind = "write" if case.startswith("write") else "read"
            if rz and ts:
                out.append(
                    Target(f"{wl} {case}: rectizarr <= 1.0x tensorstore per chunk", rz / ts, 1.0, "le")
                )
            if rz and zp and kind == "read":
                out.append(
                    Target(f"{wl} {case}: >= 15x faster than zarr-python per chunk", zp / rz, 15, "ge")
                )
    for case in cases("O1"):
        rz, ts = med("O1", case, RZ), med("O1", case, TS)
        if rz and ts:
            out.append(Target(f"O1 {case}: rectizarr <= 1.0x tensorstore", rz / ts, 1.0, "le"))
    for case in cases("I1"):
        rz, zp = med("I1", case, RZ), med("I1", case, ZP)
        if rz and zp:
            out.append(Target("I1 import rectizarr <= 0.6x import zarr", rz / zp, 0.6, "le"))
        floor = med("I1", case, "limit: import numpy")
        if rz and floor:  # what rectizarr adds to numpy, as a fraction of 100 ms
            excess = rz - floor
            out.append(
                Target(
                    "I1 import rectizarr <= 100 ms over import numpy (measured: the excess / 100 ms)",
                    excess / 0.1,
                    1.0,
                    "le",
                    f" ({excess * 1000:.0f} ms)",
                )
            )
    for case in cases("M2"):
        rz, zp = med("M2", case, RZ), med("M2", case, ZP)
        if rz and zp:
            out.append(Target(f"M2 {case}: rectizarr <= 0.1x zarr-python", rz / zp, 0.1, "le"))
    for layout in ("chunked", "sharded"):
        if f"P1_{layout}" in res.extras:
            out.append(
                Target(
                    f"P1 peak memory of R1 uint16 zstd {layout} <= 1.25x the output size",
                    res.extras[f"P1_{layout}"],
                    1.25,
                    "le",
                )
            )
    return out


def versions() -> str:
    import importlib.metadata as md

    parts = []
    for dist in ("rectizarr", "zarr", "zarrs", "tensorstore", "numcodecs", "numpy"):
        try:
            parts.append(f"{dist} {md.version(dist)}")
        except md.PackageNotFoundError:
            parts.append(f"{dist} (not installed)")
    return ", ".join(parts)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def before_after(res: Results) -> list[str]:
    """rectizarr in this run next to ``benchmarks/baseline.json`` (the first run, before optimising)."""
    path = HERE / "baseline.json"
    if res.cfg.quick or not path.exists():
        return []
    base = json.loads(path.read_text())
    old = Results(res.cfg, [Row(**r) for r in base["rows"]])
    lines = [
        "",
        "## Before and after the optimisations",
        "",
        f"rectizarr in this run against the baseline run of {base['stamp']} (same harness and sizes; "
        "cases whose sizes changed since are left out). *vs best other* as above: < 1 means rectizarr "
        "is the fastest.",
        "",
        "| Workload | Case | rectizarr before | after | speed-up | vs best other before | after |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in res.rows:
        if r.impl != RZ or not r.samples:
            continue
        b = old.find(r.workload, r.case, RZ)
        if b is None or not b.samples:
            continue
        best_now, best_then = (
            _best_other(_case_rows(res, r.workload, r.case)),
            _best_other(_case_rows(old, r.workload, r.case)),
        )
        per = f" {r.per_label}" if r.per_label else ""
        lines.append(
            f"| {r.workload} | {r.case} | {fmt_time(b.median)}{per} | {fmt_time(r.median)}{per} | "
            f"{b.median / r.median:.1f}x | {b.median / best_then.median:.2f}x | "
            f"{r.median / best_now.median:.2f}x |"
            if best_now and best_then
            else f"| {r.workload} | {r.case} | {fmt_time(b.median)} | {fmt_time(r.median)} | "
            f"{b.median / r.median:.1f}x | | |"
        )
    return lines


def write_markdown(res: Results, path: Path, total: float, stamp: str | None = None) -> None:
    cfg = res.cfg
    lines = [
        "# rectizarr benchmarks",
        "",
        f"Generated by `{'make bench-quick' if cfg.quick else 'make bench'}` (`benchmarks/run.py"
        f"{' --quick' if cfg.quick else ''}`) on {stamp or time.strftime('%Y-%m-%d %H:%M')}: "
        f"{os.cpu_count()} cores ({cpu_model()}), Python {platform.python_version()}, {versions()}. "
        f"Whole run: {total / 60:.1f} minutes.",
        "",
        "Implementations: **rectizarr** (defaults); **zarr-python** (default `BatchedCodecPipeline`); "
        "**zarr-python+zarrs** (`codec_pipeline.path = zarrs.ZarrsCodecPipeline`); **tensorstore** (`zarr3` "
        "driver, `file` kvstore, `file_io_sync` off, one shared context; sharded writes in one transaction). "
        "All read the same bytes, written by rectizarr, from a local directory (in the page cache). "
        "Repeats run round-robin with a rotating order; the median is reported, p90 where there are >= 5 "
        "samples. *vs rectizarr* = time / rectizarr's time (> 1: rectizarr is faster); for rectizarr, "
        "*vs best other* = rectizarr's time / the fastest other implementation's (< 1: rectizarr is faster). "
        "`limit:` rows bound what any implementation could do on this machine (not implementations).",
        "",
        "Sizes: R1/W1 uint16 zstd arrays are "
        f"{human_bytes(cfg.big_depth * 2 * MiB)} (headline); uint16 raw and blosc-lz4 "
        f"{human_bytes(cfg.small_depth * 2 * MiB)}; float32 zstd {human_bytes(cfg.f32_depth * 4 * MiB)}; "
        "all (depth, 1024, 1024) in 1 MiB chunks; sharded = 64 inner chunks per shard (4 x 4 x 4). "
        f"T arrays: ({cfg.t_rows}, 5120) uint16 in (16, 32) chunks of 1 KiB, no compression; zarr-python reads "
        f"and writes the first {cfg.t_zarr_rows} rows only (it is too slow for the full array in the time "
        "budget); T results are per chunk. "
        f"T1z/T2z arrays: ({cfg.t_rows // 5}, 5120) uint16 values 0-599 in the same chunks, zstd level 1 or "
        f"blosc-lz4 (one file per chunk writes the first {cfg.t3_rows} rows; zarr-python the first "
        f"{int(cfg.t_zarr_rows // 2.5) // 16 * 16} rows). "
        f"Repeats: R1 {cfg.big_r_repeats} (1 GiB) / {cfg.r_repeats}, W1 {cfg.big_w_repeats} / {cfg.w_repeats}, "
        f"T {cfg.t_repeats}, O1 {cfg.o_repeats + 1}, O2 {cfg.o_repeats}, M2 3, I1 {cfg.i1_repeats}, "
        f"L1 {cfg.l_samples} reads each.",
        "",
        "## Targets",
        "",
        "| Target | Measured | Held |",
        "|---|---:|:---:|",
    ]
    for t in targets(res):
        held = {True: "yes", False: "**no**", None: "-"}[t.held]
        measured = f"{t.ratio:.2f}x" if t.ratio is not None else "-"
        lines.append(f"| {t.text}{t.detail} | {measured} | {held} |")
    lines += ["", "## Results", ""]
    lines += markdown_table(res)
    if "A1" in res.tables:
        lines += ["", "## A1: daily appends", ""] + res.tables["A1"]
    if "P1" in res.tables:
        lines += ["", "## P1: peak memory of a full read", ""] + res.tables["P1"]
    if "Remote" in res.tables:
        lines += [""] + res.tables["Remote"]
    scale = HERE / "scale.md"
    if scale.exists() and not cfg.quick:  # the thread sweep's latest run (make bench-scale)
        lines += ["", scale.read_text().strip()]
    lines += before_after(res)
    lines += ["", "## Phase times", "", "| Phase | Seconds |", "|---|---:|"]
    lines += [f"| {k} | {v:.0f} |" for k, v in res.phase_times.items()]
    notes = HERE / "NOTES.md"
    if notes.exists() and not cfg.quick:
        lines += ["", notes.read_text().strip()]
    path.write_text("\n".join(lines) + "\n")


# ------------------------------------------------------------------------------------------ main


WORKLOADS = (
    "I1",
    "R1",
    "W1",
    "L1",
    "O1",
    "O2",
    "T1",
    "T2",
    "T3",
    "T1Z",
    "T2Z",
    "S1",
    "M2",
    "A1",
    "P1",
    "C1",
    "RM",
)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, 1-2 repeats (development)")
    ap.add_argument("--only", default="", help=f"comma-separated workloads among {','.join(WORKLOADS)}")
    ap.add_argument("--data-dir", default=None, help="where to put the data (default: a new temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    ap.add_argument(
        "--out",
        default=None,
        help="markdown output (default benchmarks/results.md; --quick: benchmarks/_data/results-quick.md)",
    )
    ap.add_argument(
        "--render",
        default=None,
        metavar="JSON",
        help="only re-render the markdown from a saved run (e.g. benchmarks/_data/results.json)",
    )
    args = ap.parse_args(argv)
    if args.render:
        saved = json.loads(Path(args.render).read_text())
        res = Results(
            QUICK if saved["quick"] else FULL,
            [Row(**r) for r in saved["rows"]],
            saved["tables"],
            saved["extras"],
            [],
            saved["phase_times"],
        )
        out = Path(args.out) if args.out else HERE / "results.md"
        write_markdown(res, out, saved["total"], saved.get("stamp"))
        say(f"wrote {out}")
        return 0
    cfg = QUICK if args.quick else FULL
    only = {w.strip().upper() for w in args.only.split(",") if w.strip()} or set(WORKLOADS)
    unknown = only - set(WORKLOADS)
    if unknown:
        ap.error(f"unknown workloads: {sorted(unknown)}")
    if args.out:
        out = Path(args.out)
    elif cfg.quick or only != set(WORKLOADS):
        out = HERE / "_data" / ("results-quick.md" if cfg.quick else "results-partial.md")
    else:
        out = HERE / "results.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.data_dir:
        os.makedirs(args.data_dir, exist_ok=True)
        root = tempfile.mkdtemp(prefix="run-", dir=args.data_dir)
    else:
        root = tempfile.mkdtemp(prefix="rectizarr-bench-")
    res = Results(cfg)
    start = time.perf_counter()
    say(f"rectizarr benchmarks ({'quick' if cfg.quick else 'full'}), data in {root}")

    def phase(name: str, fn: Callable[[], None]) -> None:
        t0 = time.perf_counter()
        say(f"[{name}] {time.strftime('%H:%M:%S')}")
        fn()
        res.phase_times[name] = time.perf_counter() - t0
        say(f"[{name}] done in {res.phase_times[name]:.0f}s")

    try:
        if "I1" in only:
            phase("I1", lambda: bench_i1(res))
        kept: dict[str, tuple[str, Spec]] = {}
        if only & {"R1", "W1", "L1", "O1", "O2", "P1"}:
            phase("R1+W1", lambda: bench_r1_w1(res, root, kept))
        if "L1" in only:
            phase("L1", lambda: bench_l1(res, *kept["sharded"]))
        if only & {"O1", "O2"}:
            phase("O1+O2", lambda: bench_o(res, kept))
        if "P1" in only:
            phase("P1", lambda: bench_p1(res, kept))
        if only & {"O1", "L1"}:
            phase("O1+L1 zarr-python's bytes", lambda: bench_zp_written(res, root))
        for dataset, _ in kept.values():
            rmtree(dataset)
        if only & {"T1", "T2", "T3"}:
            phase("T1+T2+T3", lambda: bench_t(res, root))
        if only & {"T1Z", "T2Z"}:
            phase("T1z+T2z", lambda: bench_tz(res, root))
        if "S1" in only:
            phase("S1", lambda: bench_s1(res, root))
        if "M2" in only:
            phase("M2", lambda: bench_m2(res, root))
        if "A1" in only:
            phase("A1", lambda: bench_a1(res, root))
        if "C1" in only:
            phase("C1", lambda: bench_c1(res, root))
        if "RM" in only:
            phase("remote", lambda: bench_remote(res))
    finally:
        if not args.keep:
            rmtree(root)
    total = time.perf_counter() - start
    res.rows = [r for r in res.rows if r.workload.upper() in only]
    write_markdown(res, out, total)
    raw = out.with_suffix(".json") if out.parent.name == "_data" else HERE / "_data" / "results.json"
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text(
        json.dumps(
            {
                "quick": cfg.quick,
                "total": total,
                "rows": [r.__dict__ for r in res.rows],
                "tables": res.tables,
                "extras": res.extras,
                "phase_times": res.phase_times,
                "stamp": time.strftime("%Y-%m-%d %H:%M"),
            },
            indent=1,
        )
    )
    say(f"wrote {out} and {raw} in {total / 60:.1f} minutes")
    for t in targets(res):
        say(
            f"  {'HELD  ' if t.held else 'MISSED' if t.held is False else '  -   '} {t.ratio or 0:6.2f}x  {t.text}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
