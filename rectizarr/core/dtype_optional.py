"""The ``optional`` data type of zarr-extensions (zarrs): a value of an inner data type, or missing.

Held in memory, chunk by chunk, as a packed NumPy structured dtype ``[("value", inner), ("valid", bool)]``
(``valid`` False: missing; marked as optional in the dtype's ``metadata``), so the chunk machinery moves and compares it as any fixed-size type; a missing
element always has all-zero ``value`` bytes (the codec and :func:`from_user` see to it), so a chunk of
missing elements equals a ``null`` fill value bit for bit. Users see :class:`numpy.ma.MaskedArray`
(:func:`to_masked`, :func:`from_user`): the mask is True where an element is missing.

The fill value JSON is ``null`` (missing) or a one-element list holding the inner type's fill value
(``[42]``; ``[null]`` for a present-but-missing inner optional). A variable-length inner type (``string``,
``bytes``) is an object field: its missing elements hold ``0``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from rectizarr._util import json_path
from rectizarr.errors import MetadataError

OPTIONAL = "optional"
_FIELDS = ("value", "valid")
_MAX_DEPTH = 16
_MARK = {"zarr_data_type": OPTIONAL}


def storage_dtype(inner: np.dtype[Any]) -> np.dtype[Any]:
    """The structured dtype chunks of ``optional(inner)`` are held in."""
    return np.dtype([("value", inner), ("valid", np.bool_)], metadata=_MARK)


def is_optional_dtype(dt: np.dtype[Any]) -> bool:
    """Whether ``dt`` is the in-memory form of an ``optional`` data type (marked in NumPy's dtype metadata,
    which NumPy keeps through copies and views: a ``struct`` with the same two fields is not one)."""
    return dt.names == _FIELDS and dict(dt.metadata or {}) == _MARK


def optional_from_name(
    config: Mapping[str, Any] | None, path: str, parse: Callable[[Any, str], Any]
) -> tuple[Mapping[str, Any], np.dtype[Any]]:
    """The stored configuration (``{"name", "configuration"}`` of the inner type) and the structured dtype."""
    cpath = json_path(path, "configuration")
    if not isinstance(config, Mapping) or not isinstance(config.get("name"), str):
        raise MetadataError(
            'optional needs a configuration {"name": <inner data type>, "configuration": {...}}', path=cpath
        )
    extra = sorted(set(config) - {"name", "configuration"})
    if extra:
        raise MetadataError(f"unexpected key(s) {extra} in the optional configuration", path=cpath)
    if not isinstance(config.get("configuration", {}), Mapping):
        raise MetadataError(
            f"the inner type's configuration must be an object, got {config['configuration']!r}",
            path=json_path(cpath, "configuration"),
        )
    if cpath.count(".configuration") > _MAX_DEPTH:
        raise MetadataError(f"optional types nested more than {_MAX_DEPTH} levels deep", path=cpath)
    inner = inner_type(config, parse, cpath)
    stored = inner.to_json()
    as_config = {"name": stored, "configuration": {}} if isinstance(stored, str) else dict(stored)
    return MappingProxyType(as_config), storage_dtype(inner.numpy)


def inner_type(config: Mapping[str, Any] | None, parse: Callable[[Any, str], Any], path: str = "$") -> Any:
    """The inner data type of an optional type's configuration, through ``parse`` (``parse_data_type``)."""
    config = config or {}
    inner_config = config.get("configuration") or {}
    return parse(
        {"name": config["name"], "configuration": inner_config} if inner_config else config["name"], path
    )


def optional_parse_fill(
    config: Mapping[str, Any] | None,
    numpy: np.dtype[Any],
    value: Any,
    path: str,
    parse: Callable[[Any, str], Any],
) -> np.ndarray[Any, Any]:
    """``null`` -> missing; ``[v]`` -> present with the inner fill value ``v``."""
    out = np.zeros((), dtype=numpy)
    if value is None:
        return out
    if not isinstance(value, list | tuple) or len(value) != 1:
        raise MetadataError(
            f"an optional fill value is null or a one-element list [value], got {value!r}", path=path
        )
    inner = inner_type(config, parse).parse_fill(value[0], json_path(path, 0))
    out["value"] = inner
    out["valid"] = True
    return out


def optional_fill_to_json(
    config: Mapping[str, Any] | None, fill: np.ndarray[Any, Any], parse: Callable[[Any, str], Any]
) -> Any:
    """The canonical JSON of a fill value (what :func:`optional_parse_fill` reads back)."""
    if not bool(fill["valid"]):
        return None
    return [inner_type(config, parse).fill_to_json(np.asarray(fill["value"]))]


def optional_fill_from_user(numpy: np.dtype[Any], value: Any) -> Any:
    """A fill value given to ``create`` as its JSON form: ``None`` / ``numpy.ma.masked`` -> ``null``, a list
    as is (``[42]``), any other value a present one of the inner type (a 0-d array of ``numpy``)."""
    if value is None or value is np.ma.masked:
        return None
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, np.ndarray | np.generic) and np.asarray(value).dtype == numpy:
        return value
    out = np.zeros((), dtype=numpy)
    try:
        out["value"] = np.asarray(value, dtype=numpy["value"])
    except (TypeError, ValueError, OverflowError) as exc:
        raise MetadataError(f"fill_value {value!r} cannot be stored as {numpy['value']}: {exc}") from exc
    out["valid"] = True
    return out


def to_masked(values: np.ndarray[Any, Any], scalar: bool) -> Any:
    """The user's view of chunk-form ``values``: a masked array of the inner dtype (mask True = missing);
    for a ``scalar`` selection the element itself, or ``numpy.ma.masked``."""
    out = np.ma.MaskedArray(values["value"], mask=~values["valid"])
    return out[()] if scalar else out


def _missing(mask: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A masked array's mask, one bool per element (a nested optional's struct: all fields masked)."""
    if mask.dtype.names is None:
        return mask
    out = np.ones(mask.shape, dtype=bool)
    for name in mask.dtype.names:
        out &= _missing(mask[name])
    return out


def from_user(value: Any, numpy: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """What a user writes (a masked array, ``numpy.ma.masked`` / ``None`` for missing, or plain values, all
    present) as an array of the structured ``numpy`` dtype, missing elements zeroed."""
    if value is None or value is np.ma.masked:
        return np.zeros((), dtype=numpy)
    if isinstance(value, np.ndarray) and value.dtype == numpy and not isinstance(value, np.ma.MaskedArray):
        out = value.copy()
        out["value"][~out["valid"]] = np.zeros((), dtype=numpy["value"])
        return out
    if isinstance(value, np.ndarray):  # a masked array (or a plain one: all present)
        data: Any = np.ma.getdata(value)
        valid = ~_missing(np.ma.getmaskarray(value))
    else:  # a scalar or a list: NumPy's assignment rules (a Python int past the type: OverflowError)
        data, valid = value, np.ones(np.shape(value), dtype=bool)
    out = np.zeros(np.shape(data), dtype=numpy)
    if valid.all():
        out["value"] = data
    else:
        out["value"][valid] = np.asarray(data)[valid]
    out["valid"] = valid
    return out
