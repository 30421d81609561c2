"""The round trips of common work on an object store (moto S3), counted where they reach the store, on
both backends: one document per open, one request per chunk, a group's root document read once."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr import tuning
from rectizarr.stores import CountingStore, open_store


@pytest.fixture(params=["obstore", "fsspec"])
def remote(request: pytest.FixtureRequest, s3_server: Any) -> CountingStore:
    bucket = s3_server.new_bucket(s3_server.filesystem())
    return CountingStore(
        open_store(f"s3://{bucket}", backend=request.param, storage_options=s3_server.storage_options())
    )


def reads(c: CountingStore) -> int:
    n = len(c.requests) + c.infos + c.lists
    c.reset()
    return n


def test_array_round_trips(remote: CountingStore) -> None:
    c = remote
    a = rectizarr.create_array(c, name="x", shape=(512, 512), dtype="u2", chunks=(256, 256))
    # The existing-node check: one listing request (nothing under x/, beside the document's write), then
    # the parent's document, and as there is none, whether a Zarr v2 group or array is there (a v3 root
    # would hide it)
    assert (c.lists, sorted(k for k, _ in c.requests)) == (1, [".zarray", ".zgroup", "zarr.json"])
    c.reset()
    with pytest.raises(rectizarr.NodeExistsError):
        rectizarr.create_array(c, name="x", shape=(4,), dtype="u2", chunks=(2,))
    c.reset()
    data = np.arange(512 * 512, dtype="u2").reshape(512, 512)
    a[...] = data
    assert c.writes == 4 and reads(c) == 0  # whole chunks: written, never read
    c.reset()
    b = rectizarr.open_array(c, path="x", mode="r")
    assert reads(c) == 1  # one document
    assert b[3, 4] == data[3, 4] and reads(c) == 1  # one chunk
    assert np.array_equal(b[...], data) and reads(c) == 4
    assert np.array_equal(b.oindex[::16, [10, 300]], data[::16][:, [10, 300]]) and reads(c) == 4
    assert b[300:302, 0:2].tolist() == data[300:302, 0:2].tolist() and reads(c) == 1


def test_sharded_round_trips(remote: CountingStore) -> None:
    c = remote
    s = rectizarr.create_array(c, name="s", shape=(512, 512), dtype="u2", chunks=(64, 64), shards=(256, 256))
    s[...] = 7
    c.reset()
    s = rectizarr.open_array(c, path="s", mode="r")
    c.reset()
    # a small shard (128 KiB decoded) comes whole with its index: one request
    assert s[5, 5] == 7 and reads(c) == 1
    assert s[100, 200] == 7 and reads(c) == 1  # the index is cached: the inner chunk's GET carries If-Match
    other = rectizarr.open_array(c.inner, path="s")
    other[100:101, 0:64] = 9  # another client rewrites the shard
    c.reset()
    assert s[100, 5] == 9 and reads(c) == 2  # 412: the shard again (index and inner chunk), one request
    expected = np.full((512, 512), 7, "u2")
    expected[100:101, 0:64] = 9
    assert np.array_equal(s[...], expected) and reads(c) == 4  # whole shards, one GET each
    # a larger shard (8 MiB decoded, more than the 1 MiB gap): the index alone, then the inner chunk (If-Match: no HEAD)
    big = rectizarr.create_array(
        c, name="big", shape=(2048, 2048), dtype="u2", chunks=(256, 256), shards=(2048, 2048)
    )
    big[...] = np.arange(2048 * 2048, dtype="u2").reshape(2048, 2048)
    big = rectizarr.open_array(c, path="big", mode="r")
    c.reset()
    assert big[1000, 5] == (1000 * 2048 + 5) % 65536 and reads(c) == 2
    assert big[5, 1000] == (5 * 2048 + 1000) % 65536 and reads(c) == 1


def test_consolidated_group_is_one_request(remote: CountingStore) -> None:
    c = remote
    g = rectizarr.create_group(c)
    for i in range(20):
        g.create_array(f"a{i}", shape=(4,), dtype="i1", chunks=(2,), attributes={"i": i})
    rectizarr.consolidate_metadata(c)
    c.reset()
    g = rectizarr.open_group(c, mode="r")
    names = g.keys()
    assert [g[n].attrs["i"] for n in names] == sorted(range(20), key=lambda i: f"a{i}")
    assert f"a{3}" in g and "nope" not in g
    assert reads(c) == 1  # the root document, read at open and kept


@pytest.mark.parametrize("backend", ["obstore", "fsspec"])
def test_a_group_takes_up_the_writes_of_this_process(s3_server: Any, backend: str) -> None:
    """A group keeps its document; what this process writes through it or any other handle is read again
    (once), what another process writes only after ``refresh()``."""
    import subprocess
    import sys

    bucket = s3_server.new_bucket(s3_server.filesystem())
    url, options = f"s3://{bucket}", s3_server.storage_options()

    def client() -> CountingStore:
        return CountingStore(open_store(url, backend=backend, storage_options=options))

    c = client()
    rectizarr.create_group(c)
    rectizarr.consolidate_metadata(c)
    g = rectizarr.open_group(c)
    g.create_array("new", shape=(2,), dtype="i1", chunks=(2,))
    assert g.keys() == ["new"]  # re-read after its own write
    rectizarr.open_group(client()).create_array("later", shape=(2,), dtype="i1", chunks=(2,))
    c.reset()
    assert g.keys() == ["later", "new"] and reads(c) == 1  # another handle of this process: read again, once
    assert g.keys() == ["later", "new"] and reads(c) == 0
    script = (
        "import rectizarr\nfrom rectizarr.stores import open_store\n"
        f"s = open_store({url!r}, backend={backend!r}, storage_options={options!r})\n"
        "rectizarr.open_group(s).create_array('ext', shape=(2,), dtype='i1', chunks=(2,))\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert g.keys() == ["later", "new"] and reads(c) == 0  # another process's write: kept until refreshed ...
    g.refresh()
    assert g.keys() == ["ext", "later", "new"]  # ... explicitly


@pytest.mark.parametrize("backend", ["obstore", "fsspec"])
def test_on_the_wire_one_get_per_value_and_no_head(s3_server: Any, backend: str) -> None:
    """Counted by the server: a whole value is one GET (never HEAD + GET), a missing key one request."""
    bucket = s3_server.new_bucket(s3_server.filesystem())
    store = open_store(f"s3://{bucket}", backend=backend, storage_options=s3_server.storage_options())
    a = rectizarr.create_array(store, name="x", shape=(64, 64), dtype="u2", chunks=(16, 64))
    a[...] = 3
    s3_server.reset_counts()
    b = rectizarr.open_array(store, path="x", mode="r")
    assert (b[...] == 3).all()
    counts = s3_server.counts()
    assert counts["head"] == 0 and counts["get"] == 5 and counts["total"] == 5  # zarr.json + 4 chunks
    s3_server.reset_counts()
    assert store.get("x/c/9/9") is None
    assert s3_server.counts()["total"] == 1


def test_a_shrink_reads_no_chunk_that_it_deletes(remote: CountingStore) -> None:
    """A shrink's clean-up deletes the chunks wholly past the new end at the version a HEAD gave, without
    reading them; only the chunk the new end cuts is read (and cleared past it)."""
    a = rectizarr.create_array(remote, name="x", shape=(4, 64), dtype="u2", chunks=(4, 8), fill_value=0)
    a[...] = 7
    remote.reset()
    a.resize((4, 12))
    chunks = [k for k, _ in remote.requests if "/c/" in k]
    assert chunks == ["x/c/0/1"] and remote.deletes == 6
    assert sorted(remote.list_prefix("x/c/")) == ["x/c/0/0", "x/c/0/1"]
    a.resize((4, 64))
    assert (a[:, :12] == 7).all() and (a[:, 12:] == 0).all()


@pytest.mark.parametrize("backend", ["obstore", "fsspec"])
@pytest.mark.parametrize("kind", ["array", "group"])
def test_on_the_wire_creating_a_node(s3_server: Any, backend: str, kind: str) -> None:
    """Creating a node where nothing is stored: one LIST (is anything there?) and the document's
    create-only PUT, in flight together (one round trip). Over an existing node, the PUT is refused and
    what is stored stays (fsspec: one HEAD more, asking whether the refusal answered this write's own
    first send, which aiohttp sends again unseen when its connection is reset)."""
    bucket = s3_server.new_bucket(s3_server.filesystem())
    store = open_store(
        f"s3://{bucket}/data.zarr", backend=backend, storage_options=s3_server.storage_options()
    )

    def create() -> Any:
        if kind == "array":
            return rectizarr.create_array(store, shape=(64, 64), dtype="u2", chunks=(16, 64))
        return rectizarr.create_group(store, attributes={"a": 1})

    s3_server.reset_counts()
    s3_server.set_latency(0.2)
    try:
        node = create()
    finally:
        s3_server.set_latency(0)
    counts = s3_server.counts()
    assert (counts["list"], counts["put"], counts["total"], counts["peak_in_flight"]) == (1, 1, 2, 2)
    if kind == "array":
        node[...] = 1
    before = {k: store.get(k) for k in store.list_prefix("")}
    s3_server.reset_counts()
    with pytest.raises(rectizarr.NodeExistsError, match="already exists at '/'"):
        create()
    assert s3_server.counts()["total"] <= (3 if backend == "fsspec" else 2)
    assert {k: store.get(k) for k in store.list_prefix("")} == before


@pytest.mark.parametrize("backend", ["obstore", "fsspec"])
def test_a_node_is_not_created_over_a_node_of_the_other_format(s3_server: Any, backend: str) -> None:
    """The create-only write refuses only a document of its own name: a v3 node over a v2 one (or the
    other way round) is found by the listing made beside it, and the new document deleted again. Chunks
    with no document are no node."""
    bucket = s3_server.new_bucket(s3_server.filesystem())
    store = open_store(f"s3://{bucket}", backend=backend, storage_options=s3_server.storage_options())
    nodes = {
        name: open_store(
            f"s3://{bucket}/{name}", backend=backend, storage_options=s3_server.storage_options()
        )
        for name in ("v2a", "v2g", "v3g")
    }
    rectizarr.create_array(nodes["v2a"], shape=(4,), dtype="u2", chunks=(2,), zarr_format=2)[...] = 7
    rectizarr.create_group(nodes["v2g"], zarr_format=2)
    rectizarr.create_group(nodes["v3g"], attributes={"a": 1})
    before = {k: store.get(k) for k in store.list_prefix("")}
    for name, fmt in (("v2a", 3), ("v2g", 3), ("v3g", 2)):
        node = nodes[name]
        with pytest.raises(rectizarr.NodeExistsError, match="already exists at '/'"):
            rectizarr.create_array(node, shape=(4,), dtype="u2", chunks=(2,), zarr_format=fmt)
        with pytest.raises(rectizarr.NodeExistsError, match="already exists at '/'"):
            rectizarr.create_group(node, zarr_format=fmt)
    assert {k: store.get(k) for k in store.list_prefix("")} == before
    store.set("orphan/c/0", b"old")
    rectizarr.create_array(store, name="orphan", shape=(4,), dtype="u2", chunks=(2,), fill_value=3)
    assert rectizarr.open_array(store, path="orphan").shape == (4,)


@pytest.mark.parametrize("backend", ["obstore", "fsspec"])
def test_a_directory_marker_does_not_hide_a_node_from_the_listing(
    s3_server: Any, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A "directory marker" object (``d/``, as some tools make) is listed with the keys under ``d/`` but is
    none of them: the listing beside the create-only write, answered after that write landed, still
    shows the v3 group there, and no v2 group is made over it."""
    fs = s3_server.filesystem()
    bucket = s3_server.new_bucket(fs)
    store = open_store(f"s3://{bucket}", backend=backend, storage_options=s3_server.storage_options())
    rectizarr.create_group(store, path="d", attributes={"v": 3})
    store.delete("zarr.json")  # (no v3 group above that would refuse a v2 one before its write)
    fs.call_s3("put_object", Bucket=bucket, Key="d/", Body=b"")
    real_list, real_set_if, landed = type(store).keys_under, type(store).set_if, threading.Event()

    def listed_after_the_write(self: Any, prefix: str, limit: int) -> list[str]:
        assert landed.wait(30), "the node's own write was never made"
        return real_list(self, prefix, limit)

    def set_if(self: Any, key: str, value: Any, version: Any) -> bool:
        try:
            return real_set_if(self, key, value, version)
        finally:
            if key == "d/.zgroup":
                landed.set()

    monkeypatch.setattr(type(store), "keys_under", listed_after_the_write)
    monkeypatch.setattr(type(store), "set_if", set_if)
    with pytest.raises(rectizarr.NodeExistsError):
        rectizarr.create_group(store, path="d", zarr_format=2)
    monkeypatch.undo()
    assert sorted(store.list_prefix("d/")) == ["d/zarr.json"]


