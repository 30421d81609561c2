"""Chunk key encodings: grid coords <-> store keys relative to the array's prefix.

``default``: ``c`` then each coordinate after the separator (``c/1/23/45``; ``c`` for a 0-d array).
``v2``: the coordinates joined by the separator (``1.23.45``; ``0`` for a 0-d array). Coordinates are
ASCII decimal without sign or padding. The separator is ``/`` or ``.`` (default ``/`` for ``default``
and ``.`` for ``v2``).

Registered extensions (zarr-extensions' chunk-key-encodings):

``fanout`` (``max_children``, an integer > 3, default 1001): each coordinate written in base
``max_children - 1`` as ``d{axis}/{digit}/.../{digit}``, the axes joined by ``/``, then ``/c``
(``(123,)`` with 101 children -> ``d0/1/23/c``; ``c`` for a 0-d array): no directory holds more than
``max_children`` entries.
``prefix`` (``prefix``, ``base_encoding``): ``prefix`` + the key of the base encoding.
``suffix`` (``suffix``, ``base_encoding``): the key of the base encoding + ``suffix``.
``template`` (``format``, ``separator``): a format string whose ``{i}`` (``{-i}`` from the end) is
coordinate ``i``, ``{*}`` the coordinates not named elsewhere joined by ``separator``, ``:0w`` a zero-padded
width, ``{{``/``}}`` literal braces (``{2}/{0}/{1}`` -> ``33/11/22`` for ``(11, 22, 33)``). The schema's
field is ``format``; the README's ``template`` is read too. A key for a dimensionality the format cannot
express (an index past the end, no coordinate left for ``{*}``) is a :class:`MetadataError`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from rectizarr._util import Coords, is_int, json_path
from rectizarr.errors import MetadataError, SelectionError, UnsupportedError

_DEFAULT_SEPARATOR = {"default": "/", "v2": "."}
#: Every chunk key encoding rectizarr reads and writes.
KEY_ENCODINGS = ("default", "v2", "fanout", "prefix", "suffix", "template")
_WRAPPERS = ("prefix", "suffix")
_DEFAULT_MAX_CHILDREN = 1001
_MAX_NESTING = 8  # a prefix of a suffix of ...: deeper is refused, not recursed into
# A coordinate has at most 19 digits: grids have fewer than 2**63 chunks per axis, and longer keys are
# stray keys (never an int() of thousands of digits).
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,18}")
_FORBIDDEN = ("..", "\\", "\0", "//", "zarr.json")

Name = Literal["default", "v2", "fanout", "prefix", "suffix", "template"]
_TOKEN = re.compile(r"\{\{|\}\}|\{(\*|-?[0-9]+)(?::0([0-9]+))?\}|[{}]|[^{}]+")  # of a template format


@dataclass(frozen=True, slots=True)
class ChunkKeyEncoding:
    """A chunk key encoding. ``separator`` is that of ``default``/``v2`` (of the base encoding for
    ``prefix``/``suffix``, ``/`` for ``fanout``); ``affix`` the prefix or suffix string; ``base`` the base
    encoding of ``prefix``/``suffix``; ``max_children`` that of ``fanout``."""

    name: Name
    separator: Literal["/", "."]
    affix: str = ""
    base: ChunkKeyEncoding | None = None
    max_children: int = _DEFAULT_MAX_CHILDREN
    template: Template | None = None

    def __post_init__(self) -> None:
        if self.name not in KEY_ENCODINGS:
            raise UnsupportedError(
                f"chunk key encoding {self.name!r} (supported: {', '.join(KEY_ENCODINGS)})"
            )
        if self.separator not in ("/", "."):
            raise MetadataError(f"chunk key separator must be '/' or '.', got {self.separator!r}")
        if self.name == "template" and self.template is None:
            raise MetadataError("chunk key encoding 'template' needs a format")
        if self.name in _WRAPPERS and (self.base is None or not self.affix):
            raise MetadataError(
                f"chunk key encoding {self.name!r} needs a non-empty {self.name} and a base_encoding"
            )
        if self.name == "fanout" and not (is_int(self.max_children) and self.max_children > 3):
            raise MetadataError(f"fanout max_children must be an integer > 3, got {self.max_children!r}")

    def encode(self, coords: Coords) -> str:
        """The key of the chunk at grid position ``coords``."""
        for c in coords:
            if not (is_int(c) and c >= 0):
                raise SelectionError(f"chunk coords must be integers >= 0, got {tuple(coords)}")
        if self.base is not None:
            inner = self.base.encode(coords)
            return self.affix + inner if self.name == "prefix" else inner + self.affix
        if self.template is not None:
            return self.template.encode([int(c) for c in coords])
        if self.name == "fanout":
            return _fanout_key([int(c) for c in coords], self.max_children - 1)
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
        if self.base is not None:
            inner = self.base.encode_many(a)
            return (
                [self.affix + k for k in inner] if self.name == "prefix" else [k + self.affix for k in inner]
            )
        if self.template is not None:
            return [self.template.encode(row) for row in a.tolist()]
        if self.name == "fanout":
            base = self.max_children - 1
            return [_fanout_key(row, base) for row in a.tolist()]
        if a.shape[1] == 0:
            return [self.encode(())] * a.shape[0]
        fields = self.separator.join(["%d"] * a.shape[1])
        template = f"c{self.separator}{fields}" if self.name == "default" else fields
        return list(map(template.__mod__, zip(*a.T.tolist(), strict=True)))

    def decode(self, key: str, ndim: int | None = None) -> Coords | None:
        """The coords a key encodes, or None when ``key`` is not a chunk key of this encoding (or, with
        ``ndim`` given, not one of an ``ndim``-dimensional array)."""
        if self.base is not None:  # (the affix is never empty: without it, a key is left as it was)
            rest = key.removeprefix(self.affix) if self.name == "prefix" else key.removesuffix(self.affix)
            return None if rest == key else self.base.decode(rest, ndim)
        if self.template is not None:
            return self.template.decode(key, ndim)
        if self.name == "fanout":
            return _fanout_decode(key, self.max_children - 1, ndim)
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
        config: dict[str, Any] = {"separator": self.separator}
        if self.name == "fanout":
            config = {"max_children": self.max_children}
        elif self.base is not None:
            config = {self.name: self.affix, "base_encoding": self.base.to_json()}
        elif self.template is not None:
            config = {"format": self.template.format, "separator": self.template.separator}
            if config["separator"] is None:
                del config["separator"]
        return {"name": self.name, "configuration": config}


def _fanout_key(coords: list[int], base: int) -> str:
    parts: list[str] = []
    for axis, c in enumerate(coords):
        digits: list[str] = []
        while True:
            c, d = divmod(c, base)
            digits.append(str(d))
            if c == 0:
                break
        parts.append(f"d{axis}")
        parts.extend(reversed(digits))
    parts.append("c")
    return "/".join(parts)


def _fanout_decode(key: str, base: int, ndim: int | None) -> Coords | None:
    parts = key.split("/")
    if parts[-1] != "c":
        return None
    coords: list[int] = []
    value: int | None = None
    for p in parts[:-1]:
        if p == f"d{len(coords) + (value is not None)}":
            if value is not None:
                coords.append(value)
            value = 0
            continue
        if value is None or not _DECIMAL.fullmatch(p) or int(p) >= base:
            return None
        value = value * base + int(p)
        if value >= 1 << 63:
            return None
    if value is not None:
        coords.append(value)
    if ndim is not None and len(coords) != ndim:
        return None
    # the canonical key only: no leading zero digits, no empty axis ("d0/d1/..")
    return tuple(coords) if _fanout_key(coords, base) == key else None


def _checked_affix(value: Any, what: str, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise MetadataError(f"{what} must be a non-empty string, got {value!r}", path=path)
    bad = [s for s in _FORBIDDEN if s in value]
    if bad or (what == "prefix" and value.startswith("/")):
        raise MetadataError(f"{what} {value!r} must not contain {bad or ['a leading /']}", path=path)
    return value


def parse_chunk_key_encoding(
    value: Any, path: str = "$.chunk_key_encoding", _depth: int = 0
) -> ChunkKeyEncoding:
    """Read ``chunk_key_encoding`` metadata: an object (``configuration`` optional) or the short-hand
    name string. Errors name the extension and the JSON path."""
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
    if name not in KEY_ENCODINGS:
        raise UnsupportedError(
            f"chunk key encoding {name!r} (supported: {', '.join(KEY_ENCODINGS)})",
            path=json_path(path, "name"),
        )
    config = obj.get("configuration", {})
    cpath = json_path(path, "configuration")
    if not isinstance(config, dict):
        raise MetadataError(f"{name} configuration must be an object, got {config!r}", path=cpath)
    if name == "fanout":
        return _parse_fanout(config, cpath)
    if name == "template":
        return ChunkKeyEncoding("template", "/", template=_parse_template(config, cpath))
    if name in _WRAPPERS:
        return _parse_wrapper(name, config, cpath, _depth)  # type: ignore[arg-type]
    _known_keys(config, ("separator",), name, cpath)
    separator = config.get("separator", _DEFAULT_SEPARATOR[name])
    if separator not in ("/", "."):
        raise MetadataError(
            f"{name} separator must be '/' or '.', got {separator!r}", path=json_path(cpath, "separator")
        )
    return ChunkKeyEncoding(name, separator)  # type: ignore[arg-type]


def _known_keys(config: dict[str, Any], known: tuple[str, ...], name: str, cpath: str) -> None:
    for k in config:
        if k not in known:
            raise MetadataError(f"unknown key {k!r} in the {name} configuration", path=json_path(cpath, k))


def _parse_fanout(config: dict[str, Any], cpath: str) -> ChunkKeyEncoding:
    _known_keys(config, ("max_children",), "fanout", cpath)
    n = config.get("max_children", _DEFAULT_MAX_CHILDREN)
    if not is_int(n) or not 3 < n <= 1 << 62:
        raise MetadataError(
            f"fanout max_children must be an integer > 3, got {n!r}", path=json_path(cpath, "max_children")
        )
    return ChunkKeyEncoding("fanout", "/", max_children=int(n))


def _parse_wrapper(
    name: Literal["prefix", "suffix"], config: dict[str, Any], cpath: str, depth: int
) -> ChunkKeyEncoding:
    # the suffix README's first example spells the key "base-encoding": read, never written
    base_key = "base-encoding" if name == "suffix" and "base-encoding" in config else "base_encoding"
    _known_keys(config, (name, base_key), name, cpath)
    for k in (name, base_key):
        if k not in config:
            raise MetadataError(f"the {name} configuration needs {k!r}", path=cpath)
    affix = _checked_affix(config[name], name, json_path(cpath, name))
    if depth >= _MAX_NESTING:
        raise MetadataError(
            f"chunk key encodings nested more than {_MAX_NESTING} deep", path=json_path(cpath, base_key)
        )
    base = parse_chunk_key_encoding(config[base_key], json_path(cpath, base_key), depth + 1)
    return ChunkKeyEncoding(name, base.separator, affix=affix, base=base)


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed ``template`` format: literal text and expressions ``(index or None for *, width)``."""

    format: str
    separator: str | None
    parts: tuple[str | tuple[int | None, int], ...]

    def _order(self, ndim: int) -> list[tuple[int | None, int, list[int]]]:
        """Per expression: its index, width, and the coordinates it stands for (``*``: the rest)."""
        named: list[int] = []
        for part in self.parts:
            if isinstance(part, tuple) and part[0] is not None:
                i = part[0] if part[0] >= 0 else ndim + part[0]
                if not 0 <= i < ndim:
                    raise MetadataError(
                        f"template {self.format!r}: index {part[0]} does not exist in "
                        f"{ndim}-dimensional chunk coordinates"
                    )
                if i in named:
                    raise MetadataError(f"template {self.format!r}: coordinate {i} is named twice")
                named.append(i)
        rest = [i for i in range(ndim) if i not in named]
        has_rest = any(isinstance(p, tuple) and p[0] is None for p in self.parts)
        if rest and not has_rest:
            raise MetadataError(
                f"template {self.format!r} names {len(named)} of {ndim} coordinates and has no {{*}}"
            )
        if has_rest and not rest:
            raise MetadataError(
                f"template {self.format!r}: no coordinate is left for {{*}} ({ndim} dimension(s))"
            )
        out: list[tuple[int | None, int, list[int]]] = []
        it = iter(named)
        for part in self.parts:
            if isinstance(part, tuple):
                out.append((part[0], part[1], rest if part[0] is None else [next(it)]))
        return out

    def encode(self, coords: list[int]) -> str:
        exprs = iter(self._order(len(coords)))
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            index, width, which = next(exprs)
            text = [str(coords[i]).zfill(width) for i in which]
            out.append((self.separator or "").join(text) if index is None else text[0])
        return "".join(out)

    def decode(self, key: str, ndim: int | None) -> Coords | None:
        if ndim is None:
            ndim = self._ndim_of(key)
            if ndim is None:
                return None
        try:
            order = self._order(ndim)
        except MetadataError:
            return None
        pattern: list[str] = []
        exprs = iter(order)
        for part in self.parts:
            if isinstance(part, str):
                pattern.append(re.escape(part))
            else:
                index, _, which = next(exprs)
                count = len(which)
                sep = re.escape(self.separator or "")
                pattern.append(
                    "([0-9]{1,19})"
                    if index is not None
                    else "([0-9]{1,19}" + f"(?:{sep}[0-9]{{1,19}}){{{count - 1}}})"
                )
        m = re.fullmatch("".join(pattern), key)
        if m is None:
            return None
        coords = [0] * ndim
        for (index, _, which), text in zip(order, m.groups(), strict=True):
            values = text.split(self.separator) if index is None and self.separator else [text]
            if len(values) != len(which):
                return None
            for i, v in zip(which, values, strict=True):
                coords[i] = int(v)
        # the canonical key only (no stray zeros beyond a width)
        return tuple(coords) if self.encode(coords) == key else None

    def _ndim_of(self, key: str) -> int | None:
        """The dimensionality a key of this template has (None when it cannot be one)."""
        explicit = sum(1 for p in self.parts if isinstance(p, tuple) and p[0] is not None)
        if not any(isinstance(p, tuple) and p[0] is None for p in self.parts):
            return explicit
        for n in range(explicit + 1, explicit + 33):  # at most 32 dimensions
            if self.decode(key, n) is not None:
                return n
        return None


