"""An HTTP server that never answers, or answers with a compressed body that inflates without end: the
store gives up after its timeout with a StoreError naming the URL, and never inflates what it is sent."""

from __future__ import annotations

import gzip
from collections.abc import Iterator

import pytest

import rectizarr
from rectizarr.errors import RectizarrError, StoreError
from rectizarr.stores import FsspecStore, open_store
from tests.memory import least_peak
from tests.reliability._helpers import bounded
from tests.servers import GzipServer, SilentServer

MiB = 1 << 20


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.stop()


def test_a_server_that_never_answers_times_out(silent: SilentServer) -> None:
    url = f"{silent.base_url}/data.zarr"
    store = FsspecStore(url, timeout=0.5)
    for what, attempt in [("get", lambda: store.get("zarr.json")), ("range", lambda: store.get("c/0", (0, 4))),
                          ("suffix", lambda: store.get("c/0", (-4, None))), ("exists", lambda: store.exists("c/0")),
                          ("open_group", lambda: rectizarr.open_group(store, mode="r"))]:
        with pytest.raises(StoreError, match="timed out") as info:
            bounded(attempt, 30)
        assert silent.base_url in str(info.value), what
    # The same through storage_options (how open_store and rectizarr.open pass them).
    opened = open_store(url, mode="r", storage_options={"timeout": 0.5})
    with pytest.raises(StoreError, match="timed out"):
        bounded(lambda: opened.get("zarr.json"), 30)


def test_http_stores_have_a_default_timeout(silent: SilentServer) -> None:
    store = FsspecStore(f"{silent.base_url}/data.zarr")
    assert store.timeout == 30.0


def test_a_gzip_encoded_answer_is_never_inflated() -> None:
    bomb = gzip.compress(bytes(64 * MiB), compresslevel=9)  # ~64 KiB inflating to 64 MiB
    server = GzipServer(bomb)
    try:
        store = FsspecStore(f"{server.base_url}/data.zarr")
        got: list[bytes | None] = []
        peak = least_peak(lambda: got.append(store.get("c/0")), 16 * MiB)
        assert got[-1] == bomb  # the bytes as sent: a codec or the JSON parser then refuses them, bounded
        assert peak < 16 * MiB
        assert server.seen and all(a == "identity" for a in server.seen)
        with pytest.raises(RectizarrError):
            rectizarr.open_group(store, mode="r")
    finally:
        server.stop()


def test_the_obstore_backend_times_out_and_never_inflates(silent: SilentServer) -> None:
    """The same two limits through the obstore backend (the default for http(s) URLs when installed)."""
    url = f"{silent.base_url}/data.zarr"
    store = open_store(url, mode="r", backend="obstore", storage_options={"timeout": 0.5})
    for attempt in [lambda: store.get("zarr.json"), lambda: store.get("c/0", (0, 4)), lambda: store.exists("c/0")]:
        with pytest.raises(StoreError, match="timed out") as info:
            bounded(attempt, 60)
        assert silent.base_url in str(info.value)
    bomb = gzip.compress(bytes(64 * MiB), compresslevel=9)
    server = GzipServer(bomb)
    try:
        got = open_store(f"{server.base_url}/data.zarr", backend="obstore").get("c/0")
        assert got == bomb
    finally:
        server.stop()
