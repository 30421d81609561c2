"""An HTTP server that never answers, or answers with a compressed body that inflates without end, or with
more than the value can be: the store gives up after its timeout with a StoreError naming the URL, never
inflates what it is sent, and refuses a body longer than what its reader can take (a chunk of the array, a
metadata document) before reading it (its ``Content-Length``) or once one byte more came."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from typing import Any

import pytest

import rectizarr
from rectizarr.errors import RectizarrError, StoreError
from rectizarr.stores import FsspecStore, max_document_bytes, open_store, set_max_document_bytes
from tests.memory import least_peak
from tests.reliability._bombs import array_doc, deflate_zeros
from tests.reliability._helpers import bounded
from tests.servers import BodyServer, GzipServer, SilentServer

MiB = 1 << 20


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.stop()


def test_a_server_that_never_answers_times_out(silent: SilentServer) -> None:
    url = f"{silent.base_url}/data.zarr"
    store = FsspecStore(url, timeout=0.5)
    for what, attempt in [
        ("get", lambda: store.get("zarr.json")),
        ("range", lambda: store.get("c/0", (0, 4))),
        ("suffix", lambda: store.get("c/0", (-4, None))),
        ("exists", lambda: store.exists("c/0")),
        ("open_group", lambda: rectizarr.open_group(store, mode="r")),
    ]:
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
    for attempt in [
        lambda: store.get("zarr.json"),
        lambda: store.get("c/0", (0, 4)),
        lambda: store.exists("c/0"),
    ]:
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
def test_servers_that_do_not_serve_ranges_still_give_the_bytes_asked_for(
    tmp_path: Any, server: str, backend: str
) -> None:
    """An HTTP server that ignores ``Range`` (200 with the whole file, as ``python -m http.server``) or
    answers a suffix range with 416: a ranged read is the bytes asked for, cut from the whole value (obstore
    gave b'' and a sharded read 'shard index is 0 bytes'; fsspec gave the whole value)."""
    import io
    import re
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    import numpy as np

    root = str(tmp_path)
    rectizarr.create_array(
        root, name="sh", shape=(1000,), shards=(1000,), chunks=(10,), dtype="i4", compressors=None
    )[:] = np.arange(1000)
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


# ---- bodies bounded by what the reader can take (issue 35) ----------------------------------------------


def _gzip_bomb() -> bytes:
    return gzip.compress(bytes(64 * MiB), compresslevel=9)  # ~64 KiB inflating to 64 MiB


def _deflate_bomb() -> bytes:  # HTTP's "deflate" is a zlib stream
    return b"\x78\xda" + deflate_zeros(64 * MiB)


def _zstd_bomb() -> bytes:  # one frame of RLE blocks declaring no size: 8 KiB decoding to 250 MiB
    blocks = [((128 << 10) << 3 | 1 << 1 | int(i == 1999)).to_bytes(3, "little") + b"\0" for i in range(2000)]
    return b"\x28\xb5\x2f\xfd\x00\x38" + b"".join(blocks)


ENCODED = {
    "gzip": _gzip_bomb,
    "deflate": _deflate_bomb,
    "zstd": _zstd_bomb,
    "br": lambda: bytes(range(256)) * 256,
}  # (no brotli encoder here: bytes a decoder would change)


@pytest.mark.parametrize("encoding", sorted(ENCODED))
@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_content_encoded_answers_come_as_sent(backend: str, encoding: str) -> None:
    """Whatever the ``Content-Encoding`` (gzip, deflate, br, zstd), the bytes are the ones sent, never
    inflated: a codec or the JSON parser then refuses them, bounded."""
    body = ENCODED[encoding]()
    server = GzipServer(body, encoding)
    try:
        store = open_store(f"{server.base_url}/data.zarr", mode="r", backend=backend)
        got: list[Any] = []
        peak = least_peak(lambda: got.append(store.get("c/0")), 16 * MiB)  # (obstore's buffers: not traced)
        assert bytes(got[-1]) == body and peak < 16 * MiB
        with pytest.raises(RectizarrError):
            rectizarr.open_group(store, mode="r")
    finally:
        server.stop()


@pytest.fixture
def small_documents() -> Iterator[None]:
    before = max_document_bytes()
    set_max_document_bytes(MiB)
    yield
    set_max_document_bytes(before)


@pytest.mark.usefixtures("small_documents")
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_answers_longer_than_a_chunk_or_document_are_refused(backend: str, chunked: bool) -> None:
    """A server that answers a chunk of 4 bytes (or a ``zarr.json``) with 256 MiB: refused from its
    ``Content-Length`` before the body is read, or, sent in chunks with no length, once one byte more
    than the limit came (obstore refuses any answer without a ``Content-Length``); StoreError naming the
    key, memory bounded by the limit, the other chunks readable."""
    server = BodyServer(
        {
            "x.zarr/zarr.json": array_doc(),
            "x.zarr/c/0": 256 * MiB,
            "x.zarr/c/1": b"\1\2\3\4",
            "y.zarr/zarr.json": 256 * MiB,
            "z.zarr/zarr.json": array_doc() + b" " * MiB,
        },
        chunked=chunked,
    )
    try:

        def read_chunk() -> None:
            with pytest.raises(StoreError, match="more than the 4 bytes a chunk") as info:
                a[:]
            assert "c/0" in str(info.value)

        def open_document(name: str) -> None:
            with pytest.raises(StoreError, match=f"{name}/zarr.json") as info:
                rectizarr.open_array(
                    open_store(f"{server.base_url}/{name}", mode="r", backend=backend), mode="r"
                )
            assert "1048576 bytes a metadata document" in str(info.value)

        if backend == "obstore" and chunked:
            with pytest.raises(StoreError, match=r"x\.zarr/zarr\.json.*Content-Length"):
                rectizarr.open_array(
                    open_store(f"{server.base_url}/x.zarr", mode="r", backend=backend), mode="r"
                )
            return
        a = rectizarr.open_array(open_store(f"{server.base_url}/x.zarr", mode="r", backend=backend), mode="r")
        assert a[4:].tolist() == [1, 2, 3, 4]
        assert least_peak(read_chunk, 8 * MiB) < 8 * MiB
        assert least_peak(lambda: open_document("y.zarr"), 8 * MiB) < 8 * MiB
        open_document("z.zarr")  # a valid document, larger than the limit
    finally:
        server.stop()


def test_opting_in_to_decoding_is_bounded_by_the_chunk_too() -> None:
    """``client_kwargs={"auto_decompress": True}`` (fsspec) inflates what the server compressed: the body
    is then read in pieces and refused once more than a chunk (1 MiB here) came, not inflated whole."""
    bomb = gzip.compress(bytes(256 * MiB), compresslevel=9)  # ~250 KiB inflating to 256 MiB
    server = BodyServer(
        {
            "x.zarr/zarr.json": gzip.compress(array_doc(chunk=MiB, shape=2 * MiB)),
            "x.zarr/c/0": bomb,
            "x.zarr/c/1": gzip.compress(bytes(MiB)),
        },
        encoding="gzip",
    )
    try:
        store = FsspecStore(
            f"{server.base_url}/x.zarr", storage_options={"client_kwargs": {"auto_decompress": True}}
        )
        a = rectizarr.open_array(store, mode="r")
        assert not a[MiB:].any()

        def read() -> None:
            with pytest.raises(StoreError, match=r"c/0.* came with more than the 1048576 bytes"):
                a[:]

        assert least_peak(read, 32 * MiB) < 32 * MiB  # not the 256 MiB it inflates to
    finally:
        server.stop()


@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_s3_values_longer_than_a_chunk_are_refused_unread(s3_server: Any, backend: str) -> None:
    """On S3 the answer's ``ContentLength`` is checked before its body is read (the error gives the length
    from the headers; memory is not measured here: the moto server runs in this process)."""
    bucket = s3_server.new_bucket(s3_server.filesystem())
    store = open_store(f"s3://{bucket}", backend=backend, storage_options=s3_server.storage_options())
    a = rectizarr.create_array(store, shape=(8,), chunks=(4,), dtype="u1", compressors=None, fill_value=0)
    a[:] = range(8)
    store.set("c/0", bytes(4 * MiB))
    with pytest.raises(StoreError, match=r"c/0.* is 4194304 bytes, more than the 4 bytes a chunk"):
        a[:]
    assert a[4:].tolist() == [4, 5, 6, 7]
    assert store.get("c/0") == bytes(4 * MiB)  # a plain read of the store has no chunk to go by
