"""An HTTP server that never answers, or answers with a compressed body that inflates without end: the
store gives up after its timeout with a StoreError naming the URL, and never inflates what it is sent."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from typing import Any

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


@pytest.mark.parametrize("server", ["ignores ranges", "refuses suffixes"])
@pytest.mark.parametrize("backend", ["obstore", "fsspec"])
def test_servers_that_do_not_serve_ranges_still_give_the_bytes_asked_for(tmp_path: Any, server: str,
                                                                          backend: str) -> None:
    """An HTTP server that ignores ``Range`` (200 with the whole file, as ``python -m http.server``) or
    answers a suffix range with 416: a ranged read is the bytes asked for, cut from the whole value (obstore
    gave b'' and a sharded read 'shard index is 0 bytes'; fsspec gave the whole value)."""
    import io
    import re
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    import numpy as np

    root = str(tmp_path)
    rectizarr.create_array(root, name="sh", shape=(1000,), shards=(1000,), chunks=(10,), dtype="i4",
                           compressors=None)[:] = np.arange(1000)
    value = (tmp_path / "sh" / "c" / "0").read_bytes()

    class Handler(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, directory=root, **kw)

        def log_message(self, *args: Any) -> None:
            pass

        def send_head(self) -> Any:
            asked = self.headers.get("Range", "")
            if server == "ignores ranges" or not asked:
                return super().send_head()
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", asked)
            data = open(self.translate_path(self.path), "rb").read()
            if asked.startswith("bytes=-") or (m and int(m[1]) >= len(data)):  # (past the end too)
                self.send_response(416)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            start = int(m[1]) if m else 0
            end = min(int(m[2]) + 1 if m and m[2] else len(data), len(data))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
            self.send_header("Content-Length", str(end - start))
            self.end_headers()
            return io.BytesIO(data[start:end])

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        store = open_store(f"http://127.0.0.1:{httpd.server_address[1]}", backend=backend, mode="r")
        for byte_range in [(-16, None), (10, 4), (1000, None), (len(value) - 3, 10), (len(value) + 5, 2)]:
            start, length = byte_range
            begin = len(value) + start if start < 0 else start
            want = value[begin:] if length is None else value[begin : begin + length]
            assert bytes(store.get("sh/c/0", byte_range) or b"") == want, byte_range
        a = rectizarr.open_array(store, path="sh", mode="r")
        assert a[5:8].tolist() == [5, 6, 7] and a[::97].tolist() == list(range(0, 1000, 97))
    finally:
        httpd.shutdown()
