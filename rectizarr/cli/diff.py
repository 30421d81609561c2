"""``rectizarr diff``: compare two arrays or hierarchies, metadata semantically and values bitwise.

Metadata verdicts: ``identical`` (same canonical JSON), ``equivalent`` (only how the values are stored
differs: a regular grid and a rectilinear grid with the same chunk boundaries, other chunk boundaries
("same data, different chunking"), other codecs ("same data, different encoding") or another chunk key
encoding ("same data, other keys"); the value comparison then decides) or ``different`` (shape, data type,
fill value, dimension names, attributes ...). Values are compared region by region (bounded memory), bit
for bit for fixed-size types, so NaN equals NaN with the same bits and ``-0.0`` differs from ``0.0``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rectizarr.arrays import Array
from rectizarr.cli.util import Progress, plan_regions, stored_members
from rectizarr.core.metadata import node_to_json
from rectizarr.groups import Group

__all__ = ["ArrayDiff", "DiffResult", "compare_array_meta", "compare_values", "diff_nodes"]

_RANK = {"identical": 0, "equivalent": 1, "different": 2}


@dataclass
class ArrayDiff:
    """The comparison of one pair of nodes (``path`` relative to the compared roots)."""

    path: str
    kind: str  # "array" | "group" | "missing" | "type"
    metadata: str = "identical"
    notes: list[str] = field(default_factory=list)
    compared: int = 0
    differing: int | None = None
    first_index: tuple[int, ...] | None = None

    @property
    def verdict(self) -> str:
        """Overall verdict of this node: the worse of the metadata and value verdicts."""
        v = self.metadata
        if self.differing:
            v = "different"
        return v

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "path": self.path or "/",
            "kind": self.kind,
            "verdict": self.verdict,
            "metadata": self.metadata,
            "notes": list(self.notes),
            "values": None
            if self.differing is None
            else {
                "compared": self.compared,
                "differing": self.differing,
                "first_index": None if self.first_index is None else list(self.first_index),
            },
        }


@dataclass
class DiffResult:
    """All node comparisons; ``verdict`` is the worst of them."""

    nodes: list[ArrayDiff] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """``identical``, ``equivalent`` or ``different``."""
        worst = max((_RANK[n.verdict] for n in self.nodes), default=0)
        return next(k for k, v in _RANK.items() if v == worst)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{"verdict": ..., "nodes": [...]}``."""
        return {"verdict": self.verdict, "nodes": [n.to_json() for n in self.nodes]}

    def format_text(self) -> str:
        """Human-readable lines, one block per node, then a summary line."""
        lines: list[str] = []
        for n in self.nodes:
            name = n.path or "/"
            head = f"{n.kind} {name}: {n.verdict}"
            lines.append(head)
            lines.extend(f"  {note}" for note in n.notes)
            if n.differing is not None:
                if n.differing:
                    lines.append(
                        f"  values: {n.differing} of {n.compared} elements differ; first at "
                        f"index {n.first_index}"
                    )
                else:
                    lines.append(f"  values: identical ({n.compared} elements)")
        ndiff = sum(n.verdict == "different" for n in self.nodes)
        lines.append(f"summary: {self.verdict} ({len(self.nodes)} nodes compared, {ndiff} different)")
        return "\n".join(lines)


