"""Read every stored conformance case with rectizarr and compare bit-exactly with what the producer read.

No reference library is needed: the expected arrays are stored next to each store (see
``conformance_data/README.md``).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import rectizarr
from rectizarr import errors
from rectizarr.errors import LenientMetadataWarning
from tests.conformance.corpus import (
    Case,
    all_cases,
    apply_array,
    apply_numpy,
    assert_same,
    same_json,
    selections,
)

CASES = all_cases()


def _open(case: Case, path: str) -> rectizarr.Array:
    with warnings.catch_warnings():
        # Lenient-but-readable metadata (bare NaN attributes, blosc without typesize, ...) warns; that is
        # exactly what the lenient path is for. Any other warning is a failure.
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", LenientMetadataWarning)
        return rectizarr.open_array(case.store, path=path or None, mode="r")


def test_corpus_is_present() -> None:
    producers = {c.dir.parent.name for c in CASES}
    assert producers == {"zarr-python", "zarrs", "tensorstore", "handwritten"}
    assert len(CASES) > 200


@pytest.mark.parametrize("case", [c for c in CASES if "expect_error" not in c.info], ids=lambda c: c.id)
def test_read_case(case: Case) -> None:
    view = case.info.get("view")
    for entry in case.arrays:
        arr = _open(case, entry["path"])
        expected = case.expected(entry["expected"])
        where = f"{case.id}:{entry['path'] or '/'}"
        assert arr.shape == expected.shape, where
        assert_same(arr[...], expected, view=view, what=f"{where} full read")
        for kind, sel in selections(arr.shape, case.id):
            want = apply_numpy(expected, kind, sel)
            got = apply_array(arr, kind, sel)
            assert_same(got, want, view=view, what=f"{where} {kind}[{sel!r}]")
        assert same_json(arr.attrs.asdict(), entry.get("attributes") or {}), where
        names = entry.get("dimension_names")
        assert arr.dimension_names == (tuple(names) if names is not None else None), where


@pytest.mark.parametrize("case", [c for c in CASES if "groups" in c.info], ids=lambda c: c.id)
def test_read_hierarchy(case: Case) -> None:
    for entry in case.info["groups"]:
        for use_consolidated in (True, False):
            g = rectizarr.open_group(
                case.store, path=entry["path"] or None, mode="r", use_consolidated=use_consolidated
            )
            assert g.attrs.asdict() == entry["attributes"]
    root = rectizarr.open_group(case.store, mode="r", use_consolidated=False)
    direct = {e["path"].split("/")[0] for e in case.arrays} | {
        e["path"].split("/")[0] for e in case.info["groups"] if e["path"]
    }
    # nodes named "__..." (reserved by the spec) are members too, as zarr-python lists them
    direct |= {k.split("/")[0] for k in case.info.get("reserved_keys", []) if k.endswith("/zarr.json")}
    assert set(root.keys()) == direct, "a member missing from the listing, or one too many"
    for entry in case.arrays:
        node = root[entry["path"]]
        assert isinstance(node, rectizarr.Array)
        assert_same(node[...], case.expected(entry["expected"]), what=entry["path"])


@pytest.mark.parametrize("case", [c for c in CASES if "expect_error" in c.info], ids=lambda c: c.id)
def test_documented_limits(case: Case) -> None:
    """Stores rectizarr deliberately refuses (an unrepresentable tensorstore default fill): the refusal is
    explicit, of the recorded class, and names the JSON path."""
    want: dict[str, Any] = case.info["expect_error"]
    cls = getattr(errors, want["error"])
    with pytest.raises(cls) as info:
        rectizarr.open_array(case.store, mode="r")
    assert type(info.value) is cls
    assert want["message"] in str(info.value)
    assert "$.data_type" in str(info.value) or "$.fill_value" in str(info.value)


def test_stray_keys_are_ignored() -> None:
    case = next(c for c in CASES if c.id == "handwritten/stray_keys")
    arr = rectizarr.open_array(case.store, mode="r")
    assert_same(arr[...], case.expected("expected.npy"))
    assert arr.nchunks_initialized == 2


def test_nan_payload_zarrs_vs_zarr_python() -> None:
    """The zarrs pipeline stores NaN-payload chunks zarr-python's pipeline drops as empty (README)."""
    by_id = {c.id: c for c in CASES}
    zs = by_id["zarrs/fill_nan_payload_data"].expected("expected.npy").view("<u4")
    zp = by_id["zarr-python/fill_nan_payload_data"].expected("expected.npy").view("<u4")
    assert zs[0] == 0x7FC00001
    assert zp[0] == 0x7FC00000
    arr = rectizarr.open_array(by_id["zarrs/fill_nan_payload_data"].store, mode="r")
    assert np.asarray(arr[:1]).view("<u4")[0] == 0x7FC00001
