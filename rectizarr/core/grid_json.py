"""Reading the ``chunk_grid`` JSON object into a :class:`~rectizarr.core.grid.ChunkGrid`.

Accepts the decoded object or raw JSON bytes; from raw bytes each flat list of integers (and each run-length
list of a rectilinear dimension) is parsed with NumPy, with no Python object per edge. Every error names
its JSON path."""

from __future__ import annotations

import re
import warnings
from typing import Any

import msgspec
import numpy as np

from rectizarr import tuning
from rectizarr._util import Shape, is_int, json_path
from rectizarr.core.dims import INT64_MAX, Dim, FixedDim, IntArray, VaryingDim
from rectizarr.core.grid import ChunkGrid, as_extents, check_positive, edge_array, positive_int, rle_runs
from rectizarr.errors import MetadataError, UnsupportedError

_FLAT_INT_LIST = re.compile(rb"\[[0-9,\s]*\]")
_JSON_STRING = re.compile(rb'\s*"')


_RAW = (msgspec.Raw, bytes, bytearray, memoryview)


class _InlineConfig(msgspec.Struct, forbid_unknown_fields=True):
    kind: msgspec.Raw
    chunk_shapes: list[msgspec.Raw]


class _Rectilinear(msgspec.Struct, forbid_unknown_fields=True):
    """The usual form of a rectilinear ``chunk_grid``, split in one pass over its JSON (each nested
    ``dict[str, Raw]`` pass is another scan of a million edges' bytes: 5 ms)."""

    name: msgspec.Raw
    configuration: _InlineConfig


def _split_rectilinear(raw: Any) -> dict[str, Any] | None:
    """``chunk_grid`` JSON of that usual form opened down to its dimension specs, or None."""
    try:
        grid = msgspec.json.decode(raw, type=_Rectilinear)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeDecodeError):
        return None  # any other form, or invalid: the general path takes it and names what is wrong
    config = grid.configuration
    return {"name": grid.name, "configuration": {"kind": config.kind, "chunk_shapes": config.chunk_shapes}}


def _load(node: Any, path: str) -> Any:
    """A node fully decoded (raw JSON bytes are decoded, anything else is returned as is)."""
    if isinstance(node, _RAW):
        try:
            return msgspec.json.decode(node)
        except (msgspec.DecodeError, RecursionError, UnicodeDecodeError) as e:
            raise MetadataError(f"invalid JSON: {e}", path=path) from None
    return node


def _open(node: Any, path: str, *, as_list: bool = False) -> Any:
    """A JSON object (a dict) or, with ``as_list``, array (a list), opened one level deep: when ``node``
    is raw bytes its members stay raw."""
    if isinstance(node, _RAW):
        try:
            return msgspec.json.decode(node, type=list[msgspec.Raw] if as_list else dict[str, msgspec.Raw])
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError, UnicodeDecodeError):
            node = _load(node, path)  # (invalid JSON: its error)
    if as_list and isinstance(node, list | tuple):
        return list(node)
    if not as_list and isinstance(node, dict):
        return node
    raise MetadataError(f"expected {'a list' if as_list else 'an object'}, got {node!r}", path=path)


def _check_keys(obj: dict[str, Any], required: tuple[str, ...], optional: tuple[str, ...], path: str) -> None:
    for k in required:
        if k not in obj:
            raise MetadataError(f"missing required key {k!r}", path=path)
    for k in obj:
        if k not in required and k not in optional:
            raise MetadataError(f"unknown key {k!r}", path=json_path(path, k))


def _fast_int_list(raw: Any) -> IntArray | None:
    """Parse raw bytes of a flat JSON list of non-negative ints with numpy, or None for any other form.
    ``raw`` comes from msgspec, which has already checked it is valid JSON."""
    buf = bytes(raw)
    if not _FLAT_INT_LIST.fullmatch(buf):
        return None
    text = buf[1:-1].decode("ascii")
    if not text.strip():
        return np.empty(0, dtype=np.int64)
    a = np.fromstring(text, dtype=np.int64, sep=",")
    return None if bool(np.any(a == INT64_MAX)) else a  # saturated (too large): the generic path says so


