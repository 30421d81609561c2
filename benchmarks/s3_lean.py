"""A lean S3-compatible server for the remote benchmark: objects in memory, one asyncio thread, keep-alive
connections, a fixed latency per request and the same counts as ``tests/s3_faults.py`` (requests by kind,
peak in flight). It exists because moto, which the tests use, costs about 2 ms of CPU per request in its
own process and closes every connection after its answer: on a machine of 2 cores that CPU is taken from
the clients being measured, and it set a floor no client could go below (256 PUTs by obstore alone took
641 ms at 20 ms per request, 8 rounds of 32 in flight being 160 ms). Real object stores do not run on the
client's cores.

Only what the benchmark's clients send is understood (path-style requests; signatures are not checked):
buckets (create, HEAD, location, ListObjects v1 and v2 with prefix, delimiter, pagination and URL encoding,
batch delete), objects (GET and HEAD with ``Range``, ``If-Match``, ``If-None-Match``; PUT, also
conditional and ``aws-chunked``; copy; DELETE) and multipart uploads. ETags are per version, not MD5.

    python benchmarks/s3_lean.py LATENCY_SECONDS   # prints its URL, stops when stdin ends

:class:`LeanS3Server` starts it in a child process with the interface of ``tests.servers.S3Server``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import secrets
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qs, quote, unquote
from xml.etree import ElementTree
from xml.sax.saxutils import escape

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.dirname(HERE))
from tests.s3_faults import CONTROL_PREFIX, KINDS, classify  # noqa: E402
from tests.servers import S3Server, _start_child  # noqa: E402

LOOPBACK = "127.0.0.1"
XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
Answer = tuple[int, dict[str, str], bytes]


@dataclass
class _Object:
    data: bytes
    etag: str
    modified: float


@dataclass
class _Upload:
    key: str
    parts: dict[int, bytes] = field(default_factory=dict)


class S3State:
    """The buckets, the counts and the latency; every method runs on the server's one event-loop thread."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.buckets: dict[str, dict[str, _Object]] = {}
        self.uploads: dict[str, _Upload] = {}
        self.versions = itertools.count(1)
        self.reset_counts()
        self.in_flight = 0

    # ---- counts and control ----------------------------------------------------------------------------

    def reset_counts(self) -> None:
        self.kinds = dict.fromkeys(KINDS, 0)
        self.peak = 0

    def counts(self) -> dict[str, int]:
        return {**self.kinds, "total": sum(self.kinds.values()), "peak_in_flight": self.peak}

    def set_latency(self, seconds: float) -> None:
        self.latency = float(seconds)

    def control(self, op: str, args: dict[str, Any]) -> Any:
        if op not in ("counts", "reset_counts", "set_latency"):
            raise KeyError(op)
        return getattr(self, op)(**args)

    # ---- requests --------------------------------------------------------------------------------------

    def answer(
        self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes
    ) -> Answer:
        bucket, _, key = unquote(path).lstrip("/").partition("/")
        objects = self.buckets.get(bucket)
        if not key:
            if method == "PUT":
                self.buckets.setdefault(bucket, {})
                return 200, {"Location": f"/{bucket}"}, b""
            if objects is None:
                return _error(404, "NoSuchBucket", bucket, method)
            if method == "HEAD":
                return 200, {"x-amz-bucket-region": "us-east-1"}, b""
            if method == "GET" and "location" in query:
                return 200, {}, _xml(f'<LocationConstraint xmlns="{XMLNS}"></LocationConstraint>')
            if method == "GET":
                return self._list(bucket, objects, query)
            if method == "POST" and "delete" in query:
                return self._delete_many(objects, body)
            if method == "DELETE":
                del self.buckets[bucket]
                return 204, {}, b""
            return _error(405, "MethodNotAllowed", bucket, method)
        if objects is None:
            return _error(404, "NoSuchBucket", bucket, method)
        if "uploadId" in query or "uploads" in query:
            return self._multipart(method, bucket, objects, key, query, body)
        obj = objects.get(key)
        if method in ("GET", "HEAD"):
            return self._get(method, key, obj, headers)
        if method == "PUT":
            if "x-amz-copy-source" in headers:
                src_bucket, _, src_key = unquote(headers["x-amz-copy-source"]).lstrip("/").partition("/")
                src = self.buckets.get(src_bucket, {}).get(src_key.split("?")[0])
                if src is None:
                    return _error(404, "NoSuchKey", src_key, method)
                new = self._put(objects, key, src.data)
                return (
                    200,
                    {},
                    _xml(
                        f"<CopyObjectResult><ETag>{escape(new.etag)}</ETag><LastModified>"
                        f"{_iso(new.modified)}</LastModified></CopyObjectResult>"
                    ),
                )
            refused = _precondition(obj, headers, writing=True)
            if refused is not None:
                return _error(refused, "PreconditionFailed" if refused == 412 else "NoSuchKey", key, method)
            return 200, {"ETag": self._put(objects, key, _decoded(body, headers)).etag}, b""
        if method == "DELETE":
            objects.pop(key, None)
            return 204, {}, b""
        return _error(405, "MethodNotAllowed", key, method)

    def _put(self, objects: dict[str, _Object], key: str, data: bytes) -> _Object:
        obj = objects[key] = _Object(data, f'"{next(self.versions):032x}"', time.time())
        return obj

    def _get(self, method: str, key: str, obj: _Object | None, headers: dict[str, str]) -> Answer:
        if obj is None:
            return _error(404, "NoSuchKey", key, method)
        refused = _precondition(obj, headers, writing=False)
        if refused is not None:
            return (
                (304, {"ETag": obj.etag}, b"")
                if refused == 304
                else _error(refused, "PreconditionFailed", key, method)
            )
        size, status = len(obj.data), 200
        start, end = 0, size
        meta = {
            "ETag": obj.etag,
            "Last-Modified": formatdate(obj.modified, usegmt=True),
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        spec = headers.get("range", "").strip()
        if spec.startswith("bytes="):
            first, _, last = spec[6:].partition("-")
            if first == "":
                start = max(0, size - int(last))
            else:
                start, end = int(first), (min(size, int(last) + 1) if last else size)
            if start >= size and size:
                status, meta, body = _error(416, "InvalidRange", key, method)
                return status, {**meta, "Content-Range": f"bytes */{size}"}, body
            status = 206
            meta["Content-Range"] = f"bytes {start}-{max(start, end) - 1}/{size}"
        data = obj.data if (start, end) == (0, size) else obj.data[start:end]
        return status, meta, data if method == "GET" else _HeadBody(len(data))

    def _list(self, bucket: str, objects: dict[str, _Object], query: dict[str, list[str]]) -> Answer:
        q = {k: v[0] for k, v in query.items()}
        prefix, delimiter = q.get("prefix", ""), q.get("delimiter", "")
        limit = max(1, min(1000, int(q.get("max-keys", "1000"))))
        v2 = q.get("list-type") == "2"
        after = q.get("continuation-token") or q.get("start-after", "") if v2 else q.get("marker", "")
        enc = (lambda s: quote(s, safe="/")) if q.get("encoding-type") == "url" else (lambda s: s)
        entries: list[tuple[str, _Object | None]] = []
        seen: set[str] = set()
        for key in sorted(k for k in objects if k.startswith(prefix)):
            if key <= after:
                continue
            cut = key.find(delimiter, len(prefix)) if delimiter else -1
            if cut >= 0:
                common = key[: cut + len(delimiter)]
                if common in seen or common <= after:
                    continue
                seen.add(common)
                entries.append((common, None))
            else:
                entries.append((key, objects[key]))
            if len(entries) > limit:
                break
        truncated = len(entries) > limit
        entries = entries[:limit]
        parts = [
            f'<ListBucketResult xmlns="{XMLNS}"><Name>{escape(bucket)}</Name>'
            f"<Prefix>{escape(enc(prefix))}</Prefix><MaxKeys>{limit}</MaxKeys>"
            f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"
        ]
        if delimiter:
            parts.append(f"<Delimiter>{escape(enc(delimiter))}</Delimiter>")
        if q.get("encoding-type") == "url":
            parts.append("<EncodingType>url</EncodingType>")
        if v2:
            parts.append(f"<KeyCount>{len(entries)}</KeyCount>")
        for name, obj in entries:
            if obj is None:
                parts.append(f"<CommonPrefixes><Prefix>{escape(enc(name))}</Prefix></CommonPrefixes>")
            else:
                parts.append(
                    f"<Contents><Key>{escape(enc(name))}</Key><LastModified>{_iso(obj.modified)}"
                    f"</LastModified><ETag>{escape(obj.etag)}</ETag><Size>{len(obj.data)}</Size>"
                    "<StorageClass>STANDARD</StorageClass></Contents>"
                )
        if truncated:
            last = escape(entries[-1][0])
            parts.append(
                f"<NextContinuationToken>{last}</NextContinuationToken>"
                if v2
                else f"<NextMarker>{enc(last)}</NextMarker>"
            )
        parts.append("</ListBucketResult>")
        return 200, {}, _xml("".join(parts))

    def _delete_many(self, objects: dict[str, _Object], body: bytes) -> Answer:
        keys = [el.text or "" for el in ElementTree.fromstring(body).iter() if el.tag.endswith("Key")]
        for key in keys:
            objects.pop(key, None)
        done = "".join(f"<Deleted><Key>{escape(k)}</Key></Deleted>" for k in keys)
        return 200, {}, _xml(f'<DeleteResult xmlns="{XMLNS}">{done}</DeleteResult>')

    def _multipart(
        self,
        method: str,
        bucket: str,
        objects: dict[str, _Object],
        key: str,
        query: dict[str, list[str]],
        body: bytes,
    ) -> Answer:
        if method == "POST" and "uploads" in query:
            upload = secrets.token_hex(8)
            self.uploads[upload] = _Upload(key)
            return (
                200,
                {},
                _xml(
                    f"<InitiateMultipartUploadResult><Bucket>{escape(bucket)}</Bucket><Key>"
                    f"{escape(key)}</Key><UploadId>{upload}</UploadId></InitiateMultipartUploadResult>"
                ),
            )
        upload_id = query.get("uploadId", [""])[0]
        up = self.uploads.get(upload_id)
        if up is None:
            return _error(404, "NoSuchUpload", key, method)
        if method == "PUT":
            up.parts[int(query["partNumber"][0])] = body
            return 200, {"ETag": f'"{next(self.versions):032x}"'}, b""
        if method == "DELETE":
            del self.uploads[upload_id]
            return 204, {}, b""
        wanted = [
            int(el.text or 0) for el in ElementTree.fromstring(body).iter() if el.tag.endswith("PartNumber")
        ]
        del self.uploads[upload_id]
        obj = self._put(objects, key, b"".join(up.parts[n] for n in wanted))
        return (
            200,
            {},
            _xml(
                f"<CompleteMultipartUploadResult><Bucket>{escape(bucket)}</Bucket><Key>{escape(key)}"
                f"</Key><ETag>{escape(obj.etag)}</ETag></CompleteMultipartUploadResult>"
            ),
        )


class _HeadBody(bytes):
    """A HEAD answer's empty body that still says the length a GET would send."""

    def __new__(cls, length: int) -> _HeadBody:
        self = super().__new__(cls)
        self.length = length  # type: ignore[attr-defined]
        return self


def _precondition(obj: _Object | None, headers: dict[str, str], writing: bool) -> int | None:
    """The status that refuses the request by its ``If-Match`` / ``If-None-Match``, or None."""
    match, none_match = headers.get("if-match"), headers.get("if-none-match")
    if match is not None:
        if obj is None:
            return 404
        if match.strip() != "*" and obj.etag not in (t.strip() for t in match.split(",")):
            return 412
    if none_match is not None and obj is not None:
        if none_match.strip() == "*" or obj.etag in (t.strip() for t in none_match.split(",")):
            return 412 if writing else 304
    return None


def _decoded(body: bytes, headers: dict[str, str]) -> bytes:
    """The object's bytes of a PUT body: ``aws-chunked`` (``size[;signature]\\r\\n data \\r\\n`` ... then
    a 0-size chunk and trailers) taken apart, anything else as it came."""
    if "aws-chunked" not in headers.get("content-encoding", "") and not headers.get(
        "x-amz-content-sha256", ""
    ).startswith("STREAMING-"):
        return body
    out, pos = [], 0
    while True:
        eol = body.index(b"\r\n", pos)
        size = int(body[pos:eol].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(body[eol + 2 : eol + 2 + size])
        pos = eol + 2 + size + 2


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t))


