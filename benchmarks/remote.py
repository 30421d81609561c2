"""The remote section of ``make bench``: the same workloads for every client against a loopback S3 server
that adds a fixed latency to every request and counts requests by type and the peak in flight.

    python benchmarks/remote.py                    # 0 and 20 ms -> the "Remote" section of benchmarks/results.md
    python benchmarks/remote.py --latency 0.02     # 20 ms only
    python benchmarks/remote.py --quick            # one repeat, a group of 50 (development)

One S3 server runs in a child process on 127.0.0.1, so its Python never competes with a client's for the
GIL; it stops with this script: ``benchmarks/s3_lean.py`` (in memory, keep-alive, the default) or, with
``--server moto``, moto's S3 app behind the middleware of ``tests/s3_faults.py`` (the tests' server).
rectizarr (fsspec) writes the data once at 0 ms: a (4096, 4096) uint16 array in 256
chunks of 256 x 256, zstd level 1, chunked and sharded (16 shards of 16 chunks), and two groups of 200
small arrays (consolidated and not). Then, per latency, every workload runs for every client, round-robin
with a rotating order; the median is reported with the requests of the median sample. Each client's first
sample of each workload is checked against NumPy (writes: read back). See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.append(
    str(HERE.parent)
)  # tests.servers; rectizarr itself is whichever is installed or on PYTHONPATH

from impls import Spec  # noqa: E402
from remote_clients import CLIENTS, Bucket, Client, NotApplicable, Unavailable  # noqa: E402

SECTION = "## Remote (S3, injected latency)"
RZ_OBJ, RZ_FS, ZP, ZP_OBJ, TS = (
    "rectizarr (obstore)",
    "rectizarr (fsspec)",
    "zarr-python",
    "zarr-python (obstore)",
    "tensorstore",
)
SHAPE, CHUNKS, SHARDS = (4096, 4096), (256, 256), (1024, 1024)
CHUNKED, SHARDED = Spec(SHAPE, "uint16", CHUNKS, None, "zstd"), Spec(SHAPE, "uint16", CHUNKS, SHARDS, "zstd")
WINDOW = (slice(256, 768), slice(512, 1024))  # 2 x 2 chunks
STRIDED = (slice(None, None, 16), [10, 300, 2100, 4000])
KINDS = (
    ("get", "GET"),
    ("get_range", "range GET"),
    ("head", "HEAD"),
    ("put", "PUT"),
    ("delete", "DELETE"),
    ("list", "LIST"),
    ("other", "other"),
)


SERVERS = {
    "lean": "A loopback S3 server (`benchmarks/s3_lean.py`: objects in memory, one asyncio thread, keep-alive "
    "connections, in its own process on 127.0.0.1; see benchmarks/README.md for why not moto)",
    "moto": "A loopback S3 server (moto's S3 app behind `tests/s3_faults.py`, in its own process on 127.0.0.1; "
    "about 2 ms of CPU per request on the clients' cores, and it closes every connection after its "
    "answer, so each request also pays a loopback TCP connect)",
}


def say(msg: str) -> None:
    print(msg, flush=True)


# ------------------------------------------------------------------------------------------ results


@dataclass
class RemoteRow:
    latency_ms: float
    key: str  # the workload's short name
    workload: str
    client: str
    samples: list[float] = field(default_factory=list)  # seconds
    counts: list[dict[str, int]] = field(default_factory=list)  # the server's counts, one per sample
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def median_counts(self) -> dict[str, int]:
        order = sorted(range(len(self.samples)), key=self.samples.__getitem__)
        return self.counts[order[(len(order) - 1) // 2]]


# ------------------------------------------------------------------------------------------ data


def field_u16(seed: int = 0) -> np.ndarray:
    """A smooth field plus 2 bits of noise (zstd level 1: ~1.25x), as the local benchmarks use."""
    y, x = np.mgrid[0 : SHAPE[0], 0 : SHAPE[1]]
    base = (20000 + 8000 * np.sin(x / 97.0) * np.cos(y / 131.0)).astype(np.uint16)
    return base + np.random.default_rng(seed).integers(0, 4, size=SHAPE, dtype=np.uint16)


@dataclass
class Dataset:
    bucket: Bucket
    data: np.ndarray
    group_size: int
    points: list[tuple[int, int]]

    def names(self) -> list[str]:
        return [f"a{i:03d}" for i in range(self.group_size)]


def write_dataset(bucket: Bucket, group_size: int, n_points: int) -> Dataset:
    """Everything the reads need, written by rectizarr (fsspec) once."""
    from remote_clients import RectizarrFsspec

    import rectizarr

    writer = RectizarrFsspec(bucket)
    data = field_u16()
    for path, spec in (("chunked.zarr", CHUNKED), ("sharded.zarr", SHARDED)):
        writer.write(writer.create(path, spec), data, spec.shards is not None)
    ds = Dataset(bucket, data, group_size, [])
    for path, consolidated in (("group-consolidated.zarr", True), ("group-plain.zarr", False)):
        local = rectizarr.MemoryStore()  # built in memory, then uploaded in one batch
        g = rectizarr.create_group(local)
        for i, name in enumerate(ds.names()):
            g.create_array(
                name, shape=(16,), dtype="float32", chunks=(16,), attributes={"i": i, "units": "m"}
            )
        if consolidated:
            rectizarr.consolidate_metadata(local)
        writer.store(path, read_only=False).set_many({k: local.get(k) for k in local.list_prefix("")})
    rng = np.random.default_rng(1)
    ds.points = [(int(i), int(j)) for i, j in rng.integers(0, SHAPE[0], size=(n_points, 2))]
    return ds


# ------------------------------------------------------------------------------------------ workloads


@dataclass(frozen=True)
class Workload:
    """``prepare`` (not timed, not counted) -> state; ``run(client, state)`` is timed and its requests
    counted; ``check(client, state, result)`` (a client's first sample) raises AssertionError if wrong;
    ``cleanup(client, state)`` runs after every sample."""

    key: str  # short name: "group ..." and "write ..." are told apart from reads by these prefixes
    label: str
    run: Callable[[Client, Any], Any]
    check: Callable[[Client, Any, Any], None]
    prepare: Callable[[Client], Any] = lambda client: None
    cleanup: Callable[[Client, Any], None] | None = None


def same(got: Any, want: Any) -> None:
    got = np.asarray(got)
    if got.shape != np.shape(want) or not np.array_equal(got, want):
        raise AssertionError(f"wrong result: shape {got.shape}, expected {np.shape(want)}")


def workloads(ds: Dataset, fs: Any) -> list[Workload]:
    data, names = ds.data, ds.names()
    attrs = [{"i": i, "units": "m"} for i in range(len(names))]
    counter = iter(range(1 << 30))

    def read(key: str, path: str, sel: Any, label: str, method: str = "read") -> Workload:
        return Workload(
            key,
            label,
            prepare=lambda c: c.open_array(path),
            run=lambda c, h: getattr(c, method)(h, sel),
            check=lambda c, h, out: same(
                out, data[np.ix_(*(np.arange(4096)[s] for s in sel))] if method == "oindex" else data[sel]
            ),
        )

    def write(key: str, spec: Spec, label: str) -> Workload:
        def run(c: Client, path: str) -> None:
            c.write(c.create(path, spec), data, spec.shards is not None)

        def check(c: Client, path: str, out: Any) -> None:  # two corners, read back by rectizarr (fsspec)
            from remote_clients import RectizarrFsspec

            back = RectizarrFsspec(ds.bucket).open_array(path)
            for sel in ((slice(0, 300), slice(0, 300)), (slice(3800, None), slice(3700, None))):
                same(back[sel], data[sel])

        return Workload(
            key,
            label,
            prepare=lambda c: f"written/{next(counter)}.zarr",
            run=run,
            check=check,
            cleanup=lambda c, path: fs.rm(f"{ds.bucket.name}/{path}", recursive=True),
        )

    def consolidated(c: Client, _: Any) -> list[Any]:
        g = c.open_group("group-consolidated.zarr", consolidated=True)
        return [c.member_attrs(g, name) for name in c.group_keys(g)]

    def check_attrs(c: Client, _: Any, out: Any) -> None:
        if out != attrs:
            raise AssertionError("wrong attributes")

    def check_names(c: Client, _: Any, out: Any) -> None:
        if out != names:
            raise AssertionError(f"wrong member names ({len(out)} of {len(names)})")

    def points(c: Client, h: Any) -> list[Any]:
        return [c.read(h, p) for p in ds.points]

    return [
        Workload(
            "first byte",
            "first byte: open + read one element, chunked",
            run=lambda c, _: c.read(c.open_array("chunked.zarr"), (5, 7)),
            check=lambda c, _, out: same(out, data[5, 7]),
        ),
        read("read chunked", "chunked.zarr", ..., "full read, chunked (256 chunks)"),
        read("read sharded", "sharded.zarr", ..., "full read, sharded (16 shards of 16)"),
        read("window", "chunked.zarr", WINDOW, "4-chunk window [256:768, 512:1024], chunked"),
        read("oindex", "chunked.zarr", STRIDED, "oindex[::16, [10, 300, 2100, 4000]], chunked", "oindex"),
        Workload(
            "points",
            f"{len(ds.points)} random elements one by one, sharded",
            prepare=lambda c: c.open_array("sharded.zarr"),
            run=points,
            check=lambda c, _, out: same(out, [data[p] for p in ds.points]),
        ),
        Workload(
            "group consolidated",
            f"consolidated group of {len(names)}: open + keys() + attrs of each",
            run=consolidated,
            check=check_attrs,
        ),
        Workload(
            "group listing",
            f"unconsolidated group of {len(names)}: open + keys()",
            run=lambda c, _: c.list_group("group-plain.zarr"),
            check=check_names,
        ),
        write("write chunked", CHUNKED, "full write, chunked"),
        write("write sharded", SHARDED, "full write, sharded"),
    ]


# ------------------------------------------------------------------------------------------ timing


def sample(server: Any, client: Client, wl: Workload, row: RemoteRow) -> None:
    state = wl.prepare(client)
    try:
        gc.collect()
        server.reset_counts()
        t0 = time.perf_counter()
        out = wl.run(client, state)
        dt = time.perf_counter() - t0
        counts = server.counts()
        if not row.samples and not getattr(client, "limit", False):  # a limit row's output is not the data
            wl.check(client, state, out)
        del out
    finally:
        if wl.cleanup is not None:
            wl.cleanup(client, state)
    row.samples.append(dt)
    row.counts.append(counts)


def measure(
    server: Any,
    clients: dict[str, Client],
    wl: Workload,
    repeats: int,
    rows: dict[str, RemoteRow],
    budget: float,
) -> None:
    """Up to ``repeats`` rounds (the order rotates every round), and no round that would take the workload
    past ``budget`` seconds (judged by the rounds so far), but always one."""
    names, start = list(clients), time.perf_counter()
    for r in range(repeats):
        spent = time.perf_counter() - start
        if r and spent * (r + 1) / r > budget:
            break
        k = r % len(names)
        for name in names[k:] + names[:k]:
            row = rows[name]
            if row.note:
                continue
            try:
                sample(server, clients[name], wl, row)
            except NotApplicable as e:
                row.note = f"n/a: {e}"
            except Exception as e:  # a failing client is reported, and the others go on
                row.note = f"failed: {type(e).__name__}: {str(e)[:160]}"
                say(f"    {name}: {row.note}")


def make_clients(bucket: Bucket) -> tuple[dict[str, Client], dict[str, str]]:
    clients, missing = {}, {}
    for cls in CLIENTS:
        try:
            clients[cls.name] = cls(bucket)
        except Unavailable as e:
            missing[cls.name] = str(e)
            say(f"  skipping {cls.name}: {e}")
    return clients, missing


def warm_up(clients: dict[str, Client]) -> None:
    """One untimed open + read per client: sessions, credential chains and thread pools start here."""
    for client in clients.values():
        if not getattr(client, "limit", False):
            client.read(client.open_array("chunked.zarr"), (0, 0))


# ------------------------------------------------------------------------------------------ report


def fmt_time(s: float) -> str:
    return f"{s * 1e3:,.0f} ms" if s >= 0.01 else f"{s * 1e3:.1f} ms"


def fmt_counts(c: dict[str, int]) -> str:
    parts = [f"{c[k]} {label}" for k, label in KINDS if c.get(k)]
    return f"{c['total']} ({', '.join(parts)})" if len(parts) > 1 else (parts[0] if parts else "0")


def table(rows: list[RemoteRow], latency_ms: float) -> list[str]:
    lines = [
        f"### {latency_ms:g} ms per request",
        "",
        "| Workload | Client | Median | n | vs tensorstore | vs zarr-python | Requests | Peak in flight |",
        "|---|---|---:|---:|---:|---:|---|---:|",
    ]
    mine = [r for r in rows if r.latency_ms == latency_ms]
    for wl in dict.fromkeys(r.workload for r in mine):
        by = {r.client: r for r in mine if r.workload == wl}
        ts, zp = by.get(TS), by.get(ZP)
        for r in by.values():
            name = f"**{r.client}**" if r.client.startswith("rectizarr") else r.client
            if not r.samples:
                lines.append(f"| {wl} | {name} | {r.note or 'n/a'} | | | | | |")
                continue
            vs_ts = f"{r.median / ts.median:.2f}x" if ts and ts.samples else ""
            vs_zp = f"{r.median / zp.median:.2f}x" if zp and zp.samples else ""
            c = r.median_counts
            lines.append(
                f"| {wl} | {name} | {fmt_time(r.median)} | {len(r.samples)} | {vs_ts} | {vs_zp} | "
                f"{fmt_counts(c)} | {c['peak_in_flight']} |"
            )
    return lines


def targets(rows: list[RemoteRow], latency_ms: float) -> list[str]:
    """The issue's targets at ``latency_ms``, for the rectizarr clients that ran: obstore <= 1.0x
    tensorstore on reads and writes and <= 0.5x zarr-python everywhere; both backends no more requests than
    tensorstore, the consolidated group in <= 2 requests; fsspec: no HEAD in a read."""
    out = ["| Target | Client | Held in | Missed in |", "|---|---|---:|---|"]
    mine = [r for r in rows if r.latency_ms == latency_ms and r.samples]
    ts = {r.key: r for r in mine if r.client == TS}
    zp = {r.key: r for r in mine if r.client == ZP}
    for client in (RZ_OBJ, RZ_FS):
        own = {r.key: r for r in mine if r.client == client}
        if not own:
            continue
        data = {k: r for k, r in own.items() if not k.startswith("group")}  # reads and writes
        checks: dict[str, list[tuple[str, bool]]] = {}
        if client == RZ_OBJ:
            checks["<= 1.0x tensorstore"] = [
                (k, r.median <= ts[k].median) for k, r in data.items() if k in ts
            ]
            checks["<= 0.5x zarr-python"] = [
                (k, r.median <= 0.5 * zp[k].median) for k, r in own.items() if k in zp
            ]
        else:
            checks["no HEAD in a read"] = [
                (k, r.median_counts["head"] == 0) for k, r in data.items() if not k.startswith("write")
            ]
        checks["requests <= tensorstore's"] = [
            (k, r.median_counts["total"] <= ts[k].median_counts["total"]) for k, r in data.items() if k in ts
        ]
        checks["consolidated group in <= 2 requests"] = [
            (k, r.median_counts["total"] <= 2) for k, r in own.items() if k == "group consolidated"
        ]
        for text, results in checks.items():
            missed = [k for k, ok in results if not ok]
            out.append(
                f"| {text} | {client} | {len(results) - len(missed)} of {len(results)} | "
                f"{', '.join(missed) or '-'} |"
            )
    return out


def markdown(rows: list[RemoteRow], meta: dict[str, Any]) -> list[str]:
    lines = [
        SECTION,
        "",
        f"Generated by `benchmarks/remote.py` ({'part of `make bench`' if meta.get('from_run') else 'alone'}) "
        f"on {meta['stamp']}: {os.cpu_count()} cores, {meta['versions']}. Whole section: "
        f"{meta['total'] / 60:.1f} minutes.",
        "",
        f"{SERVERS[meta.get('server', 'moto')]} adds a fixed latency to every request. "
        "Data written once by rectizarr: a (4096, 4096) uint16 array in "
        "256 chunks of 256 x 256, zstd level 1 (32 MiB; ~26 MiB stored), chunked and sharded (16 shards of "
        f"16 chunks), and two groups of {meta['group_size']} small arrays with attributes. Timed: the "
        "workload only (read workloads open the array untimed, except *first byte*); *Requests* are those of "
        "the median sample, by type (range GET = a GET with a Range header), and *Peak in flight* the most "
        "the server answered at once. Repeats run round-robin with a rotating order; up to "
        f"{meta['repeats']} per workload and latency, fewer where another round would take the workload past "
        f"{meta['budget']:.0f} s (the *n* column). tensorstore "
        "has no groups: its unconsolidated row is a listing of the group's prefix through its kvstore.",
        "",
    ]
    for note in meta.get("skipped", {}).items():
        lines += [f"*{note[0]}* did not run: {note[1]}", ""]
    for lat in meta["latencies_ms"]:
        lines += [*table(rows, lat), ""]
    top = max(meta["latencies_ms"])
    lines += [
        f"Targets of issue 17 at {top:g} ms (workloads by short name: first byte, read chunked, read "
        "sharded, window, oindex, points, group consolidated, group listing, write chunked, write sharded; "
        "tensorstore's listing is no group, so the group rows are compared with zarr-python only):",
        "",
    ]
    return lines + targets(rows, top)


def splice(path: Path, section: list[str]) -> None:
    """Put ``section`` into the markdown file at ``path``, replacing an earlier one."""
    text = path.read_text() if path.exists() else "# rectizarr benchmarks\n"
    body = "\n".join(section).rstrip() + "\n"
    if SECTION in text:
        head, rest = text.split(SECTION, 1)
        nxt = rest.find("\n## ")
        text = head + body + (rest[nxt:].lstrip("\n") if nxt >= 0 else "")
        text = text.replace(body + "## ", body + "\n## ")
    else:
        anchor = next((a for a in ("## Before and after", "## Phase times") if a in text), None)
        text = text.replace(anchor, body + "\n" + anchor, 1) if anchor else text.rstrip() + "\n\n" + body
    path.write_text(text)


# ------------------------------------------------------------------------------------------ main


def versions() -> str:
    import importlib.metadata as md

    out = []
    for dist in ("rectizarr", "zarr", "tensorstore", "obstore", "s3fs", "moto"):
        try:
            out.append(f"{dist} {md.version(dist)}")
        except md.PackageNotFoundError:
            out.append(f"{dist} (not installed)")
    return ", ".join(out)


def start_server(kind: str) -> Any:
    """The S3 server of the section, in its own process: ``lean`` (:mod:`s3_lean`, the default) or
    ``moto`` (the tests' server, whose CPU per request on the clients' cores is a floor of its own)."""
    if kind == "moto":
        from tests.servers import S3Server

        return S3Server(latency=0.0, process=True)
    from s3_lean import LeanS3Server

    return LeanS3Server()


def run(
    latencies: Sequence[float],
    repeats: int,
    group_size: int = 200,
    n_points: int = 100,
    budget: float = 20.0,
    from_run: bool = False,
    server_kind: str = "lean",
) -> tuple[list[RemoteRow], dict[str, Any], list[str]]:
    """Run the remote section: (rows, metadata, markdown lines)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ[name] = "testing"  # what every client (tensorstore: from the environment) signs with
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    start = time.perf_counter()
    server = start_server(server_kind)
    rows: list[RemoteRow] = []
    try:
        fs = server.filesystem()
        bucket = Bucket(server.endpoint_url, server.new_bucket(fs))
        t0 = time.perf_counter()
        ds = write_dataset(bucket, group_size, n_points)
        say(
            f"  remote: data written in {time.perf_counter() - t0:.1f}s to {bucket.url('')} at {bucket.endpoint}"
        )
        clients, skipped = make_clients(bucket)
        warm_up(clients)
        wls = workloads(ds, fs)
        for latency in latencies:
            server.set_latency(latency)
            for wl in wls:
                t0 = time.perf_counter()
                by = {name: RemoteRow(latency * 1e3, wl.key, wl.label, name) for name in clients}
                measure(server, clients, wl, repeats, by, budget)
                rows += by.values()
                report = ", ".join(
                    f"{n} {fmt_time(r.median)}" if r.samples else f"{n} {r.note[:40]}" for n, r in by.items()
                )
                say(f"  [{latency * 1e3:g} ms] {wl.label} ({time.perf_counter() - t0:.0f}s): {report}")
    finally:
        server.stop()
    meta = {
        "stamp": time.strftime("%Y-%m-%d %H:%M"),
        "total": time.perf_counter() - start,
        "versions": versions(),
        "latencies_ms": [lat * 1e3 for lat in latencies],
        "repeats": repeats,
        "budget": budget,
        "group_size": group_size,
        "skipped": skipped,
        "from_run": from_run,
        "server": server_kind,
    }
    return rows, meta, markdown(rows, meta)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--latency", type=float, action="append", help="seconds per request (repeatable; default 0 and 0.02)"
    )
    ap.add_argument("--repeats", type=int, default=5, help="rounds per workload (default 5)")
    ap.add_argument(
        "--budget",
        type=float,
        default=20.0,
        help="seconds per workload and latency: no round "
        "that would go past it starts, but always one (default 20)",
    )
    ap.add_argument("--quick", action="store_true", help="one round, a group of 50 (development)")
    ap.add_argument(
        "--server",
        choices=("lean", "moto"),
        default="lean",
        help="the S3 server: lean "
        "(benchmarks/s3_lean.py, default) or moto (the tests' server; about 2 ms of CPU per request "
        "on the clients' cores)",
    )
    ap.add_argument(
        "--out",
        default=None,
        help="markdown file whose remote section is replaced (default "
        "benchmarks/results.md; --quick: benchmarks/_data/remote-quick.md)",
    )
    args = ap.parse_args(argv)
    latencies = args.latency or [0.0, 0.02]
    repeats, group = (1, 50) if args.quick else (args.repeats, 200)
    rows, meta, lines = run(latencies, repeats, group_size=group, budget=args.budget, server_kind=args.server)
    out = (
        Path(args.out)
        if args.out
        else (HERE / "_data" / "remote-quick.md" if args.quick else HERE / "results.md")
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    splice(out, lines)
    raw = HERE / "_data" / ("remote-quick.json" if args.quick else "remote.json")
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text(json.dumps({"meta": meta, "rows": [r.__dict__ for r in rows]}, indent=1))
    say(f"wrote {out} and {raw} in {meta['total'] / 60:.1f} minutes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
