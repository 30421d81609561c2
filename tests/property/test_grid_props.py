"""Properties of chunk grids and chunk keys, with plain numpy as the reference."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rectizarr._util import ceildiv
from rectizarr.core.chunk_keys import ChunkKeyEncoding, parse_chunk_key_encoding
from rectizarr.core.grid import ChunkGrid, FixedDim, VaryingDim, compress_rle, expand_rle, rle_runs, runs_of
from rectizarr.core.grid_json import parse_chunk_grid
from tests.strategies import (
    chunk_coords,
    chunk_grids,
    chunk_key_encodings,
    grid_dims,
    rle_specs,
    run_edge_lists,
    varying_dims,
)


def reference_cumsum(d: FixedDim | VaryingDim) -> np.ndarray:
    """Offsets from a plainly materialised edge list."""
    edges = d.edges if isinstance(d, VaryingDim) else np.full(d.nchunks, d.size)
    return np.concatenate([[0], np.cumsum(edges)])


@given(grid_dims)
def test_offsets_and_lengths(d: FixedDim | VaryingDim) -> None:
    n = d.nchunks
    lens = d.data_lens()
    assert len(lens) == n
    assert sum(lens) == d.extent
    assert all(x >= 1 for x in lens)
    for i in range(n):
        assert d.chunk_of(d.offset(i)) == i
        assert d.chunk_of(d.offset(i) + d.data_len(i) - 1) == i
        assert d.data_len(i) == min(d.edge(i), d.extent - d.offset(i))
        assert d.offset(i) == sum(lens[:i])
    assert set(d.edges_of(np.arange(n)).tolist()) <= set(d.unique_edges().tolist())


@given(grid_dims, st.data())
def test_vectorised_matches_reference(d: FixedDim | VaryingDim, data: st.DataObject) -> None:
    cumsum = reference_cumsum(d)
    idx = np.arange(d.extent)
    chunks = d.chunks_of(idx)
    assert np.array_equal(chunks, np.searchsorted(cumsum, idx, side="right") - 1)
    assert chunks.tolist() == [d.chunk_of(int(i)) for i in idx]
    picks = np.array(
        data.draw(st.lists(st.integers(0, max(d.nchunks - 1, 0)), max_size=10 if d.nchunks else 0)),
        dtype=np.int64,
    )
    assert np.array_equal(d.offsets_of(picks), cumsum[picks])
    assert d.offsets_of(picks).tolist() == [d.offset(int(c)) for c in picks]
    assert d.edges_of(picks).tolist() == [d.edge(int(c)) for c in picks]
    assert d.data_lens_of(picks).tolist() == [d.data_len(int(c)) for c in picks]


@given(st.integers(1, 12), st.integers(0, 150), st.integers(0, 3))
def test_fixed_equals_varying_with_equal_edges(size: int, extent: int, extra: int) -> None:
    f = FixedDim(size, extent)
    v = VaryingDim.from_edges([size] * (ceildiv(extent, size) + extra), extent)
    assert f.nchunks == v.nchunks
    assert f.data_lens() == v.data_lens()
    assert np.array_equal(f.unique_edges(), v.unique_edges()) or f.nchunks + extra == 0
    for i in range(f.nchunks):
        assert (f.offset(i), f.edge(i), f.data_len(i)) == (v.offset(i), v.edge(i), v.data_len(i))
    idx = np.arange(extent)
    assert np.array_equal(f.chunks_of(idx), v.chunks_of(idx))
    assert [f.chunk_of(int(i)) for i in idx] == [v.chunk_of(int(i)) for i in idx]
    c = np.arange(f.nchunks)
    for name in ("offsets_of", "edges_of", "data_lens_of"):
        assert np.array_equal(getattr(f, name)(c), getattr(v, name)(c))


@given(run_edge_lists)
def test_rle_round_trip(edges: list[int]) -> None:
    rle = compress_rle(np.array(edges, dtype=np.int64))
    assert expand_rle(rle).tolist() == edges
    assert len(rle) <= len(edges)
    if len(rle) < len(edges):  # compressed: runs of one stay bare ints, real runs are pairs
        assert all(isinstance(x, int) or x[1] >= 2 for x in rle)
    else:
        assert rle == edges


@given(rle_specs)
def test_expand_any_rle_mix(spec: list[Any]) -> None:
    expected = [x for item in spec for x in ([item] if isinstance(item, int) else [item[0]] * item[1])]
    assert expand_rle(spec).tolist() == expected
    assert expand_rle(compress_rle(expand_rle(spec))).tolist() == expected


@given(chunk_grids())
def test_json_round_trip(g: ChunkGrid) -> None:
    doc = g.to_json()
    assert doc["name"] == g.kind
    for value in (doc, msgspec.json.decode(msgspec.json.encode(doc)), msgspec.Raw(msgspec.json.encode(doc))):
        back = parse_chunk_grid(value, g.shape)
        assert back == g
        assert back.kind == g.kind
        assert back.to_json() == doc


@given(chunk_grids())
def test_chunk_regions_tile_the_array(g: ChunkGrid) -> None:
    covered = np.zeros(g.shape, dtype=np.int64)
    for coords in np.ndindex(*g.grid_shape):
        assert g.is_in_grid(coords)
        region = g.chunk_region(coords)
        assert all(r.stop - r.start <= e for r, e in zip(region, g.chunk_shape(coords), strict=True))
        covered[region] += 1
    assert bool(np.all(covered == 1))


@given(varying_dims(), st.integers(0, 200), st.sampled_from(["new_chunk", "repeat", "explicit"]))
def test_resize_keeps_edges(d: VaryingDim, extent: int, policy: str) -> None:
    g = ChunkGrid((d,), "rectilinear")
    total = int(d.cumsum[-1])
    arg: Any = [[7] * ceildiv(max(extent - total, 0), 7)] if policy == "explicit" else policy
    r = g.resize((extent,), arg).dims[0]
    assert isinstance(r, VaryingDim)
    assert r.edges[: d.edges.size].tolist() == d.edges.tolist()
    assert sum(r.data_lens()) == extent
    if extent <= total:
        assert r.edges.tolist() == d.edges.tolist()
    elif policy == "new_chunk":
        assert r.edges[d.edges.size :].tolist() == [extent - total]
    else:  # the new edges cover the growth, and the last one is needed
        new = r.edges[d.edges.size :]
        assert int(new.sum()) >= extent - total > int(new[:-1].sum())
    assert parse_chunk_grid(ChunkGrid((r,), "rectilinear").to_json(), (extent,)).dims[0] == r


@given(chunk_key_encodings, chunk_coords)
def test_key_round_trip(enc: ChunkKeyEncoding, coords: tuple[int, ...]) -> None:
    key = enc.encode(coords)
    assert enc.decode(key, ndim=len(coords)) == coords
    if coords:
        assert enc.decode(key) == coords
    assert parse_chunk_key_encoding(enc.to_json()) == enc


@given(chunk_key_encodings, st.integers(0, 4), st.lists(st.integers(0, 10**6), max_size=20))
def test_encode_many_matches_encode(enc: ChunkKeyEncoding, ndim: int, flat: list[int]) -> None:
    n = len(flat) // ndim if ndim else len(flat)
    coords = np.array(flat[: n * ndim], dtype=np.int64).reshape(n, ndim)
    keys = enc.encode_many(coords)
    assert keys == [enc.encode(tuple(row)) for row in coords.tolist()]
    assert [enc.decode(k, ndim=ndim) for k in keys] == [tuple(row) for row in coords.tolist()]


@given(rle_specs, st.data())
def test_runs_answer_like_their_expanded_edges(spec: list[Any], data: st.DataObject) -> None:
    """A run-length axis is kept as runs; every answer equals that of the plainly expanded edge list."""
    values, counts = rle_runs(spec)
    edges = np.repeat(values, counts)
    extent = data.draw(st.integers(0, int(edges.sum())))
    d = VaryingDim.from_runs(values, counts, extent)
    assert d == VaryingDim.from_edges(edges, extent) and hash(d) == hash(VaryingDim.from_edges(edges, extent))
    ref = np.concatenate([[0], np.cumsum(edges)])
    n = int(np.searchsorted(ref, extent, side="left"))
    c = np.arange(n)
    assert d.nchunks == n
    assert d.offsets_of(c).tolist() == ref[:n].tolist()
    assert d.edges_of(c).tolist() == edges[:n].tolist()
    lens = np.minimum(edges[:n], extent - ref[:n])
    assert d.data_lens_of(c).tolist() == lens.tolist() == list(d.data_lens())
    assert [(d.offset(i), d.edge(i), d.data_len(i)) for i in range(n)] == list(
        zip(ref[:n], edges[:n], lens, strict=True)
    )
    idx = np.arange(extent)
    assert d.chunks_of(idx).tolist() == (np.searchsorted(ref, idx, side="right") - 1).tolist()
    assert d.data_len_runs() == runs_of(lens)
    assert d.runs_json() == compress_rle(edges)
    assert d.unique_edges().tolist() == sorted(set(edges.tolist()))
    assert d.edges.tolist() == edges.tolist() and d.cumsum.tolist() == ref.tolist()


_json_scalars = st.one_of(st.integers(-3, 12), st.text(max_size=3), st.booleans(), st.none())
_valid_dim_specs = st.one_of(
    st.integers(1, 9),
    st.lists(
        st.one_of(st.integers(1, 9), st.tuples(st.integers(1, 9), st.integers(1, 4)).map(list)),
        min_size=1,
        max_size=6,
    ),
)
_dim_specs = st.one_of(
    _valid_dim_specs,
    _valid_dim_specs,
    st.integers(-1, 9),
    st.lists(st.one_of(st.integers(0, 9), st.lists(st.integers(0, 4), min_size=0, max_size=3)), max_size=6),
    _json_scalars,
)


@given(st.data())
def test_raw_grid_json_parses_as_its_decoded_value(data: st.DataObject) -> None:
    """A ``chunk_grid`` given as raw JSON (a million edges are parsed from the bytes, in one pass when the
    grid has the usual form) gives the same grid, or the same error, as its decoded value."""
    ndim = data.draw(st.integers(1, 3))
    long = data.draw(st.booleans())  # past the one-pass threshold (4 KiB of JSON)
    specs: list[Any] = [data.draw(_dim_specs) for _ in range(ndim)]
    if long:
        specs[0] = [1, 2] * 1200 + (specs[0] if isinstance(specs[0], list) else [])
    config: dict[str, Any] = {
        "kind": data.draw(st.sampled_from(["inline", "inline", "other", 3])),
        "chunk_shapes": specs,
    }
    grid: dict[str, Any] = {
        "name": data.draw(st.sampled_from(["rectilinear", "rectilinear", "regular", 7])),
        "configuration": config,
    }
    for target in data.draw(st.lists(st.sampled_from(["grid", "config"]), max_size=2)):
        key = data.draw(st.sampled_from(["must_understand", "extra", "kind", "chunk_shapes"]))
        (grid if target == "grid" else config)[key] = data.draw(_json_scalars)
    if data.draw(st.booleans()):
        config.pop(data.draw(st.sampled_from(["kind", "chunk_shapes"])), None)
    shape = tuple(data.draw(st.integers(0, 12)) if i or not long else 3600 for i in range(ndim))
    raw = msgspec.json.encode(grid)
    if data.draw(st.booleans()):
        raw = raw.replace(b",", b", ").replace(b":", b": ")

    def outcome(value: Any) -> Any:
        try:
            g = parse_chunk_grid(value, shape)
        except Exception as e:  # the error itself is compared
            return type(e), str(e)
        return g.kind, g.dims

    assert outcome(msgspec.Raw(raw)) == outcome(grid)