_RLE_BYTES = b"0123456789,[]"
_WHITESPACE = b" \t\r\n"
_OPEN, _CLOSE, _COMMA = ord("["), ord("]"), ord(",")


def fast_rle_runs(raw: Any, path: str) -> tuple[IntArray, IntArray] | None:
    """The ``(values, counts)`` runs of the raw bytes of a JSON list of bare edges and ``[edge, count]``
    pairs, parsed with numpy (a million items in a few tens of milliseconds), or None for any other form or
    any invalid value: the generic path then parses it and names the offending item. ``raw`` is valid JSON
    (msgspec checked it). Public so that tests can compare it with the generic path."""
    text = bytes(raw).translate(None, _WHITESPACE)
    if text.translate(None, _RLE_BYTES) or text[:1] != b"[" or text[-1:] != b"]" or len(text) < 2:
        return None  # not a list; signs, decimals, strings, objects ...
    marked = bytearray(text)
    b = np.frombuffer(marked, dtype=np.uint8)
    brackets = np.flatnonzero(b >= _OPEN)  # only digits, "," and brackets are left: "[" and "]" sort last
    is_open = b[brackets] == _OPEN
    depth = np.cumsum(np.where(is_open, 1, -1), dtype=np.int64)  # after each bracket
    if int(np.min(depth[:-1], initial=1)) < 1 or int(np.max(depth)) > 2:
        return None  # not one list of ints and flat lists
    pair_open = brackets[is_open & (depth == 2)]
    pair_close = brackets[~is_open & (depth == 1)]
    commas = np.flatnonzero(b == _COMMA)
    if pair_open.size != pair_close.size:
        return None
    if pair_open.size:  # each nested list a pair: its first comma before its "]", the next one after
        if not commas.size:
            return None
        first = np.searchsorted(commas, pair_open)
        last = commas.size - 1
        if bool(
            np.any(
                (first > last)
                | (commas[np.minimum(first, last)] > pair_close)
                | ((first < last) & (commas[np.minimum(first + 1, last)] < pair_close))
            )
        ):
            return None  # some nested list is not a pair (exactly one comma between its brackets)
    # "[5,2]" -> "-5,2 ": a minus marks the edge of a run, the number after it is the count.
    b[pair_open] = ord("-")
    b[pair_close] = ord(" ")
    b[0] = b[-1] = ord(" ")
    a = np.fromstring(bytes(marked), dtype=np.int64, sep=",")
    if a.size != commas.size + 1 or bool(np.any((a == 0) | (a >= INT64_MAX) | (a <= -INT64_MAX))):
        return None  # unparsed rest, a zero edge or count, or a value too large: the generic path says so
    runs = np.flatnonzero(a < 0)
    counts = np.ones(a.size, dtype=np.int64)
    counts[runs] = a[runs + 1]
    counts[runs + 1] = 0  # the count itself is no edge
    keep = counts > 0
    return np.abs(a)[keep], counts[keep]


def _dim_from_json(node: Any, extent: int, path: str) -> Dim:
    if isinstance(node, _RAW):
        fast = _fast_int_list(node)
        if fast is not None:
            return VaryingDim.from_edges(check_positive(fast, path), extent, path=path)
        runs = fast_rle_runs(node, path)
        if runs is not None:
            return VaryingDim.from_runs(*runs, extent, path=path)
        node = _load(node, path)
    if isinstance(node, list | tuple):
        if set(map(type, node)) <= {int}:
            return VaryingDim.from_edges(edge_array(node, path), extent, path=path)
        return VaryingDim.from_runs(*rle_runs(node, path), extent, path=path)
    if is_int(node):
        return FixedDim(positive_int(node, path), extent)
    raise MetadataError(f"expected an integer or a list of edges, got {node!r}", path=path)


