"""Chunk grids: parsing rules, derived quantities, serialisation and resize (chunk key encodings:
test_chunk_keys.py)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from rectizarr.core import grid_json
from rectizarr.core.grid import ChunkGrid, FixedDim, VaryingDim, compress_rle, expand_rle
from rectizarr.core.grid_json import parse_chunk_grid
from rectizarr.errors import MetadataError, SelectionError, UnsupportedError


def rect(*specs: Any) -> dict[str, Any]:
    return {"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": list(specs)}}


def reg(*sizes: int) -> dict[str, Any]:
    return {"name": "regular", "configuration": {"chunk_shape": list(sizes)}}


def edges(d: FixedDim | VaryingDim) -> list[int]:
    assert isinstance(d, VaryingDim)
    return d.edges.tolist()  # type: ignore[no-any-return]


def both(doc: Any, shape: tuple[int, ...]) -> ChunkGrid:
    """Parse from the decoded object and from raw bytes; both must give the same grid."""
    decoded = parse_chunk_grid(doc, shape)
    raw = parse_chunk_grid(msgspec.Raw(msgspec.json.encode(doc)), shape)
    assert decoded == raw
    assert decoded.kind == raw.kind
    return decoded


# --- the spec example (spec-notes §9 item 32) -----------------------------------------------------


def test_spec_example() -> None:
    g = both(rect(4, [1, 2, 3], [[4, 2]], [[1, 3], 3], [4, 4, 4]), (6,) * 5)
    assert [d.data_lens() for d in g.dims] == [(4, 2), (1, 2, 3), (4, 2), (1, 1, 1, 3), (4, 2)]
    assert g.grid_shape == (2, 3, 2, 4, 2)
    assert g.nchunks == 96
    assert g.chunk_shape((1, 2, 1, 3, 1)) == (4, 3, 4, 3, 4)
    assert g.chunk_region((1, 2, 1, 3, 1)) == (
        slice(4, 6),
        slice(3, 6),
        slice(4, 6),
        slice(3, 6),
        slice(4, 6),
    )
    assert isinstance(g.dims[0], FixedDim)
    assert all(isinstance(d, VaryingDim) for d in g.dims[1:])
    assert g.regular_chunk_shape is None
    # the third explicit edge of the last axis lies wholly past the extent: kept, not addressable
    assert g.dims[4].unique_edges().tolist() == [4]
    assert edges(g.dims[4]) == [4, 4, 4]


# --- dim-spec forms (item 33) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "lens", "edges"), [([5, 2], (5, 2), (5, 2)), ([[5, 2]], (5, 2), (5, 5)), (5, (5, 2), (5, 5))]
)
def test_dim_spec_forms_differ(spec: Any, lens: tuple[int, ...], edges: tuple[int, ...]) -> None:
    d = both(rect(spec), (7,)).dims[0]
    assert d.data_lens() == lens
    assert tuple(d.edge(i) for i in range(d.nchunks)) == edges


def test_single_explicit_edge_short_of_extent_rejected() -> None:
    with pytest.raises(MetadataError, match="less than the extent 7"):
        parse_chunk_grid(rect([5]), (7,))
    assert both(rect([5]), (5,)).dims[0] == VaryingDim.from_edges([5], 5)


# --- sums, overflow edges, zero extents (items 27, 29, 34) ---------------------------------------------


def test_overflowing_edges() -> None:
    d = both(rect([10, 20, 30, 20]), (25,)).dims[0]
    assert d.nchunks == 2
    assert d.data_lens() == (10, 15)
    assert d.edge(1) == 20
    assert d.data_len(1) == 15
    assert d.unique_edges().tolist() == [10, 20, 30]
    with pytest.raises(SelectionError):
        d.edge(2)


def test_sum_below_extent_rejected() -> None:
    with pytest.raises(MetadataError) as e:
        parse_chunk_grid(rect(4, [1, 2]), (6, 6))
    assert e.value.path == "$.chunk_grid.configuration.chunk_shapes[1]"


@pytest.mark.parametrize("spec", [[3, 3], [[2, 4]], [], 4])
def test_zero_extent_has_no_chunks(spec: Any) -> None:
    g = both(rect(spec, 3), (0, 3))
    assert g.grid_shape == (0, 1)
    assert g.nchunks == 0
    assert g.dims[0].data_lens() == ()
    assert not g.is_in_grid((0, 0))


def test_empty_list_needs_zero_extent() -> None:
    with pytest.raises(MetadataError, match="sum to 0"):
        parse_chunk_grid(rect([]), (1,))


def test_regular_zero_length_axis_then_grow() -> None:
    g = both(reg(1, 3), (0, 3))
    assert g.grid_shape == (0, 1)
    assert g.resize((5, 3)).grid_shape == (5, 1)


def test_chunk_larger_than_shape() -> None:
    g = both(reg(10), (3,))
    assert g.grid_shape == (1,)
    assert g.chunk_shape((0,)) == (10,)
    assert g.chunk_region((0,)) == (slice(0, 3),)


def test_zero_dimensional() -> None:
    for doc in (reg(), rect()):
        g = both(doc, ())
        assert (g.ndim, g.grid_shape, g.nchunks, g.chunk_shape(()), g.chunk_region(())) == (0, (), 1, (), ())
        assert g.is_in_grid(())
        assert g.to_json() == doc


# --- validation tables (items 28, 35, 36) ------------------------------------------------------------

P = "$.chunk_grid"
C = "$.chunk_grid.configuration"
S = "$.chunk_grid.configuration.chunk_shapes"


@pytest.mark.parametrize(
    ("doc", "shape", "path"),
    [
        (rect([[4, 0]]), (4,), f"{S}[0][0][1]"),
        (rect([[0, 2]]), (4,), f"{S}[0][0][0]"),
        (rect([[4, 2, 1]]), (4,), f"{S}[0][0]"),
        (rect([[4]]), (4,), f"{S}[0][0]"),
        (rect([4.0]), (4,), f"{S}[0][0]"),
        (rect([True]), (1,), f"{S}[0][0]"),
        (rect([2, 0, 2]), (4,), f"{S}[0][1]"),
        (rect([2, -1, 2]), (4,), f"{S}[0][1]"),
        (rect(4, 4, [1, 2, 0]), (6,) * 3, f"{S}[2][2]"),
        (rect([[4, 2], "x"]), (8,), f"{S}[0][1]"),
        (rect([[4, 2.0]]), (8,), f"{S}[0][0][1]"),
        (rect([2**63]), (4,), f"{S}[0][0]"),
        (rect([2**62, 2**62]), (4,), f"{S}[0]"),
        (rect(0), (4,), f"{S}[0]"),
        (rect(4.0), (4,), f"{S}[0]"),
        (rect(True), (4,), f"{S}[0]"),
        (rect("4"), (4,), f"{S}[0]"),
        (rect({"a": 1}), (4,), f"{S}[0]"),
        (rect(4), (4, 4), S),
        (rect(4, 4), (4,), S),
        ({"name": "rectilinear", "configuration": {"chunk_shapes": [4]}}, (4,), C),
        ({"name": "rectilinear", "configuration": {"kind": 1, "chunk_shapes": [4]}}, (4,), f"{C}.kind"),
        ({"name": "rectilinear", "configuration": {"kind": "inline"}}, (4,), C),
        ({"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": 4}}, (4,), S),
        (
            {"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": [4], "x": 1}},
            (4,),
            f"{C}.x",
        ),
        ({"name": "rectilinear"}, (4,), P),
        ("rectilinear", (4,), P),
        (reg(0), (4,), f"{C}.chunk_shape[0]"),
        (reg(-1), (4,), f"{C}.chunk_shape[0]"),
        ({"name": "regular", "configuration": {"chunk_shape": [2.0]}}, (4,), f"{C}.chunk_shape[0]"),
        ({"name": "regular", "configuration": {"chunk_shape": [False]}}, (4,), f"{C}.chunk_shape[0]"),
        (reg(2, 2), (4,), f"{C}.chunk_shape"),
        (reg(2), (4, 4), f"{C}.chunk_shape"),
        ({"name": "regular", "configuration": {"chunk_shape": [[2, 2]]}}, (4,), f"{C}.chunk_shape[0]"),
        ({"name": "regular", "configuration": {}}, (4,), C),
        ({"name": "regular", "configuration": {"chunk_shape": 4}}, (4,), f"{C}.chunk_shape"),
        ({"name": "regular", "configuration": {"chunk_shape": [4], "foo": 1}}, (4,), f"{C}.foo"),
        ({"name": "regular", "configuration": [4]}, (4,), C),
        ({"name": "regular"}, (4,), P),
        ({"name": "regular", "configuration": {"chunk_shape": [4]}, "extra": 1}, (4,), f"{P}.extra"),
        (
            {"name": "regular", "configuration": {"chunk_shape": [4]}, "must_understand": 0},
            (4,),
            f"{P}.must_understand",
        ),
        ({"configuration": {"chunk_shape": [4]}}, (4,), P),
        ({"name": 3, "configuration": {"chunk_shape": [4]}}, (4,), f"{P}.name"),
        ([4], (4,), P),
    ],
)
def test_invalid_grid(doc: Any, shape: tuple[int, ...], path: str) -> None:
    for value in (doc, msgspec.Raw(msgspec.json.encode(doc))):
        with pytest.raises(MetadataError) as e:
            parse_chunk_grid(value, shape)
        assert e.value.path == path
        assert type(e.value) is MetadataError


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        ({"name": "rectilinear", "configuration": {"kind": "foo", "chunk_shapes": [4]}}, f"{C}.kind"),
        ({"name": "regular_bounded", "configuration": {"chunk_shape": [4]}}, f"{P}.name"),
        ("tiled", f"{P}.name"),
    ],
)
def test_unsupported_grid(doc: Any, path: str) -> None:
    for value in (doc, msgspec.json.encode(doc)):
        with pytest.raises(UnsupportedError) as e:
            parse_chunk_grid(value, (4,))
        assert e.value.path == path


def test_invalid_json_bytes() -> None:
    with pytest.raises(MetadataError, match="invalid JSON"):
        parse_chunk_grid(b'{"name": "regular", ', (4,))


def test_invalid_shape() -> None:
    with pytest.raises(MetadataError) as e:
        parse_chunk_grid(reg(2, 2), (4, -1))
    assert e.value.path == "$.shape[1]"


def test_custom_path() -> None:
    with pytest.raises(MetadataError) as e:
        parse_chunk_grid(rect([0]), (4,), path="$.codecs[0].configuration.grid")
    assert e.value.path == "$.codecs[0].configuration.grid.configuration.chunk_shapes[0][0]"


def test_regular_zero_chunk_repaired_only_on_empty_axis() -> None:
    with pytest.warns(UserWarning, match="repaired to 1"):
        g = parse_chunk_grid(reg(0, 3), (0, 3))
    assert g.to_json() == reg(1, 3)
    with pytest.raises(MetadataError):
        parse_chunk_grid(reg(0, 3), (2, 3))


def test_must_understand_flag_accepted() -> None:
    doc = {"name": "regular", "configuration": {"chunk_shape": [4]}, "must_understand": True}
    assert both(doc, (8,)).to_json() == reg(4)


def test_json_whitespace_and_tuples() -> None:
    raw = b'{ "configuration" : { "chunk_shapes" : [ [ 1 ,\n 2 , 3 ] , [ [2 , 3] ] ] , "kind":"inline" },\n'
    raw += b' "name" : "rectilinear" }'
    g = parse_chunk_grid(raw, (6, 6))
    assert g == parse_chunk_grid(rect((1, 2, 3), ((2, 3),)), (6, 6))
    assert edges(g.dims[0]) == [1, 2, 3]


# --- golden documents ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shape", "edges"),
    [
        # zarr-python 3.4.2 (array.rectilinear_chunks on), verified output
        (
            '{"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": [[[3, 3], 1]]}}',
            (10,),
            [[3, 3, 3, 1]],
        ),
        (
            '{"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": [[[5, 2]], [2, 4, 1]]}}',
            (10, 7),
            [[5, 5], [2, 4, 1]],
        ),
        (
            '{"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": [[[3, 3], 1, [2, 2]]]}}',
            (14,),
            [[3, 3, 3, 1, 2, 2]],
        ),
        ('{"name": "regular", "configuration": {"chunk_shape": [10, 5]}}', (100, 37), [10, 5]),
        ('{"name": "regular", "configuration": {"chunk_shape": []}}', (), []),
        # tensorstore 0.1.86: compact, sorted keys, nothing extra
        ('{"configuration":{"chunk_shape":[4,4]},"name":"regular"}', (6, 8), [4, 4]),
    ],
)
def test_golden_documents(text: str, shape: tuple[int, ...], edges: list[Any]) -> None:
    doc = msgspec.json.decode(text)
    g = parse_chunk_grid(text.encode(), shape)
    assert g == parse_chunk_grid(doc, shape)
    assert g.to_json() == doc
    assert [d.edges.tolist() if isinstance(d, VaryingDim) else d.size for d in g.dims] == edges


def test_large_raw_document(monkeypatch: pytest.MonkeyPatch) -> None:
    def per_item_path(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a flat list of edges in raw JSON must not be parsed item by item")

    monkeypatch.setattr(grid_json, "edge_array", per_item_path)
    monkeypatch.setattr(grid_json, "rle_runs", per_item_path)
    rng = np.random.default_rng(0)
    edges = rng.integers(1, 1000, 10**6)
    doc = msgspec.json.encode(rect(edges.tolist(), 7))
    extent = int(edges.sum()) - int(edges[-1]) + 1  # the last edge overhangs
    g = parse_chunk_grid(msgspec.Raw(doc), (extent, 70))
    d = g.dims[0]
    assert isinstance(d, VaryingDim)
    assert g.grid_shape == (10**6, 10)
    assert d.offset(10**6 - 2) == int(edges[:-2].sum())
    assert d.data_len(10**6 - 1) == 1
    assert d.chunk_of(extent - 1) == 10**6 - 1
    assert np.array_equal(d.edges, edges)
    assert g.to_json()["configuration"]["chunk_shapes"][0] == compress_rle(edges)


def test_huge_bare_int_dim() -> None:
    n = 2**62
    g = both(rect(3, [2, 2]), (3 * n - 1, 4))
    d = g.dims[0]
    assert isinstance(d, FixedDim)
    assert g.grid_shape == (n, 2)
    assert g.nchunks == 2 * n
    assert d.offset(n - 1) == 3 * (n - 1)
    assert (d.edge(n - 1), d.data_len(n - 1)) == (3, 2)
    assert d.chunk_of(3 * n - 2) == n - 1
    assert d.unique_edges().tolist() == [3]
    assert g.chunk_region((n - 1, 1)) == (slice(3 * n - 3, 3 * n - 1), slice(2, 4))
    assert g.to_json() == rect(3, [[2, 2]])
    assert g.resize((6 * n, 4)).grid_shape == (2 * n, 2)
    assert d.data_lens_of(np.array([0, n - 1], dtype=np.uint64)).tolist() == [3, 2]
    big = FixedDim(1, n)
    assert big.chunks_of(np.array([n - 1])).tolist() == [n - 1]
    assert big.offsets_of(np.array([n - 1])).tolist() == [n - 1]


# --- dims ---------------------------------------------------------------------------------------------


def test_dim_methods() -> None:
    f = FixedDim(4, 10)
    v = VaryingDim.from_edges([4, 4, 4], 10)
    for d in (f, v):
        assert d.nchunks == 3
        assert [d.offset(i) for i in range(3)] == [0, 4, 8]
        assert [d.edge(i) for i in range(3)] == [4, 4, 4]
        assert [d.data_len(i) for i in range(3)] == [4, 4, 2]
        assert [d.chunk_of(i) for i in (0, 3, 4, 9)] == [0, 0, 1, 2]
        assert d.chunks_of(np.array([[0, 3], [4, 9]])).tolist() == [[0, 0], [1, 2]]
        assert d.offsets_of(np.array([2, 0])).tolist() == [8, 0]
        assert d.edges_of(np.array([2, 0])).tolist() == [4, 4]
        assert d.data_lens_of(np.array([2, 0])).tolist() == [2, 4]
        assert d.data_lens_of(np.array([], dtype=np.int64)).tolist() == []
        assert d.chunks_of([]).dtype == np.int64
        assert d.data_lens() == (4, 4, 2)
        assert d.unique_edges().tolist() == [4]
        for bad in (-1, 3):
            with pytest.raises(SelectionError):
                d.offset(bad)
            with pytest.raises(SelectionError):
                d.offsets_of(np.array([0, bad]))
        for bad in (-1, 10):
            with pytest.raises(SelectionError):
                d.chunk_of(bad)
            with pytest.raises(SelectionError):
                d.chunks_of(np.array([bad]))
        with pytest.raises(SelectionError):
            d.chunks_of(np.array([1.0]))
        with pytest.raises(SelectionError):
            d.edges_of(np.array([True]))
    assert f != v


def test_varying_dim_is_immutable_and_hashable() -> None:
    src = np.array([1, 2, 3])
    v = VaryingDim.from_edges(src, 6)
    src[0] = 99
    assert v.edges.tolist() == [1, 2, 3]
    assert v.cumsum.tolist() == [0, 1, 3, 6]
    with pytest.raises(ValueError):
        v.edges[0] = 5
    w = VaryingDim.from_edges([1, 2, 3], 6)
    assert v == w
    assert hash(v) == hash(w)
    assert v != VaryingDim.from_edges([1, 2, 3], 5)
    assert len({ChunkGrid((v,), "rectilinear"), ChunkGrid((w,), "rectilinear")}) == 1


@pytest.mark.parametrize(
    ("values", "extent"),
    [
        ([0, 1], 1),
        ([1.5], 1),
        ([[1]], 1),
        ([1, 2], 4),
        ([1], -1),
        ([2**62, 2**62], 1),
        (np.array([2**63], dtype=np.uint64), 1),
    ],
)
def test_varying_dim_validation(values: Any, extent: int) -> None:
    with pytest.raises(MetadataError):
        VaryingDim.from_edges(values, extent)


@pytest.mark.parametrize(("size", "extent"), [(0, 4), (True, 4), (2.0, 4), (2**63, 4), (2, -1), (2, 1.0)])
def test_fixed_dim_validation(size: Any, extent: Any) -> None:
    with pytest.raises(MetadataError):
        FixedDim(size, extent)


def test_fixed_dim_normalises_numpy_ints() -> None:
    d = FixedDim(np.int32(4), np.uint64(9))  # type: ignore[arg-type]
    assert type(d.size) is int and type(d.extent) is int
    assert d == FixedDim(4, 9)


# --- ChunkGrid ------------------------------------------------------------------------------------------


def test_regular_and_from_chunks() -> None:
    g = ChunkGrid.regular((10, 7), (4, 3))
    assert g.kind == "regular"
    assert g.regular_chunk_shape == (4, 3)
    assert g.shape == (10, 7)
    assert g.grid_shape == (3, 3)
    assert g.to_json() == reg(4, 3)
    assert ChunkGrid.from_chunks((10, 7), (4, 3)) == g
    r = ChunkGrid.from_chunks((10, 7), [[5, 5], 3])
    assert r.kind == "rectilinear"
    assert r.to_json() == rect([[5, 2]], 3)
    dask = ChunkGrid.from_chunks((10, 7), ((4, 4, 2), (3, 3, 1)))
    assert dask.to_json() == rect([[4, 2], 2], [[3, 2], 1])
    assert [d.data_lens() for d in dask.dims] == [(4, 4, 2), (3, 3, 1)]
    assert ChunkGrid.from_chunks((10,), [np.array([6, 6])]).dims[0].data_lens() == (6, 4)
    assert ChunkGrid.from_chunks((), ()).kind == "regular"


@pytest.mark.parametrize(
    ("chunks", "path"),
    [
        ((4,), None),
        ((4, 0), "chunks[1]"),
        ((4, [5, 0]), "chunks[1][1]"),
        ((4, [2, 2]), "chunks[1]"),
        ((4, []), "chunks[1]"),
        ((4, [2, True, 5]), "chunks[1][1]"),
        ((4, 2.5), "chunks[1]"),
        ((4, "55"), "chunks[1]"),
        ((4, np.array([5.0, 5.0])), "chunks[1]"),
        (4, None),
        ((4, [2**64]), "chunks[1][0]"),
    ],
)
def test_from_chunks_invalid(chunks: Any, path: str | None) -> None:
    with pytest.raises(MetadataError) as e:
        ChunkGrid.from_chunks((10, 7), chunks)
    assert e.value.path == path


def test_grid_validation() -> None:
    with pytest.raises(MetadataError):
        ChunkGrid((VaryingDim.from_edges([2, 2], 4),), "regular")
    with pytest.raises(MetadataError):
        ChunkGrid((FixedDim(2, 4),), "tiled")  # type: ignore[arg-type]
    with pytest.raises(MetadataError):
        ChunkGrid.regular((4, 4), (2,))
    with pytest.raises(MetadataError):
        ChunkGrid.regular((4,), (0,))


def test_grid_coords() -> None:
    g = ChunkGrid.from_chunks((10, 7), [[5, 5], 3])
    assert g.is_in_grid((1, 2))
    for coords in [(2, 0), (0, 3), (-1, 0), (0,), (0, 0, 0), (0.0, 0)]:
        assert not g.is_in_grid(coords)  # type: ignore[arg-type]
    assert g.chunk_shape((1, 2)) == (5, 3)
    assert g.chunk_region((1, 2)) == (slice(5, 10), slice(6, 7))
    with pytest.raises(SelectionError):
        g.chunk_shape((0,))
    with pytest.raises(SelectionError):
        g.chunk_region((2, 0))


def test_regular_chunk_shape_of_all_fixed_rectilinear() -> None:
    g = both(rect(4, 5), (8, 9))
    assert g.regular_chunk_shape == (4, 5)
    assert g.kind == "rectilinear"


# --- serialisation (items 19, 38) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edges", "json"),
    [
        ([3, 3, 3, 1], [[3, 3], 1]),
        ([2, 4], [2, 4]),
        ([5, 5], [[5, 2]]),
        ([1, 2, 3], [1, 2, 3]),
        ([4, 4, 1, 1, 4], [[4, 2], [1, 2], 4]),
        ([7], [7]),
        ([], []),
    ],
)
def test_compress_rle(edges: list[int], json: list[Any]) -> None:
    assert compress_rle(np.array(edges, dtype=np.int64)) == json
    assert expand_rle(json).tolist() == edges


def test_form_preserved() -> None:
    assert both(rect(4, 4), (10, 10)).to_json() == rect(4, 4)
    assert both(reg(4, 4), (10, 10)).to_json() == reg(4, 4)
    assert both(rect([[10, 2], 4]), (24,)).to_json() == rect([[10, 2], 4])
    assert both(rect([10, 10, 4]), (24,)).to_json() == rect([[10, 2], 4])
    assert both(rect([[1, 3], 3]), (6,)).to_json() == rect([[1, 3], 3])
    assert both(rect([[2, 1], [2, 1]]), (4,)).to_json() == rect([[2, 2]])


# --- resize (items 20, 37) -------------------------------------------------------------------------------


def chunk_shapes(g: ChunkGrid) -> list[Any]:
    return g.to_json()["configuration"]["chunk_shapes"]  # type: ignore[no-any-return]


def test_resize_new_chunk_zarr_python_sequence() -> None:
    g = ChunkGrid.from_chunks((10,), [[3, 3, 3, 1]])
    grown = g.resize((12,))
    assert chunk_shapes(grown) == [[[3, 3], 1, 2]]
    shrunk = grown.resize((5,))
    assert chunk_shapes(shrunk) == [[[3, 3], 1, 2]]
    assert shrunk.grid_shape == (2,)
    assert shrunk.dims[0].data_lens() == (3, 2)
    regrown = shrunk.resize((14,))
    assert edges(regrown.dims[0]) == [3, 3, 3, 1, 2, 2]
    assert chunk_shapes(regrown) == [[[3, 3], 1, [2, 2]]]
    assert edges(shrunk.resize((11,)).dims[0]) == [3, 3, 3, 1, 2]


def test_resize_from_five() -> None:
    g = ChunkGrid.from_chunks((5,), [[5]])
    assert g.resize((0,)).resize((7,)).to_json() == rect([5, 2])


def test_resize_repeat() -> None:
    g = ChunkGrid.from_chunks((10,), [[4, 4, 2]])
    assert edges(g.resize((21,), "repeat").dims[0]) == [4, 4, 2] + [2] * 6
    g2 = ChunkGrid.from_chunks((8,), [[5, 3]])
    r = g2.resize((15,), "repeat")
    assert edges(r.dims[0]) == [5, 3, 3, 3, 3]
    assert r.dims[0].data_lens() == (5, 3, 3, 3, 1)
    assert g2.resize((6,), "repeat") == ChunkGrid((VaryingDim.from_edges([5, 3], 6),), "rectilinear")
    with pytest.raises(MetadataError, match="without edges"):
        parse_chunk_grid(rect([]), (0,)).resize((3,), "repeat")
    assert parse_chunk_grid(rect([]), (0,)).resize((3,)).to_json() == rect([3])


def test_resize_explicit_edges() -> None:
    g = ChunkGrid.from_chunks((10, 10), [[5, 5], 4])
    r = g.resize((22, 30), [[6, 6], "new_chunk"])
    assert r.to_json() == rect([[5, 2], [6, 2]], 4)
    assert r.grid_shape == (4, 8)
    assert g.resize((20, 10), [np.array([7, 7, 7]), "repeat"]).dims[0].data_lens() == (5, 5, 7, 3)
    assert edges(g.resize((8, 10), [[1], "new_chunk"]).dims[0]) == [5, 5]
    assert g.resize((12, 12), [None, None]) == g.resize((12, 12))
    assert edges(g.resize((12, 12), [[1, 1], None]).dims[0]) == [5, 5, 1, 1]
    for policy, path in [
        ([[6, 5], "new_chunk"], "policy[0]"),
        ([[6, 0, 6], "new_chunk"], "policy[0][1]"),
        ([[12], [2]], "policy[1]"),
        (["new_chunk", "grow"], "policy[1]"),
        ("grow", "policy[0]"),
        ([3, "new_chunk"], "policy[0]"),
        ([[[3, 2]], None], "policy[0]"),
        ([[[3, 0]], None], "policy[0][0][1]"),
    ]:
        with pytest.raises(MetadataError) as e:
            g.resize((22, 30), policy)  # type: ignore[arg-type]
        assert e.value.path == path
    # run-length pairs, as create_array takes them: [[3, 4]] is four edges of 3
    assert edges(g.resize((22, 10), [[[3, 4]], None]).dims[0]) == [5, 5, 3, 3, 3, 3]
    with pytest.raises(MetadataError):  # not one entry per axis (an int, for append(chunks=4))
        g.resize((22, 10), 4)  # type: ignore[arg-type]


def test_resize_fixed_and_regular_unchanged() -> None:
    g = ChunkGrid.regular((10, 7), (4, 3))
    r = g.resize((100, 1), "repeat")
    assert r.to_json() == reg(4, 3)
    assert r.kind == "regular"
    assert r.grid_shape == (25, 1)
    assert both(rect(4, [2, 2]), (8, 4)).resize((13, 4)).to_json() == rect(4, [[2, 2]])


def test_resize_errors() -> None:
    g = ChunkGrid.regular((10, 7), (4, 3))
    with pytest.raises(MetadataError):
        g.resize((10,))
    with pytest.raises(MetadataError):
        g.resize((10, -1))
    with pytest.raises(MetadataError):
        g.resize((10, 7), ["new_chunk"])


def test_no_warnings_on_valid_input() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        both(rect([1, 2, 3], 4), (6, 9))
        both(reg(1), (0,))


def test_chunks_as_runs_stay_runs(tmp_path: Path) -> None:
    """``[edge, count]`` pairs in ``chunks=`` are the JSON's run-length form: 10**8 edges cost a few bytes,
    are written as runs, and survive `rectizarr copy` as runs."""
    import json

    import rectizarr
    from rectizarr.cli.main import main

    a = rectizarr.create_array(
        tmp_path / "src", shape=(10**8 + 3,), dtype="u1", chunks=[[[1, 10**8], 3]], fill_value=0
    )
    assert a.grid.dims[0].values.tolist() == [1, 3] and a.grid.dims[0].counts.tolist() == [10**8, 1]
    doc = json.loads((tmp_path / "src" / "zarr.json").read_text())
    assert doc["chunk_grid"]["configuration"]["chunk_shapes"] == [[[1, 10**8], 3]]
    a[-3:] = 9
    a[5:7] = 4
    assert a[-4:].tolist() == [0, 9, 9, 9]
    main(["copy", str(tmp_path / "src"), str(tmp_path / "big")])  # 10**8 + 1 chunks: visits the 3 stored
    big = rectizarr.open_array(tmp_path / "big", mode="r")
    assert big.grid.dims[0].counts.tolist() == [10**8, 1] and big.nshards_initialized == 3
    assert big[:8].tolist() == [0, 0, 0, 0, 0, 4, 4, 0] and big[-4:].tolist() == [0, 9, 9, 9]
    b = rectizarr.create_array(tmp_path / "small", shape=(10,), dtype="u1", chunks=[[(2, 3), 4]])
    assert b.write_chunk_sizes == ((2, 2, 2, 4),)
    main(["copy", str(tmp_path / "small"), str(tmp_path / "dst")])
    doc = json.loads((tmp_path / "dst" / "zarr.json").read_text())
    assert doc["chunk_grid"]["configuration"]["chunk_shapes"] == [[[2, 3], 4]]
