"""Hostile ``zarr.json`` documents: valid seeds and a seeded mutator (shared by the tests and
``scripts/long_runs.py``).

``seed_stores()`` builds small valid hierarchies in memory (every grid form, sharding, many dtypes, a
group with consolidated metadata) and returns, per seed, the store contents as ``{key: bytes}`` and the
key of the document to mutate. ``mutate(doc_bytes, rng)`` returns hostile bytes. ``check_case`` opens the
mutated store through every entry point and reads one chunk; it returns the exception (or None) and
raises AssertionError for any exception outside the :class:`RectizarrError` tree or an empty message.
"""

from __future__ import annotations

import json
import math
import random
import signal
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import rectizarr
from rectizarr.errors import RectizarrError
from rectizarr.stores import MemoryStore

CASE_SECONDS = 10


def _array_seeds() -> list[dict[str, Any]]:
    """Keyword sets for ``create_array`` covering grids, sharding, codecs and dtypes."""
    return [
        dict(shape=(10, 12), dtype="int32", chunks=(4, 5), compressors=None),
        dict(shape=(10,), dtype="float64", chunks=[[3, 7]], fill_value=float("nan")),
        dict(
            shape=(8, 9),
            dtype="uint16",
            chunks=[[2, 6], 3],
            compressors={"name": "gzip", "configuration": {"level": 1}},
        ),
        dict(shape=(16, 12), dtype="float32", shards=(8, 6), chunks=(4, 3)),
        dict(shape=(16, 12), dtype="int8", shards=[[4, 8, 4], 6], chunks=(2, 3), index_location="start"),
        dict(shape=(), dtype="complex64", chunks=(), compressors=None),
        dict(shape=(7,), dtype="bool", chunks=(3,)),
        dict(shape=(5,), dtype="str", chunks=(2,)),
        dict(
            shape=(4, 4),
            dtype="uint64",
            chunks=(2, 2),
            codecs=[
                {"name": "transpose", "configuration": {"order": [1, 0]}},
                {"name": "bytes", "configuration": {"endian": "big"}},
                {"name": "crc32c"},
            ],
        ),
        dict(shape=(6,), dtype="M8[s]", chunks=(4,)),
        dict(
            shape=(6, 4),
            dtype="float16",
            chunks=(3, 2),
            compressors={
                "name": "blosc",
                "configuration": {
                    "cname": "lz4",
                    "clevel": 1,
                    "shuffle": "shuffle",
                    "typesize": 2,
                    "blocksize": 0,
                },
            },
        ),
        dict(shape=(0, 3), dtype="int16", chunks=(1, 3)),
    ]


def seed_stores() -> list[tuple[dict[str, bytes], str, str]]:
    """``[(contents, doc_key, node_path)]``: a valid store, the document to mutate, the node's path."""
    seeds: list[tuple[dict[str, bytes], str, str]] = []
    for kw in _array_seeds():
        store = MemoryStore()
        a = rectizarr.create_array(store, name="a", **kw)
        if a.size:
            if a.dtype.kind == "U" or a.dtype == object:
                a[...] = np.array(["xy"] * a.size, dtype=object).reshape(a.shape)
            else:
                a[...] = np.ones(a.shape, dtype=a.dtype)
        seeds.append((_dump(store), "a/zarr.json", "a"))
    # A group with consolidated metadata (arrays and a subgroup inside).
    store = MemoryStore()
    g = rectizarr.create_group(store, attributes={"title": "t", "n": [1, 2.5, None]})
    g.create_array("x", shape=(6,), dtype="int32", chunks=[[2, 4]])[:] = np.arange(6, dtype="int32")
    g.create_group("sub").create_array("y", shape=(4, 4), dtype="f4", shards=(4, 4), chunks=(2, 2))
    rectizarr.consolidate_metadata(store)
    seeds.append((_dump(store), "zarr.json", ""))
    seeds.append((_dump(store), "sub/y/zarr.json", "sub/y"))
    return seeds


def _dump(store: MemoryStore) -> dict[str, bytes]:
    return {k: bytes(store.get(k) or b"") for k in store.list_prefix("")}


# ------------------------------------------------------------------------------------------ mutation

_HOSTILE_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1,
    3,
    2**31,
    2**40,
    2**62,
    2**63,
    2**64,
    -(2**63),
    10**30,
    1.5,
    -0.0,
    1e308,
    "",
    "x",
    "NaN",
    "0x7fc00000",
    "\u00e9",
    "a/b",
    "..",
    [],
    [1],
    [0],
    [-1],
    [2**40, 2**40, 2**40],
    [[1, 10**12]],
    [[4, 0]],
    [[0, 2]],
    {},
    {"name": "x"},
    {"must_understand": False},
    [None],
    [[]],
    ["a"],
]


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if len(prefix) > 40:  # already deeply nested by an earlier mutation
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        obj = obj[p]
    return obj


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    _get(obj, path[:-1])[path[-1]] = value
    return obj


def _deep(depth: int, kind: str) -> str:
    return ("[" * depth + "]" * depth) if kind == "list" else ('{"a":' * depth + "1" + "}" * depth)


