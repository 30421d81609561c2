"""The report of :func:`rectizarr.validate` and the checks both formats share (:class:`Reporter`), and the
validation of a Zarr v2 hierarchy (``.zarray``, ``.zgroup``, ``.zattrs``, ``.zmetadata``) at the root.

Checked in v2: every document decodes and validates (the JSON path of each problem), ancestors of a node are
groups with a ``.zgroup`` (zarr-python 2 reads implicit groups, so a missing one is tolerated), nothing
lives inside an array, every key of an array is a chunk key inside the grid, every chunk decodes, and a
``.zmetadata`` matches the documents it consolidates."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from rectizarr import nodes
from rectizarr._util import prod
from rectizarr.arrays import Array
from rectizarr.core import v2keys
from rectizarr.core.metadata import ArrayMeta, NodeMeta
from rectizarr.errors import (
    ChecksumError,
    CodecError,
    LenientMetadataWarning,
    MetadataError,
    RectizarrError,
    UnsupportedError,
)
from rectizarr.stores import Store

__all__ = ["Issue", "Reporter", "ValidationReport", "bare_message", "check_v2"]

T = TypeVar("T")
_WHOLE_CHUNK_BYTES = 1 << 28  # larger chunks are checked by reading their first element (decoded whole)


@dataclass(frozen=True, slots=True)
class Issue:
    """One finding: the store ``key`` it is about, the JSON path inside that document (``""`` for chunk
    data), the ``rule`` broken (a stable dotted identifier) and a human-readable ``message``."""

    key: str
    json_path: str
    rule: str
    message: str


@dataclass
class ValidationReport:
    """Errors and warnings found by :func:`rectizarr.validate`; ``ok`` means no errors."""

    errors: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    nodes_checked: int = 0
    chunks_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> str:
        return json.dumps({"ok": self.ok, **asdict(self)}, indent=2, ensure_ascii=False)

    def format_text(self) -> str:
        lines = []
        for label, issues in (("error", self.errors), ("warning", self.warnings)):
            for i in issues:
                where = " ".join(x for x in (i.key or "/", i.json_path) if x)
                lines.append(f"{label}: {where} [{i.rule}] {i.message}")
        lines.append(
            f"{'OK' if self.ok else 'INVALID'}: {len(self.errors)} error(s), {len(self.warnings)} "
            f"warning(s); {self.nodes_checked} node(s), {self.chunks_checked} chunk(s) checked"
        )
        return "\n".join(lines)


def bare_message(exc: MetadataError) -> str:
    """The message without the ``key: path:`` prefix (an Issue carries both separately)."""
    text = str(exc)
    for part in (exc.key, exc.path):
        if part and text.startswith(f"{part}: "):
            text = text[len(part) + 2 :]
    return text


class Reporter:
    """Collects the issues of one validation of ``store``; ``strict`` makes tolerated deviations errors."""

    def __init__(self, store: Store, strict: bool) -> None:
        self.store = store
        self.strict = strict
        self.report = ValidationReport()

    def error(self, key: str, path: str, rule: str, message: str) -> None:
        self.report.errors.append(Issue(key, path, rule, message))

    def tolerated(self, key: str, path: str, rule: str, message: str) -> None:
        """Readable but outside the spec: an error when strict, else a warning."""
        issue = Issue(key, path, rule, message)
        (self.report.errors if self.strict else self.report.warnings).append(issue)

    def describe(self, exc: MetadataError, doc: Any, where: str) -> str:
        """The message of a MetadataError at ``where`` in ``doc``."""
        return bare_message(exc)

    def run(self, key: str, path: str, rule: str, fn: Callable[[], T], doc: Any = None) -> T | None:
        """Call ``fn``; report a MetadataError and every lenient warning under ``rule``. ``doc`` is the
        document ``path`` is in (:meth:`describe` may name what in it the error is about)."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", LenientMetadataWarning)
            try:
                result = fn()
            except MetadataError as exc:
                result = None
                kind = "unsupported" if isinstance(exc, UnsupportedError) else "invalid"
                where = exc.path or path
                self.error(key, where, f"{rule}.{kind}", self.describe(exc, doc, where))
        for w in caught:
            if issubclass(w.category, LenientMetadataWarning):
                self.tolerated(key, path, f"{rule}.lenient", str(w.message))
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return result

    def read_chunk(self, arr: Array, key: str, region: tuple[slice, ...]) -> None:
        """Read ``region`` of ``arr`` (it holds the chunk at ``key``); report what fails to decode."""
        self.report.chunks_checked += 1
        if prod(tuple(r.stop - r.start for r in region)) * (arr.dtype.itemsize or 16) > _WHOLE_CHUNK_BYTES:
            region = tuple(slice(r.start, r.start + 1) for r in region)  # decodes it, allocates no output
        try:
            arr[region]
        except ChecksumError as exc:
            self.error(key, "", "chunks.checksum", str(exc))
        except CodecError as exc:
            self.error(key, "", "chunks.decode", str(exc))
        except RectizarrError as exc:
            self.error(key, "", "chunks.read", f"{type(exc).__name__}: {exc}")

    def owned_keys(
        self, keys: Iterable[str], node_paths: Iterable[str], arrays: Iterable[str]
    ) -> dict[str, list[str]]:
        """The ``keys`` under each of the ``arrays`` (paths), each key given to the deepest of the nodes at
        ``node_paths`` above it; a key in no array is tolerated as stray."""
        owners = sorted((nodes.prefix_of(p) for p in node_paths), key=len, reverse=True)
        owned: dict[str, list[str]] = {p: [] for p in arrays}
        for key in keys:
            owner = next((p for p in owners if key.startswith(p)), None)
            if owner is not None and owner.rstrip("/") in owned:
                owned[owner.rstrip("/")].append(key)
            else:
                self.tolerated(
                    key, "", "hierarchy.stray_key", "a key that belongs to no array; readers ignore it"
                )
        return owned


