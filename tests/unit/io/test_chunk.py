"""Reads that need only the start of a zstd chunk decode only that far (``rectizarr.io.chunk.prefix_bytes``) and still
equal numpy, for chunked and sharded arrays in memory and on disk and every selection form."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rectizarr
import rectizarr.codecs.zstd as rzstd
from rectizarr import tuning
from rectizarr.codecs.bytes_to_bytes import ZstdCodec
from rectizarr.stores import LocalStore, MemoryStore
from tests.strategies import basic_selections, coordinate_selections, examples, orthogonal_selections

SHAPE = (20, 70, 200)
LAYOUTS: dict[str, dict[str, Any]] = {  # decoded (inner) chunks of at least 64 KiB
    "chunked": {"dtype": "<u2", "chunks": (8, 64, 128)},  # 128 KiB
    "sharded": {"dtype": "<u2", "chunks": (8, 64, 128), "shards": (16, 128, 256)},
    "f8-64k": {"dtype": "<f8", "chunks": (4, 32, 64)},  # exactly Tuning.prefix_min_bytes
}
CASES = [
    (store, layout, checksum)
    for store in ("memory", "local")
    for layout in LAYOUTS
    for checksum in (False, True)
]


def zstd(checksum: bool) -> list[Any]:
    return [{"name": "zstd", "configuration": {"level": 1, "checksum": checksum}}]


def make(tmp: Any, store: str, layout: str, checksum: bool) -> tuple[Any, np.ndarray]:
    kw = LAYOUTS[layout]
    s = MemoryStore() if store == "memory" else LocalStore(tmp / f"{layout}-{checksum}.zarr")
    a = rectizarr.create_array(s, shape=SHAPE, compressors=zstd(checksum), fill_value=0, **kw)
    rng = np.random.default_rng(len(layout) + checksum)
    data = rng.integers(0, 1000, SHAPE).astype(kw["dtype"])  # a few bits of entropy: compressible
    a[...] = data
    return a, data


@pytest.fixture(scope="module", params=CASES, ids=["-".join(map(str, c)) for c in CASES])
def array(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, np.ndarray]:
    return make(tmp_path_factory.mktemp("prefix"), *request.param)


@pytest.fixture
def prefix_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, bool]]]:
    """``(bytes asked for, True)`` of every prefix decode that took place (from any thread), with the
    prefix limit set at 60 % of a chunk (the tests below name the elements on either side of it)."""
    calls: list[tuple[int, bool]] = []
    original = ZstdCodec.decode_prefix

    def spy(self: ZstdCodec, data: Any, out: np.ndarray, n: int) -> bool:
        ok = original(self, data, out, n)
        if ok:
            calls.append((n, ok))
        return ok

    monkeypatch.setattr(ZstdCodec, "decode_prefix", spy)
    with tuning.use(replace(tuning.current(), prefix_max_fraction=0.6)):
        yield calls


# ------------------------------------------------------------------------------------------ selections


def numpy_oindex(data: np.ndarray, sel: tuple[Any, ...]) -> np.ndarray:
    sel = sel + (slice(None),) * (data.ndim - len(sel))
    idx = [np.arange(n)[s] for s, n in zip(sel, data.shape, strict=True)]
    out = data[np.ix_(*[np.atleast_1d(i) for i in idx])]
    return out.reshape([np.size(i) for i, s in zip(idx, sel, strict=True) if np.ndim(i)])


def coordinates() -> st.SearchStrategy[tuple[np.ndarray, ...]]:
    """Often only the first rows of a chunk."""
    return st.integers(1, SHAPE[0]).flatmap(
        lambda rows: coordinate_selections((rows, *SHAPE[1:]), full_masks=False, max_side=5)
    )


@examples(0.5)
@given(sel=basic_selections(SHAPE, advanced=False, ellipsis=False, newaxis=False))
def test_basic_selections(array: tuple[Any, np.ndarray], sel: tuple[Any, ...]) -> None:
    a, data = array
    np.testing.assert_array_equal(a[sel], data[sel])


@examples(0.5)
@given(sel=orthogonal_selections(SHAPE, ellipsis=False))
def test_orthogonal_selections(array: tuple[Any, np.ndarray], sel: tuple[Any, ...]) -> None:
    a, data = array
    np.testing.assert_array_equal(a.oindex[sel], numpy_oindex(data, sel))


@examples(0.5)
@given(coords=coordinates())
def test_coordinate_selections(array: tuple[Any, np.ndarray], coords: tuple[np.ndarray, ...]) -> None:
    a, data = array
    np.testing.assert_array_equal(a.vindex[coords], data[coords])


@examples(0.2)
@given(
    seed=st.integers(0, 2**32 - 1), rows=st.integers(1, SHAPE[0]), density=st.sampled_from([0.0, 1e-4, 0.01])
)
def test_mask_selections(array: tuple[Any, np.ndarray], seed: int, rows: int, density: float) -> None:
    a, data = array
    mask = np.zeros(SHAPE, bool)
    mask[:rows] = np.random.default_rng(seed).random((rows, *SHAPE[1:])) < density
    expected = data[mask]
    np.testing.assert_array_equal(a.vindex[mask], expected)
    np.testing.assert_array_equal(a[mask], expected)
    np.testing.assert_array_equal(a.get_mask_selection(mask), expected)


# ------------------------------------------------------------------------ when prefix decoding happens


@pytest.mark.parametrize("store", ["memory", "local"])
@pytest.mark.parametrize("layout", ["chunked", "sharded"])
def test_prefix_decoding_happens_only_for_the_start_of_a_chunk(
    tmp_path: Any, prefix_calls: list[tuple[int, bool]], store: str, layout: str
) -> None:
    a, data = make(tmp_path, store, layout, False)
    chunk_bytes = 8 * 64 * 128 * 2
    sel: tuple[Any, ...]
    for sel in [
        (0,),
        (slice(8, 10), 3, slice(None, None, -1)),
        (slice(4, None, 8), slice(0, 5), [7, 0, 100]),
        (slice(0, 20, 8), 63, slice(127, 0, -3)),
    ]:
        prefix_calls.clear()
        np.testing.assert_array_equal(a.oindex[sel], numpy_oindex(data, sel))
        assert prefix_calls and all(ok and n <= 0.6 * chunk_bytes for n, ok in prefix_calls), sel
    prefix_calls.clear()
    np.testing.assert_array_equal(a[0, 0, :3], data[0, 0, :3])
    assert prefix_calls == [(3 * 2, True)]  # exactly up to the last byte needed
    for sel in [
        (7,),
        (slice(0, 8),),
        (slice(15, None, -1),),
        (slice(0, 16), slice(None), slice(None)),
        (slice(0, 8), slice(0, 4)),
        (slice(0, 5), slice(0, 64), [0, 127]),
    ]:
        prefix_calls.clear()  # each needs more than 60% of every chunk it touches
        np.testing.assert_array_equal(a.oindex[sel], numpy_oindex(data, sel))
        assert prefix_calls == [], sel
    prefix_calls.clear()  # rows 16..19 are a 4-row edge chunk: half of it is the whole valid part
    np.testing.assert_array_equal(a[16:], data[16:])
    assert prefix_calls and all(ok and n <= 0.6 * chunk_bytes for n, ok in prefix_calls)


@pytest.mark.parametrize("layout", ["chunked", "sharded"])
def test_prefix_limit_for_coordinates(
    tmp_path: Any, prefix_calls: list[tuple[int, bool]], layout: str
) -> None:
    a, data = make(tmp_path, "memory", layout, False)
    # 0.6 of a 131072-byte chunk is 78643.2 bytes: flat element 39320 (4, 51, 24) is the last that fits
    cases: list[tuple[Any, list[tuple[int, bool]]]] = [
        (([0, 4], [0, 51], [0, 24]), [(78642, True)]),
        (([4, 0], [51, 0], [25, 0]), []),
        (([8], [0], [128]), [(2, True)]),
        (([-12], [-65], [-1]), [((5 * 128 + 71) * 2 + 2, True)]),
    ]
    for coords, expected in cases:
        prefix_calls.clear()
        np.testing.assert_array_equal(a.vindex[coords], data[coords])
        assert prefix_calls == expected, coords
    mask = np.zeros(SHAPE, bool)
    mask[8, 1, 5] = mask[1, 0, 130] = True
    prefix_calls.clear()
    np.testing.assert_array_equal(a[mask], data[mask])
    assert sorted(prefix_calls) == [((128 + 5 + 1) * 2, True), ((8192 + 2 + 1) * 2, True)]


def test_prefix_from_exactly_64_kib(tmp_path: Any, prefix_calls: list[tuple[int, bool]]) -> None:
    a, data = make(tmp_path, "local", "f8-64k", False)
    np.testing.assert_array_equal(a[0, 0, :3], data[0, 0, :3])
    np.testing.assert_array_equal(a.oindex[[1, 0], 31, [63, 0]], data[[1, 0], 31][:, [63, 0]])
    assert prefix_calls == [(3 * 8, True), ((2048 + 31 * 64 + 64) * 8, True)]


@pytest.mark.parametrize("store", ["memory", "local"])
@pytest.mark.parametrize("layout", ["chunked", "sharded"])
def test_no_prefix_decoding_with_checksums(
    tmp_path: Any, prefix_calls: list[tuple[int, bool]], store: str, layout: str
) -> None:
    a, data = make(tmp_path, store, layout, True)
    for sel in [(0,), (slice(0, 2), 5), (slice(8, 10), slice(None, None, -2))]:
        np.testing.assert_array_equal(a[sel], data[sel])
    np.testing.assert_array_equal(a.vindex[[0, 1], [2, 3], [4, 5]], data[[0, 1], [2, 3], [4, 5]])
    assert prefix_calls == []  # the frame's checksum is verified: whole chunks are decoded


@pytest.mark.parametrize("store", ["memory", "local"])
def test_reads_with_prefix_decoding_off(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, prefix_calls: list[tuple[int, bool]], store: str
) -> None:
    monkeypatch.setattr(rzstd, "prefix_enabled", lambda: False)  # as with RECTIZARR_ZSTD_PREFIX=0
    for layout in ("chunked", "sharded"):
        a, data = make(tmp_path, store, layout, False)
        np.testing.assert_array_equal(a[0], data[0])
        np.testing.assert_array_equal(a[1:3, ::-5, [0, 9]], data[1:3, ::-5, [0, 9]])
        np.testing.assert_array_equal(a.vindex[[0, 8], [1, 2], [3, 199]], data[[0, 8], [1, 2], [3, 199]])
        np.testing.assert_array_equal(a[...], data)
    assert prefix_calls == []