@pytest.mark.parametrize("backend", ["obstore", "fsspec", "local"])
def test_nodes_of_the_two_formats_never_share_a_path(s3_server: Any, backend: str, tmp_path: Any) -> None:
    """Creating a node where one of the other format is, or below one of the other format, is refused the
    same way on every store: NodeExistsError where the node is, UnsupportedError below a group."""
    bucket = s3_server.new_bucket(s3_server.filesystem())

    def at(name: str) -> Any:
        if backend == "local":
            return open_store(str(tmp_path / name))
        return open_store(
            f"s3://{bucket}/{name}", backend=backend, storage_options=s3_server.storage_options()
        )

    two, three = at("two"), at("three")
    rectizarr.create_group(two, path="g/a", zarr_format=2)
    rectizarr.create_group(three, path="g", zarr_format=3)
    before = sorted(two.list_prefix("")), sorted(three.list_prefix(""))
    with pytest.raises(rectizarr.NodeExistsError):
        rectizarr.create_array(two, name="g/a", shape=(2,), dtype="u1")
    with pytest.raises(rectizarr.NodeExistsError):
        rectizarr.create_group(two, path="g/a")
    with pytest.raises(rectizarr.UnsupportedError, match="ancestor '/' is a Zarr v2 node"):
        rectizarr.create_group(two, path="g/b")
    with pytest.raises(rectizarr.UnsupportedError, match="ancestor '/' is a Zarr v3 node"):
        rectizarr.create_array(three, name="g/b", shape=(2,), dtype="u1", zarr_format=2)
    assert (sorted(two.list_prefix("")), sorted(three.list_prefix(""))) == before
    three.set(
        "g/c/.zgroup", b'{"zarr_format": 2}'
    )  # (a v2 group of one key, the new node's own: there first)
    with pytest.raises(rectizarr.NodeExistsError):
        rectizarr.create_group(three, path="g/c", zarr_format=2)
    rectizarr.create_array(two, name="g/a2", shape=(2,), dtype="u1", zarr_format=2)
    with pytest.raises(rectizarr.StoreError, match="is an array, not a group"):
        rectizarr.create_array(two, name="g/a2/b", shape=(2,), dtype="u1", zarr_format=2)
    with pytest.raises(
        rectizarr.StoreError, match="is a Zarr v2 array, not a group"
    ):  # (a v2 array at the root)
        rectizarr.create_array(at("two/g/a2"), name="b", shape=(2,), dtype="u1", zarr_format=3)


