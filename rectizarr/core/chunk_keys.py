"""Chunk key encodings: grid coords <-> store keys relative to the array's prefix.

``default``: ``c`` then each coordinate after the separator (``c/1/23/45``; ``c`` for a 0-d array).
``v2``: the coordinates joined by the separator (``1.23.45``; ``0`` for a 0-d array). Coordinates are
ASCII decimal without sign or padding. The separator is ``/`` or ``.`` (default ``/`` for ``default``
and ``.`` for ``v2``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from rectizarr._util import Coords, is_int, json_path
from rectizarr.errors import MetadataError, SelectionError, UnsupportedError

__all__ = ["ChunkKeyEncoding", "parse_chunk_key_encoding"]

_DEFAULT_SEPARATOR = {"default": "/", "v2": "."}
# A coordinate has at most 19 digits: grids have fewer than 2**63 chunks per axis, and longer keys are
# stray keys (never an int() of thousands of digits).
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,18}")


@dataclass(frozen=True, slots=True)
class ChunkKeyEncoding:
    name: Literal["default", "v2"]
    separator: Literal["/", "."]

    def __post_init__(self) -> None:
        if self.name not in _DEFAULT_SEPARATOR:
            raise UnsupportedError(f"chunk key encoding {self.name!r} (supported: 'default', 'v2')")
        if self.separator not in ("/", "."):
            raise MetadataError(f"chunk key separator must be '/' or '.', got {self.separator!r}")

    def encode(self, coords: Coords) -> str:
        """The key of the chunk at grid position ``coords``."""
        for c in coords:
            if not (is_int(c) and c >= 0):
                raise SelectionError(f"chunk coords must be integers >= 0, got {tuple(coords)}")
        parts = [str(int(c)) for c in coords]
        if self.name == "default":
            return self.separator.join(["c", *parts])
        return self.separator.join(parts) if parts else "0"

    def encode_many(self, coords: npt.ArrayLike) -> list[str]:
        """Keys of the chunks at the rows of an ``(n, ndim)`` integer array."""
        a = np.asarray(coords)
        if a.ndim != 2 or (a.size and a.dtype.kind not in "iu"):
            raise SelectionError(f"chunk coords must be an (n, ndim) integer array, got {a.dtype} {a.shape}")
        if a.size and int(a.min()) < 0:
            raise SelectionError(f"chunk coords must be >= 0, got {int(a.min())}")
        if a.shape[1] == 0:
            return [self.encode(())] * a.shape[0]
        fields = self.separator.join(["%d"] * a.shape[1])
        template = f"c{self.separator}{fields}" if self.name == "default" else fields
        return list(map(template.__mod__, zip(*a.T.tolist(), strict=True)))

    def decode(self, key: str, ndim: int | None = None) -> Coords | None:
        """The coords a key encodes, or None when ``key`` is not a chunk key of this encoding (or, with
        ``ndim`` given, not one of an ``ndim``-dimensional array)."""
        if self.name == "default":
            if key == "c":
                parts: list[str] = []
            elif key.startswith("c" + self.separator):
                parts = key[2:].split(self.separator)
            else:
                return None
        elif key == "0" and ndim == 0:
            return ()
        else:
            parts = key.split(self.separator)
        if not all(_DECIMAL.fullmatch(p) for p in parts):
            return None
        if ndim is not None and len(parts) != ndim:
            return None
        return tuple(int(p) for p in parts)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "configuration": {"separator": self.separator}}


def parse_chunk_key_encoding(value: Any, path: str = "$.chunk_key_encoding") -> ChunkKeyEncoding:
    """Read ``chunk_key_encoding`` metadata: an object (``configuration`` optional) or the short-hand
    name string. Errors name the JSON path."""
    obj = {"name": value} if isinstance(value, str) else value
    if not isinstance(obj, dict):
        raise MetadataError(f"expected an object or a name, got {value!r}", path=path)
    for k, v in obj.items():
        if k == "must_understand" and isinstance(v, bool):
            continue
        if k not in ("name", "configuration"):
            raise MetadataError(f"unknown key {k!r}", path=json_path(path, k))
    name = obj.get("name")
    if not isinstance(name, str):
        raise MetadataError(f"name must be a string, got {name!r}", path=json_path(path, "name"))
    if name not in _DEFAULT_SEPARATOR:
        raise UnsupportedError(f"chunk key encoding {name!r} (supported: 'default', 'v2')",
                               path=json_path(path, "name"))
    config = obj.get("configuration", {})
    cpath = json_path(path, "configuration")
    if not isinstance(config, dict):
        raise MetadataError(f"configuration must be an object, got {config!r}", path=cpath)
    for k in config:
        if k != "separator":
            raise MetadataError(f"unknown key {k!r}", path=json_path(cpath, k))
    separator = config.get("separator", _DEFAULT_SEPARATOR[name])
    if separator not in ("/", "."):
        raise MetadataError(f"separator must be '/' or '.', got {separator!r}",
                            path=json_path(cpath, "separator"))
    return ChunkKeyEncoding(name, separator)  # type: ignore[arg-type]