def _j(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


def _dict_diff(what: str, a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    notes = []
    for k in sorted(set(a) | set(b)):
        if k not in b:
            notes.append(f"{what} {k!r}: only in A ({_j(a[k])})")
        elif k not in a:
            notes.append(f"{what} {k!r}: only in B ({_j(b[k])})")
        elif a[k] != b[k]:
            notes.append(f"{what} {k!r}: {_j(a[k])} != {_j(b[k])}")
    return notes


def compare_array_meta(a: Array, b: Array, d: ArrayDiff) -> None:
    """Fill ``d.metadata`` and ``d.notes`` with the semantic metadata comparison of ``a`` and ``b``."""
    ja, jb = node_to_json(a.metadata), node_to_json(b.metadata)
    if ja == jb:
        return
    different: list[str] = []
    equivalent: list[str] = []
    for key in ("shape", "data_type", "fill_value", "dimension_names"):
        if ja.get(key) != jb.get(key):
            different.append(f"{key}: {_j(ja.get(key))} != {_j(jb.get(key))}")
    if ja.get("chunk_key_encoding") != jb.get(
        "chunk_key_encoding"
    ):  # where chunks are stored, as a migrate makes
        equivalent.append(
            f"chunk_key_encoding: {_j(ja.get('chunk_key_encoding'))} != "
            f"{_j(jb.get('chunk_key_encoding'))} (same data, other keys)"
        )
    if ja["codecs"] != jb["codecs"]:  # how values are stored, not what they are: the value comparison decides
        equivalent.append(f"codecs: {_j(ja['codecs'])} != {_j(jb['codecs'])} (same data, different encoding)")
    if ja["chunk_grid"] != jb["chunk_grid"]:
        if a.shape == b.shape and a.write_chunk_sizes == b.write_chunk_sizes:
            what = (
                f"{a.grid.kind} vs {b.grid.kind}" if a.grid.kind != b.grid.kind else "declared chunks differ"
            )
            equivalent.append(f"chunk grid: {what}, same chunk boundaries over the extent (equivalent)")
        else:
            equivalent.append(
                f"chunk grid: {_j(ja['chunk_grid'])} != {_j(jb['chunk_grid'])} "
                "(same data, different chunking)"
            )
    different.extend(_dict_diff("attribute", ja.get("attributes", {}), jb.get("attributes", {})))
    for key in sorted(
        (set(ja) | set(jb))
        - {
            "shape",
            "data_type",
            "fill_value",
            "codecs",
            "chunk_key_encoding",
            "dimension_names",
            "chunk_grid",
            "attributes",
        }
    ):
        if ja.get(key) != jb.get(key):
            different.append(f"{key}: {_j(ja.get(key))} != {_j(jb.get(key))}")
    d.notes.extend(different + equivalent)
    d.metadata = "different" if different else "equivalent" if equivalent else "identical"


def _unequal(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Element-wise "not the same": bitwise for fixed-size types (NaN == NaN with the same bits)."""
    if x.dtype == y.dtype and x.dtype.kind != "O":
        n = x.dtype.itemsize
        if n in (1, 2, 4, 8):
            u = np.dtype(f"u{n}")
            ne_bits: np.ndarray = np.ascontiguousarray(x).view(u) != np.ascontiguousarray(y).view(u)
            return ne_bits
        xb = np.ascontiguousarray(x).view(np.uint8).reshape(*x.shape, n)
        yb = np.ascontiguousarray(y).view(np.uint8).reshape(*y.shape, n)
        out: np.ndarray = np.any(xb != yb, axis=-1)
        return out
    ne = np.asarray(x != y)
    if x.dtype.kind in "fc" and y.dtype.kind in "fc":
        ne &= ~(np.isnan(x) & np.isnan(y))
    return ne


def compare_values(a: Array, b: Array, d: ArrayDiff, budget: int, progress_label: str | None) -> None:
    """Stream both arrays region by region, counting differing elements and the first differing index."""
    regions = plan_regions(
        a.shape, a.write_chunk_sizes, b.read_chunk_sizes, max(a.dtype.itemsize, b.dtype.itemsize, 1), budget
    )
    bar = Progress(progress_label or "diff", len(regions))
    d.differing = 0
    first: tuple[int, ...] | None = None
    for region in regions:
        x = np.asarray(a[region])
        y = np.asarray(b[region])
        ne = _unequal(x, y)
        d.compared += int(ne.size)
        count = int(np.count_nonzero(ne))
        if count:
            d.differing += count
            local = np.unravel_index(int(np.argmax(ne.reshape(-1))), ne.shape) if ne.ndim else ()
            idx = tuple(int(r.start) + int(i) for r, i in zip(region, local, strict=True))
            first = idx if first is None or idx < first else first
        bar.advance()
    bar.close()
    d.first_index = first


def diff_nodes(
    a: Array | Group,
    b: Array | Group,
    *,
    metadata_only: bool = False,
    budget: int = 64 << 20,
    path: str = "",
    result: DiffResult | None = None,
) -> DiffResult:
    """Compare ``a`` with ``b`` (recursively for groups) and return every node's comparison."""
    result = result if result is not None else DiffResult()
    if isinstance(a, Array) and isinstance(b, Array):
        d = ArrayDiff(path, "array")
        result.nodes.append(d)
        compare_array_meta(a, b, d)
        if metadata_only:
            return result
        if a.shape != b.shape:
            d.notes.append("values: not compared (shapes differ)")
        else:
            compare_values(a, b, d, budget, f"diff {path or '/'}")
        return result
    if isinstance(a, Group) and isinstance(b, Group):
        d = ArrayDiff(path, "group")
        result.nodes.append(d)
        notes = _dict_diff("attribute", a.attrs.asdict(), b.attrs.asdict())
        ma, mb = dict(stored_members(a)), dict(stored_members(b))
        for name in sorted(set(ma) - set(mb)):
            notes.append(f"member {name!r}: only in A")
        for name in sorted(set(mb) - set(ma)):
            notes.append(f"member {name!r}: only in B")
        d.notes.extend(notes)
        d.metadata = "different" if notes else "identical"
        for name in sorted(set(ma) & set(mb)):
            diff_nodes(
                ma[name],
                mb[name],
                metadata_only=metadata_only,
                budget=budget,
                path=f"{path}/{name}" if path else name,
                result=result,
            )
        return result
    d = ArrayDiff(
        path,
        "node",
        metadata="different",
        notes=[f"node type: {type(a).__name__.lower()} != {type(b).__name__.lower()}"],
    )
    result.nodes.append(d)
    return result