def test_one_request_is_made_on_the_callers_thread(monkeypatch: pytest.MonkeyPatch, s3_server: Any) -> None:
    """obstore: a lone request is obstore's blocking call on the caller's thread (no hand-off to another
    thread, most of a loopback request's time); a batch's requests go to the pool's threads."""
    from rectizarr.stores import objectstore

    bucket = s3_server.new_bucket(s3_server.filesystem())
    store = open_store(f"s3://{bucket}", backend="obstore", storage_options=s3_server.storage_options())
    batches: list[int] = []
    pool = objectstore._Requests.pool
    monkeypatch.setattr(objectstore._Requests, "pool", classmethod(lambda cls: batches.append(1) or pool()))
    a = rectizarr.create_array(store, name="x", shape=(64, 64), dtype="u2", chunks=(32, 32))
    assert batches == [1]  # (whether a v2 group or array is at the root: both asked for at once)
    batches.clear()
    a[:32, :32] = 5  # one chunk
    b = rectizarr.open_array(store, path="x", mode="r")
    assert b[3, 4] == 5 and b[40, 40] == 0 and store.getsize("x/zarr.json") and store.get("x/c/9/9") is None
    assert store.set_if("x/k", b"1", None) and not store.set_if("x/k", b"2", None)
    store.delete("x/k")
    assert batches == []
    assert np.array_equal(b[...], np.pad(np.full((32, 32), 5, "u2"), ((0, 32), (0, 32)))) and batches == [1]
    store.set_many({"y/1": b"1", "y/2": b"2"})
    assert store.get_many([("y/1", None), ("y/2", None), ("y/3", None)]) == [b"1", b"2", None]
    assert len(batches) > 1  # the batches went to the pool


