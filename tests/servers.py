"""Test helpers: local servers on the loopback interface (S3 via moto's app behind a latency- and
fault-injecting middleware, HTTP with Range support) and a child-process writer for crash tests."""

from __future__ import annotations

import io
import itertools
import json
import logging
import os
import re
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.s3_faults import CONTROL_PREFIX, FaultInjector

LOOPBACK = "127.0.0.1"
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


class S3Server:
    """A moto S3 server on 127.0.0.1 (a free port) behind :class:`~tests.s3_faults.FaultInjector`, and
    s3fs filesystems talking to it.

    ``latency`` seconds are added to every request (``set_latency`` changes it); ``counts()`` gives the
    requests by kind and the peak in flight since ``reset_counts()``; ``inject(fault, times, kinds)``
    answers the next requests with a 500, a 503 SlowDown, a truncated body or never. With
    ``process=True`` the server runs in a child process (its own interpreter: a benchmark's clients do
    not share a GIL with it), controlled over HTTP; it exits when this object stops or its parent dies.
    """

    def __init__(self, latency: float = 0.0, *, process: bool = False) -> None:
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            os.environ.setdefault(name, "testing")
        os.environ["AWS_EC2_METADATA_DISABLED"] = "true"  # never probe instance metadata
        self._injector: Any = None
        self._child: subprocess.Popen[str] | None = None
        if process:
            self._start_child(latency)
        else:
            self._start_thread(latency)
        self._fs: Any = None

    def _start_thread(self, latency: float) -> None:
        self._injector, self._server = _serve_s3(latency)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.endpoint_url = f"http://{LOOPBACK}:{self._server.server_port}"

    def _start_child(self, latency: float) -> None:
        self._child, self.endpoint_url = _start_child("s3", latency, "S3")

    def _control(self, op: str, **args: Any) -> Any:
        if self._injector is not None:
            return getattr(self._injector, op)(**args)
        request = urllib.request.Request(
            f"{self.endpoint_url}{CONTROL_PREFIX}{op}", data=json.dumps(args).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())

    def counts(self) -> dict[str, int]:
        """Requests by kind (``get``, ``get_range``, ``head``, ``put``, ``delete``, ``list``, ``other``),
        ``total``, ``peak_in_flight`` and ``fault_*`` (faults injected) since the last reset."""
        result: dict[str, int] = self._control("counts")
        return result

    def reset_counts(self) -> None:
        self._control("reset_counts")

    def set_latency(self, seconds: float) -> None:
        self._control("set_latency", seconds=seconds)

    def inject(
        self, fault: str, times: int = 1, kinds: Sequence[str] | None = None, key: str | None = None
    ) -> None:
        """Answer the next ``times`` requests (of ``kinds``; to ``key`` of a bucket, if given) with ``fault``:
        ``"500"``, ``"503"``, ``"lost"``, ``"lost_reset"``, ``"truncate"``, ``"hang"`` ... (see
        :mod:`tests.s3_faults`)."""
        self._control(
            "inject", fault=fault, times=times, kinds=None if kinds is None else list(kinds), key=key
        )

    def clear_faults(self) -> None:
        self._control("clear_faults")

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
        return {
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": "us-east-1"},
        }

    def new_bucket(self, fs: Any) -> str:
        """Create a uniquely named bucket and return its name."""
        name = f"test-{secrets.token_hex(6)}"
        fs.call_s3("create_bucket", Bucket=name)
        fs.invalidate_cache()
        return name

    def stop(self) -> None:
        if self._child is not None:
            _stop_child(self._child)
            return
        self._injector.release()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def _start_child(
    kind: str, latency: float, what: str, script: str | None = None
) -> tuple[subprocess.Popen[str], str]:
    """``python -m tests.servers KIND LATENCY`` (or ``python SCRIPT LATENCY``) in a child process, and the
    URL it prints first."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    command = [script] if script is not None else ["-m", "tests.servers", kind]
    child = subprocess.Popen(
        [sys.executable, *command, str(latency)],
        cwd=root,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    if not line.startswith("http://"):
        child.kill()
        raise RuntimeError(f"the {what} server process did not start (it said {line!r})")
    return child, line


def _stop_child(child: subprocess.Popen[str]) -> None:
    """Close the child's stdin (its signal to stop) and wait for it; kill it if it does not stop."""
    assert child.stdin is not None
    child.stdin.close()
    try:
        child.wait(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _serve_s3(latency: float) -> tuple[FaultInjector, Any]:
    """A threaded werkzeug server on a free loopback port: moto's S3 app behind a FaultInjector."""
    from moto.server import MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    # moto's S3 app itself: its DomainDispatcherApplication would pick the service of every request anew,
    # under one lock, and cost more than the S3 request
    injector = FaultInjector(create_backend_app("s3"), latency)
    server = make_server(LOOPBACK, 0, injector, threaded=True, request_handler=MotoRequestHandler)
    return injector, server


def _s3_child(latency: float) -> None:
    """Child-process body of ``S3Server(process=True)``: serve, print the endpoint, stop at stdin's end."""
    injector, server = _serve_s3(latency)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"http://{LOOPBACK}:{server.server_port}", flush=True)
    sys.stdin.read()  # returns when the parent closes the pipe or dies
    injector.release()
    server.shutdown()


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

    latency = 0.0  # seconds waited before every answer (set on a subclass per server)

    def send_head(self) -> io.BytesIO | None:  # type: ignore[override]
        if self.latency:
            time.sleep(self.latency)
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


class _BacklogServer(ThreadingHTTPServer):
    request_queue_size = 256  # clients open many connections at once (socketserver's default is 5)


