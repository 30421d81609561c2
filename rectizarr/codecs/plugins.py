"""Codecs from other packages (the ``rectizarr.codecs`` entry-point group), and what to tell a user about
a registered codec rectizarr does not build in.

A package plugs a codec in by declaring an entry point named by the codec's Zarr name; the object it names
is a factory ``factory(configuration, dtype) -> Codec`` (a :class:`~rectizarr.codecs.base.ArrayArrayCodec`,
:class:`~rectizarr.codecs.base.ArrayBytesCodec` or :class:`~rectizarr.codecs.base.BytesBytesCodec`;
``configuration`` is the codec's ``configuration`` object, ``dtype`` the NumPy dtype the codec receives)::

    # pyproject.toml of the package "rectizarr-jpeg"
    [project.entry-points."rectizarr.codecs"]
    jpeg = "rectizarr_jpeg:make_codec"

Entry points are listed once per process, again when a name is missing (:func:`refresh` forgets what was
listed and loaded); one is loaded the first time its codec is asked for. Built-in codecs are never replaced
by a plugin of the same name (:mod:`rectizarr.core.codec_meta` asks for a plugin only for names it does not
know)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from rectizarr._util import json_path
from rectizarr.codecs.base import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec, Codec
from rectizarr.core.codec_registry import PLUGIN_GROUP, unsupported_codec_error
from rectizarr.errors import MetadataError, UnsupportedError

__all__ = ["unsupported_codec_error"]  # re-exported (for validate)

if TYPE_CHECKING:
    from importlib import metadata


ENTRY_POINT_GROUP = PLUGIN_GROUP

CodecFactory = Callable[[Mapping[str, Any], np.dtype], Codec]


@functools.cache
def _entry_points() -> dict[str, metadata.EntryPoint]:
    from importlib import metadata  # (slow to import: when a name no built-in codec has is looked up)

    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _load(name: str) -> CodecFactory | None:
    ep = _entry_points().get(name)
    if ep is None:  # installed since the group was listed? (core.codec_meta lists it again for new names)
        _entry_points.cache_clear()
        ep = _entry_points().get(name)
    return None if ep is None else _load_entry_point(ep)


@functools.cache
def _load_entry_point(ep: metadata.EntryPoint) -> CodecFactory:
    name = ep.name
    dist = getattr(ep, "dist", None)
    dist_name = f", from {dist.name} {dist.version}" if dist is not None else ""
    where = f"entry point {ep.name} = {ep.value!r} ({ENTRY_POINT_GROUP}{dist_name})"
    try:
        factory = ep.load()
    except Exception as exc:  # an import error of any kind, in someone else's package
        raise UnsupportedError(f"codec {name!r}: loading its {where} failed: {exc!r}") from exc
    if not callable(factory):
        raise UnsupportedError(f"codec {name!r}: {where} is not callable")
    out: CodecFactory = factory
    return out


def plugin_names() -> frozenset[str]:
    """The codec names plugged in through the entry-point group."""
    return frozenset(_entry_points())


def refresh() -> None:
    """Forget the entry points listed and loaded so far (after installing a plugin in a running process)."""
    _entry_points.cache_clear()
    _load_entry_point.cache_clear()


def build_plugin_codec(
    name: str, configuration: Mapping[str, Any], dtype: np.dtype, path: str = "$.codecs"
) -> Codec | None:
    """The codec a plugin builds for ``name``, or None when no plugin provides ``name``. A plugin's
    refusal of the configuration (a ``ValueError`` or ``TypeError``) is a :class:`MetadataError` at
    ``path``'s configuration; a plugin that returns no codec is an :class:`UnsupportedError`."""
    factory = _load(name)
    if factory is None:
        return None
    try:
        codec = factory(dict(configuration), dtype)
    except MetadataError:
        raise
    except (ValueError, TypeError) as exc:
        raise MetadataError(f"codec {name!r} (plugin): {exc}", path=json_path(path, "configuration")) from exc
    if not isinstance(codec, ArrayArrayCodec | ArrayBytesCodec | BytesBytesCodec):
        raise UnsupportedError(
            f"codec {name!r}: its plugin returned {type(codec).__name__}, not a rectizarr "
            "array->array, array->bytes or bytes->bytes codec",
            path=path,
        )
    return codec
