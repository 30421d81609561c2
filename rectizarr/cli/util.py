"""Helpers of the ``rectizarr`` command: safe parsers (selections, chunk specs, sizes), compact chunk-size
formatting, a progress bar and the region planner that keeps ``copy`` and ``diff`` in bounded memory.

Nothing here evaluates user text as Python: selections and chunk specs have tiny hand-written grammars.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from itertools import pairwise, product
from typing import Any, TextIO

from rectizarr.core.grid import Runs, runs_of
from rectizarr.errors import SelectionError

__all__ = [
    "Progress",
    "compact_sizes",
    "parse_chunks",
    "parse_selection",
    "parse_size",
    "plan_regions",
    "rle_sizes",
    "split_top",
]

_INT = re.compile(r"^[+-]?\d+$")


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split ``text`` on ``sep`` outside square brackets; raise ``ValueError`` on unbalanced brackets."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in {text!r}")
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ValueError(f"unbalanced '[' in {text!r}")
    parts.append("".join(cur))
    return parts


# ------------------------------------------------------------------------------------ selections
def _sel_int(text: str, whole: str) -> int:
    t = text.strip()
    if not _INT.match(t):
        raise SelectionError(f"cannot parse selection {whole!r}: {t!r} is not an integer")
    return int(t)


def _sel_item(text: str, whole: str) -> Any:
    t = text.strip()
    if t in ("...", "Ellipsis"):
        return Ellipsis
    if t in ("None", "newaxis", "np.newaxis"):
        return None
    if t.startswith("["):
        if not t.endswith("]"):
            raise SelectionError(f"cannot parse selection {whole!r}: {t!r} is not a list")
        inner = t[1:-1].strip()
        if not inner:
            return []
        items = [s.strip() for s in inner.split(",")]
        if items and items[-1] == "":
            items.pop()
        if all(s in ("True", "False") for s in items):
            return [s == "True" for s in items]
        return [_sel_int(s, whole) for s in items]
    if ":" in t:
        bits = t.split(":")
        if len(bits) > 3:
            raise SelectionError(f"cannot parse selection {whole!r}: {t!r} has too many ':'")
        vals = [None if not b.strip() else _sel_int(b, whole) for b in bits]
        return slice(*vals)
    return _sel_int(t, whole)


def parse_selection(text: str | None) -> Any:
    """Parse a NumPy-style selection string without ``eval``.

    Items separated by top-level commas: integers (``5``, ``-1``), slices (``10:20``, ``::-1``), ``...``,
    ``None``/``newaxis``, and bracketed lists of integers or booleans (``[1, 5, 9]``). A single item
    without a comma is returned bare, like ``a[5]``; an empty string selects everything.
    """
    if text is None or not text.strip():
        return Ellipsis
    whole = text
    try:
        parts = split_top(text)
    except ValueError as exc:
        raise SelectionError(f"cannot parse selection {whole!r}: {exc}") from None
    if len(parts) == 1:
        return _sel_item(parts[0], whole)
    if not parts[-1].strip():  # trailing comma: "5," is the tuple (5,)
        parts.pop()
    if any(not p.strip() for p in parts):
        raise SelectionError(f"cannot parse selection {whole!r}: empty item between commas")
    return tuple(_sel_item(p, whole) for p in parts)


# ---------------------------------------------------------------------------------- chunk specs
def _edge_item(text: str, whole: str) -> list[int | list[int]]:
    t = text.strip().lower()
    m = re.fullmatch(r"(\d+)(?:x(\d+))?", t)
    if not m:
        raise ValueError(f"chunk spec {whole!r}: {text.strip()!r} is not an edge (N) or a run (NxCOUNT)")
    value, count = int(m.group(1)), int(m.group(2) or 1)
    if value < 1 or count < 1:
        raise ValueError(f"chunk spec {whole!r}: edges and counts must be >= 1, got {text.strip()!r}")
    return [value] if count == 1 else [[value, count]]  # a run stays a run (the spec's run-length form)


def parse_chunks(text: str) -> list[int | list[int | list[int]]]:
    """Parse a chunk spec: per axis, comma-separated, an int (regular) or a bracketed list of edges in
    which ``VxN`` is ``V`` ``N`` times, kept in the run-length form.
    ``'[31,28,31,30x2],100'`` -> ``[[31, 28, 31, [30, 2]], 100]``."""
    out: list[int | list[int | list[int]]] = []
    for part in split_top(text):
        p = part.strip()
        if not p:
            raise ValueError(f"chunk spec {text!r}: empty axis")
        if p.startswith("[") and p.endswith("]"):
            edges: list[int | list[int]] = []
            for item in split_top(p[1:-1]):
                edges.extend(_edge_item(item, text))
            out.append(edges)
        elif p.isdigit() and int(p) >= 1:
            out.append(int(p))
        else:
            raise ValueError(f"chunk spec {text!r}: axis {len(out)} is {p!r}; expected an int or [edges]")
    return out


def parse_size(text: str) -> int:
    """``'64M'``, ``'1.5G'``, ``'4096'`` -> bytes (K/M/G/T are powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", text.lower())
    if not m:
        raise ValueError(f"cannot parse size {text!r}: expected e.g. 4096, 512K, 64M or 2G")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2)]
    return max(1, int(float(m.group(1)) * scale))


