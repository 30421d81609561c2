"""Long reliability runs (not part of CI): hostile metadata, corrupt data, crash safety, property tests.

    .venv/bin/python scripts/long_runs.py metadata --cases 100000 --jobs 2
    .venv/bin/python scripts/long_runs.py corrupt --cases 1000          # per codec chain
    .venv/bin/python scripts/long_runs.py crash --kills 100
    .venv/bin/python scripts/long_runs.py properties                    # extra arguments go to pytest
    .venv/bin/python scripts/long_runs.py consistency --scale 10        # lost-update stress, 10x the counts
    .venv/bin/python scripts/long_runs.py all

Each prints its case counts and exits non-zero on the first violation (with a seed to replay it). The
generators are the ones the bounded tests in ``tests/reliability/`` use. ``properties`` runs every
hypothesis test (``pytest -m hypothesis``) under the "long" hypothesis profile of ``tests/conftest.py``
(20 times the examples of ``make test``; ``--profile`` picks another); a failure prints the blob that
replays it (``@reproduce_failure``).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.reliability import _corrupt, _crash, _mutate  # noqa: E402


def _metadata_slice(args: tuple[int, int, int]) -> tuple[int, int, int]:
    start, stop, base = args
    seeds = _mutate.seed_stores()
    opened = failed = 0
    for i in range(start, stop):
        contents, key, path = seeds[i % len(seeds)]
        data = _mutate.mutate(contents[key], random.Random(base + i))
        try:
            with _mutate.alarm(_mutate.CASE_SECONDS):
                outcomes = _mutate.check_case(contents, key, path, data)
        except (AssertionError, TimeoutError) as e:
            raise SystemExit(f"metadata case {i} (seed {base + i}, document {key}) failed: {e}") from e
        opened += sum(o is None for o in outcomes)
        failed += sum(o is not None for o in outcomes)
    return stop - start, opened, failed


def run_metadata(cases: int, jobs: int, base: int) -> None:
    t0 = time.time()
    step = 2000
    parts = [(i, min(cases, i + step), base) for i in range(0, cases, step)]
    total = opened = failed = 0
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for n, o, f in pool.map(_metadata_slice, parts):
            total += n
            opened += o
            failed += f
    print(
        f"metadata: {total} mutated documents, {opened + failed} opens "
        f"({opened} succeeded, {failed} raised RectizarrError), 0 violations, {time.time() - t0:.0f} s"
    )


def run_corrupt(cases: int, base: int) -> None:
    t0 = time.time()
    grand: Counter[str] = Counter()
    for chain in _corrupt.CHAINS:
        contents = _corrupt.build(chain)
        seen: Counter[str] = Counter()
        for i in range(cases):
            try:
                seen[_corrupt.run_case(chain, contents, random.Random(f"{base}-{chain}-{i}"))] += 1
            except AssertionError as e:
                raise SystemExit(f"corrupt case {chain} #{i} (seed {base}) failed: {e}") from e
        grand.update(seen)
        checked = "checksummed" if chain in _corrupt.CHECKED else "no checksum"
        print(
            f"corrupt: {chain:45s} [{checked}] {cases} cases: "
            f"{seen['correct']} correct, {seen['error']} CodecError, {seen['wrong']} wrong data"
        )
    print(
        f"corrupt: {sum(grand.values())} cases over {len(_corrupt.CHAINS)} chains, 0 violations, "
        f"{time.time() - t0:.0f} s"
    )


def run_crash(kills: int, base: int) -> None:
    t0 = time.time()
    with tempfile.TemporaryDirectory() as d:
        root = str(Path(d) / "crash.zarr")
        done = _crash.kill_loop(root, kills=kills, seed=base, max_delay=1.0)
        newest = _crash.verify(root)
    print(
        f"crash: {done} SIGKILLs, every key whole after each (newest round {newest}), {time.time() - t0:.0f} s"
    )


def run_properties(profile: str, pytest_args: list[str]) -> None:
    t0 = time.time()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--hypothesis-profile={profile}",
        "-m",
        "hypothesis",
        *pytest_args,
    ]
    code = subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode
    if code:
        raise SystemExit(f"properties: pytest exited with {code} under the {profile!r} profile")
    print(f"properties: every hypothesis test passed under the {profile!r} profile, {time.time() - t0:.0f} s")


def run_consistency(scale: int, pytest_args: list[str]) -> None:
    t0 = time.time()
    env = {
        **os.environ,
        "RECTIZARR_STRESS_SCALE": str(scale),
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/reliability/test_consistency.py",
        *pytest_args,
    ]
    code = subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode
    if code:
        raise SystemExit(f"consistency: pytest exited with {code} at {scale}x the counts")
    print(f"consistency: 0 lost updates and 0 wrong values at {scale}x the counts, {time.time() - t0:.0f} s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["metadata", "corrupt", "crash", "properties", "consistency", "all"])
    p.add_argument("--cases", type=int, default=None, help="metadata: total; corrupt: per chain")
    p.add_argument("--kills", type=int, default=100)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--profile", default="long", help="properties: the hypothesis profile")
    p.add_argument("--scale", type=int, default=10, help="consistency: multiple of the stress counts")
    a, pytest_args = p.parse_known_args()
    if pytest_args and a.what not in ("properties", "consistency", "all"):
        p.error(f"unrecognized arguments: {' '.join(pytest_args)}")
    if a.what in ("metadata", "all"):
        run_metadata(a.cases or 100_000, a.jobs, a.seed)
    if a.what in ("corrupt", "all"):
        run_corrupt(a.cases or 1000, a.seed)
    if a.what in ("crash", "all"):
        run_crash(a.kills, a.seed)
    if a.what in ("properties", "all"):
        run_properties(a.profile, pytest_args)
    if a.what in ("consistency", "all"):
        run_consistency(a.scale, pytest_args)


if __name__ == "__main__":
    main()