def _structural(doc: Any, rng: random.Random) -> Any:
    paths = list(_paths(doc))
    path = rng.choice(paths)
    target = _get(doc, path)
    op = rng.randrange(9)
    if op == 0:  # replace with a hostile value
        return _set(doc, path, rng.choice(_HOSTILE_VALUES))
    if op == 1 and path:  # delete a key or element
        parent = _get(doc, path[:-1])
        del parent[path[-1]]
        return doc
    if op == 2 and isinstance(target, dict):  # add an extra key
        target[rng.choice(["extra", "must_understand", "configuration", "name", "zarr_format", "\x00"])] = (
            rng.choice(_HOSTILE_VALUES)
        )
        return doc
    if op == 3 and isinstance(target, list):  # wrong length
        if target and rng.random() < 0.5:
            target.pop(rng.randrange(len(target)))
        else:
            target.append(rng.choice(_HOSTILE_VALUES) if not target or rng.random() < 0.5 else target[0])
        return doc
    if op == 4 and isinstance(target, int) and not isinstance(target, bool):  # huge / negative numbers
        return _set(doc, path, rng.choice([-target, target * 2**40, 2**62, -1, 0, 2**64 + 1, float(target)]))
    if op == 5 and isinstance(target, str):  # wrong type of string
        return _set(doc, path, rng.choice([target.upper(), target + "x", "", 3, [target]]))
    if op == 6:  # wrap in a list or object
        return _set(doc, path, rng.choice([[target], {"name": target}]))
    if op == 7 and isinstance(target, list) and target:  # swap elements
        rng.shuffle(target)
        return doc
    return _set(doc, path, rng.choice(_HOSTILE_VALUES))


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=True).encode("utf-8")


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to three random structural or byte-level mutations of a JSON document."""
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(10)
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            doc = None
        if kind <= 4 and doc is not None:
            data = _dumps(_structural(doc, rng))
        elif kind == 5 and doc is not None:  # deep nesting somewhere
            path = rng.choice(list(_paths(doc)))
            marker = "\x01DEEP\x01"
            text = _dumps(_set(doc, path, marker)).decode()
            deep = _deep(rng.choice([100, 1000, 10_000, 100_000]), rng.choice(["list", "obj"]))
            data = text.replace(json.dumps(marker), deep).encode()
        elif kind == 6:  # truncation
            data = data[: rng.randrange(len(data) + 1)]
        elif kind == 7:  # invalid UTF-8 / random bytes spliced in
            pos = rng.randrange(len(data) + 1)
            junk = rng.choice(
                [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", bytes(rng.randrange(256) for _ in range(4))]
            )
            data = data[:pos] + junk + data[pos:]
        elif kind == 8 and doc is not None:  # NaN / Infinity tokens
            path = rng.choice(list(_paths(doc)))
            data = _dumps(_set(doc, path, rng.choice([math.nan, math.inf, -math.inf])))
        else:  # byte flip
            if data:
                pos = rng.randrange(len(data))
                data = data[:pos] + bytes([data[pos] ^ (1 << rng.randrange(8))]) + data[pos + 1 :]
    return data


# ------------------------------------------------------------------------------------------ checking


@contextmanager
def alarm(seconds: int) -> Iterator[None]:
    """Fail (TimeoutError) a case that takes longer than ``seconds`` (main thread, POSIX only)."""

    def fire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"case exceeded {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _first_chunk_read(node: Any) -> None:
    if isinstance(node, rectizarr.Array):
        sel = tuple(slice(0, 1) for _ in node.shape)
        node[sel]
    elif isinstance(node, rectizarr.Group):
        for _name, member in node.members()[:3]:
            _first_chunk_read(member)
        node.attrs.asdict()


def _entry_points(path: str) -> list[Callable[[MemoryStore], Any]]:
    return [
        lambda s: rectizarr.open_array(s, path=path, mode="r"),
        lambda s: rectizarr.open(s, path=path, mode="r"),
        lambda s: rectizarr.open_group(s, path=path, mode="r"),
        lambda s: rectizarr.open_group(s, mode="r")[path] if path else rectizarr.open_group(s, mode="r"),
    ]


def check_case(contents: dict[str, bytes], key: str, path: str, data: bytes) -> list[BaseException | None]:
    """Open the store with ``key`` replaced by ``data`` through every entry point; check the outcome."""
    outcomes: list[BaseException | None] = []
    for entry in _entry_points(path):
        store = MemoryStore()
        store.set_many({**contents, key: data})
        store = store.with_read_only()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _first_chunk_read(entry(store))
            outcomes.append(None)
        except RectizarrError as e:
            if not str(e).strip():
                raise AssertionError(f"{type(e).__name__} with an empty message for {data[:300]!r}") from e
            outcomes.append(e)
        except TimeoutError:
            raise
        except BaseException as e:
            raise AssertionError(
                f"{type(e).__name__}: {e} (not a RectizarrError) for {key} = {data[:500]!r}"
            ) from e
    return outcomes