def _doc(check: Reporter, key: str) -> Any:
    from rectizarr.core import v2meta  # (v2: loaded on first use)

    try:
        return v2meta.load_json(check.store.get(key), key)
    except MetadataError as exc:
        check.error(key, "$", "json.syntax", bare_message(exc))
        return None


def _node(check: Reporter, path: str, leaf: str) -> NodeMeta | None:
    from rectizarr.core import v2meta

    p = nodes.prefix_of(path)
    key = p + leaf
    doc, attrs = _doc(check, key), _doc(check, p + v2keys.V2_ATTRS)
    if doc is None:
        return None
    if leaf == v2keys.V2_ARRAY:
        return check.run(key, "$", "metadata", lambda: v2meta.decode_v2_array(doc, attrs, key))
    return check.run(key, "$", "metadata", lambda: v2meta.decode_v2_group(doc, attrs, None, key))


def check_v2(check: Reporter, root: str, keys: list[str]) -> None:
    """Check the v2 hierarchy at ``root`` whose store keys are ``keys``."""
    prefix = nodes.prefix_of(root)
    found: dict[str, NodeMeta | None] = {}
    for key in keys:
        head, _, leaf = key.rpartition("/")
        if leaf in (v2keys.V2_ARRAY, v2keys.V2_GROUP) and key.startswith(prefix):
            found[head] = _node(check, head, leaf)
            check.report.nodes_checked += 1
    arrays = {p: m for p, m in found.items() if isinstance(m, ArrayMeta)}
    for path in found:
        for parent in nodes.parent_paths(path):
            if len(parent) < len(root):
                continue
            if parent in arrays:
                check.error(
                    nodes.prefix_of(path) + v2keys.V2_ARRAY,
                    "",
                    "hierarchy.inside_array",
                    f"a node inside the array {parent or '/'!r}",
                )
            elif parent not in found:
                check.tolerated(
                    nodes.prefix_of(parent) + v2keys.V2_GROUP,
                    "",
                    "hierarchy.implicit_group",
                    f"ancestor {parent or '/'!r} of {path!r} has no .zgroup",
                )
    chunk_keys = (k for k in keys if k.rpartition("/")[2] not in (*v2keys.V2_KEYS, v2keys.V2_CONSOLIDATED))
    for path, owned in check.owned_keys(chunk_keys, found, arrays).items():
        _array_chunks(check, path, arrays[path], owned)
    zmeta_key = prefix + v2keys.V2_CONSOLIDATED
    if zmeta_key in keys:
        _consolidated(check, zmeta_key, prefix, keys)


def _array_chunks(check: Reporter, path: str, meta: ArrayMeta, keys: list[str]) -> None:
    try:
        arr = Array(check.store, path, meta, read_only=True)
    except RectizarrError as exc:
        check.error(nodes.prefix_of(path) + v2keys.V2_ARRAY, "$", "codecs.invalid", str(exc))
        return
    grid, cke, prefix = meta.chunk_grid, meta.chunk_key_encoding, nodes.prefix_of(path)
    for key in keys:
        coords = cke.decode(key[len(prefix) :], grid.ndim)
        if coords is None or not grid.is_in_grid(coords):
            check.tolerated(
                key,
                "",
                "chunks.stray_key",
                f"not a chunk key inside the grid {grid.grid_shape} (separator {cke.separator!r})",
            )
            continue
        check.read_chunk(arr, key, grid.chunk_region(coords))


def _consolidated(check: Reporter, key: str, prefix: str, keys: list[str]) -> None:
    doc = _doc(check, key)
    if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
        check.error(key, "$.metadata", "consolidated.form", '.zmetadata must be {"metadata": {...}}')
        return
    entries = doc["metadata"]
    stored = {k[len(prefix) :] for k in keys if k.rpartition("/")[2] in v2keys.V2_KEYS}
    for rel in sorted(set(entries) | stored):
        if rel not in entries:
            check.tolerated(key, "$.metadata", "consolidated.stale", f"{rel!r} is missing from .zmetadata")
        elif rel not in stored:
            check.tolerated(
                key, "$.metadata", "consolidated.stale", f"entry {rel!r} names no stored document"
            )
        elif _doc(check, prefix + rel) != _without_own_listing(entries[rel]):
            check.tolerated(key, "$.metadata", "consolidated.stale", f"entry {rel!r} differs from the store")


def _without_own_listing(entry: Any) -> Any:
    """zarr-python 3 adds an empty ``consolidated_metadata`` to the ``.zgroup`` entries it consolidates."""
    if isinstance(entry, dict) and "consolidated_metadata" in entry:
        return {k: v for k, v in entry.items() if k != "consolidated_metadata"}
    return entry
