"""An S3 server that fails: 500s and 503 SlowDown are retried a bounded number of times, then a StoreError
names the URL; a truncated body is never taken for data; a server that never answers times out with a
StoreError naming the URL; a conditional write answered 412 is a conflict, re-applied, never lost data.
Both backends (obstore and fsspec/s3fs), against moto behind the fault-injecting middleware."""

from __future__ import annotations

import threading
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


def store_on(server: S3Server, backend: str, bucket: str, *, s3fs_tries: int = 5, **extra: Any) -> Store:
    """A store on ``bucket``; on fsspec, botocore sends a request at most twice and s3fs calls botocore at
    most ``s3fs_tries`` times (5, its default). A test where every request fails passes 2: s3fs still
    calls again after a failure, and its whole ladder of back-off and timeouts is not waited for (the
    ``503``, ``hang`` and ``reset`` tests took 17, 25 + 50 and 38 s with 5)."""
    options: dict[str, Any] = {**server.storage_options(), **extra}
    if backend == "fsspec":
        options["config_kwargs"] = {
            "retries": {"max_attempts": 2, "mode": "standard"},
            "read_timeout": extra.pop("timeout", 30),
            "connect_timeout": 5,
        }
        options.pop("timeout", None)
        options["skip_instance_cache"] = True
    store: Any = open_store(f"s3://{bucket}", backend=backend, storage_options=options)
    if backend == "fsspec":
        store.fs.retries = s3fs_tries
    return store


@pytest.fixture
def data(faulty: S3Server) -> tuple[str, np.ndarray]:
    faulty.clear_faults()
    bucket = faulty.new_bucket(faulty.filesystem())
    values = np.arange(64 * 64, dtype="i4").reshape(64, 64)
    a = rectizarr.create_array(
        store_on(faulty, "obstore", bucket), name="x", shape=values.shape, dtype="i4", chunks=(16, 64)
    )
    a[...] = values
    return bucket, values


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fault", ["500", "503"])
def test_a_few_server_errors_are_retried(
    faulty: S3Server, data: tuple[str, np.ndarray], backend: str, fault: str
) -> None:
    bucket, values = data
    a = rectizarr.open_array(store_on(faulty, backend, bucket), path="x", mode="r")
    faulty.reset_counts()
    faulty.inject(fault, times=2, kinds=["get", "get_range"])
    assert np.array_equal(bounded(lambda: a[...], 60), values)
    assert faulty.counts()[f"fault_{fault}"] == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_errors_that_persist_end_in_a_store_error(
    faulty: S3Server, data: tuple[str, np.ndarray], backend: str
) -> None:
    bucket, values = data
    store = store_on(faulty, backend, bucket, s3fs_tries=2)
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
def test_a_server_that_never_answers_times_out(
    faulty: S3Server, data: tuple[str, np.ndarray], backend: str
) -> None:
    bucket, _ = data
    store = store_on(faulty, backend, bucket, timeout=1, s3fs_tries=2)
    a = rectizarr.open_array(store, path="x", mode="r")
    faulty.inject("hang", times=1000, kinds=["get", "get_range"])
    try:
        with pytest.raises(StoreError, match=r"timed out|timeout|Timeout") as info:
            bounded(lambda: a[0:16], 120)
        assert bucket in str(info.value)
    finally:
        faulty.clear_faults()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_server_that_never_answers_writes_times_out(
    faulty: S3Server, data: tuple[str, np.ndarray], backend: str
) -> None:
    """Writes too: a chunk's PUT and a conditional PUT of ``zarr.json`` (an append) end in a StoreError
    naming the bucket, and the data is unchanged. (s3fs uploads with ``Expect: 100-continue`` waited for
    the server's 100 Continue with no timeout: past 500 s, fuzz fz34.)"""
    bucket, values = data
    store = store_on(faulty, backend, bucket, timeout=1, s3fs_tries=2)
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
def test_a_precondition_failure_is_a_conflict_never_lost_data(
    faulty: S3Server, data: tuple[str, np.ndarray], backend: str
) -> None:
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
def test_an_unconditional_write_refused_is_an_error_never_a_write(
    faulty: S3Server, data: tuple[str, np.ndarray], backend: str
) -> None:
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
    assert np.array_equal(
        rectizarr.open_array(store_on(faulty, backend, bucket), path="x", mode="r")[...], values
    )


LOST = ["lost", "lost_reset", "lost_timeout"]  # the write lands; then a 500, a reset, no answer at all


