"""zarr-python's names, each called in zarr-python and in rectizarr on the same arguments (on a store of
its own), with the results compared. The table is the contract: a row per name users type."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from tests.refs import zarr_python

try:
    import zarr
except (
    ImportError
):  # zarr-python >= 3.2 needs Python >= 3.12: the comparisons skip (zarr_python()), the rest run
    zarr = None

pytestmark = pytest.mark.filterwarnings(
    "ignore:Consolidated metadata is currently not part", "ignore::UserWarning"
)  # zarr-python's ZarrUserWarning among them
DATA = np.arange(60, dtype="i4").reshape(6, 10)


def _summary(x: Any) -> Any:
    """What is compared: arrays by shape, dtype, chunks, fill value and values; groups by members."""
    if isinstance(x, zarr.Array | rectizarr.Array):
        return (
            "array",
            x.shape,
            np.dtype(x.dtype),
            tuple(x.chunks),
            np.asarray(x.fill_value).item(),
            np.asarray(x[...]).tolist(),
        )
    if isinstance(x, zarr.Group | rectizarr.Group):
        return ("group", sorted(x.keys()), dict(x.attrs))
    if isinstance(x, dict):
        return {k: _summary(v) for k, v in x.items()}
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype, x.tolist())
    if isinstance(x, tuple | list) and x and hasattr(x[0], "to_dict"):
        return [c.to_dict() for c in x]
    if hasattr(x, "to_dict"):
        return x.to_dict()
    return x


def _sharded(lib: Any, root: Path) -> Any:
    a = lib.create_array(str(root / "s"), shape=(20, 20), dtype="f4", chunks=(5, 5), shards=(10, 10))
    a[:10, :10] = 1.0
    return a


def _group(lib: Any, root: Path) -> Any:
    g = lib.open_group(str(root / "g"))  # default mode "a": creates
    g.create_group("sub").create_group("leaf")
    g.create_array("x", shape=(4,), dtype="i2", chunks=(2,))
    g["data"] = DATA  # assignment stores an array
    return g


CASES: dict[str, Callable[[Any, Path], Any]] = {
    "zeros": lambda lib, root: lib.zeros((6, 10), chunks=(3, 5), dtype="i4", store=str(root / "z")),
    "ones": lambda lib, root: lib.ones((6, 10), chunks=(3, 5), dtype="f8"),
    "full": lambda lib, root: lib.full((6, 10), 7, chunks=(3, 5), dtype="i2"),
    "empty": lambda lib, root: lib.empty((6, 10), chunks=(3, 5), dtype="u1").shape,
    "zeros_like ndarray": lambda lib, root: lib.zeros_like(DATA, chunks=(3, 5)),
    "ones_like array": lambda lib, root: lib.ones_like(lib.zeros((6, 10), chunks=(2, 5), dtype="i8")),
    "full_like array": lambda lib, root: lib.full_like(
        lib.zeros((6, 10), chunks=(2, 5), dtype="i8"), fill_value=3
    ),
    "empty_like": lambda lib, root: (lambda a: (a.shape, a.dtype, a.chunks))(
        lib.empty_like(DATA, chunks=(3, 5))
    ),
    "array": lambda lib, root: lib.array(DATA, chunks=(3, 4)),
    "array dtype": lambda lib, root: lib.array(DATA, chunks=(3, 4), dtype="f4"),
    "create_array data=": lambda lib, root: lib.create_array(str(root / "d"), data=DATA, chunks=(4, 4)),
    "save/load one": lambda lib, root: (lib.save(str(root / "one"), DATA), lib.load(str(root / "one")))[1],
    # zarr-python 3.4.2's load() of a group raises NotImplementedError: both stores are read back by rectizarr
    "save many": lambda lib, root: (
        lib.save(str(root / "many"), DATA, b=DATA * 2),
        rectizarr.load(str(root / "many")),
    )[1],
    "group": lambda lib, root: lib.group(str(root / "grp"), attributes={"a": 1}),
    "open default mode creates": lambda lib, root: lib.open(str(root / "new")),
    "open_group default mode creates": lambda lib, root: lib.open_group(str(root / "new2")),
    "open_consolidated": lambda lib, root: (
        lib.consolidate_metadata(str(root / "g")) if _group(lib, root) else 0,
        lib.open_consolidated(str(root / "g")),
    )[1],
    "Group.get": lambda lib, root: (lambda g: (_summary(g.get("x")), g.get("missing"), g.get("missing", 5)))(
        _group(lib, root)
    ),
    "Group setitem": lambda lib, root: _group(lib, root)["data"],
    # zarr-python lists members in store order, rectizarr sorted by path: compared as sets
    "Group.members(max_depth=None)": lambda lib, root: sorted(
        k for k, _ in _group(lib, root).members(max_depth=None)
    ),
    "Group.members()": lambda lib, root: sorted(k for k, _ in _group(lib, root).members()),
    "Group.members(max_depth=1)": lambda lib, root: sorted(
        k for k, _ in _group(lib, root).members(max_depth=1)
    ),
    "Group.array_keys": lambda lib, root: sorted(_group(lib, root).array_keys()),
    "Group.group_keys": lambda lib, root: sorted(_group(lib, root).group_keys()),
    "Group missing key is a KeyError": lambda lib, root: _raises(
        lambda: _group(lib, root)["missing"], KeyError
    ),
    "Array.nchunks sharded": lambda lib, root: _sharded(lib, root).nchunks,
    "Array.nchunks_initialized sharded": lambda lib, root: _sharded(lib, root).nchunks_initialized,
    "Array.nbytes_stored()": lambda lib, root: isinstance(_sharded(lib, root).nbytes_stored(), int),
    "Array.compressors": lambda lib, root: _sharded(lib, root).compressors,
    "Array.filters": lambda lib, root: _sharded(lib, root).filters,
    "Array.serializer": lambda lib, root: _sharded(lib, root).serializer,
    "Array.info_complete()": lambda lib, root: "No. bytes stored" in str(_sharded(lib, root).info_complete()),
    "Array.append returns shape": lambda lib, root: lib.array(DATA, chunks=(3, 4)).append(DATA),
    "open_group on an array": lambda lib, root: (
        lib.create_array(str(root / "arr"), data=DATA),
        _raises(lambda: lib.open_group(str(root / "arr"), mode="r"), ValueError),
    )[1],
}


def _raises(call: Callable[[], Any], kind: type[BaseException]) -> str:
    try:
        call()
    except kind:
        return f"raised {kind.__name__}"
    return "no error"


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_result_as_zarr_python(name: str, tmp_path: Path) -> None:
    theirs = _summary(CASES[name](zarr_python(), tmp_path / "zarr"))
    ours = _summary(CASES[name](rectizarr, tmp_path / "rectizarr"))
    assert ours == theirs


def test_names_are_callables_not_modules() -> None:
    for name in ("array", "group", "zeros", "ones", "full", "empty", "save", "load", "open_consolidated"):
        assert callable(getattr(rectizarr, name)), name
    assert isinstance(rectizarr.array([1, 2, 3]), rectizarr.Array)
    assert isinstance(rectizarr.group(), rectizarr.Group)


def test_load_of_a_group_gives_its_arrays(tmp_path: Path) -> None:
    rectizarr.save(tmp_path / "g", DATA, b=DATA * 2)
    out = rectizarr.load(tmp_path / "g")
    assert sorted(out) == ["arr_0", "b"] and (out["b"] == DATA * 2).all()
    missing = rectizarr.open_group(tmp_path / "g", mode="r")
    with pytest.raises(rectizarr.NodeNotFoundError, match="no Zarr node") as info:
        missing["nope"]
    assert isinstance(info.value, KeyError) and str(tmp_path) in str(info.value)


def test_saving_one_array_where_a_node_is_refuses_as_zarr_python(tmp_path: Path) -> None:
    """``save(path, a)`` onto an existing array or group: zarr-python refuses (ContainsArrayError /
    ContainsGroupError, ValueErrors) and changes nothing; rectizarr replaced it, a whole hierarchy too."""
    rectizarr.save(tmp_path / "a", DATA)
    g = rectizarr.group(tmp_path / "g")
    g.create_array("precious", shape=(2,), dtype="i4")
    for where in ("a", "g"):
        with pytest.raises(ValueError):  # NodeExistsError, caught as zarr-python users catch its errors
            rectizarr.save(tmp_path / where, DATA * 3)
    assert rectizarr.load(tmp_path / "a").tolist() == DATA.tolist()
    assert list(rectizarr.open_group(tmp_path / "g").keys()) == ["precious"]


def test_create_is_zarr_pythons_create() -> None:
    """``rectizarr.create`` was a module; zarr-python's ``zarr.create(shape, ...)`` makes an array."""
    zarr = zarr_python()
    for kwargs in ({"chunks": 5, "dtype": "i4"}, {}, {"fill_value": 3, "dtype": "u1", "chunks": (4,)}):
        a = rectizarr.create(10, store={}, **kwargs)
        z = zarr.create(10, store={}, **kwargs)
        assert (a.shape, a.dtype, a.chunks, a.fill_value) == (z.shape, z.dtype, z.chunks, z.fill_value)
        assert a[...].tolist() == z[...].tolist()
    b = rectizarr.create((3, 4), store={}, path="x/y", attributes={"u": 1}, zarr_format=2)
    assert b.path == "x/y" and b.attrs["u"] == 1 and b.metadata.zarr_format == 2


