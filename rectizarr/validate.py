"""Strict validation of a Zarr v3 store (v2 hierarchies and the report: :mod:`rectizarr.validate_v2`): metadata, hierarchy and every stored chunk.

>>> report = rectizarr.validate("data.zarr")          # doctest: +SKIP
>>> print(report.format_text())                       # doctest: +SKIP

What is checked:

* every ``zarr.json``, field by field, so that *every* deviation is reported with its JSON path and the
  rule broken (not just the first one an open would stop at);
* metadata that other implementations write and rectizarr reads leniently (a
  :class:`~rectizarr.errors.LenientMetadataWarning`): an error when ``strict`` (the default), else a warning;
* the hierarchy: every ancestor of a node has its own ``zarr.json`` (no implicit groups), node names are legal
  (no ``__`` prefix, ...), no node lives inside an array, consolidated metadata is well-formed and current;
* every stored key of an array: it must be a chunk key of the array's encoding inside its grid (other keys
  are *stray*: readers ignore them, so they are warnings in lenient mode and errors in strict mode), and
  every chunk (every inner chunk of every shard) must decode: sizes, shard indexes, checksums.

The report is data (:class:`ValidationReport`); printing and exit status are the CLI's business."""

from __future__ import annotations

import functools
import json
import os
import re
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from rectizarr import nodes
from rectizarr.arrays import Array
from rectizarr.codecs import plugins
from rectizarr.codecs.build import build_pipeline
from rectizarr.core import v2keys
from rectizarr.core.chunk_keys import parse_chunk_key_encoding
from rectizarr.core.codec_meta import parse_codecs
from rectizarr.core.dtype import DataType, parse_data_type
from rectizarr.core.grid import ChunkGrid
from rectizarr.core.grid_json import parse_chunk_grid
from rectizarr.core.metadata import (
    ARRAY_KEYS,
    GROUP_KEYS,
    REQUIRED_ARRAY_KEYS,
    ArrayMeta,
    GroupMeta,
    NodeMeta,
    extra_fields,
    node_from_json,
    node_to_json,
    parse_attributes,
    parse_dimension_names,
    parse_shape,
    parse_storage_transformers,
)
from rectizarr.errors import LenientMetadataWarning, MetadataError, RectizarrError, UnsupportedError
from rectizarr.stores import open_store
from rectizarr.validate_v2 import Issue, Reporter, ValidationReport, bare_message, check_v2

__all__ = ["Issue", "ValidationReport", "validate"]


