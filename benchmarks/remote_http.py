"""Plain HTTP with injected latency: rectizarr (fsspec and obstore backends), zarr-python and tensorstore
reading the same chunked array from a loopback HTTP server that waits a fixed time before every answer. The
server runs in a child process: in the clients' process its Python took the GIL from the Python clients
(fsspec full read 1.47x tensorstore with it there, 1.07x without, in one A/B) and not from tensorstore.

    .venv/bin/python benchmarks/remote_http.py [--latency 0.02] [--repeats 3]

Prints a markdown table (median of the repeats, ratios to tensorstore and zarr-python) and replaces the
"### Plain HTTP" part of the remote section of benchmarks/results.md. The server listens on 127.0.0.1 and
stops with the script.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.servers import HttpServer  # noqa: E402

MARK = "### Plain HTTP"
WINDOW = (slice(256, 768), slice(512, 1024))
STRIDED = (slice(None, None, 16), [10, 300, 2100, 4000])


def clients(url: str) -> dict[str, Callable[[], Any]]:
    """Each client's ``open()`` of the array at ``url``: something indexable like NumPy."""
    import tensorstore as ts
    import zarr

    import rectizarr

    def rz(backend: str) -> Callable[[], Any]:
        return lambda: rectizarr.open_array(rectizarr.open_store(url, mode="r", backend=backend), mode="r")

    class TsArray:
        def __init__(self) -> None:
            self.t = ts.open(
                {"driver": "zarr3", "kvstore": {"driver": "http", "base_url": url}}, open=True, read=True
            ).result()

        def __getitem__(self, sel: Any) -> Any:
            if isinstance(sel, tuple) and any(isinstance(s, list) for s in sel):
                return self.t.oindex[sel].read().result()
            return self.t[sel].read().result()

    return {
        "rectizarr (obstore)": rz("obstore"),
        "rectizarr (fsspec)": rz("fsspec"),
        "zarr-python": lambda: _ZarrOindex(zarr.open_array(url, mode="r")),
        "tensorstore": TsArray,
    }


class _ZarrOindex:
    def __init__(self, a: Any) -> None:
        self.a = a

    def __getitem__(self, sel: Any) -> Any:
        if isinstance(sel, tuple) and any(isinstance(s, list) for s in sel):
            return self.a.oindex[sel]
        return self.a[sel]


def workloads(want: np.ndarray) -> list[tuple[str, Callable[[Callable[[], Any]], Any], Any]]:
    return [
        ("first byte: open + read one element", lambda open_: open_()[0, 0], want[0, 0]),
        ("full read (256 chunks)", lambda open_: open_()[...], want),
        ("4-chunk window", lambda open_: open_()[WINDOW], want[WINDOW]),
        (
            "oindex[::16, [10, 300, 2100, 4000]]",
            lambda open_: open_()[STRIDED],
            want[STRIDED[0]][:, STRIDED[1]],
        ),
    ]


def run(latency: float, repeats: int) -> list[str]:
    import rectizarr

    with tempfile.TemporaryDirectory() as tmp:
        want = (np.add.outer(np.arange(4096), np.arange(4096)) % 1000).astype("u2")
        a = rectizarr.create_array(
            Path(tmp) / "a.zarr",
            shape=want.shape,
            dtype="u2",
            chunks=(256, 256),
            compressors={"name": "zstd", "configuration": {"level": 1}},
            fill_value=0,
        )
        a[...] = want
        server = HttpServer(latency=latency, process=True)
        try:
            url = server.serve(Path(tmp) / "a.zarr")
            by_client = clients(url)
            rows = []
            for name, work, expected in workloads(want):
                times: dict[str, list[float]] = {c: [] for c in by_client}
                for r in range(repeats):
                    order = list(by_client)[r % len(by_client) :] + list(by_client)[: r % len(by_client)]
                    for c in order:
                        t0 = time.perf_counter()
                        got = work(by_client[c])
                        times[c].append(time.perf_counter() - t0)
                        if r == 0:
                            assert np.array_equal(np.asarray(got), expected), (c, name)
                rows.append((name, {c: statistics.median(v) for c, v in times.items()}))
        finally:
            server.stop()
    return table(rows, latency)


def table(rows: Sequence[tuple[str, dict[str, float]]], latency: float) -> list[str]:
    out = [
        f"{MARK} ({latency * 1000:g} ms per request)",
        "",
        "The same chunked array (256 chunks of 256 x 256 uint16, zstd level 1) in a local directory, served by "
        "a loopback HTTP server (`tests/servers.py`, in its own process so that it shares no GIL with a "
        "Python client; one thread per request, a new connection per request) that waits before every answer; "
        "medians of the repeats, the order of the clients rotating. "
        "`benchmarks/remote_http.py`.",
        "",
        "| Workload | Client | Median | vs tensorstore | vs zarr-python |",
        "|---|---|---:|---:|---:|",
    ]
    for name, med in rows:
        for c, t in med.items():
            label = f"**{c}**" if c.startswith("rectizarr") else c
            out.append(
                f"| {name} | {label} | {t * 1000:,.0f} ms | {t / med['tensorstore']:.2f}x | "
                f"{t / med['zarr-python']:.2f}x |"
            )
    return out


def splice(path: Path, part: list[str]) -> None:
    text = path.read_text() if path.exists() else ""
    lines = text.splitlines()
    if MARK in text:
        start = next(i for i, line in enumerate(lines) if line.startswith(MARK))
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith(("## ", "### "))), len(lines)
        )
        lines[start:end] = [*part, ""]
    else:
        anchor = next((i for i, line in enumerate(lines) if line.startswith("## Remote")), None)
        end = (
            len(lines)
            if anchor is None
            else next((i for i in range(anchor + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        )
        lines[end:end] = [*part, ""]
    path.write_text("\n".join(lines) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--latency", type=float, default=0.02)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-write", action="store_true", help="print only; leave results.md alone")
    a = p.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        part = run(a.latency, a.repeats)
    print("\n".join(part))
    if not a.no_write:
        splice(HERE / "results.md", part)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
