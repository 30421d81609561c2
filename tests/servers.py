"""Test helpers: local servers on the loopback interface (S3 via moto server mode, HTTP with Range
support) and a child-process writer for crash tests."""

from __future__ import annotations

import io
import itertools
import logging
import os
import re
import secrets
import socket
import threading
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOOPBACK = "127.0.0.1"
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


class S3Server:
    """A moto S3 server on 127.0.0.1 (a free port) and s3fs filesystems talking to it."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)

        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            os.environ.setdefault(name, "testing")
        os.environ["AWS_EC2_METADATA_DISABLED"] = "true"  # never probe instance metadata
        self._server = ThreadedMotoServer(ip_address=LOOPBACK, port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"
        self._fs: Any = None

    def filesystem(self) -> Any:
        """The session's s3fs filesystem for this server (made once: creating clients is slow)."""
        if self._fs is None:
            import s3fs

            self._fs = s3fs.S3FileSystem(
                key="testing",
                secret="testing",
                client_kwargs={"endpoint_url": self.endpoint_url, "region_name": "us-east-1"},
                skip_instance_cache=True,
            )
        return self._fs

    def storage_options(self) -> dict[str, Any]:
        """fsspec/s3fs-style options for this server, as a user passes them with an ``s3://`` URL."""
        return {"key": "testing", "secret": "testing",
                "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": "us-east-1"}}

    def new_bucket(self, fs: Any) -> str:
        """Create a uniquely named bucket and return its name."""
        name = f"test-{secrets.token_hex(6)}"
        fs.call_s3("create_bucket", Bucket=name)
        fs.invalidate_cache()
        return name

    def stop(self) -> None:
        self._server.stop()


class _RangeHandler(SimpleHTTPRequestHandler):
    """Serves registered directories under ``/<token>/...``; files honour single ``Range`` requests."""

    roots: dict[str, str]  # set on a subclass per server

    def log_message(self, format: str, *args: Any) -> None:  # silence per-request logging
        return

    def translate_path(self, path: str) -> str:
        parts = path.split("?", 1)[0].split("#", 1)[0].lstrip("/").split("/", 1)
        root = self.roots.get(parts[0])
        if root is None:
            return os.path.join(os.devnull, "missing")  # never exists: 404
        self.directory = root
        return super().translate_path("/" + (parts[1] if len(parts) > 1 else ""))

    def send_head(self) -> io.BytesIO | None:  # type: ignore[override]
        path = self.translate_path(self.path)
        if not os.path.isfile(path):
            return super().send_head()  # type: ignore[return-value]  # directories and 404s
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            size = st.st_size
            start, end, status = 0, size, 200
            header = self.headers.get("Range")
            if header:
                m = _RANGE.fullmatch(header.strip())
                if m is None or m[1] == m[2] == "":
                    self.send_error(400, "malformed Range header")
                    return None
                if m[1] == "":
                    start = max(0, size - int(m[2]))
                else:
                    start = int(m[1])
                    end = min(size, int(m[2]) + 1) if m[2] else size
                if start >= size:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                status = 206
            f.seek(start)
            body = f.read(end - start)
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", f'"{st.st_ino:x}-{st.st_mtime_ns:x}-{size:x}"')
        self.send_header("Last-Modified", self.date_time_string(int(st.st_mtime)))
        self.end_headers()
        return io.BytesIO(body)


class HttpServer:
    """A threading HTTP server on 127.0.0.1 serving registered directories read-only."""

    def __init__(self) -> None:
        self._roots: dict[str, str] = {}
        handler = type("Handler", (_RangeHandler,), {"roots": self._roots})
        self._server = ThreadingHTTPServer((LOOPBACK, 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.base_url = f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def serve(self, directory: str | os.PathLike[str]) -> str:
        """Serve ``directory`` and return its URL."""
        token = secrets.token_hex(6)
        self._roots[token] = os.fspath(directory)
        return f"{self.base_url}/{token}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


class SilentServer:
    """A TCP listener on 127.0.0.1 that never accepts: connections complete (the kernel's backlog) and
    requests are never answered."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind((LOOPBACK, 0))
        self._sock.listen(64)
        self.base_url = f"http://{LOOPBACK}:{self._sock.getsockname()[1]}"

    def stop(self) -> None:
        self._sock.close()


class _GzipHandler(BaseHTTPRequestHandler):
    body: bytes  # set on a subclass per server
    seen: list[str]  # the Accept-Encoding of every request

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def _answer(self, send_body: bool) -> None:
        self.seen.append(self.headers.get("Accept-Encoding", ""))
        self.send_response(200)
        self.send_header("Content-Encoding", "gzip")  # whatever the client accepts
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        if send_body:
            self.wfile.write(self.body)


class GzipServer:
    """An HTTP server on 127.0.0.1 answering every GET with ``body`` sent as ``Content-Encoding: gzip``."""

    def __init__(self, body: bytes) -> None:
        self.seen: list[str] = []
        handler = type("Handler", (_GzipHandler,), {"body": body, "seen": self.seen})
        self._server = ThreadingHTTPServer((LOOPBACK, 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.base_url = f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


KILL_VALUES = (bytes([1]) * (4 << 20), bytes([2]) * (3 << 20))


def write_forever(root: str, ready: Any) -> None:
    """Child-process body: set the ``ready`` event, then rewrite key ``k`` of a LocalStore with
    alternating ``KILL_VALUES`` until killed."""
    from rectizarr.stores import LocalStore

    store = LocalStore(root)
    ready.set()
    for i in itertools.count():
        store.set("k", KILL_VALUES[i % 2])
