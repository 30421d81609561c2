"""Crafted values that inflate to far more than they take, made in milliseconds (no gigabytes compressed),
and a runner of a read in a child process under an address-space limit."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MiB = 1 << 20
_PIECE = 16 * MiB


def deflate_zeros(n: int) -> bytes:
    """A raw DEFLATE stream of ``n`` zero bytes (``n`` a multiple of 16 MiB), about ``n / 1000`` bytes long:
    one fully flushed piece of 16 MiB (a flush forgets the window, so the piece decodes alone) repeated,
    then the final empty block."""
    assert n % _PIECE == 0
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = c.compress(bytes(_PIECE)) + c.flush(zlib.Z_FULL_FLUSH)
    return piece * (n // _PIECE) + c.flush(zlib.Z_FINISH)


def write_zip(path: str | Path, entries: Sequence[tuple[str, bytes, int, int | None]]) -> None:
    """A zip archive of ``(name, stored bytes, declared size, CRC or None)`` entries: those whose declared
    size differs from their length are deflated (the stored bytes a raw DEFLATE stream), the others
    stored; the CRC is computed for stored entries when None (0 for deflated ones: reads that refuse them
    never get to it)."""
    out, central = bytearray(), bytearray()
    for name, data, size, crc in entries:
        method = 0 if size == len(data) else 8
        crc = (zlib.crc32(data) if method == 0 else 0) if crc is None else crc
        raw = name.encode()
        head = struct.pack(
            "<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(data), size, len(raw), 0
        )
        central += (
            struct.pack(
                "<IHHHHHHIIIHHHHHII",
                0x02014B50,
                20,
                20,
                0,
                method,
                0,
                0x21,
                crc,
                len(data),
                size,
                len(raw),
                0,
                0,
                0,
                0,
                0,
                len(out),
            )
            + raw
        )
        out += head + raw + data
    out += central + struct.pack(
        "<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central), len(out), 0
    )
    Path(path).write_bytes(bytes(out))


def array_doc(chunk: int = 4, shape: int = 8, codecs: list[dict[str, Any]] | None = None) -> bytes:
    """A v3 ``zarr.json`` of a 1-D uint8 array."""
    return json.dumps(
        {
            "zarr_format": 3,
            "node_type": "array",
            "shape": [shape],
            "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [chunk]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0,
            "codecs": codecs or [{"name": "bytes"}],
        }
    ).encode()


_CHILD = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
    {setup}
    import rectizarr
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        {read}
        print("OK")
    except BaseException as exc:
        print("ERR", type(exc).__name__, str(exc).replace("\\n", " ")[:400])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("RSS", base, peak)
""")


def run_limited(
    setup: str, read: str, limit: int = 2 << 30, path: Sequence[str] = ()
) -> tuple[str, int, int]:
    """Run ``setup`` and then ``read`` (one statement each, or several joined by ``;``) in a child Python under
    an address-space limit of ``limit`` bytes: ``("OK" or "ERR <type> <message>", maximum resident KiB
    before the read, after it)``. ``path`` goes first on the child's ``sys.path``."""
    script = _CHILD.format(limit=limit, setup=setup, read=read)
    if path:
        script = f"import sys; sys.path[:0] = {list(path)!r}\n" + script
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and len(lines) >= 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    _, base, peak = lines[-1].split()
    return lines[-2], int(base), int(peak)
