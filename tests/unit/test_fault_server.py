"""The S3 test server's middleware (tests/s3_faults.py): requests counted by kind with the peak in flight,
the injected latency, and every fault as a real client (boto3, s3fs) sees it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.s3_faults import KINDS, classify
from tests.servers import HttpServer, S3Server


@pytest.fixture(scope="module")
def server() -> Iterator[S3Server]:
    server = S3Server()  # its own server: faults and latency never leak into the session's
    yield server
    server.stop()


@pytest.fixture
def fresh(server: S3Server) -> Iterator[S3Server]:
    server.clear_faults()
    server.set_latency(0)
    server.reset_counts()
    yield server
    server.clear_faults()
    server.set_latency(0)


def boto(server: S3Server, retries: int = 0, read_timeout: float = 10) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"total_max_attempts": retries + 1, "mode": "standard"},
        read_timeout=read_timeout,
        connect_timeout=5,
        max_pool_connections=16,
    )
    return boto3.client(
        "s3",
        endpoint_url=server.endpoint_url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
        config=config,
    )


def bucket_with(server: S3Server, client: Any, **objects: bytes) -> str:
    name = server.new_bucket(server.filesystem())
    for key, value in objects.items():
        client.put_object(Bucket=name, Key=key, Body=value)
    server.reset_counts()
    return name


def kinds(counts: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if k in KINDS and v}


def test_requests_are_counted_by_kind(fresh: S3Server) -> None:
    client = boto(fresh)
    name = bucket_with(fresh, client, a=b"0123456789")
    client.put_object(Bucket=name, Key="d/b", Body=b"xyz")
    client.get_object(Bucket=name, Key="a")["Body"].read()
    assert client.get_object(Bucket=name, Key="a", Range="bytes=2-4")["Body"].read() == b"234"
    client.get_object(Bucket=name, Key="a", Range="bytes=-3")["Body"].read()
    client.head_object(Bucket=name, Key="a")
    client.list_objects_v2(Bucket=name, Prefix="d/", Delimiter="/")
    client.list_objects(Bucket=name)
    client.delete_object(Bucket=name, Key="d/b")
    client.delete_objects(Bucket=name, Delete={"Objects": [{"Key": "a"}]})
    client.get_bucket_location(Bucket=name)
    counts = fresh.counts()
    assert kinds(counts) == {
        "put": 1,
        "get": 1,
        "get_range": 2,
        "head": 1,
        "list": 2,
        "delete": 2,
        "other": 1,
    }
    assert counts["total"] == 10
    assert counts["peak_in_flight"] == 1  # one request at a time
    fresh.reset_counts()
    assert fresh.counts()["total"] == fresh.counts()["peak_in_flight"] == 0


@pytest.mark.parametrize(
    ("method", "path", "query", "headers", "kind"),
    [
        ("GET", "/b/k", "", {}, "get"),
        ("GET", "/b/dir/k", "", {"HTTP_RANGE": "bytes=0-1"}, "get_range"),
        ("GET", "/b", "list-type=2&prefix=x&delimiter=%2F", {}, "list"),
        ("GET", "/b/", "", {}, "list"),
        ("GET", "/b", "versioning", {}, "other"),
        ("HEAD", "/b", "", {}, "head"),
        ("PUT", "/b/k", "partNumber=1&uploadId=u", {}, "put"),
        ("PUT", "/b", "", {}, "other"),
        ("DELETE", "/b/k", "", {}, "delete"),
        ("POST", "/b", "delete", {}, "delete"),
        ("POST", "/b/k", "uploads", {}, "other"),
    ],
)
def test_classify(method: str, path: str, query: str, headers: dict[str, str], kind: str) -> None:
    assert classify({"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query, **headers}) == kind


def test_latency_and_peak_in_flight(fresh: S3Server) -> None:
    client = boto(fresh)
    name = bucket_with(fresh, client, **{f"k{i}": bytes([i]) * 100 for i in range(8)})
    fresh.set_latency(0.2)
    t0 = time.perf_counter()
    client.head_object(Bucket=name, Key="k0")
    assert time.perf_counter() - t0 >= 0.2  # applied (a lower bound only: the machine may be slow)
    fresh.reset_counts()
    barrier = threading.Barrier(8)

    def read(i: int) -> None:
        barrier.wait()
        client.get_object(Bucket=name, Key=f"k{i}")["Body"].read()

    threads = [threading.Thread(target=read, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counts = fresh.counts()
    assert counts["get"] == 8
    assert 2 <= counts["peak_in_flight"] <= 8  # eight requests sleeping 0.2 s each overlap


@pytest.mark.parametrize(("fault", "code"), [("500", "InternalError"), ("503", "SlowDown")])
def test_error_answers(fresh: S3Server, fault: str, code: str) -> None:
    from botocore.exceptions import ClientError

    client = boto(fresh)
    name = bucket_with(fresh, client, a=b"abc")
    fresh.inject(fault, times=2)
    for _ in range(2):
        with pytest.raises(ClientError) as info:
            client.get_object(Bucket=name, Key="a")
        assert info.value.response["Error"]["Code"] == code
        assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == int(fault)
    assert client.get_object(Bucket=name, Key="a")["Body"].read() == b"abc"  # used up
    counts = fresh.counts()
    assert counts["get"] == 3 and counts[f"fault_{fault}"] == 2


def test_throttling_is_retried_by_a_client_with_retries(fresh: S3Server) -> None:
    client = boto(fresh, retries=3)
    name = bucket_with(fresh, client, a=b"abc")
    fresh.inject("503", times=2, kinds=["get"])
    assert client.get_object(Bucket=name, Key="a")["Body"].read() == b"abc"
    counts = fresh.counts()
    assert counts["get"] == 3 and counts["fault_503"] == 2
    fs = fresh.filesystem()  # s3fs (aiobotocore) retries a SlowDown too
    fs.invalidate_cache()
    fresh.reset_counts()
    fresh.inject("503", times=1, kinds=["get", "get_range"])
    assert fs.cat_file(f"{name}/a") == b"abc"
    assert fresh.counts()["fault_503"] == 1


def test_faults_apply_only_to_the_kinds_asked_for(fresh: S3Server) -> None:
    client = boto(fresh)
    name = bucket_with(fresh, client, a=b"abc")
    fresh.inject("500", times=1, kinds=["put"])
    client.head_object(Bucket=name, Key="a")
    assert client.get_object(Bucket=name, Key="a")["Body"].read() == b"abc"
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError):
        client.put_object(Bucket=name, Key="b", Body=b"x")
    client.put_object(Bucket=name, Key="b", Body=b"x")
    assert fresh.counts()["fault_500"] == 1
    with pytest.raises(ValueError, match="unknown fault"):
        fresh.inject("404")
    with pytest.raises(ValueError, match="unknown request kinds"):
        fresh.inject("500", kinds=["post"])


@pytest.mark.parametrize("fault", ["lost", "lost_reset", "lost_timeout"])
def test_a_lost_answer_follows_a_write_that_landed(fresh: S3Server, fault: str) -> None:
    """``lost``: a 500; ``lost_reset``: the connection reset with no answer; ``lost_timeout``: no answer
    until the client gives up. Each after the server stored the value; only the key asked for is faulted."""
    from botocore.exceptions import ClientError, ConnectionClosedError, ReadTimeoutError

    client = boto(fresh, read_timeout=0.5)
    name = bucket_with(fresh, client, a=b"old", b=b"old")
    fresh.inject(fault, times=1, kinds=["put"], key="b")
    client.put_object(Bucket=name, Key="a", Body=b"new")  # (another key: not faulted)
    with pytest.raises((ClientError, ConnectionClosedError, ReadTimeoutError)) as info:
        client.put_object(Bucket=name, Key="b", Body=b"new")
    assert isinstance(
        info.value,
        {"lost": ClientError, "lost_reset": ConnectionClosedError, "lost_timeout": ReadTimeoutError}[fault],
    )
    assert client.get_object(Bucket=name, Key="b")["Body"].read() == b"new"  # it landed
    counts = fresh.counts()
    assert counts[f"fault_{fault}"] == 1 and counts["put"] == 2


def test_truncated_body(fresh: S3Server) -> None:
    from botocore.exceptions import IncompleteReadError, ResponseStreamingError

    client = boto(fresh)
    value = bytes(range(256)) * 64
    name = bucket_with(fresh, client, a=value)
    fresh.inject("truncate", times=1)
    answer = client.get_object(Bucket=name, Key="a")
    assert answer["ContentLength"] == len(value)  # the header promises the whole object
    with pytest.raises((IncompleteReadError, ResponseStreamingError)):
        answer["Body"].read()
    assert client.get_object(Bucket=name, Key="a")["Body"].read() == value
    assert fresh.counts()["fault_truncate"] == 1


def test_hang_until_the_client_gives_up(fresh: S3Server) -> None:
    from botocore.exceptions import ReadTimeoutError

    client = boto(fresh, read_timeout=0.5)
    name = bucket_with(fresh, client, a=b"abc")
    fresh.inject("hang", times=1)
    with pytest.raises(ReadTimeoutError):
        client.get_object(Bucket=name, Key="a")
    assert client.get_object(Bucket=name, Key="a")["Body"].read() == b"abc"
    counts = fresh.counts()
    assert counts["fault_hang"] == 1 and counts["get"] == 2


def test_a_server_in_a_child_process_is_controlled_over_http() -> None:
    server = S3Server(latency=0.05, process=True)
    try:
        client = boto(server)
        name = bucket_with(server, client, a=b"abc")
        t0 = time.perf_counter()
        assert client.get_object(Bucket=name, Key="a")["Body"].read() == b"abc"
        assert time.perf_counter() - t0 >= 0.05
        server.inject("500", times=1)
        from botocore.exceptions import BotoCoreError, ClientError

        with pytest.raises(ClientError):
            client.head_object(Bucket=name, Key="a")
        counts = server.counts()
        assert kinds(counts) == {"get": 1, "head": 1} and counts["fault_500"] == 1
        server.inject("hang", times=1)  # a request left hanging does not keep the child alive
        outcome: list[BaseException] = []

        def hang() -> None:
            try:
                boto(server).head_object(Bucket=name, Key="a")
            except (ClientError, BotoCoreError) as e:
                outcome.append(e)

        hung = threading.Thread(target=hang, daemon=True)
        hung.start()
        while server.counts()["fault_hang"] == 0:
            time.sleep(0.01)
    finally:
        server.stop()
    hung.join(timeout=30)
    assert not hung.is_alive() and len(outcome) == 1  # answered with an error (or cut off) at the stop


def test_the_http_server_in_a_child_process_serves_ranges_with_its_latency(tmp_path: Any) -> None:
    import urllib.error
    import urllib.request

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "k").write_bytes(b"0123456789")
    server = HttpServer(latency=0.05, process=True)
    try:
        url = server.serve(tmp_path / "d")
        other = server.serve(tmp_path)  # a second directory, registered while serving
        t0 = time.perf_counter()
        with urllib.request.urlopen(urllib.request.Request(f"{url}/k", headers={"Range": "bytes=2-4"})) as r:
            assert (r.status, r.read()) == (206, b"234")
        assert time.perf_counter() - t0 >= 0.05
        with urllib.request.urlopen(f"{other}/d/k") as r:
            assert r.read() == b"0123456789"
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(f"{url}/missing")
        assert info.value.code == 404
    finally:
        server.stop()
    with pytest.raises(OSError):  # stopped: nothing listens any more
        urllib.request.urlopen(f"{url}/k", timeout=5)