def _parse_template(config: dict[str, Any], cpath: str) -> Template:
    key = "format" if "format" in config or "template" not in config else "template"
    _known_keys(config, (key, "separator"), "template", cpath)
    fmt = config.get(key)
    where = json_path(cpath, key)
    if not isinstance(fmt, str):
        raise MetadataError(f"template {key} must be a string, got {fmt!r}", path=where)
    separator = config.get("separator")
    if separator is not None and (not isinstance(separator, str) or not separator):
        raise MetadataError(
            f"template separator must be a non-empty string, got {separator!r}",
            path=json_path(cpath, "separator"),
        )
    parts: list[str | tuple[int | None, int]] = []
    literal: list[str] = []
    for m in _TOKEN.finditer(fmt):
        text = m.group()
        if m.group(1) is None:  # literal text; "{{" and "}}" are escaped braces, a lone one is an error
            if text in ("{", "}"):
                raise MetadataError(
                    f"template {fmt!r}: malformed expression at character {m.start()}", path=where
                )
            literal.append(text[0] if text in ("{{", "}}") else text)
            continue
        if literal:
            parts.append("".join(literal))
            literal = []
        index = None if m.group(1) == "*" else int(m.group(1))
        if index is not None and abs(index) > 64:
            raise MetadataError(f"template {fmt!r}: index {index} is out of range", path=where)
        width = int(m.group(2)) if m.group(2) else 0
        if width > 19:
            raise MetadataError(f"template {fmt!r}: width {width} is more than 19 digits", path=where)
        parts.append((index, width))
    if literal:
        parts.append("".join(literal))
    exprs = [p for p in parts if isinstance(p, tuple)]
    if not exprs:
        raise MetadataError(f"template {fmt!r} has no {{...}} expression", path=where)
    if sum(1 for p in exprs if p[0] is None) > 1:
        raise MetadataError(f"template {fmt!r} has more than one {{*}}", path=where)
    if any(p[0] is None for p in exprs) and separator is None:
        raise MetadataError(f"template {fmt!r} has {{*}}: the configuration needs a separator", path=cpath)
    bad = sorted({s for p in parts if isinstance(p, str) for s in _FORBIDDEN if s in p})
    if bad or (isinstance(parts[0], str) and parts[0].startswith("/")):
        raise MetadataError(f"template {fmt!r} must not contain {bad or ['a leading /']}", path=where)
    return Template(fmt, separator, tuple(parts))
