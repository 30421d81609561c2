"""xarray's own Zarr DataTree tests (``xarray/tests/test_backends_datatree.py``: ``TestZarrDatatreeIO``)
with every write and read through rectizarr (the suite's ``through_rectizarr`` fixture), Zarr v2 and v3."""

from __future__ import annotations

from typing import Any

import pytest

xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")

from xarray.tests import test_backends_datatree as xtd  # noqa: E402
from xarray.tests.test_backends_datatree import unaligned_datatree_zarr_factory  # noqa: E402, F401  (a fixture)


class TestRectizarrDatatree(xtd.TestZarrDatatreeIO):
    def test_zarr_encoding(self, tmpdir: Any, simple_datatree: Any, zarr_format: int) -> None:
        if (
            zarr_format == 2
        ):  # numcodecs codecs read back, as xarray's engine gives them: xarray's test as it is
            super().test_zarr_encoding(tmpdir, simple_datatree, zarr_format)
            return
        # Zarr v3: the codecs read back as their zarr.json dicts (README, "Known differences"); the rest of
        # xarray's test as it is
        codec = zarr.codecs.BloscCodec(cname="zstd", clevel=3)
        enc = {
            "/set2": {key: {"compressors": (codec,)} for key in simple_datatree["/set2"].dataset.data_vars}
        }
        path = str(tmpdir / "test.zarr")
        simple_datatree.to_zarr(path, encoding=enc, zarr_format=3)
        with xr.open_datatree(path, engine="rectizarr") as back:
            (got,) = back["/set2/a"].encoding["compressors"]
            assert got["name"] == "blosc" and got["configuration"]["cname"] == "zstd"
            assert got["configuration"]["clevel"] == 3
            xr.testing.assert_equal(back, simple_datatree)
        enc["/not/a/group"] = {"foo": "bar"}
        with pytest.raises(ValueError, match=r"unexpected encoding group.*"):
            simple_datatree.to_zarr(path, encoding=enc, zarr_format=3)
