"""Groups and hierarchies (issue 6): names, ancestors, listing, deletion, consolidated metadata."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr.errors import (
    LenientMetadataWarning,
    MetadataError,
    NodeExistsError,
    NodeNotFoundError,
    ReadOnlyError,
    UnsupportedError,
)
from rectizarr.stores import CountingStore, MemoryStore
from tests.refs import zarr_python


def doc(store: MemoryStore, key: str) -> dict:
    return json.loads(store.get(key))


def test_create_open_and_attrs_write_through() -> None:
    s = MemoryStore()
    g = rectizarr.create_group(s, attributes={"title": "t"})
    assert doc(s, "zarr.json") == {"zarr_format": 3, "node_type": "group", "attributes": {"title": "t"}}
    g.attrs["x"] = 1
    assert rectizarr.open_group(s).attrs.asdict() == {"title": "t", "x": 1}
    assert isinstance(rectizarr.open(s), rectizarr.Group)
    with pytest.raises(NodeExistsError):
        rectizarr.create_group(s)
    rectizarr.create_group(s, overwrite=True)
    assert rectizarr.open_group(s).attrs.asdict() == {}


@pytest.mark.parametrize("bad", ["", "a/b", ".", "..", "...", "zarr.json"])
def test_invalid_node_names_rejected(bad: str) -> None:
    g = rectizarr.create_group(MemoryStore())
    with pytest.raises(MetadataError):
        g.create_group(bad) if bad != "a/b" else rectizarr.nodes.check_name(bad)


@pytest.mark.parametrize("good", ["ok.name", "ünï", "a-b_c"])
def test_valid_node_names(good: str) -> None:
    g = rectizarr.create_group(MemoryStore())
    assert g.create_group(good).path == good
    assert good in g


def test_creating_nested_writes_explicit_ancestors_without_clobbering() -> None:
    s = MemoryStore()
    rectizarr.create_group(s, attributes={"keep": True})
    rectizarr.create_array(s, name="a/b/c", shape=(2,), dtype="i1", chunks=(2,))
    assert doc(s, "zarr.json")["attributes"] == {"keep": True}
    assert doc(s, "a/zarr.json") == {"zarr_format": 3, "node_type": "group", "attributes": {}}
    assert doc(s, "a/b/zarr.json")["node_type"] == "group"
    assert doc(s, "a/b/c/zarr.json")["node_type"] == "array"
    g = rectizarr.open_group(s)
    assert isinstance(g["a/b/c"], rectizarr.Array) and isinstance(g["a"]["b"], rectizarr.Group)


def test_members_skip_prefixes_without_metadata() -> None:
    s = MemoryStore()
    g = rectizarr.create_group(s)
    g.create_array("arr", shape=(3,), dtype="f4", chunks=(2,))
    g.create_group("sub")
    s.set("implicit/deeper/zarr.json", json.dumps({"zarr_format": 3, "node_type": "group"}).encode())
    s.set("__meta/zarr.json", json.dumps({"zarr_format": 3, "node_type": "group"}).encode())
    assert g.keys() == ["__meta", "arr", "sub"]  # a '__' name is a member, as in zarr-python
    assert [n for n, _ in g.arrays()] == ["arr"] and [n for n, _ in g.groups()] == ["__meta", "sub"]
    assert list(g) == ["__meta", "arr", "sub"] and len(g) == 3
    assert "implicit" not in g
    with pytest.raises(NodeNotFoundError):
        g["implicit"]
    with pytest.raises(NodeNotFoundError):
        rectizarr.open_group(s, path="missing", mode="r+")
    assert isinstance(rectizarr.open_group(s, path="missing"), rectizarr.Group)  # mode "a" creates


def test_delete_subtree_and_array() -> None:
    s = MemoryStore()
    g = rectizarr.create_group(s)
    a = g.create_array("x/y", shape=(4,), dtype="i4", chunks=(2,))
    a[:] = 1
    g.create_array("z", shape=(4,), dtype="i4", chunks=(2,))[:] = 2
    g.delete("x")
    assert not any(k.startswith("x/") for k in s.list_prefix(""))
    del g["z"]
    assert list(s.list_prefix("")) == ["zarr.json"]
    with pytest.raises(NodeNotFoundError):
        g.delete("nope")


def test_require_group_and_array() -> None:
    g = rectizarr.create_group(MemoryStore())
    sub = g.require_group("s")
    assert g.require_group("s").path == sub.path
    a = g.require_array("a", shape=(3,), dtype="i2", chunks=(3,))
    a[:] = 7
    assert np.array_equal(g.require_array("a", shape=(3,), dtype="i2")[:], [7, 7, 7])
    with pytest.raises(NodeExistsError):
        g.require_array("a", shape=(4,), dtype="i2")
    with pytest.raises(NodeExistsError):
        g.require_group("a")
    # as zarr-python (and h5py's require_dataset): a dtype the stored one casts to is enough, unless exact
    assert g.require_array("a", shape=(3,), dtype="f8").dtype == np.dtype("i2")
    with pytest.raises(NodeExistsError, match="is not float64"):
        g.require_array("a", shape=(3,), dtype="f8", exact=True)
    with pytest.raises(NodeExistsError, match="cannot be cast to int8"):
        g.require_array("a", shape=(3,), dtype="i1")
    assert g.require_array("a", shape=3).dtype == np.dtype("i2")
    assert g.require_array("b", shape=(2,), dtype="f4", exact=True, chunks=(2,)).dtype == np.dtype("f4")


def test_tree_and_info() -> None:
    g = rectizarr.create_group(MemoryStore())
    g.create_array("b", shape=(365,), dtype="f4", chunks=[[31, 28, 306]])
    g.create_group("a").create_array("c", shape=(2, 2), dtype="u1", chunks=(1, 1), shards=(2, 2))
    tree = g.tree()
    assert tree.splitlines() == [
        "/",
        "├── a/",
        "│   └── c (2, 2) uint8 (regular, sharded)",
        "└── b (365,) float32 (rectilinear)",
    ]
    assert "Members     : 2 (1 arrays, 1 groups)" in g.info


def test_read_only_group() -> None:
    s = MemoryStore()
    rectizarr.create_group(s).create_group("x")
    r = rectizarr.open_group(s, mode="r")
    with pytest.raises(ReadOnlyError):
        r.create_group("y")
    with pytest.raises(ReadOnlyError):
        r.attrs["a"] = 1
    with pytest.raises(ReadOnlyError):
        r.delete("x")
    assert r["x"].read_only


def test_consolidated_metadata_layout_and_use() -> None:
    s = MemoryStore()
    g = rectizarr.create_group(s, attributes={"a": 1})
    g.create_array("scalar", shape=(), dtype="i4", chunks=())
    g.create_group("sub").create_array("arr", shape=(4,), dtype="f8", chunks=[[1, 3]])
    rectizarr.consolidate_metadata(s)
    cm = doc(s, "zarr.json")["consolidated_metadata"]
    assert cm["kind"] == "inline" and cm["must_understand"] is False
    assert list(cm["metadata"]) == ["scalar", "sub", "sub/arr"]
    assert cm["metadata"]["sub"]["consolidated_metadata"] == {
        "kind": "inline",
        "must_understand": False,
        "metadata": {},
    }
    assert cm["metadata"]["sub/arr"]["chunk_grid"]["name"] == "rectilinear"
    spy = CountingStore(s)
    g2 = rectizarr.open_group(spy, mode="r")
    spy.reset()
    assert g2.keys() == ["scalar", "sub"]
    assert g2["sub/arr"].shape == (4,)
    assert spy.lists == 0 and len(spy.requests) == 1  # the root document read once (then its version checked)


def test_consolidated_metadata_stays_current_under_our_writes() -> None:
    s = MemoryStore()
    g = rectizarr.create_group(s)
    g.create_array("a", shape=(4,), dtype="i4", chunks=(2,))
    rectizarr.consolidate_metadata(s)
    g.create_array("b", shape=(2,), dtype="i4", chunks=(2,))  # created after consolidation
    rectizarr.create_array(s, name="deep/er/c", shape=(1,), dtype="i1", chunks=(1,))
    r = rectizarr.open_group(s, mode="r")
    assert r.keys() == ["a", "b", "deep"]
    assert set(doc(s, "zarr.json")["consolidated_metadata"]["metadata"]) == {
        "a",
        "b",
        "deep",
        "deep/er",
        "deep/er/c",
    }
    g["a"].resize(10)
    g["a"].attrs["units"] = "m"
    assert r["a"].shape == (10,) and r["a"].attrs["units"] == "m"
    g.delete("deep")
    assert r.keys() == ["a", "b"]
    assert set(doc(s, "zarr.json")["consolidated_metadata"]["metadata"]) == {"a", "b"}
    g.attrs["title"] = "kept"
    assert "consolidated_metadata" in doc(s, "zarr.json")
    assert rectizarr.open_group(s, use_consolidated=False).keys() == ["a", "b"]


@pytest.mark.parametrize("overwrite", [False, True])
def test_creating_a_deep_node_reads_each_ancestor_a_few_times(overwrite: bool) -> None:
    """Each ancestor's document is read a bounded number of times, however deep the node: once when the
    groups the node needs are looked for, then by the update through the consolidating root's commit
    record (read with its version to prepare, again at the clean-up); an overwrite is a deletion and a
    creation, two such updates of the root and the node."""
    s = CountingStore(MemoryStore())
    rectizarr.create_group(s)
    rectizarr.consolidate_metadata(s)
    if overwrite:
        rectizarr.create_group(s, path="a/b/c/x")
    s.reset()
    rectizarr.create_array(s, name="a/b/c/x", shape=(4,), dtype="i4", chunks=(2,), overwrite=overwrite)
    reads = [k for k, _ in s.requests]
    for key in ("a/zarr.json", "a/b/zarr.json", "a/b/c/zarr.json"):
        assert reads.count(key) == 3, (key, reads)
    assert reads.count("zarr.json") == (5 if overwrite else 3), reads
    listed = doc(s, "zarr.json")["consolidated_metadata"]["metadata"]
    assert set(listed) == {"a", "a/b", "a/b/c", "a/b/c/x"}
    assert listed["a/b/c/x"]["node_type"] == "array"
    assert rectizarr.open_group(s, mode="r")["a/b/c/x"].shape == (4,)
    s.reset()
    rectizarr.create_group(s, path="a/b/d")  # ancestors exist now: one read to look, one to prepare
    assert [k for k, _ in s.requests].count("a/b/zarr.json") == 2
    assert set(doc(s, "zarr.json")["consolidated_metadata"]["metadata"]) == {
        "a",
        "a/b",
        "a/b/c",
        "a/b/c/x",
        "a/b/d",
    }


def test_use_consolidated_flags() -> None:
    s = MemoryStore()
    g = rectizarr.create_group(s)
    g.create_group("x")
    with pytest.raises(MetadataError):
        rectizarr.open_group(s, use_consolidated=True).keys()
    rectizarr.consolidate_metadata(s)
    # Someone else (not rectizarr) adds a node: only a listing sees it.
    s.set("y/zarr.json", json.dumps({"zarr_format": 3, "node_type": "group"}).encode())
    assert rectizarr.open_group(s).keys() == ["x"]
    assert rectizarr.open_group(s, use_consolidated=False).keys() == ["x", "y"]


def test_ten_thousand_children_listed_without_a_request_per_member() -> None:
    s = MemoryStore()
    rectizarr.create_group(s)
    meta = json.dumps(
        {
            "zarr_format": 3,
            "node_type": "array",
            "shape": [10],
            "data_type": "int32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [10]}},
            "chunk_key_encoding": {"name": "default"},
            "fill_value": 0,
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        }
    ).encode()
    s.set_many({f"a{i:05d}/zarr.json": meta for i in range(10_000)})
    rectizarr.consolidate_metadata(s)
    spy = CountingStore(s)
    g = rectizarr.open_group(spy, mode="r")
    spy.reset()
    t0 = time.perf_counter()
    members = g.arrays()
    elapsed = time.perf_counter() - t0
    assert len(members) == 10_000 and members[-1][1].shape == (10,)
    assert len(spy.requests) == 1 and spy.lists == 0
    print(
        f"10,000 consolidated members listed and opened in {elapsed:.2f} s with {len(spy.requests)} request"
    )


def test_zarr_python_consolidated_hierarchy(tmp_path) -> None:
    zarr = zarr_python()
    root = zarr.open_group(str(tmp_path / "h.zarr"), mode="w", attributes={"a": 1})
    root.create_array("scalar", shape=(), dtype="i4", fill_value=3)
    sub = root.create_group("sub")
    arr = sub.create_array("arr", shape=(5, 4), chunks=(2, 2), dtype="f4")
    arr[:] = np.arange(20, dtype="f4").reshape(5, 4)
    zarr.consolidate_metadata(str(tmp_path / "h.zarr"))
    g = rectizarr.open_group(str(tmp_path / "h.zarr"), mode="r")
    assert g.metadata.consolidated_metadata is not None
    assert g.keys() == ["scalar", "sub"]
    assert g["scalar"][()] == 3
    assert np.array_equal(g["sub/arr"][:], np.arange(20, dtype="f4").reshape(5, 4))
    assert g.attrs["a"] == 1


@pytest.mark.parametrize("bad", ["", ".", "..", "zarr.json", "x/", "x//y", "x/.."])
def test_consolidated_entries_with_invalid_names_are_ignored_and_reported(bad: str) -> None:
    """An entry whose name cannot be a node's (``""`` made the root group list itself as an array) is
    skipped with a warning naming the JSON path, like the listing skips such names; validate reports it."""
    store = MemoryStore()
    g = rectizarr.create_group(store)
    g.create_array("x", shape=(2,), dtype="u1", chunks=(1,))
    rectizarr.consolidate_metadata(store)
    doc = json.loads(bytes(store.get("zarr.json") or b""))
    entries = doc["consolidated_metadata"]["metadata"]
    entries[bad] = entries["x"]
    store.set("zarr.json", json.dumps(doc).encode())
    g = rectizarr.open_group(store, mode="r")
    with pytest.warns(LenientMetadataWarning, match=re.escape(f"metadata[{json.dumps(bad)}]")):
        members = g.members()
    assert [(n, type(m).__name__, m.path) for n, m in members] == [("x", "Array", "x")]
    report = rectizarr.validate(store)
    assert [(i.rule, i.json_path) for i in report.errors] == [
        ("consolidated.entry_name", f"$.consolidated_metadata.metadata[{json.dumps(bad)}]")
    ]


def test_consolidated_entries_are_checked_and_parsed_once_per_document(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """keys() then g[name] for every member: each entry's name checked and its metadata parsed once (this
    was quadratic: every lookup checked all 200 names again, and parsed its member a second time)."""
    from rectizarr import nodes

    store = MemoryStore()
    g = rectizarr.create_group(store)
    for i in range(50):
        g.create_array(f"a{i:02d}", shape=(2,), dtype="u1", chunks=(1,), attributes={"i": i})
    rectizarr.consolidate_metadata(store)
    doc = json.loads(bytes(store.get("zarr.json") or b""))
    doc["consolidated_metadata"]["metadata"]["bad/"] = doc["consolidated_metadata"]["metadata"]["a00"]
    store.set("zarr.json", json.dumps(doc).encode())
    checked, parsed = [], []
    real_check, real_parse = nodes.member_path_problem, nodes.node_from_json
    monkeypatch.setattr(nodes, "member_path_problem", lambda rel: checked.append(rel) or real_check(rel))
    monkeypatch.setattr(
        nodes, "node_from_json", lambda d, key=None: parsed.append(d["attributes"]["i"]) or real_parse(d, key)
    )
    r = rectizarr.open_group(store, mode="r")
    with pytest.warns(LenientMetadataWarning) as caught:
        assert [r[name].attrs["i"] for name in r.keys()] == list(range(50))
        assert "a07" in r and "zz" not in r
    assert len(caught) == 1  # the bad name, reported once
    assert sorted(checked) == sorted([*(f"a{i:02d}" for i in range(50)), "bad/"])
    assert sorted(parsed) == list(range(50))  # each entry parsed once
    with pytest.warns(LenientMetadataWarning):  # g's write keeps the consolidated metadata current
        g["a01"].attrs["i"] = 100
    r.refresh()  # r sees it: a new document, checked anew
    with pytest.warns(LenientMetadataWarning):
        assert r["a01"].attrs["i"] == 100


def test_a_member_whose_name_cannot_be_a_key_is_left_out_of_the_listing(tmp_path: Any) -> None:
    """zarr-python writes a member named ``pct%2F`` as a plain directory; as a store key its
    percent-encoding decodes to a '/', which rectizarr refuses. It is left out of the listing with a
    warning; the group's other members still list (the whole listing raised)."""
    import shutil

    from rectizarr.errors import LenientMetadataWarning

    g = rectizarr.create_group(str(tmp_path / "g"))
    g.create_array("ok", shape=(2,), dtype="i4", chunks=(2,))
    shutil.copytree(tmp_path / "g" / "ok", tmp_path / "g" / "pct%2F")
    with pytest.warns(LenientMetadataWarning, match="pct%2F"):
        assert rectizarr.open_group(str(tmp_path / "g"), mode="r").keys() == ["ok"]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_an_error_in_a_consolidated_entry_names_the_consolidating_document(
    tmp_path: Any, zarr_format: int
) -> None:
    """A bad entry of the consolidated metadata is in the group's document (``.zmetadata``, or the root
    ``zarr.json``), at the entry's JSON path; it was blamed on the member's own ``zarr.json``, which is valid."""
    import json

    from rectizarr.errors import MetadataError

    root = tmp_path / "g"
    g = rectizarr.create_group(str(root), zarr_format=zarr_format)
    g.create_array("a", shape=(2,), chunks=(2,), dtype="i4")
    rectizarr.consolidate_metadata(str(root))
    name = ".zmetadata" if zarr_format == 2 else "zarr.json"
    doc = json.loads((root / name).read_text())
    if zarr_format == 2:
        doc["metadata"]["a/.zarray"]["dtype"] = "<U2000000000"
        where = '$.metadata["a/.zarray"].dtype'
    else:
        doc["consolidated_metadata"]["metadata"]["a"]["shape"] = [-1]
        where = '$.consolidated_metadata.metadata["a"].shape'
    (root / name).write_text(json.dumps(doc))
    with pytest.raises(MetadataError) as exc:
        rectizarr.open_group(str(root), mode="r")["a"]
    assert exc.value.key == name and exc.value.path is not None and exc.value.path.startswith(where)
    assert rectizarr.open_group(str(root), mode="r", use_consolidated=False)["a"].shape == (2,)


