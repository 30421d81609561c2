"""WSGI middleware for the S3 test server: a fixed latency per request, request counts by type with the
peak number in flight, and injected faults (500 InternalError, 503 SlowDown, truncated bodies, a hang).

Requests are path-style (``/bucket/key``, as every client sends them to ``http://127.0.0.1:port``). They
are counted as one of :data:`KINDS`: ``get`` (a whole object), ``get_range`` (a GET with a ``Range``
header), ``head``, ``put`` (an object, a copy or a multipart part), ``delete`` (an object, or a batch
``POST ?delete``), ``list`` (a bucket listing) and ``other`` (bucket creation, multipart start/finish ...).

A fault rule applies to the next ``times`` requests of the given kinds (and, if it names one, to the given
key of a bucket only), in arrival order:

* ``"500"``, ``"503"`` and ``"412"``: the request is not performed; the answer is S3's ``InternalError``,
  ``SlowDown`` or ``PreconditionFailed`` error document;
* ``"lost"``: the request is performed, and then answered with the ``InternalError`` document (the
  answer to a write that landed was lost on the way: a client retries what is already done);
* ``"reset"``: the request is not performed; the connection is reset without an answer;
* ``"lost_reset"``: the request is performed, and then the connection is reset without an answer (a write
  that landed, whose answer a proxy or a broken connection lost);
* ``"lost_timeout"``: the request is performed, and then no answer comes until the server stops (or
  ``HANG_LIMIT`` seconds pass): the client's read timeout ends it, after the write landed;
* ``"truncate"``: the request is performed; the answer says the full ``Content-Length`` but half the body
  is sent before the connection closes (werkzeug closes every connection after its answer);
* ``"hang"``: no answer at all until the server stops (or ``HANG_LIMIT`` seconds pass).

``/_faults/<op>`` (a POST with a JSON object of arguments, never counted nor delayed) calls the
methods of :class:`FaultInjector` from another process: ``counts``, ``reset_counts``, ``set_latency``,
``inject`` and ``clear_faults``.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

KINDS = ("get", "get_range", "head", "put", "delete", "list", "other")
FAULTS = ("500", "503", "412", "lost", "reset", "lost_reset", "lost_timeout", "truncate", "hang")
CONTROL_PREFIX = "/_faults/"
HANG_LIMIT = 600.0
_LIST_PARAMS = {
    "list-type",
    "prefix",
    "delimiter",
    "max-keys",
    "continuation-token",
    "start-after",
    "encoding-type",
    "marker",
    "fetch-owner",
}
_ERRORS = {
    "500": (
        "500 Internal Server Error",
        "InternalError",
        "We encountered an internal error. Please try again.",
    ),
    "503": ("503 Slow Down", "SlowDown", "Please reduce your request rate."),
    "412": (
        "412 Precondition Failed",
        "PreconditionFailed",
        "At least one of the pre-conditions you specified did not hold",
    ),
}

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def classify(environ: dict[str, Any]) -> str:
    """The kind of an S3 request (one of :data:`KINDS`)."""
    method = environ["REQUEST_METHOD"]
    has_key = "/" in environ.get("PATH_INFO", "").strip("/")
    query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    if method == "HEAD":
        return "head"
    if method == "GET":
        if has_key:
            return "get_range" if environ.get("HTTP_RANGE") else "get"
        return "list" if set(query) <= _LIST_PARAMS else "other"
    if method == "PUT" and has_key:
        return "put"
    if method == "DELETE" and has_key:
        return "delete"
    if method == "POST" and not has_key and "delete" in query:
        return "delete"
    return "other"


def key_of(environ: dict[str, Any]) -> str:
    """The key of a path-style request (``/bucket/key``); empty for a bucket's own requests."""
    return environ.get("PATH_INFO", "").lstrip("/").partition("/")[2]


@dataclass
class _Rule:
    fault: str
    remaining: int
    kinds: frozenset[str]
    key: str | None = None


class _Closing:
    """A WSGI body that calls ``done`` once: just before its last bytes are sent, or when the server closes
    it (a request finished sooner from the server's side would count in flight for a client that already sent
    the next)."""

    def __init__(self, body: Iterable[bytes], done: Callable[[], None]) -> None:
        self._body = body
        self._done: Callable[[], None] | None = done

    def __iter__(self) -> Iterator[bytes]:
        chunks = iter(self._body)
        chunk = next(chunks, None)
        while chunk is not None:
            following = next(chunks, None)
            if following is None:  # no client has the answer before its last bytes: done just before them
                self._finish()
            yield chunk
            chunk = following
        self._finish()

    def close(self) -> None:
        try:
            getattr(self._body, "close", lambda: None)()
        finally:
            self._finish()

    def _finish(self) -> None:
        done, self._done = self._done, None
        if done is not None:
            done()