def lost_store(server: S3Server, backend: str, bucket: str, fault: str) -> Store:
    """A store whose client gives up on an answer after 2 s where the fault is one that never comes."""
    return store_on(server, backend, bucket, **({"timeout": 2} if fault == "lost_timeout" else {}))


def reopened(server: S3Server, bucket: str, path: str) -> Any:
    return rectizarr.open(store_on(server, "obstore", bucket), path=path, mode="r")


def _append_empty(store: Store, server: S3Server, bucket: str) -> list[str]:
    rectizarr.create_array(store, name="e", shape=(0,), dtype="i4", chunks=(2,), fill_value=-1)
    return ["e/zarr.json"]


def _append_v2(store: Store, server: S3Server, bucket: str) -> list[str]:
    """(A Zarr v2 hierarchy of its own, under ``two/``: no v2 node is made below a v3 group.)"""
    rectizarr.create_array(
        store_on(server, "obstore", f"{bucket}/two"),
        name="v",
        shape=(0,),
        dtype="i4",
        chunks=(2,),
        fill_value=-1,
        zarr_format=2,
    )
    return ["two/v/.zarray"]


# (operation, keys whose first write loses its answer, made ready before the faults, run, checked after)
LOST_ANSWER_CASES: dict[str, tuple[Any, Any, Any]] = {
    "append_to_empty": (  # the report: [-1, -1, 7, 7] (fsspec), StoreError and [-1, -1] (obstore)
        _append_empty,
        lambda store, values: rectizarr.open_array(store, path="e").append(np.array([7, 7], "i4")) == (2,),
        lambda server, bucket, values: reopened(server, bucket, "e")[...].tolist() == [7, 7],
    ),
    "append_v2": (
        _append_v2,
        lambda store, values: rectizarr.open_array(store, path="v").append(np.array([7, 7], "i4")) == (2,),
        lambda server, bucket, values: reopened(server, f"{bucket}/two", "v")[...].tolist() == [7, 7],
    ),
    "append": (  # zarr.json, and the edge chunk it writes part of (a conditional write)
        lambda store, server, bucket: ["x/zarr.json", "x/c/4/0"],
        lambda store, values: (
            rectizarr.open_array(store, path="x").append(np.full((8, 64), -1, "i4")) == (72, 64)
        ),
        lambda server, bucket, values: np.array_equal(
            reopened(server, bucket, "x")[...], np.concatenate([values, np.full((8, 64), -1, "i4")])
        ),
    ),
    "grow": (
        lambda store, server, bucket: ["x/zarr.json"],
        lambda store, values: rectizarr.open_array(store, path="x").resize((100, 64)) is None,
        lambda server, bucket, values: (
            reopened(server, bucket, "x").shape == (100, 64)
            and np.array_equal(reopened(server, bucket, "x")[:64], values)
        ),
    ),
    "shrink": (  # zarr.json, and the chunk at the new end, cleared past it
        lambda store, server, bucket: ["x/zarr.json", "x/c/2/0"],
        lambda store, values: rectizarr.open_array(store, path="x").resize((40, 64)) is None,
        lambda server, bucket, values: _grown_back(server, bucket, values),
    ),
    "attributes": (
        lambda store, server, bucket: ["x/zarr.json"],
        lambda store, values: rectizarr.open_array(store, path="x").attrs.update({"k": 1, "j": [2]}) is None,
        lambda server, bucket, values: (
            dict(reopened(server, bucket, "x").attrs) == {"k": 1, "j": [2]}
            and reopened(server, bucket, "x").shape == (64, 64)
        ),
    ),
    "create_array": (
        lambda store, server, bucket: ["y/zarr.json"],
        lambda store, values: (
            rectizarr.create_array(store, name="y", shape=(4,), dtype="i4", chunks=(2,), fill_value=3).shape
            == (4,)
        ),
        lambda server, bucket, values: reopened(server, bucket, "y")[...].tolist() == [3] * 4,
    ),
    "create_group": (  # the group, and the one made above it
        lambda store, server, bucket: ["g/zarr.json", "g/h/zarr.json"],
        lambda store, values: rectizarr.create_group(store, path="g/h", attributes={"a": 1}).path == "g/h",
        lambda server, bucket, values: (
            dict(reopened(server, bucket, "g/h").attrs) == {"a": 1}
            and list(reopened(server, bucket, "g").keys()) == ["h"]
        ),
    ),
    "partial_chunk": (  # a conditional write of the chunk, merged with what it holds
        lambda store, server, bucket: ["x/c/0/0"],
        lambda store, values: rectizarr.open_array(store, path="x").__setitem__((slice(0, 2), 0), -7) is None,
        lambda server, bucket, values: np.array_equal(reopened(server, bucket, "x")[...], _with(values)),
    ),
    "consolidate": (
        lambda store, server, bucket: ["zarr.json"],
        lambda store, values: list(rectizarr.consolidate_metadata(store).keys()) == ["x"],
        lambda server, bucket, values: (
            rectizarr.open_group(store_on(server, "obstore", bucket), mode="r", use_consolidated=True)[
                "x"
            ].shape
            == (64, 64)
        ),
    ),
}