class _Checker(Reporter):
    def describe(self, exc: MetadataError, doc: Any, where: str) -> str:
        return _naming_extension(exc, doc, where)

    # ------------------------------------------------------------------------------------- metadata
    def document(self, key: str) -> dict[str, Any] | None:
        data = self.store.get(key)
        if data is None:
            return None
        lenient = False
        try:
            doc = msgspec.json.decode(data)
        except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
            try:
                doc, lenient = json.loads(data.decode("utf-8")), True
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                self.error(key, "$", "json.syntax", f"not valid JSON: {exc}")
                return None
        try:  # a string escape may be a lone surrogate ("\ud800"), which no key or name can hold
            json.dumps(doc, ensure_ascii=False, allow_nan=True).encode("utf-8")
        except (UnicodeEncodeError, RecursionError) as exc:
            self.error(key, "$", "json.syntax", f"not valid JSON text: {exc}")
            return None
        if lenient:
            self.tolerated(key, "$", "json.nonfinite", "bare NaN/Infinity tokens are not valid JSON")
        if not isinstance(doc, dict):
            self.error(key, "$", "json.object", "the document is not a JSON object")
            return None
        return doc

    def node(self, key: str, doc: dict[str, Any]) -> str | None:
        """Validate one document field by field; the node type if it is usable."""
        fmt = doc.get("zarr_format")
        if type(fmt) is not int or fmt != 3:
            self.error(key, "$.zarr_format", "zarr_format", f"zarr_format must be the integer 3, got {fmt!r}")
            return None
        node_type = doc.get("node_type")
        if node_type not in ("array", "group"):
            self.error(
                key, "$.node_type", "node_type", f"node_type must be 'array' or 'group', got {node_type!r}"
            )
            return None
        known = ARRAY_KEYS if node_type == "array" else GROUP_KEYS
        for name in (name for name in doc if name not in known):
            extra = functools.partial(extra_fields, {name: doc[name]}, False, frozenset(), key)
            self.run(key, f"$.{name}", "must_understand", extra)

        def field(name: str, parse: Callable[[], Any], in_doc: Any = None) -> Any:
            """``parse()`` of the field ``name``, reported at ``$.name`` (``in_doc``: as Reporter.run's)."""
            return self.run(key, f"$.{name}", name, parse, in_doc)

        field("attributes", lambda: parse_attributes(doc, False, key))
        if node_type == "group":
            return "group"
        for n in (n for n in REQUIRED_ARRAY_KEYS if n not in doc):
            self.error(key, "$", "array.required", f"missing required key {n!r}")
        shape = field("shape", lambda: parse_shape(doc["shape"], key)) if "shape" in doc else None
        dtype: DataType | None = None
        if "data_type" in doc:
            dtype = field("data_type", lambda: parse_data_type(doc["data_type"]), doc)
        grid: ChunkGrid | None = None
        if "chunk_grid" in doc and shape is not None:
            grid = field("chunk_grid", lambda: parse_chunk_grid(doc["chunk_grid"], shape), doc)
        if "chunk_key_encoding" in doc:
            cke = field(
                "chunk_key_encoding", lambda: parse_chunk_key_encoding(doc["chunk_key_encoding"]), doc
            )
            if cke is not None and shape is not None:  # a template may not fit the dimensionality
                first = (0,) * len(shape)
                field("chunk_key_encoding", lambda: cke.encode(first), doc)
        if "fill_value" in doc and dtype is not None:
            field("fill_value", lambda: dtype.parse_fill(doc["fill_value"]))
        codecs = field("codecs", lambda: parse_codecs(doc["codecs"]), doc) if "codecs" in doc else None
        if codecs and dtype is not None and grid is not None:
            edges = [d.unique_edges() for d in grid.dims]
            field("codecs", lambda: build_pipeline(codecs, dtype.numpy, edges, "$.codecs"), doc)
        if shape is not None:
            field("dimension_names", lambda: parse_dimension_names(doc, False, len(shape), key))
        field("storage_transformers", lambda: parse_storage_transformers(doc, False, key))
        return "array"

    def consolidated(
        self, key: str, path: str, doc: dict[str, Any], docs: Mapping[str, dict[str, Any]]
    ) -> None:
        cons = doc.get("consolidated_metadata")
        if cons is None:
            return
        where = "$.consolidated_metadata"
        if (
            not isinstance(cons, dict)
            or cons.get("kind") != "inline"
            or cons.get("must_understand") is not False
        ):
            self.error(
                key,
                where,
                "consolidated.form",
                'consolidated_metadata must be {"kind": "inline", "must_understand": false, "metadata": {...}}',
            )
            return
        entries = cons.get("metadata")
        if not isinstance(entries, dict):
            self.error(key, f"{where}.metadata", "consolidated.form", "metadata must be an object")
            return
        prefix = nodes.prefix_of(path)

        def stale(message: str) -> None:
            self.tolerated(key, f"{where}.metadata", "consolidated.stale", message)

        for rel, entry in entries.items():
            at = f"{where}.metadata[{json.dumps(rel)}]"
            problem = nodes.member_path_problem(rel)
            if problem is not None:
                self.error(key, at, "consolidated.entry_name", f"{problem}; readers ignore this entry")
                continue
            child_key = nodes.meta_key(prefix + rel)
            meta = self.run(
                key, at, "consolidated.entry", functools.partial(node_from_json, entry, child_key)
            )
            actual = docs.get(child_key)
            if actual is None:
                stale(f"entry {rel!r} names a node that does not exist")
            elif meta is not None and _comparable(meta) != _comparable_doc(actual, child_key):
                stale(f"entry {rel!r} differs from {child_key!r}")
        for child_key in docs:
            if child_key != nodes.meta_key(path) and child_key.startswith(prefix):
                rel = child_key[len(prefix) : -len("/zarr.json")]
                if rel not in entries:
                    stale(f"node {rel!r} is missing from the consolidated metadata")

    # ------------------------------------------------------------------------------------- chunks
    def chunks(self, path: str, meta: ArrayMeta, keys: list[str]) -> None:
        try:
            arr = Array(self.store, path, meta, read_only=True)
        except RectizarrError:  # already reported field by field
            return
        grid, cke = meta.chunk_grid, meta.chunk_key_encoding
        prefix = nodes.prefix_of(path)
        for key in keys:
            coords = cke.decode(key[len(prefix) :], grid.ndim)
            if coords is None:
                rule = "chunks.stray_key"
                why = f"not a chunk key of this array (encoding {cke.name!r}, separator {cke.separator!r}, "
                why += f"{grid.ndim} dimension(s))"
            elif not grid.is_in_grid(coords):
                rule, why = "chunks.outside_grid", f"chunk {coords} lies outside the grid {grid.grid_shape}"
            else:
                self.read_chunk(arr, key, grid.chunk_region(coords))
                continue
            self.tolerated(key, "", rule, why + "; readers ignore it")


