"""Store keys and byte ranges: what a valid key, prefix and range are (checked on every public call of a
:class:`~rectizarr.stores.Store`), and a range applied to a whole value."""

from __future__ import annotations

from typing import TypeAlias

from rectizarr._util import is_int
from rectizarr.errors import StoreError

ByteRange: TypeAlias = tuple[int, int | None]
"""``(start, length)``; ``length`` None reads to the end; ``(-n, None)`` reads the last ``n`` bytes."""

Buffer: TypeAlias = bytes | bytearray | memoryview

_MAX_DECODE_ROUNDS = 4


def _check_plain(key: str, text: str) -> None:
    if not text:
        raise StoreError(f"invalid store key {key!r}: keys must be non-empty")
    if "\\" in text or "\x00" in text:
        raise StoreError(f"invalid store key {key!r}: backslashes and NUL characters are not allowed")
    if text.startswith("/"):
        raise StoreError(f"invalid store key {key!r}: keys must be relative (no leading '/')")
    for segment in text.split("/"):
        if segment == "":
            raise StoreError(f"invalid store key {key!r}: empty path segment (a '//' or a trailing '/')")
        if segment in (".", ".."):
            raise StoreError(f"invalid store key {key!r}: '.' and '..' segments are not allowed")


def validate_key(key: str) -> str:
    """Return ``key`` unchanged if it is a valid store key, else raise :class:`StoreError`.

    A key is ``/``-separated, non-empty, relative, has no empty, ``.`` or ``..`` segment, no backslash and
    no NUL, and none of that may be smuggled in with percent-encoding (``%2e%2e``, ``%2f``, ``%5c``,
    ``%00``), however many times it is encoded."""
    if not isinstance(key, str):
        raise StoreError(f"invalid store key {key!r}: expected a str, got {type(key).__name__}")
    _check_plain(key, key)
    if not key.isascii():
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            raise StoreError(
                f"invalid store key {key!r}: not valid Unicode text (a lone surrogate)"
            ) from None
    text = key
    for _ in range(_MAX_DECODE_ROUNDS):
        if "%" not in text:
            return key
        from urllib.parse import unquote  # (slow to import: for the rare keys with a "%")

        decoded = unquote(text, errors="surrogateescape")
        if decoded == text:
            return key
        _check_plain(key, decoded)
        text = decoded
    raise StoreError(f"invalid store key {key!r}: percent-encoded {_MAX_DECODE_ROUNDS} or more times")


def validate_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is ``""`` or a valid key followed by ``/``, else raise :class:`StoreError`."""
    if prefix == "":
        return prefix
    if not isinstance(prefix, str) or not prefix.endswith("/"):
        raise StoreError(f"invalid store prefix {prefix!r}: expected '' or a key followed by '/'")
    validate_key(prefix[:-1])
    return prefix


def validate_range(key: str, byte_range: ByteRange | None) -> ByteRange | None:
    """``byte_range`` as ints if it is None, ``(start >= 0, length >= 0 or None)`` or ``(-n, None)``;
    else :class:`StoreError` naming ``key``."""
    if byte_range is None:
        return None
    try:
        start, length = byte_range
    except (TypeError, ValueError):
        raise StoreError(
            f"invalid byte range {byte_range!r} for key {key!r}: expected (start, length)"
        ) from None
    ints_ok = is_int(start) and (length is None or (is_int(length) and length >= 0))
    if not ints_ok or (start < 0 and length is not None):
        raise StoreError(
            f"invalid byte range {byte_range!r} for key {key!r}: expected (start >= 0, length >= 0 or None) "
            "or (-n, None) for the last n bytes"
        )
    return (int(start), None if length is None else int(length))


def slice_range(data: bytes, byte_range: ByteRange | None) -> bytes:
    """Apply a (validated) byte range to a whole value, with slicing semantics past the end."""
    if byte_range is None:
        return data
    start, length = byte_range
    if length is None:
        return data[start:] if start != 0 else data
    return data[start : start + length]


def resolve_range(byte_range: ByteRange, size: int) -> tuple[int, int]:
    """``(start, end)`` of ``byte_range`` in a value of ``size`` bytes: a suffix counts from the end, and
    both ends are clamped to the value (``start >= end``: nothing, as past the end)."""
    start, length = byte_range
    start = max(0, size + start) if start < 0 else min(start, size)
    return start, size if length is None else min(size, start + length)