def _with(values: np.ndarray) -> np.ndarray:
    out = values.copy()
    out[0:2, 0] = -7
    return out


def _grown_back(server: S3Server, bucket: str, values: np.ndarray) -> bool:
    """Shrunk to 40 rows once: the chunk at the new end holds the fill value past it (grown again)."""
    a = rectizarr.open_array(store_on(server, "obstore", bucket), path="x")
    if a.shape != (40, 64) or not np.array_equal(a[...], values[:40]):
        return False
    a.resize((48, 64))
    return bool((a[40:48] == 0).all())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fault", LOST)
@pytest.mark.parametrize("case", sorted(LOST_ANSWER_CASES))
def test_a_write_whose_answer_was_lost_is_applied_once(
    faulty: S3Server, data: tuple[str, np.ndarray], backend: str, fault: str, case: str
) -> None:
    """The server stores a write, and its answer is lost: a 500, a connection reset with no answer, no
    answer within the client's timeout. The client sends it again, which the condition refuses (its own
    first write changed the ETag, or made the key), or sends it no more (obstore, after a timeout). Each
    operation is applied once and returns normally: an append grows the array once (it was applied
    twice on fsspec after a reset: a gap of fill values, then the data; obstore raised after a timeout,
    the array grown), a node is created (not NodeExistsError over its own document), attributes,
    a resize, a partial chunk write and consolidated metadata are as asked."""
    bucket, values = data
    prepare, act, check = LOST_ANSWER_CASES[case]
    keys = prepare(store_on(faulty, "obstore", bucket), faulty, bucket)
    store = lost_store(faulty, backend, f"{bucket}/two" if case == "append_v2" else bucket, fault)
    faulty.reset_counts()
    for key in keys:
        faulty.inject(fault, times=1, kinds=["put"], key=key)
    try:
        assert bounded(lambda: act(store, values), 120)
        assert faulty.counts()[f"fault_{fault}"] == len(keys)  # (each fault was met)
    finally:
        faulty.clear_faults()
    assert check(faulty, bucket, values)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("change", ["append", "attributes"])
