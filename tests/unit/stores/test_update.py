"""Store.update: the one read-modify-write of stored values; keys whose value ``make`` does not need
(``unread``) are never read, under locks or as compare-and-swaps."""

from __future__ import annotations

from pathlib import Path

import pytest

from rectizarr.stores import Buffer, Capabilities, CountingStore, LocalStore, MemoryStore
from rectizarr.stores.update import UNREAD


class SwappingStore(MemoryStore):
    """A memory store that updates with compare-and-swaps, as stores with conditional writes do."""

    capabilities = Capabilities(conditional_writes=True, cheap_versions=True)


def _fill(spy: CountingStore) -> None:
    spy.set_many({"a": b"1", "b": b"2", "c": b"3"})
    spy.reset()


def test_unread_keys_are_deleted_under_the_locks_without_a_read(tmp_path: Path) -> None:
    spy = CountingStore(LocalStore(tmp_path))
    _fill(spy)
    seen: list[dict[str, bytes | None]] = []

    def make(stored: dict[str, bytes | None]) -> dict[str, Buffer | None]:
        seen.append(stored)
        return {"a": stored["a"] + b"!" if stored["a"] else None, "c": None, "d": None}

    spy.update(["a", "b", "c", "d"], make, unread=["c", "d"])
    assert seen[0]["a"] == b"1" and seen[0]["b"] == b"2"
    assert seen[0]["c"] is UNREAD and seen[0]["d"] is UNREAD  # (under locks: not even looked up)
    assert sorted(k for k, _ in spy.requests) == ["a", "b"] and spy.infos == 0
    assert spy.get("a") == b"1!" and spy.get("b") == b"2" and spy.get("c") is None


def test_unread_keys_are_deleted_at_their_version_in_a_compare_and_swap() -> None:
    spy = CountingStore(SwappingStore())
    _fill(spy)
    seen: list[dict[str, bytes | None]] = []

    def make(stored: dict[str, bytes | None]) -> dict[str, Buffer | None]:
        seen.append(stored)
        if len(seen) == 1:
            spy.inner.set("c", b"changed")  # another writer, between the read and the write: made again
        return {k: None for k, v in stored.items() if v is UNREAD}

    spy.update(["a", "c", "d"], make, unread=["c", "d"])
    assert seen[0] == {"a": b"1", "c": UNREAD, "d": None}  # a missing unread key: None
    assert seen[1] == {"c": UNREAD}  # only the key that lost the race
    assert [k for k, _ in spy.requests] == ["a"] and spy.infos >= 3  # versions alone for c and d
    assert spy.get("a") == b"1" and spy.get("c") is None and spy.get("b") == b"2"


@pytest.mark.parametrize("swapping", [False, True])
def test_unread_keys_may_be_written(swapping: bool) -> None:
    store = SwappingStore() if swapping else MemoryStore()
    store.set("k", b"old")
    store.update(["k", "n"], lambda stored: {"k": b"new", "n": b"made"}, unread=["k", "n"])
    assert store.get("k") == b"new" and store.get("n") == b"made"


@pytest.mark.parametrize("other", ["thread", "process"])
def test_a_compare_and_swap_inside_a_hold_does_not_wait_for_another_holder(
    tmp_path: Path, other: str
) -> None:
    """A compare-and-swap inside a hold of other keys (a node's update inside the locks of a creation)
    does not wait for a lock that another thread or process holds (a wait there could close a circle):
    it fails as a lost race does, and its rounds read and try again. Its own held keys, and any key
    outside a hold, it writes as ever."""
    import subprocess
    import sys
    import textwrap
    import threading

    store = LocalStore(tmp_path / "s")
    store.set("a/zarr.json", b"1")
    store.set("b/zarr.json", b"1")
    release = threading.Event()
    if other == "thread":
        held = threading.Event()

        def hold() -> None:
            with store.lock(["b/zarr.json"]):
                held.set()
                release.wait(60)

        holder = threading.Thread(target=hold)
        holder.start()
        assert held.wait(60)
    else:
        script = textwrap.dedent(f"""
            import sys
            from rectizarr.stores import LocalStore
            with LocalStore({str(tmp_path / "s")!r}).lock(["b/zarr.json"]):
                print("held", flush=True)
                sys.stdin.read()
        """)
        proc = subprocess.Popen(
            [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    try:
        with store.lock(["a/zarr.json"]):
            assert store.set_if("b/zarr.json", b"2", store.get_version("b/zarr.json")) is False
            assert store.set_if("a/zarr.json", b"2", store.get_version("a/zarr.json"))
    finally:
        if other == "thread":
            release.set()
            holder.join(60)
        else:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(60)
    assert store.set_if("b/zarr.json", b"3", store.get_version("b/zarr.json"))
    assert (store.get("a/zarr.json"), store.get("b/zarr.json")) == (b"2", b"3")


def test_a_hold_takes_no_more_locks_inside_it() -> None:
    """Inside a hold a thread takes only the stripes it holds, or value stripes inside metadata stripes:
    every thread then takes stripes in one order, and no two holds wait on each other in a circle (an
    append that locked its edge chunks and then more chunks hung a soak run this way)."""
    from rectizarr.stores import locks

    keys = [f"a/c/{i}" for i in range(64)]
    with locks.hold("t:", ["a/zarr.json"], False):
        with locks.hold("t:", keys[:8], False):  # values inside metadata: the one order
            with locks.hold("t:", keys[:8], False):  # held already
                pass
            with pytest.raises(RuntimeError, match="lock order"):
                with locks.hold("t:", keys, False):  # more values inside values
                    pass
        with pytest.raises(RuntimeError, match="lock order"):
            with locks.hold("t:", ["b/zarr.json"], False):  # more metadata inside metadata
                pass
    with locks.hold("t:", keys, False):  # every lock let go: taken again at once
        pass