_EXTENSION_KINDS = {
    "codecs": "codec",
    "data_type": "data type",
    "chunk_grid": "chunk grid",
    "chunk_key_encoding": "chunk key encoding",
    "index_codecs": "codec",
    "mask_codecs": "codec",  # the optional codec's two chains
    "data_codecs": "codec",
}
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def _naming_extension(exc: MetadataError, doc: Any, where: str) -> str:
    """The message of ``exc``, prefixed with the extension (``codec 'zstd': ...``) whose object holds
    ``where`` in ``doc``; an unsupported codec's message says what implements it (:mod:`plugins`)."""
    text = bare_message(exc)
    if doc is None or not where.startswith("$"):
        return text
    found: tuple[str, str] | None = None
    node, kind, in_list = doc, None, False  # in_list: node is a list of extension objects (codecs)
    for m in _STEP.finditer(where[1:]):
        field_name, index = m.group(1), m.group(2)
        if field_name is not None:
            if not isinstance(node, dict) or field_name not in node:
                break
            node, at_extension = node[field_name], field_name in _EXTENSION_KINDS
            kind = _EXTENSION_KINDS.get(field_name, kind)
            in_list = at_extension and isinstance(node, list)
            if not at_extension or in_list:
                continue
        else:
            if not in_list or not isinstance(node, list) or int(index) >= len(node):
                break
            node, in_list = node[int(index)], False
        name = node if isinstance(node, str) else node.get("name") if isinstance(node, dict) else None
        if kind is not None and isinstance(name, str):
            found = (kind, name)
    if found is None:
        return text
    kind, name = found
    if isinstance(exc, UnsupportedError) and kind == "codec" and where.endswith(".name"):
        return bare_message(plugins.unsupported_codec_error(name))
    return text if repr(name) in text else f"{kind} {name!r}: {text}"


def _comparable(meta: NodeMeta) -> Any:
    """The canonical JSON of a node, a group's consolidated metadata left out."""
    if isinstance(meta, GroupMeta):
        meta = msgspec.structs.replace(meta, consolidated_metadata=None)
    return msgspec.json.decode(msgspec.json.encode(node_to_json(meta)))