# ------------------------------------------------------------------------------------ formatting
def _runs(sizes: Sequence[int] | Runs) -> Runs:
    if sizes and isinstance(sizes[0], tuple):  # already runs
        return sizes  # type: ignore[return-value]
    return runs_of(sizes)


def compact_sizes(sizes: Sequence[int] | Runs, max_runs: int = 16) -> str:
    """Chunk sizes of one axis (or their ``(size, count)`` runs) in the ``copy --chunks`` syntax:
    ``[31,28,31,30,31,30,31x2,30,31,30,31]``. More than ``max_runs`` runs are elided in the middle (``...``)."""
    parts = [f"{v}x{n}" if n > 1 else str(v) for v, n in _runs(sizes)]
    if len(parts) > max_runs:
        keep = max_runs // 2
        parts = [*parts[:keep], f"...({len(parts) - 2 * keep} runs)...", *parts[-keep:]]
    return "[" + ",".join(parts) + "]"


def rle_sizes(sizes: Sequence[int] | Runs) -> list[int | list[int]]:
    """Sizes (or their ``(size, count)`` runs) in the spec's run-length form: bare ints, ``[value, count]``
    for repeats."""
    return [v if n == 1 else [v, n] for v, n in _runs(sizes)]


# -------------------------------------------------------------------------------------- progress
class Progress:
    """A one-line progress bar on ``stream`` (stderr), drawn only when it is a terminal."""

    def __init__(
        self, label: str, total: int, stream: TextIO | None = None, enabled: bool | None = None
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(isatty and isatty()) if enabled is None else enabled
        self.label = label
        self.total = max(0, total)
        self.done = 0

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more units of work and redraw."""
        self.done += n
        if self.enabled:
            width = 30
            frac = self.done / self.total if self.total else 1.0
            bar = "#" * int(width * min(1.0, frac))
            self.stream.write(f"\r{self.label} [{bar:<{width}}] {self.done}/{self.total}")
            self.stream.flush()

    def close(self) -> None:
        """Finish the line (only when something was drawn)."""
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


# ------------------------------------------------------------------------------------ regions
def _bounds(sizes: Sequence[int]) -> list[int]:
    out = [0]
    for s in sizes:
        out.append(out[-1] + s)
    return out


def _merge(bounds: list[int], cap: int) -> list[int]:
    """Coarsen ``bounds`` greedily so that each interval is at most ``cap`` long (never splits one)."""
    out = [bounds[0]]
    for b in bounds[1:]:
        if len(out) >= 2 and b - out[-2] <= cap:
            out[-1] = b
        else:
            out.append(b)
    return out


def _max_len(bounds: list[int]) -> int:
    return max((b - a for a, b in pairwise(bounds)), default=0)


def plan_regions(
    shape: Sequence[int],
    primary: Sequence[Sequence[int]],
    secondary: Sequence[Sequence[int]],
    itemsize: int,
    budget: int,
) -> list[tuple[slice, ...]]:
    """Regions covering ``shape``, each a union of whole ``primary`` chunks (the copy destination's storage
    chunks), about ``budget`` bytes at most (never less than one primary chunk).

    Where a boundary is shared with the ``secondary`` chunks (the source's read chunks) and the coarser
    unit still fits the budget, regions use the shared boundaries, so a large source chunk is decoded
    once instead of once per small destination chunk.
    """
    if any(s == 0 for s in shape):
        return []
    if not shape:
        return [()]
    elems = max(1, budget // max(1, itemsize))
    axes = [_bounds(p) for p in primary]
    for k in reversed(range(len(shape))):
        shared = sorted(set(axes[k]) & set(_bounds(secondary[k])))
        trial = [*axes[:k], shared, *axes[k + 1 :]]
        if _volume(trial) <= elems:
            axes = trial
    for k in reversed(range(len(shape))):
        others = _volume(axes[:k] + axes[k + 1 :])
        axes[k] = _merge(axes[k], max(1, elems // max(1, others)))
        if len(axes[k]) > 2:
            break
    per_axis = [[slice(a, b) for a, b in pairwise(bs)] for bs in axes]
    return [tuple(r) for r in product(*per_axis)]


def _volume(axes: Sequence[list[int]]) -> int:
    v = 1
    for bs in axes:
        v *= _max_len(bs)
    return v


def stored_members(group: Any) -> list[tuple[str, Any]]:
    """The members of ``group`` as the store holds them (its listing, each read from its own document):
    consolidated metadata can be older (zarr-python does not update it) and name members that are gone
    or miss new ones. From the consolidated metadata where the store cannot list (HTTP)."""
    from rectizarr.groups import open_group

    if group.store.capabilities.unlisted and group.metadata.consolidated_metadata is not None:
        return list(group.members())
    return list(open_group(group.store, path=group.path, mode="r", use_consolidated=False).members())