@pytest.mark.parametrize("make", ["zeros", "ones", "full", "empty", "array", "save", "group"])
def test_convenience_functions_write_zarr_v2_when_asked(tmp_path: Path, make: str) -> None:
    """``zarr_format=2`` works wherever zarr-python takes it (it was refused outside create_array and
    create_group); a ``*_like`` of a v2 array is v2 with its codecs."""
    path = tmp_path / "x"
    calls = {
        "zeros": lambda: rectizarr.zeros((4,), store=path, chunks=(2,), zarr_format=2),
        "ones": lambda: rectizarr.ones((4,), store=path, chunks=(2,), zarr_format=2),
        "full": lambda: rectizarr.full((4,), 7, store=path, chunks=(2,), zarr_format=2),
        "empty": lambda: rectizarr.empty((4,), store=path, chunks=(2,), zarr_format=2),
        "array": lambda: rectizarr.array(DATA, store=path, zarr_format=2),
        "save": lambda: rectizarr.save(path, DATA, zarr_format=2),
        "group": lambda: rectizarr.group(path, zarr_format=2),
    }
    calls[make]()
    assert (path / (".zgroup" if make == "group" else ".zarray")).exists() and not (
        path / "zarr.json"
    ).exists()
    if make != "group":
        a = rectizarr.open_array(path, mode="r")
        like = rectizarr.zeros_like(a, store=tmp_path / "like")
        assert like.metadata.zarr_format == 2 and like.metadata.v2 == {
            **a.metadata.v2,
            "fill_value": like.metadata.v2["fill_value"],
        }
        assert rectizarr.load(path, zarr_format=2).shape == a.shape