def test_a_write_whose_landing_cannot_be_known_is_a_store_error_applied_at_most_once(
    faulty: S3Server, data: tuple[str, np.ndarray], backend: str, change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every answer to the conditional write of ``zarr.json`` is lost (a reset) and the key cannot be read
    back either: StoreError naming the key, and the document is the old one or the new one (an append
    applied once at most; with its data not written, its new elements are the fill value)."""
    bucket, values = data
    store = store_on(faulty, backend, bucket, s3fs_tries=2)
    a = rectizarr.open_array(store, path="x")
    _lose_every_answer(monkeypatch, faulty, store, "x/zarr.json", "lost_reset", 1000, key_only=True)
    with pytest.raises(StoreError, match=r"x/zarr\.json"):
        bounded(
            lambda: a.append(np.full((16, 64), -1, "i4")) if change == "append" else a.attrs.update(k=1), 120
        )
    monkeypatch.undo()
    back = reopened(faulty, bucket, "x")
    assert np.array_equal(back[:64], values)
    if change == "append":
        assert back.shape in ((64, 64), (80, 64)) and (back[64:] == 0).all()
    else:
        assert dict(back.attrs) in ({}, {"k": 1}) and back.shape == (64, 64)


@pytest.mark.parametrize("backend", BACKENDS)
def test_connection_resets_past_the_retries_are_store_errors(
    faulty: S3Server, data: tuple[str, np.ndarray], backend: str
) -> None:
    """Every request answered by a connection reset: reads, writes, look-ups and listings raise a StoreError
    naming the bucket (botocore's ConnectionClosedError and s3fs's OSError for a 503 came through raw),
    and the data is unchanged once the server answers again."""
    bucket, values = data
    a = rectizarr.open_array(store_on(faulty, backend, bucket, s3fs_tries=2), path="x")
    for kinds, act in [
        (["get", "get_range"], lambda: a[0:16]),
        (["put", "head", "get", "get_range"], lambda: a.__setitem__((slice(0, 2), 0), 1)),
        (["head"], lambda: store_on(faulty, backend, bucket, s3fs_tries=2).getsize("x/zarr.json")),
        (["list"], lambda: list(store_on(faulty, backend, bucket, s3fs_tries=2).list_prefix("x/"))),
    ]:
        faulty.inject("reset", times=1000, kinds=kinds)
        try:
            with pytest.raises(StoreError, match=bucket):
                bounded(act, 120)
        finally:
            faulty.clear_faults()
    assert np.array_equal(
        rectizarr.open_array(store_on(faulty, backend, bucket), path="x", mode="r")[...], values
    )


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
    faulty: S3Server, backend: str, kind: str
) -> None:
    """The create-only PUT of a v2 node's document is answered 500 once; its retry is refused because the
    key holds the very same bytes (every v2 group's ``.zgroup`` is the same), which a writer cannot tell
    from its own first attempt having landed. Another node's keys are listed beside: NodeExistsError, and
    the existing node's attributes stay (they were overwritten)."""
    faulty.clear_faults()
    store = store_on(faulty, backend, faulty.new_bucket(faulty.filesystem()))

    def make(owner: str) -> Any:
        if kind == "group":
            return rectizarr.create_group(store, path="x", zarr_format=2, attributes={"owner": owner})
        return rectizarr.create_array(
            store, name="x", shape=(4,), dtype="u1", chunks=(2,), zarr_format=2, attributes={"owner": owner}
        )

    make("first")
    faulty.inject("500", times=1, kinds=["put"])
    try:
        with pytest.raises(rectizarr.NodeExistsError):
            make("second")
    finally:
        faulty.clear_faults()
    assert dict(rectizarr.open(store, path="x", mode="r").attrs) == {"owner": "first"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_create_whose_answers_are_all_lost_leaves_no_document_over_another_node(
    faulty: S3Server, backend: str
) -> None:
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


@pytest.mark.parametrize("listed_late", [False, True], ids=["listing-any-time", "listing-after-the-write"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_node_whose_write_lost_every_answer_keeps_the_groups_above_it(
    faulty: S3Server, backend: str, listed_late: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The create-only PUT of a new node's document lands but every answer to it is lost, and it cannot be
    read back to tell: StoreError, and the groups made above it stay, so the node, which may stand, is
    reachable from the root (they were deleted again, leaving a node below no group). ``listed_late``: the
    listing beside the write is answered after the document landed, and shows it (a busy machine): still
    the write's error, not NodeExistsError (the node's own document is no other node)."""
    faulty.clear_faults()
    store = store_on(faulty, backend, faulty.new_bucket(faulty.filesystem()))
    rectizarr.create_group(store)
    # (only the node's own document, which cannot be read back either)
    _lose_every_answer(monkeypatch, faulty, store, "n/x/zarr.json", "lost", 50, key_only=False)
    if listed_late:
        lossy, listing, landed = type(store).set_if, type(store).keys_under, threading.Event()

        def then_listed(self: Any, key: str, value: Any, version: Any) -> bool:
            try:
                return lossy(self, key, value, version)
            finally:
                if key == "n/x/zarr.json":
                    landed.set()

        def listed_after_the_write(self: Any, prefix: str, limit: int) -> list[str]:
            landed.wait(60)
            return listing(self, prefix, limit)

        monkeypatch.setattr(type(store), "set_if", then_listed)
        monkeypatch.setattr(type(store), "keys_under", listed_after_the_write)
    with pytest.raises(StoreError):
        rectizarr.create_array(store, name="n/x", shape=(4,), dtype="u1", chunks=(2,))
    monkeypatch.undo()
    assert store.get("n/x/zarr.json") is not None  # (it landed)
    assert list(rectizarr.open_group(store, mode="r")["n"].keys()) == ["x"]


def _lose_every_answer(
    monkeypatch: pytest.MonkeyPatch,
    faulty: S3Server,
    store: Any,
    target: str,
    fault: str,
    times: int,
    *,
    key_only: bool,
) -> None:
    """While ``store`` writes ``target`` conditionally, its PUTs land with their answers lost (``fault``,
    ``times``; to ``target`` only if ``key_only``) and reads of it fail: the landing cannot be known."""
    real = type(store).set_if

    def answers_lost(self: Any, key: str, value: Any, version: Any) -> bool:
        if key == target:
            faulty.inject(fault, times=times, kinds=["put"], **({"key": key} if key_only else {}))
            faulty.inject("500", times=1000, kinds=["get", "head"], key=key)
        try:
            return real(self, key, value, version)
        finally:
            faulty.clear_faults()

    monkeypatch.setattr(type(store), "set_if", answers_lost)