def test_the_request_pool_follows_requests_in_flight(s3_server: Any) -> None:
    """The pool has requests_in_flight() threads, made again when the number changes; a batch never has
    more requests in flight than that."""
    from rectizarr.stores import objectstore

    bucket = s3_server.new_bucket(s3_server.filesystem())
    store = open_store(f"s3://{bucket}", backend="obstore", storage_options=s3_server.storage_options())
    before = rectizarr.stores.requests_in_flight()
    try:
        rectizarr.set_requests_in_flight(3)
        assert objectstore._Requests.pool()._max_workers == 3
        s3_server.set_latency(0.02)
        s3_server.reset_counts()
        store.set_many({f"k/{i}": bytes([i]) for i in range(12)})
        assert [
            bytes(v or b"") for _, v in sorted(store.iter_many([(f"k/{i}", None) for i in range(12)]))
        ] == [bytes([i]) for i in range(12)]
        counts = s3_server.counts()
        assert counts["put"] == 12 and counts["get"] == 12 and counts["peak_in_flight"] <= 3
    finally:
        s3_server.set_latency(0)
        rectizarr.set_requests_in_flight(before)
    assert objectstore._Requests.pool()._max_workers == before


@pytest.mark.parametrize("location", ["end", "start"])
def test_small_shards_come_whole_with_their_index(remote: CountingStore, location: str) -> None:
    """A shard that decodes to no more than the store's coalescing gap is read from its index's end up to
    the gap: the one request brings the inner chunks too. Values equal numpy for partial
    reads across shards, at either index location, with absent inner chunks; a shard cut short or with
    a broken index is an error naming it."""
    c = remote
    codecs = [
        {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [16, 16],
                "codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "zstd", "configuration": {"level": 1}},
                ],
                "index_codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "crc32c"},
                ],
                "index_location": location,
            },
        }
    ]
    data = np.arange(96 * 96, dtype="<i4").reshape(96, 96)
    data[:16, :16] = 0  # an absent inner chunk (the fill value)
    a = rectizarr.create_array(
        c, name="s", shape=(96, 96), dtype="<i4", chunks=(32, 32), codecs=codecs, fill_value=0
    )
    a[...] = data
    a = rectizarr.open_array(c, path="s", mode="r")
    c.reset()
    assert np.array_equal(a.oindex[[1, 40, 90], [3, 50, 95]], data[np.ix_([1, 40, 90], [3, 50, 95])])
    assert reads(c) == 9  # the 9 shards touched, each whole with its index
    assert np.array_equal(a[5:70, 20:33], data[5:70, 20:33]) and reads(c) == 6  # indexes cached: inner chunks
    assert np.array_equal(a[...], data)
    raw = c.inner.get("s/c/2/2")
    assert raw is not None
    for broken in (raw[: len(raw) // 2], raw[:-3] + b"xyz" if location == "end" else b"xyz" + raw[3:]):
        c.inner.set("s/c/2/2", broken)
        fresh = rectizarr.open_array(c.inner, path="s", mode="r")
        with pytest.raises(rectizarr.errors.CodecError, match="s/c/2/2"):
            fresh[70, 70]


@pytest.mark.parametrize(
    "compressors",
    [
        None,
        {"name": "zstd", "configuration": {"level": 1}},
        {
            "name": "blosc",
            "configuration": {
                "cname": "lz4",
                "clevel": 5,
                "shuffle": "shuffle",
                "typesize": 2,
                "blocksize": 0,
            },
        },
    ],
)
def test_whole_remote_shards_of_large_inner_chunks_are_batch_decoded(
    obstore_store: Any, compressors: Any
) -> None:
    """Shards fetched whole from a store with round trips are decoded in one batch, also when their inner
    chunks are large (128 KiB here): full reads, edge shards, absent inner chunks and shards, partial
    selections inside whole shards and strided ones, against NumPy."""
    rng = np.random.default_rng(3)
    want = rng.integers(0, 600, size=(700, 600), dtype="u2")
    want[512:, :] = 0  # the bottom shards' inner chunks hold only the fill value: not stored
    a = rectizarr.create_array(
        obstore_store,
        name=f"big-{compressors is None}",
        shape=want.shape,
        dtype="u2",
        chunks=(256, 256),
        shards=(512, 512),
        fill_value=0,
        compressors=compressors,
    )
    a[...] = want
    b = rectizarr.open_array(obstore_store, path=a.path, mode="r")
    for sel in [
        ...,
        (slice(0, 512), slice(0, 512)),
        (slice(3, 700), slice(1, 599)),
        (slice(None, None, 7), ...),
        (slice(100, 300), slice(250, 600, 3)),
    ]:
        assert np.array_equal(b[sel], want[sel]), sel
    assert np.array_equal(b.oindex[[5, 600, 300], ::11], want[[5, 600, 300], ::11])


def test_a_remote_read_of_whole_shards_pastes_each_shard_as_it_arrives(
    obstore_store: Any, s3_server: Any
) -> None:
    """A selection of whole shards (inside the extent) from a store with round trips: one GET per shard,
    an absent shard read as the fill value, values equal NumPy, and a corrupt shard a CodecError naming
    it (nothing else read wrong)."""
    want = np.arange(1024 * 1024, dtype="u2").reshape(1024, 1024)
    want[512:, :512] = 9  # one shard of the fill value only: not stored
    a = rectizarr.create_array(
        obstore_store,
        name="whole",
        shape=want.shape,
        dtype="u2",
        chunks=(256, 256),
        shards=(512, 512),
        fill_value=9,
    )
    a[...] = want
    assert obstore_store.get("whole/c/1/0") is None
    s3_server.reset_counts()
    assert np.array_equal(a[...], want) and np.array_equal(a[:512, 512:], want[:512, 512:])
    assert s3_server.counts()["get"] == 4 + 1 and s3_server.counts()["get_range"] == 0
    value = obstore_store.get("whole/c/0/1")
    obstore_store.set("whole/c/0/1", b"XXXX" + value[4:])  # its first inner chunk is no zstd frame
    with pytest.raises(rectizarr.CodecError, match="c/0/1"):
        a[...]


def test_object_store_iter_many_starts_a_request_only_when_a_value_is_taken(
    obstore_store: Any, s3_server: Any
) -> None:
    """With ``ahead``, requests start as values are taken: memory stays bounded however slow the caller."""
    import time

    obstore_store.set_many({f"a/{i}": bytes([i]) for i in range(12)})
    s3_server.reset_counts()
    got = obstore_store.iter_many([(f"a/{i}", None) for i in range(12)], ahead=3)
    taken = [next(got)]
    deadline = time.monotonic() + 10
    while s3_server.counts()["get"] < 4 and time.monotonic() < deadline:  # the one started at the first take
        time.sleep(0.01)
    time.sleep(0.2)  # a slow caller: nothing more is fetched meanwhile
    assert s3_server.counts()["get"] == 4  # the three ahead, and one started when the first was taken
    taken += list(got)
    assert sorted((i, bytes(v or b"")) for i, v in taken) == [(i, bytes([i])) for i in range(12)]
    assert s3_server.counts()["get"] == 12


def test_stores_under_one_bucket_share_its_client_and_keep_their_keys_apart(s3_server: Any) -> None:
    """obstore: every ObjectStore opened under one bucket with the same options uses one client (its
    connections are reused by the next array written elsewhere in the bucket); each store's keys, listings
    and deletions stay under its own prefix."""
    bucket = s3_server.new_bucket(s3_server.filesystem())
    opts = s3_server.storage_options()

    def store(path: str) -> Any:
        return open_store(f"s3://{bucket}{path}", backend="obstore", storage_options=opts)

    root, a, ab, b = store(""), store("/a"), store("/a/b/"), store("/b")
    assert root._store is a._store is ab._store is b._store
    a.set_many({"x": b"1", "b/y": b"2", "c/z": b"3"})
    b.set("x", b"4")
    assert ab.get("y") == b"2" and a.get("b/y") == b"2" and root.get("a/c/z") == b"3" and b.get("x") == b"4"
    assert sorted(a.list_prefix("")) == ["b/y", "c/z", "x"] and list(ab.list_prefix("")) == ["y"]
    assert sorted(root.list_prefix("")) == ["a/b/y", "a/c/z", "a/x", "b/x"]
    assert sorted(a.list_dir("")) == ["b", "c", "x"] and a.any_under("c/") and not ab.any_under("c/")
    assert ab.get_many_versioned([("y", (0, 1))])[0][0] == b"2" and ab.getsize("y") == 1
    ab.delete_prefix("")
    assert sorted(root.list_prefix("")) == ["a/c/z", "a/x", "b/x"]
    arr = rectizarr.create_array(store("/data.zarr"), shape=(8,), dtype="u1", chunks=(4,))
    arr[...] = 7
    assert sorted(root.list_prefix("data.zarr/")) == ["data.zarr/c/0", "data.zarr/c/1", "data.zarr/zarr.json"]
    other = open_store(f"s3://{bucket}/a", backend="obstore", storage_options={**opts, "timeout": 7})
    assert other._store is not a._store and other.get("x") == b"1"  # other options: a client of its own


def test_s3_request_bodies_are_hashed_into_signatures_only_over_plain_http() -> None:
    """As botocore does: over TLS (AWS itself, or an https endpoint) PUT bodies are sent unsigned
    (UNSIGNED-PAYLOAD); over plain HTTP they are signed; an explicit setting wins."""
    from rectizarr.stores.obstore_options import client_config

    def unsigned(**options: Any) -> Any:
        return client_config("s3", options)[0]["aws_unsigned_payload"]

    assert unsigned() is True and unsigned(endpoint_url="https://minio.example:9000") is True
    assert unsigned(client_kwargs={"endpoint_url": "http://127.0.0.1:9000"}) is False
    assert unsigned(endpoint_url="http://127.0.0.1:9000", aws_unsigned_payload=True) is True
    assert "aws_unsigned_payload" not in client_config("gcs", {})[0]


class _BatchCounting(CountingStore):
    """Also records each batch of versioned reads (the index reads of a sharded read): its size, and
    whether the reading thread made it (else the thread that reads indexes ahead beside it)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.batches: list[tuple[bool, int]] = []

    def get_many_versioned(self, requests: Any) -> Any:
        self.batches.append((threading.current_thread() is threading.main_thread(), len(requests)))
        return super().get_many_versioned(requests)


def _points_over_16_shards(
    s3_server: Any, wrapper: type[_BatchCounting], n: int, seed: int
) -> tuple[_BatchCounting, Any, np.ndarray, list[tuple[int, int]]]:
    """A (2048, 1024) float64 array in 16 shards of 1 MiB decoded (more than the coalescing gap: never read
    whole) on the moto server, opened again through ``wrapper`` (counters reset); its data; ``n`` random
    points."""
    bucket = s3_server.new_bucket(s3_server.filesystem())
    opts = s3_server.storage_options()
    data = np.arange(2048 * 1024, dtype="f8").reshape(2048, 1024)
    w = rectizarr.create_array(
        open_store(f"s3://{bucket}/s.zarr", backend="obstore", storage_options=opts),
        shape=data.shape,
        dtype="f8",
        chunks=(64, 64),
        shards=(512, 256),
    )
    w[...] = data
    store = wrapper(open_store(f"s3://{bucket}/s.zarr", backend="obstore", storage_options=opts))
    a = rectizarr.open_array(store, mode="r")
    store.reset()
    store.batches.clear()
    rng = np.random.default_rng(seed)
    points = [
        (int(i), int(j)) for i, j in zip(rng.integers(0, 2048, n), rng.integers(0, 1024, n), strict=True)
    ]
    return store, a, data, points


def test_element_reads_read_shard_indexes_ahead_within_what_a_reader_without_a_cache_reads(
    s3_server: Any,
) -> None:
    """obstore: reading elements one by one over 16 shards, an index miss also reads other shards' indexes
    beside it, as the handle's budget allows: fewer waits for index reads than shards, never more index
    requests than one per shard per read, right values."""
    store, a, data, points = _points_over_16_shards(s3_server, _BatchCounting, 80, 3)
    index_reads: list[Any] = []
    for n, p in enumerate(points, 1):
        assert a[p] == data[p]
        index_reads = [r for r in store.requests if r[1] is not None and r[1][0] < 0]
        assert len(index_reads) <= n  # a reader without a cache reads one index per read
    shards = {(i // 512, j // 256) for i, j in points}
    assert len({k for k, _ in index_reads}) == len(index_reads) == len(shards) == 16  # each index once
    waited = [n for on_reader, n in store.batches if on_reader]  # index reads the reads waited for
    assert len(waited) < 12 and any(
        not on_reader for on_reader, _ in store.batches
    )  # misses read others ahead
    store.reset()
    assert a[0, 0] == 0 and len(store.requests) == 1  # every index is cached: the inner chunk alone


def test_a_read_whose_index_is_cached_reads_the_next_shards_index_beside_its_inner_chunk(
    s3_server: Any,
) -> None:
    """obstore: once reads go to more than one shard, a read that finds its shard's index cached spends what
    the budget allows on reading the index of the nearest uncached shard beside its own request; a later
    read there makes one request. A loop over one shard's elements reads no other index."""
    store, a, data, _ = _points_over_16_shards(s3_server, _BatchCounting, 0, 5)
    for p in [(0, 0), (1, 2), (100, 200), (511, 255)]:  # one shard: after its index, one request per read
        store.reset()
        assert a[p] == data[p]
        assert len(store.requests) == (2 if p == (0, 0) else 1) and all(
            r[0] == "c/0/0" for r in store.requests
        )
    store.reset()
    store.batches.clear()
    assert a[0, 300] == data[0, 300]  # a miss in shard (0, 1): the 3 indexes of credit are read beside it
    assert sorted(r[0] for r in store.requests) == ["c/0/1", "c/0/1", "c/0/2", "c/0/3", "c/1/0"]
    assert sorted(store.batches) == [(False, 3), (True, 1)]
    store.reset()
    store.batches.clear()
    assert a[1, 2] == data[1, 2]  # a hit, reads spread: its inner chunk, and shard (1, 1)'s index beside it
    assert sorted(r[0] for r in store.requests) == ["c/0/0", "c/1/1"] and store.batches == [(False, 1)]
    store.reset()
    store.batches.clear()
    assert a[600, 300] == data[600, 300]  # in shard (1, 1): its inner chunk, no index read waited for
    mine = [r for r in store.requests if r[0] == "c/1/1"]
    assert len(mine) == 1 and mine[0][1][0] >= 0  # a ranged read of an inner chunk, not of the index
    assert all(not on_reader for on_reader, _ in store.batches)


@pytest.mark.parametrize("backend", ["obstore", "fsspec"])
def test_a_read_whose_cached_indexes_all_went_stale_reads_them_again_at_once(
    s3_server: Any, backend: str
) -> None:
    """Another handle rewrote every shard (and finished) since this handle cached their indexes: the read
    is right after two tries (each stale index cost a retry of its own, and 100 of them a ConflictError)."""
    bucket = s3_server.new_bucket(s3_server.filesystem())
    url, opts = f"s3://{bucket}/x.zarr", s3_server.storage_options()
    w = rectizarr.create_array(
        open_store(url, backend=backend, storage_options=opts),
        shape=(40, 40),
        dtype="i8",
        chunks=(2, 2),
        shards=(4, 4),
        fill_value=-1,
    )
    want = np.arange(1600).reshape(40, 40)
    w[...] = want  # 100 shards
    store = CountingStore(open_store(url, backend=backend, storage_options=opts))
    r = rectizarr.open_array(store, mode="r")
    sel = (slice(0, 40, 4), slice(0, 40, 4))  # one element of each shard: their indexes cached
    assert np.array_equal(r[sel], want[sel])
    w[...] = want + 10_000
    store.reset()
    assert np.array_equal(r[sel], want[sel] + 10_000)
    index_reads = [q for q in store.requests if q[1] is not None and q[1][0] < 0]
    assert len(index_reads) <= 101  # one stale index, then all of them again: not one retry per shard


class _FailingAhead(_BatchCounting):
    """Index reads made beside a read (read ahead) fail as a broken server would make them fail."""

    def get_many_versioned(self, requests: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            self.batches.append((False, len(requests)))
            raise rectizarr.StoreError("injected: the index read ahead failed")
        return super().get_many_versioned(requests)


def test_a_failed_read_ahead_changes_no_read(s3_server: Any) -> None:
    """obstore: when the indexes read ahead fail, every element still reads right, each index is then read
    when its shard is needed, and no read is retried for it."""
    store, a, data, points = _points_over_16_shards(s3_server, _FailingAhead, 60, 4)
    for p in points:
        assert a[p] == data[p]
    assert any(not on_reader for on_reader, _ in store.batches)  # it tried
    waited = [n for on_reader, n in store.batches if on_reader]
    assert len(waited) == len(
        {(i // 512, j // 256) for i, j in points}
    )  # one index read per shard, no retries


def test_each_arrival_works_on_the_thread_that_received_each_value(
    obstore_store: Any, s3_server: Any
) -> None:
    """ObjectStore: ``fn`` runs on the request's own thread (the first on the caller's), in the caller's
    context (its tuning holds), for
    every request, missing keys as None and ranges as asked; the first error is raised once no call is
    under way. A small remote read decodes its chunks there: values equal numpy, missing chunks the fill
    value, a corrupt chunk an error naming it."""
    obstore_store.set_many({f"e/{i}": bytes(range(i, i + 8)) for i in range(6)})
    seen: dict[int, tuple[bytes | None, str, int]] = {}
    requests = [(f"e/{i}", (2, 3) if i == 4 else None) for i in range(7)]  # e/6 is missing
    with tuning.use(replace(tuning.current(), conflict_retries=7)):
        obstore_store.each_arrival(
            requests,
            lambda i, v: seen.__setitem__(
                i,
                (
                    None if v is None else bytes(v),
                    threading.current_thread().name,
                    tuning.current().conflict_retries,
                ),
            ),
        )
    assert {i: v for i, (v, _, _) in seen.items()} == {
        **{i: bytes(range(i, i + 8)) for i in range(6)},
        4: bytes([6, 7, 8]),
        6: None,
    }
    names = [
        name for _, name, retries in seen.values() if retries == 7
    ]  # (the tuning of the caller's context)
    assert len(names) == 7 and all(
        n.startswith("rectizarr-objectstore") or n == threading.current_thread().name for n in names
    )

    def fail(i: int, v: Any) -> None:
        if i == 2:
            raise ValueError("two")
        seen[i] = (b"", "", 0)

    seen.clear()
    with pytest.raises(ValueError, match="two"):
        obstore_store.each_arrival(requests, fail)
    assert sorted(seen) == [0, 1, 3, 4, 5, 6]  # the others ran to the end

    want = np.arange(96 * 96, dtype="u2").reshape(96, 96)
    want[:32, :32] = 0
    a = rectizarr.create_array(
        obstore_store,
        name="w",
        shape=want.shape,
        dtype="u2",
        chunks=(32, 32),
        fill_value=0,
        compressors={"name": "zstd", "configuration": {"level": 1}},
    )
    a[...] = want
    s3_server.reset_counts()
    assert np.array_equal(a[10:50, 10:30], want[10:50, 10:30]) and s3_server.counts()["get"] == 2  # 1 missing
    assert np.array_equal(a.oindex[[1, 90], [2, 95]], want[np.ix_([1, 90], [2, 95])])
    obstore_store.set("w/c/1/1", b"not zstd")
    with pytest.raises(rectizarr.errors.CodecError, match="w/c/1/1"):
        a[30:40, 20:40]


def test_a_remote_read_makes_its_output_pages_while_its_requests_are_in_flight(
    remote: CountingStore, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From ``tuning.prefault_bytes`` of output on, a read from a store with round trips has its output's
    pages made beside the requests (the output holds the data all the same); a local read does not."""
    import rectizarr.io.engine as engine

    made: list[int] = []
    real = engine.populate
    monkeypatch.setattr(engine, "populate", lambda out: made.append(out.nbytes) or real(out))
    data = np.arange(512 * 512, dtype="u2").reshape(512, 512)
    for store in (remote, str(tmp_path)):
        a = rectizarr.create_array(
            store, name="x", shape=data.shape, dtype="u2", chunks=(128, 512), shards=(256, 512)
        )
        a[...] = data
        made.clear()
        got = a[...]  # (held: the pages are made on a thread of its own, only for an output still held)
        deadline = time.monotonic() + 10
        while store is remote and not made and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (got == data).all() and (a[:64] == data[:64]).all()
        assert made == ([data.nbytes] if store is remote else [])


def test_the_idle_thread_holds_no_output_of_a_finished_read(remote: CountingStore) -> None:
    """While the thread that makes outputs' pages waits for a core, a finished read's output is not held
    by the work queued for it: let go of, it is freed."""
    import gc
    import weakref

    from rectizarr.io.pool import when_idle

    a = rectizarr.create_array(remote, name="x", shape=(512, 512), dtype="u2", chunks=(256, 256))
    a[...] = 1
    gate = threading.Event()
    when_idle(lambda: gate.wait(30))  # the idle thread busy
    try:
        got = a[...]
        assert (got == 1).all()
        freed = weakref.ref(got if got.base is None else got.base)
        del got
        gc.collect()
        assert freed() is None
    finally:
        gate.set()
