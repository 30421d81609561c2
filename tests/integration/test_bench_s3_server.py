"""The remote benchmark's lean S3 server (benchmarks/s3_lean.py) speaks enough S3 for the clients it
measures: rectizarr over obstore and over s3fs (arrays, sharding, groups, conditional writes), with the
requests counted as the tests' moto server counts them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from s3_lean import LeanS3Server


@pytest.fixture(scope="module")
def lean() -> Iterator[Any]:
    server = LeanS3Server()
    yield server
    server.stop()


def options(server: Any) -> dict[str, Any]:
    return {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": server.endpoint_url, "region_name": "us-east-1"},
    }


@pytest.mark.parametrize("backend", ["obstore", "fsspec"])
def test_rectizarr_round_trips_through_the_lean_server(lean: Any, backend: str) -> None:
    bucket = lean.new_bucket(lean.filesystem())
    store = rectizarr.open_store(
        f"s3://{bucket}/root", mode="w", backend=backend, storage_options=options(lean)
    )
    data = np.arange(64 * 48, dtype="u2").reshape(64, 48)
    g = rectizarr.create_group(store, attributes={"title": "t"})
    a = g.create_array("a", shape=data.shape, dtype="u2", chunks=(16, 16), shards=(32, 48))
    b = g.create_array(
        "b",
        shape=data.shape,
        dtype="u2",
        chunks=(16, 16),
        compressors={"name": "zstd", "configuration": {"level": 1}},
    )
    a[...] = data
    b[...] = data
    b[5:9, 40:] = 7
    want = data.copy()
    want[5:9, 40:] = 7
    rectizarr.consolidate_metadata(store)
    lean.reset_counts()
    r = rectizarr.open_group(store, mode="r")
    assert r.keys() == ["a", "b"] and r.attrs["title"] == "t"
    assert np.array_equal(r["a"][...], data) and np.array_equal(r["b"][...], want)
    assert np.array_equal(r["a"].oindex[[1, 40], ::5], data[[1, 40], ::5]) and r["a"][63, 47] == data[63, 47]
    counts = lean.counts()
    assert counts["total"] > 0 and counts["head"] == 0 and counts["peak_in_flight"] >= 1
    assert sorted(store.list_dir("b/c/")) == ["0", "1", "2", "3"]
    assert store.get("b/c/9/9") is None and store.get("a/zarr.json", (0, 1)) == b"{"
    assert store.set_if("k", b"1", None) and not store.set_if("k", b"2", None)
    _, tag = store.get_versioned("k")
    assert store.set_if("k", b"3", tag) and not store.set_if("k", b"4", tag) and store.get("k") == b"3"
    store.delete_prefix("b/")
    assert not store.any_under("b/") and store.any_under("a/")


def test_latency_and_counts(lean: Any) -> None:
    import time

    fs = lean.filesystem()
    bucket = lean.new_bucket(fs)
    fs.pipe(f"{bucket}/x", b"0123456789")
    lean.reset_counts()
    lean.set_latency(0.05)
    try:
        t0 = time.perf_counter()
        assert fs.cat_file(f"{bucket}/x", start=2, end=5) == b"234"
        assert time.perf_counter() - t0 >= 0.05
    finally:
        lean.set_latency(0)
    counts = lean.counts()
    assert counts["get_range"] + counts["get"] + counts["head"] >= 1 and counts["put"] == 0
