"""A writer to be killed with SIGKILL at a random moment, and the check of what it leaves behind.

``python -m tests.reliability._crash ROOT SEED`` opens (creating on first use) three arrays in the
LocalStore at ROOT and loops forever: whole and partial writes of a chunked array, partial writes that
read-modify-write shards, and metadata updates (attributes, resize). Every element written in round ``v``
of chunk (or inner chunk) ``k`` is ``v * 1000 + k``, so a chunk that mixes two writes, or a truncated
one, cannot pass :func:`verify`.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import rectizarr
from rectizarr.stores import LocalStore

N = 60
CHUNK = 10  # chunked array "c": chunks of 10
INNER = 5  # sharded array "s": shards of 20, inner chunks of 5


def _pattern(version: int, start: int, stop: int, size: int) -> np.ndarray:
    idx = np.arange(start, stop)
    return (version * 1000 + idx // size).astype("int64")


def setup(root: str) -> None:
    store = LocalStore(root)
    if store.exists("zarr.json"):
        return
    rectizarr.create_group(store)
    rectizarr.create_array(
        store,
        name="c",
        shape=(N,),
        dtype="int64",
        chunks=(CHUNK,),
        compressors={"name": "gzip", "configuration": {"level": 1}},
    )
    rectizarr.create_array(
        store, name="s", shape=(N,), dtype="int64", shards=(20,), chunks=(INNER,), compressors=None
    )
    rectizarr.create_array(store, name="m", shape=(10,), dtype="int8", chunks=(4,), attributes={"v": 0})


def writer(root: str, seed: int) -> None:
    setup(root)
    store = LocalStore(root)
    c = rectizarr.open_array(store, path="c")
    s = rectizarr.open_array(store, path="s")
    m = rectizarr.open_array(store, path="m")
    rng = random.Random(seed)
    version = int(m.attrs.get("v", 0))
    print("ready", flush=True)
    while True:
        version += 1
        op = rng.randrange(4)
        if op == 0:
            c[:] = _pattern(version, 0, N, CHUNK)
        elif op == 1:
            k = rng.randrange(N // CHUNK)
            c[k * CHUNK : (k + 1) * CHUNK] = _pattern(version, k * CHUNK, (k + 1) * CHUNK, CHUNK)
        elif op == 2:  # a few inner chunks: read-modify-write of their shard(s)
            a = rng.randrange(N // INNER) * INNER
            b = min(N, a + INNER * rng.randint(1, 3))
            s[a:b] = _pattern(version, a, b, INNER)
        else:
            m.attrs.update({"v": version, "payload": "x" * rng.randrange(2000)})
            m.resize((10 + version % 3,))


def verify(root: str) -> int:
    """Every zarr.json parses; every chunk / inner chunk is whole and holds exactly one round's data.
    Returns the newest round found in the data."""
    newest = 0
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if f == "zarr.json":
                json.loads(Path(dirpath, f).read_bytes())
    store = LocalStore(root, read_only=True)
    for name, size in (("c", CHUNK), ("s", INNER)):
        data = rectizarr.open_array(store, path=name, mode="r")[:]
        for k in range(N // size):
            part = data[k * size : (k + 1) * size]
            assert (part == part[0]).all(), f"{name} chunk {k} mixes writes: {part}"
            assert part[0] == 0 or part[0] % 1000 == k, f"{name} chunk {k} holds {part}"
            newest = max(newest, int(part[0]) // 1000)
    m = rectizarr.open_array(store, path="m", mode="r")
    assert m.shape[0] in (10, 11, 12) and isinstance(m.attrs["v"], int)
    m[:]
    return newest


def kill_loop(root: str, kills: int, seed: int, max_delay: float = 0.4) -> int:
    """Start the writer, SIGKILL it after a random delay, verify; ``kills`` times. Returns the kills."""
    rng = random.Random(seed)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = 0
    for i in range(kills):
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability._crash", root, str(seed * 100_003 + i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=Path(__file__).resolve().parents[2],
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == b"ready", (line, proc.stderr.read() if proc.stderr else b"")
        time.sleep(rng.uniform(0, max_delay))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            err = proc.stderr.read()
            proc.stderr.close()
            assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
        verify(root)
        done += 1
    return done


if __name__ == "__main__":
    writer(sys.argv[1], int(sys.argv[2]))
