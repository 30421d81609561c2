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
        if mark.kwargs.get("condition", True) and all(params.get(k, object()) == v for k, v in wanted.items()):
            pytest.skip(mark.kwargs.get("reason", "skip_if_param"))


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """An ``async def`` test runs on a new event loop (what pytest-asyncio does for xarray's tests)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(pyfuncitem.obj(**{name: pyfuncitem.funcargs[name] for name in names}))
    return True