def _parse_regular(config: dict[str, Any], extents: Shape, path: str) -> ChunkGrid:
    _check_keys(config, ("chunk_shape",), (), path)
    path = json_path(path, "chunk_shape")
    sizes = _open(_load(config["chunk_shape"], path), path, as_list=True)
    if len(sizes) != len(extents):
        raise MetadataError(f"{len(sizes)} chunk sizes for {len(extents)} dimensions", path=path)
    dims = []
    for axis, (size, extent) in enumerate(zip(sizes, extents, strict=True)):
        if isinstance(size, list | tuple):
            raise MetadataError(
                "a list in a regular chunk_shape is the legacy zarr-python 3.2 form of a "
                "rectilinear grid; rewrite it as {'name': 'rectilinear', ...}",
                path=json_path(path, axis),
            )
        if is_int(size) and size == 0 and extent == 0:
            warnings.warn(
                f"{json_path(path, axis)}: chunk size 0 on an empty axis repaired to 1",
                UserWarning,
                stacklevel=3,
            )
            size = 1
        dims.append(FixedDim(positive_int(size, json_path(path, axis)), extent))
    return ChunkGrid(tuple(dims), "regular")


def _parse_rectilinear(config: dict[str, Any], extents: Shape, path: str) -> ChunkGrid:
    _check_keys(config, ("kind", "chunk_shapes"), (), path)
    kind = _load(config["kind"], json_path(path, "kind"))
    if not isinstance(kind, str):
        raise MetadataError(f"kind must be a string, got {kind!r}", path=json_path(path, "kind"))
    if kind != "inline":
        raise UnsupportedError(
            f"rectilinear grid kind {kind!r} (only 'inline' is supported)", path=json_path(path, "kind")
        )
    path = json_path(path, "chunk_shapes")
    specs = _open(config["chunk_shapes"], path, as_list=True)
    if len(specs) != len(extents):
        raise MetadataError(f"{len(specs)} dimension specs for {len(extents)} dimensions", path=path)
    dims = tuple(
        _dim_from_json(s, e, json_path(path, axis))
        for axis, (s, e) in enumerate(zip(specs, extents, strict=True))
    )
    return ChunkGrid(dims, "rectilinear")


def parse_chunk_grid(value: Any, shape: Shape, path: str = "$.chunk_grid") -> ChunkGrid:
    """Build the grid of an array of ``shape`` from its ``chunk_grid`` metadata: a decoded JSON value or
    the raw JSON bytes of it (``msgspec.Raw``). Errors are :class:`MetadataError` naming the JSON path;
    an unknown grid name or rectilinear kind is an :class:`UnsupportedError`."""
    extents = as_extents(shape, "$.shape")
    if isinstance(value, _RAW) and _JSON_STRING.match(value):
        value = _load(value, path)
    if isinstance(value, _RAW) and len(value) > tuning.current().grid_split_bytes:
        value = _split_rectilinear(value) or value
    obj = _open({"name": value} if isinstance(value, str) else value, path)  # str: short-hand name
    _check_keys(obj, ("name",), ("configuration", "must_understand"), path)
    name = _load(obj["name"], json_path(path, "name"))
    if "must_understand" in obj and not isinstance(_load(obj["must_understand"], path), bool):
        raise MetadataError("must_understand must be a boolean", path=json_path(path, "must_understand"))
    if not isinstance(name, str):
        raise MetadataError(f"name must be a string, got {name!r}", path=json_path(path, "name"))
    if name not in ("regular", "rectilinear"):
        raise UnsupportedError(
            f"chunk grid {name!r} (supported: 'regular', 'rectilinear')", path=json_path(path, "name")
        )
    if "configuration" not in obj:
        raise MetadataError(f"the {name} chunk grid needs a configuration", path=path)
    cpath = json_path(path, "configuration")
    config = _open(obj["configuration"], cpath)
    if name == "regular":
        return _parse_regular(config, extents, cpath)
    return _parse_rectilinear(config, extents, cpath)