def _comparable_doc(doc: dict[str, Any], key: str) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LenientMetadataWarning)
            return _comparable(node_from_json(doc, key))
    except (MetadataError, TypeError, msgspec.EncodeError):
        return None


def validate(
    store_or_path: Any,
    *,
    path: str | None = None,
    strict: bool = True,
    storage_options: Mapping[str, Any] | None = None,
) -> ValidationReport:
    """Check the hierarchy at ``path`` (default: the root) of a store, path or URL; never raises for
    problems in the data, only reports them. ``strict=False`` downgrades what the spec tolerates or other
    implementations write (lenient metadata, stray keys, stale consolidated metadata) to warnings."""
    if (
        isinstance(store_or_path, str | os.PathLike)
        and not str(store_or_path).endswith(".zip")
        and "://" not in str(store_or_path)
        and not os.path.isdir(store_or_path)
    ):
        raise FileNotFoundError(f"no such directory: {os.fspath(store_or_path)!r}")
    store = open_store(
        store_or_path, mode="r", storage_options=dict(storage_options) if storage_options else None
    )
    root = nodes.normalize_path(path)
    check = _Checker(store, strict)
    prefix = nodes.prefix_of(root)
    keys = sorted(store.list_prefix(prefix))
    meta_keys = [k for k in keys if k == prefix + nodes.META or k.endswith("/" + nodes.META)]
    if nodes.meta_key(root) not in meta_keys:
        if {prefix + v2keys.V2_ARRAY, prefix + v2keys.V2_GROUP} & set(keys):
            check_v2(check, root, keys)  # a Zarr v2 hierarchy
            return check.report
        check.error(nodes.meta_key(root), "$", "hierarchy.missing_node", f"no zarr.json at {root or '/'!r}")
    docs: dict[str, dict[str, Any]] = {}
    kinds: dict[str, str] = {}
    for key in meta_keys:
        node_path = key[: -len(nodes.META)].rstrip("/")
        doc = check.document(key)
        check.report.nodes_checked += 1
        rel = node_path[len(root) :].strip("/") if root else node_path
        for name in rel.split("/") if rel else []:
            try:
                nodes.check_name(name)
                problem: str | None = None
                if name.startswith("__"):
                    problem = (
                        f"node name {name!r} starts with '__', which the spec reserves; zarr-python "
                        "and rectizarr read and write such names (xarray's __xarray_dataarray_variable__)"
                    )
            except MetadataError as exc:
                problem = f"{exc}; readers do not treat it as a member of the hierarchy"
            if problem is not None:
                check.tolerated(key, "", "hierarchy.node_name", problem)
        if doc is None:
            continue
        docs[key] = doc
        kind = check.node(key, doc)
        if kind is not None:
            kinds[node_path] = kind
    for node_path in kinds:
        for parent in nodes.parent_paths(node_path):
            if len(parent) < len(root):
                continue
            key = nodes.meta_key(node_path)
            if kinds.get(parent) == "array":
                check.error(key, "", "hierarchy.inside_array", f"a node inside the array {parent or '/'!r}")
            elif nodes.meta_key(parent) not in docs:
                check.error(
                    key,
                    "",
                    "hierarchy.implicit_group",
                    f"ancestor {parent or '/'!r} has no zarr.json (implicit groups were removed from "
                    "Zarr v3); readers will not find this node",
                )
    arrays = [p for p, kind in kinds.items() if kind == "array"]
    owned = check.owned_keys((k for k in keys if k not in meta_keys), kinds, arrays)
    for node_path, kind in kinds.items():
        key = nodes.meta_key(node_path)
        if kind == "group":
            check.consolidated(key, node_path, docs[key], docs)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LenientMetadataWarning)
            try:
                meta = node_from_json(docs[key], key)
            except MetadataError:
                continue  # reported field by field
        if isinstance(meta, ArrayMeta):
            check.chunks(node_path, meta, owned[node_path])
    return check.report