class FaultInjector:
    """Wraps the WSGI ``app``: sleeps ``latency`` seconds before each request, counts requests, injects
    faults. Thread-safe (the server answers every request on its own thread)."""

    def __init__(self, app: WSGIApp, latency: float = 0.0) -> None:
        self._app = app
        self._lock = threading.Lock()
        self._writes = threading.Lock()  # one object-changing request at a time (see _app_call)
        self._stopping = threading.Event()
        self._latency = float(latency)
        self._rules: list[_Rule] = []
        self._counts = dict.fromkeys(KINDS, 0)
        self._faulted = dict.fromkeys(FAULTS, 0)
        self._in_flight = 0
        self._peak = 0

    # ---- control --------------------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Requests by kind since the last reset, their ``total``, ``peak_in_flight``, and the faults
        injected (``fault_500``, ``fault_503``, ``fault_412``, ``fault_lost``, ``fault_reset``,
        ``fault_lost_reset``, ``fault_lost_timeout``, ``fault_truncate``, ``fault_hang``)."""
        with self._lock:
            out = dict(self._counts)
            out["total"] = sum(self._counts.values())
            out["peak_in_flight"] = self._peak
            out.update({f"fault_{k}": v for k, v in self._faulted.items()})
            return out

    def reset_counts(self) -> None:
        with self._lock:
            self._counts = dict.fromkeys(KINDS, 0)
            self._faulted = dict.fromkeys(FAULTS, 0)
            self._peak = 0  # raised again by the next arrival (a request still finishing counts then)

    def set_latency(self, seconds: float) -> None:
        if not seconds >= 0:
            raise ValueError(f"latency must be >= 0 seconds, got {seconds!r}")
        self._latency = float(seconds)

    def inject(
        self, fault: str, times: int = 1, kinds: Iterable[str] | None = None, key: str | None = None
    ) -> None:
        """Answer the next ``times`` requests of ``kinds`` (default: GETs for ``truncate``, else all; only
        those to ``key``, if given) with ``fault``."""
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}: expected one of {FAULTS}")
        chosen = (
            frozenset(kinds)
            if kinds is not None
            else frozenset(("get", "get_range") if fault == "truncate" else KINDS)
        )
        if not chosen <= set(KINDS):
            raise ValueError(f"unknown request kinds {sorted(chosen - set(KINDS))}: expected some of {KINDS}")
        with self._lock:
            self._rules.append(_Rule(fault, int(times), chosen, key))

    def clear_faults(self) -> None:
        with self._lock:
            self._rules.clear()

    def release(self) -> None:
        """Let every hanging request end (the server is stopping)."""
        self._stopping.set()

    # ---- WSGI -----------------------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "").startswith(CONTROL_PREFIX):
            return self._control(environ, start_response)
        kind = classify(environ)
        with self._lock:
            self._counts[kind] += 1
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)
            rule = self._take(kind, key_of(environ))
        try:
            if self._latency:
                time.sleep(self._latency)
            body = self._answer(rule, environ, start_response)
        except BaseException:
            self._leave()
            raise
        return self._closing(body)

    def _app_call(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """The request answered by moto; one that changes an object, one at a time. moto checks a PUT's
        ``If-Match`` / ``If-None-Match`` and then writes, with other requests' threads in between: two
        PUTs with one ETag both passed their condition under load (a lost append, 199 rows of 200, in a
        full test run), where S3 applies each conditional write atomically."""
        if environ["REQUEST_METHOD"] not in ("PUT", "POST", "DELETE"):
            return self._app(environ, start_response)
        with self._writes:
            return self._app(environ, start_response)

    def _take(self, kind: str, key: str) -> _Rule | None:
        for rule in self._rules:
            if rule.remaining > 0 and kind in rule.kinds and rule.key in (None, key):
                rule.remaining -= 1
                self._faulted[rule.fault] += 1
                return rule
        return None

    def _answer(
        self, rule: _Rule | None, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if rule is None:
            return self._app_call(environ, start_response)
        if rule.fault in ("lost", "lost_reset", "lost_timeout"):  # done, then the answer is lost
            self._performed(environ)
        if rule.fault in ("hang", "lost_timeout"):
            self._stopping.wait(HANG_LIMIT)
            start_response("503 Slow Down", [("Content-Length", "0")])
            return []
        if rule.fault == "truncate":
            return self._truncated(environ, start_response)
        if rule.fault in ("reset", "lost_reset"):
            conn = environ.get("werkzeug.socket")
            if conn is not None:  # SO_LINGER 0: the close sends RST
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.shutdown(socket.SHUT_RDWR)
            raise ConnectionResetError("injected")
        status, code, message = _ERRORS["500" if rule.fault == "lost" else rule.fault]
        doc = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
            f"<RequestId>injected</RequestId></Error>"
        ).encode()
        body = b"" if environ["REQUEST_METHOD"] == "HEAD" else doc
        start_response(status, [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
        return [body]

    def _performed(self, environ: dict[str, Any]) -> None:
        """The request answered by moto, its answer dropped."""
        inner = self._app_call(environ, lambda *args: lambda data: None)
        try:
            b"".join(inner)
        finally:
            getattr(inner, "close", lambda: None)()

    def _truncated(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        answer: list[Any] = []

        def keep(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Callable[[bytes], None]:
            answer[:] = [status, headers]
            return lambda data: None

        inner = self._app(environ, keep)
        try:
            body = b"".join(inner)
        finally:
            getattr(inner, "close", lambda: None)()
        status, headers = answer
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        start_response(status, [*headers, ("Content-Length", str(len(body)))])
        return [body[: len(body) // 2]]

    def _closing(self, body: Iterable[bytes]) -> Iterable[bytes]:
        return _Closing(body, self._leave)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _control(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        op = environ["PATH_INFO"][len(CONTROL_PREFIX) :]
        size = int(environ.get("CONTENT_LENGTH") or 0)
        args = json.loads(environ["wsgi.input"].read(size) or b"{}") if size else {}
        if op not in ("counts", "reset_counts", "set_latency", "inject", "clear_faults"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [f"unknown control operation {op!r}".encode()]
        try:
            result = getattr(self, op)(**args)
        except (TypeError, ValueError) as e:
            start_response("400 Bad Request", [("Content-Type", "text/plain")])
            return [str(e).encode()]
        body = json.dumps(result).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]