def test_open_consolidated_without_consolidated_metadata_fails_at_open(tmp_path: Path) -> None:
    """zarr-python raises at ``open_consolidated`` (a ValueError a fallback catches); it raised only at the
    first lookup."""
    rectizarr.group(tmp_path / "g").create_array("x", shape=(2,), dtype="i4")
    with pytest.raises(ValueError, match="no consolidated metadata"):
        rectizarr.open_consolidated(tmp_path / "g")
    rectizarr.consolidate_metadata(tmp_path / "g")
    assert list(rectizarr.open_consolidated(tmp_path / "g").keys()) == ["x"]


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_zarr_python_spellings_of_chunks_and_key_encodings(zarr_format: int) -> None:
    """``chunks=(-1, 10)`` is the whole first axis, and ``chunk_key_encoding={"name": ..., "separator": ...}``
    the flat form, as zarr-python takes them (both were MetadataErrors for Zarr v3)."""
    a = rectizarr.create_array(
        rectizarr.MemoryStore(), shape=(100, 50), dtype="i4", chunks=(-1, 10), zarr_format=zarr_format
    )
    assert a.chunks == (100, 10)
    name = "default" if zarr_format == 3 else "v2"
    b = rectizarr.create_array(
        rectizarr.MemoryStore(),
        shape=(4,),
        dtype="i4",
        chunks=(2,),
        zarr_format=zarr_format,
        chunk_key_encoding={"name": name, "separator": "."},
    )
    b[...] = 1
    chunks = sorted(k for k in b.store.list_prefix("") if k not in ("zarr.json", ".zarray", ".zattrs"))
    assert chunks == (["c.0", "c.1"] if zarr_format == 3 else ["0", "1"])


