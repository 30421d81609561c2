"""Reference sets (fsspec's format, version 1): read them as sources, write the result.

A reference set maps store keys to a document (a JSON string), inline bytes (a string, ``base64:``
prefixed when binary) or a target ``[url]`` (the whole file) / ``[url, offset, length]``. Templates
(``{{u}}`` in a URL) are resolved on reading; ``gen`` entries (generated keys) are refused: each chunk
must be a key of its own to be re-referenced. Parquet reference sets (a directory of ``.parq`` files)
are read through fsspec's ``LazyReferenceMapper`` (it needs pandas and fastparquet); they can be written
only for Zarr v2 layouts (fsspec places each chunk key by its ``.zarray``), so the Zarr v3 reference sets
of :func:`rectizarr.virtual.concat` are written as JSON."""

from __future__ import annotations

import base64
import json
import numbers
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from rectizarr.errors import UnsupportedError
from rectizarr.virtual.errors import ConcatError, UnreferenceableError

__all__ = ["Inline", "Target", "Url", "encode_target", "is_refs", "load_refs", "target_of", "write_refs"]

PARQUET_SUFFIXES = (".parq", ".parquet")


@dataclass(frozen=True, slots=True)
class Url:
    """``length`` bytes at ``offset`` of the file at ``url`` (``length`` None: the whole file)."""

    url: str
    offset: int = 0
    length: int | None = None

    def part(self, offset: int, length: int) -> Url:
        return Url(self.url, self.offset + offset, length)


@dataclass(frozen=True, slots=True)
class Inline:
    data: bytes

    def part(self, offset: int, length: int) -> Inline:
        return Inline(self.data[offset : offset + length])


Target: TypeAlias = Url | Inline


def encode_target(t: Target) -> Any:
    """The reference-set value of a target."""
    if isinstance(t, Inline):
        return "base64:" + base64.b64encode(t.data).decode()
    return [t.url] if t.length is None else [t.url, t.offset, t.length]


def target_of(value: Any, key: str, source: str) -> Target:
    """The target a reference-set value points to (its documents are not targets)."""
    if isinstance(value, list | tuple) and value and isinstance(value[0], str):
        if len(value) == 1:
            return Url(value[0])
        if len(value) == 3 and all(isinstance(v, numbers.Integral) for v in value[1:]):  # (Parquet: np ints)
            return Url(value[0], int(value[1]), int(value[2]))
    if isinstance(value, bytes):
        return Inline(value)
    if isinstance(value, str):
        return Inline(base64.b64decode(value[7:]) if value.startswith("base64:") else value.encode())
    raise UnreferenceableError(
        f"reference {key!r} is {value!r}: expected [url], [url, offset, length] or inline data",
        source=source,
        field="refs",
    )


def is_refs(obj: Any) -> bool:
    """Whether ``obj`` (a dict) is a reference set rather than a store's contents (whose values are bytes):
    version 1 (``refs``), or version 0 (JSON strings and ``[url, ...]`` lists as values)."""
    return isinstance(obj, Mapping) and (
        "refs" in obj or obj.get("version") == 1 or any(isinstance(v, str | list) for v in obj.values())
    )


def _resolve(refs: Mapping[str, Any], templates: Mapping[str, str]) -> dict[str, Any]:
    if not templates:
        return dict(refs)
    out = {}
    for k, v in refs.items():
        if isinstance(v, list) and v and isinstance(v[0], str) and "{{" in v[0]:
            u = v[0]
            for name, value in templates.items():
                u = u.replace("{{" + name + "}}", value).replace("{{ " + name + " }}", value)
            v = [u, *v[1:]]
        out[k] = v
    return out


def normalized(doc: Mapping[str, Any], source: str) -> dict[str, Any]:
    """A version-1 reference set with templates resolved (version 0: the mapping itself)."""
    if doc.get("version", 1 if "refs" in doc else None) is None:
        return {"version": 1, "refs": dict(doc)}
    if doc.get("version") not in (1, None):
        raise UnreferenceableError(
            f"reference set version {doc.get('version')!r}: only version 1 (and 0) are read",
            source=source,
            field="version",
        )
    if doc.get("gen"):
        raise UnreferenceableError(
            "generated references ('gen') cannot be re-referenced one chunk at a time; expand them first",
            source=source,
            field="gen",
        )
    return {"version": 1, "refs": _resolve(doc.get("refs", {}), doc.get("templates") or {})}


def load_refs(
    location: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The reference set stored at ``location`` (a JSON file, or a Parquet reference directory), normalized."""
    text = os.fspath(location)
    if text.rstrip("/").endswith(PARQUET_SUFFIXES):
        from fsspec.core import url_to_fs
        from fsspec.implementations.reference import LazyReferenceMapper

        fs, root = url_to_fs(text, **dict(storage_options or {}))
        mapper = LazyReferenceMapper(root, fs=fs)
        return normalized({"version": 1, "refs": {k: mapper[k] for k in mapper}}, text)
    if "://" in text or "::" in text:
        import fsspec

        with fsspec.open(text, "rb", **dict(storage_options or {})) as f:
            doc = json.load(f)
    else:
        with open(text, "rb") as f:
            doc = json.load(f)
    if not isinstance(doc, dict):
        raise ConcatError(f"{text} holds no reference set (a JSON object)", source=text, field="refs")
    return normalized(doc, text)


def write_refs(
    refs: Mapping[str, Any],
    location: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
    record_size: int = 10000,
) -> str:
    """Write a reference set: JSON, or Parquet when ``location`` ends in ``.parq``/``.parquet`` (Zarr v2
    layouts only, an :class:`~rectizarr.UnsupportedError` for Zarr v3 documents). Returns the location."""
    text = os.fspath(location)
    if text.rstrip("/").endswith(PARQUET_SUFFIXES):
        from fsspec.core import url_to_fs
        from fsspec.implementations.reference import LazyReferenceMapper

        v3 = sorted(k for k in refs["refs"] if k == "zarr.json" or k.endswith("/zarr.json"))
        if v3:
            raise UnsupportedError(
                f"{text}: fsspec's Parquet references place each chunk key by its array's Zarr "
                f"v2 .zarray, and this reference set holds Zarr v3 documents ({v3[0]}): write it "
                "as JSON (.json)"
            )
        fs, root = url_to_fs(text, **dict(storage_options or {}))
        mapper = LazyReferenceMapper.create(root, fs=fs, record_size=record_size)
        for k, v in refs["refs"].items():
            mapper[k] = v.encode() if isinstance(v, str) and not v.startswith("base64:") else v
        mapper.flush()
        return text
    data = json.dumps(refs, separators=(",", ":")).encode()
    if "://" in text or "::" in text:
        import fsspec

        with fsspec.open(text, "wb", **dict(storage_options or {})) as f:
            f.write(data)
    else:
        tmp = f"{text}.tmp-{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, text)
    return text
