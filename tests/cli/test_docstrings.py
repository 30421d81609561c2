"""Every public function and class of rectizarr, and every public method and property of the user-facing
classes (arrays, groups, stores), has a docstring."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import rectizarr
import rectizarr.cli
import rectizarr.stores

ATTRIBUTES = type(rectizarr.create_array(rectizarr.MemoryStore(), shape=(1,), dtype="u1").attrs)
CLASSES = [
    rectizarr.Array,
    rectizarr.Group,
    ATTRIBUTES,
    rectizarr.Store,
    rectizarr.LocalStore,
    rectizarr.MemoryStore,
    rectizarr.FsspecStore,
    rectizarr.ZipStore,
    rectizarr.stores.CountingStore,
]


def _public_members(cls: type) -> Iterator[tuple[str, Any]]:
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            yield name, value.fget
        elif isinstance(value, staticmethod | classmethod):
            yield name, value.__func__
        elif inspect.isfunction(value):
            yield name, value


def _inherited_doc(cls: type, name: str) -> str | None:
    for base in cls.__mro__:
        member = vars(base).get(name)
        if member is None:
            continue
        target = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
        if getattr(target, "__doc__", None):
            return str(target.__doc__)
    return None


def test_public_api_has_docstrings() -> None:
    missing = [
        name
        for name in rectizarr.__all__
        if name != "__version__" and not inspect.getdoc(getattr(rectizarr, name))
    ]
    missing += [
        f"rectizarr.stores.{n}"
        for n in rectizarr.stores.__all__
        if callable(getattr(rectizarr.stores, n))
        and not inspect.getdoc(getattr(rectizarr.stores, n))
        and n not in ("ByteRange",)
    ]
    missing += [
        f"rectizarr.cli.{n}" for n in rectizarr.cli.__all__ if not inspect.getdoc(getattr(rectizarr.cli, n))
    ]
    assert not missing, missing


def test_public_methods_have_docstrings() -> None:
    missing = []
    for cls in CLASSES:
        for name, fn in _public_members(cls):
            if not (fn.__doc__ or _inherited_doc(cls, name)):
                missing.append(f"{cls.__name__}.{name}")
    assert not missing, missing