def test_zarr_python_names_for_node_facts() -> None:
    """``basename``, ``update_attributes`` (returns the node), ``cdata_shape`` and ``nmembers``, as
    zarr-python spells them."""
    g = rectizarr.group()
    a = g.create_array("x/y", shape=(10, 4), dtype="i4", chunks=(3, 2))
    assert (a.basename, g.basename, rectizarr.open_group(g.store, path="x").basename) == ("y", "", "x")
    assert a.update_attributes({"k": 1}) is a and a.attrs.asdict() == {"k": 1}
    assert g.update_attributes({"z": 2}) is g and g.attrs["z"] == 2
    assert a.cdata_shape == (4, 2) and g.nmembers == len(g) == 1


def test_a_copy_whose_source_shrinks_meanwhile_is_a_conflict_not_a_broadcast() -> None:
    """``copy`` / ``from_array`` / ``migrate`` copy region by region: a source shrunk by another writer
    meanwhile gave numpy's bare ValueError (11 of 30 CLI copies), or, one element left, would be broadcast
    over the region."""
    from rectizarr.api import copy_region
    from rectizarr.errors import ConflictError

    src = rectizarr.create_array(rectizarr.MemoryStore(), shape=(100,), dtype="i4", chunks=(10,))
    src[...] = np.arange(100)
    dst = rectizarr.create_array(rectizarr.MemoryStore(), shape=(100,), dtype="i4", chunks=(10,))
    copy_region(dst, src, (slice(0, 50),))
    for left in (60, 51):
        src.resize((left,))
        with pytest.raises(ConflictError, match="changed shape while being copied"):
            copy_region(dst, src, (slice(50, 100),))
    assert dst[...].tolist() == list(range(50)) + [0] * 50


def test_from_array_of_a_zarr_python_array_keeps_its_layout(tmp_path: Path) -> None:
    """``from_array(store, zarr_python_array)`` keeps its chunks, shards, fill value, dimension names and
    attributes, as for a rectizarr source (they were dropped: 1 MiB regular chunks, fill 0)."""
    zarr = zarr_python()
    src = zarr.create_array(
        str(tmp_path / "zp"),
        shape=(100,),
        dtype="i4",
        chunks=(10,),
        shards=(50,),
        fill_value=-1,
        dimension_names=["t"],
        attributes={"a": 1},
    )
    src[:60] = np.arange(60)
    out = rectizarr.from_array(rectizarr.MemoryStore(), src)
    assert (out.inner_chunk_shape, out.shards, out.fill_value, out.dimension_names) == (
        (10,),
        (50,),
        -1,
        ("t",),
    )
    assert out.attrs.asdict() == {"a": 1} and out[...].tolist() == list(range(60)) + [-1] * 40
