"""Running xarray's own Zarr backend tests (shipped in its wheel) against rectizarr: the fixtures and marks
those tests take from xarray's repository (its ``conftest.py`` files are not all in the wheel)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

pytest.importorskip("xarray")
pytest.importorskip("zarr")  # the tests themselves import it (and some check rectizarr's output with it)

from xarray.tests.conftest import *  # noqa: F403  (xarray's fixtures: datatrees, use_dask, ...)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """xarray's ``skip_if_param`` mark: skip where every named parameter has the given value."""
    params: dict[str, Any] = getattr(getattr(item, "callspec", None), "params", {})
    for mark in item.iter_markers("skip_if_param"):
        wanted = {k: v for k, v in mark.kwargs.items() if k not in ("reason", "condition")}
        if mark.kwargs.get("condition", True) and all(
            params.get(k, object()) == v for k, v in wanted.items()
        ):
            pytest.skip(mark.kwargs.get("reason", "skip_if_param"))


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """An ``async def`` test runs on a new event loop (what pytest-asyncio does for xarray's tests)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(pyfuncitem.obj(**{name: pyfuncitem.funcargs[name] for name in names}))
    return True


def _zarr_default_format() -> int:
    import zarr

    return int(zarr.config.get("default_zarr_format"))


def _creates(kwargs: dict[str, Any]) -> bool:
    return (
        kwargs.get("append_dim") is None
        and kwargs.get("region") is None
        and kwargs.get("mode") not in ("a", "a-", "r+")
    )


@pytest.fixture(autouse=True)
def through_rectizarr(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Zarr write and read xarray's tests make goes through rectizarr, as a user who swapped the
    backend would have it: ``Dataset``/``DataArray``/``DataTree.to_zarr`` are rectizarr's writers, and the
    ``"zarr"`` engine (``open_zarr``, ``open_dataset(engine="zarr")``, ``open_datatree``) is rectizarr's.
    New stores take xarray's ``default_zarr_format`` (the tests set it); what the tests do with zarr-python
    itself (``zarr.open_group`` to look at what was written) stays zarr-python: a check of interop."""
    import xarray as xr
    from xarray.backends import plugins

    import rectizarr.xarray as rx

    def dataset_to_zarr(self: Any, store: Any = None, **kwargs: Any) -> Any:
        if _creates(kwargs) and kwargs.get("zarr_format") is None:
            kwargs["zarr_format"] = _zarr_default_format()
        return rx.to_rectizarr(self, store, **kwargs)

    def dataarray_to_zarr(self: Any, store: Any = None, **kwargs: Any) -> Any:
        if _creates(kwargs) and kwargs.get("zarr_format") is None:
            kwargs["zarr_format"] = _zarr_default_format()
        return self.rectizarr.to_zarr(store, **kwargs)

    def datatree_to_zarr(self: Any, store: Any = None, **kwargs: Any) -> Any:
        if _creates(kwargs) and kwargs.get("zarr_format") is None:
            kwargs["zarr_format"] = _zarr_default_format()
        return rx.to_rectizarr_tree(self, store, **kwargs)

    real_get_backend = plugins.get_backend

    def get_backend(engine: Any) -> Any:
        return (
            rx.RectizarrBackendEntrypoint() if engine in ("zarr", "rectizarr") else real_get_backend(engine)
        )

    monkeypatch.setattr(xr.Dataset, "to_zarr", dataset_to_zarr)
    monkeypatch.setattr(xr.DataArray, "to_zarr", dataarray_to_zarr)
    monkeypatch.setattr(xr.DataTree, "to_zarr", datatree_to_zarr)
    monkeypatch.setattr(plugins, "get_backend", get_backend)
