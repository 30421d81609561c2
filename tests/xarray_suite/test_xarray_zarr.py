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
from xarray.tests.test_backends import (  # noqa: E402, F401  (a fixture; xarray's module-level Zarr tests)
    default_zarr_format,
    test_raises_key_error_on_invalid_zarr_store,
    test_zarr_create_default_indexes,
)

import rectizarr  # noqa: E402
import rectizarr.xarray  # noqa: E402  (the .rectizarr accessors)


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
    _ZARR_PYTHON_READS_DICT = (
        "the test opens the dict with zarr-python, whose dict stores hold its Buffer objects"
    )

    @pytest.mark.skip(reason=_ZARR_PYTHON_READS_DICT)
    def test_read_non_consolidated_warning(self) -> None: ...

    @pytest.mark.skip(reason=_ZARR_PYTHON_READS_DICT)
    def test_roundtrip_boolean_dtype(self) -> None: ...

    @pytest.mark.skip(reason=_ZARR_PYTHON_READS_DICT)
    def test_zarr_mode_w_overwrites_encoding(self) -> None: ...


class TestRectizarrMemoryURL(_DeliberateDifferences, _ThroughRectizarr, xtb.ZarrBase):
    @contextlib.contextmanager
    def create_zarr_target(self) -> Iterator[Any]:
        yield f"memory://xarray-suite/{uuid.uuid4().hex}"


class TestRectizarrWriteEmpty(_DeliberateDifferences, _ThroughRectizarr, xtb.TestZarrWriteEmpty):
    @pytest.mark.skip(
        reason="counts calls of zarr-python's AsyncGroup.getitem (patched), which rectizarr never "
        "makes; rectizarr's own count: tests/integration/test_xarray.py"
    )
    def test_avoid_excess_metadata_calls(self) -> None: ...


@pytest.fixture(params=["tmp_path", "ZipStore", "Dict"])
def tmp_store(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    """xarray's ``tmp_store`` with rectizarr's zip store in place of zarr-python's (the same parameter ids)."""
    if request.param == "ZipStore":
        return rectizarr.ZipStore(str(tmp_path / "store.zip"), mode="w")
    return tmp_path if request.param == "tmp_path" else {}


class TestRectizarrDataArray(xtb.TestDataArrayToZarr):
    pass


class TestRectizarrRegionAuto(xtb.TestZarrRegionAuto):
    pass


class TestRectizarrRectilinear(xtb.TestZarrRectilinearChunksRead):
    """xarray's reads of rectilinear stores as they are; its three tests that xarray refuses to write them
    (a TypeError "rectilinear") assert instead that rectizarr writes them, the deliberate difference this
    library exists for, and that zarr-python reads what it wrote."""

    def _source(self, tmp_path: Any) -> tuple[Any, Any]:
        data = np.arange(60, dtype="float32")
        path = tmp_path / "source.zarr"
        with zarr.config.set({"array.rectilinear_chunks": True}):
            self.create_zarr_array(
                path, shape=(60,), chunks=((10, 20, 30),), dimension_names=("x",), dtype="float32"
            )[:] = data
        return path, data

    def test_write_after_read_gives_helpful_error(self, tmp_path: Any) -> None:
        source, data = self._source(tmp_path)
        read = xr.open_zarr(source, zarr_format=3, consolidated=False)
        read.to_zarr(tmp_path / "dest.zarr", zarr_format=3, mode="w")  # the chunks it was read with
        back = xr.open_zarr(tmp_path / "dest.zarr")
        assert back["var"].encoding["chunks"] == ((10, 20, 30),)
        xr.testing.assert_identical(back.compute(), read.compute())
        with zarr.config.set({"array.rectilinear_chunks": True}):
            assert zarr.open_array(tmp_path / "dest.zarr" / "var")[:].tolist() == data.tolist()

    def test_append_does_not_resize_before_erroring(self, tmp_path: Any) -> None:
        source, data = self._source(tmp_path)
        ds = xr.open_zarr(source, zarr_format=3, consolidated=False)
        ds.to_zarr(source, append_dim="x", consolidated=False)  # the appended blocks: new chunks of the axis
        back = xr.open_zarr(source, consolidated=False)
        assert back["var"].values.tolist() == [*data.tolist(), *data.tolist()]
        with zarr.config.set({"array.rectilinear_chunks": True}):
            assert zarr.open_array(source / "var").shape == (120,)

    def test_write_rectilinear_shards_blocked(self, tmp_path: Any) -> None:
        ds = xr.Dataset({"var": ("x", np.arange(60, dtype="float32"))})
        ds["var"].encoding["chunks"] = (10,)
        ds["var"].encoding["shards"] = ((20, 10, 30),)
        ds.to_zarr(tmp_path / "dest.zarr", zarr_format=3, mode="w")
        back = xr.open_zarr(tmp_path / "dest.zarr")
        assert back["var"].encoding["shards"] == ((20, 10, 30),)
        xr.testing.assert_identical(back.compute(), ds)
        with zarr.config.set({"array.rectilinear_chunks": True}):
            assert zarr.open_array(tmp_path / "dest.zarr" / "var")[:].tolist() == list(range(60))
