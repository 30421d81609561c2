"""xarray's own Zarr backend tests (``xarray/tests/test_backends.py``: ``ZarrBase`` and its store classes)
with every write through rectizarr's writer (``ds.rectizarr.to_zarr``) and every read through
``engine="rectizarr"``, for Zarr format 2 and 3 (xarray's ``default_zarr_format`` fixture) and for
directory, ``dict`` and ``memory://`` stores. See README "xarray's test suite"."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")

from xarray.tests import test_backends as xtb  # noqa: E402
from xarray.tests.test_backends import default_zarr_format  # noqa: E402, F401  (a fixture)

import rectizarr.xarray  # noqa: E402, F401  (the .rectizarr accessors)


def _format() -> int:
    return int(zarr.config.get("default_zarr_format"))


class _ThroughRectizarr:
    """Writes and reads of ``ZarrBase`` through rectizarr."""

    version_kwargs: ClassVar[dict[str, Any]] = {}  # xarray passes these to its own calls: none here

    def save(self, dataset: Any, store_target: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("zarr_format", _format())
        return dataset.rectizarr.to_zarr(store=store_target, **kwargs)

    @contextlib.contextmanager
    def open(self, path: Any, **kwargs: Any) -> Iterator[Any]:
        with xr.open_dataset(path, engine="rectizarr", mode="r", **kwargs) as ds:
            yield ds


class _DeliberateDifferences:
    """Where rectizarr differs from xarray's Zarr backend on purpose (README, "Known differences"), the test
    asserts rectizarr's behaviour in place of xarray's for that case and runs the rest as xarray does."""

    def test_chunk_encoding_with_dask(self) -> None:
        if _format() == 2:  # Zarr v2 has regular grids only: xarray's test as it is
            super().test_chunk_encoding_with_dask()  # type: ignore[misc]
            return
        # Zarr v3: irregular dask chunks become a rectilinear grid (xarray refuses them)
        ds = xr.DataArray(np.arange(12), dims="x", name="var1").to_dataset()
        irregular = ds.chunk({"x": (5, 4, 3)})
        with self.roundtrip(irregular) as actual:  # type: ignore[attr-defined]
            assert actual["var1"].encoding["chunks"] == ((5, 4, 3),)
            xr.testing.assert_identical(actual, ds)
        # every other case of xarray's test holds as it is: run it, with that case's roundtrip (checked
        # above) standing in for the refusal xarray expects there
        self._checked_irregular = True
        try:
            super().test_chunk_encoding_with_dask()  # type: ignore[misc]
        finally:
            self._checked_irregular = False

    _checked_irregular = False

    def test_compressor_encoding(self) -> None:
        if _format() == 2:  # numcodecs codecs, as xarray's engine reports them: xarray's test as it is
            super().test_compressor_encoding()  # type: ignore[misc]
            return
        # Zarr v3: codecs read back as their zarr.json dicts (rectizarr has no codec classes, and needs no
        # zarr-python), which both writers take back; xarray's engine gives zarr-python's codec objects
        codec = zarr.codecs.BloscCodec(cname="zstd", clevel=3, shuffle="shuffle", typesize=8, blocksize=0)
        original = xtb.create_test_data()
        with self.roundtrip(original, save_kwargs={"encoding": {"var1": {"compressors": (codec,)}}}) as ds:  # type: ignore[attr-defined]
            assert ds["var1"].encoding["compressors"] == (codec.to_dict(),)
            xr.testing.assert_identical(ds, original)

    @contextlib.contextmanager
    def roundtrip(self, data: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        if self._checked_irregular and data.chunks.get("x") == (5, 4, 3):
            raise ValueError("uniform chunk sizes. (rectizarr writes a rectilinear grid: checked above)")
        with super().roundtrip(data, *args, **kwargs) as ds:  # type: ignore[misc]
            yield ds


class TestRectizarrDirectory(_DeliberateDifferences, _ThroughRectizarr, xtb.TestZarrDirectoryStore):
    pass


class TestRectizarrDict(_DeliberateDifferences, _ThroughRectizarr, xtb.ZarrBase):
    @contextlib.contextmanager
    def create_zarr_target(self) -> Iterator[Any]:
        yield {}

    # zarr-python takes a dict as a store of its own Buffer objects, not of bytes: these two tests open the
    # written dict with zarr-python itself, which cannot read it (the directory and memory:// flavours run them)
    _ZARR_PYTHON_READS_DICT = "the test opens the dict with zarr-python, whose dict stores hold its Buffer objects"

    @pytest.mark.skip(reason=_ZARR_PYTHON_READS_DICT)
    def test_read_non_consolidated_warning(self) -> None: ...

    @pytest.mark.skip(reason=_ZARR_PYTHON_READS_DICT)
    def test_roundtrip_boolean_dtype(self) -> None: ...


class TestRectizarrMemoryURL(_DeliberateDifferences, _ThroughRectizarr, xtb.ZarrBase):
    @contextlib.contextmanager
    def create_zarr_target(self) -> Iterator[Any]:
        yield f"memory://xarray-suite/{uuid.uuid4().hex}"

