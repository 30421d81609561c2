"""Coalesced batch reads: the ranges of one key that lie close together read with one backend request,
and each caller's range cut back out of it (:meth:`~rectizarr.stores.Store.get_many`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from rectizarr.stores.keys import ByteRange, validate_key, validate_range

Slot: TypeAlias = tuple[int, int | None, int | None]
"""Where a caller's result is: (backend request index, offset in its value, length); None: all of it."""


def coalesce(
    requests: Sequence[tuple[str, ByteRange | None]], gap: int, most: int
) -> tuple[list[tuple[str, ByteRange | None]], list[Slot]]:
    """The backend requests that serve ``requests`` (validated here), and where each result lies in them:
    bounded ranges of one key at most ``gap`` bytes apart are merged into one request (never longer than
    ``most`` bytes); identical unbounded requests are read once."""
    backend: list[tuple[str, ByteRange | None]] = []
    slots: list[Slot] = []
    unbounded: dict[tuple[str, ByteRange | None], int] = {}
    bounded: dict[str, list[tuple[int, int, int]]] = {}  # key -> [(start, length, request index)]
    for index, (key, byte_range) in enumerate(requests):
        validate_key(key)
        checked = validate_range(key, byte_range)
        slots.append((-1, None, None))
        if checked is not None and checked[0] >= 0 and checked[1] is not None:
            bounded.setdefault(key, []).append((checked[0], checked[1], index))
            continue
        pos = unbounded.setdefault((key, checked), len(backend))
        if pos == len(backend):
            backend.append((key, checked))
        slots[index] = (pos, None, None)
    for key, ranges in bounded.items():
        _plan_key(key, ranges, gap, most, backend, slots)
    return backend, slots


def split(results: Sequence[bytes | None], slots: Sequence[Slot]) -> list[bytes | None]:
    """Each caller's result cut out of the backend's ``results`` (:func:`coalesce`'s ``slots``)."""
    out: list[bytes | None] = []
    for pos, offset, length in slots:
        data = results[pos]
        if data is None or offset is None or length is None:
            out.append(data)
        else:
            out.append(data[offset : offset + length])
    return out


def _plan_key(
    key: str,
    ranges: list[tuple[int, int, int]],
    gap: int,
    most: int,
    backend: list[tuple[str, ByteRange | None]],
    slots: list[Slot],
) -> None:
    ranges.sort()
    group: list[tuple[int, int, int]] = []
    span_start = span_end = 0

    def flush() -> None:
        pos = len(backend)
        backend.append((key, (span_start, span_end - span_start)))
        for start, length, index in group:
            slots[index] = (pos, None, None) if len(group) == 1 else (pos, start - span_start, length)

    for start, length, index in ranges:
        end = start + length
        if group and start - span_end <= gap and max(end, span_end) - span_start <= most:
            span_end = max(span_end, end)
            group.append((start, length, index))
            continue
        if group:
            flush()
        group = [(start, length, index)]
        span_start, span_end = start, end
    flush()
