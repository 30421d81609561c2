"""An S3 server that fails: 500s and 503 SlowDown are retried a bounded number of times, then a StoreError
names the URL; a truncated body is never taken for data; a server that never answers times out with a
StoreError naming the URL; a conditional write answered 412 is a conflict, re-applied, never lost data.
Both backends (obstore and fsspec/s3fs), against moto behind the fault-injecting middleware."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.errors import RectizarrError, StoreError
from rectizarr.stores import Store, open_store
from tests.reliability._helpers import bounded
from tests.servers import S3Server

BACKENDS = ["obstore", "fsspec"]


@pytest.fixture(scope="module")
def faulty() -> Iterator[S3Server]:
    server = S3Server()  # its own server: faults must not reach the session's
    yield server
    server.stop()


def store_on(server: S3Server, backend: str, bucket: str, **extra: Any) -> Store:
    options: dict[str, Any] = {**server.storage_options(), **extra}
    if backend == "fsspec":
        options["config_kwargs"] = {"retries": {"max_attempts": 2, "mode": "standard"},
                                    "read_timeout": extra.pop("timeout", 30), "connect_timeout": 5}
        options.pop("timeout", None)
        options["skip_instance_cache"] = True
    return open_store(f"s3://{bucket}", backend=backend, storage_options=options)


@pytest.fixture
def data(faulty: S3Server) -> tuple[str, np.ndarray]:
    faulty.clear_faults()
    bucket = faulty.new_bucket(faulty.filesystem())
    values = np.arange(64 * 64, dtype="i4").reshape(64, 64)
    a = rectizarr.create_array(store_on(faulty, "obstore", bucket), name="x", shape=values.shape, dtype="i4",
                               chunks=(16, 64))
    a[...] = values
    return bucket, values


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fault", ["500", "503"])
def test_a_few_server_errors_are_retried(faulty: S3Server, data: tuple[str, np.ndarray], backend: str,
                                         fault: str) -> None:
    bucket, values = data
    a = rectizarr.open_array(store_on(faulty, backend, bucket), path="x", mode="r")
    faulty.reset_counts()
    faulty.inject(fault, times=2, kinds=["get", "get_range"])
    assert np.array_equal(bounded(lambda: a[...], 60), values)
    assert faulty.counts()[f"fault_{fault}"] == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_errors_that_persist_end_in_a_store_error(faulty: S3Server, data: tuple[str, np.ndarray],
                                                  backend: str) -> None:
    bucket, values = data
    store = store_on(faulty, backend, bucket)
    a = rectizarr.open_array(store, path="x")
    faulty.inject("503", times=1000, kinds=["get", "get_range", "put"])
    with pytest.raises(StoreError) as info:
        bounded(lambda: a[0:16], 120)
    assert bucket in str(info.value)
    with pytest.raises(StoreError):
        bounded(lambda: a.__setitem__((slice(0, 16),), 5), 120)
    faulty.clear_faults()
    assert np.array_equal(a[...], values)  # nothing lost, nothing half-written


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_truncated_body_is_never_data(faulty: S3Server, data: tuple[str, np.ndarray], backend: str) -> None:
    bucket, values = data
    a = rectizarr.open_array(store_on(faulty, backend, bucket), path="x", mode="r")
    faulty.inject("truncate", times=2)
    try:
        got = bounded(lambda: a[...], 60)
    except RectizarrError:
        return  # refused: fine; what must never happen is wrong values
    assert np.array_equal(got, values)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_server_that_never_answers_times_out(faulty: S3Server, data: tuple[str, np.ndarray],
                                               backend: str) -> None:
    bucket, _ = data
    store = store_on(faulty, backend, bucket, timeout=1)
    a = rectizarr.open_array(store, path="x", mode="r")
    faulty.inject("hang", times=1000, kinds=["get", "get_range"])
    try:
        with pytest.raises(StoreError, match=r"timed out|timeout|Timeout") as info:
            bounded(lambda: a[0:16], 120)
        assert bucket in str(info.value)
    finally:
        faulty.clear_faults()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_server_that_never_answers_writes_times_out(faulty: S3Server, data: tuple[str, np.ndarray],
                                                      backend: str) -> None:
    """Writes too: a chunk's PUT and a conditional PUT of ``zarr.json`` (an append) end in a StoreError
    naming the bucket, and the data is unchanged. (s3fs uploads with ``Expect: 100-continue`` waited for
    the server's 100 Continue with no timeout: past 500 s, fuzz fz34.)"""
    bucket, values = data
    store = store_on(faulty, backend, bucket, timeout=1)
    a = rectizarr.open_array(store, path="x")
    faulty.inject("hang", times=1000, kinds=["put"])
    try:
        for write in (lambda: a.__setitem__((slice(0, 16),), 5), lambda: a.append(np.zeros((16, 64), "i4"))):
            with pytest.raises(StoreError, match=r"timed out|timeout|Timeout") as info:
                bounded(write, 150)
            assert bucket in str(info.value)
    finally:
        faulty.clear_faults()
    back = rectizarr.open_array(store_on(faulty, "obstore", bucket), path="x", mode="r")
    assert back.shape == values.shape and np.array_equal(back[...], values)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_precondition_failure_is_a_conflict_never_lost_data(faulty: S3Server, data: tuple[str, np.ndarray],
                                                              backend: str) -> None:
    """Two clients change attributes and append, interleaved: each conditional write that loses (412)
    is re-read and re-applied."""
    bucket, values = data
    one = rectizarr.open_array(store_on(faulty, backend, bucket), path="x")
    two = rectizarr.open_array(store_on(faulty, backend, bucket), path="x")
    one.attrs["a"] = 1
    two.attrs["b"] = 2  # its zarr.json is stale: the conditional write fails once, then merges
    one.append(np.full((16, 64), -1, "i4"))
    two.append(np.full((16, 64), -2, "i4"))
    fresh = rectizarr.open_array(store_on(faulty, backend, bucket), path="x", mode="r")
    assert dict(fresh.attrs) == {"a": 1, "b": 2}
    assert fresh.shape == (96, 64)
    assert np.array_equal(fresh[:64], values)
    assert sorted({int(fresh[64, 0]), int(fresh[80, 0])}) == [-2, -1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unconditional_write_refused_is_an_error_never_a_write(faulty: S3Server, data: tuple[str, np.ndarray],
                                                                  backend: str) -> None:
    """A plain PUT answered 412 (or 409) did not store anything: a StoreError naming the key, not a success
    (obstore took it for a lost race and returned as if written)."""
    bucket, values = data
    a = rectizarr.open_array(store_on(faulty, backend, bucket), path="x")
    faulty.inject("412", times=1, kinds=["put"])
    try:
        with pytest.raises(StoreError, match="x/c/1/0"):
            a[16:32] = -5  # one whole chunk: an unconditional PUT
    finally:
        faulty.clear_faults()
    assert np.array_equal(rectizarr.open_array(store_on(faulty, backend, bucket), path="x", mode="r")[...], values)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("change", ["append", "attributes", "create"])
def test_a_metadata_write_whose_answer_was_lost_is_applied_once(faulty: S3Server, data: tuple[str, np.ndarray],
                                                                backend: str, change: str) -> None:
    """The server stores a conditional write of zarr.json, and its answer is lost (a 500): the client sends
    it again, which the condition refuses (412, its own write having changed the ETag). That refusal is
    taken for the write's own success when the stored document is the one written: an append is applied
    once (it was applied twice: a gap of fill values, then the data), a new array is created once."""
    bucket, values = data
    store = store_on(faulty, backend, bucket)
    a = rectizarr.open_array(store, path="x")
    faulty.reset_counts()
    faulty.inject("lost", times=1, kinds=["put"])
    try:
        if change == "append":
            assert a.append(np.full((16, 64), -1, "i4")) == (80, 64)
        elif change == "attributes":
            a.attrs["k"] = 1
        else:
            rectizarr.create_array(store, name="y", shape=(4,), dtype="i4", chunks=(2,), fill_value=3)
        assert faulty.counts()["fault_lost"] == 1
    finally:
        faulty.clear_faults()
    back = rectizarr.open_array(store_on(faulty, backend, bucket), path="x", mode="r")
    if change == "append":
        assert back.shape == (80, 64) and np.array_equal(back[:64], values) and (back[64:] == -1).all()
    elif change == "attributes":
        assert dict(back.attrs) == {"k": 1} and back.shape == (64, 64)
    else:
        assert rectizarr.open_array(store_on(faulty, backend, bucket), path="y", mode="r")[...].tolist() == [3] * 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_connection_resets_past_the_retries_are_store_errors(faulty: S3Server, data: tuple[str, np.ndarray],
                                                             backend: str) -> None:
    """Every request answered by a connection reset: reads, writes, look-ups and listings raise a StoreError
    naming the bucket (botocore's ConnectionClosedError and s3fs's OSError for a 503 came through raw),
    and the data is unchanged once the server answers again."""
    bucket, values = data
    a = rectizarr.open_array(store_on(faulty, backend, bucket), path="x")
    for kinds, act in [(["get", "get_range"], lambda: a[0:16]),
                       (["put", "head", "get", "get_range"], lambda: a.__setitem__((slice(0, 2), 0), 1)),
                       (["head"], lambda: store_on(faulty, backend, bucket).getsize("x/zarr.json")),
                       (["list"], lambda: list(store_on(faulty, backend, bucket).list_prefix("x/")))]:
        faulty.inject("reset", times=1000, kinds=kinds)
        try:
            with pytest.raises(StoreError, match=bucket):
                bounded(act, 120)
        finally:
            faulty.clear_faults()
    assert np.array_equal(rectizarr.open_array(store_on(faulty, backend, bucket), path="x", mode="r")[...], values)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failed_listing_leaves_no_new_node(faulty: S3Server, backend: str) -> None:
    """The listing made beside a node's create-only write fails (the server answers 500 however often it
    is asked): StoreError, and the document written beside it is deleted again."""
    faulty.clear_faults()
    bucket = faulty.new_bucket(faulty.filesystem())
    store = store_on(faulty, backend, bucket)
    faulty.inject("500", times=1000, kinds=["list"])
    try:
        with pytest.raises(StoreError):
            rectizarr.create_array(store, name="x", shape=(4,), dtype="u2", chunks=(2,))
    finally:
        faulty.clear_faults()
    assert list(store.list_prefix("")) == []
    rectizarr.create_array(store, name="x", shape=(4,), dtype="u2", chunks=(2,))  # (and then it can be made)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["group", "array"])
def test_a_retried_create_over_an_identical_document_is_refused_and_changes_nothing(
        faulty: S3Server, backend: str, kind: str) -> None:
    """The create-only PUT of a v2 node's document is answered 500 once; its retry is refused because the
    key holds the very same bytes (every v2 group's ``.zgroup`` is the same), which a writer cannot tell
    from its own first attempt having landed. Another node's keys are listed beside: NodeExistsError, and
    the existing node's attributes stay (they were overwritten)."""
    faulty.clear_faults()
    store = store_on(faulty, backend, faulty.new_bucket(faulty.filesystem()))

    def make(owner: str) -> Any:
        if kind == "group":
            return rectizarr.create_group(store, path="x", zarr_format=2, attributes={"owner": owner})
        return rectizarr.create_array(store, name="x", shape=(4,), dtype="u1", chunks=(2,), zarr_format=2,
                                      attributes={"owner": owner})

    make("first")
    faulty.inject("500", times=1, kinds=["put"])
    try:
        with pytest.raises(rectizarr.NodeExistsError):
            make("second")
    finally:
        faulty.clear_faults()
    assert dict(rectizarr.open(store, path="x", mode="r").attrs) == {"owner": "first"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_create_whose_answers_are_all_lost_leaves_no_document_over_another_node(faulty: S3Server,
                                                                                  backend: str) -> None:
    """Every answer to the create-only PUT of a v2 group's ``.zgroup`` is lost (the write lands) where a v2
    array is: NodeExistsError, and the ``.zgroup`` that landed is deleted again (the array opens as one)."""
    faulty.clear_faults()
    store = store_on(faulty, backend, faulty.new_bucket(faulty.filesystem()))
    rectizarr.create_array(store, name="x", shape=(4,), dtype="u1", chunks=(2,), zarr_format=2)
    faulty.inject("lost", times=50, kinds=["put"])
    try:
        with pytest.raises(rectizarr.NodeExistsError):
            rectizarr.create_group(store, path="x", zarr_format=2)
    finally:
        faulty.clear_faults()
    assert sorted(store.list_prefix("x/")) == ["x/.zarray", "x/.zattrs"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_node_whose_write_lost_every_answer_keeps_the_groups_above_it(faulty: S3Server, backend: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The create-only PUT of a new node's document lands but every answer to it is lost: StoreError, and
    the groups made above it stay, so the node, which may stand, is reachable from the root (they were
    deleted again, leaving a node below no group)."""
    faulty.clear_faults()
    store = store_on(faulty, backend, faulty.new_bucket(faulty.filesystem()))
    rectizarr.create_group(store)
    real = type(store).set_if

    def answers_lost(self: Any, key: str, value: Any, version: Any) -> bool:
        if key == "n/x/zarr.json":  # (only the node's own document)
            faulty.inject("lost", times=50, kinds=["put"])
        try:
            return real(self, key, value, version)
        finally:
            faulty.clear_faults()

    monkeypatch.setattr(type(store), "set_if", answers_lost)
    with pytest.raises(StoreError):
        rectizarr.create_array(store, name="n/x", shape=(4,), dtype="u1", chunks=(2,))
    monkeypatch.undo()
    assert store.get("n/x/zarr.json") is not None  # (it landed)
    assert list(rectizarr.open_group(store, mode="r")["n"].keys()) == ["x"]