def _xml(doc: str) -> bytes:
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + doc.encode()


_MESSAGES = {  # S3's own (clients such as s3fs read them)
    "NoSuchKey": "The specified key does not exist.",
    "NoSuchBucket": "The specified bucket does not exist",
    "PreconditionFailed": "At least one of the pre-conditions you specified did not hold",
    "InvalidRange": "The requested range is not satisfiable",
}


def _error(status: int, code: str, resource: str, method: str) -> Answer:
    message = _MESSAGES.get(code, code)
    body = (
        b""
        if method == "HEAD"
        else _xml(
            f"<Error><Code>{code}</Code><Message>{message}</Message><Resource>"
            f"{escape(resource)}</Resource><RequestId>lean</RequestId></Error>"
        )
    )
    return status, {"Content-Type": "application/xml"}, body


_REASONS = {
    200: "OK",
    204: "No Content",
    206: "Partial Content",
    304: "Not Modified",
    404: "Not Found",
    405: "Method Not Allowed",
    412: "Precondition Failed",
    416: "Range Not Satisfiable",
    400: "Bad Request",
    500: "Internal Server Error",
}


async def _body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: dict[str, str]) -> bytes:
    if headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    n = int(headers.get("content-length", "0") or 0)
    return await reader.readexactly(n) if n else b""