class HttpServer:
    """A threading HTTP server on 127.0.0.1 serving registered directories read-only; ``latency`` seconds
    are waited before every answer (for benchmarks). With ``process=True`` it runs in a child process, as
    ``S3Server(process=True)`` does: a benchmark's Python clients then do not share a GIL with it (which
    taxes them and not tensorstore); directories are registered over the child's stdin."""

    def __init__(self, latency: float = 0.0, *, process: bool = False) -> None:
        self._roots: dict[str, str] = {}
        self._child: subprocess.Popen[str] | None = None
        if process:
            self._child, self.base_url = _start_child("http", latency, "HTTP")
            return
        self._server = _http_server(self._roots, latency)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.base_url = f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def serve(self, directory: str | os.PathLike[str]) -> str:
        """Serve ``directory`` and return its URL."""
        token = secrets.token_hex(6)
        if self._child is None:
            self._roots[token] = os.fspath(directory)
            return f"{self.base_url}/{token}"
        assert self._child.stdin is not None and self._child.stdout is not None
        self._child.stdin.write(f"{token} {os.fspath(directory)}\n")
        self._child.stdin.flush()
        if self._child.stdout.readline().strip() != "ok":
            raise RuntimeError("the HTTP server process did not take the directory")
        return f"{self.base_url}/{token}"

    def stop(self) -> None:
        if self._child is not None:
            _stop_child(self._child)
            return
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def _http_server(roots: dict[str, str], latency: float) -> ThreadingHTTPServer:
    handler = type("Handler", (_RangeHandler,), {"roots": roots, "latency": latency})
    server = _BacklogServer((LOOPBACK, 0), handler)
    server.daemon_threads = True
    return server


def _http_child(latency: float) -> None:
    """Child-process body of ``HttpServer(process=True)``: serve, print the base URL, then take one
    ``TOKEN DIRECTORY`` line per directory (answering ``ok``) until stdin ends."""
    roots: dict[str, str] = {}
    server = _http_server(roots, latency)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"http://{LOOPBACK}:{server.server_address[1]}", flush=True)
    for line in sys.stdin:  # ends when the parent closes the pipe or dies
        token, _, directory = line.rstrip("\n").partition(" ")
        roots[token] = directory
        print("ok", flush=True)
    server.shutdown()


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
    encoding: str  # the Content-Encoding sent
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
        self.send_header("Content-Encoding", self.encoding)  # whatever the client accepts
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        if send_body:
            self.wfile.write(self.body)


class _Loopback:
    """A threaded HTTP server of ``handler`` on 127.0.0.1, serving from a thread of its own until stopped."""

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = ThreadingHTTPServer((LOOPBACK, 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.base_url = f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


class GzipServer(_Loopback):
    """An HTTP server on 127.0.0.1 answering every GET with ``body`` sent as ``Content-Encoding: gzip`` (or
    ``encoding``)."""

    def __init__(self, body: bytes, encoding: str = "gzip") -> None:
        self.seen: list[str] = []
        self._serve(type("Handler", (_GzipHandler,), {"body": body, "encoding": encoding, "seen": self.seen}))


class _BodyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # (chunked answers)
    bodies: dict[str, bytes | int]  # set on a subclass per server
    encoding: str | None
    chunked: bool

    def log_message(self, format: str, *args: Any) -> None:
        return

    def handle(self) -> None:
        try:
            super().handle()
        except OSError:  # a client that refused an answer closes its connection
            pass

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def _answer(self, send_body: bool) -> None:
        body = self.bodies.get(self.path.split("?", 1)[0].lstrip("/"))
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        size = body if isinstance(body, int) else len(body)
        self.send_response(200)
        if self.encoding:
            self.send_header("Content-Encoding", self.encoding)
        self.send_header(
            *(("Transfer-Encoding", "chunked") if self.chunked else ("Content-Length", str(size)))
        )
        self.end_headers()
        if not send_body:
            return
        pieces = (
            [body]
            if isinstance(body, bytes)
            else (bytes(min(1 << 20, size - i)) for i in range(0, size, 1 << 20))
        )
        try:
            for piece in pieces:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if self.chunked else piece)
            if self.chunked:
                self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client stopped reading (it refused the answer)
            self.close_connection = True


class BodyServer(_Loopback):
    """An HTTP server on 127.0.0.1 answering GET and HEAD of each path of ``bodies`` (``"x.zarr/zarr.json"``)
    with its value: bytes, or an int ``n`` for ``n`` zero bytes sent 1 MiB at a time (never held whole);
    other paths are 404. ``encoding`` is sent as ``Content-Encoding``; ``chunked`` sends the body with
    chunked transfer encoding and no ``Content-Length``. Ranges are ignored (the whole body, 200)."""

    def __init__(
        self, bodies: dict[str, bytes | int], *, encoding: str | None = None, chunked: bool = False
    ) -> None:
        self._serve(
            type("Handler", (_BodyHandler,), {"bodies": bodies, "encoding": encoding, "chunked": chunked})
        )


KILL_VALUES = (bytes([1]) * (4 << 20), bytes([2]) * (3 << 20))


def write_forever(root: str, ready: Any) -> None:
    """Child-process body: set the ``ready`` event, then rewrite key ``k`` of a LocalStore with
    alternating ``KILL_VALUES`` until killed."""
    from rectizarr.stores import LocalStore

    store = LocalStore(root)
    ready.set()
    for i in itertools.count():
        store.set("k", KILL_VALUES[i % 2])


if __name__ == "__main__":  # python -m tests.servers s3|http LATENCY  (the servers' process=True runs this)
    if sys.argv[1:2] not in (["s3"], ["http"]) or len(sys.argv) != 3:
        raise SystemExit("usage: python -m tests.servers s3|http LATENCY_SECONDS")
    (_s3_child if sys.argv[1] == "s3" else _http_child)(float(sys.argv[2]))