def test_a_creator_that_loses_the_race_for_the_node_keeps_the_groups_it_made() -> None:
    """Two writers create the v2 group ``x`` in an empty store: one makes the root ``.zgroup`` and then
    loses the race for ``x/.zgroup``. The root group stays: the winner's group sits under it (it was
    deleted again as the loser's rollback)."""
    store = rectizarr.MemoryStore()
    real = type(store).set_if

    def they_make_x_first(self: Any, key: str, value: Any, version: Any) -> bool:
        if key == "x/.zgroup":
            real(self, key, value, version)  # (the other writer's identical document lands first)
        return real(self, key, value, version)

    store.set_if = they_make_x_first.__get__(store)  # type: ignore[method-assign]
    with pytest.raises(NodeExistsError):
        rectizarr.create_group(store, path="x", zarr_format=2)
    assert store.get(".zgroup") is not None and store.get("x/.zgroup") is not None


def test_setitem_makes_an_array_in_the_groups_format(tmp_path: Any) -> None:
    """``g[name] = data`` on a Zarr v2 group makes a v2 array, as zarr-python does (not a v3 array, which
    cannot sit under a v2 group); data that v2 cannot hold (a sharded source) is a clear UnsupportedError."""
    g = rectizarr.create_group(str(tmp_path / "g.zarr"), zarr_format=2)
    g["x"] = np.arange(5.0)
    src = rectizarr.create_array(
        MemoryStore(), shape=(6, 4), chunks=(3, 2), dtype="i4", dimension_names=("y", "x")
    )
    src[...] = np.arange(24).reshape(6, 4)
    g["y"] = src
    assert g["x"].metadata.zarr_format == 2 and g["y"].metadata.zarr_format == 2
    np.testing.assert_array_equal(g["y"][...], np.arange(24).reshape(6, 4))
    assert g["y"].dimension_names == ("y", "x")
    sharded = rectizarr.create_array(MemoryStore(), shape=(6, 4), chunks=(3, 2), shards=(6, 4), dtype="i4")
    with pytest.raises(UnsupportedError):
        g["z"] = sharded
    assert sorted(g.keys()) == ["x", "y"]
    np.testing.assert_array_equal(
        zarr_python().open_group(str(tmp_path / "g.zarr"), mode="r")["x"][:], np.arange(5.0)
    )
    g3 = rectizarr.create_group(MemoryStore())
    g3["a"] = np.arange(3)
    assert g3["a"].metadata.zarr_format == 3


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_dunder_names_are_written_listed_and_consolidated(zarr_format: int, tmp_path: Path) -> None:
    """Names starting with '__' (the spec reserves them; rectizarr invents none): written, listed and
    consolidated as zarr-python does, so xarray's ``__xarray_dataarray_variable__`` round-trips both ways."""
    zarr = pytest.importorskip("zarr")
    root = tmp_path / "d.zarr"
    g = rectizarr.create_group(str(root), zarr_format=zarr_format)
    g.create_array("__xarray_dataarray_variable__", shape=(3,), dtype="i4", chunks=(2,))[...] = [1, 2, 3]
    g.create_group("__sub").create_array("__a", shape=(1,), dtype="u1", chunks=(1,))
    rectizarr.consolidate_metadata(str(root))
    for consolidated in (True, False):
        r = rectizarr.open_group(str(root), mode="r", use_consolidated=consolidated)
        assert r.keys() == ["__sub", "__xarray_dataarray_variable__"]
        assert r["__xarray_dataarray_variable__"][...].tolist() == [1, 2, 3] and "__a" in r["__sub"]
    z = zarr.open_group(str(root), mode="r")
    assert sorted(z.keys()) == ["__sub", "__xarray_dataarray_variable__"]
    assert z["__xarray_dataarray_variable__"][...].tolist() == [1, 2, 3]
    zarr.open_group(str(root), mode="a", zarr_format=zarr_format).create_array(
        "__from_zp", shape=(1,), dtype="u1"
    )
    assert "__from_zp" in rectizarr.open_group(str(root), mode="r", use_consolidated=False)