async def _connection(state: S3State, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            method, target, _ = head[0].split(" ", 2)
            headers = {}
            for line in head[1:]:
                name, sep, value = line.partition(":")
                if sep:
                    headers[name.strip().lower()] = value.strip()
            body = await _body(reader, writer, headers)
            path, _, qs = target.partition("?")
            query = parse_qs(qs, keep_blank_values=True)
            if path.startswith(CONTROL_PREFIX):
                result = state.control(path[len(CONTROL_PREFIX) :], json.loads(body or b"{}"))
                status, meta, data = 200, {"Content-Type": "application/json"}, json.dumps(result).encode()
            else:
                kind = classify(
                    {
                        "REQUEST_METHOD": method,
                        "PATH_INFO": path,
                        "QUERY_STRING": qs,
                        "HTTP_RANGE": headers.get("range", ""),
                    }
                )
                state.kinds[kind] += 1
                state.in_flight += 1
                state.peak = max(state.peak, state.in_flight)
                try:
                    if state.latency:
                        await asyncio.sleep(state.latency)
                    try:
                        status, meta, data = state.answer(method, path, query, headers, body)
                    except Exception as exc:  # a request this server does not understand: say so
                        status, meta, data = 400, {"Content-Type": "text/plain"}, repr(exc).encode()
                    _send(writer, status, meta, data)
                    await writer.drain()
                finally:
                    state.in_flight -= 1
                if headers.get("connection", "").lower() == "close":
                    break
                continue
            _send(writer, status, meta, data)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


def _send(writer: asyncio.StreamWriter, status: int, meta: dict[str, str], data: bytes) -> None:
    length = data.length if isinstance(data, _HeadBody) else len(data)  # type: ignore[attr-defined]
    lines = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
        f"Date: {formatdate(usegmt=True)}",
        "x-amz-request-id: lean",
        "Server: rectizarr-bench-s3",
    ]
    lines += [f"{k}: {v}" for k, v in meta.items()]
    if status not in (204, 304):
        lines.append(f"Content-Length: {length}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    if data:
        writer.write(data)


async def _serve(latency: float, ready: Any) -> None:
    state = S3State(latency)
    server = await asyncio.start_server(
        lambda r, w: _connection(state, r, w), LOOPBACK, 0, backlog=1024, limit=1 << 20
    )
    ready(f"http://{LOOPBACK}:{server.sockets[0].getsockname()[1]}")
    stop = asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # ends with the parent
    await stop
    server.close()


def main() -> None:
    latency = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
    asyncio.run(_serve(latency, lambda url: print(url, flush=True)))


class LeanS3Server(S3Server):
    """:mod:`s3_lean` in a child process, controlled as ``tests.servers.S3Server(process=True)`` is
    (``endpoint_url``, ``counts()``, ``reset_counts()``, ``set_latency()``, ``filesystem()``,
    ``new_bucket()``, ``stop()``); it injects no faults."""

    def __init__(self, latency: float = 0.0) -> None:
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            os.environ.setdefault(name, "testing")
        os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
        self._injector = None
        self._child, self.endpoint_url = _start_child("lean", latency, "lean S3", os.path.abspath(__file__))
        self._fs = None

    def inject(self, fault: str, times: int = 1, kinds: Sequence[str] | None = None) -> None:
        raise ValueError("the lean S3 server injects no faults: tests.servers.S3Server does")

    def clear_faults(self) -> None:
        return  # it has none


if __name__ == "__main__":
    main()
